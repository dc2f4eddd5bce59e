-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- Reductions and softmax (implemented in C, bindings/lua_reduce.c and lua_softmax.c).
-- Each is `dle.NAME(t, ...)` and `t:NAME(...)`. `d` is one 1-based dim (-1 the last), a
-- table of dims, or nil for all dims (a 0-dim result). After it come `keepdim` (a boolean: keep
-- the reduced dims with size 1) and/or an options table `{keepdim, dtype, correction, unbiased}`
-- (`dtype` converts the input first, `correction`/`unbiased` only matter for var and std); an
-- unknown option is an error naming it. Indices (max, min, argmax, argmin) are int64 and 1-based.
-- @module tensor.reductions

--- Returns the sum of t's elements over dim(s) d (all when nil).
-- Integer and bool inputs sum in int64 (a mask's sum counts its true elements); floats keep
-- their dtype unless `dtype` is given. Differentiable.
-- @function dle.sum
-- @tparam dle.Tensor t
-- @param[opt] d dim, table of dims, or nil (all)
-- @param[opt] keepdim boolean, and/or an options table `{keepdim, dtype}`
-- @treturn dle.Tensor
-- @usage local row_sums = x:sum(2)
-- local total = x:sum()
-- local col = x:sum(1, true)          -- {1, C}

--- Returns the mean of t's elements over dim(s) d (all when nil).
-- Integer inputs give float32. Differentiable.
-- @function dle.mean
-- @tparam dle.Tensor t
-- @param[opt] d dim, table of dims, or nil (all)
-- @param[opt] keepdim boolean, and/or an options table `{keepdim, dtype}`
-- @treturn dle.Tensor

--- Returns the product of t's elements over dim(s) d (all when nil). Differentiable.
-- @function dle.prod
-- @tparam dle.Tensor t
-- @param[opt] d dim, table of dims, or nil (all)
-- @param[opt] keepdim boolean, and/or an options table `{keepdim, dtype}`
-- @treturn dle.Tensor

--- Returns the variance of t's elements over dim(s) d (all when nil), unbiased by default.
-- The divisor is n - correction: correction 1 (the default, Bessel's) or `{unbiased = false}`
-- / `{correction = 0}` for the population variance. Integer inputs give float32. Differentiable.
-- @function dle.var
-- @tparam dle.Tensor t
-- @param[opt] d dim, table of dims, or nil (all); may be replaced by the options table
-- @param[opt] keepdim boolean, and/or an options table `{keepdim, correction, unbiased, dtype}`
-- @treturn dle.Tensor
-- @usage dle.tensor({1, 2, 3, 4}):var()                  --> 1.6667
-- dle.tensor({1, 2, 3, 4}):var({unbiased = false})   --> 1.25

--- Returns the standard deviation over dim(s) d (all when nil): the square root of `var`.
-- Same options as `var` (unbiased by default). Differentiable.
-- @function dle.std
-- @tparam dle.Tensor t
-- @param[opt] d dim, table of dims, or nil (all); may be replaced by the options table
-- @param[opt] keepdim boolean, and/or an options table `{keepdim, correction, unbiased, dtype}`
-- @treturn dle.Tensor

--- Returns log(sum(exp(t))) over dim(s) d (all when nil), computed without overflow.
-- Integer inputs give float32. Differentiable.
-- @function dle.logsumexp
-- @tparam dle.Tensor t
-- @param[opt] d dim, table of dims, or nil (all)
-- @param[opt] keepdim boolean, and/or an options table `{keepdim, dtype}`
-- @treturn dle.Tensor

--- Returns the largest value over dim(s) d (all when nil), without indices.
-- Unlike `max`, takes several dims. Differentiable: the gradient is split evenly among the
-- maximal elements.
-- @function dle.amax
-- @tparam dle.Tensor t
-- @param[opt] d dim, table of dims, or nil (all)
-- @param[opt] keepdim boolean, and/or an options table `{keepdim, dtype}`
-- @treturn dle.Tensor

--- Returns the smallest value over dim(s) d (all when nil), without indices.
-- @function dle.amin
-- @tparam dle.Tensor t
-- @param[opt] d dim, table of dims, or nil (all)
-- @param[opt] keepdim boolean, and/or an options table `{keepdim, dtype}`
-- @treturn dle.Tensor

--- Returns the maximum of t: over everything, or values and 1-based indices along dim d.
-- `t:max()` gives a 0-dim tensor (an error for an empty t); `t:max(d, keepdim)` gives two
-- tensors, the values and their int64 indices along d (1-based). `t:max(other)` with a tensor,
-- or a fractional number, is the elementwise `dle.maximum` (an integer number is read as a dim).
-- Differentiable in the values.
-- @function dle.max
-- @tparam dle.Tensor t
-- @param[opt] d dim (one), or a tensor / fractional number for the elementwise form
-- @param[opt] keepdim boolean
-- @return values, and with d the indices (int64, 1-based)
-- @usage local v, i = dle.tensor({{1, 5}, {7, 2}}):max(2)   --> v = {5, 7}, i = {2, 1}

--- Returns the minimum of t: over everything, or values and 1-based indices along dim d.
-- The mirror of `dle.max`: `t:min()`, `t:min(d, keepdim)` -> values, int64 indices,
-- `t:min(other)` elementwise (`dle.minimum`).
-- @function dle.min
-- @tparam dle.Tensor t
-- @param[opt] d dim (one), or a tensor / fractional number for the elementwise form
-- @param[opt] keepdim boolean
-- @return values, and with d the indices (int64, 1-based)

--- Returns the 1-based int64 index of the largest value along dim d.
-- With no d, the 1-based index into t flattened (row-major). Not differentiable.
-- @function dle.argmax
-- @tparam dle.Tensor t
-- @param[opt] d dim
-- @param[opt] keepdim boolean
-- @treturn dle.Tensor int64
-- @usage local predicted = logits:argmax(2)   -- class numbers 1..C, as the targets

--- Returns the 1-based int64 index of the smallest value along dim d (flat index without d).
-- @function dle.argmin
-- @tparam dle.Tensor t
-- @param[opt] d dim
-- @param[opt] keepdim boolean
-- @treturn dle.Tensor int64

--- Returns softmax(t) along dim d (default -1, the last): exp(t) / sum(exp(t)) along d.
-- Computed stably (the maximum is subtracted first); integer inputs give float32.
-- Differentiable. `dle.nn.functional.softmax` and `dle.nn.Softmax` call it.
-- @function dle.softmax
-- @tparam dle.Tensor t
-- @param[opt] d dim (default -1)
-- @treturn dle.Tensor of t's shape

--- Returns log(softmax(t)) along dim d (default -1), computed stably as t - logsumexp(t).
-- Integer inputs give float32. Differentiable. Feed it to `dle.nll_loss`, or use
-- `dle.cross_entropy` on the logits directly.
-- @function dle.log_softmax
-- @tparam dle.Tensor t
-- @param[opt] d dim (default -1)
-- @treturn dle.Tensor of t's shape

--- Tells whether every element is nonzero over dim(s) d (all when nil), as a bool tensor.
-- An empty slice gives true. Use `:item()` for a Lua boolean.
-- @function dle.all
-- @tparam dle.Tensor t
-- @param[opt] d dim, table of dims, or nil (all)
-- @param[opt] keepdim boolean
-- @treturn dle.Tensor bool
-- @usage if x:isclose(y):all():item() then print("close") end

--- Tells whether some element is nonzero over dim(s) d (all when nil), as a bool tensor.
-- An empty slice gives false.
-- @function dle.any
-- @tparam dle.Tensor t
-- @param[opt] d dim, table of dims, or nil (all)
-- @param[opt] keepdim boolean
-- @treturn dle.Tensor bool

--- Returns the vector p-norm of t over dim(s) d (all when nil): (sum |t|^p)^(1/p).
-- p defaults to 2 ("fro" is 2 too); p = math.huge gives max |t|, -math.huge min |t|, 0 the
-- number of nonzeros. Matrix norms ("nuc") are not supported. Integer inputs give float32.
-- Differentiable for p > 0.
-- @function dle.norm
-- @tparam dle.Tensor t
-- @param[opt] p number or "fro" (default 2)
-- @param[opt] d dim, table of dims, or nil (all)
-- @param[opt] keepdim boolean
-- @treturn dle.Tensor
-- @usage dle.tensor({3, 4}):norm()      --> 5
-- dle.tensor({{1, 2}, {3, 4}}):norm(2, 2)   -- per row
