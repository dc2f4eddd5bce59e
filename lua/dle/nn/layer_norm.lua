--- dle.nn.LayerNorm(normalized_shape, {eps = 1e-5, elementwise_affine = true, dtype}): normalizes
-- the trailing dimensions (normalized_shape: the last dimension's size, or a table of trailing
-- sizes) to zero mean and unit (biased) variance, then scales by weight (ones) and adds bias
-- (zeros), both of the normalized shape. Runs as the fused native op dle.layer_norm.
local dle = require("dle")
local check = require("dle.check")
local Module = require("dle.nn.module")
local F = require("dle.nn.functional")

local LayerNorm = Module:extend("LayerNorm")

--- @param normalized_shape size of the last dimension, or a table of trailing sizes
-- @param opts optional {eps = 1e-5, elementwise_affine = true, dtype = "float32"}
function LayerNorm:init(normalized_shape, opts)
  opts = check.options(opts, "LayerNorm", {"eps", "elementwise_affine", "dtype"})
  local shape = type(normalized_shape) == "table" and normalized_shape or {normalized_shape}
  if #shape < 1 then check.error("LayerNorm: normalized_shape must have at least one size") end
  for _, d in ipairs(shape) do
    if math.type(d) ~= "integer" or d < 1 then
      check.error("LayerNorm: expected positive integer sizes, got " .. tostring(d))
    end
  end
  self.shape = {table.unpack(shape)}
  -- a number for the usual one-dimension case (as before), the table otherwise
  self.normalized_shape = #shape == 1 and shape[1] or self.shape
  self.eps = opts.eps or 1e-5
  if opts.elementwise_affine ~= false then
    local o = {dtype = opts.dtype or "float32", requires_grad = true}
    self.weight = dle.ones(self.shape, o)
    self.bias = dle.zeros(self.shape, o)
  end
end

--- @param x tensor {..., normalized_shape...}
-- @return tensor of x's shape
function LayerNorm:forward(x)
  local k, ok = #self.shape, dle.is_tensor(x) and x:dim() >= #self.shape
  for i = 1, k do ok = ok and x:size(x:dim() - k + i) == self.shape[i] end
  if not ok then
    local got = dle.is_tensor(x) and "{" .. table.concat(x:shape(), ",") .. "}" or type(x)
    check.error("LayerNorm: input has shape " .. got .. ", expected "
      .. (k == 1 and "last dimension " .. self.shape[1] or "trailing dimensions {" .. table.concat(self.shape, ",")
          .. "}"))
  end
  return F.layer_norm(x, self.weight, self.bias, self.eps, self.shape)
end

function LayerNorm:extra_repr()
  local s = #self.shape == 1 and tostring(self.shape[1]) or "{" .. table.concat(self.shape, ",") .. "}"
  return s .. ", eps=" .. self.eps
end

return LayerNorm
