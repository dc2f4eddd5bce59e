--- dle.onnx.ops_nn: ONNX's matrix products, convolution, pooling and normalization on dle's
-- public ops. 1-D convolutions and pools run as 2-D ones over a unit height; asymmetric or
-- auto_pad padding is applied by concatenation before a padding-free op.
local dle = require("dle")
local U = require("dle.onnx.util")

local N = {}

N.MatMul = function(_, a, b) return dle.matmul(a, b) end
N.Det = function(_, x) return dle.linalg.det(x) end

N.Gemm = function(ctx, a, b, c)
  if (ctx.a.transA or 0) == 1 then a = a:t() end
  if (ctx.a.transB or 0) == 1 then b = b:t() end
  local y = dle.matmul(a, b)
  local alpha, beta = ctx.a.alpha or 1.0, ctx.a.beta or 1.0
  if alpha ~= 1 then y = y * alpha end
  if c then y = y + (beta ~= 1 and c * beta or c) end
  return y
end

-- The spatial padding {before..., after...} of a conv or pool node over spatial sizes `in_sizes`
-- (auto_pad SAME_UPPER/SAME_LOWER computed as ONNX defines them).
local function spatial_pads(ctx, in_sizes, kernel, strides, dilations)
  local n = #in_sizes
  local auto = ctx.a.auto_pad or "NOTSET"
  local pads = {}
  if auto == "SAME_UPPER" or auto == "SAME_LOWER" then
    for i = 1, n do
      local out = math.ceil(in_sizes[i] / strides[i])
      local total = math.max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - in_sizes[i])
      local small = total // 2
      pads[i], pads[i + n] = small, total - small
      if auto == "SAME_LOWER" then pads[i], pads[i + n] = total - small, small end
    end
  elseif auto == "VALID" then
    for i = 1, 2 * n do pads[i] = 0 end
  else
    for i = 1, 2 * n do pads[i] = ctx.a.pads and ctx.a.pads[i] or 0 end
  end
  return pads
end

local function filled(v, n, default)
  local out = {}
  for i = 1, n do out[i] = v and v[i] or default end
  return out
end

-- Whether a 1-D or 2-D window op can run as dle's 2-D op with its own (symmetric, at most half
-- the kernel) padding.
local function native_ok(ns, kernel, pads, dilations)
  if ns < 1 or ns > 2 then return false end
  for i = 1, ns do
    if pads[i] ~= pads[i + ns] or pads[i] > kernel[i] // 2 or dilations[i] ~= 1 then return false end
  end
  return true
end

-- Runs f(x4d, pad_hw, kernel_hw, strides_hw, dilations_hw) for a 1-D or 2-D op: 1-D inputs get
-- a unit height.
local function as_2d(x, kernel, strides, dilations, pads, f)
  local ns = x:dim() - 2
  if ns == 1 then
    local y = f(x:unsqueeze(3), {0, pads[1]}, {1, kernel[1]}, {1, strides[1]}, {1, dilations[1]})
    return y:squeeze(3)
  end
  return f(x, {pads[1], pads[2]}, kernel, strides, dilations)
end

-- Index of the kernel offsets: calls f(offsets) for every combination (offsets 0-based).
local function each_offset(kernel, f, offs, i)
  offs, i = offs or {}, i or 1
  if i > #kernel then return f(offs) end
  for o = 0, kernel[i] - 1 do
    offs[i] = o
    each_offset(kernel, f, offs, i + 1)
  end
end

