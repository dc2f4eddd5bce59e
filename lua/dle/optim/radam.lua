--- dle.optim.RAdam: rectified Adam: plain momentum steps until the variance estimate is reliable,
-- then Adam steps scaled by the rectification term (PyTorch semantics: lr = 1e-3, betas, eps, weight_decay).
-- The step is composed of tensor ops (the algorithm is dle.optim.functional.radam); a fused C step like
-- Adam's would save its temporaries.
local Optimizer = require("dle.optim.optimizer")
local functional = require("dle.optim.functional")
return Optimizer.extend("RAdam", functional.algorithms.radam)
