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
    local o = {}
    for k, v in pairs(check.options(opts, name, keys)) do o[k] = v end
    self.opts = o
  end
  --- @param input tensor
  -- @param target tensor
  -- @return loss tensor
  cls.forward = function(self, input, target) return fn(input, target, self.opts) end
  cls.extra_repr = function(self) return "reduction=" .. (self.opts.reduction or "mean") end
  return cls
end

local CLASS_OPTS = {"ignore_index", "label_smoothing", "reduction", "weight"}
--- CrossEntropyLoss({ignore_index, label_smoothing, reduction = "mean"|"sum"|"none", weight}).
L.CrossEntropyLoss = loss_class("CrossEntropyLoss", F.cross_entropy, CLASS_OPTS)
--- NLLLoss({ignore_index, label_smoothing, reduction, weight}).
L.NLLLoss = loss_class("NLLLoss", F.nll_loss, CLASS_OPTS)
--- MSELoss({reduction}).
L.MSELoss = loss_class("MSELoss", F.mse_loss, {"reduction"})
--- BCEWithLogitsLoss({reduction, pos_weight}).
L.BCEWithLogitsLoss = loss_class("BCEWithLogitsLoss", F.binary_cross_entropy_with_logits, {"reduction", "pos_weight"})

return L