-- Max or average pooling over any number of spatial dims with dilation, ceil mode and any padding:
-- the maximum (or sum) over the kernel offsets of strided selections of the padded input, exact
-- as the windows' own maximum (the sums add the same terms in another order).
local function window_pool(x, kind, kernel, strides, dilations, pads, ceil, include)
  local ns = x:dim() - 2
  local out, extra = {}, {}
  for i = 1, ns do
    local n, span = x:size(i + 2) + pads[i] + pads[i + ns], (kernel[i] - 1) * dilations[i] + 1
    local o = (n - span) / strides[i]
    o = (ceil and math.ceil(o) or math.floor(o)) + 1
    -- the last window must start inside the input or its leading padding (PyTorch's rule)
    if ceil and (o - 1) * strides[i] >= x:size(i + 2) + pads[i] then o = o - 1 end
    out[i] = o
    extra[i] = math.max(0, (o - 1) * strides[i] + span - n)
  end
  local fill = kind == "max" and -math.huge or 0
  local xp = x
  local cshape = {}
  for i = 1, ns do cshape[i] = x:size(i + 2) end
  local count = kind == "avg" and dle.ones(cshape, {dtype = x:dtype()}) or nil
  for i = 1, ns do
    xp = U.pad_dim(xp, i + 2, pads[i], pads[i + ns] + extra[i], fill)
    if count then
      count = U.pad_dim(count, i, pads[i], pads[i + ns], include and 1 or 0)
      count = U.pad_dim(count, i, 0, extra[i], 0)
    end
  end
  local acc, cacc
  each_offset(kernel, function(offs)
    local v, c = xp, count
    for i = 1, ns do
      local idx = dle.arange(0, out[i], 1, {dtype = "int64"}) * strides[i] + (offs[i] * dilations[i] + 1)
      v = v:index_select(i + 2, idx)
      if c then c = c:index_select(i, idx) end
    end
    if kind == "max" then
      acc = acc and dle.maximum(acc, v) or v
    else
      acc = acc and acc + v or v
      cacc = cacc and cacc + c or c
    end
  end)
  if kind == "avg" then return acc / cacc end
  return acc
end

-- The kernel, strides, dilations and pads of a pool node over x.
local function pool_params(ctx, x)
  local ns = x:dim() - 2
  local kernel = ctx.a.kernel_shape
  local strides, dil = filled(ctx.a.strides, ns, 1), filled(ctx.a.dilations, ns, 1)
  local sizes = {}
  for i = 1, ns do sizes[i] = x:size(i + 2) end
  return kernel, strides, dil, spatial_pads(ctx, sizes, kernel, strides, dil), (ctx.a.ceil_mode or 0) == 1
end

N.Conv = function(ctx, x, w, b)
  local ns = x:dim() - 2
  local kernel = {}
  for i = 1, ns do kernel[i] = w:size(i + 2) end
  local strides, dil = filled(ctx.a.strides, ns, 1), filled(ctx.a.dilations, ns, 1)
  local sizes = {}
  for i = 1, ns do sizes[i] = x:size(i + 2) end
  local pads = spatial_pads(ctx, sizes, kernel, strides, dil)
  local groups = ctx.a.group or 1
  if ns < 1 or ns > 3 then U.fail(ctx, ("%d-D Conv is not supported (1-D to 3-D are)"):format(ns)) end
  -- padding dle's conv2d cannot take (asymmetric) is applied to x first
  for i = 1, ns do
    if pads[i] ~= pads[i + ns] then
      x = U.pad_dim(x, i + 2, pads[i], pads[i + ns], 0)
      pads[i], pads[i + ns] = 0, 0
    end
  end
  if ns == 3 then
    return require("dle.nn.functional").conv3d(x, w, b, {stride = strides,
      padding = {pads[1], pads[2], pads[3]}, dilation = dil, groups = groups})
  end
  if ns == 1 then w = w:unsqueeze(3) end
  return as_2d(x, kernel, strides, dil, pads, function(x4, pad, _, st, dl)
    return dle.conv2d(x4, w, b, {stride = st, padding = pad, dilation = dl, groups = groups})
  end)
end

-- ConvTranspose: dle.nn.functional's conv_transpose1d/2d/3d (ONNX's weight layout {Cin, Cout/groups,
-- k...} is PyTorch's) computed unpadded at full size, then grown by output_padding and cropped by
-- the pads (or to output_shape), the bias added last.
N.ConvTranspose = function(ctx, x, w, b)
  local ns = x:dim() - 2
  if ns < 1 or ns > 3 then U.fail(ctx, ("%d-D ConvTranspose is not supported (1-D to 3-D are)"):format(ns)) end
  local strides, dil = filled(ctx.a.strides, ns, 1), filled(ctx.a.dilations, ns, 1)
  local outpad = filled(ctx.a.output_padding, ns, 0)
  local given = ctx.a.pads or filled(nil, 2 * ns, 0)
  local out_shape = ctx.a.output_shape
  local auto = ctx.a.auto_pad or "NOTSET"
  local pads = {}
  for i = 1, ns do
    local full = strides[i] * (x:size(i + 2) - 1) + (w:size(i + 2) - 1) * dil[i] + 1 + outpad[i]
    if out_shape or auto == "SAME_UPPER" or auto == "SAME_LOWER" then
      local total = full - (out_shape and out_shape[i] or x:size(i + 2) * strides[i])
      local half = total >= 0 and total // 2 or -(-total // 2)   -- C's division, as ONNX's
      if auto == "SAME_UPPER" or (out_shape and auto ~= "SAME_LOWER") then
        pads[i], pads[i + ns] = half, total - half
      else
        pads[i], pads[i + ns] = total - half, half
      end
    else
      pads[i], pads[i + ns] = given[i], given[i + ns]
    end
  end
  local y = require("dle.nn.functional")["conv_transpose" .. ns .. "d"](x, w, nil,
    {stride = strides, dilation = dil, groups = ctx.a.group or 1})
  local bshape = {1, -1}
  for i = 1, ns do
    y = U.pad_dim(y, i + 2, 0, outpad[i], 0)
    y = U.pad_dim(y, i + 2, -pads[i], -pads[i + ns], 0)
    bshape[i + 2] = 1
  end
  if b then y = y + b:reshape(bshape) end
  return y
end

-- MaxUnpool: the values added at MaxPool's flat indices into zeros of the unpooled shape (the
-- indices address that shape; a larger output_shape pads it at the end).
N.MaxUnpool = function(ctx, x, idx, out_shape)
  local shape, ns = {x:size(1), x:size(2)}, x:dim() - 2
  for i = 1, ns do
    local s, p = ctx.a.strides and ctx.a.strides[i] or 1, ctx.a.pads or {}
    shape[i + 2] = (x:size(i + 2) - 1) * s + ctx.a.kernel_shape[i] - (p[i] or 0) - (p[i + ns] or 0)
  end
  local n = 1
  for _, v in ipairs(shape) do n = n * v end
  local y = dle.zeros({n}, {dtype = x:dtype()}):index_add(1, idx:reshape(-1) + 1, x:reshape(-1)):reshape(shape)
  if out_shape then
    local want = U.ints(out_shape)
    for i = 3, #want do y = U.pad_dim(y, i, 0, want[i] - shape[i], 0) end
  end
  return y
