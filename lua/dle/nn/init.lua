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

-- The layers: the files that return one class, then those that return several by name.
local ONE_CLASS = {Linear = "linear", Sequential = "sequential", Flatten = "flatten", Dropout = "dropout",
  Embedding = "embedding", LayerNorm = "layer_norm", RMSNorm = "rms_norm", MultiheadAttention = "attention",
  TransformerBlock = "transformer"}
for name, file in pairs(ONE_CLASS) do nn[name] = require("dle.nn." .. file) end
for _, file in ipairs({"batch_norm", "conv", "activations", "losses", "containers", "convnd", "pools",
                       "norm_layers", "resample_layers", "rnn"}) do
  for name, cls in pairs(require("dle.nn." .. file)) do nn[name] = cls end
end

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
