--- dle.optim.Adam: adaptive moment estimation with bias correction, L2 weight decay added to the
-- gradient, optional AMSGrad (PyTorch semantics), one fused C step per param (the algorithm is
-- dle.optim.functional.adam).
--   local opt = dle.optim.Adam(params, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8})
local Optimizer = require("dle.optim.optimizer")
local functional = require("dle.optim.functional")

return Optimizer.extend("Adam", functional.algorithms.adam)
