--- dle.optim.Adam: adaptive moment estimation with bias correction, L2 weight decay added to the
-- gradient, optional AMSGrad (PyTorch semantics), one fused C step per param
-- (dle.core.adam_step).
--   local opt = dle.optim.Adam(params, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8})
local core = require "dle.core"
local Optimizer = require "dle.optim.optimizer"
local check = require "dle.check"

local Adam = Optimizer.extend("Adam", {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8,
  weight_decay = 0, amsgrad = false})
Adam.state_tensors = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
Adam.decoupled = false

--- Validates a group's hyperparameters (shared with AdamW).
-- @param group param group table
-- @param name class name for messages (default "Adam")
function Adam.check(group, name)
  name = name or "Adam"
  for _, k in ipairs {"lr", "eps", "weight_decay"} do Optimizer.check_number(name, group, k) end
  local b = group.betas
  if type(b) ~= "table" or type(b[1]) ~= "number" or type(b[2]) ~= "number" or
      not (b[1] >= 0 and b[1] < 1 and b[2] >= 0 and b[2] < 1) then
    check.error(name .. ": betas must be {b1, b2} with both in [0, 1)")
  end
  if type(group.amsgrad) ~= "boolean" then
    check.error(name .. ": amsgrad must be a boolean, got " .. type(group.amsgrad))
  end
end

--- One step of param p with gradient g; st is the param's state table.
function Adam:update(p, g, st, group)
  st.exp_avg = st.exp_avg or Optimizer.zeros_state(p)
  st.exp_avg_sq = st.exp_avg_sq or Optimizer.zeros_state(p)
  if group.amsgrad then st.max_exp_avg_sq = st.max_exp_avg_sq or Optimizer.zeros_state(p) end
  st.step = st.step + 1
  core.adam_step(p, g, st.exp_avg, st.exp_avg_sq, {lr = group.lr, step = st.step,
    beta1 = group.betas[1], beta2 = group.betas[2], eps = group.eps,
    weight_decay = group.weight_decay, amsgrad = group.amsgrad, decoupled = self.decoupled,
    max_exp_avg_sq = st.max_exp_avg_sq})
end

return Adam