end

-- MaxPool's Indices output from dle's (1-based positions in each H x W plane): offsets into the
-- whole tensor, row-major (storage_order 0) or with each plane column-major (1).
local function onnx_indices(ctx, x, idx)
  local n, c, h, w = x:size(1), x:size(2), x:size(3), x:size(4)
  local pos = idx - 1
  if (ctx.a.storage_order or 0) == 1 then
    local row = (pos:double() / w):floor():long()
    pos = (pos - row * w) * h + row
  end
  local plane = dle.arange(0, n * c, 1, {dtype = "int64"}):reshape(n, c, 1, 1) * (h * w)
  return pos + plane
end

N.MaxPool = function(ctx, x)
  local kernel, strides, dil, pads, ceil = pool_params(ctx, x)
  local want_indices = #ctx.node.outputs > 1 and ctx.node.outputs[2] ~= ""
  if want_indices then
    if x:dim() ~= 4 or ceil or not native_ok(2, kernel, pads, dil) then
      U.fail(ctx, "the Indices output is supported for 2-D pooling with symmetric padding only")
    end
    local y, idx = dle.max_pool2d(x, kernel, {stride = strides, padding = {pads[1], pads[2]}})
    return y, onnx_indices(ctx, x, idx)
  end
  if not ceil and native_ok(x:dim() - 2, kernel, pads, dil) then
    return as_2d(x, kernel, strides, dil, pads, function(x4, pad, k, st)
      return (dle.max_pool2d(x4, k, {stride = st, padding = pad}))
    end)
  end
  return window_pool(x, "max", kernel, strides, dil, pads, ceil)
end

N.AveragePool = function(ctx, x)
  local kernel, strides, dil, pads, ceil = pool_params(ctx, x)
  local include = (ctx.a.count_include_pad or 0) == 1
  if not ceil and native_ok(x:dim() - 2, kernel, pads, dil) then
    return as_2d(x, kernel, strides, dil, pads, function(x4, pad, k, st)
      return dle.avg_pool2d(x4, k, {stride = st, padding = pad, count_include_pad = include})
    end)
  end
  return window_pool(x, "avg", kernel, strides, dil, pads, ceil, include)
end

