--- dle.nn.functional: stateless forms of the layers and losses. Cross-entropy (class targets),
-- embedding, dropout and attention (dle.nn.attention) call fused ops of the op table
-- (dle.cross_entropy, dle.embedding, dle.dropout, dle.sdpa) with C kernels and gradient rules;
-- the rest are composed of dle ops. Class targets are int64 tensors holding 1-based class numbers.
local dle = require "dle"

local F = {}

local function shape_str(t) return "{" .. table.concat(t:shape(), ",") .. "}" end

local function check_tensor(fname, argname, t)
  if not dle.is_tensor(t) then
    error(fname .. ": " .. argname .. " must be a tensor, got " .. type(t), 3)
  end
end

--- relu(x) = max(x, 0).
function F.relu(x) return x:relu() end
--- gelu(x).
function F.gelu(x) return x:gelu() end
--- silu(x) = x * sigmoid(x).
function F.silu(x) return x:silu() end
--- tanh(x).
function F.tanh(x) return x:tanh() end
--- sigmoid(x).
function F.sigmoid(x) return x:sigmoid() end

--- softmax along dimension d (default -1).
-- @return tensor of x's shape
function F.softmax(x, d) return x:softmax(d or -1) end

--- log_softmax along dimension d (default -1).
-- @return tensor of x's shape
function F.log_softmax(x, d) return x:log_softmax(d or -1) end

