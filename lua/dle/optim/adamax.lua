--- dle.optim.Adamax: Adam with the infinity norm (an exponentially weighted max of |g|) in place of the
-- second moment (PyTorch semantics: lr = 2e-3, betas, eps, weight_decay).
-- The step is composed of tensor ops (the algorithm is dle.optim.functional.adamax); a fused C step like
-- Adam's would save its temporaries.
local Optimizer = require("dle.optim.optimizer")
local functional = require("dle.optim.functional")
return Optimizer.extend("Adamax", functional.algorithms.adamax)
