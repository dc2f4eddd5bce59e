--- The PyTorch schedulers of dle.optim.lr with closed forms (dle.optim.lr adds these functions):
-- lambda (LambdaLR), multiplicative (MultiplicativeLR), exponential (ExponentialLR), linear
-- (LinearLR), one_cycle (OneCycleLR), cosine_warm_restarts (CosineAnnealingWarmRestarts) and
-- sequential (SequentialLR). Each sets group lrs from a formula of the step count and the base
-- lrs (see dle.optim.scheduler), giving the lrs PyTorch's chained updates give.
local check = require("dle.check")
local S = require("dle.optim.scheduler")

local M = {}
local new, check_int, check_num, per_group = S.new, S.check_int, S.check_num, S.per_group

local function any_number() return true end
local function nonneg(v) return v >= 0 end

-- f(t) checked to be a number.
local function factor(name, f, t)
  local v = f(t)
  if type(v) ~= "number" then
    check.error(string.format("lr.%s: lr_lambda(%d) returned a %s, expected a number", name, t, check.typename(v)))
  end
  return v
end

--- lambda(opt, {lr_lambda}): lr = base * lr_lambda(t) at step t (PyTorch's LambdaLR).
-- @param opts {lr_lambda = function(t) -> factor, or a list of one per param group}
-- @return scheduler
function M.lambda(opt, opts)
  opts = check.options(opts, "lr.lambda", {"lr_lambda"})
  S.check_optimizer(opt, "lambda")
  local fs = per_group("lambda", "lr_lambda", opts.lr_lambda, opt, "function")
  return new(opt, "lambda", function(base, t, i) return base * factor("lambda", fs[i], t) end)
end

--- multiplicative(opt, {lr_lambda}): the lr is multiplied by lr_lambda(t) at each step t >= 1, so
-- lr = base * lr_lambda(1) * ... * lr_lambda(t) (PyTorch's MultiplicativeLR). The products are
-- kept, so each step calls lr_lambda once.
-- @param opts {lr_lambda = function(t) -> factor, or a list of one per param group}
-- @return scheduler
function M.multiplicative(opt, opts)
  opts = check.options(opts, "lr.multiplicative", {"lr_lambda"})
  S.check_optimizer(opt, "multiplicative")
  local fs = per_group("multiplicative", "lr_lambda", opts.lr_lambda, opt, "function")
  local products = {}   -- products[i][t + 1] = lr_lambda(1) * ... * lr_lambda(t) for group i
  for i = 1, #fs do products[i] = {1} end
  return new(opt, "multiplicative", function(base, t, i)
    local p = products[i]
    for k = #p, t do p[k + 1] = p[k] * factor("multiplicative", fs[i], k) end
    return base * p[t + 1]
  end)
end

--- exponential(opt, {gamma}): lr = base * gamma ^ t (PyTorch's ExponentialLR).
-- @param opts {gamma = (required, >= 0)}
-- @return scheduler
function M.exponential(opt, opts)
  opts = check.options(opts, "lr.exponential", {"gamma"})
  if opts.gamma == nil then check.error("lr.exponential: gamma is required") end
  local gamma = check_num("exponential", opts, "gamma", nil, nonneg, "a number >= 0")
  return new(opt, "exponential", function(base, t) return base * gamma ^ t end)
end

--- linear(opt, opts): the lr factor goes linearly from start_factor to end_factor over
-- total_iters steps, then stays: lr = base * (start + (end - start) * min(t, total_iters) /
-- total_iters) (PyTorch's LinearLR).
-- @param opts {start_factor = 1/3 (in (0, 1]), end_factor = 1 (in [0, 1]), total_iters = 5}
-- @return scheduler
function M.linear(opt, opts)
  opts = check.options(opts, "lr.linear", {"start_factor", "end_factor", "total_iters"})
  local s = check_num("linear", opts, "start_factor", 1 / 3, function(v) return v > 0 and v <= 1 end,
    "a number in (0, 1]")
  local e = check_num("linear", opts, "end_factor", 1, function(v) return v >= 0 and v <= 1 end, "a number in [0, 1]")
  local n = check_int("linear", opts, "total_iters", 1, false, 5)
  return new(opt, "linear", function(base, t) return base * (s + (e - s) * math.min(t, n) / n) end)
end

--- cosine_warm_restarts(opt, opts): cosine annealing from base to eta_min over T_i steps, then a
-- restart at base; the first period is T_0 steps, each next one T_mult times longer
-- (PyTorch's CosineAnnealingWarmRestarts): lr = eta_min + (base - eta_min) (1 + cos(pi T_cur /
-- T_i)) / 2, T_cur the steps since the last restart.
-- @param opts {T_0 = (required, >= 1), T_mult = 1 (integer >= 1), eta_min = 0}
-- @return scheduler
function M.cosine_warm_restarts(opt, opts)
  opts = check.options(opts, "lr.cosine_warm_restarts", {"T_0", "T_mult", "eta_min"})
  local t0 = check_int("cosine_warm_restarts", opts, "T_0", 1, true)
  local mult = check_int("cosine_warm_restarts", opts, "T_mult", 1, false, 1)
  local eta_min = check_num("cosine_warm_restarts", opts, "eta_min", 0, any_number, "a number")
  return new(opt, "cosine_warm_restarts", function(base, t)
    local period = t0
    while t >= period do
      t = t - period
      period = period * mult
    end
    return eta_min + (base - eta_min) * (1 + math.cos(math.pi * t / period)) / 2
  end)
end

local ONE_CYCLE_OPTS = {"max_lr", "total_steps", "epochs", "steps_per_epoch", "pct_start", "anneal_strategy",
  "cycle_momentum", "base_momentum", "max_momentum", "div_factor", "final_div_factor", "three_phase"}

-- The phases of a one-cycle schedule: {end_step, start, stop} where start/stop name the lr
-- ("initial", "max", "min") and momentum ("max_m", "base_m") ends, as PyTorch lays them out.
local function one_cycle_phases(total, pct, three)
  if three then
    return {
      {end_step = pct * total - 1, lr = {"initial", "max"}, m = {"max_m", "base_m"}},
      {end_step = 2 * pct * total - 2, lr = {"max", "initial"}, m = {"base_m", "max_m"}},
      {end_step = total - 1, lr = {"initial", "min"}, m = {"max_m", "max_m"}},
    }
  end
  return {
    {end_step = pct * total - 1, lr = {"initial", "max"}, m = {"max_m", "base_m"}},
    {end_step = total - 1, lr = {"max", "min"}, m = {"base_m", "max_m"}},
  }
end

--- one_cycle(opt, opts): the 1cycle policy (PyTorch's OneCycleLR): the lr rises from max_lr /
-- div_factor to max_lr over the first pct_start of total_steps, then falls to max_lr /
-- div_factor / final_div_factor (three_phase: back to the start first, then down); with
-- cycle_momentum the momentum (SGD's momentum, or Adam's beta1) moves inversely between
-- max_momentum and base_momentum. Stepping past total_steps is an error. The optimizer's own lr
-- is not used.
-- @param opts {max_lr = (required; number or one per group), total_steps (or epochs and
--   steps_per_epoch), pct_start = 0.3, anneal_strategy = "cos"|"linear", cycle_momentum = true,
--   base_momentum = 0.85, max_momentum = 0.95 (numbers or one per group), div_factor = 25,
--   final_div_factor = 1e4, three_phase = false}
-- @return scheduler
function M.one_cycle(opt, opts)
  local name = "one_cycle"
  opts = check.options(opts, "lr.one_cycle", ONE_CYCLE_OPTS)
  S.check_optimizer(opt, name)
  if opts.max_lr == nil then check.error("lr.one_cycle: max_lr is required") end
  local max_lrs = per_group(name, "max_lr", opts.max_lr, opt, "number")
  local total
  if opts.total_steps ~= nil then
    total = check_int(name, opts, "total_steps", 1, true)
  elseif opts.epochs ~= nil and opts.steps_per_epoch ~= nil then
    total = check_int(name, opts, "epochs", 1, true) * check_int(name, opts, "steps_per_epoch", 1, true)
  else
    check.error("lr.one_cycle: give total_steps, or epochs and steps_per_epoch")
  end
  local pct = check_num(name, opts, "pct_start", 0.3, function(v) return v >= 0 and v <= 1 end, "a number in [0, 1]")
  local strategy = opts.anneal_strategy or "cos"
  if strategy ~= "cos" and strategy ~= "linear" then
    check.error("lr.one_cycle: anneal_strategy must be \"cos\" or \"linear\", got " .. tostring(strategy))
  end
  local positive = function(v) return v > 0 end
  local div = check_num(name, opts, "div_factor", 25, positive, "a number > 0")
  local final_div = check_num(name, opts, "final_div_factor", 1e4, positive, "a number > 0")
  local anneal = strategy == "cos"
    and function(a, b, p) return b + (a - b) / 2 * (math.cos(math.pi * p) + 1) end
    or function(a, b, p) return (b - a) * p + a end
  local phases = one_cycle_phases(total, pct, opts.three_phase == true)
  local ends = {}
  for i, m in ipairs(max_lrs) do ends[i] = {max = m, initial = m / div, min = m / div / final_div} end

  -- the phase of step t and how far into it (PyTorch's get_lr loop)
  local function locate(t)
    if t > total then
      check.error(string.format("lr.one_cycle: tried to step %d times; total_steps is %d", t, total))
    end
    local start = 0
    for k, ph in ipairs(phases) do
      if t <= ph.end_step or k == #phases then return ph, (t - start) / (ph.end_step - start) end
      start = ph.end_step
    end
  end

  local on_apply = nil
  if opts.cycle_momentum ~= false then
    local group1 = opt.param_groups[1]
    local use_beta1 = group1.momentum == nil and type(group1.betas) == "table"
    if group1.momentum == nil and not use_beta1 then
      check.error("lr.one_cycle: cycle_momentum needs an optimizer with momentum or betas (or cycle_momentum = false)")
    end
    local base_m = per_group(name, "base_momentum", opts.base_momentum or 0.85, opt, "number")
    local max_m = per_group(name, "max_momentum", opts.max_momentum or 0.95, opt, "number")
    on_apply = function(group, t, i)
      local ph, p = locate(t)
      local vals = {base_m = base_m[i], max_m = max_m[i]}
      local m = anneal(vals[ph.m[1]], vals[ph.m[2]], p)
      if use_beta1 then group.betas = {m, group.betas[2]} else group.momentum = m end
    end
  end
  return new(opt, name, function(_, t, i)
    local ph, p = locate(t)
    return anneal(ends[i][ph.lr[1]], ends[i][ph.lr[2]], p)
  end, on_apply)
end

--- sequential(opt, {schedulers, milestones}): runs schedulers[1] until step milestones[1], then
-- schedulers[2] from its step 0, ... (PyTorch's SequentialLR). The schedulers must have been made
-- on opt (they all start from its lrs when the first was made).
-- @param opts {schedulers = {s1, s2, ...}, milestones = {m1, ...} (increasing, one fewer)}
-- @return scheduler
function M.sequential(opt, opts)
  opts = check.options(opts, "lr.sequential", {"schedulers", "milestones"})
  S.check_optimizer(opt, "sequential")
  local scheds, miles = opts.schedulers, opts.milestones
  if type(scheds) ~= "table" or #scheds == 0 then check.error("lr.sequential: schedulers must be a non-empty list") end
  if type(miles) ~= "table" or #miles ~= #scheds - 1 then
    check.error(string.format("lr.sequential: expected %d milestones (one fewer than schedulers), got %s", #scheds - 1,
      type(miles) == "table" and tostring(#miles) or check.typename(miles)))
  end
  for k, s in ipairs(scheds) do
    if getmetatable(s) ~= S.Scheduler or s.optimizer ~= opt then
      check.error("lr.sequential: scheduler " .. k .. " is not a scheduler of this optimizer")
    end
  end
  for k, m in ipairs(miles) do
    if math.type(m) ~= "integer" or m < 1 or (k > 1 and m <= miles[k - 1]) then
      check.error("lr.sequential: milestones must be increasing integers >= 1")
    end
  end
  return new(opt, "sequential", function(_, t, i)
    local k, start = 1, 0
    while k <= #miles and t >= miles[k] do start = miles[k]; k = k + 1 end
    local s = scheds[k]
    return s.lr_at(s.base_lrs[i], t - start, i)
  end)
end

return M
