--- dle.optim.NAdam: Adam with Nesterov momentum and PyTorch's momentum_decay schedule (lr = 2e-3,
-- betas, eps, weight_decay, momentum_decay = 4e-3).
-- The step is composed of tensor ops (the algorithm is dle.optim.functional.nadam); a fused C step like
-- Adam's would save its temporaries.
local Optimizer = require("dle.optim.optimizer")
local functional = require("dle.optim.functional")
return Optimizer.extend("NAdam", functional.algorithms.nadam)
