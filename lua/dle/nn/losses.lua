--- Loss modules: CrossEntropyLoss, NLLLoss, MSELoss, BCEWithLogitsLoss (options kept, forward
-- calls dle.nn.functional). Called as `loss_fn(input, target)`.
local Module = require "dle.nn.module"
local F = require "dle.nn.functional"
local check = require "dle.check"

local L = {}

local function loss_class(name, fn, keys)
  local cls = Module:extend(name)
  --- @param opts optional options table (see dle.nn.functional)
  cls.init = function(self, opts)
    opts = check.table(opts, self.__name, "options", true) or {}
    if type(opts) ~= "table" then error(name .. ": expected an options table, got " .. type(opts), 3) end
    local o = {}
    for k, v in pairs(opts) do
      if not keys[k] then error(name .. ": unknown option '" .. tostring(k) .. "'", 3) end
      o[k] = v
    end
    self.opts = o
  end
  --- @param input tensor
  -- @param target tensor
  -- @return loss tensor
  cls.forward = function(self, input, target) return fn(input, target, self.opts) end
  cls.extra_repr = function(self) return "reduction=" .. (self.opts.reduction or "mean") end
  return cls
end

--- CrossEntropyLoss({ignore_index, label_smoothing, reduction = "mean"|"sum"|"none"}).
L.CrossEntropyLoss = loss_class("CrossEntropyLoss", F.cross_entropy,
  {ignore_index = true, label_smoothing = true, reduction = true})
--- NLLLoss({ignore_index, reduction}).
L.NLLLoss = loss_class("NLLLoss", F.nll_loss, {ignore_index = true, reduction = true})
--- MSELoss({reduction}).
L.MSELoss = loss_class("MSELoss", F.mse_loss, {reduction = true})
--- BCEWithLogitsLoss({reduction, pos_weight}).
L.BCEWithLogitsLoss = loss_class("BCEWithLogitsLoss", F.binary_cross_entropy_with_logits,
  {reduction = true, pos_weight = true})

return L
