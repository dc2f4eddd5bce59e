--- dle.optim.lr: learning-rate schedulers. Each one remembers the optimizer's lr per param group
-- as its base, sets the lr for step 0 when made, and on :step() advances one step and sets the
-- lr of every group. Call sched:step() after opt:step(), once per optimizer step:
--   local sched = dle.optim.lr.cosine(opt, {warmup = 100, total = 10000, min_lr = 1e-5})
--   for it = 1, 10000 do ...; opt:step(); sched:step() end
-- Here: cosine and step; PyTorch's LambdaLR, MultiplicativeLR, ExponentialLR, LinearLR,
-- OneCycleLR, CosineAnnealingWarmRestarts and SequentialLR are lr.lambda, lr.multiplicative,
-- lr.exponential, lr.linear, lr.one_cycle, lr.cosine_warm_restarts and lr.sequential
-- (dle.optim.lr_more); ReduceLROnPlateau is lr.reduce_lr_on_plateau (dle.optim.lr_plateau).
local check = require("dle.check")

local S = require("dle.optim.scheduler")
local Scheduler, new, check_int = S.Scheduler, S.new, S.check_int

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

for name, fn in pairs(require("dle.optim.lr_more")) do lr[name] = fn end
lr.reduce_lr_on_plateau = require("dle.optim.lr_plateau")
lr.chained = require("dle.optim.lr_chained")

check.export(Scheduler)
return check.export(lr)
