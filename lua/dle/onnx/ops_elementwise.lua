--- dle.onnx.ops_elementwise: ONNX's elementwise operators (arithmetic, activations, comparisons,
-- logic, casts) on dle's public ops. Each entry is `fn(ctx, inputs...) -> outputs...` where ctx.a
-- holds the node's attributes and ctx.opset the model's opset (see dle.onnx). dle's arithmetic
-- broadcasts as ONNX's multidirectional broadcasting does.
local dle = require("dle")
local U = require("dle.onnx.util")

local E = {}

-- The ONNX ops that are one tensor method of dle (ONNX's Round rounds halves to even, as dle's
-- round does).
local UNARY = {
  Neg = "neg", Abs = "abs", Exp = "exp", Log = "log", Sqrt = "sqrt", Reciprocal = "reciprocal",
  Sigmoid = "sigmoid", Tanh = "tanh", Relu = "relu", Floor = "floor", Ceil = "ceil", Sign = "sign",
  Round = "round", Erf = "erf", IsNaN = "isnan", Sin = "sin", Cos = "cos", Tan = "tan", Asin = "asin",
  Acos = "acos", Atan = "atan", Sinh = "sinh", Cosh = "cosh", Asinh = "asinh", Acosh = "acosh",
  Atanh = "atanh",
}
for name, method in pairs(UNARY) do
  E[name] = function(_, x) return x[method](x) end
end

-- Integer division and remainder in ONNX truncate towards zero as C does (the reference casts
-- numpy's quotient), where dle's `/` is true division.
local function int_div(a, b)
  local q = a:double() / b:double()
  return (q:sign() * q:abs():floor()):to(a:dtype())
end

E.Add = function(_, a, b) return a + b end
E.Sub = function(_, a, b) return a - b end
E.Mul = function(_, a, b) return a * b end
E.Div = function(_, a, b)
  if not U.is_float(a) then return int_div(a, b) end
  return a / b
end
E.Pow = function(_, a, b)
  local y = dle.pow(U.is_float(a) and a or a:double(), b:to(U.is_float(a) and a:dtype() or "float64"))
  return y:to(a:dtype())
end
-- fmod = 1: C's fmod (the dividend's sign); fmod = 0: the divisor's sign (numpy's %)
E.Mod = function(ctx, a, b)
  if (ctx.a.fmod or 0) == 1 then return dle.fmod(a, b) end
  return dle.remainder(a, b)
end

E.Shrink = function(ctx, x)
  local lambd, bias = ctx.a.lambd or 0.5, ctx.a.bias or 0
  local y = dle.where(x:lt(-lambd), x + bias, dle.where(x:gt(lambd), x - bias, 0))
  return y:to(x:dtype())
end
E.Identity = function(_, x) return x end

E.LeakyRelu = function(ctx, x)
  local alpha = ctx.a.alpha or 0.01
  return dle.where(x:lt(0), x * alpha, x)
end
E.PRelu = function(_, x, slope)
  -- before opset 7 (and in old PyTorch exports) a 1-D slope of x's channel count is per channel
  if slope:dim() == 1 and x:dim() > 2 and slope:size(1) == x:size(2) and slope:size(1) ~= x:size(-1) then
    local s = {1, slope:size(1)}
    for _ = 3, x:dim() do s[#s + 1] = 1 end
    slope = slope:reshape(s)
  end
  return dle.where(x:lt(0), x * slope, x)
end
E.ThresholdedRelu = function(ctx, x)
  return dle.where(x:gt(ctx.a.alpha or 1.0), x, 0)
end
E.Elu = function(ctx, x)
  local alpha = ctx.a.alpha or 1.0
  return dle.where(x:lt(0), x:expm1() * alpha, x)
end
E.Celu = function(ctx, x)
  local alpha = ctx.a.alpha or 1.0
  return x:relu() + ((x / alpha):expm1() * alpha):clamp(nil, 0)
end
E.Selu = function(ctx, x)
  local alpha = ctx.a.alpha or 1.67326319217681884765625
  local gamma = ctx.a.gamma or 1.05070102214813232421875
  return dle.where(x:le(0), x:expm1() * alpha, x) * gamma
end
E.HardSigmoid = function(ctx, x)
  return (x * (ctx.a.alpha or 0.2) + (ctx.a.beta or 0.5)):clamp(0, 1)
end
E.HardSwish = function(_, x) return x * (x / 6 + 0.5):clamp(0, 1) end
E.Softplus = function(_, x)
  -- log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|))
  return x:relu() + (-x:abs()):exp():log1p()
