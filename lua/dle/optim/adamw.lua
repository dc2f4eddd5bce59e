--- dle.optim.AdamW: Adam with decoupled weight decay (p <- p * (1 - lr * weight_decay) before the
-- Adam update, instead of adding weight_decay * p to the gradient); weight_decay defaults to
-- 1e-2. Same fused C step as Adam (dle.core.adam_step with decoupled = true).
local Optimizer = require "dle.optim.optimizer"
local Adam = require "dle.optim.adam"

local AdamW = Optimizer.extend("AdamW", {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8,
  weight_decay = 1e-2, amsgrad = false})
AdamW.state_tensors = Adam.state_tensors
AdamW.decoupled = true
AdamW.update = Adam.update

--- Validates a group's hyperparameters.
-- @param group param group table
function AdamW.check(group) Adam.check(group, "AdamW") end

return AdamW
