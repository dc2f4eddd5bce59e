--- dle.nn.functional (loss part): l1_loss, smooth_l1_loss, huber_loss, kl_div,
-- binary_cross_entropy, poisson_nll_loss, cosine_embedding_loss, margin_ranking_loss,
-- triplet_margin_loss, multilabel_soft_margin_loss, hinge_embedding_loss, soft_margin_loss,
-- gaussian_nll_loss, and the distances cosine_similarity, normalize, pairwise_distance, with
-- PyTorch 1.13's definitions and defaults. This file returns them and
-- dle.nn.functional gathers them. Each is a composition of dle ops, so gradients
-- (reverse and forward) come from those ops; a fused op per loss (as mse_loss has) would save
-- the intermediate tensors. Dimensions are 1-based: PyTorch's default dim=1 is dim 2 here.
local dle = require("dle")
local FA = require("dle.nn.functional_activations")
local check = require("dle.check")
local shape_str = check.shape_str

local M = {}

local reduce = require("dle.nn.reduction")

-- opts checked against known (reduction is always known), the tensors checked as floats of one
-- shape; returns opts and the reduction.
local EXTRA_REDUCTIONS = {kl_div = {batchmean = true}}
local function loss_args(fname, opts, known, names, ...)
  opts = check.options(opts, fname, known)
  local r = check.reduction(fname, opts.reduction, EXTRA_REDUCTIONS[fname])
  local first = nil
  for i = 1, select("#", ...) do
    local t = check.tensor((select(i, ...)), fname, names[i])
    if not t:is_floating_point() then
      check.error(string.format("%s: %s must be a float tensor, got %s", fname, names[i], t:dtype()))
    end
    if first == nil then
      first = t
    elseif shape_str(t) ~= shape_str(first) then
      check.error(string.format("%s: %s has shape %s but %s has shape %s", fname, names[1], shape_str(first),
        names[i], shape_str(t)))
    end
  end
  return opts, r
end

local function number_opt(opts, key, default, fname, ok, expected)
  local v = opts[key]
  if v == nil then return default end
  return check.number_that(v, fname, key, expected or "a number", ok or function() return true end)
end

local function boolean_opt(opts, key, default, fname)
  if opts[key] == nil then return default end
  return check.boolean(opts[key], fname, key)
end

local function nonneg(v) return v >= 0 end

local IN_TARGET = {"input", "target"}
local REDUCTION = {"reduction"}

--- l1_loss(input, target, opts): |input - target|; shapes must match.
-- @param opts optional {reduction = "mean"|"sum"|"none"}
-- @return scalar tensor, or elementwise losses for reduction "none"
function M.l1_loss(input, target, opts)
  local _, r = loss_args("l1_loss", opts, REDUCTION, IN_TARGET, input, target)
  return reduce((input - target):abs(), r)
end

-- 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta > 0), times scale.
local function smooth_l1(d, beta, scale)
  local a = d:abs()
  local quad = d * d * (0.5 / beta)
  return dle.where(a:lt(beta), quad, a - 0.5 * beta) * scale
end

--- smooth_l1_loss(input, target, opts): 0.5 d^2 / beta where |d| < beta, else |d| - beta / 2
-- (d = input - target); beta = 0 is l1_loss.
-- @param opts optional {reduction = "mean", beta = 1 (>= 0)}
-- @return scalar tensor, or elementwise losses for reduction "none"
function M.smooth_l1_loss(input, target, opts)
  local r
  opts, r = loss_args("smooth_l1_loss", opts, {"reduction", "beta"}, IN_TARGET, input, target)
  local beta = number_opt(opts, "beta", 1, "smooth_l1_loss", nonneg, "a number >= 0")
  local d = input - target
  if beta == 0 then return reduce(d:abs(), r) end
  return reduce(smooth_l1(d, beta, 1), r)
end

