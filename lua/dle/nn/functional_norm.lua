--- dle.nn.functional (normalization part): group_norm, instance_norm and local_response_norm,
-- PyTorch's signatures. This file returns them; dle.nn.functional gathers them. group_norm and
-- instance_norm run the fused native dle.group_norm (statistics per sample and group, C kernels
-- for both directions); instance_norm with running statistics in eval mode is dle.batch_norm's
-- eval path; local_response_norm is composed of dle ops.
local dle = require("dle")
local F = require("dle.nn.functional")
local check = require("dle.check")
local shape_str = check.shape_str

local M = {}

-- Checks that each named tensor of list (pairs {name, t}; t may be nil) has C elements.
local function per_channel(fn, x, C, list)
  for _, p in ipairs(list) do
    if p[2] ~= nil then
      check.tensor(p[2], fn, p[1])
      if p[2]:numel() ~= C then
        check.error(fn .. ": " .. p[1] .. " has shape " .. shape_str(p[2]) .. ", expected " .. C
          .. " elements (one per channel of input " .. shape_str(x) .. ")")
      end
    end
  end
end

local function flat(t, C) return t and t:reshape(C) end

--- _update_running_stats(running_mean, running_var, stats, n, momentum): the running statistics'
-- in-place update from stats {C, 2} (mean, biased variance of n values each), without recording:
-- running = (1 - momentum) running + momentum batch, with the unbiased variance (batch_norm and
-- instance_norm share it).
function M._update_running_stats(running_mean, running_var, stats, n, momentum)
  dle.no_grad(function()
    local s = stats:detach()
    local bm = s:select(2, 1):to(running_mean:dtype()):reshape(running_mean:shape())
    local bv = (s:select(2, 2) * (n / (n - 1))):to(running_var:dtype()):reshape(running_var:shape())
    running_mean:mul_(1 - momentum):add_(bm * momentum)
    running_var:mul_(1 - momentum):add_(bv * momentum)
  end)
end

--- group_norm(x, num_groups, weight, bias, eps): normalizes x {N, C, ...} over each sample's
-- groups of C / num_groups consecutive channels (mean and biased variance), then scales by weight
-- {C} and adds bias {C} (either may be nil).
-- @param num_groups a positive integer dividing C
-- @param eps default 1e-5
-- @return tensor of x's shape
function M.group_norm(x, num_groups, weight, bias, eps)
  check.tensor(x, "group_norm", "input")
  num_groups = check.integer(num_groups, "group_norm", "num_groups")
  if x:dim() < 2 then
    check.error("group_norm: expected an input of at least 2 dimensions {N, C, ...}, got " .. shape_str(x))
  end
  local C = x:size(2)
  per_channel("group_norm", x, C, {{"weight", weight}, {"bias", bias}})
  return (dle.group_norm(x, num_groups, flat(weight, C), flat(bias, C), eps or 1e-5))
end

--- instance_norm(x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps):
-- normalizes each channel of each sample of x {N, C, ...} over its trailing dims. With
-- use_input_stats (default true) the sample's own statistics are used, and the running statistics
-- (when given) are updated in place without recording: running = (1 - momentum) running +
-- momentum * (the batch average of the samples' mean, resp. unbiased variance). With
-- use_input_stats false, running_mean and running_var are used instead.
-- @param momentum default 0.1
-- @param eps default 1e-5
-- @return tensor of x's shape
function M.instance_norm(x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)
  check.tensor(x, "instance_norm", "input")
  if x:dim() < 3 then
    check.error("instance_norm: expected an input of at least 3 dimensions {N, C, L, ...}, got " .. shape_str(x))
  end
  local N, C = x:size(1), x:size(2)
  per_channel("instance_norm", x, C, {{"running_mean", running_mean}, {"running_var", running_var},
                                      {"weight", weight}, {"bias", bias}})
  if (running_mean == nil) ~= (running_var == nil) then
    check.error("instance_norm: running_mean and running_var must be given together")
  end
  eps = eps or 1e-5
  if use_input_stats == false then
    if running_mean == nil then
      check.error("instance_norm: use_input_stats = false needs running_mean and running_var")
    end
    return (dle.batch_norm(x, flat(weight, C), flat(bias, C), flat(running_mean, C), flat(running_var, C),
      false, eps))
  end
  local y, stats = dle.group_norm(x, C, flat(weight, C), flat(bias, C), eps)
  if running_mean ~= nil then
    -- the samples' statistics averaged over the batch, as PyTorch's
    local averaged = stats:detach():reshape(N, C, 2):mean(1)
    M._update_running_stats(running_mean, running_var, averaged, x:numel() // (N * C),
      momentum == nil and 0.1 or momentum)
  end
  return y
end

--- local_response_norm(x, size, alpha, beta, k): x / (k + alpha / size * sum of x^2 over the
-- `size` neighbouring channels)^beta, channels being dim 2 of x {N, C, ...} (zero padded: size // 2
-- before a channel, (size - 1) // 2 after it), as PyTorch.
-- @param alpha default 1e-4
-- @param beta default 0.75
-- @param k default 1
-- @return tensor of x's shape
function M.local_response_norm(x, size, alpha, beta, k)
  check.tensor(x, "local_response_norm", "input")
  size = check.integer_min(size, "local_response_norm", "size", 1)
  if x:dim() < 3 then
    check.error("local_response_norm: expected an input of at least 3 dimensions {N, C, ...}, got " .. shape_str(x))
  end
  alpha = alpha == nil and 1e-4 or check.number(alpha, "local_response_norm", "alpha")
  beta = beta == nil and 0.75 or check.number(beta, "local_response_norm", "beta")
  k = k == nil and 1.0 or check.number(k, "local_response_norm", "k")
  local C, pads = x:size(2), {}
  -- F.pad's pairs run from the last dim: none for the trailing dims, then the channels'. A window
  -- reaching more than C - 1 channels away sees only zero padding there: the pads (and the loop)
  -- stop at C - 1, which leaves every sum as it was (x^2 + 0 is x^2) for any size
  for _ = 3, x:dim() do pads[#pads + 1] = 0; pads[#pads + 1] = 0 end
  local reach = math.max(C - 1, 0)
  pads[#pads + 1], pads[#pads + 2] = math.min(size // 2, reach), math.min((size - 1) // 2, reach)
  local p = F.pad(x * x, pads)
  local sum = p:narrow(2, 1, C)
  for j = 2, pads[#pads - 1] + pads[#pads] + 1 do sum = sum + p:narrow(2, j, C) end
  return x / (sum * (alpha / size) + k) ^ beta
end

return M
