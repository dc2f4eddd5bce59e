--- dle.nn.functional: stateless forms of the layers and losses. The losses (cross-entropy, nll,
-- mse, bce-with-logits), embedding, dropout and attention (dle.nn.attention) call fused ops of the
-- op table (dle.cross_entropy, dle.soft_cross_entropy, dle.nll_loss, dle.mse_loss,
-- dle.binary_cross_entropy_with_logits, dle.embedding, dle.dropout, dle.sdpa) with C kernels and
-- gradient rules; the rest are composed of dle ops. Class targets are int64 tensors holding
-- 1-based class numbers.
local dle = require("dle")

local F = {}

local check = require("dle.check")
local shape_str = check.shape_str

-- The options each function knows (check.options).
local DROPOUT_OPTS = {"generator"}
local EMBEDDING_OPTS = {"padding_idx"}
local MSE_OPTS = {"reduction"}
local BCE_OPTS = {"reduction", "pos_weight"}
local LOSS_OPTS = {"ignore_index", "label_smoothing", "reduction", "weight"}

-- Elementwise activations: relu(x) = max(x, 0), gelu(x), silu(x) = x * sigmoid(x), tanh(x),
-- sigmoid(x); softmax(x, d) and log_softmax(x, d) along dimension d (default -1). Each returns a
-- tensor of x's shape.
for _, name in ipairs({"relu", "gelu", "silu", "tanh", "sigmoid"}) do
  F[name] = function(x)
    check.tensor(x, name, "input")
    return x[name](x)
  end
end
for _, name in ipairs({"softmax", "log_softmax"}) do
  F[name] = function(x, d)
    check.tensor(x, name, "input")
    return x[name](x, d or -1)
  end
end

-- linear with a quantized weight {out, in} (dle.quantize): x @ W^T from the blocks (dle.quant).
local function quantized_linear(x, weight, bias)
  check.opt_tensor(bias, "linear", "bias")
  if weight:dim() ~= 2 or x:dim() < 1 or x:size(-1) ~= weight:size(2) then
    check.error("linear: input has shape " .. shape_str(x) .. ", expected last dimension " .. weight:size(-1)
      .. " (quantized " .. weight:dtype() .. " weight {" .. table.concat(weight:shape(), ",") .. "})")
  end
  local y = check.call("linear", function() return dle.matmul(x, weight:t()) end)
  return bias and y + bias or y
end

