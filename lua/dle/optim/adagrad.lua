--- dle.optim.Adagrad: per-element learning rates from the running sum of squared gradients
-- (PyTorch semantics: lr_decay, weight_decay, initial_accumulator_value, eps = 1e-10), one fused
-- C step per param (dle.core.adagrad_step).
local core = require "dle.core"
local Optimizer = require "dle.optim.optimizer"

local Adagrad = Optimizer.extend("Adagrad", {lr = 1e-2, lr_decay = 0, weight_decay = 0,
  initial_accumulator_value = 0, eps = 1e-10})
Adagrad.state_tensors = {"sum"}

--- Validates a group's hyperparameters.
-- @param group param group table
function Adagrad.check(group)
  for _, k in ipairs {"lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"} do
    Optimizer.check_number("Adagrad", group, k)
  end
end

--- One step of param p with gradient g; st is the param's state table.
function Adagrad:update(p, g, st, group)
  if st.sum == nil then
    st.sum = Optimizer.zeros_state(p)
    if group.initial_accumulator_value ~= 0 then st.sum:fill_(group.initial_accumulator_value) end
  end
  st.step = st.step + 1
  core.adagrad_step(p, g, st.sum, {lr = group.lr, step = st.step, lr_decay = group.lr_decay,
    weight_decay = group.weight_decay, eps = group.eps})
end

return Adagrad
