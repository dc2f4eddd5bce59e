--- dle.nn: modules (dle.nn.Module and layers), losses, dle.nn.functional, dle.nn.init and
-- dle.nn.utils. Layers are Lua compositions of dle ops, so autograd comes for free.
local dle = require("dle")
local check = require("dle.check")

local nn = {}

nn.Module = require("dle.nn.module")
nn.functional = require("dle.nn.functional")
nn.init = require("dle.nn.weight_init")
nn.utils = require("dle.nn.utils")

--- Parameter(t, requires_grad = true): t as a leaf that requires grad (detached if t is not a leaf).
-- Assigning it to a module field registers it as a parameter.
-- @return tensor
function nn.Parameter(t, requires_grad)
  if not dle.is_tensor(t) then check.error("Parameter: expected a tensor, got " .. type(t)) end
  if not t:is_floating_point() then check.error("Parameter: expected a float tensor, got " .. t:dtype()) end
  if not t.is_leaf or t.requires_grad then t = t:detach() end
  return t:requires_grad_(requires_grad ~= false)
end

nn.Linear = require("dle.nn.linear")
nn.Sequential = require("dle.nn.sequential")
nn.Flatten = require("dle.nn.flatten")
nn.Dropout = require("dle.nn.dropout")
nn.Embedding = require("dle.nn.embedding")
nn.LayerNorm = require("dle.nn.layer_norm")
nn.RMSNorm = require("dle.nn.rms_norm")
for name, cls in pairs(require("dle.nn.batch_norm")) do nn[name] = cls end
for name, cls in pairs(require("dle.nn.conv")) do nn[name] = cls end
nn.MultiheadAttention = require("dle.nn.attention")
nn.TransformerBlock = require("dle.nn.transformer")
for name, cls in pairs(require("dle.nn.activations")) do nn[name] = cls end
for name, cls in pairs(require("dle.nn.losses")) do nn[name] = cls end
for name, cls in pairs(require("dle.nn.containers")) do nn[name] = cls end
for name, cls in pairs(require("dle.nn.convnd")) do nn[name] = cls end
for name, cls in pairs(require("dle.nn.pools")) do nn[name] = cls end
for name, cls in pairs(require("dle.nn.norm_layers")) do nn[name] = cls end
for name, cls in pairs(require("dle.nn.resample_layers")) do nn[name] = cls end
for name, cls in pairs(require("dle.nn.rnn")) do nn[name] = cls end

-- Every Lua function of the package and every method of its classes reports errors at the
-- user's line (check.public). Constructing and calling a module are wrapped once in module.lua,
-- so init and forward are not wrapped again (a call costs one wrapper, not two).
check.export(nn)
check.export(nn.functional)
check.export(nn.init)
check.export(nn.utils)
local NOT_WRAPPED = {is_module = true, init = true, forward = true}
for _, cls in pairs(nn) do
  if type(cls) == "table" and rawget(cls, "__name") then check.export(cls, NOT_WRAPPED) end
end

return nn
