-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- Selection: results sized by the data, searches, mode, scatter (implemented in C,
-- bindings/lua_select.c and bindings/lua_index.c). Each is `dle.NAME(t, ...)` and `t:NAME(...)`
-- with PyTorch's names and semantics: dims and returned indices are 1-based, indices int64.
-- The compositions built on them (unique's options, median, quantile, index_put, take,
-- take_along_dim, bucketize, count_nonzero, `t[mask]`) are in lua/dle/select.lua. These ops run
-- on the CPU (kernels/cuda/cpu_only.txt).
-- @module tensor.select

--- Returns the 1-based positions of the nonzero elements of t (NaN counts), in row-major order:
-- an int64 tensor {n, t:dim()}; with `as_tuple = true`, a list of t:dim() 1-D tensors, one per
-- dim (what dle.index_put takes).
-- @function dle.nonzero
-- @tparam dle.Tensor t
-- @param[opt] opts `{as_tuple = false}`
-- @treturn dle.Tensor int64 positions (or a list of them)
-- @usage local where = x:gt(0):nonzero()

--- Returns the elements of t where mask is true, in row-major order, as a 1-D tensor (t and the
-- bool mask broadcast together). Differentiable in t. `t[mask]` is the same for a mask of t's
-- shape.
-- @function dle.masked_select
-- @tparam dle.Tensor t
-- @tparam dle.Tensor mask bool
-- @treturn dle.Tensor 1-D
-- @usage local positives = x:masked_select(x:gt(0))

--- Returns a copy of t whose elements where mask is true are source's first elements, in order
-- (the mask broadcasts to t; source needs at least as many elements as the mask has true ones).
-- Differentiable in t and source. In place: `t:masked_scatter_(mask, source)`.
-- @function dle.masked_scatter
-- @tparam dle.Tensor t
-- @tparam dle.Tensor mask bool
-- @tparam dle.Tensor source
-- @treturn dle.Tensor

--- In-place dle.masked_scatter: writes source's elements into t where mask is true; returns t.
-- @function Tensor:masked_scatter_
-- @tparam dle.Tensor mask bool
-- @tparam dle.Tensor source
-- @treturn dle.Tensor t

--- Counts each value 0, 1, ... of the 1-D non-negative integer tensor t (values, not indices:
-- entry 1 counts the zeros), or sums weights by value; the length is max(t) + 1 or minlength,
-- whichever is larger. Counts are int64; sums have the weights' float dtype (float64 for
-- integer weights). Also `dle.bincount(t, {weights = w, minlength = n})`.
-- @function dle.bincount
-- @tparam dle.Tensor t 1-D, integers >= 0
-- @tparam[opt] dle.Tensor weights t's shape
-- @int[opt] minlength
-- @treturn dle.Tensor

--- Returns where each of values would be inserted into the last dim of sorted_sequence to keep
-- it sorted, 1-based (1 to n + 1): before equal elements, or after them with `right = true` (or
-- `side = "right"`). sorted_sequence is 1-D or has values' leading dims; values may be a number.
-- NaN sorts last.
-- @function dle.searchsorted
-- @tparam dle.Tensor sorted_sequence sorted ascending along its last dim
-- @param values tensor or number
-- @param[opt] opts `{right = false, side = "left"}`
-- @treturn dle.Tensor int64, values' shape

--- Returns the most frequent value of each line of t along dim and the 1-based position of its
-- last occurrence (PyTorch's mode); among equally frequent values the smallest. The dim is
-- dropped unless keepdim (a boolean or `{keepdim = true}`). Differentiable in t (the gradient
-- goes to the reported position).
-- @function dle.mode
-- @tparam dle.Tensor t at least 1-D, dim not empty
-- @param[opt] dim 1-based dim (default -1)
-- @param[opt] keepdim boolean, or an options table `{keepdim = false}`
-- @treturn dle.Tensor values
-- @treturn dle.Tensor int64 indices

--- Returns a copy of t with src's elements written along dim d at index (src has index's shape,
-- or is larger and read where index is; a number fills). out[i][index[i][j]] = src[i][j] for
-- d = 2; when an index repeats, the last write along d wins. `{reduce = "add"}` or
-- `{reduce = "multiply"}` combines instead (scatter_reduce's sum or prod including t).
-- Differentiable in t and src. In place: `t:scatter_(d, index, src, opts)`.
-- @function dle.scatter
-- @param d dim
-- @tparam dle.Tensor index int64, 1-based
-- @param src tensor, or a number
-- @param[opt] opts `{reduce = nil}`
-- @treturn dle.Tensor
-- @usage dle.zeros(2, 3):scatter(2, dle.tensor({{1}, {3}}, {dtype = "int64"}), 5)

--- In-place dle.scatter; returns t.
-- @function Tensor:scatter_
-- @param d dim
-- @tparam dle.Tensor index int64, 1-based
-- @param src tensor, or a number
-- @param[opt] opts `{reduce = nil}`
-- @treturn dle.Tensor t

--- Returns a copy of t with src's elements combined into it along dim d at index (PyTorch's
-- scatter_reduce): reduce is "sum", "prod", "mean", "amax" or "amin". With `include_self =
-- false` the elements of t that receive values do not take part (the others keep t's value).
-- mean divides by the number of elements combined (rounding down for integers); amax and amin
-- propagate NaN. Differentiable in t and src for every reduction (ties of amax/amin share the
-- gradient evenly). In place: `t:scatter_reduce_(...)`.
-- @function dle.scatter_reduce
-- @param d dim
-- @tparam dle.Tensor index int64, 1-based
-- @tparam dle.Tensor src
-- @string reduce "sum", "prod", "mean", "amax" or "amin"
-- @param[opt] opts `{include_self = true}`
-- @treturn dle.Tensor
-- @usage local per_class = dle.zeros(10):scatter_reduce(1, labels, scores, "amax", {include_self = false})

--- In-place dle.scatter_reduce; returns t.
-- @function Tensor:scatter_reduce_
-- @param d dim
-- @tparam dle.Tensor index int64, 1-based
-- @tparam dle.Tensor src
-- @string reduce
-- @param[opt] opts `{include_self = true}`
-- @treturn dle.Tensor t