--- huber_loss(input, target, opts): 0.5 d^2 where |d| < delta, else delta * (|d| - delta / 2)
-- (d = input - target), i.e. delta * smooth_l1_loss with beta = delta.
-- @param opts optional {reduction = "mean", delta = 1 (> 0)}
-- @return scalar tensor, or elementwise losses for reduction "none"
function M.huber_loss(input, target, opts)
  local r
  opts, r = loss_args("huber_loss", opts, {"reduction", "delta"}, IN_TARGET, input, target)
  local delta = number_opt(opts, "delta", 1, "huber_loss", function(v) return v > 0 end, "a number > 0")
  return reduce(smooth_l1(input - target, delta, delta), r)
end

-- log(t) where t > 0, and 0 elsewhere (a zero or negative t never reaches log, so no -inf * 0 in
-- the gradient).
local function log_or_zero(t)
  local pos = t:gt(0)
  return dle.where(pos, dle.where(pos, t, 1):log(), 0)
end

--- kl_div(input, target, opts): the pointwise KL divergence target * (log(target) - input) of
-- log-probabilities input (0 where target is 0); with log_target, target holds log-probabilities
-- too: exp(target) * (target - input). Shapes must match.
-- @param opts optional {reduction = "mean"|"batchmean"|"sum"|"none", log_target = false}; "mean"
--   averages over every element (PyTorch's default, not the KL divergence), "batchmean" divides
--   the sum by the size of dimension 1
-- @return scalar tensor, or elementwise losses for reduction "none"
function M.kl_div(input, target, opts)
  local r
  opts, r = loss_args("kl_div", opts, {"reduction", "log_target"}, IN_TARGET, input, target)
  local loss
  if boolean_opt(opts, "log_target", false, "kl_div") then
    loss = target:exp() * (target - input)
  else
    loss = target * log_or_zero(target) - target * input
  end
  if r == "batchmean" then return loss:sum() / (input:dim() > 0 and input:size(1) or 1) end
  return reduce(loss, r)
end

-- log(x) clamped below at -100 (PyTorch's BCE), with no -inf at x = 0 (its gradient there is 0).
local function clamped_log(x)
  local pos = x:gt(0)
  return dle.where(pos, dle.where(pos, x, 1):log(), -100):clamp(-100, nil)
end

--- binary_cross_entropy(input, target, opts): -(t log(x) + (1 - t) log(1 - x)) for probabilities
-- x in [0, 1], each log clamped at -100 as PyTorch does; weight (broadcast to input's shape)
-- multiplies each element's loss. Shapes of input and target must match. The gradient where a
-- log is clamped is 0 (PyTorch's backward divides by max(x (1 - x), 1e-12) instead).
-- @param opts optional {reduction = "mean", weight = tensor}
-- @return scalar tensor, or elementwise losses for reduction "none"
function M.binary_cross_entropy(input, target, opts)
  local r
  opts, r = loss_args("binary_cross_entropy", opts, {"reduction", "weight"}, IN_TARGET, input, target)
  if input:numel() > 0 then
    local lo, hi = input:amin():item(), input:amax():item()
    if not (lo >= 0 and hi <= 1) then
      check.error(string.format("binary_cross_entropy: input must hold probabilities in [0, 1], got values in "
        .. "[%g, %g] (for logits use binary_cross_entropy_with_logits)", lo, hi))
    end
  end
  local loss = -(target * clamped_log(input) + (1 - target) * clamped_log(1 - input))
  if opts.weight ~= nil then
    local w = check.tensor(opts.weight, "binary_cross_entropy", "weight")
    loss = check.call("binary_cross_entropy", function() return loss * w end)
  end
  return reduce(loss, r)
end

--- poisson_nll_loss(input, target, opts): Poisson negative log-likelihood: exp(input) - target *
-- input (log_input), or input - target * log(input + eps); full adds Stirling's term target *
-- log(target) - target + log(2 pi target) / 2 where target > 1.
-- @param opts optional {log_input = true, full = false, eps = 1e-8, reduction = "mean"}
-- @return scalar tensor, or elementwise losses for reduction "none"
function M.poisson_nll_loss(input, target, opts)
  local r
  opts, r = loss_args("poisson_nll_loss", opts, {"reduction", "log_input", "full", "eps"}, IN_TARGET, input, target)
  local eps = number_opt(opts, "eps", 1e-8, "poisson_nll_loss", nonneg, "a number >= 0")
  local loss
  if boolean_opt(opts, "log_input", true, "poisson_nll_loss") then
    loss = input:exp() - target * input
  else
    loss = input - target * (input + eps):log()
  end
  if boolean_opt(opts, "full", false, "poisson_nll_loss") then
    local big = target:gt(1)
    local t = dle.where(big, target, 1)
    local stirling = t * t:log() - t + (t * (2 * math.pi)):log() * 0.5
    loss = loss + dle.where(big, stirling, 0)
  end
  return reduce(loss, r)
end

-- y checked: a tensor of the shape the per-sample loss has.
local function labels(fname, y, shape, what)
  check.tensor(y, fname, "target")
  local want = "{" .. table.concat(shape, ",") .. "}"
  if shape_str(y) ~= want then
    check.error(string.format("%s: %s, so target must have shape %s, got %s", fname, what, want, shape_str(y)))
  end
  return y
end

--- cosine_embedding_loss(x1, x2, y, opts): 1 - cos(x1, x2) where y = 1, max(0, cos(x1, x2) -
-- margin) where y = -1 (0 for other labels), the cosine over the last dimension of {N, D} (or
-- {D}) inputs, with PyTorch's 1e-12 added to each squared norm.
-- @param y {N} (or {}) labels 1 / -1
-- @param opts optional {margin = 0, reduction = "mean"}
-- @return scalar tensor, or {N} losses for reduction "none"
function M.cosine_embedding_loss(x1, x2, y, opts)
  local r
  opts, r = loss_args("cosine_embedding_loss", opts, {"reduction", "margin"}, {"input1", "input2"}, x1, x2)
  if x1:dim() < 1 or x1:dim() > 2 then
    check.error("cosine_embedding_loss: inputs must be {N, D} or {D}, got " .. shape_str(x1))
  end
  labels("cosine_embedding_loss", y, x1:dim() == 2 and {x1:size(1)} or {}, "inputs are " .. shape_str(x1))
  local margin = number_opt(opts, "margin", 0, "cosine_embedding_loss")
  local d = x1:dim()
  local eps = 1e-12
  local cos = (x1 * x2):sum(d) / (((x1 * x1):sum(d) + eps) * ((x2 * x2):sum(d) + eps)):sqrt()
  local loss = dle.where(y:eq(1), 1 - cos, 0) + dle.where(y:eq(-1), (cos - margin):clamp(0, nil), 0)
  return reduce(loss, r)
end

--- margin_ranking_loss(x1, x2, y, opts): max(0, -y * (x1 - x2) + margin); shapes must match.
-- @param opts optional {margin = 0, reduction = "mean"}
-- @return scalar tensor, or elementwise losses for reduction "none"
function M.margin_ranking_loss(x1, x2, y, opts)
  local r
  opts, r = loss_args("margin_ranking_loss", opts, {"reduction", "margin"}, {"input1", "input2", "target"}, x1, x2, y)
  local margin = number_opt(opts, "margin", 0, "margin_ranking_loss")
  return reduce((-y * (x1 - x2) + margin):clamp(0, nil), r)
end

local function p_norm_arg(p, fname)
  return check.number_that(p == nil and 2 or p, fname, "p", "a number > 0", function(v) return v > 0 end)
end

--- pairwise_distance(x1, x2, p = 2, eps = 1e-6, keepdim = false): the p-norm of x1 - x2 + eps
-- over the last dimension (x1 and x2 broadcast).
-- @return tensor with the last dimension removed (kept as 1 with keepdim)
function M.pairwise_distance(x1, x2, p, eps, keepdim)
  check.tensor(x1, "pairwise_distance", "x1")
  check.tensor(x2, "pairwise_distance", "x2")
  p = p_norm_arg(p, "pairwise_distance")
  eps = eps == nil and 1e-6 or check.number(eps, "pairwise_distance", "eps")
  local d = check.call("pairwise_distance", function() return x1 - x2 + eps end)
  if d:dim() == 0 then check.error("pairwise_distance: inputs must have at least 1 dimension") end
  return d:norm(p, d:dim(), keepdim == true)
end

--- triplet_margin_loss(anchor, positive, negative, opts): max(0, margin + d(anchor, positive) -
-- d(anchor, negative)), d the pairwise_distance of norm p; with swap, d(anchor, negative) is
-- replaced by d(positive, negative) where that is smaller. Shapes must match ({N, D} or {D}).
-- @param opts optional {margin = 1, p = 2, eps = 1e-6, swap = false, reduction = "mean"}
-- @return scalar tensor, or {N} losses for reduction "none"
function M.triplet_margin_loss(anchor, positive, negative, opts)
  local r
  opts, r = loss_args("triplet_margin_loss", opts, {"reduction", "margin", "p", "eps", "swap"},
    {"anchor", "positive", "negative"}, anchor, positive, negative)
  if anchor:dim() < 1 then check.error("triplet_margin_loss: inputs must be {N, D} or {D}, got {}") end
  local margin = number_opt(opts, "margin", 1, "triplet_margin_loss", function(v) return v > 0 end, "a number > 0")
  local p, eps = p_norm_arg(opts.p, "triplet_margin_loss"), number_opt(opts, "eps", 1e-6, "triplet_margin_loss")
  local d_pos = M.pairwise_distance(anchor, positive, p, eps)
  local d_neg = M.pairwise_distance(anchor, negative, p, eps)
  if boolean_opt(opts, "swap", false, "triplet_margin_loss") then
    d_neg = dle.minimum(d_neg, M.pairwise_distance(positive, negative, p, eps))
  end
  return reduce((d_pos - d_neg + margin):clamp(0, nil), r)
end

--- multilabel_soft_margin_loss(input, target, opts): -(y logsigmoid(x) + (1 - y) logsigmoid(-x))
-- times weight (per class, broadcast), averaged over the classes (the last dimension) of {N, C}
-- inputs; target holds 0 / 1 of input's shape.
-- @param opts optional {weight = {C} tensor, reduction = "mean"}
-- @return scalar tensor, or {N} losses for reduction "none"
function M.multilabel_soft_margin_loss(input, target, opts)
  local r
  opts, r = loss_args("multilabel_soft_margin_loss", opts, {"reduction", "weight"}, IN_TARGET, input, target)
  if input:dim() < 1 then check.error("multilabel_soft_margin_loss: input must be {N, C} or {C}, got {}") end
  local loss = -(target * FA.logsigmoid(input) + (1 - target) * FA.logsigmoid(-input))
  if opts.weight ~= nil then
    local w = check.tensor(opts.weight, "multilabel_soft_margin_loss", "weight")
    loss = check.call("multilabel_soft_margin_loss", function() return loss * w end)
  end
  local cdim = input:dim()
  return reduce(loss:sum(cdim) / input:size(cdim), r)
end

--- hinge_embedding_loss(input, target, opts): input where target is 1, max(0, margin - input)
-- where target is -1 (both terms where target is neither); shapes must match.
-- @param opts optional {margin = 1, reduction = "mean"}
-- @return scalar tensor, or elementwise losses for reduction "none"
function M.hinge_embedding_loss(input, target, opts)
  local r
  opts, r = loss_args("hinge_embedding_loss", opts, {"reduction", "margin"}, IN_TARGET, input, target)
  local margin = number_opt(opts, "margin", 1, "hinge_embedding_loss")
  local loss = dle.where(target:ne(1), (margin - input):clamp(0, nil), 0) + dle.where(target:ne(-1), input, 0)
  return reduce(loss, r)
end

--- soft_margin_loss(input, target, opts): log(1 + exp(-target * input)) (computed stably as
-- -logsigmoid(target * input)); shapes must match.
-- @param opts optional {reduction = "mean"}
-- @return scalar tensor, or elementwise losses for reduction "none"
function M.soft_margin_loss(input, target, opts)
  local _, r = loss_args("soft_margin_loss", opts, REDUCTION, IN_TARGET, input, target)
  return reduce(-FA.logsigmoid(target * input), r)
end

--- gaussian_nll_loss(input, target, var, opts): 0.5 (log(var) + (input - target)^2 / var) (plus
-- 0.5 log(2 pi) with full), var clamped below at eps in value only (the gradient passes as if
-- unclamped, as PyTorch's no_grad clamp). var has input's shape, or input's shape without its
-- last dimension, or with it as 1 (one variance shared along it); negative var is an error.
-- @param opts optional {full = false, eps = 1e-6, reduction = "mean"}
-- @return scalar tensor, or elementwise losses for reduction "none"
function M.gaussian_nll_loss(input, target, var, opts)
  local r
  opts, r = loss_args("gaussian_nll_loss", opts, {"reduction", "full", "eps"}, IN_TARGET, input, target)
  check.tensor(var, "gaussian_nll_loss", "var")
  local eps = number_opt(opts, "eps", 1e-6, "gaussian_nll_loss", nonneg, "a number >= 0")
  if shape_str(var) ~= shape_str(input) then
    local lead = input:shape()
    lead[#lead] = nil
    local vs = var:shape()
    if shape_str(var) == "{" .. table.concat(lead, ",") .. "}" then
      var = var:unsqueeze(-1)
    elseif not (#vs == #lead + 1 and vs[#vs] == 1 and table.concat(vs, ",", 1, #lead) == table.concat(lead, ",")) then
      check.error(string.format("gaussian_nll_loss: var has shape %s; for input %s it must be %s, %s or that "
        .. "with its last size 1", shape_str(var), shape_str(input), shape_str(input),
        "{" .. table.concat(lead, ",") .. "}"))
    end
  end
  if var:numel() > 0 and var:amin():item() < 0 then check.error("gaussian_nll_loss: var has negative entries") end
  var = var + (var:clamp(eps, nil) - var):detach()
  local d = input - target
  local loss = (var:log() + d * d / var) * 0.5
  if boolean_opt(opts, "full", false, "gaussian_nll_loss") then loss = loss + 0.5 * math.log(2 * math.pi) end
  return reduce(loss, r)
end

--- cosine_similarity(x1, x2, dim = 2, eps = 1e-8): x1 . x2 / max(|x1| |x2|, eps) along dim
-- (x1 and x2 broadcast; dim 2 is PyTorch's default dim=1).
-- @return tensor with dim removed
function M.cosine_similarity(x1, x2, dim, eps)
  check.tensor(x1, "cosine_similarity", "x1")
  check.tensor(x2, "cosine_similarity", "x2")
  local d = check.integer(dim or 2, "cosine_similarity", "dim")
  eps = eps == nil and 1e-8 or check.number(eps, "cosine_similarity", "eps")
  return check.call("cosine_similarity", function()
    local w12 = (x1 * x2):sum(d)
    local n = ((x1 * x1):sum(d) * (x2 * x2):sum(d)):clamp(eps * eps, nil):sqrt()
    return w12 / n
  end)
end

--- normalize(x, p = 2, dim = 2, eps = 1e-12): x / max(|x|_p, eps) along dim (dim 2 is
-- PyTorch's default dim=1).
-- @return tensor of x's shape
function M.normalize(x, p, dim, eps)
  check.tensor(x, "normalize", "input")
  p = p_norm_arg(p, "normalize")
  local d = check.integer(dim or 2, "normalize", "dim")
  eps = eps == nil and 1e-12 or check.number(eps, "normalize", "eps")
  return check.call("normalize", function() return x / x:norm(p, d, true):clamp(eps, nil) end)
end

return M
