--- dle.optim.functional: the optimizer steps as plain functions over explicit state, Torch7's
-- habit: `adam(params, grads, state, opts)` updates params in place from grads, keeping what it
-- carries between steps in the table `state`, which belongs to the caller (save it with dle.save,
-- resume by passing it back). The optimizer classes (dle.optim.SGD, Adam, ...) are built on these
-- algorithms: a class adds param groups, `.grad` handling, state_dict and the lr property.
--
--   local F = dle.optim.functional
--   local state = {}
--   for step = 1, n do
--     local grads = dle.grad(loss(params), params)
--     F.adam(params, grads, state, {lr = 1e-3})
--   end
--
-- Every step is one fused C loop per param (dle.core.<name>_step). params: a tensor or a list of
-- float tensors; grads: a tensor or a list of the same length (a nil entry skips that param; in a
-- list with holes give the length as grads.n, as table.pack does); state: a table, state[i] holds
-- param i's step count and buffers (made on first use, in float32, or float64 for float64 params);
-- opts: hyperparameters, each defaulting as in the class of the same name. An unknown option, a
-- bad value, a gradient of another shape are errors naming the function.
local core = require("dle.core")
local dle = require("dle")
local check = require("dle.check")

local M = {}

-- The dtype of optimizer state for param p: float64 for float64, float32 otherwise.
local function state_dtype(p)
  return p:dtype() == "float64" and "float64" or "float32"
end

local function zeros_state(p)
  return dle.zeros_like(p, {dtype = state_dtype(p)})
end

-- A finite number >= 0 (and < hi when given).
local function check_number(name, h, key, hi)
  local v = h[key]
  if type(v) ~= "number" or v ~= v or v < 0 or v == math.huge or (hi and v >= hi) then
    check.error(string.format("%s: invalid %s %s (expected a number >= 0%s)", name, key, tostring(v),
      hi and (" and < " .. hi) or ""))
  end
end

local function check_boolean(name, h, key)
  if type(h[key]) ~= "boolean" then
    check.error(string.format("%s: %s must be a boolean, got %s", name, key, type(h[key])))
  end
end

