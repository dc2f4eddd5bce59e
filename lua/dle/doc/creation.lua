-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- Tensor creation (implemented in C, bindings/lua_tensor.c).
-- Sizes are given as varargs or as one table (`dle.zeros(2, 3)` == `dle.zeros({2, 3})`); an
-- options table may follow: `{dtype = "float32", device = "cpu", requires_grad = false}`.
-- New tensors are float32 unless `dtype` says otherwise (Lua integers included); `device` moves
-- the new tensor there ("cpu", "cuda", "cuda:N"); `requires_grad = true` needs a float dtype.
-- Random tensors (`dle.rand`, ...) are in tensor.random.
-- @module tensor.creation

--- Makes a tensor from a nested Lua table, a number, a boolean or another tensor.
-- A nested table gives a tensor of its shape (every sub-table of one depth must have the same
-- length, else an error names the ragged element); numbers give float32, booleans bool, unless
-- `opts.dtype` says otherwise; int32/int64 keep Lua integers exact. A number or boolean gives a
-- 0-dim tensor. A tensor argument is copied (and converted when `opts.dtype` is given).
-- @function dle.tensor
-- @param data nested table, number, boolean or tensor
-- @param[opt] opts `{dtype, device, requires_grad}`
-- @treturn dle.Tensor a new tensor (never shares storage with `data`)
-- @usage local a = dle.tensor({{1, 2, 3}, {4, 5, 6}})          -- float32 2x3
-- local i = dle.tensor({1, 2}, {dtype = "int64"})

--- Returns a tensor filled with zeros.
-- Sizes as varargs or a table (`dle.zeros(2, 3)` == `dle.zeros({2, 3})`); no sizes gives a
-- 0-dim tensor. Negative or non-integer sizes are errors naming `zeros`.
-- @function dle.zeros
-- @param ... sizes, then an optional options table `{dtype, device, requires_grad}`
-- @treturn dle.Tensor
-- @usage local z = dle.zeros(2, 3, {dtype = "int64"})

--- Returns a tensor filled with ones.
-- Sizes and options as for `dle.zeros`.
-- @function dle.ones
-- @param ... sizes, then an optional options table `{dtype, device, requires_grad}`
-- @treturn dle.Tensor
-- @usage local w = dle.ones({4, 4}, {dtype = "float64"})

--- Returns a tensor whose elements are not initialized.
-- Sizes and options as for `dle.zeros`. The values are whatever the allocator hands out: write
-- them (`fill_`, `copy_`, an op into it) before reading.
-- @function dle.empty
-- @param ... sizes, then an optional options table `{dtype, device, requires_grad}`
-- @treturn dle.Tensor

--- Returns a tensor filled with one value.
-- `sizes` is a table, or one number for a 1-D tensor (`dle.full(3, 7)`). A boolean value gives
-- a bool tensor unless `opts.dtype` is given; a number gives float32 by default.
-- @function dle.full
-- @param sizes table of sizes, or a number
-- @param value number or boolean
-- @param[opt] opts `{dtype, device, requires_grad}`
-- @treturn dle.Tensor
-- @usage local m = dle.full({2, 2}, -1)

--- Returns a 1-D tensor of the values from start up to stop (excluded) in steps of step.
-- Half-open, as Python's range: `dle.arange(n)` is 0..n-1 (the arguments are values, not
-- indices). float32 unless `opts.dtype` says otherwise; a negative step counts down
-- (`dle.arange(3, 0, -1)` is 3, 2, 1).
-- @function dle.arange
-- @param start first value (the only number given: the stop, starting at 0)
-- @param[opt] stop bound, not included
-- @param[opt] step default 1
-- @param[opt] opts `{dtype, device, requires_grad}`
-- @treturn dle.Tensor 1-D
-- @usage local r = dle.arange(0, 6):view(2, 3)

--- Returns n evenly spaced values from a to b, both included.
-- @function dle.linspace
-- @param a first value
-- @param b last value
-- @param n number of values (an integer)
-- @param[opt] opts `{dtype, device, requires_grad}`
-- @treturn dle.Tensor 1-D of n values
-- @usage dle.linspace(0, 1, 5)   --> 0, 0.25, 0.5, 0.75, 1

--- Returns an identity matrix: n x n, or n x m with ones on the main diagonal.
-- @function dle.eye
-- @param n rows
-- @param[opt] m columns (default n)
-- @param[opt] opts `{dtype, device, requires_grad}`
-- @treturn dle.Tensor 2-D
-- @usage local i = dle.eye(3, {dtype = "int64"})

--- Returns zeros of t's shape, dtype and device (each unless opts says otherwise).
-- @function dle.zeros_like
-- @tparam dle.Tensor t
-- @param[opt] opts `{dtype, device, requires_grad}`
-- @treturn dle.Tensor

--- Returns ones of t's shape, dtype and device (each unless opts says otherwise).
-- @function dle.ones_like
-- @tparam dle.Tensor t
-- @param[opt] opts `{dtype, device, requires_grad}`
-- @treturn dle.Tensor

--- Returns an uninitialized tensor of t's shape, dtype and device (unless opts says otherwise).
-- @function dle.empty_like
-- @tparam dle.Tensor t
-- @param[opt] opts `{dtype, device, requires_grad}`
-- @treturn dle.Tensor

--- Returns a tensor of t's shape, dtype and device filled with value.
-- The value is converted to the dtype (`dle.full_like(int64_tensor, 2.5)` holds 2).
-- @function dle.full_like
-- @tparam dle.Tensor t
-- @param value number
-- @param[opt] opts `{dtype, device, requires_grad}`
-- @treturn dle.Tensor
