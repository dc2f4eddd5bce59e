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

--- Returns the elements t[..., i, i + offset] of dims dim1 and dim2 as the last dim of the result,
-- the other dims kept in order: a view of t (writes go through), as torch.diagonal. An offset past
-- the matrix gives an empty last dim.
-- @function dle.diagonal
-- @tparam dle.Tensor t at least 2-D
-- @param[opt] offset 0 the main diagonal, > 0 above it, < 0 below it (default 0)
-- @param[opt] dim1 1-based dim of the rows (default 1)
-- @param[opt] dim2 1-based dim of the columns (default 2)
-- @treturn dle.Tensor a view of t
-- @usage local d = m:diagonal()
-- local sup = x:diagonal(1, -2, -1)

--- Returns a tensor of one dim more than t, zero but for t's last dim laid on the diagonal at
-- offset of the new dims dim1, dim2 (each of size t's last size + |offset|), as torch.diag_embed.
-- Differentiable (a composition of ops: a product with an identity, pad and permute).
-- @function dle.diag_embed
-- @tparam dle.Tensor t at least 1-D
-- @param[opt] offset the diagonal (default 0)
-- @param[opt] dim1 1-based dim of the result (default -2)
-- @param[opt] dim2 1-based dim of the result (default -1)
-- @treturn dle.Tensor
-- @usage local m = dle.diag_embed(dle.tensor({1, 2, 3}))  -- 3x3, 1 2 3 on the diagonal
