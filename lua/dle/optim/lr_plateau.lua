--- dle.optim.lr.reduce_lr_on_plateau (PyTorch's ReduceLROnPlateau): multiplies the lrs by factor
-- once a metric has not improved for more than `patience` steps. Unlike the other schedulers it
-- has no closed form: `sched:step(metric)` after each evaluation.
--   local sched = dle.optim.lr.reduce_lr_on_plateau(opt, {patience = 2})
--   for epoch = 1, n do train(); sched:step(validation_loss()) end
local check = require("dle.check")
local S = require("dle.optim.scheduler")

local Plateau = {}
Plateau.__index = Plateau

local OPTS = {"mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps"}
local NAME = "reduce_lr_on_plateau"

--- Whether metric a improves on best (mode "min" or "max", threshold relative or absolute).
function Plateau:is_better(a, best)
  if self.mode == "min" then
    if self.threshold_mode == "rel" then return a < best * (1 - self.threshold) end
    return a < best - self.threshold
  end
  if self.threshold_mode == "rel" then return a > best * (1 + self.threshold) end
  return a > best + self.threshold
end

--- Takes one metric value (a number or a one-element tensor): counts a bad step when it does not
-- improve on the best so far; after more than patience bad steps (outside the cooldown) every
-- group's lr becomes max(lr * factor, min_lr) (a change smaller than eps is skipped).
-- @return the lr of the first param group
function Plateau:step(metric)
  if type(metric) ~= "number" then
    if require("dle").is_tensor(metric) and metric:numel() == 1 then
      metric = metric:item()
    else
      check.error("lr." .. NAME .. ": step expects the metric (a number or a one-element tensor), got "
        .. check.typename(metric))
    end
  end
  self.last_step = self.last_step + 1
  if self:is_better(metric, self.best) then
    self.best, self.num_bad = metric, 0
  else
    self.num_bad = self.num_bad + 1
  end
  if self.cooldown_counter > 0 then
    self.cooldown_counter = self.cooldown_counter - 1
    self.num_bad = 0
  end
  if self.num_bad > self.patience then
    for i, group in ipairs(self.optimizer.param_groups) do
      local new_lr = math.max(group.lr * self.factor, self.min_lrs[i])
      if group.lr - new_lr > self.eps then group.lr = new_lr end
    end
    self.cooldown_counter, self.num_bad = self.cooldown, 0
  end
  return self:get_lr()
end

--- The lr of the first param group.
function Plateau:get_lr() return self.optimizer.param_groups[1].lr end

local STATE = {"last_step", "best", "num_bad", "cooldown_counter"}

--- The scheduler's counters as a plain table {last_step, best, num_bad, cooldown_counter}.
function Plateau:state_dict()
  local sd = {}
  for _, k in ipairs(STATE) do sd[k] = self[k] end
  return sd
end

--- Restores a state_dict() (the optimizer's lrs are the optimizer's own state).
function Plateau:load_state_dict(sd)
  if type(sd) ~= "table" then check.error("lr." .. NAME .. ": load_state_dict expects a table") end
  for _, k in ipairs(STATE) do
    if type(sd[k]) ~= "number" then check.error("lr." .. NAME .. ": load_state_dict: " .. k .. " must be a number") end
  end
  for _, k in ipairs(STATE) do self[k] = sd[k] end
end

--- reduce_lr_on_plateau(opt, opts): see the file header.
-- @param opts {mode = "min"|"max", factor = 0.1 (< 1), patience = 10, threshold = 1e-4,
--   threshold_mode = "rel"|"abs", cooldown = 0, min_lr = 0 (or one per group), eps = 1e-8}
-- @return scheduler with step(metric), get_lr(), state_dict(), load_state_dict()
local function reduce_lr_on_plateau(opt, opts)
  opts = check.options(opts, "lr." .. NAME, OPTS)
  S.check_optimizer(opt, NAME)
  local mode = opts.mode or "min"
  if mode ~= "min" and mode ~= "max" then
    check.error("lr." .. NAME .. ": mode must be \"min\" or \"max\", got " .. tostring(mode))
  end
  local tmode = opts.threshold_mode or "rel"
  if tmode ~= "rel" and tmode ~= "abs" then
    check.error("lr." .. NAME .. ": threshold_mode must be \"rel\" or \"abs\", got " .. tostring(tmode))
  end
  local nonneg = function(v) return v >= 0 end
  local self = setmetatable({
    optimizer = opt, name = NAME, mode = mode, threshold_mode = tmode,
    factor = S.check_num(NAME, opts, "factor", 0.1, function(v) return v >= 0 and v < 1 end, "a number in [0, 1)"),
    patience = S.check_int(NAME, opts, "patience", 0, false, 10),
    threshold = S.check_num(NAME, opts, "threshold", 1e-4, nonneg, "a number >= 0"),
    cooldown = S.check_int(NAME, opts, "cooldown", 0, false, 0),
    eps = S.check_num(NAME, opts, "eps", 1e-8, nonneg, "a number >= 0"),
    min_lrs = S.per_group(NAME, "min_lr", opts.min_lr or 0, opt, "number"),
    last_step = 0, num_bad = 0, cooldown_counter = 0,
  }, Plateau)
  self.best = mode == "min" and math.huge or -math.huge
  return self
end

check.export(Plateau)
return reduce_lr_on_plateau