local function spatial_dims(x)
  local d = {}
  for i = 3, x:dim() do d[#d + 1] = i end
  return d
end
N.GlobalAveragePool = function(_, x) return x:mean(spatial_dims(x), true) end
N.GlobalMaxPool = function(_, x) return x:amax(spatial_dims(x), true) end

-- Inference uses the running statistics; training_mode = 1 (opset 14+) the batch's, and also
-- returns the updated running statistics (momentum-weighted with the batch's biased variance,
-- as ONNX defines them).
N.BatchNormalization = function(ctx, x, scale, bias, mean, var)
  local eps = ctx.a.epsilon or 1e-5
  if (ctx.a.training_mode or 0) == 0 then
    return (dle.batch_norm(x, scale, bias, mean, var, false, eps))
  end
  local y, stats = dle.batch_norm(x, scale, bias, nil, nil, true, eps)
  local m = ctx.a.momentum or 0.9
  local bm, bv = stats:select(2, 1):to(x:dtype()), stats:select(2, 2):to(x:dtype())
  return y, mean * m + bm * (1 - m), var * m + bv * (1 - m)
end

-- the fused group_norm op with one group per channel
N.InstanceNormalization = function(ctx, x, scale, bias)
  return (dle.group_norm(x, x:size(2), scale, bias, ctx.a.epsilon or 1e-5))
end

-- Also returns the Mean and InvStdDev outputs: x's shape with the normalized dims set to 1.
N.LayerNormalization = function(ctx, x, scale, bias)
  local r = x:dim()
  local d = U.dim(ctx, ctx.a.axis or -1, r)
  local norm, stat_shape = {}, {}
  for i = 1, r do
    if i >= d then norm[#norm + 1] = x:size(i); stat_shape[i] = 1 else stat_shape[i] = x:size(i) end
  end
  if (ctx.a.stash_type or 1) ~= 1 then U.fail(ctx, "stash_type other than float is not supported") end
  local eps = ctx.a.epsilon or 1e-5
  local y, stats = dle.layer_norm(x, norm, scale:expand(norm), bias and bias:expand(norm), eps)
  if #ctx.node.outputs == 1 then return y end
  local mean = stats:select(2, 1):reshape(stat_shape)
  local inv = (stats:select(2, 2) + eps):rsqrt():reshape(stat_shape)
  return y, mean, inv
end

N.LpNormalization = function(ctx, x)
  local d = U.dim(ctx, ctx.a.axis or -1, x:dim())
  local p = ctx.a.p or 2
  if p == 1 then return x / x:abs():sum(d, true) end
  return x / (x * x):sum(d, true):sqrt()
end

-- NegativeLogLikelihoodLoss over x {N, C, d...} and int64 targets {N, d...} (0-based classes):
-- the picked -x with optional class weights and ignore_index; "mean" divides by the weights'
-- sum over the counted targets, as ONNX defines it.
local function nll(ctx, x, target, weight)
  local t = target:to("int64")
  local counted = ctx.a.ignore_index and t:ne(ctx.a.ignore_index) or nil
  local safe = counted and dle.where(counted, t, 0) or t
  local picked = x:gather(2, safe:unsqueeze(2) + 1):squeeze(2)
  local w
  if weight then w = weight:index_select(1, safe:reshape(-1) + 1):reshape(safe:shape()) end
  if counted then
    local c = counted:to(x:dtype())
    w = w and w * c or c
  end
  local loss = w and -picked * w or -picked
  local reduction = ctx.a.reduction or "mean"
  if reduction == "none" then return loss end
  if reduction == "sum" then return loss:sum() end
  if w then return loss:sum() / w:sum() end
  return loss:mean()
end

N.NegativeLogLikelihoodLoss = function(ctx, x, target, weight)
  return nll(ctx, x, target, weight)
end

N.SoftmaxCrossEntropyLoss = function(ctx, x, target, weight)
  local logp = x:log_softmax(2)
  return nll(ctx, logp, target, weight), logp
end

-- LRN: x / (bias + alpha / size * (sum of squares over a window of `size` channels))^beta, the
-- window sum as a sum of shifted slices of the zero-padded squares.
N.LRN = function(ctx, x)
  local size = ctx.a.size
  local alpha, beta, bias = ctx.a.alpha or 1e-4, ctx.a.beta or 0.75, ctx.a.bias or 1.0
  local c = x:size(2)
  local before = (size - 1) // 2
  local sq = U.pad_dim(x * x, 2, before, size - 1 - before, 0)
  local sum
  for o = 0, size - 1 do
    local part = sq:narrow(2, o + 1, c)
    sum = sum and sum + part or part
  end
  return x / (sum * (alpha / size) + bias) ^ beta
end

N.MeanVarianceNormalization = function(ctx, x)
  local axes = ctx.a.axes or {0, 2, 3}
  local d = U.dims(ctx, axes, x:dim())
  local c = x - x:mean(d, true)
  return c / ((c * c):mean(d, true)):sqrt()
end

return N
