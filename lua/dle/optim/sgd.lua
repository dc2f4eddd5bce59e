--- dle.optim.SGD: stochastic gradient descent with momentum, dampening, Nesterov momentum and
-- L2 weight decay (PyTorch semantics), one fused C step per param (dle.core.sgd_step).
--   local opt = dle.optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9, nesterov = true})
local core = require "dle.core"
local Optimizer = require "dle.optim.optimizer"
local check = require "dle.check"

local SGD = Optimizer.extend("SGD", {lr = 1e-3, momentum = 0, dampening = 0, nesterov = false,
  weight_decay = 0})
SGD.state_tensors = {"momentum_buffer"}

--- Validates a group's hyperparameters.
-- @param group param group table
function SGD.check(group)
  for _, k in ipairs {"lr", "momentum", "dampening", "weight_decay"} do
    Optimizer.check_number("SGD", group, k)
  end
  if type(group.nesterov) ~= "boolean" then
    check.error("SGD: nesterov must be a boolean, got " .. type(group.nesterov))
  end
  if group.nesterov and (group.momentum <= 0 or group.dampening ~= 0) then
    check.error("SGD: nesterov needs momentum > 0 and dampening 0")
  end
end

--- One step of param p with gradient g; st is the param's state table.
function SGD:update(p, g, st, group)
  local first = false
  if group.momentum ~= 0 and st.momentum_buffer == nil then
    st.momentum_buffer = Optimizer.zeros_state(p)
    first = true
  end
  st.step = st.step + 1
  core.sgd_step(p, g, {lr = group.lr, momentum = group.momentum, dampening = group.dampening,
    nesterov = group.nesterov, weight_decay = group.weight_decay, first = first,
    momentum_buffer = st.momentum_buffer})
end

return SGD
