--- dle.optim.RMSprop: gradients scaled by a running RMS (PyTorch semantics: alpha = 0.99,
-- eps = 1e-8, weight_decay, momentum, centered), one fused C step per param
-- (dle.core.rmsprop_step).
local core = require "dle.core"
local Optimizer = require "dle.optim.optimizer"
local check = require "dle.check"

local RMSprop = Optimizer.extend("RMSprop", {lr = 1e-2, alpha = 0.99, eps = 1e-8,
  weight_decay = 0, momentum = 0, centered = false})
RMSprop.state_tensors = {"square_avg", "momentum_buffer", "grad_avg"}

--- Validates a group's hyperparameters.
-- @param group param group table
function RMSprop.check(group)
  for _, k in ipairs {"lr", "eps", "weight_decay", "momentum"} do
    Optimizer.check_number("RMSprop", group, k)
  end
  Optimizer.check_number("RMSprop", group, "alpha")
  if group.alpha > 1 then check.error("RMSprop: alpha must be in [0, 1], got " .. group.alpha) end
  if type(group.centered) ~= "boolean" then
    check.error("RMSprop: centered must be a boolean, got " .. type(group.centered))
  end
end

--- One step of param p with gradient g; st is the param's state table.
function RMSprop:update(p, g, st, group)
  st.square_avg = st.square_avg or Optimizer.zeros_state(p)
  if group.momentum > 0 then st.momentum_buffer = st.momentum_buffer or Optimizer.zeros_state(p) end
  if group.centered then st.grad_avg = st.grad_avg or Optimizer.zeros_state(p) end
  st.step = st.step + 1
  core.rmsprop_step(p, g, st.square_avg, {lr = group.lr, alpha = group.alpha, eps = group.eps,
    weight_decay = group.weight_decay, momentum = group.momentum, centered = group.centered,
    momentum_buffer = st.momentum_buffer, grad_avg = st.grad_avg})
end

return RMSprop
