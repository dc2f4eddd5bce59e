-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- The engine's runtime: memory, threads, time and devices.
-- Implemented in C: memory in bindings/lua_memory.c, the rest in bindings/lua_core.c.
-- Memory counts are bytes of CPU tensor data held by dle's allocator (engine/alloc.c); a tensor's
-- memory is freed when Lua collects it (or at once, for a to-be-closed local variable).
-- @module runtime

--- Returns the bytes held by live tensors now.
-- @function dle.memory_allocated
-- @treturn integer bytes

--- Returns the most bytes live tensors held at once since start (or the last reset).
-- @function dle.memory_peak
-- @treturn integer bytes

--- Returns memory counts as a table `{allocated =, peak =, cached =}` (bytes).
-- `allocated` and `peak` as `dle.memory_allocated` and `dle.memory_peak`; `cached` is freed
-- blocks the allocator keeps for reuse.
-- @function dle.memory_stats
-- @treturn table

--- Restarts the peak count from the bytes live now.
-- @function dle.reset_peak_memory_stats

--- Returns the allocator's cached free blocks to the system.
-- @function dle.empty_cache

--- Sets the most bytes of freed blocks the allocator keeps cached for reuse (1 GiB by default).
-- @function dle.set_cache_limit
-- @param bytes non-negative integer

--- Caps the bytes live CPU tensors may hold (as `DLE_MAX_MEMORY` does at load): an allocation
-- that would go over it returns the cache to the system, then is an error naming the op, the
-- shape and the limit. `nil` or 0 removes the cap.
-- @function dle.set_memory_limit
-- @tparam[opt] number|string bytes a number of bytes, or a string with a suffix ("512M", "2G", "4GiB")

--- The memory cap in bytes, or nil when there is none.
-- @function dle.get_memory_limit
-- @treturn ?int

--- Returns a monotonic wall clock in seconds, with sub-microsecond resolution.
-- Only differences are meaningful (the origin is arbitrary).
-- @function dle.time
-- @treturn number seconds
-- @usage local t0 = dle.time(); step(); print(dle.time() - t0, "s")

--- Sets the number of CPU threads the kernels and BLAS use; n < 1 means all cores.
-- @function dle.set_num_threads
-- @param n integer

--- Returns the number of CPU threads the kernels and BLAS use.
-- @function dle.get_num_threads
-- @treturn integer

--- Tells whether the CUDA backend can be used; when not, also returns the reason.
-- @function dle.cuda_available
-- @return true, or false and a message (no library, no device, driver too old, ...)
-- @usage local ok, why = dle.cuda_available()

--- Returns the engine's op table: one entry per op, in op order.
-- Each entry is `{name, inputs, outputs, kind, differentiable, has_vjp, has_jvp}`: inputs -1
-- means any number; kind is one of create, random, view, copy, unary, binary, compare, where,
-- reduce, softmax, matmul, index, conv, pool, norm, nn, loss, attention, sort (the DLE_KIND lines
-- of engine/ops/families.def; each op's kind in engine/ops.def). For tools and tests.
-- @function dle.op_table
-- @treturn table a list of op descriptions
