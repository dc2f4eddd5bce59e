--- lr.chained(opt, {schedulers}): PyTorch's ChainedScheduler: every scheduler steps together and
-- their factors multiply, lr = base * prod_k (lr_k(t) / base_k). The schedulers must have been
-- made on opt. This is PyTorch's chained result for the schedulers whose lr is the base times a
-- factor of the step (step, exponential, linear, lambda, multiplicative, one_cycle's phases are
-- not: cosine-type schedulers chain by their recursive form in PyTorch, which this does not copy).
local check = require("dle.check")
local S = require("dle.optim.scheduler")

--- chained(opt, {schedulers = {s1, s2, ...}}) (ChainedScheduler).
-- @param opts {schedulers = list of schedulers of opt}
-- @return scheduler
return function(opt, opts)
  opts = check.options(opts, "lr.chained", {"schedulers"})
  S.check_optimizer(opt, "chained")
  local scheds = opts.schedulers
  if type(scheds) ~= "table" or #scheds == 0 then check.error("lr.chained: schedulers must be a non-empty list") end
  for k, s in ipairs(scheds) do
    if getmetatable(s) ~= S.Scheduler or s.optimizer ~= opt then
      check.error("lr.chained: scheduler " .. k .. " is not a scheduler of this optimizer")
    end
  end
  return S.new(opt, "chained", function(base, t, i)
    local lr = base
    for _, s in ipairs(scheds) do
      local b = s.base_lrs[i]
      lr = lr * (b ~= 0 and s.lr_at(b, t, i) / b or 0)
    end
    return lr
  end)
end
