--- dle.optim.AdamW: Adam with decoupled weight decay (p <- p * (1 - lr * weight_decay) before the
-- Adam update, instead of adding weight_decay * p to the gradient); weight_decay defaults to
-- 1e-2 (the algorithm is dle.optim.functional.adamw).
local Optimizer = require("dle.optim.optimizer")
local functional = require("dle.optim.functional")

return Optimizer.extend("AdamW", functional.algorithms.adamw)
