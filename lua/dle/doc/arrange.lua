-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- Rearranging copies (implemented in C, bindings/lua_arrange.c; the ops of engine/ops/arrange.c).
-- Each is `dle.NAME(t, ...)` and `t:NAME(...)`, with PyTorch's names and 1-based dims (negative
-- from the end). The result is a new contiguous tensor of t's dtype (every dtype), made by one
-- copy that reads t through its strides; differentiable in both modes. `F.pad` (dle.nn.functional)
-- is the third op of the family.
-- @module tensor.arrange

--- Returns t with the order of its elements reversed along each of dims (torch.flip).
-- @function dle.flip
-- @tparam dle.Tensor t any shape (a 0-d tensor takes `{}`)
-- @param dims a 1-based dim or a list of distinct dims
-- @treturn dle.Tensor t's shape and dtype
-- @usage local y = x:flip({1, -1})

--- Returns t with its elements shifted by shifts places along dims, those pushed past the end
-- coming back at the start (torch.roll). Without dims, t is rolled as one flattened dim and keeps
-- its shape. Shifts may be negative or larger than the dim; a dim named twice rolls by the sum.
-- @function dle.roll
-- @tparam dle.Tensor t any shape
-- @param shifts an integer or a list of integers (one per dim)
-- @param[opt] dims a 1-based dim or a list of dims, as many as shifts
-- @treturn dle.Tensor t's shape and dtype
-- @usage local y = x:roll({1, -2}, {1, 3})
-- local z = x:roll(5)
