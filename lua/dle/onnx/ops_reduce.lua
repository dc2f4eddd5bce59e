--- dle.onnx.ops_reduce: ONNX's reductions, arg-reductions and (log-)softmax on dle's public ops.
-- Reduction axes are an attribute until opset 18 except ReduceSum, whose axes became an optional
-- input in opset 13; no axes reduce everything unless noop_with_empty_axes says otherwise.
local dle = require("dle")
local U = require("dle.onnx.util")

local R = {}

-- The dims to reduce (1-based, ascending), or nil for "all", or false for "none" (identity).
local function reduce_dims(ctx, x, axes_input)
  local axes = ctx.a.axes
  if axes_input ~= nil then axes = U.ints(axes_input) end
  if axes == nil or #axes == 0 then
    if (ctx.a.noop_with_empty_axes or 0) == 1 then return false end
    return nil
  end
  return U.dims(ctx, axes, x:dim())
end

-- A reduction op from f(x, dims, keepdim) where dims is a list of 1-based dims.
local function reduction(f)
  return function(ctx, x, axes_input)
    local dims = reduce_dims(ctx, x, axes_input)
    if dims == false then return x end
    local keep = (ctx.a.keepdims or 1) == 1
    if dims == nil then
      dims = {}
      for d = 1, x:dim() do dims[d] = d end
    end
    if #dims == 0 then return x end  -- a 0-d tensor: nothing to reduce
    return f(x, dims, keep)
  end
end

-- dle's prod and argmax-style reductions take one dim: reduce the dims one at a time, last first.
local function one_at_a_time(method)
  return function(x, dims, keep)
    for i = #dims, 1, -1 do
      x = x[method](x, dims[i], true)
    end
    if not keep then
      for i = #dims, 1, -1 do x = x:squeeze(dims[i]) end
    end
    return x
  end
end

R.ReduceSum = reduction(function(x, d, k) return x:sum(d, k) end)
R.ReduceMean = reduction(function(x, d, k) return x:mean(d, k) end)
R.ReduceMax = reduction(function(x, d, k) return x:amax(d, k) end)
R.ReduceMin = reduction(function(x, d, k) return x:amin(d, k) end)
R.ReduceProd = reduction(one_at_a_time("prod"))
R.ReduceL1 = reduction(function(x, d, k) return x:abs():sum(d, k) end)
R.ReduceL2 = reduction(function(x, d, k) return (x * x):sum(d, k):sqrt() end)
R.ReduceSumSquare = reduction(function(x, d, k) return (x * x):sum(d, k) end)
R.ReduceLogSum = reduction(function(x, d, k) return x:sum(d, k):log() end)
R.ReduceLogSumExp = reduction(function(x, d, k)
  -- max-shifted, as logsumexp (which takes one dim) does
  local m = x:amax(d, true)
  m = dle.where(m:abs():eq(math.huge), 0, m)
  local y = (x - m):exp():sum(d, true):log() + m
  if not k then
    for i = #d, 1, -1 do y = y:squeeze(d[i]) end
  end
  return y
end)

-- ArgMax/ArgMin: 0-based int64 indices; select_last_index = 1 takes the last of equal extremes
-- (found as the first one in the flipped tensor).
local function arg_reduce(method)
  return function(ctx, x)
    local d = U.dim(ctx, ctx.a.axis or 0, x:dim())
    local keep = (ctx.a.keepdims or 1) == 1
    local i
    if (ctx.a.select_last_index or 0) == 1 then
      local n = x:size(d)
      local rev = dle.arange(n - 1, -1, -1, {dtype = "int64"})
      i = (n - 1) - (x:index_select(d, rev + 1)[method](x:index_select(d, rev + 1), d, true) - 1)
    else
      i = x[method](x, d, true) - 1
    end
    if not keep then i = i:squeeze(d) end
    return i
  end
end
R.ArgMax = arg_reduce("argmax")
R.ArgMin = arg_reduce("argmin")

-- Softmax and LogSoftmax: from opset 13 along one axis (default -1); before, over the flattened
-- trailing dims from axis (default 1) on, as a 2-D {prod(before), prod(after)} softmax.
local function softmax_like(method)
  return function(ctx, x)
    local r = x:dim()
    if ctx.opset >= 13 then
      return x[method](x, U.dim(ctx, ctx.a.axis or -1, r))
    end
    local d = U.dim(ctx, ctx.a.axis or 1, r)
    local shape = x:shape()
    local outer = 1
    for i = 1, d - 1 do outer = outer * shape[i] end
    local flat = x:reshape(outer, -1)
    return flat[method](flat, 2):reshape(shape)
  end
end
R.Softmax = softmax_like("softmax")
R.LogSoftmax = softmax_like("log_softmax")

