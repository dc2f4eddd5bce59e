--- Selection and indexing built from dle's ops (the C ops are engine/ops/select.c and index.c):
-- unique with options and along a dim, count_nonzero, bucketize, take, take_along_dim,
-- index_put, median, nanmedian, quantile, nanquantile, and boolean-mask and index-tensor keys
-- for `t[key]` and `t[key] = v`. PyTorch's semantics with 1-based dims and indices. Each is a
-- composition of ops whose gradients are the ops' own (sort, gather, scatter, index_add...).

local check = require("dle.check")
local core = require("dle.core")

local M = {}

function M.install(dle)
  local Tensor = dle.Tensor
  local I64 = {dtype = "int64"}

  local function shape_str(t) return check.shape_str(t) end

  -- the 1-based dim d of t wrapped into 1..t:dim(), or an error naming fn
  local function wrap_dim(fn, t, d)
    d = check.integer(d, fn, "dim")
    local n = t:dim()
    if n == 0 then
      check.error(string.format("%s: expected a tensor with at least 1 dim, got a 0-dim tensor (shape %s)",
        fn, shape_str(t)))
    end
    if d == 0 or d > n or d < -n then
      check.error(string.format("%s: dim %d out of range for a tensor of shape %s (valid: 1..%d, or %d..-1)",
        fn, d, shape_str(t), n, -n))
    end
    return d < 0 and d + n + 1 or d
  end

  -- idx (integers, 1-based, negative from the end) checked against a dim of `size` and wrapped
  -- to 1..size, as int64
  local function wrap_index(fn, idx, size, what)
    if idx:dtype() ~= "int64" and idx:dtype() ~= "int32" and idx:dtype() ~= "uint8" then
      check.error(string.format("%s: %s must be an integer tensor, got %s (shape %s)", fn, what, idx:dtype(),
        shape_str(idx)))
    end
    idx = idx:long()
    if idx:numel() == 0 then return idx end
    local lo, hi = idx:amin():item(), idx:amax():item()
    local bad
    if lo < -size then bad = lo elseif hi > size then bad = hi elseif idx:eq(0):any():item() then bad = 0 end
    if bad then
      check.error(string.format("%s: %s %d is out of range for a dim of size %d (valid: 1..%d or -%d..-1; %s shape %s)",
        fn, what, bad, size, size, size, what, shape_str(idx)))
    end
    if lo < 0 then idx = dle.where(idx:lt(0), idx + (size + 1), idx) end
    return idx
  end

  -- ---------------------------------------------------------------- unique

  -- unique along dim d: slices compared whole, sorted lexicographically (a stable sort by each
  -- element of the slice, last first) unless consecutive
  local function unique_dim(x, d, consecutive)
    local n = x:size(d)
    local moved = x:transpose(1, d)
    local rest = moved:shape()
    local rows = moved:reshape(n, -1)
    local order = dle.arange(1, n + 1, I64)
    if not consecutive then
      for j = rows:size(2), 1, -1 do
        local _, perm = rows:select(2, j):index_select(1, order):sort(1, {stable = true})
        order = order:index_select(1, perm)
      end
    end
    local sorted = rows:index_select(1, order)
    local new = dle.ones(n, {dtype = "bool"})
    if n > 1 then
      new:narrow(1, 2, n - 1):copy_(sorted:narrow(1, 2, n - 1):ne(sorted:narrow(1, 1, n - 1)):any(2))
    end
    local group = new:long():cumsum(1)
    local starts = new:nonzero():reshape(-1)
    local k = starts:numel()
    rest[1] = k
    local values = sorted:index_select(1, starts):reshape(rest):transpose(1, d)
    local inverse = dle.zeros(n, I64):scatter(1, order, group)
    local ends = dle.cat({starts:narrow(1, 2, k - 1), dle.tensor({n + 1}, I64)})
    return values, inverse, ends - starts
  end

  local function unique_impl(fn, x, opts, consecutive, known)
    check.tensor(x, fn, "input")
    opts = check.options(opts, fn, known)
    local values, inverse, counts
    if opts.dim ~= nil and x:size(wrap_dim(fn, x, opts.dim)) > 0 then
      values, inverse, counts = check.call(fn, unique_dim, x, wrap_dim(fn, x, opts.dim), consecutive)
    elseif opts.dim ~= nil then
      values, inverse, counts = x, dle.zeros(0, I64), dle.zeros(0, I64)
    else
      values, inverse, counts = core._unique(x, consecutive)
    end
    local out = {values}
    if opts.return_inverse then out[#out + 1] = inverse end
    if opts.return_counts then out[#out + 1] = counts end
    return table.unpack(out)
  end

  --- Returns the distinct elements of t, sorted (PyTorch's torch.unique).
  -- Options: `sorted` (accepted; the values are always sorted), `return_inverse` (also return,
  -- in t's shape, the 1-based index of each element's value), `return_counts` (also return how
  -- often each value occurs), `dim` (distinct slices along that dim instead of elements, sorted
  -- lexicographically). Each NaN is distinct.
  -- @tparam dle.Tensor t
  -- @param[opt] opts `{sorted = true, return_inverse = false, return_counts = false, dim = nil}`
  -- @treturn dle.Tensor values (1-D, or t's shape with dim resized)
  -- @treturn[opt] dle.Tensor int64 inverse indices
  -- @treturn[opt] dle.Tensor int64 counts
  -- @usage local v, inv, counts = x:unique{return_inverse = true, return_counts = true}
  function dle.unique(t, opts)
    return unique_impl("unique", t, opts, false, {"sorted", "return_inverse", "return_counts", "dim"})
  end

  --- Returns t with each run of equal consecutive elements (or slices along dim) reduced to one
  -- (PyTorch's torch.unique_consecutive): options `return_inverse`, `return_counts`, `dim` as for
  -- dle.unique.
  -- @tparam dle.Tensor t
  -- @param[opt] opts `{return_inverse = false, return_counts = false, dim = nil}`
  -- @treturn dle.Tensor values, then the inverse indices and counts when asked for
  function dle.unique_consecutive(t, opts)
    return unique_impl("unique_consecutive", t, opts, true, {"return_inverse", "return_counts", "dim"})
  end

  -- ---------------------------------------------------------------- counting and searching

  --- Counts the nonzero elements of t (NaN counts), over all of it or along dim (a dim or a list
  -- of dims); int64.
  -- @tparam dle.Tensor t
  -- @param[opt] dim 1-based dim or list of dims
  -- @treturn dle.Tensor int64
  function dle.count_nonzero(t, dim)
    check.tensor(t, "count_nonzero", "input")
    local nz = t:ne(0)
    if dim == nil then return nz:sum() end
    return check.call("count_nonzero", nz.sum, nz, dim)
  end

  --- Returns the 1-based index of the bucket each element of t falls in, boundaries a sorted 1-D
  -- tensor (PyTorch's torch.bucketize): i such that boundaries[i-1] < x <= boundaries[i], or
  -- boundaries[i-1] <= x < boundaries[i] with `right = true`; from 1 to #boundaries + 1.
  -- @tparam dle.Tensor t values (or a number)
  -- @tparam dle.Tensor boundaries 1-D, sorted ascending
  -- @param[opt] opts `{right = false}`
  -- @treturn dle.Tensor int64, t's shape
  function dle.bucketize(t, boundaries, opts)
    opts = check.options(opts, "bucketize", {"right"})
    check.tensor(boundaries, "bucketize", "boundaries")
    if boundaries:dim() ~= 1 then
      check.error("bucketize: boundaries must be 1-D, got shape " .. shape_str(boundaries))
    end
    return check.call("bucketize", dle.searchsorted, boundaries, t, {right = opts.right or false})
  end

  -- ---------------------------------------------------------------- take, take_along_dim

  local function take(fn, t, index)
    check.tensor(t, fn, "input")
    check.tensor(index, fn, "index")
    local idx = wrap_index(fn, index, t:numel(), "index")
    return t:reshape(-1):index_select(1, idx:reshape(-1)):reshape(index:shape())
  end

  --- Returns the elements of t at the 1-based positions index of its row-major flattening, in
  -- index's shape (PyTorch's torch.take; negative positions count from the end).
  -- @tparam dle.Tensor t
  -- @tparam dle.Tensor index integer positions
  -- @treturn dle.Tensor
  function dle.take(t, index) return take("take", t, index) end

  --- Picks values of t along dim at indices (PyTorch's torch.take_along_dim): gather with t and
  -- indices broadcast against each other outside dim. Without dim, both are flattened.
  -- @tparam dle.Tensor t
  -- @tparam dle.Tensor indices int64, 1-based (as argsort and topk return)
  -- @param[opt] dim 1-based dim
  -- @treturn dle.Tensor
  function dle.take_along_dim(t, indices, dim)
    check.tensor(t, "take_along_dim", "input")
    check.tensor(indices, "take_along_dim", "indices")
    if dim == nil then
      return take("take_along_dim", t:reshape(-1), indices:reshape(-1))
    end
    local d = wrap_dim("take_along_dim", t, dim)
    if indices:dim() ~= t:dim() then
      check.error(string.format(
        "take_along_dim: input of shape %s and indices of shape %s must have the same number of dims",
        shape_str(t), shape_str(indices)))
    end
    local ts, is = t:shape(), indices:shape()
    for j = 1, #ts do
      if j ~= d then
        if ts[j] ~= is[j] and ts[j] ~= 1 and is[j] ~= 1 then
          check.error(string.format(
            "take_along_dim: input of shape %s and indices of shape %s do not broadcast in dim %d",
            shape_str(t), shape_str(indices), j))
        end
        local s = ts[j] == 1 and is[j] or ts[j]
        ts[j], is[j] = s, s
      end
    end
    local idx = wrap_index("take_along_dim", indices, t:size(d), "index")
    return t:expand(ts):gather(d, idx:expand(is))
  end

  -- ---------------------------------------------------------------- index_put

  -- The broadcast shape of a list of tensors, or an error naming fn.
  local function broadcast_all(fn, ts)
    local out, names = {}, {}
    for i, t in ipairs(ts) do names[i] = shape_str(t) end
    for _, t in ipairs(ts) do
      local s = t:shape()
      while #out < #s do table.insert(out, 1, 1) end
      for j = 1, #s do
        local k = #out - #s + j -- right-aligned
        if out[k] == 1 then
          out[k] = s[j]
        elseif s[j] ~= 1 and s[j] ~= out[k] then
          check.error(string.format("%s: index tensors of shapes %s do not broadcast", fn, table.concat(names, ", ")))
        end
      end
    end
    return out
  end

  -- x's rows (the first #indices dims flattened) that the indices name, as 1-D int64 positions,
  -- with the shape they broadcast to
  local function linear_rows(fn, x, indices)
    local list = {}
    for i, t in ipairs(indices) do
      if not core.is_tensor(t) then
        check.error(string.format("%s: indices[%d] must be a tensor, got %s", fn, i, check.typename(t)))
      end
      if t:dtype() == "bool" then
        for _, col in ipairs(dle.nonzero(t, {as_tuple = true})) do list[#list + 1] = col end
      else
        list[#list + 1] = t
      end
    end
    if #list == 0 or #list > x:dim() then
      check.error(string.format("%s: %d index tensors for a tensor of shape %s (expected 1..%d)", fn, #list,
        shape_str(x), x:dim()))
    end
    local shape = broadcast_all(fn, list)
    local lin, stride = dle.zeros(shape, I64), 1
    for j = #list, 1, -1 do
      local idx = wrap_index(fn, list[j], x:size(j), "index")
      lin = lin + (idx - 1) * stride
      stride = stride * x:size(j)
    end
    return lin:reshape(-1) + 1, shape, #list, stride
  end

  local function index_put_impl(fn, x, indices, values, opts, inplace)
    check.tensor(x, fn, "self")
    check.table(indices, fn, "indices")
    opts = check.options(opts, fn, {"accumulate"})
    local rows, shape, k, nrows = linear_rows(fn, x, indices)
    local rest, width = {}, 1
    for j = k + 1, x:dim() do rest[#rest + 1] = x:size(j); width = width * x:size(j) end
    local target = {table.unpack(shape)}
    for _, s in ipairs(rest) do target[#target + 1] = s end
    local n = rows:numel()
    local vals
    if core.is_tensor(values) then
      vals = check.call(fn, function() return values:to(x:dtype()):expand(target):reshape(n, width) end)
    else
      check.number(type(values) == "boolean" and (values and 1 or 0) or values, fn, "values")
      vals = dle.full({n, width}, type(values) == "boolean" and (values and 1 or 0) or values, {dtype = x:dtype()})
    end
    local v = core.is_tensor(values) and values or nil
    local grad = (dle.is_grad_enabled() and (x.requires_grad or (v and v.requires_grad))) or
      core._tangent(x) ~= nil or (v and core._tangent(v) ~= nil) -- forward mode too
    local direct = inplace and not grad and x:is_contiguous()
    -- recorded in place: computed on a copy, then copied in (a view of x would forbid the copy_)
    local flat = direct and x:view(nrows, width) or (inplace and x:clone() or x):reshape(nrows, width)
    local put
    if opts.accumulate then
      put = direct and flat:index_add_(1, rows, vals) or flat:index_add(1, rows, vals)
    else
      local idx = rows:reshape(n, 1):expand(n, width)
      put = direct and flat:scatter_(1, idx, vals) or flat:scatter(1, idx, vals)
    end
    if direct then return x end
    local r = put:reshape(x:shape())
    if inplace then return x:copy_(r) end
    return r
  end

  --- Returns a copy of t with values put at the positions indices name (PyTorch's
  -- torch.index_put): indices is a list of index tensors, one per leading dim of t (int64,
  -- 1-based, negative from the end; a bool mask stands for the positions of its true elements),
  -- broadcast together; values (a tensor or number) broadcast to the selected shape. With
  -- `accumulate = true` values are added (repeated positions add up), else written (the last
  -- write wins for repeated positions).
  -- @tparam dle.Tensor t
  -- @tparam table indices list of tensors
  -- @param values tensor or number
  -- @param[opt] opts `{accumulate = false}`
  -- @treturn dle.Tensor
  -- @usage local y = x:index_put({dle.tensor({1, 3}, {dtype = "int64"})}, 0)
  function dle.index_put(t, indices, values, opts)
    return index_put_impl("index_put", t, indices, values, opts, false)
  end

  --- In-place dle.index_put: writes into t and returns it (recorded by autograd like copy_).
  -- @function Tensor:index_put_
  function Tensor.index_put_(t, indices, values, opts)
    return index_put_impl("index_put_", t, indices, values, opts, true)
  end

  -- ---------------------------------------------------------------- median, quantile

  -- v gathered along d at the 0-based positions pos (an int64 tensor broadcastable along d)
  local function pick(v, d, pos) return v:gather(d, pos + 1) end

  local function median_impl(fn, x, dim, keepdim, skip_nan)
    check.tensor(x, fn, "input")
    local whole = dim == nil
    if whole then
      x, dim, keepdim = x:reshape(-1), 1, false
    else
      dim = wrap_dim(fn, x, dim)
      if keepdim ~= nil then check.boolean(keepdim, fn, "keepdim") end
    end
    local n = x:size(dim)
    if n == 0 then
      check.error(string.format("%s: dim %d of shape %s is empty: there is no median", fn, dim, shape_str(x)))
    end
    local has_nan = x:is_floating_point() and x:isnan():any():item()
    if not has_nan then -- the lower median is the ((n + 1) // 2)-th smallest
      local v, i = x:kthvalue((n + 1) // 2, dim, keepdim or false)
      if whole then return v end
      return v, i
    end
    -- NaNs sort last: median takes the first NaN of a line that has one; nanmedian the lower
    -- median of the numbers (the first NaN when there are none)
    local s, order = x:sort(dim)
    local numbers = n - x:isnan():sum(dim, true)
    local pos
    if skip_nan then
      pos = ((numbers - 1) // 2):clamp(0, n - 1)
    else
      pos = dle.where(numbers:lt(n), numbers, dle.full(numbers:shape(), (n - 1) // 2, I64))
    end
    local v, i = pick(s, dim, pos), pick(order, dim, pos)
    if not keepdim then v, i = v:squeeze(dim), i:squeeze(dim) end
    if whole then return v end
    return v, i
  end

  --- Returns the median of t (the lower of the two middle values for an even count, as PyTorch):
  -- of all elements (a 0-dim tensor), or along dim with the 1-based position it came from. A line
  -- holding NaN has median NaN (at its first NaN). Differentiable: the gradient goes to the
  -- picked element.
  -- @tparam dle.Tensor t
  -- @param[opt] dim 1-based dim
  -- @param[opt] keepdim boolean (default false)
  -- @treturn dle.Tensor values
  -- @treturn[opt] dle.Tensor int64 indices (with dim only)
  function dle.median(t, dim, keepdim) return median_impl("median", t, dim, keepdim, false) end

  --- dle.median ignoring NaN: the lower median of each line's numbers (NaN for a line of NaNs).
  -- @tparam dle.Tensor t
  -- @param[opt] dim 1-based dim
  -- @param[opt] keepdim boolean (default false)
  -- @treturn dle.Tensor values
  -- @treturn[opt] dle.Tensor int64 indices (with dim only)
  function dle.nanmedian(t, dim, keepdim) return median_impl("nanmedian", t, dim, keepdim, true) end

  local interpolations = {linear = true, lower = true, higher = true, midpoint = true, nearest = true}

  local function quantile_impl(fn, x, q, dim, keepdim, opts, skip_nan)
    check.tensor(x, fn, "input")
    if not x:is_floating_point() then
      check.error(string.format("%s: input must be a float tensor, got %s (shape %s)", fn, x:dtype(), shape_str(x)))
    end
    opts = check.options(opts, fn, {"interpolation"})
    local how = opts.interpolation or "linear"
    if not interpolations[how] then
      check.error(string.format("%s: interpolation must be linear, lower, higher, midpoint or nearest, got %s",
        fn, tostring(how)))
    end
    local scalar_q = not core.is_tensor(q)
    if scalar_q then
      check.number(q, fn, "q")
      q = dle.tensor({q}, {dtype = x:dtype()})
    elseif q:dim() > 1 then
      check.error(string.format("%s: q must be a number or a 0-dim or 1-D tensor, got shape %s", fn, shape_str(q)))
    else
      scalar_q = q:dim() == 0
      q = q:reshape(-1):to(x:dtype())
    end
    if q:numel() > 0 and (q:amin():item() < 0 or q:amax():item() > 1) then
      check.error(string.format("%s: q must lie in [0, 1], got values from %g to %g", fn, q:amin():item(),
        q:amax():item()))
    end
    local whole, ndim = dim == nil, x:dim()
    if whole then
      x, dim = x:reshape(-1), 1
    else
      dim = wrap_dim(fn, x, dim)
    end
    if keepdim ~= nil then check.boolean(keepdim, fn, "keepdim") end
    local n = x:size(dim)
    if n == 0 then
      check.error(string.format("%s: dim %d of shape %s is empty: there is no quantile", fn, dim, shape_str(x)))
    end
    local s = x:sort(dim)
    local m = q:numel()
    -- q laid along dim, 1 elsewhere
    local qshape = {}
    for j = 1, x:dim() do qshape[j] = j == dim and m or 1 end
    local qv = q:reshape(qshape)
    local nan = x:isnan():sum(dim, true)
    local count = skip_nan and (n - nan) or dle.full(nan:shape(), n, I64)
    local rank = (qv * (count - 1):to(x:dtype())):clamp(0, n - 1)
    local lo, hi = rank:floor(), rank:ceil()
    local function at(r) return pick(s, dim, r:long():expand(rank:shape()) ) end
    local v
    if how == "lower" then v = at(lo)
    elseif how == "higher" then v = at(hi)
    elseif how == "nearest" then v = at(rank:round())
    else
      local a, b = at(lo), at(hi)
      local w = how == "midpoint" and 0.5 or (rank - lo)
      v = a + (b - a) * w
    end
    if not skip_nan then v = dle.where(nan:gt(0), dle.full({}, 0 / 0, {dtype = x:dtype()}), v) end
    -- PyTorch's layout: q's dim first, then the reduced shape (dim kept as 1 with keepdim)
    local perm = {dim}
    for j = 1, v:dim() do if j ~= dim then perm[#perm + 1] = j end end
    v = v:permute(perm)
    if keepdim and not whole then v = v:unsqueeze(dim + 1) end
    if whole and keepdim then -- every dim of t kept as size 1
      v = v:reshape(m, table.unpack((function() local o = {} for j = 1, ndim do o[j] = 1 end return o end)()))
    end
    if scalar_q then v = v:select(1, 1) end
    return v
  end

  --- Returns the q-th quantiles of t (PyTorch's torch.quantile): q a number or a 1-D tensor of
  -- values in [0, 1]; over all elements or along dim (keepdim keeps it as size 1); with a tensor q
  -- the result gains a first dim of q's size. `interpolation` between the two nearest ranks:
  -- linear (default), lower, higher, midpoint or nearest. A line holding NaN gives NaN.
  -- Differentiable through the picked elements. Float inputs only.
  -- @tparam dle.Tensor t
  -- @param q number or tensor
  -- @param[opt] dim 1-based dim
  -- @param[opt] keepdim boolean
  -- @param[opt] opts `{interpolation = "linear"}`
  -- @treturn dle.Tensor
  function dle.quantile(t, q, dim, keepdim, opts)
    return quantile_impl("quantile", t, q, dim, keepdim, opts, false)
  end

  --- dle.quantile ignoring NaN: each line's quantiles of its numbers (NaN for a line of NaNs).
  -- @tparam dle.Tensor t
  -- @param q number or tensor
  -- @param[opt] dim 1-based dim
  -- @param[opt] keepdim boolean
  -- @param[opt] opts `{interpolation = "linear"}`
  -- @treturn dle.Tensor
  function dle.nanquantile(t, q, dim, keepdim, opts)
    return quantile_impl("nanquantile", t, q, dim, keepdim, opts, true)
  end

  for _, name in ipairs({"unique", "unique_consecutive", "count_nonzero", "take", "take_along_dim",
                         "index_put", "median", "nanmedian", "quantile", "nanquantile"}) do
    Tensor[name] = dle[name]
  end

  -- ---------------------------------------------------------------- t[key] with a tensor key

  -- A bool mask must have t's shape or that of its leading dims.
  local function check_mask(fn, t, mask)
    local ms, ts = mask:shape(), t:shape()
    local ok = #ms <= #ts
    for j = 1, #ms do ok = ok and ms[j] == ts[j] end
    if not ok then
      check.error(string.format("%s: mask of shape %s does not match the leading dims of tensor shape %s",
        fn, shape_str(mask), shape_str(t)))
    end
  end

  --- t[key] for a tensor key (lua_core.c's __index calls it): a bool mask selects elements (t's
  -- shape: a 1-D result, as masked_select) or rows (t's leading dims); an integer tensor picks
  -- along dim 1 (1-based), the result in key's shape followed by t's other dims.
  function Tensor._getitem(t, key)
    check.tensor(t, "index", "the indexed value")
    check.tensor(key, "index", "the key")
    local dt = key:dtype()
    if dt == "bool" then
      check_mask("index", t, key)
      if key:dim() == t:dim() then return dle.masked_select(t, key) end
      local rows, k = key:reshape(-1):nonzero():reshape(-1), key:dim()
      local rest, n = {rows:numel()}, key:numel()
      for j = k + 1, t:dim() do rest[#rest + 1] = t:size(j) end
      return t:reshape(n, -1):index_select(1, rows):reshape(rest)
    end
    if t:dim() == 0 then check.error("index: cannot index a 0-dim tensor") end
    local idx = wrap_index("index", key, t:size(1), "index")
    local shape = key:shape()
    for j = 2, t:dim() do shape[#shape + 1] = t:size(j) end
    return t:index_select(1, idx:reshape(-1)):reshape(shape)
  end

  --- t[key] = v for a tensor key (lua_core.c's __newindex calls it): a bool mask (over t's shape
  -- or its leading dims) or an integer tensor along dim 1; v is a number (masked_fill_) or a
  -- tensor broadcast to the selected shape (index_put_). In place; autograd records it.
  function Tensor._setitem(t, key, v)
    check.tensor(t, "index", "the indexed value")
    check.tensor(key, "index", "the key")
    if key:dtype() == "bool" and not core.is_tensor(v) then
      if type(v) ~= "number" and type(v) ~= "boolean" then
        check.error("index: cannot assign a " .. check.typename(v) .. " to tensor elements")
      end
      check_mask("index", t, key)
      local m = key
      while m:dim() < t:dim() do m = m:unsqueeze(-1) end
      return check.call("index", t.masked_fill_, t, m, v)
    end
    return index_put_impl("index", t, {key}, v, nil, true)
  end
end

return M
