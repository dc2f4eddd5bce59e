--- dle.onnx.ops_quant: ONNX's linear quantization operators on dle's uint8 and int32 tensors
-- (int8 has no dle dtype: such models stop at load with "unsupported data type INT8"). The
-- arithmetic runs in float64, exact for these integer ranges; rounding is half to even, as ONNX's.
local dle = require("dle")
local U = require("dle.onnx.util")
local N = require("dle.onnx.ops_nn")

local Q = {}

-- A per-tensor or per-axis (1-D) quantization parameter shaped to broadcast against x.
local function along(ctx, p, x)
  if p:dim() == 0 or p:numel() == 1 and x:dim() == 0 then return p:double():reshape({}) end
  if p:dim() == 1 and p:numel() == 1 then return p:double():reshape({}) end
  local d = U.dim(ctx, ctx.a.axis or 1, x:dim())
  local shape = {}
  for i = 1, x:dim() do shape[i] = i == d and p:numel() or 1 end
  return p:double():reshape(shape)
end

local function saturate(v, dt)
  if dt == "uint8" then return v:clamp(0, 255) end
  if dt == "int32" then return v:clamp(-2147483648, 2147483647) end
  return v
end

local function quantize(ctx, x, scale, zp)
  local dt = zp and zp:dtype() or "uint8"
  -- the division in x's own precision, as the reference computes it (x / scale may land on a half
  -- in float32 and not in float64)
  local xf = x:is_floating_point() and x or x:double()
  local v = (xf / along(ctx, scale, x):to(xf:dtype())):double():round()
  if zp then v = v + along(ctx, zp, x) end
  return saturate(v, dt):to(dt)
end

local function dequantize(ctx, x, scale, zp)
  local v = x:double()
  if zp then v = v - along(ctx, zp, x) end
  return (v * along(ctx, scale, x)):to(scale:dtype())
end

Q.QuantizeLinear = function(ctx, x, scale, zp) return quantize(ctx, x, scale, zp) end
Q.DequantizeLinear = function(ctx, x, scale, zp) return dequantize(ctx, x, scale, zp) end

-- uint8 with the range of x widened to include 0, in float32 as the reference computes it.
Q.DynamicQuantizeLinear = function(_, x)
  local lo = dle.minimum(x:amin(), dle.zeros({}, {dtype = x:dtype()}))
  local hi = dle.maximum(x:amax(), dle.zeros({}, {dtype = x:dtype()}))
  local scale = (hi - lo) / 255
  local zp = saturate((-lo / scale):round(), "uint8")
  local y = saturate((x / scale):round() + zp, "uint8")
  return y:to("uint8"), scale, zp:to("uint8")
end

local function centered(x, zp)
  local v = x:double()
  if zp then v = v - zp:double() end
  return v
end

Q.MatMulInteger = function(_, a, b, azp, bzp)
  return dle.matmul(centered(a, azp), centered(b, bzp)):to("int32")
end

Q.ConvInteger = function(ctx, x, w, xzp, wzp)
  return N.Conv(ctx, centered(x, xzp), centered(w, wzp)):round():to("int32")
end

Q.QLinearMatMul = function(_, a, as, azp, b, bs, bzp, ys, yzp)
  local real = dle.matmul(centered(a, azp), centered(b, bzp)) * (as:double() * bs:double())
  return quantize({a = {}}, real, ys:double(), yzp)
end

Q.QLinearConv = function(ctx, x, xs, xzp, w, ws, wzp, ys, yzp, b)
  local acc = N.Conv(ctx, centered(x, xzp), centered(w, wzp), b and b:double())
  local wscale = ws:numel() > 1 and ws:double():reshape(1, -1, 1, 1) or ws:double():reshape({})
  return quantize({a = {}}, acc * (xs:double() * wscale), ys:double(), yzp)
end

return Q