R.Hardmax = function(ctx, x)
  local r = x:dim()
  local shape = x:shape()
  local flat, d
  if ctx.opset >= 13 then
    d = U.dim(ctx, ctx.a.axis or -1, r)
    flat = x
  else
    local a = U.dim(ctx, ctx.a.axis or 1, r)
    local outer = 1
    for i = 1, a - 1 do outer = outer * shape[i] end
    flat, d = x:reshape(outer, -1), 2
  end
  local i = flat:argmax(d, true)
  local y = dle.zeros_like(flat):scatter_add(d, i, dle.ones_like(i):to(flat:dtype()))
  return y:reshape(shape)
end

-- x reversed along dim d (ONNX's reverse attributes; dle has no flip yet).
local function reversed(x, d)
  local n = x:size(d)
  return x:index_select(d, dle.arange(n, 0, -1, {dtype = "int64"}))
end

-- CumSum(x, axis): dle.cumsum in x's own dtype (dle counts integers in int64); exclusive = 1
-- shifts the sums one place (the first is 0), reverse = 1 sums from the end.
R.CumSum = function(ctx, x, axis)
  local d = U.dim(ctx, U.ints(axis)[1], x:dim())
  local rev = (ctx.a.reverse or 0) == 1
  if rev then x = reversed(x, d) end
  local y = x:cumsum(d):to(x:dtype())
  if (ctx.a.exclusive or 0) == 1 and x:size(d) > 0 then y = U.pad_dim(y, d, 1, -1, 0) end
  if rev then y = reversed(y, d) end
  return y
end

-- TopK(x, k): dle.topk's values and its 1-based indices made 0-based; equal values keep their
-- order in x, as ONNX asks.
R.TopK = function(ctx, x, k)
  local d = U.dim(ctx, ctx.a.axis or -1, x:dim())
  local v, i = dle.topk(x, U.ints(k)[1], d, {largest = (ctx.a.largest or 1) == 1})
  return v, i - 1
end

-- Unique(x): dle.unique's sorted values (of x flattened, or slices along axis), with the first
-- position of each (0-based), each element's 0-based group and the counts; sorted = 0 orders the
-- values by first occurrence instead.
R.Unique = function(ctx, x)
  local d = ctx.a.axis and U.dim(ctx, ctx.a.axis, x:dim())
  local src = d and x or x:reshape(-1)
  local y, inverse, counts = dle.unique(src, {dim = d or 1, return_inverse = true, return_counts = true})
  local n, k = src:size(d or 1), counts:numel()
  inverse = inverse:reshape(-1)
  -- the first position of group g: the least position whose group is g
  local first = dle.full({k}, n, {dtype = "int64"})
      :scatter_reduce(1, inverse, dle.arange(0, n, 1, {dtype = "int64"}), "amin")
  if (ctx.a.sorted or 1) == 0 then
    local _, order = first:sort(1)
    -- rank[g]: the place of sorted group g in first-occurrence order
    local rank = dle.zeros(k, {dtype = "int64"}):scatter(1, order, dle.arange(1, k + 1, 1, {dtype = "int64"}))
    y, first, counts = y:index_select(d or 1, order), first:index_select(1, order), counts:index_select(1, order)
    inverse = rank:index_select(1, inverse)
  end
  return y, first, inverse - 1, counts
end

-- DFT(x, dft_length) (opset 17): x's last dim holds each value's (re) or (re, im); the transform
-- along `axis` (0-based among x's dims, default 1) by dle.fft: fft, ifft with inverse = 1, only the
-- first n // 2 + 1 frequencies with onesided = 1; dft_length crops or zero-pads the signal first.
-- The result's last dim holds (re, im).
R.DFT = function(ctx, x, dft_length)
  local r = x:dim()
  local d = U.dim(ctx, ctx.a.axis or 1, r)
  if d == r then U.fail(ctx, "axis must not be the last dim (which holds the real and imaginary parts)") end
  local parts = x:size(r)
  if parts ~= 1 and parts ~= 2 then
    U.fail(ctx, "the last dim must hold 1 (real) or 2 (real, imaginary) values, got " .. parts)
  end
  local inverse, onesided = (ctx.a.inverse or 0) == 1, (ctx.a.onesided or 0) == 1
  if inverse and onesided then U.fail(ctx, "onesided = 1 with inverse = 1 is not a valid DFT") end
  local n = dft_length and U.ints(dft_length)[1] or x:size(d)
  local z = parts == 1 and x:squeeze(r) or dle.view_as_complex(x:contiguous())
  local y = (inverse and dle.fft.ifft or dle.fft.fft)(z, n, d)
  if onesided then y = y:narrow(d, 1, n // 2 + 1) end
  return dle.view_as_real(y:contiguous())
end

return R
