--- dle.onnx.ops_nn: ONNX's matrix products, convolution, pooling and normalization on dle's
-- public ops. 1-D convolutions and pools run as 2-D ones over a unit height; asymmetric or
-- auto_pad padding is applied by concatenation before a padding-free op.
local dle = require "dle"
local U = require "dle.onnx.util"

local N = {}

N.MatMul = function(_, a, b) return dle.matmul(a, b) end

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

-- Runs f(x4d, pad_hw) for an op over 1 or 2 spatial dims: 1-D inputs get a unit height, and
-- padding is symmetric when it can be (passed to f), else applied to x with `fill` beforehand.
local function spatial(ctx, x, kernel, strides, dilations, fill, f)
  local ns = x:dim() - 2
  if ns < 1 or ns > 2 then U.fail(ctx, ("%d-D %s is not supported (1-D and 2-D are)"):format(ns, ctx.node.op_type)) end
  local sizes = {}
  for i = 1, ns do sizes[i] = x:size(i + 2) end
  local pads = spatial_pads(ctx, sizes, kernel, strides, dilations)
  if ns == 1 then
    x = x:unsqueeze(3)
    kernel, strides, dilations = {1, kernel[1]}, {1, strides[1]}, {1, dilations[1]}
    pads = {0, pads[1], 0, pads[2]}
  end
  local sym = {}
  for i = 1, 2 do
    if pads[i] == pads[i + 2] then
      sym[i] = pads[i]
    else
      x = U.pad_dim(x, i + 2, pads[i], pads[i + 2], fill)
      sym[i] = 0
    end
  end
  local y = f(x, sym, kernel, strides, dilations)
  if ns == 1 then y = y:squeeze(3) end
  return y
end

N.Conv = function(ctx, x, w, b)
  local ns = x:dim() - 2
  local kernel = ctx.a.kernel_shape or {}
  for i = 1, ns do kernel[i] = kernel[i] or w:size(i + 2) end
  local strides, dil = filled(ctx.a.strides, ns, 1), filled(ctx.a.dilations, ns, 1)
  if ns == 1 then w = w:unsqueeze(3) end
  return spatial(ctx, x, kernel, strides, dil, 0, function(x4, pad, _, st, dl)
    return dle.conv2d(x4, w, b, {stride = st, padding = pad, dilation = dl, groups = ctx.a.group or 1})
  end)
end

N.MaxPool = function(ctx, x)
  local ns = x:dim() - 2
  local kernel = ctx.a.kernel_shape
  local strides, dil = filled(ctx.a.strides, ns, 1), filled(ctx.a.dilations, ns, 1)
  for i = 1, ns do
    if dil[i] ~= 1 then U.fail(ctx, "dilated max pooling is not supported") end
  end
  if (ctx.a.ceil_mode or 0) == 1 then U.fail(ctx, "ceil_mode = 1 is not supported") end
  if (ctx.a.storage_order or 0) == 1 then U.fail(ctx, "storage_order = 1 is not supported") end
  if #ctx.node.outputs > 1 and ctx.node.outputs[2] ~= "" then
    U.fail(ctx, "the Indices output is not supported")
  end
  return spatial(ctx, x, kernel, strides, dil, -math.huge, function(x4, pad, k, st)
    return (dle.max_pool2d(x4, k, {stride = st, padding = pad}))
  end)
end

N.AveragePool = function(ctx, x)
  local ns = x:dim() - 2
  local kernel = ctx.a.kernel_shape
  local strides = filled(ctx.a.strides, ns, 1)
  if (ctx.a.ceil_mode or 0) == 1 then U.fail(ctx, "ceil_mode = 1 is not supported") end
  local include = (ctx.a.count_include_pad or 0) == 1
  local pads = spatial_pads(ctx, (function()
    local s = {}
    for i = 1, ns do s[i] = x:size(i + 2) end
    return s
  end)(), kernel, strides, filled(nil, ns, 1))
  for i = 1, ns do
    if pads[i] ~= pads[i + ns] and not include then
      U.fail(ctx, "asymmetric padding with count_include_pad = 0 is not supported")
    end
  end
  return spatial(ctx, x, kernel, strides, filled(nil, ns, 1), 0, function(x4, pad, k, st)
    return dle.avg_pool2d(x4, k, {stride = st, padding = pad, count_include_pad = include})
  end)
end

local function spatial_dims(x)
  local d = {}
  for i = 3, x:dim() do d[#d + 1] = i end
  return d
end
N.GlobalAveragePool = function(_, x) return x:mean(spatial_dims(x), true) end
N.GlobalMaxPool = function(_, x) return x:amax(spatial_dims(x), true) end

N.BatchNormalization = function(ctx, x, scale, bias, mean, var)
  if (ctx.a.training_mode or 0) == 1 then
    U.fail(ctx, "training_mode = 1 is not supported")
  end
  return (dle.batch_norm(x, scale, bias, mean, var, false, ctx.a.epsilon or 1e-5))
end

N.InstanceNormalization = function(ctx, x, scale, bias)
  local d = spatial_dims(x)
  local mean = x:mean(d, true)
  local c = x - mean
  local var = (c * c):mean(d, true)
  local shape = {1, x:size(2)}
  for _ = 3, x:dim() do shape[#shape + 1] = 1 end
  return c / (var + (ctx.a.epsilon or 1e-5)):sqrt() * scale:reshape(shape) + bias:reshape(shape)
end

N.LayerNormalization = function(ctx, x, scale, bias)
  local r = x:dim()
  local d = U.dim(ctx, ctx.a.axis or -1, r)
  local norm = {}
  for i = d, r do norm[#norm + 1] = x:size(i) end
  if (ctx.a.stash_type or 1) ~= 1 then U.fail(ctx, "stash_type other than float is not supported") end
  if #ctx.node.outputs > 1 then U.fail(ctx, "the Mean and InvStdDev outputs are not supported") end
  return (dle.layer_norm(x, norm, scale:expand(norm), bias and bias:expand(norm), ctx.a.epsilon or 1e-5))
end

N.LpNormalization = function(ctx, x)
  local d = U.dim(ctx, ctx.a.axis or -1, x:dim())
  local p = ctx.a.p or 2
  if p == 1 then return x / x:abs():sum(d, true) end
  return x / (x * x):sum(d, true):sqrt()
end

return N
