--- dle.optim: optimizers (fused C steps over explicit, saveable state) and lr schedulers; the steps
-- themselves as plain functions in dle.optim.functional (Torch7's optim habit).
--   local opt = dle.optim.AdamW(params, {lr = 3e-4})
--   opt:zero_grad(); loss:backward(); opt:step()
--   dle.optim.functional.adamw(params, grads, state, {lr = 3e-4})   -- the same step, state kept by you
local check = require("dle.check")

local optim = {
  lr = require("dle.optim.lr"),
  -- over dle.dist: each rank keeps the state of its share of the params
  ZeroRedundancyOptimizer = require("dle.optim.zero"),
}
-- the base class and the optimizers, each in dle.optim.<its name in lower case>
for _, name in ipairs {"Optimizer", "SGD", "Adagrad", "RMSprop", "Adam", "AdamW", "Adamax", "NAdam", "RAdam",
                       "LBFGS"} do
  optim[name] = require("dle.optim." .. name:lower())
end
-- (not a class: its functions are exported by dle.optim.functional itself)
optim.functional = require("dle.optim.functional")

-- Errors from dle's own lines are reported at the user's line (check.public): the optimizers'
-- methods, the shared ones of Optimizer and each class's own.
for _, cls in pairs(optim) do check.export(cls) end
return optim
