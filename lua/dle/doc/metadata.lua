-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- Tensor metadata: shape, strides, dtype, device (implemented in C, bindings/lua_tensor.c).
-- Dims are 1-based and -1 is the last; none of these functions copies data.
-- `#t` is the size of dim 1; `t.requires_grad`, `t.grad`, `t.grad_fn` (the name of the op that
-- made t, nil for a leaf) and `t.is_leaf` are fields.
-- @module tensor.metadata

--- Returns the sizes of t as a new Lua table (`{}` for a 0-dim tensor).
-- @function Tensor:shape
-- @treturn table sizes, one per dim
-- @usage local s = dle.zeros(2, 3):shape()   --> {2, 3}

--- Returns the size of dim d, or all sizes as a table when d is nil (as `t:shape()`).
-- d is 1-based; -1 is the last dim. A dim out of range is an error naming `size`.
-- @function Tensor:size
-- @param[opt] d dim
-- @return integer, or a table of sizes
-- @usage dle.zeros(2, 3):size(-1)   --> 3

--- Returns the stride of dim d in elements, or all strides as a table when d is nil.
-- A stride is how many elements apart two neighbours along a dim lie in storage; views
-- (`t()`, `expand`, ...) change strides, not data (`expand` gives stride 0).
-- @function Tensor:stride
-- @param[opt] d dim (1-based, -1 the last)
-- @return integer, or a table of strides
-- @usage dle.zeros(2, 3):stride()   --> {3, 1}

--- Returns the number of dims of t (0 for a scalar tensor). Also `t:ndimension()`.
-- @function Tensor:dim
-- @treturn integer

--- Returns the number of elements of t (the product of its sizes). Also `t:nelement()`.
-- @function Tensor:numel
-- @treturn integer

--- Returns where t starts in its storage, 0-based and in elements.
-- @function Tensor:storage_offset
-- @treturn integer
-- @usage dle.arange(6):narrow(1, 3, 2):storage_offset()   --> 2

--- Returns the dtype name of t ("float32", "int64", "bool", ...).
-- @function Tensor:dtype
-- @treturn string

--- Returns the device t lives on: "cpu", or "cuda:N".
-- @function Tensor:device
-- @treturn string

--- Tells whether t's elements lie in storage in row-major order without gaps.
-- A transposed or narrowed view usually is not; `t:contiguous()` makes a contiguous copy when
-- needed.
-- @function Tensor:is_contiguous
-- @treturn boolean

--- Tells whether t has a float dtype (float16, bfloat16, float32 or float64).
-- @function Tensor:is_floating_point
-- @treturn boolean

--- Returns the size in bytes of one element of t's dtype (4 for float32, 2 for float16, ...).
-- @function Tensor:element_size
-- @treturn integer

--- Tells whether two tensors share storage (one is a view of the other, or both of a third).
-- @function dle.same_storage
-- @tparam dle.Tensor a
-- @tparam dle.Tensor b
-- @treturn boolean
-- @usage local a = dle.zeros(2, 3)
-- print(dle.same_storage(a, a:t()), dle.same_storage(a, a:clone()))   --> true false

--- Tells whether v is a dle tensor.
-- Any other value (a table, a number, another library's userdata) gives false.
-- @function dle.is_tensor
-- @param v any value
-- @treturn boolean