end
E.Softsign = function(_, x) return x / (x:abs() + 1) end
E.Mish = function(ctx, x) return x * E.Softplus(ctx, x):tanh() end

E.Clip = function(ctx, x, lo, hi)
  if ctx.opset < 11 then
    lo, hi = ctx.a.min, ctx.a.max
  else
    lo, hi = lo and U.scalar(lo), hi and U.scalar(hi)
  end
  local y = x
  if lo then y = dle.where(y:lt(lo), lo, y) end
  if hi then y = dle.where(y:gt(hi), hi, y) end
  return y:to(x:dtype())
end

E.Equal = function(_, a, b) return a:eq(b) end
E.Less = function(_, a, b) return a:lt(b) end
E.LessOrEqual = function(_, a, b) return a:le(b) end
E.Greater = function(_, a, b) return a:gt(b) end
E.GreaterOrEqual = function(_, a, b) return a:ge(b) end
E.Not = function(_, a) return a:logical_not() end
E.And = function(_, a, b) return a:logical_and(b) end
E.Or = function(_, a, b) return a:logical_or(b) end
E.Xor = function(_, a, b) return a:logical_xor(b) end
E.IsInf = function(ctx, x)
  local pos, neg = (ctx.a.detect_positive or 1) == 1, (ctx.a.detect_negative or 1) == 1
  local inf = x:isinf()
  if not pos then inf = inf:logical_and(x:lt(0)) end
  if not neg then inf = inf:logical_and(x:gt(0)) end
  return inf
end
E.Where = function(_, c, a, b) return dle.where(c, a, b) end

-- Variadic ops: a fold over the inputs (each broadcasting).
local function fold(f)
  return function(_, first, ...)
    local acc = first
    for _, t in ipairs({...}) do acc = f(acc, t) end
    return acc
  end
end
E.Sum = fold(function(a, b) return a + b end)
E.Max = fold(dle.maximum)
E.Min = fold(dle.minimum)
E.Mean = function(ctx, ...)
  return E.Sum(ctx, ...) / select("#", ...)
end

-- Random ops draw from dle's generator (seed attributes are not honoured: dle.manual_seed is).
local function random_dtype(ctx, like, default)
  return ctx.a.dtype and U.dtype(ctx, ctx.a.dtype) or like and like:dtype() or default
end
E.Bernoulli = function(ctx, p)
  return dle.bernoulli(p):to(random_dtype(ctx, p))
end
E.RandomUniform = function(ctx)
  local lo, hi = ctx.a.low or 0, ctx.a.high or 1
  return (dle.rand(ctx.a.shape, {dtype = "float64"}) * (hi - lo) + lo):to(random_dtype(ctx, nil, "float32"))
end
E.RandomNormal = function(ctx)
  return (dle.randn(ctx.a.shape, {dtype = "float64"}) * (ctx.a.scale or 1) + (ctx.a.mean or 0))
    :to(random_dtype(ctx, nil, "float32"))
end
E.RandomUniformLike = function(ctx, x)
  local lo, hi = ctx.a.low or 0, ctx.a.high or 1
  return (dle.rand(x:shape(), {dtype = "float64"}) * (hi - lo) + lo):to(random_dtype(ctx, x))
end
E.RandomNormalLike = function(ctx, x)
  return (dle.randn(x:shape(), {dtype = "float64"}) * (ctx.a.scale or 1) + (ctx.a.mean or 0)):to(random_dtype(ctx, x))
end

-- BitShift on unsigned integers (uint8..uint64): x * 2^y, wrapping in x's width as dle's
-- integer products do, or x // 2^y (2^y exact in float64, then in x's dtype).
local UNSIGNED = {uint8 = true, uint16 = true, uint32 = true, uint64 = true}
E.BitShift = function(ctx, x, y)
  if not UNSIGNED[x:dtype()] then U.fail(ctx, "BitShift needs an unsigned integer dtype, got " .. x:dtype()) end
  local p = dle.pow(dle.full_like(y, 2, {dtype = "float64"}), y:double()):to(x:dtype())
  if ctx.a.direction == "LEFT" then return x * p end
  return x // p
end

E.Cast = function(ctx, x) return x:to(U.dtype(ctx, ctx.a.to)) end
E.CastLike = function(_, x, like) return x:to(like:dtype()) end

return E