--- The algorithms, by name: each has
--   defaults        every hyperparameter and its default (the accepted options)
--   state_tensors   names of the tensors a param's state may hold (besides the number `step`)
--   check(h, name)  validates hyperparameters h, errors naming `name`
--   update(p, g, st, h)  one step of param p with gradient g (contiguous, p's dtype), state st
M.algorithms = {}

M.algorithms.sgd = {
  fused = true,   -- one C step (a node of a compiled training step, dle.graph.train)
  defaults = {lr = 1e-3, momentum = 0, dampening = 0, nesterov = false, weight_decay = 0},
  state_tensors = {"momentum_buffer"},
  check = function(h, name)
    for _, k in ipairs {"lr", "momentum", "dampening", "weight_decay"} do check_number(name, h, k) end
    check_boolean(name, h, "nesterov")
    if h.nesterov and (h.momentum <= 0 or h.dampening ~= 0) then
      check.error(name .. ": nesterov needs momentum > 0 and dampening 0")
    end
  end,
  update = function(p, g, st, h)
    local first = false
    if h.momentum ~= 0 and st.momentum_buffer == nil then
      st.momentum_buffer = zeros_state(p)
      first = true
    end
    st.step = st.step + 1
    core._sgd_step(p, g, {lr = h.lr, momentum = h.momentum, dampening = h.dampening,
      nesterov = h.nesterov, weight_decay = h.weight_decay, first = first,
      momentum_buffer = st.momentum_buffer})
  end,
}

M.algorithms.adagrad = {
  fused = true,
  defaults = {lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10},
  state_tensors = {"sum"},
  check = function(h, name)
    for _, k in ipairs {"lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"} do
      check_number(name, h, k)
    end
  end,
  update = function(p, g, st, h)
    if st.sum == nil then
      st.sum = zeros_state(p)
      if h.initial_accumulator_value ~= 0 then st.sum:fill_(h.initial_accumulator_value) end
    end
    st.step = st.step + 1
    core._adagrad_step(p, g, st.sum, {lr = h.lr, step = st.step, lr_decay = h.lr_decay,
      weight_decay = h.weight_decay, eps = h.eps})
  end,
}

M.algorithms.rmsprop = {
  fused = true,
  defaults = {lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0, centered = false},
  state_tensors = {"square_avg", "momentum_buffer", "grad_avg"},
  check = function(h, name)
    for _, k in ipairs {"lr", "eps", "weight_decay", "momentum", "alpha"} do check_number(name, h, k) end
    if h.alpha > 1 then check.error(name .. ": alpha must be in [0, 1], got " .. h.alpha) end
    check_boolean(name, h, "centered")
  end,
  update = function(p, g, st, h)
    st.square_avg = st.square_avg or zeros_state(p)
    if h.momentum > 0 then st.momentum_buffer = st.momentum_buffer or zeros_state(p) end
    if h.centered then st.grad_avg = st.grad_avg or zeros_state(p) end
    st.step = st.step + 1
    core._rmsprop_step(p, g, st.square_avg, {lr = h.lr, alpha = h.alpha, eps = h.eps,
      weight_decay = h.weight_decay, momentum = h.momentum, centered = h.centered,
      momentum_buffer = st.momentum_buffer, grad_avg = st.grad_avg})
  end,
}

-- lr, eps and weight_decay finite and >= 0, betas = {b1, b2} both in [0, 1): the Adam family's.
local function check_lr_eps_wd_betas(h, name)
  for _, k in ipairs {"lr", "eps", "weight_decay"} do check_number(name, h, k) end
  local b = h.betas
  if type(b) ~= "table" or type(b[1]) ~= "number" or type(b[2]) ~= "number" or
      not (b[1] >= 0 and b[1] < 1 and b[2] >= 0 and b[2] < 1) then
    check.error(name .. ": betas must be {b1, b2} with both in [0, 1)")
  end
end

-- Adam and AdamW share the step; AdamW decays the weights decoupled from the gradient
-- (p <- p * (1 - lr * weight_decay) before the Adam update).
local function adam_algorithm(weight_decay, decoupled)
  return {
    fused = true,
    defaults = {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = weight_decay, amsgrad = false},
    state_tensors = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    check = function(h, name)
      check_lr_eps_wd_betas(h, name)
      check_boolean(name, h, "amsgrad")
    end,
    update = function(p, g, st, h)
      st.exp_avg = st.exp_avg or zeros_state(p)
      st.exp_avg_sq = st.exp_avg_sq or zeros_state(p)
      if h.amsgrad then st.max_exp_avg_sq = st.max_exp_avg_sq or zeros_state(p) end
      st.step = st.step + 1
      core._adam_step(p, g, st.exp_avg, st.exp_avg_sq, {lr = h.lr, step = st.step,
        beta1 = h.betas[1], beta2 = h.betas[2], eps = h.eps, weight_decay = h.weight_decay,
        amsgrad = h.amsgrad, decoupled = decoupled, max_exp_avg_sq = st.max_exp_avg_sq})
    end,
  }
end
M.algorithms.adam = adam_algorithm(0, false)
M.algorithms.adamw = adam_algorithm(1e-2, true)

-- Adamax, NAdam and RAdam are composed of tensor ops (no fused C step): the param and gradient in
-- the state dtype (a float32 copy of a float16 / bfloat16 param, written back by finish).
local function working(p, g)
  local sdt = state_dtype(p)
  if p:dtype() == sdt then return p, g, nil end
  return p:to(sdt), g:to(sdt), p
end
local function finish(orig, pw) if orig then orig:copy_(pw) end end

-- exp_avg <- b1 exp_avg + (1 - b1) g; exp_avg_sq <- b2 exp_avg_sq + (1 - b2) g^2.
local function update_moments(st, gw, b1, b2)
  st.exp_avg:mul_(b1):add_(gw * (1 - b1))
  if b2 then st.exp_avg_sq:mul_(b2):add_(gw * gw * (1 - b2)) end
end

-- An Adamax / NAdam / RAdam algorithm: the Adam family's defaults (with this lr) and checks, plus
-- the number hyperparameters in extra; the state's exp_avg and second buffer (named second) made
-- on first use, the step counted, L2 weight decay added to the working gradient; then
-- move(pw, gw, st, h, b1, b2) updates the working param pw, which is written back (see working).
local function composed_adam(lr, second, extra, move)
  local defaults = {lr = lr, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0}
  for k, v in pairs(extra) do defaults[k] = v end
  return {
    defaults = defaults,
    state_tensors = {"exp_avg", second},
    check = function(h, name)
      check_lr_eps_wd_betas(h, name)
      for k in pairs(extra) do check_number(name, h, k) end
    end,
    update = function(p, g, st, h)
      local pw, gw, orig = working(p, g)
      st.exp_avg = st.exp_avg or zeros_state(p)
      st[second] = st[second] or zeros_state(p)
      st.step = st.step + 1
      if h.weight_decay ~= 0 then gw = gw + pw * h.weight_decay end
      move(pw, gw, st, h, h.betas[1], h.betas[2])
      finish(orig, pw)
    end,
  }
end

M.algorithms.adamax = composed_adam(2e-3, "exp_inf", {}, function(pw, gw, st, h, b1, b2)
  update_moments(st, gw, b1)
  st.exp_inf:mul_(b2):maximum_(gw:abs() + h.eps)
  pw:sub_(st.exp_avg / st.exp_inf * (h.lr / (1 - b1 ^ st.step)))
end)

M.algorithms.nadam = composed_adam(2e-3, "exp_avg_sq", {momentum_decay = 4e-3}, function(pw, gw, st, h, b1, b2)
  local t = st.step
  local function mu_at(k) return b1 * (1 - 0.5 * 0.96 ^ (k * h.momentum_decay)) end
  if st.mu_product == nil then
    -- the product of the earlier steps' mu (a state that holds only the step and the tensors,
    -- as a ZeroRedundancyOptimizer consolidates it, resumes exactly)
    st.mu_product = 1
    for k = 1, t - 1 do st.mu_product = st.mu_product * mu_at(k) end
  end
  local mu, mu_next = mu_at(t), mu_at(t + 1)
  st.mu_product = st.mu_product * mu
  local mu_product_next = st.mu_product * mu_next
  update_moments(st, gw, b1, b2)
  local denom = (st.exp_avg_sq / (1 - b2 ^ t)):sqrt():add_(h.eps)
  pw:sub_(gw / denom * (h.lr * (1 - mu) / (1 - st.mu_product)))
  pw:sub_(st.exp_avg / denom * (h.lr * mu_next / (1 - mu_product_next)))
end)

