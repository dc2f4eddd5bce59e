--- dle.nn.RMSNorm(normalized_shape, {eps, elementwise_affine = true, dtype}): PyTorch's RMSNorm,
-- y = x / sqrt(mean(x^2 over the trailing normalized dims) + eps) * weight, weight (ones) of the
-- normalized shape. eps defaults to the machine epsilon of x's dtype (PyTorch's eps = None).
-- Composed of existing ops (pow, mean, rsqrt, mul), so autograd comes for free.
local dle = require("dle")
local check = require("dle.check")
local Module = require("dle.nn.module")

local RMSNorm = Module:extend("RMSNorm")

-- torch.finfo(dtype).eps, PyTorch's default when eps is None
local FINFO_EPS = {float32 = 2 ^ -23, float64 = 2 ^ -52, float16 = 2 ^ -10, bfloat16 = 2 ^ -7}

--- @param normalized_shape size of the last dimension, or a table of trailing sizes
-- @param opts optional {eps = nil (machine epsilon of the input's dtype), elementwise_affine = true,
--   dtype = "float32"}
function RMSNorm:init(normalized_shape, opts)
  opts = check.options(opts, "RMSNorm", {"eps", "elementwise_affine", "dtype"})
  local shape = type(normalized_shape) == "table" and normalized_shape or {normalized_shape}
  if #shape < 1 then check.error("RMSNorm: normalized_shape must have at least one size") end
  check.positive_integers("RMSNorm", "positive integer sizes", table.unpack(shape))
  if opts.eps ~= nil then check.number_that(opts.eps, "RMSNorm", "eps", "a non-negative number",
    function(e) return e >= 0 end) end
  self.shape = {table.unpack(shape)}
  self.normalized_shape = #shape == 1 and shape[1] or self.shape
  self.eps = opts.eps
  if opts.elementwise_affine ~= false then
    self.weight = dle.ones(self.shape, {dtype = opts.dtype or "float32", requires_grad = true})
  end
end

--- @param x tensor {..., normalized_shape...}
-- @return tensor of x's shape
function RMSNorm:forward(x)
  local k = #self.shape
  local ok = dle.is_tensor(x) and x:dim() >= k
  for i = 1, k do ok = ok and x:size(x:dim() - k + i) == self.shape[i] end
  if not ok then
    local got = dle.is_tensor(x) and check.shape_str(x) or check.typename(x)
    check.error("RMSNorm: input has shape " .. got .. ", expected trailing dimensions {"
      .. table.concat(self.shape, ",") .. "}")
  end
  local eps = self.eps or FINFO_EPS[x:dtype()] or FINFO_EPS.float32
  local ms = x * x
  for d = x:dim(), x:dim() - k + 1, -1 do ms = ms:mean(d, true) end
  local y = x * (ms + eps):rsqrt()
  if self.weight then y = y * self.weight end
  return y
end

function RMSNorm:extra_repr()
  local s = #self.shape == 1 and tostring(self.shape[1]) or "{" .. table.concat(self.shape, ",") .. "}"
  return s .. ", eps=" .. tostring(self.eps)
end

return RMSNorm
