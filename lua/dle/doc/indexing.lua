-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- Joining, splitting and indexing (implemented in C, bindings/lua_index.c).
-- Dims and index values are 1-based (negative dims count from the end); index tensors are int64
-- and hold 1-based indices, and an index out of range is an error naming the function, the
-- index and the valid range. Most functions are both `dle.NAME(t, ...)` and `t:NAME(...)`;
-- the in-place forms `t:NAME_(...)` write into t and return it.
-- @module tensor.indexing

--- Concatenates a list of tensors along dim d (default 1). Also `dle.concat`.
-- The tensors must have the same shape except along d, and one dtype after promotion.
-- Differentiable.
-- @function dle.cat
-- @param list a Lua list of tensors (not empty)
-- @param[opt] d dim (default 1)
-- @treturn dle.Tensor
-- @usage local x = dle.cat({a, b}, 2)   -- side by side

--- Stacks a list of same-shaped tensors along a new dim d (default 1). Differentiable.
-- @function dle.stack
-- @param list a Lua list of tensors (not empty)
-- @param[opt] d position of the new dim (default 1)
-- @treturn dle.Tensor
-- @usage dle.stack({dle.ones(3), dle.zeros(3)}):shape()   --> {2, 3}

--- Splits t along dim d (default 1) into a Lua list of views.
-- The pieces have `size` elements each (the last may be smaller), or the sizes listed in a table
-- (which must add up to the dim's size). Also `dle.split(t, size, d)`.
-- @function Tensor:split
-- @param size number of elements per piece, or a table of sizes
-- @param[opt] d dim (default 1)
-- @treturn table a list of views
-- @usage local parts = dle.arange(5):split(2)   -- {0 1}, {2 3}, {4}

--- Splits t along dim d (default 1) into at most n views of equal size (the last may be smaller).
-- As PyTorch's chunk, fewer than n pieces may come back (6 elements in 4 chunks give 3 of 2).
-- Also `dle.chunk(t, n, d)`.
-- @function Tensor:chunk
-- @param n number of chunks (positive)
-- @param[opt] d dim (default 1)
-- @treturn table a list of views
-- @usage local q, k, v = table.unpack(qkv:chunk(3, -1))

--- Gathers values of t along dim d at the positions of an int64 index tensor.
-- out[i][j] = t[i][index[i][j]] for d = 2 (likewise for other dims and ranks); index has t's
-- number of dims and the result index's shape. Differentiable in t. Also `dle.gather(t, d, index)`.
-- @function Tensor:gather
-- @param d dim
-- @tparam dle.Tensor index int64, 1-based
-- @treturn dle.Tensor
-- @usage local picked = probs:gather(2, targets:unsqueeze(2))   -- {N, 1}

--- Returns a copy of t with src's values added at index positions along dim d (scatter_add).
-- The adjoint of gather: out = t, then out[i][index[i][j]] += src[i][j] for d = 2; repeated
-- indices add up. Differentiable in t and src. Also `dle.scatter_add(t, d, index, src)`; in
-- place: `t:scatter_add_(d, index, src)`.
-- @function Tensor:scatter_add
-- @param d dim
-- @tparam dle.Tensor index int64, 1-based, src's shape
-- @tparam dle.Tensor src values to add
-- @treturn dle.Tensor
-- @usage local idx = dle.tensor({1, 3, 1}, {dtype = "int64"})
-- dle.zeros(3):scatter_add(1, idx, dle.tensor({5, 6, 7}))   --> 12 0 6

--- In-place scatter_add: adds src into t at index positions along dim d and returns t.
-- @function Tensor:scatter_add_
-- @param d dim
-- @tparam dle.Tensor index int64, 1-based
-- @tparam dle.Tensor src
-- @treturn dle.Tensor t

--- Returns the slices of t at the given indices along dim d (a copy).
-- index is an int64 tensor or a Lua list of integers, 1-based; indices may repeat. Differentiable
-- in t. Also `dle.index_select(t, d, index)`.
-- @function Tensor:index_select
-- @param d dim
-- @param index int64 tensor or table of integers
-- @treturn dle.Tensor
-- @usage dle.tensor({{1, 2}, {3, 4}}):index_select(1, {2, 2, 1})   -- rows 2, 2, 1

--- Returns a copy of t with the slices of src added at the given indices along dim d.
-- out = t, then out:select(d, index[k]) += src:select(d, k); repeated indices add up. index is
-- an int64 tensor or a Lua list of integers (1-based). Also `dle.index_add(t, d, index, src)`; in
-- place: `t:index_add_(d, index, src)`.
-- @function Tensor:index_add
-- @param d dim
-- @param index int64 tensor or table of integers
-- @tparam dle.Tensor src
-- @treturn dle.Tensor
-- @usage dle.zeros(3):index_add(1, {1, 1}, dle.tensor({5, 6}))   --> 11 0 0

--- In-place index_add: adds src's slices into t at the given indices along d and returns t.
-- @function Tensor:index_add_
-- @param d dim
-- @param index int64 tensor or table of integers
-- @tparam dle.Tensor src
-- @treturn dle.Tensor t

--- Returns a copy of t with value where the bool mask is true (mask broadcasts to t).
-- value is a number, a boolean or a one-element tensor. Differentiable in t (no gradient where
-- filled). Also `dle.masked_fill(t, mask, value)`; in place: `t:masked_fill_(mask, value)`.
-- @function Tensor:masked_fill
-- @tparam dle.Tensor mask bool
-- @param value number, boolean or one-element tensor
-- @treturn dle.Tensor
-- @usage local scores = scores:masked_fill(causal_mask, -math.huge)

--- In-place masked_fill: writes value into t where mask is true and returns t.
-- @function Tensor:masked_fill_
-- @tparam dle.Tensor mask bool
-- @param value number, boolean or one-element tensor
-- @treturn dle.Tensor t

--- Returns the lower triangle of the matrices in t's last two dims; the rest is zero.
-- Elements on and below diagonal k are kept: k = 0 the main diagonal, k > 0 above it, k < 0
-- below. Also `dle.tril(t, k)`; in place: `t:tril_(k)`.
-- @function Tensor:tril
-- @param[opt] k diagonal (default 0)
-- @treturn dle.Tensor
-- @usage local causal = dle.ones(T, T):tril():eq(0)   -- true above the diagonal

--- In-place tril: zeroes the elements above diagonal k and returns t.
-- @function Tensor:tril_
-- @param[opt] k diagonal (default 0)
-- @treturn dle.Tensor t

--- Returns the upper triangle of the matrices in t's last two dims; the rest is zero.
-- Elements on and above diagonal k are kept (k = 1 excludes the main diagonal). Also
-- `dle.triu(t, k)`; in place: `t:triu_(k)`.
-- @function Tensor:triu
-- @param[opt] k diagonal (default 0)
-- @treturn dle.Tensor

--- In-place triu: zeroes the elements below diagonal k and returns t.
-- @function Tensor:triu_
-- @param[opt] k diagonal (default 0)
-- @treturn dle.Tensor t

--- Returns the one-hot encoding of int64 class numbers: a new last dim of n entries.
-- Classes are 1-based (1..n); n defaults to the largest class present. The result is int64.
-- Not differentiable. Also `dle.one_hot(classes, n)`.
-- @function Tensor:one_hot
-- @param[opt] n number of classes
-- @treturn dle.Tensor int64 {..., n}
-- @usage dle.tensor({1, 3}, {dtype = "int64"}):one_hot(4)   -- {{1,0,0,0}, {0,0,1,0}}
