--- dle.optim.RMSprop: gradients scaled by a running RMS (PyTorch semantics: alpha = 0.99,
-- eps = 1e-8, weight_decay, momentum, centered), one fused C step per param (the algorithm is
-- dle.optim.functional.rmsprop).
local Optimizer = require("dle.optim.optimizer")
local functional = require("dle.optim.functional")

return Optimizer.extend("RMSprop", functional.algorithms.rmsprop)
