--- dle.optim.Adagrad: per-element learning rates from the running sum of squared gradients
-- (PyTorch semantics: lr_decay, weight_decay, initial_accumulator_value, eps = 1e-10), one fused
-- C step per param (the algorithm is dle.optim.functional.adagrad).
local Optimizer = require("dle.optim.optimizer")
local functional = require("dle.optim.functional")

return Optimizer.extend("Adagrad", functional.algorithms.adagrad)
