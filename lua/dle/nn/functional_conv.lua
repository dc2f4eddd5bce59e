--- dle.nn.functional (batch norm and 2-D pooling part): batch_norm, max_pool2d and avg_pool2d
-- (conv1d/2d/3d and the transposed convolutions: functional_convnd.lua).
-- This file returns these functions; dle.nn.functional gathers them.
-- batch_norm calls the fused native dle.batch_norm (forward and backward kernels per channel) and
-- updates the running statistics from the statistics it returns; the pools call the native
-- dle.max_pool2d and dle.avg_pool2d over {N, C, H, W} tensors.
local dle = require("dle")

local M = {}

-- The options each function knows (check.options).
local BATCH_NORM_OPTS = {"cumulative", "num_batches_tracked"}
local MAX_POOL_OPTS = {"stride", "padding", "return_indices"}
local AVG_POOL_OPTS = {"stride", "padding", "count_include_pad"}

local check = require("dle.check")
local shape_str = check.shape_str

-- The native op `name` of dle, or an error saying it is missing.
local function native(name)
  local fn = dle[name]
  if type(fn) ~= "function" then
    check.error(name .. ": the native dle." .. name .. " is not available in this build")
  end
  return fn
end

--- batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps): normalizes
-- x {N, C} or {N, C, d1, ...} per channel (dimension 2), PyTorch semantics. With training true
-- (or no running statistics) the batch mean and biased variance are used, and the running
-- statistics (when given) are updated in place, without recording:
-- running = (1 - momentum) * running + momentum * batch, with the unbiased batch variance;
-- momentum nil means a cumulative average (then opts.num_batches_tracked, the count after this
-- batch, must be given). Otherwise running_mean/running_var are used.
-- @param x tensor {N, C, ...}
-- @param running_mean tensor {C} or nil
-- @param running_var tensor {C} or nil
-- @param weight tensor {C} or nil (scale)
-- @param bias tensor {C} or nil (shift)
-- @param training boolean (default false)
-- @param momentum number (default 0.1) or nil with opts.cumulative
-- @param eps number (default 1e-5)
-- @param opts optional {cumulative = false, num_batches_tracked = n}: with cumulative true the
--   running statistics are the average over the n batches seen so far
-- @return tensor of x's shape
function M.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps, opts)
  check.tensor(x, "batch_norm", "input")
  opts = check.options(opts, "batch_norm", BATCH_NORM_OPTS)
  eps = eps or 1e-5
  if momentum == nil then momentum = 0.1 end
  if x:dim() < 2 then
    check.error("batch_norm: expected an input of at least 2 dimensions {N, C, ...}, got " .. shape_str(x))
  end
  local C = x:size(2)
  for _, p in ipairs({{"running_mean", running_mean}, {"running_var", running_var}, {"weight", weight},
                      {"bias", bias}}) do
    local t = p[2]
    if t ~= nil then
      check.tensor(t, "batch_norm", p[1])
      if t:numel() ~= C then
        check.error("batch_norm: " .. p[1] .. " has shape " .. shape_str(t) .. ", expected " .. C
          .. " elements for input " .. shape_str(x))
      end
    end
  end
  if (running_mean == nil) ~= (running_var == nil) then
    check.error("batch_norm: running_mean and running_var must be given together")
  end
  local flat = function(t) return t and t:reshape(C) end
  local use_batch = training or running_mean == nil
  local y, stats = dle.batch_norm(x, flat(weight), flat(bias), not use_batch and flat(running_mean) or nil,
    not use_batch and flat(running_var) or nil, use_batch, eps)
  if training and running_mean ~= nil then
    -- running = (1 - m) running + m batch, with the unbiased variance for the running estimate
    local m = momentum
    if opts and opts.cumulative then m = 1 / (opts.num_batches_tracked or 1) end
    require("dle.nn.functional_norm")._update_running_stats(running_mean, running_var, stats, x:numel() // C, m)
  end
  return y
end

-- Checks that x is a 4-D {N, C, H, W} tensor (a 3-D {C, H, W} one is given a batch dimension);
-- returns the 4-D tensor and whether the batch dimension was added.
local function as_batched(fname, x)
  check.tensor(x, fname, "input")
  if x:dim() == 3 then return x:unsqueeze(1), true end
  if x:dim() ~= 4 then
    check.error(fname .. ": expected a 4-D input {N, C, H, W} (or 3-D {C, H, W}), got " .. shape_str(x))
  end
  return x, false
end

-- The native pooling fname of x over k x k windows (native_opts), x {N, C, H, W} or {C, H, W} (run
-- as a batch of one); its results (values, and the indices of max_pool2d).
local function pool2d(fname, x, k, native_opts)
  local xb, added = as_batched(fname, x)
  local v, i = native(fname)(xb, k, native_opts)
  if added then v = v:squeeze(1); i = i and i:squeeze(1) end
  return v, i
end

--- max_pool2d(x, k, opts): maximum over k x k windows of x {N, C, H, W} (or {C, H, W}).
-- @param k kernel size, a number or {kh, kw}
-- @param opts optional {stride = k, padding = 0, return_indices = false}
-- @return values tensor {N, C, Hout, Wout}; with return_indices also the int64 indices
--   (those dle.max_pool2d returns)
function M.max_pool2d(x, k, opts)
  opts = check.options(opts, "max_pool2d", MAX_POOL_OPTS)
  local v, i = pool2d("max_pool2d", x, k, {stride = opts.stride, padding = opts.padding})
  if opts.return_indices then return v, i end
  return v
end

--- avg_pool2d(x, k, opts): mean over k x k windows of x {N, C, H, W} (or {C, H, W}).
-- @param k kernel size, a number or {kh, kw}
-- @param opts optional {stride = k, padding = 0, count_include_pad = true}
-- @return tensor {N, C, Hout, Wout}
function M.avg_pool2d(x, k, opts)
  opts = check.options(opts, "avg_pool2d", AVG_POOL_OPTS)
  return (pool2d("avg_pool2d", x, k,
                 {stride = opts.stride, padding = opts.padding, count_include_pad = opts.count_include_pad}))
end

return M
