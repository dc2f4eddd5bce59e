--- dle.nn.functional (activation part): leaky_relu, elu, selu, celu, softplus, softsign, mish,
-- hardswish, hardsigmoid, hardtanh, relu6, prelu, glu, logsigmoid, softmin, tanhshrink,
-- softshrink, hardshrink, with PyTorch's defaults. This file returns them and
-- dle.nn.functional gathers them. Each is a composition of dle ops (where, clamp,
-- expm1, log1p, ...), so reverse and forward mode come from those ops' rules; a fused op per
-- activation would save the intermediate tensors (one pass instead of two to four).
local dle = require("dle")
local check = require("dle.check")
local shape_str = check.shape_str

local M = {}

local function float_input(x, fname)
  check.tensor(x, fname, "input")
  if not x:is_floating_point() then check.error(fname .. ": input must be a float tensor, got " .. x:dtype()) end
  return x
end

local function number_arg(v, default, fname, what)
  if v == nil then return default end
  return check.number(v, fname, what)
end

-- x where x > 0, else neg(x) (neg applied to min(x, 0), so the unused side never overflows and
-- its gradient is never inf * 0).
local function positive_or(x, neg)
  return dle.where(x:gt(0), x, neg(x:clamp(nil, 0)))
end

--- leaky_relu(x, negative_slope = 0.01): x where x > 0, else negative_slope * x.
-- @return tensor of x's shape
function M.leaky_relu(x, negative_slope)
  float_input(x, "leaky_relu")
  local s = number_arg(negative_slope, 0.01, "leaky_relu", "negative_slope")
  return dle.where(x:gt(0), x, x * s)
end

--- elu(x, alpha = 1): x where x > 0, else alpha * (exp(x) - 1).
-- @return tensor of x's shape
function M.elu(x, alpha)
  float_input(x, "elu")
  local a = number_arg(alpha, 1, "elu", "alpha")
  return positive_or(x, function(n) return n:expm1() * a end)
end

local SELU_ALPHA = 1.6732632423543772848170429916717
local SELU_SCALE = 1.0507009873554804934193349852946

--- selu(x): scale * elu(x, alpha) with PyTorch's constants (alpha 1.6733, scale 1.0507).
-- @return tensor of x's shape
function M.selu(x)
  float_input(x, "selu")
  return positive_or(x, function(n) return n:expm1() * SELU_ALPHA end) * SELU_SCALE
end

--- celu(x, alpha = 1): x where x > 0, else alpha * (exp(x / alpha) - 1); alpha must not be 0.
-- @return tensor of x's shape
function M.celu(x, alpha)
  float_input(x, "celu")
  local a = number_arg(alpha, 1, "celu", "alpha")
  if a == 0 then check.error("celu: alpha must not be 0") end
  return positive_or(x, function(n) return (n / a):expm1() * a end)
end

