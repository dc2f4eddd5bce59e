--- dle.optim.SGD: stochastic gradient descent with momentum, dampening, Nesterov momentum and
-- L2 weight decay (PyTorch semantics), one fused C step per param (the algorithm is
-- dle.optim.functional.sgd).
--   local opt = dle.optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9, nesterov = true})
local Optimizer = require("dle.optim.optimizer")
local functional = require("dle.optim.functional")

return Optimizer.extend("SGD", functional.algorithms.sgd)
