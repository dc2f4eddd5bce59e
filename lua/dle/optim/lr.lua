--- dle.optim.lr: learning-rate schedulers. Each one remembers the optimizer's lr per param group
-- as its base, sets the lr for step 0 when made, and on :step() advances one step and sets the
-- lr of every group. Call sched:step() after opt:step(), once per optimizer step:
--   local sched = dle.optim.lr.cosine(opt, {warmup = 100, total = 10000, min_lr = 1e-5})
--   for it = 1, 10000 do ...; opt:step(); sched:step() end
local check = require "dle.check"

local Scheduler = {}
Scheduler.__index = Scheduler

local function new(opt, name, lr_at)
  if type(opt) ~= "table" or type(opt.param_groups) ~= "table" then
    check.error("lr." .. name .. ": expected an optimizer as first argument")
  end
  local self = setmetatable({optimizer = opt, name = name, last_step = 0, base_lrs = {},
    lr_at = lr_at}, Scheduler)
  for i, group in ipairs(opt.param_groups) do self.base_lrs[i] = group.lr end
  self:_apply()
  return self
end

function Scheduler:_apply()
  for i, group in ipairs(self.optimizer.param_groups) do
    group.lr = self.lr_at(self.base_lrs[i], self.last_step)
  end
end

--- Advances one step and sets the optimizers' lr.
-- @return the new lr (of the first param group)
function Scheduler:step()
  self.last_step = self.last_step + 1
  self:_apply()
  return self:get_lr()
end

--- The lr (of the first param group) at step t (default: the current step).
-- @param t optional step number (0 = before any :step())
-- @return number
function Scheduler:get_lr(t)
  return self.lr_at(self.base_lrs[1], t or self.last_step)
end

--- The scheduler's position as a plain table {last_step, base_lrs}.
function Scheduler:state_dict()
  local b = {}
  for i, v in ipairs(self.base_lrs) do b[i] = v end
  return {last_step = self.last_step, base_lrs = b}
end

--- Restores a state_dict() and sets the optimizer's lr accordingly.
-- @param sd table from state_dict()
function Scheduler:load_state_dict(sd)
  if type(sd) ~= "table" or math.type(sd.last_step) ~= "integer" or type(sd.base_lrs) ~= "table" then
    check.error("lr." .. self.name .. ": load_state_dict expects {last_step = int, base_lrs = {...}}")
  end
  self.last_step = sd.last_step
  for i, v in ipairs(sd.base_lrs) do self.base_lrs[i] = v end
  self:_apply()
end

local function check_int(name, opts, key, min, required, default)
  local v = opts[key]
  if v == nil and not required then return default end
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) then
    check.error(string.format("lr.%s: %s must be an integer, got %s", name, key, tostring(v)))
  end
  if v < min then check.error(string.format("lr.%s: %s must be >= %d, got %d", name, key, min, v)) end
  return math.tointeger(v)
end

local lr = {Scheduler = Scheduler}

--- Linear warmup from 0 to the base lr over `warmup` steps, then a cosine decay to min_lr at
-- step `total` (and min_lr afterwards): lr(t) = base * t / warmup for t < warmup, else
-- min_lr + (base - min_lr) * (1 + cos(pi * (t - warmup) / (total - warmup))) / 2.
-- @param opt optimizer
-- @param opts {warmup = 0, total = (required, > warmup), min_lr = 0}
-- @return scheduler
function lr.cosine(opt, opts)
  opts = check.options(opts, "lr.cosine", {"warmup", "total", "min_lr"})
  local warmup = check_int("cosine", opts, "warmup", 0, false, 0)
  local total = check_int("cosine", opts, "total", 1, true)
  local min_lr = opts.min_lr or 0
  if total <= warmup then
    check.error(string.format("lr.cosine: total (%d) must be larger than warmup (%d)", total, warmup))
  end
  if type(min_lr) ~= "number" or min_lr < 0 then
    check.error("lr.cosine: min_lr must be a number >= 0, got " .. tostring(min_lr))
  end
  return new(opt, "cosine", function(base, t)
    if t < warmup then return base * t / warmup end
    if t >= total then return min_lr end
    local progress = (t - warmup) / (total - warmup)
    return min_lr + (base - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))
  end)
end

--- Step decay: lr(t) = base * gamma ^ floor(t / step_size).
-- @param opt optimizer
-- @param opts {step_size = (required, >= 1), gamma = 0.1}
-- @return scheduler
function lr.step(opt, opts)
  opts = check.options(opts, "lr.step", {"step_size", "gamma"})
  local step_size = check_int("step", opts, "step_size", 1, true)
  local gamma = opts.gamma or 0.1
  if type(gamma) ~= "number" or gamma < 0 then
    check.error("lr.step: gamma must be a number >= 0, got " .. tostring(gamma))
  end
  return new(opt, "step", function(base, t) return base * gamma ^ (t // step_size) end)
end

check.export(Scheduler)
return check.export(lr)