--- linear(x, weight, bias): x @ weight^T + bias; x is {..., in}, weight {out, in} (a tensor or a quantized
-- tensor of dle.quantize), bias {out} or nil.
-- @return tensor {..., out}
function F.linear(x, weight, bias)
  check.tensor(x, "linear", "input")
  if dle.is_quantized(weight) then return quantized_linear(x, weight, bias) end
  check.tensor(weight, "linear", "weight")
  check.opt_tensor(bias, "linear", "bias")
  if weight:dim() ~= 2 then check.error("linear: weight must be 2-D {out, in}, got " .. shape_str(weight)) end
  local inf = weight:size(2)
  if x:dim() < 1 or x:size(-1) ~= inf then
    check.error("linear: input has shape " .. shape_str(x) .. ", expected last dimension " .. inf
      .. " (weight " .. shape_str(weight) .. ")")
  end
  -- Leading dims are folded into one ({..., in} -> {rows, in}), so the weight's gradient is one
  -- {out, in} product rather than a batch of them summed afterwards. With a bias, one product
  -- accumulates into it (gemm's beta = 1) instead of a product and an add.
  local lead = x:dim() > 2 and x:shape() or nil
  if lead then x = x:reshape(-1, inf) end
  -- under autocast, the weight is cast before it is transposed: the product then receives a view
  -- of the parameter's cast, which the cast cache keeps, rather than a new view to cast each call
  if dle.is_autocast_enabled() then weight = dle.core._autocast_lower(weight) end
  local y = check.call("linear", function() return bias and dle.addmm(bias, x, weight:t()) or x:matmul(weight:t()) end)
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
  opts = check.options(opts, "dropout", DROPOUT_OPTS)
  p = p or 0.5
  if type(p) ~= "number" or p < 0 or p > 1 then
    check.error("dropout: p must be a number in [0, 1], got " .. tostring(p))
  end
  check.tensor(x, "dropout", "input")
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
-- PyTorch's order, layer_norm(x, normalized_shape, weight, bias, eps), is accepted too: a number
-- or a plain table second is a shape, never a weight.
-- @return tensor of x's shape
function F.layer_norm(x, weight, bias, eps, normalized_shape)
  check.tensor(x, "layer_norm", "input")
  if type(weight) == "number" or type(weight) == "table" then  -- tensors are userdata
    normalized_shape, weight, bias, eps = weight, bias, eps, normalized_shape
  end
  if x:dim() < 1 then check.error("layer_norm: expected an input of at least 1 dimension, got " .. shape_str(x)) end
  check.opt_tensor(weight, "layer_norm", "weight")
  check.opt_tensor(bias, "layer_norm", "bias")
  local shape = normalized_shape or (weight and weight:shape()) or (bias and bias:shape()) or x:size(-1)
  return (dle.layer_norm(x, shape, weight, bias, eps or 1e-5))
end

--- one_hot(classes, n): t:one_hot(n) as PyTorch's F.one_hot: 1-based int64 classes of any shape
-- to {classes shape..., n} int64 (n omitted: the largest class).
function F.one_hot(classes, n)
  check.tensor(classes, "one_hot", "classes")
  return classes:one_hot(n)
end

--- embedding(ids, weight, opts): rows of weight {n, d} picked by 1-based int64 ids of any shape
-- (the fused embedding op; its backward is an index-add into a zero {n, d}).
-- @param opts optional {padding_idx = i}: row i receives no gradient
-- @return tensor {ids shape..., d}
function F.embedding(ids, weight, opts)
  opts = check.options(opts, "embedding", EMBEDDING_OPTS)
  check.tensor(ids, "embedding", "ids")
  check.tensor(weight, "embedding", "weight")
  return dle.embedding(weight, ids, {padding_idx = opts and opts.padding_idx})
end

-- Moves the class dimension (2) of {N, C, d1, ...} to the end and flattens: returns {M, C} and
-- the shape the per-element loss has ({N, d1, ...}; {} for a {C} input).
local function classes_last(input)
  if input:dim() == 1 then return input:unsqueeze(1), {} end
  if input:dim() == 2 then return input, {input:size(1)} end
  local perm, out_shape = {1}, {input:size(1)}
  for d = 3, input:dim() do perm[#perm + 1] = d; out_shape[#out_shape + 1] = input:size(d) end
  perm[#perm + 1] = 2
  return input:permute(perm):reshape(-1, input:size(2)), out_shape
end

-- Class targets of an input whose per-element loss has shape out_shape: checked, flattened. As in
-- PyTorch, class indices are int64 only.
local function class_targets(fname, input, targets, out_shape)
  local dt = targets:dtype()
  if dt ~= "int64" then
    check.error(fname .. ": targets must be int64 class indices, got " .. dt
      .. " (or float class probabilities of the input's shape)")
  end
  local expect = "{" .. table.concat(out_shape, ",") .. "}"
  if shape_str(targets) ~= expect then
    check.error(fname .. ": input has shape " .. shape_str(input) .. ", so targets must have shape "
      .. expect .. ", got " .. shape_str(targets))
  end
  return targets:reshape(-1)
end

-- The per-row loss {M} of a fused op, back in the input's layout for reduction "none".
local function unflatten(loss, opts, out_shape)
  if opts.reduction == "none" then return loss:reshape(out_shape) end
  return loss
end


local check_reduction = check.reduction

-- opts.weight, checked: a float tensor {C}, in x's dtype.
local function class_weight(fname, w, x)
  local c = x:size(2)
  if not dle.is_tensor(w) or not w:is_floating_point() or w:dim() ~= 1 or w:size(1) ~= c then
    check.error(string.format("%s: weight must be a float tensor of shape {%d} (one per class), got %s", fname, c,
      dle.is_tensor(w) and w:dtype() .. " " .. shape_str(w) or check.typename(w)))
  end
  return w:dtype() == x:dtype() and w or w:to(x:dtype())
end

-- Per-class weighted loss of class targets t {M} for x {M, C} (logits; log-probabilities when
-- logits is false), as PyTorch 1.13 defines it: row i's loss is
--   (1 - eps) w[t_i] l_i + eps / C * -sum_c w[c] logp[i, c],   zero on ignored rows,
-- with l_i the unweighted, unsmoothed per-row loss of the fused op (which also checks the
-- targets); "mean" divides the sum by sum_i w[t_i] over the rows not ignored. Composed of
-- differentiable ops, so reverse and forward mode come with them.
local function weighted_class_loss(fname, x, t, w, opts, logits)
  local r = check_reduction(fname, opts.reduction)
  local eps = opts.label_smoothing or 0
  if type(eps) ~= "number" or not (eps >= 0 and eps <= 1) then
    check.error(fname .. ": label_smoothing must be in [0, 1], got " .. tostring(eps))
  end
  local op = logits and dle.cross_entropy or dle.nll_loss
  local rows = op(x, t, {reduction = "none", ignore_index = opts.ignore_index})   -- 0 where ignored
  local ignored = opts.ignore_index ~= nil and t:eq(opts.ignore_index) or nil
  local keep = ignored and ignored:logical_not():to(w:dtype())
  local wt = w:index_select(1, ignored and t:masked_fill(ignored, 1) or t)          -- w[t_i]
  if keep then wt = wt * keep end
  rows = rows * wt
  if eps > 0 then
    -- -sum_c w[c] logp[i, c]: soft cross-entropy against w in every row
    local smooth = logits and dle.soft_cross_entropy(x, w:expand(x:size(1), x:size(2)), {reduction = "none"})
      or -(x * w):sum(2)
    if keep then smooth = smooth * keep end
    rows = rows * (1 - eps) + smooth * (eps / x:size(2))
  end
  if r == "none" then return rows end
  if r == "sum" then return rows:sum() end
  return rows:sum() / wt:sum()
end

-- Loss against class probabilities p {M, C} with per-class weights w (PyTorch 1.13): row i's
-- loss is -sum_c w[c] q[i, c] logp[i, c] with q = (1 - eps) p + eps / C; "mean" is over the rows.
local function weighted_prob_loss(fname, x, p, w, opts, logits)
  local r = check_reduction(fname, opts.reduction)
  local eps = opts.label_smoothing or 0
  local q = (eps ~= 0 and p * (1 - eps) + eps / x:size(2) or p) * w
  local rows = logits and dle.soft_cross_entropy(x, q, {reduction = "none"}) or -(x * q):sum(2)
  if r == "none" then return rows end
  if r == "sum" then return rows:sum() end
  return rows:mean()
end

-- The losses over classes, nll_loss (log-probabilities) and cross_entropy (logits): both check
-- the options and targets the same way; weighted forms are composed, unweighted ones fused.
local function class_loss(fname, input, targets, opts, logits)
  opts = check.options(opts, fname, LOSS_OPTS)
  check.tensor(input, fname, logits and "logits" or "input")
  check.tensor(targets, fname, "targets")
  local x, out_shape = classes_last(input)
  local w = opts.weight ~= nil and class_weight(fname, opts.weight, x) or nil
  if targets:is_floating_point() then
    if shape_str(targets) ~= shape_str(input) then
      check.error(fname .. ": probability targets have shape " .. shape_str(targets) .. ", expected "
                  .. shape_str(input))
    end
    local p = classes_last(targets)
    if w then return unflatten(weighted_prob_loss(fname, x, p, w, opts, logits), opts, out_shape) end
    if logits then
      return unflatten(dle.soft_cross_entropy(x, p, {reduction = opts.reduction,
        label_smoothing = opts.label_smoothing}), opts, out_shape)
    end
    local r = check_reduction(fname, opts.reduction)
    local loss = -(x * p):sum(2)
    if r == "none" then return loss:reshape(out_shape) end
    return r == "sum" and loss:sum() or loss:mean()
  end
  local t = class_targets(fname, input, targets, out_shape)
  if w then return unflatten(weighted_class_loss(fname, x, t, w, opts, logits), opts, out_shape) end
  local op = logits and dle.cross_entropy or dle.nll_loss
  local loss = op(x, t, {reduction = opts.reduction, ignore_index = opts.ignore_index,
    label_smoothing = opts.label_smoothing})
  return unflatten(loss, opts, out_shape)
end

--- nll_loss(logp, targets, opts): negative log-likelihood of log-probabilities {N, C} (or
-- {N, C, d1, ...}, or {C}) at 1-based int64 targets {N} ({N, d1, ...}): the fused nll_loss op
-- (a gather forward, a scatter of -gy/count into the target column backward). Float targets of
-- logp's shape are class probabilities: -sum(logp * targets) over the classes.
-- @param opts optional {ignore_index, label_smoothing = 0, reduction = "mean"|"sum"|"none",
--   weight = {C} float per-class weights}; the mean is over the targets that are not ignore_index
--   (weighted: divided by the sum of their weights, as PyTorch)
-- @return scalar tensor, or per-element losses for reduction "none"
function F.nll_loss(logp, targets, opts) return class_loss("nll_loss", logp, targets, opts, false) end

--- cross_entropy(logits, targets, opts): softmax cross-entropy over dimension 2 (the classes).
-- Logits are {N, C}, {C} or {N, C, d1, ...}. Targets are 1-based int64 class numbers of shape
-- {N} ({}, {N, d1, ...}): the fused cross_entropy op (one log-sum-exp pass per row forward, one
-- fused pass backward); or float class probabilities of logits' shape: the fused
-- soft_cross_entropy op (the same passes; label smoothing mixes eps/C into the probabilities).
-- With per-class weights the fused op's per-row losses are weighted by w[target] (label smoothing
-- adds soft_cross_entropy against the weights), see weighted_class_loss.
-- @param opts optional {ignore_index, label_smoothing = 0, reduction = "mean"|"sum"|"none",
--   weight = {C} float per-class weights}; the mean is over the targets that are not
--   ignore_index (over all rows for probabilities; weighted class targets: divided by the sum
--   of the targets' weights, as PyTorch 1.13)
-- @return scalar tensor, or per-element losses for reduction "none"
function F.cross_entropy(logits, targets, opts) return class_loss("cross_entropy", logits, targets, opts, true) end

--- mse_loss(input, target, opts): mean squared error (the fused mse_loss op); shapes must match.
-- @param opts optional {reduction = "mean"|"sum"|"none"}
-- @return scalar tensor, or elementwise losses for reduction "none"
function F.mse_loss(input, target, opts)
  opts = check.options(opts, "mse_loss", MSE_OPTS)
  check.tensor(input, "mse_loss", "input")
  check.tensor(target, "mse_loss", "target")
  if shape_str(input) ~= shape_str(target) then
    check.error("mse_loss: input has shape " .. shape_str(input) .. " but target has shape " .. shape_str(target))
  end
  return dle.mse_loss(input, target, {reduction = opts and opts.reduction})
end

--- binary_cross_entropy_with_logits(x, y, opts): stable
-- max(x, 0) - x*y + log1p(exp(-|x|)); with pos_weight w the positive term is weighted:
-- (1 - y) * x + (1 + (w - 1) * y) * (log1p(exp(-|x|)) + max(-x, 0)). One fused op forward and
-- backward (gradients in x, y and pos_weight).
-- @param opts optional {reduction = "mean"|"sum"|"none", pos_weight = tensor or number}; a tensor
--   broadcasts to x's shape (a weight per class of the last dim: {C} for x {N, C})
-- @return scalar tensor, or elementwise losses for reduction "none"
function F.binary_cross_entropy_with_logits(x, y, opts)
  opts = check.options(opts, "binary_cross_entropy_with_logits", BCE_OPTS)
  check.tensor(x, "binary_cross_entropy_with_logits", "input")
  check.tensor(y, "binary_cross_entropy_with_logits", "target")
  if shape_str(x) ~= shape_str(y) then
    check.error("binary_cross_entropy_with_logits: input has shape " .. shape_str(x) .. " but target has shape "
                .. shape_str(y))
  end
  return dle.binary_cross_entropy_with_logits(x, y, {reduction = opts and opts.reduction,
    pos_weight = opts and opts.pos_weight})
end

--- F.pad(x, pads, {mode = "constant" | "reflect" | "replicate" | "circular", value = 0}): x
-- padded on its last #pads / 2 dims, pads listed from the last dim backward as PyTorch does
-- ({left, right} of the last dim, then {top, bottom} of the one before...); negative pads crop in
-- mode "constant"; at most 4 dims (reflect, replicate, circular: pads below, at most, and at most
-- the dim's size; a non-empty dim). Differentiable; one copy (the op pad, engine/ops/arrange.c).
function F.pad(x, pads, opts) return dle.core._pad(check.tensor(x, "pad", "input"), pads, opts) end

-- The other families live in functional_<part>.lua, each returning its functions; F gathers them
-- here, so that require("dle.nn.functional") alone gives every function. A part may call F's
-- functions (F.pad, F.max_pool2d...) at run time, so F is registered before the parts load.
-- Names starting with "_" are the parts' internal helpers and stay out of F.
package.loaded["dle.nn.functional"] = F
for _, part in ipairs({"activations", "conv", "convnd", "pool", "norm", "resample", "losses", "margin", "ctc"}) do
  for name, fn in pairs(require("dle.nn.functional_" .. part)) do
    if not name:match("^_") then F[name] = fn end
  end
end

return F