--- softplus(x, beta = 1, threshold = 20): log(1 + exp(beta * x)) / beta, and x itself where
-- beta * x > threshold (PyTorch's linear region).
-- @return tensor of x's shape
function M.softplus(x, beta, threshold)
  float_input(x, "softplus")
  local b = number_arg(beta, 1, "softplus", "beta")
  local th = number_arg(threshold, 20, "softplus", "threshold")
  if b == 0 then check.error("softplus: beta must not be 0") end
  local bx = x * b
  local linear = bx:gt(th)
  -- the log1p side sees beta*x capped at the threshold, so exp never overflows
  local soft = dle.where(linear, th, bx):exp():log1p() / b
  return dle.where(linear, x, soft)
end

--- softsign(x): x / (1 + |x|).
-- @return tensor of x's shape
function M.softsign(x)
  float_input(x, "softsign")
  return x / (x:abs() + 1)
end

--- mish(x): x * tanh(softplus(x)).
-- @return tensor of x's shape
function M.mish(x)
  float_input(x, "mish")
  return x * M.softplus(x):tanh()
end

--- hardsigmoid(x): relu6(x + 3) / 6, i.e. clamp(x / 6 + 1/2, 0, 1).
-- @return tensor of x's shape
function M.hardsigmoid(x)
  float_input(x, "hardsigmoid")
  return (x / 6 + 0.5):clamp(0, 1)
end

--- hardswish(x): x * relu6(x + 3) / 6.
-- @return tensor of x's shape
function M.hardswish(x)
  float_input(x, "hardswish")
  return x * (x / 6 + 0.5):clamp(0, 1)
end

--- hardtanh(x, min_val = -1, max_val = 1): x clamped to [min_val, max_val].
-- @return tensor of x's shape
function M.hardtanh(x, min_val, max_val)
  float_input(x, "hardtanh")
  local lo = number_arg(min_val, -1, "hardtanh", "min_val")
  local hi = number_arg(max_val, 1, "hardtanh", "max_val")
  if lo > hi then check.error(string.format("hardtanh: min_val (%g) must not exceed max_val (%g)", lo, hi)) end
  return x:clamp(lo, hi)
end

--- relu6(x): x clamped to [0, 6].
-- @return tensor of x's shape
function M.relu6(x)
  float_input(x, "relu6")
  return x:clamp(0, 6)
end

--- prelu(x, weight): x where x > 0, else weight * x; weight is {1} (one slope) or {C}, one
-- slope per channel, the channels being dimension 2 of x (dimension 1 of a 1-D x).
-- @return tensor of x's shape
function M.prelu(x, weight)
  float_input(x, "prelu")
  check.tensor(weight, "prelu", "weight")
  local n = weight:numel()
  if weight:dim() > 1 then check.error("prelu: weight must be 1-D {1} or {C}, got " .. shape_str(weight)) end
  local w = weight:reshape(-1)
  if n ~= 1 then
    local cdim = x:dim() >= 2 and 2 or 1
    if x:dim() == 0 or x:size(cdim) ~= n then
      check.error(string.format("prelu: weight has %d slopes but input %s has %s channels (dimension %d)", n,
        shape_str(x), x:dim() == 0 and "no" or tostring(x:size(cdim)), cdim))
    end
    local shape = {}
    for d = 1, x:dim() - cdim + 1 do shape[d] = 1 end
    shape[1] = n
    w = w:reshape(shape)
  end
  return dle.where(x:gt(0), x, x * w)
end

--- glu(x, dim = -1): a * sigmoid(b), a and b the two halves of x along dim (whose size must
-- be even).
-- @return tensor with dim halved
function M.glu(x, dim)
  float_input(x, "glu")
  local d = check.integer(dim or -1, "glu", "dim")
  if x:dim() == 0 then check.error("glu: input must have at least 1 dimension, got a 0-d tensor") end
  local size = check.call("glu", x.size, x, d)
  if size % 2 ~= 0 then
    check.error(string.format("glu: dimension %d of input %s has odd size %d (it is halved)", d, shape_str(x), size))
  end
  local h = size // 2
  return x:narrow(d, 1, h) * x:narrow(d, h + 1, h):sigmoid()
end

--- logsigmoid(x): log(sigmoid(x)), computed stably as min(x, 0) - log1p(exp(-|x|)).
-- @return tensor of x's shape
function M.logsigmoid(x)
  float_input(x, "logsigmoid")
  return x:clamp(nil, 0) - (-x:abs()):exp():log1p()
end

--- softmin(x, dim = -1): softmax(-x, dim).
-- @return tensor of x's shape
function M.softmin(x, dim)
  float_input(x, "softmin")
  local d = check.integer(dim or -1, "softmin", "dim")
  return check.call("softmin", function() return (-x):softmax(d) end)
end

--- tanhshrink(x): x - tanh(x).
-- @return tensor of x's shape
function M.tanhshrink(x)
  float_input(x, "tanhshrink")
  return x - x:tanh()
end

local function lambd_arg(v, fname)
  local l = number_arg(v, 0.5, fname, "lambd")
  if l < 0 then check.error(fname .. ": lambd must be >= 0, got " .. l) end
  return l
end

--- softshrink(x, lambd = 0.5): x - lambd where x > lambd, x + lambd where x < -lambd, else 0.
-- @return tensor of x's shape
function M.softshrink(x, lambd)
  float_input(x, "softshrink")
  local l = lambd_arg(lambd, "softshrink")
  return dle.where(x:abs():gt(l), x - x:sign() * l, 0)
end

--- hardshrink(x, lambd = 0.5): x where |x| > lambd, else 0.
-- @return tensor of x's shape
function M.hardshrink(x, lambd)
  float_input(x, "hardshrink")
  local l = lambd_arg(lambd, "hardshrink")
  return dle.where(x:abs():gt(l), x, 0)
end

return M