--- linear(x, weight, bias): x @ weight^T + bias; x is {..., in}, weight {out, in}, bias {out} or nil.
-- @return tensor {..., out}
function F.linear(x, weight, bias)
  check_tensor("linear", "input", x)
  local inf = weight:size(2)
  if x:dim() < 1 or x:size(-1) ~= inf then
    error("linear: input has shape " .. shape_str(x) .. ", expected last dimension " .. inf
      .. " (weight " .. shape_str(weight) .. ")", 2)
  end
  -- Leading dims are folded into one ({..., in} -> {rows, in}), so the weight's gradient is one
  -- {out, in} product rather than a batch of them summed afterwards. With a bias, one product
  -- accumulates into it (gemm's beta = 1) instead of a product and an add.
  local lead = x:dim() > 2 and x:shape() or nil
  if lead then x = x:reshape(-1, inf) end
  local y = bias and dle.addmm(bias, x, weight:t()) or x:matmul(weight:t())
  if lead then
    lead[#lead] = weight:size(1)
    y = y:view(lead)
  end
  return y
end

--- dropout(x, p, training, opts): inverted dropout; zeroes each element with probability p and
-- scales the rest by 1/(1-p); identity when not training or p == 0, zeros when p == 1. The mask
-- comes from the generator's Philox stream (the numbers dle.rand would draw for a float32 tensor
-- of x's shape), and the backward regenerates it instead of storing it.
-- @param opts optional {generator = g}
-- @return tensor of x's shape
function F.dropout(x, p, training, opts)
  p = p or 0.5
  if type(p) ~= "number" or p < 0 or p > 1 then error("dropout: p must be a number in [0, 1], got " .. tostring(p), 2) end
  check_tensor("dropout", "input", x)
  if training == false or p == 0 then return x end
  return dle.dropout(x, p, {generator = opts and opts.generator})
end

--- layer_norm(x, weight, bias, eps, normalized_shape): normalizes over the trailing dimensions
-- (zero mean, unit biased variance), then scales by weight and adds bias. One fused native op
-- (dle.layer_norm) forward and backward.
-- @param weight tensor of the normalized shape, or nil
-- @param bias tensor of the normalized shape, or nil
-- @param eps default 1e-5
-- @param normalized_shape trailing sizes to normalize over (a number or a table); default: the
--   shape of weight (or bias), else the last dimension
-- @return tensor of x's shape
function F.layer_norm(x, weight, bias, eps, normalized_shape)
  check_tensor("layer_norm", "input", x)
  if x:dim() < 1 then error("layer_norm: expected an input of at least 1 dimension, got " .. shape_str(x), 2) end
  local shape = normalized_shape or (weight and weight:shape()) or (bias and bias:shape()) or x:size(-1)
  return (dle.layer_norm(x, shape, weight, bias, eps or 1e-5))
end

--- embedding(ids, weight, opts): rows of weight {n, d} picked by 1-based int64 ids of any shape
-- (the fused embedding op; its backward is an index-add into a zero {n, d}).
-- @param opts optional {padding_idx = i}: row i receives no gradient
-- @return tensor {ids shape..., d}
function F.embedding(ids, weight, opts)
  check_tensor("embedding", "ids", ids)
  check_tensor("embedding", "weight", weight)
  return dle.embedding(weight, ids, {padding_idx = opts and opts.padding_idx})
end

local function reduce(loss, reduction, fname, count)
  reduction = reduction or "mean"
  if reduction == "none" then return loss end
  if reduction == "sum" then return loss:sum() end
  if reduction == "mean" then
    if count then return loss:sum() / count end
    return loss:mean()
  end
  error(fname .. ": reduction must be 'mean', 'sum' or 'none', got '" .. tostring(reduction) .. "'", 3)
end

-- Moves the class dimension (2) of {N, C, d1, ...} to the end and flattens: returns {M, C}, the
-- shape the per-element loss has ({N, d1, ...}), and whether a reshape back is needed.
local function classes_last(input)
  if input:dim() == 1 then return input:unsqueeze(1), {} end
  if input:dim() == 2 then return input, {input:size(1)} end
  local perm, out_shape = {1}, {input:size(1)}
  for d = 3, input:dim() do perm[#perm + 1] = d; out_shape[#out_shape + 1] = input:size(d) end
  perm[#perm + 1] = 2
  return input:permute(perm):reshape(-1, input:size(2)), out_shape
end

-- Shared core of nll_loss and cross_entropy: logp {N, C, ...} log-probabilities.
local function nll_core(fname, logp, target, opts)
  opts = opts or {}
  local C = logp:dim() == 1 and logp:size(1) or logp:size(2)
  local lp, out_shape = classes_last(logp)
  -- soft targets: class probabilities of the input's shape
  if target:is_floating_point() then
    if shape_str(target) ~= shape_str(logp) then
      error(fname .. ": probability targets have shape " .. shape_str(target) .. ", expected " .. shape_str(logp), 3)
    end
    local tp = classes_last(target)
    local eps = opts.label_smoothing or 0
    if eps > 0 then tp = tp * (1 - eps) + eps / C end
    local loss = -(lp * tp):sum(2)
    return reduce(loss:reshape(out_shape), opts.reduction, fname)
  end
  local dt = target:dtype()
  if dt ~= "int64" and dt ~= "int32" then
    error(fname .. ": targets must be int64 class numbers (1-based) or float probabilities, got " .. dt, 3)
  end
  local expect = {table.unpack(out_shape)}
  if shape_str(target) ~= "{" .. table.concat(expect, ",") .. "}" then
    error(fname .. ": input has shape " .. shape_str(logp) .. ", so targets must have shape {"
      .. table.concat(expect, ",") .. "}, got " .. shape_str(target), 3)
  end
  local t = target:reshape(-1):to("int64")
  local ignore = opts.ignore_index
  local mask
  if ignore ~= nil then
    mask = t:ne(ignore)
    t = dle.where(mask, t, dle.ones_like(t))
  end
  if t:numel() > 0 then
    local lo, hi = t:min():item(), t:max():item()
    if lo < 1 or hi > C then
      error(fname .. ": target " .. (lo < 1 and lo or hi) .. " is out of range for " .. C .. " classes (1.." .. C .. ")", 3)
    end
  end
  local loss = -lp:gather(2, t:unsqueeze(2)):squeeze(2)
  local eps = opts.label_smoothing or 0
  if eps < 0 or eps > 1 then error(fname .. ": label_smoothing must be in [0, 1], got " .. eps, 3) end
  if eps > 0 then
    loss = loss * (1 - eps) + lp:sum(2) * (-eps / C)
  end
  local count
  if mask then
    local mf = mask:to(loss:dtype())
    loss = loss * mf
    count = mf:sum()
  end
  return reduce(loss:reshape(out_shape), opts.reduction, fname, count)
end

--- nll_loss(logp, targets, opts): negative log-likelihood of log-probabilities {N, C} (or
-- {N, C, d1, ...}, or {C}) at 1-based int64 targets {N} ({N, d1, ...}).
-- @param opts optional {ignore_index, reduction = "mean"|"sum"|"none"}; the mean is over
--   the targets that are not ignore_index
-- @return scalar tensor, or per-element losses for reduction "none"
function F.nll_loss(logp, targets, opts)
  check_tensor("nll_loss", "input", logp)
  check_tensor("nll_loss", "targets", targets)
  return nll_core("nll_loss", logp, targets, opts)
end

--- cross_entropy(logits, targets, opts): softmax cross-entropy over dimension 2 (the classes).
-- Logits are {N, C}, {C} or {N, C, d1, ...}. Targets are 1-based int64 class numbers of shape
-- {N} ({}, {N, d1, ...}): the fused op (one log-sum-exp pass per row forward, one fused pass
-- backward); or float class probabilities of logits' shape (composed of dle ops).
-- @param opts optional {ignore_index, label_smoothing = 0, reduction = "mean"|"sum"|"none"}; the
--   mean is over the targets that are not ignore_index
-- @return scalar tensor, or per-element losses for reduction "none"
function F.cross_entropy(logits, targets, opts)
  check_tensor("cross_entropy", "logits", logits)
  check_tensor("cross_entropy", "targets", targets)
  if targets:is_floating_point() then
    local d = logits:dim() == 1 and 1 or 2
    return nll_core("cross_entropy", logits:log_softmax(d), targets, opts)
  end
  opts = opts or {}
  local dt = targets:dtype()
  if dt ~= "int64" and dt ~= "int32" then
    error("cross_entropy: targets must be int64 class numbers (1-based) or float probabilities, got " .. dt, 2)
  end
  local x, out_shape = classes_last(logits)
  local expect = "{" .. table.concat(out_shape, ",") .. "}"
  if shape_str(targets) ~= expect then
    error("cross_entropy: input has shape " .. shape_str(logits) .. ", so targets must have shape "
      .. expect .. ", got " .. shape_str(targets), 2)
  end
  local loss = dle.cross_entropy(x, targets:reshape(-1), {reduction = opts.reduction,
    ignore_index = opts.ignore_index, label_smoothing = opts.label_smoothing})
  if opts.reduction == "none" then loss = loss:reshape(out_shape) end
  return loss
end

--- mse_loss(input, target, opts): mean squared error; shapes must match.
-- @param opts optional {reduction = "mean"|"sum"|"none"}
-- @return scalar tensor, or elementwise losses for reduction "none"
function F.mse_loss(input, target, opts)
  check_tensor("mse_loss", "input", input)
  check_tensor("mse_loss", "target", target)
  if shape_str(input) ~= shape_str(target) then
    error("mse_loss: input has shape " .. shape_str(input) .. " but target has shape " .. shape_str(target), 2)
  end
  local d = input - target
  return reduce(d * d, opts and opts.reduction, "mse_loss")
end

--- binary_cross_entropy_with_logits(x, y, opts): stable
-- max(x, 0) - x*y + log1p(exp(-|x|)); with pos_weight w the positive term is weighted:
-- (1 - y) * x + (1 + (w - 1) * y) * (log1p(exp(-|x|)) + max(-x, 0)).
-- @param opts optional {reduction = "mean"|"sum"|"none", pos_weight = tensor or number}
-- @return scalar tensor, or elementwise losses for reduction "none"
function F.binary_cross_entropy_with_logits(x, y, opts)
  check_tensor("binary_cross_entropy_with_logits", "input", x)
  check_tensor("binary_cross_entropy_with_logits", "target", y)
  if shape_str(x) ~= shape_str(y) then
    error("binary_cross_entropy_with_logits: input has shape " .. shape_str(x) .. " but target has shape " .. shape_str(y), 2)
  end
  if not y:is_floating_point() then y = y:to(x:dtype()) end
  local softplus_neg_abs = (-x:abs()):exp():log1p()
  local loss
  if opts and opts.pos_weight then
    local lw = (opts.pos_weight - 1) * y + 1
    loss = (1 - y) * x + lw * (softplus_neg_abs + (-x):relu())
  else
    loss = x:relu() - x * y + softplus_neg_abs
  end
  return reduce(loss, opts and opts.reduction, "binary_cross_entropy_with_logits")
end

return F
