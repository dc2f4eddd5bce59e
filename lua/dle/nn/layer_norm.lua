--- dle.nn.LayerNorm(d, {eps = 1e-5, elementwise_affine = true, dtype}): normalizes the last
-- dimension to zero mean and unit (biased) variance, then scales by weight (ones) and adds bias (zeros).
local dle = require "dle"
local Module = require "dle.nn.module"
local F = require "dle.nn.functional"

local LayerNorm = Module:extend("LayerNorm")

--- @param d size of the last dimension
-- @param opts optional {eps = 1e-5, elementwise_affine = true, dtype = "float32"}
function LayerNorm:init(d, opts)
  opts = opts or {}
  if type(d) == "table" then
    if #d ~= 1 then error("LayerNorm: only normalization over the last dimension is supported, got shape of " .. #d .. " dims", 3) end
    d = d[1]
  end
  if math.type(d) ~= "integer" or d < 1 then error("LayerNorm: expected a positive integer size, got " .. tostring(d), 3) end
  self.normalized_shape, self.eps = d, opts.eps or 1e-5
  if opts.elementwise_affine ~= false then
    local o = {dtype = opts.dtype or "float32", requires_grad = true}
    self.weight = dle.ones(d, o)
    self.bias = dle.zeros(d, o)
  end
end

--- @param x tensor {..., d}
-- @return tensor of x's shape
function LayerNorm:forward(x)
  if x:dim() < 1 or x:size(-1) ~= self.normalized_shape then
    error("LayerNorm: input has shape {" .. table.concat(x:shape(), ",") .. "}, expected last dimension "
      .. self.normalized_shape, 3)
  end
  return F.layer_norm(x, self.weight, self.bias, self.eps)
end

function LayerNorm:extra_repr() return self.normalized_shape .. ", eps=" .. self.eps end

return LayerNorm
