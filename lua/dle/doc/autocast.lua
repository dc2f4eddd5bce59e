-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- Mixed precision: the autocast mode.
-- Implemented in C (bindings/lua_autograd.c, engine/autocast.c); dle.amp (GradScaler) is
-- written in Lua.
-- @module amp.autocast

--- Runs fn(...) in mixed precision (bfloat16 or float16 compute) and returns its results.
-- While fn runs, matmul, conv2d and attention take their float inputs in dtype (accumulating in
-- float32), while softmax, the norms, the losses, sums and exp/log-like ops take theirs in
-- float32 (the lists: engine/autocast.h); float64 is left alone, and so are in-place and `out =`
-- forms. Casts are recorded, so float32 parameters get float32 gradients, and backward runs in
-- the dtypes forward used. A parameter's cast is made once and reused until the outermost region
-- ends (unless `cache_enabled = false`). Regions nest (the inner dtype wins); the previous mode
-- comes back when fn returns or raises (the error goes on). Per thread, like no_grad.
-- fn may be a function or a callable table (a Module).
-- @function dle.autocast
-- @param dtype "bfloat16" or "float16" (or bf16, half, fp16), or `{dtype =, cache_enabled =}`
-- @param fn function or callable table
-- @param ... fn's arguments
-- @return fn's results
-- @usage local loss = dle.autocast("bfloat16", function() return F.cross_entropy(net(x), y) end)

--- Tells whether autocast is on in this thread (inside dle.autocast).
-- @function dle.is_autocast_enabled
-- @treturn boolean

--- Returns the dtype autocast uses: "bfloat16" or "float16".
-- As PyTorch's torch.get_autocast_dtype, also when autocast is off (then the one it would use:
-- bfloat16 until a region sets another).
-- @function dle.get_autocast_dtype
-- @treturn string