M.algorithms.radam = composed_adam(1e-3, "exp_avg_sq", {}, function(pw, gw, st, h, b1, b2)
  local t = st.step
  update_moments(st, gw, b1, b2)
  local bc1, bc2 = 1 - b1 ^ t, 1 - b2 ^ t
  -- the length of the approximated simple moving average; the variance is rectified only
  -- once it exceeds 5 (before, the step is plain momentum SGD)
  local rho_inf = 2 / (1 - b2) - 1
  local rho_t = rho_inf - 2 * t * b2 ^ t / bc2
  if rho_t > 5 then
    local rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
    pw:sub_(st.exp_avg / st.exp_avg_sq:sqrt():add_(h.eps) * (h.lr / bc1 * rect * math.sqrt(bc2)))
  else
    pw:sub_(st.exp_avg * (h.lr / bc1))
  end
end)

--- A hyperparameter value copied one level deep (betas = {b1, b2} is a table).
function M.copy_value(v)
  if type(v) ~= "table" then return v end
  local r = {}
  for k, x in pairs(v) do r[k] = x end
  return r
end

--- The hyperparameters of opts over the algorithm's defaults, checked; unknown keys are errors.
-- @param alg an entry of M.algorithms
-- @param opts table or nil
-- @param name the function or class name for messages
-- @return a new table
function M.hyperparameters(alg, opts, name)
  if not alg.known then
    alg.known = {}
    for k in pairs(alg.defaults) do alg.known[#alg.known + 1] = k end
    table.sort(alg.known)
  end
  local h = {}
  for k, v in pairs(alg.defaults) do h[k] = M.copy_value(v) end
  for k, v in pairs(check.options(opts, name, alg.known)) do h[k] = M.copy_value(v) end
  alg.check(h, name)
  return h
end

--- The gradient g of param p (number `index` for messages) as a step takes it: detached from
-- history is required, contiguous and in p's dtype are made.
function M.step_gradient(p, g, index, name)
  if not dle.is_tensor(g) then
    check.error(string.format("%s: the gradient of param %d is a %s, not a tensor", name, index, check.typename(g)))
  end
  if g.requires_grad then
    check.error(string.format("%s: the gradient of param %d requires grad; detach it", name, index))
  end
  if check.shape_str(g) ~= check.shape_str(p) then
    check.error(string.format("%s: the gradient of param %d has shape %s, the param %s", name, index,
      check.shape_str(g), check.shape_str(p)))
  end
  if not g:is_contiguous() then g = g:contiguous() end
  if g:dtype() ~= p:dtype() then g = g:to(p:dtype()) end
  return g
end

-- One step of the named algorithm over lists (see the header).
local function step(key, fname, params, grads, state, opts)
  local alg = M.algorithms[key]
  local h = M.hyperparameters(alg, opts, fname)
  if dle.is_tensor(params) then params, grads = {params}, {grads} end
  if type(params) ~= "table" then
    check.error(fname .. ": params must be a tensor or a list of tensors, got " .. check.typename(params))
  end
  if type(grads) ~= "table" then
    check.error(fname .. ": grads must be a tensor or a list of tensors, got " .. check.typename(grads))
  end
  if type(state) ~= "table" then
    check.error(fname .. ": state must be a table (empty at the first step), got " .. check.typename(state))
  end
  local n = grads.n or #grads
  if n ~= #params then
    check.error(string.format("%s: %d params but %d grads", fname, #params, n))
  end
  for i, p in ipairs(params) do
    if not dle.is_tensor(p) or not p:is_floating_point() then
      check.error(string.format("%s: param %d must be a float tensor, got %s", fname, i,
        dle.is_tensor(p) and p:dtype() or check.typename(p)))
    end
  end
  dle.no_grad(function()
    for i, p in ipairs(params) do
      if grads[i] ~= nil then
        local g = M.step_gradient(p, grads[i], i, fname)
        local st = state[i]
        if st == nil then
          st = {step = 0}
          state[i] = st
        end
        alg.update(p, g, st, h)
      end
    end
  end)
  return params
end

-- The public function `fname` running the algorithm `key`.
local function public(key, fname)
  return function(params, grads, state, opts) return step(key, fname, params, grads, state, opts) end
end

--- sgd(params, grads, state, opts): stochastic gradient descent with momentum, dampening, Nesterov
-- momentum and L2 weight decay, as dle.optim.SGD (opts: lr = 1e-3, momentum = 0, dampening = 0,
-- nesterov = false, weight_decay = 0). Returns params.
M.sgd = public("sgd", "optim.functional.sgd")

--- adagrad(params, grads, state, opts): per-element learning rates from the running sum of squared
-- gradients, as dle.optim.Adagrad (opts: lr = 1e-2, lr_decay = 0, weight_decay = 0,
-- initial_accumulator_value = 0, eps = 1e-10). Returns params.
M.adagrad = public("adagrad", "optim.functional.adagrad")

--- rmsprop(params, grads, state, opts): gradients scaled by a running RMS, as dle.optim.RMSprop
-- (opts: lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0, centered = false).
-- Returns params.
M.rmsprop = public("rmsprop", "optim.functional.rmsprop")

--- adam(params, grads, state, opts): adaptive moments with bias correction and L2 weight decay, as
-- dle.optim.Adam (opts: lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0,
-- amsgrad = false). Returns params.
M.adam = public("adam", "optim.functional.adam")

--- adamw(params, grads, state, opts): Adam with decoupled weight decay, as dle.optim.AdamW (opts as
-- adam, but weight_decay = 1e-2). Returns params.
M.adamw = public("adamw", "optim.functional.adamw")

--- adamax(params, grads, state, opts): Adam with the infinity norm in place of the second moment,
-- as dle.optim.Adamax (opts: lr = 2e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0).
-- Returns params.
M.adamax = public("adamax", "optim.functional.adamax")
--- nadam(params, grads, state, opts): Adam with Nesterov momentum and momentum decay, as
-- dle.optim.NAdam (opts: lr = 2e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0,
-- momentum_decay = 4e-3). Returns params.
M.nadam = public("nadam", "optim.functional.nadam")
--- radam(params, grads, state, opts): Adam with the variance rectification of Liu et al., as
-- dle.optim.RAdam (opts: lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0).
-- Returns params.
M.radam = public("radam", "optim.functional.radam")
-- Errors from dle's own lines are reported at the user's line (check.public).
return check.export(M, {copy_value = true, hyperparameters = true, step_gradient = true})
