-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- Scans: running sums, products, log-sum-exps and extremes along one dim (implemented in C,
-- bindings/lua_scan.c). Each is `dle.NAME(t, d, ...)` and `t:NAME(d, ...)`, with `d` one 1-based
-- dim (-1 the last; a 0-dim tensor takes 1 or -1) and the result shaped like t. Element k of the
-- result combines the elements 1..k along d. An unknown option is an error naming it.
-- @module tensor.scans

--- Returns the cumulative sum of t along dim d (torch.cumsum).
-- Integer and bool inputs sum in int64; `dtype` converts the input first. Differentiable (the
-- gradient is the cumulative sum of the output gradient taken from the other end).
-- @function dle.cumsum
-- @tparam dle.Tensor t
-- @int d the dim
-- @tparam[opt] table opts `{dtype = "float64"}`
-- @treturn dle.Tensor
-- @usage dle.tensor({1, 2, 3}):cumsum(1)            --> 1 3 6
-- dle.tensor({{1, 2}, {3, 4}}):cumsum(2)        --> {{1, 3}, {3, 7}}

--- Returns the cumulative product of t along dim d (torch.cumprod).
-- Integer and bool inputs multiply in int64 (wrapping on overflow); `dtype` converts the input
-- first. Differentiable, zeros included (PyTorch's formula: past the first zero of a line only
-- that zero's element has a gradient).
-- @function dle.cumprod
-- @tparam dle.Tensor t
-- @int d the dim
-- @tparam[opt] table opts `{dtype = "float64"}`
-- @treturn dle.Tensor
-- @usage dle.tensor({1, 2, 3, 4}):cumprod(1)        --> 1 2 6 24

--- Returns log(cumsum(exp(t))) along dim d without overflow (torch.logcumsumexp).
-- Float tensors only (as in PyTorch); -inf elements add nothing. Differentiable.
-- @function dle.logcumsumexp
-- @tparam dle.Tensor t
-- @int d the dim
-- @treturn dle.Tensor
-- @usage dle.tensor({0, 0, 0}):logcumsumexp(1)     --> 0 0.6931 1.0986

--- Returns the running maximum of t along dim d and its 1-based int64 indices (torch.cummax).
-- On ties the index is the last position holding the maximum; a NaN, once met, stays the maximum
-- and each later NaN takes its index (as PyTorch does). Any dtype. Differentiable in the values:
-- each gradient goes to the element its index names.
-- @function dle.cummax
-- @tparam dle.Tensor t
-- @int d the dim
-- @treturn dle.Tensor values
-- @treturn dle.Tensor indices (int64, 1-based)
-- @usage local v, i = dle.tensor({1, 3, 2, 3}):cummax(1)  --> v = 1 3 3 3, i = 1 2 2 4

--- Returns the running minimum of t along dim d and its 1-based int64 indices (torch.cummin).
-- Ties and NaN as for `cummax`. Differentiable in the values.
-- @function dle.cummin
-- @tparam dle.Tensor t
-- @int d the dim
-- @treturn dle.Tensor values
-- @treturn dle.Tensor indices (int64, 1-based)
-- @usage local v, i = dle.tensor({3, 1, 2, 1}):cummin(1)  --> v = 3 1 1 1, i = 1 2 2 4
