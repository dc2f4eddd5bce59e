-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- Copies, fills and conversions between dtypes and devices.
-- Implemented in C (bindings/lua_tensor.c). The conversions (`to`, `float`, `long`, `cpu`, ...)
-- return t itself (the same Lua object) when there is nothing to convert, else a new tensor;
-- float to integer truncates toward zero; uint8 saturates (300 gives 255, -1 gives 0).
-- @module tensor.conversion

--- Returns a copy of t with its own storage (contiguous, same dtype and device).
-- Differentiable: the gradient flows back to t. Also `dle.clone(t)`.
-- @function Tensor:clone
-- @treturn dle.Tensor

--- Copies src into t in place and returns t.
-- src is broadcast to t's shape and converted to t's dtype and device.
-- @function Tensor:copy_
-- @tparam dle.Tensor src
-- @treturn dle.Tensor t
-- @usage dle.zeros(2, 3):copy_(dle.tensor({1, 2, 3}))   -- both rows 1 2 3

--- Fills t with one value in place and returns t.
-- The value is a number or a boolean (true is 1), converted to t's dtype.
-- @function Tensor:fill_
-- @param v number or boolean
-- @treturn dle.Tensor t

--- Fills t with zeros in place and returns t.
-- @function Tensor:zero_
-- @treturn dle.Tensor t

--- Returns the value of a one-element tensor as a Lua value.
-- A Lua float for float dtypes, an integer for integer dtypes (int64 exactly), a boolean for
-- bool. Any other number of elements is an error naming `item` and the shape. A function that
-- reads a value into Lua cannot be replayed as a graph: `dle.compile` runs it eagerly.
-- @function Tensor:item
-- @return number, integer or boolean
-- @usage local loss_value = loss:item()

--- Returns t's values as nested Lua tables (one level per dim). Also `t:tolist()`.
-- Elements convert as for `item` (a 0-dim tensor gives a plain value).
-- @function Tensor:totable
-- @return nested table
-- @usage dle.tensor({{1, 2}, {3, 4}}):totable()   --> {{1.0, 2.0}, {3.0, 4.0}}

--- Converts t to a dtype or moves it to a device, given by name.
-- `t:to("float64")`, `t:to("cuda")`, `t:to("cpu")`; a name that is neither is an error naming
-- `to`. Returns t itself when it already has that dtype or device. Differentiable.
-- @function Tensor:to
-- @param dtype_or_device string
-- @treturn dle.Tensor

--- Returns t converted to float32 (t itself when it is float32).
-- @function Tensor:float
-- @treturn dle.Tensor

--- Returns t converted to float64 (t itself when it is float64).
-- @function Tensor:double
-- @treturn dle.Tensor

--- Returns t converted to float16 (t itself when it is float16).
-- @function Tensor:half
-- @treturn dle.Tensor

--- Returns t converted to bfloat16 (t itself when it is bfloat16).
-- @function Tensor:bfloat16
-- @treturn dle.Tensor

--- Returns t converted to int64 (t itself when it is int64); floats truncate toward zero.
-- @function Tensor:long
-- @treturn dle.Tensor

--- Returns t converted to int32 (t itself when it is int32); floats truncate toward zero.
-- @function Tensor:int
-- @treturn dle.Tensor

--- Returns t converted to uint8 (t itself when it is uint8), saturating to 0..255.
-- @function Tensor:byte
-- @treturn dle.Tensor

--- Returns t converted to bool (t itself when it is bool): nonzero is true.
-- @function Tensor:bool
-- @treturn dle.Tensor

--- Returns a copy of t on the CPU (t itself when it is on the CPU already).
-- @function Tensor:cpu
-- @treturn dle.Tensor

--- Returns a copy of t on CUDA device i (default 0), or t itself when it is there already.
-- Without a usable CUDA device this is an error naming `cuda` and the reason
-- (`dle.cuda_available()` tells beforehand).
-- @function Tensor:cuda
-- @param[opt] i device index, 0-based as CUDA's (default 0)
-- @treturn dle.Tensor
