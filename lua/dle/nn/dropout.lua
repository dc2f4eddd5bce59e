--- dle.nn.Dropout(p = 0.5, {generator}): inverted dropout in training mode, identity in eval.
local Module = require("dle.nn.module")
local F = require("dle.nn.functional")
local check = require("dle.check")

local Dropout = Module:extend("Dropout")

--- @param p drop probability in [0, 1] (default 0.5)
-- @param opts optional {generator = g} for the mask (dle.rand)
function Dropout:init(p, opts)
  p = p or 0.5
  if type(p) ~= "number" or p < 0 or p > 1 then
    check.error("Dropout: p must be a number in [0, 1], got " .. tostring(p))
  end
  self.p = p
  self.generator = check.options(opts, "Dropout", {"generator"}).generator
end

--- @param x tensor
-- @return x with elements zeroed with probability p and the rest scaled by 1/(1-p) (training)
function Dropout:forward(x)
  return F.dropout(x, self.p, self.training, {generator = self.generator})
end

function Dropout:extra_repr() return "p=" .. self.p end

return Dropout
