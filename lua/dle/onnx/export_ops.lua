--- dle.onnx.export_ops: how each op of dle's table (engine/ops.def) is written as ONNX nodes.
--
-- M.ops[name] = function(e, n, x) -> output names: e is the emitter (dle.onnx.export), n the
-- traced node (n.attrs as traced: ints are 0-based dims; index_base = 1 when the op's index
-- inputs and outputs count from 1, as Lua's do), x the ONNX names of n's inputs. Results 2.. of
-- a two-result op are the "output" nodes after it. M.not_expressible[name] gives the reason an op
-- is not exported; every op of the table is in one of the two (export_spec checks it).
local dle = require("dle")

local M = {ops = {}, not_expressible = {}}
local ops, why = M.ops, M.not_expressible

local function a_ints(n) return n.attrs.ints or {} end
local function a_f(n, i, def) local f = n.attrs.f or {}; return f[i] == nil and def or f[i] end
local function is_float(dtype) return dtype:match("^float") ~= nil or dtype == "bfloat16" end

-- x cast to dtype when its node's dtype differs.
local function as(e, name, from, to)
  if from == to then return name end
  return e:node("Cast", {name}, {to = e:elem_type(to)})
end

-- The inputs of n cast to n's result dtype (ONNX's arithmetic wants equal types).
local function same_type_inputs(e, n, x, dtype)
  local out = {}
  for i, u in ipairs(n.inputs) do out[i] = as(e, x[i], u:dtype(), dtype or n:dtype()) end
  return out
end

local function unary(op_type, extra)
  return function(e, n, x)
    return e:node(op_type, same_type_inputs(e, n, x), extra)
  end
end

-- ---------------------------------------------------------------- elementwise
for dle_name, onnx_name in pairs({neg = "Neg", abs = "Abs", sign = "Sign", exp = "Exp", log = "Log",
    sqrt = "Sqrt", reciprocal = "Reciprocal", sin = "Sin", cos = "Cos", tan = "Tan", asin = "Asin",
    acos = "Acos", atan = "Atan", sinh = "Sinh", cosh = "Cosh", asinh = "Asinh", acosh = "Acosh",
    atanh = "Atanh", tanh = "Tanh", sigmoid = "Sigmoid", relu = "Relu", erf = "Erf", floor = "Floor",
    ceil = "Ceil", round = "Round"}) do
  ops[dle_name] = unary(onnx_name)
end
ops.logical_not = function(e, n, x) return e:node("Not", {as(e, x[1], n.inputs[1]:dtype(), "bool")}) end
ops.isnan = function(e, _, x) return e:node("IsNaN", x) end
ops.isinf = function(e, _, x) return e:node("IsInf", x) end
ops.isfinite = function(e, _, x)
  return e:node("Not", {e:node("Or", {e:node("IsNaN", x), e:node("IsInf", x)})})
end

-- f(e, dtype, x) composed of ONNX ops, on the input cast to the result dtype.
local function composed(f)
  return function(e, n, x)
    return f(e, n:dtype(), same_type_inputs(e, n, x)[1], n)
  end
end
ops.rsqrt = composed(function(e, _, x) return e:node("Reciprocal", {e:node("Sqrt", {x})}) end)
ops.expm1 = composed(function(e, d, x) return e:node("Sub", {e:node("Exp", {x}), e:scalar(1, d)}) end)
ops.log1p = composed(function(e, d, x) return e:node("Log", {e:node("Add", {x, e:scalar(1, d)})}) end)
ops.erfc = composed(function(e, d, x) return e:node("Sub", {e:scalar(1, d), e:node("Erf", {x})}) end)
ops.log2 = composed(function(e, d, x) return e:node("Div", {e:node("Log", {x}), e:scalar(math.log(2), d)}) end)
ops.log10 = composed(function(e, d, x) return e:node("Div", {e:node("Log", {x}), e:scalar(math.log(10), d)}) end)
ops.exp2 = composed(function(e, d, x) return e:node("Pow", {e:scalar(2, d), x}) end)
ops.silu = composed(function(e, _, x) return e:node("Mul", {x, e:node("Sigmoid", {x})}) end)
ops.gelu = composed(function(e, d, x)   -- exact: x/2 (1 + erf(x / sqrt 2))
  local erf = e:node("Erf", {e:node("Div", {x, e:scalar(math.sqrt(2), d)})})
  return e:node("Mul", {e:node("Mul", {x, e:scalar(0.5, d)}), e:node("Add", {erf, e:scalar(1, d)})})
end)
local function trunc(e, x) return e:node("Mul", {e:node("Sign", {x}), e:node("Floor", {e:node("Abs", {x})})}) end
ops.trunc = composed(function(e, d, x)
  if not is_float(d) then return e:node("Identity", {x}) end
  return trunc(e, x)
end)
ops.frac = composed(function(e, _, x) return e:node("Sub", {x, trunc(e, x)}) end)
ops.pow_scalar = composed(function(e, d, x, n) return e:node("Pow", {x, e:scalar(a_f(n, 1, 0), d)}) end)
ops.clamp = composed(function(e, d, x, n)
  local lo, hi = a_f(n, 1, -math.huge), a_f(n, 2, math.huge)
  if is_float(d) then return e:node("Clip", {x, e:scalar(lo, d), e:scalar(hi, d)}) end
  return e:node("Min", {e:node("Max", {x, e:scalar(lo, d)}), e:scalar(hi, d)})
end)

local function binary(op_type, extra)
  return function(e, n, x) return e:node(op_type, same_type_inputs(e, n, x), extra) end
end
ops.add, ops.sub, ops.mul, ops.div, ops.pow = binary("Add"), binary("Sub"), binary("Mul"), binary("Div"), binary("Pow")
ops.maximum, ops.minimum = binary("Max"), binary("Min")
ops.fmod = function(e, n, x) return e:node("Mod", same_type_inputs(e, n, x), {fmod = 1}) end
ops.remainder = function(e, n, x)
  local a = same_type_inputs(e, n, x)
  if not is_float(n:dtype()) then return e:node("Mod", a, {fmod = 0}) end
  -- floats: a - floor(a / b) b (ONNX's Mod takes fmod = 0 for integers only)
  return e:node("Sub", {a[1], e:node("Mul", {e:node("Floor", {e:node("Div", a)}), a[2]})})
end
ops.floor_divide = function(e, n, x)
  local a = same_type_inputs(e, n, x)
  if is_float(n:dtype()) then return e:node("Floor", {e:node("Div", a)}) end
  -- integers: Div truncates; floor through float64 (exact for |values| < 2^53)
  local f = {as(e, a[1], n:dtype(), "float64"), as(e, a[2], n:dtype(), "float64")}
  return as(e, e:node("Floor", {e:node("Div", f)}), "float64", n:dtype())
end
ops.hypot = function(e, n, x)
  local a = same_type_inputs(e, n, x)
  return e:node("Sqrt", {e:node("Add", {e:node("Mul", {a[1], a[1]}), e:node("Mul", {a[2], a[2]})})})
end
ops.logaddexp = function(e, n, x)   -- max(a, b) + log(1 + exp(-|a - b|))
  local a = same_type_inputs(e, n, x)
  local d = n:dtype()
  local t = e:node("Exp", {e:node("Neg", {e:node("Abs", {e:node("Sub", a)})})})
  return e:node("Add", {e:node("Max", a), e:node("Log", {e:node("Add", {t, e:scalar(1, d)})})})
end

-- comparisons: both sides in the wider of the two dtypes
local function compare(op_type, negate)
  return function(e, n, x)
    local da, db = n.inputs[1]:dtype(), n.inputs[2]:dtype()
    local d = da
    if da ~= db then d = (is_float(db) and not is_float(da) or db == "float64") and db or da end
    local r = e:node(op_type, {as(e, x[1], da, d), as(e, x[2], db, d)})
    return negate and e:node("Not", {r}) or r
  end
end
ops.eq, ops.ne = compare("Equal"), compare("Equal", true)
ops.lt, ops.le, ops.gt, ops.ge = compare("Less"), compare("LessOrEqual"), compare("Greater"), compare("GreaterOrEqual")
ops.where = function(e, n, x)
  local d = n:dtype()
  return e:node("Where", {as(e, x[1], n.inputs[1]:dtype(), "bool"), as(e, x[2], n.inputs[2]:dtype(), d),
                          as(e, x[3], n.inputs[3]:dtype(), d)})
end
ops.masked_fill = function(e, n, x)
  return e:node("Where", {x[2], e:scalar(a_f(n, 1, 0), n:dtype()), x[1]})
end

-- ---------------------------------------------------------------- reductions
-- The reduced axes (0-based) of n, all of the input's when the attrs list none.
local function reduce_axes(n)
  local axes = a_ints(n)
  if #axes > 0 then return axes end
  local all = {}
  for i = 1, #n.inputs[1]:shape() do all[i] = i - 1 end
  return all
end

-- ReduceX over n's axes: opset 13+ takes ReduceSum's axes as an input, the others' as an attribute.
local function reduce(e, op_type, x, axes, keepdim)
  if #axes == 0 then return e:node("Identity", {x}) end
  if op_type == "ReduceSum" then
    return e:node(op_type, {x, e:ints(axes)}, {keepdims = keepdim and 1 or 0})
  end
  return e:node(op_type, {x}, {axes = axes, keepdims = keepdim and 1 or 0})
end
M.reduce = reduce

for dle_name, onnx_name in pairs({sum = "ReduceSum", mean = "ReduceMean", prod = "ReduceProd", amax = "ReduceMax",
                                  amin = "ReduceMin", logsumexp = "ReduceLogSumExp"}) do
  ops[dle_name] = function(e, n, x)
    return reduce(e, onnx_name, same_type_inputs(e, n, x)[1], reduce_axes(n), n.attrs.keepdim)
  end
end
-- var and std: sum of squared deviations / (count - correction)
local function variance(e, n, x)
  local d = n:dtype()
  local xin = same_type_inputs(e, n, x)[1]
  local axes, shape, count = reduce_axes(n), n.inputs[1]:shape(), 1
  for _, a in ipairs(axes) do count = count * shape[a + 1] end
  local dev = e:node("Sub", {xin, reduce(e, "ReduceMean", xin, axes, true)})
  local ss = reduce(e, "ReduceSum", e:node("Mul", {dev, dev}), axes, n.attrs.keepdim)
  return e:node("Div", {ss, e:scalar(count - a_f(n, 1, 1), d)})
end
ops.var = variance
ops.std = function(e, n, x) return e:node("Sqrt", {variance(e, n, x)}) end

-- an int64 index result of an op with index_base 1, counted from 1 as dle's are
local function rebase_out(e, n, idx)
  if n.attrs.index_base == 1 then return e:node("Add", {idx, e:scalar(1, "int64")}) end
  return idx
end
-- an int64 index input counted from 1, as ONNX's 0-based index
local function rebase_in(e, n, idx, dtype)
  idx = as(e, idx, dtype, "int64")
  if n.attrs.index_base == 1 then return e:node("Sub", {idx, e:scalar(1, "int64")}) end
  return idx
end

local function arg_reduce(op_type)
  return function(e, n, x)
    local axis = a_ints(n)[1]
    local xin = x[1]
    if not axis then   -- over all elements
      xin, axis = e:node("Reshape", {xin, e:ints({-1})}), 0
    end
    return rebase_out(e, n, e:node(op_type, {xin}, {axis = axis, keepdims = n.attrs.keepdim and 1 or 0}))
  end
end
ops.argmax, ops.argmin = arg_reduce("ArgMax"), arg_reduce("ArgMin")
ops.max = function(e, n, x)
  local axis = a_ints(n)[1]
  local v = reduce(e, "ReduceMax", x[1], {axis}, n.attrs.keepdim)
  return v, ops.argmax(e, n, x)
end
ops.min = function(e, n, x)
  local axis = a_ints(n)[1]
  local v = reduce(e, "ReduceMin", x[1], {axis}, n.attrs.keepdim)
  return v, ops.argmin(e, n, x)
end

ops.softmax = function(e, n, x) return e:node("Softmax", same_type_inputs(e, n, x), {axis = a_ints(n)[1]}) end
ops.log_softmax = function(e, n, x) return e:node("LogSoftmax", same_type_inputs(e, n, x), {axis = a_ints(n)[1]}) end
ops.cumsum = function(e, n, x)
  local xin = same_type_inputs(e, n, x)[1]
  return e:node("CumSum", {xin, e:ints({a_ints(n)[1]}, true)}, {reverse = a_ints(n)[2] or 0})
end

-- ---------------------------------------------------------------- matmul, shapes, indexing
ops.matmul = function(e, _, x)
  local y = e:node("MatMul", {x[1], x[2]})
  if x[3] then y = e:node("Add", {y, x[3]}) end
  return y
end
ops.copy = function(e, n, x) return as(e, x[1], n.inputs[1]:dtype(), n:dtype()) end
ops.view = function(e, n, x)
  if n:dtype() ~= n.inputs[1]:dtype() then   -- view_as_real / view_as_complex
    return e:unsupported(n, "view_as_real/view_as_complex: ONNX has no complex view")
  end
  return e:node("Reshape", {x[1], e:ints(e:shape_arg(n, n.inputs[1]))})
end
ops.expand = function(e, n, x) return e:node("Expand", {x[1], e:ints(e:shape_arg(n, n.inputs[1], 1))}) end
ops.permute = function(e, n, x) return e:node("Transpose", x, {perm = a_ints(n)}) end
ops.narrow = function(e, n, x)
  local i = a_ints(n)
  return e:node("Slice", {x[1], e:ints({i[2]}), e:ints({i[2] + i[3]}), e:ints({i[1]})})
end
ops.select = function(e, n, x)
  local i = a_ints(n)
  return e:node("Gather", {x[1], e:ints(i[2], true)}, {axis = i[1]})
end
ops.cat = function(e, n, x)
  return e:node("Concat", same_type_inputs(e, n, x), {axis = a_ints(n)[1]})
end
ops.gather = function(e, n, x)
  return e:node("GatherElements", {x[1], rebase_in(e, n, x[2], n.inputs[2]:dtype())}, {axis = a_ints(n)[1]})
end
ops.index_select = function(e, n, x)
  return e:node("Gather", {x[1], rebase_in(e, n, x[2], n.inputs[2]:dtype())}, {axis = a_ints(n)[1]})
end
ops.scatter_add = function(e, n, x)
  if e.opset < 16 then return e:unsupported(n, "ScatterElements' reduction needs opset 16") end
  return e:node("ScatterElements", {x[1], rebase_in(e, n, x[2], n.inputs[2]:dtype()), x[3]},
                {axis = a_ints(n)[1], reduction = "add"})
end
ops.embedding = function(e, n, x)
  if (a_ints(n)[3] or 0) ~= 0 then return e:unsupported(n, "rows read as zeros at padding_idx") end
  return e:node("Gather", {x[1], rebase_in(e, n, x[2], n.inputs[2]:dtype())}, {axis = 0})
end
local function trilu(upper)
  return function(e, n, x)
    if e.opset < 14 then return e:unsupported(n, "Trilu needs opset 14") end
    return e:node("Trilu", {x[1], e:ints(a_ints(n)[1] or 0, true)}, {upper = upper})
  end
end
ops.tril, ops.triu = trilu(0), trilu(1)
-- sort and topk as TopK (values, indices); sort's ties may come out in another order
ops.topk = function(e, n, x)
  local i = a_ints(n)
  local v, idx = e:node("TopK", {x[1], e:ints({i[2]})}, {axis = i[1], largest = i[3] or 1, sorted = 1}, 2)
  return v, rebase_out(e, n, idx)
end
ops.sort = function(e, n, x)
  local i = a_ints(n)
  local size = n.inputs[1]:shape()[i[1] + 1]
  local v, idx = e:node("TopK", {x[1], e:ints({size})}, {axis = i[1], largest = i[2] or 0, sorted = 1}, 2)
  return v, rebase_out(e, n, idx)
end

-- creation ops have no inputs: their values are computed now and written as constants
ops.full = function(e, n)
  return e:const(dle.full(n:shape(), a_f(n, 1, 0), {dtype = n:dtype()}))
end
ops.arange = function(e, n)
  local start, step = a_f(n, 1, 0), a_f(n, 2, 1)
  local len = n:shape()[1]
  return e:const(dle.arange(start, start + step * len - step / 2, step, {dtype = n:dtype()}):narrow(1, 1, len))
end

-- ---------------------------------------------------------------- nn
ops.conv2d = function(e, n, x)
  local i = a_ints(n)
  return e:node("Conv", x, {strides = {i[1], i[2]}, pads = {i[3], i[4], i[3], i[4]},
                            dilations = {i[5], i[6]}, group = i[7],
                            kernel_shape = {n.inputs[2]:shape()[3], n.inputs[2]:shape()[4]}})
end
local function pool_attrs(n)
  local i = a_ints(n)
  return {kernel_shape = {i[1], i[2]}, strides = {i[3], i[4]}, pads = {i[5], i[6], i[5], i[6]}}
end
ops.max_pool2d = function(e, n, x)
  return e:node("MaxPool", x, pool_attrs(n)), e:unsupported_result(n, 2, "dle's argmax indices count h*W+w per plane")
end
ops.avg_pool2d = function(e, n, x)
  local a = pool_attrs(n)
  a.count_include_pad = a_ints(n)[7] or 0
  return e:node("AveragePool", x, a)
end

-- the weight and bias inputs of a norm node (ints[2], ints[3] say which are given), defaulting to
-- ones and zeros of size c
local function affine(e, n, x, c)
  local i, k = a_ints(n), 2
  local w, b
  if i[2] == 1 then w = x[k]; k = k + 1 else w = e:const(dle.ones({c}, {dtype = n:dtype()})) end
  if i[3] == 1 then b = x[k]; k = k + 1 else b = e:const(dle.zeros({c}, {dtype = n:dtype()})) end
  return w, b, k
end
local stats_why = "the statistics result feeds only dle's backward"
ops.batch_norm = function(e, n, x)
  local i = a_ints(n)
  if i[1] ~= 0 then return e:unsupported(n, "batch statistics (training mode); export the model in eval mode") end
  local w, b, k = affine(e, n, x, n:shape()[2])
  return e:node("BatchNormalization", {x[1], w, b, x[k], x[k + 1]}, {epsilon = a_f(n, 1, 1e-5)}),
         e:unsupported_result(n, 2, stats_why)
end
ops.layer_norm = function(e, n, x)
  local nd = a_ints(n)[1]
  local shape = n:shape()
  local c = 1
  for d = #shape - nd + 1, #shape do c = c * shape[d] end
  local w, b = affine(e, n, x, c)
  local eps = a_f(n, 1, 1e-5)
  if e.opset >= 17 then
    return e:node("LayerNormalization", {x[1], w, b}, {axis = -nd, epsilon = eps}),
           e:unsupported_result(n, 2, stats_why)
  end
  local axes = {}
  for d = #shape - nd, #shape - 1 do axes[#axes + 1] = d end
  local dt = n:dtype()
  local dev = e:node("Sub", {x[1], reduce(e, "ReduceMean", x[1], axes, true)})
  local var = reduce(e, "ReduceMean", e:node("Mul", {dev, dev}), axes, true)
  local y = e:node("Div", {dev, e:node("Sqrt", {e:node("Add", {var, e:scalar(eps, dt)})})})
  return e:node("Add", {e:node("Mul", {y, w}), b}), e:unsupported_result(n, 2, stats_why)
end
-- sdpa: softmax(q k^T scale + mask) v; the probabilities are the second result
ops.sdpa = function(e, n, x)
  local i = a_ints(n)
  local d = n:dtype()
  local q, k, v = x[1], x[2], x[3]
  local kshape = n.inputs[2] and n.inputs[2]:shape()
  if (i[2] or 0) ~= 0 then   -- packed: qkv {3, ..., T, E}[, mask]
    local qkv = x[1]
    q, k, v = e:node("Gather", {qkv, e:ints(0)}, {axis = 0}), e:node("Gather", {qkv, e:ints(1)}, {axis = 0}),
              e:node("Gather", {qkv, e:ints(2)}, {axis = 0})
    x = {q, k, v, x[2]}
    kshape = n:shape()
    n = {inputs = {n.inputs[1], n.inputs[1], n.inputs[1], n.inputs[2]}, attrs = n.attrs,
         shape = function() return kshape end}
  end
  local perm = {}
  for j = 1, #kshape do perm[j] = j - 1 end
  perm[#kshape - 1], perm[#kshape] = #kshape - 1, #kshape - 2
  local s = e:node("Mul", {e:node("MatMul", {q, e:node("Transpose", {k}, {perm = perm})}), e:scalar(a_f(n, 1, 1), d)})
  if x[4] then
    local mdt = n.inputs[4]:dtype()
    if mdt == "bool" then
      s = e:node("Where", {x[4], s, e:scalar(-math.huge, d)})
    else
      s = e:node("Add", {s, as(e, x[4], mdt, d)})
    end
  end
  if i[1] == 1 then
    local L, S = n:shape()[#n:shape() - 1], kshape[#kshape - 1]
    local above = dle.ones({L, S}, {dtype = "bool"}):triu(1 + S - L)
    local bias = dle.zeros({L, S}, {dtype = d}):masked_fill(above, -math.huge)
    s = e:node("Add", {s, e:const(bias)})
  end
  local p = e:node("Softmax", {s}, {axis = -1})
  return e:node("MatMul", {p, v}), p
end

-- ---------------------------------------------------------------- rearranging copies, resampling
local BIG = math.maxinteger   -- Slice's "to the end"
local function slice(e, x, from, to, axis, step)
  local inputs = {x, e:ints({from}), e:ints({to}), e:ints({axis})}
  if step then inputs[5] = e:ints({step}) end
  return e:node("Slice", inputs)
end
ops.flip = function(e, n, x)   -- ints[0]: a bit mask of the flipped (0-based) dims
  local axes, mask = {}, a_ints(n)[1] or 0
  for d = 0, #n:shape() - 1 do if mask >> d & 1 == 1 then axes[#axes + 1] = d end end
  if #axes == 0 then return e:node("Identity", x) end
  local k, minus1, lowest = #axes, {}, {}
  for j = 1, k do minus1[j], lowest[j] = -1, math.mininteger end
  return e:node("Slice", {x[1], e:ints(minus1), e:ints(lowest), e:ints(axes), e:ints(minus1)})
end
-- a rotation of dim d by s in [0, size): the last s elements, then the others
local function rotate(e, y, d, s)
  if s == 0 then return y end
  return e:node("Concat", {slice(e, y, -s, BIG, d), slice(e, y, 0, -s, d)}, {axis = d})
end
ops.roll = function(e, n, x)   -- ints[d]: the shift of dim d
  local y = x[1]
  for d, s in ipairs(a_ints(n)) do y = rotate(e, y, d - 1, s) end
  return y
end
local PAD_MODES = {[0] = "constant", "reflect", "edge", "circular"}
ops.pad = function(e, n, x)   -- ints: mode, then left/right pads of the last dims (last dim first)
  local i, nd = a_ints(n), #n:shape()
  local mode = PAD_MODES[i[1]]
  local lo, hi = {}, {}
  for d = 1, nd do lo[d], hi[d] = 0, 0 end
  for k = 1, (#i - 1) // 2 do
    local d = nd + 1 - k
    lo[d], hi[d] = i[2 * k], i[2 * k + 1]
    if mode ~= "constant" and (lo[d] < 0 or hi[d] < 0) then
      return e:unsupported(n, mode .. " padding by a negative amount")
    end
  end
  if mode == "circular" then   -- ONNX's wrap mode needs opset 19: the wrapped ends by Slice and Concat
    local y = x[1]
    for d = 1, nd do
      if lo[d] > 0 or hi[d] > 0 then
        local parts = {}
        if lo[d] > 0 then parts[#parts + 1] = slice(e, y, -lo[d], BIG, d - 1) end
        parts[#parts + 1] = y
        if hi[d] > 0 then parts[#parts + 1] = slice(e, y, 0, hi[d], d - 1) end
        y = e:node("Concat", parts, {axis = d - 1})
      end
    end
    return y
  end
  local pads = {}
  for d = 1, nd do pads[d], pads[nd + d] = lo[d], hi[d] end
  local inputs = {x[1], e:ints(pads)}
  if mode == "constant" then inputs[3] = e:scalar(a_f(n, 1, 0), n:dtype()) end
  return e:node("Pad", inputs, {mode = mode})
end

-- group_norm: statistics over {N, groups, rest}, then the per-channel affine
ops.group_norm = function(e, n, x)
  local shape, dt = n:shape(), n:dtype()
  local w, b = affine(e, n, x, shape[2])
  local g = e:node("Reshape", {x[1], e:ints({0, a_ints(n)[1], -1})})
  local dev = e:node("Sub", {g, reduce(e, "ReduceMean", g, {2}, true)})
  local var = reduce(e, "ReduceMean", e:node("Mul", {dev, dev}), {2}, true)
  local y = e:node("Div", {dev, e:node("Sqrt", {e:node("Add", {var, e:scalar(a_f(n, 1, 1e-5), dt)})})})
  y = e:node("Reshape", {y, e:node("Shape", {x[1]})})
  local per_channel = {shape[2]}
  for _ = 3, #shape do per_channel[#per_channel + 1] = 1 end
  local col = e:ints(per_channel)
  return e:node("Add", {e:node("Mul", {y, e:node("Reshape", {w, col})}), e:node("Reshape", {b, col})}),
         e:unsupported_result(n, 2, stats_why)
end

-- upsample as Resize: PyTorch's source-index rule of each mode is one of ONNX's coordinate modes
local RESIZE = {
  [0] = {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"},
  {mode = "nearest", coordinate_transformation_mode = "half_pixel", nearest_mode = "round_prefer_ceil"},
  {mode = "linear", coordinate_transformation_mode = "pytorch_half_pixel"},
  {mode = "cubic", coordinate_transformation_mode = "half_pixel", cubic_coeff_a = -0.75},
}
ops.upsample = function(e, n, x)   -- ints: mode, align_corners, sizes (from [2]), scale bits (from [5])
  local i, shape = a_ints(n), n:shape()
  local k = #shape - 2
  local attrs = {}
  for key, v in pairs(RESIZE[i[1]]) do attrs[key] = v end
  if i[2] == 1 then attrs.coordinate_transformation_mode = "align_corners" end
  local scales, given = {1, 1}, false
  for d = 1, k do
    local s = string.unpack("d", string.pack("j", i[5 + d] or 0))
    given = given or s ~= 0
    scales[2 + d] = s ~= 0 and s or shape[2 + d] / n.inputs[1]:shape()[2 + d]
  end
  local roi = e:const(dle.zeros({0}, {dtype = "float32"}))
  if given then   -- the scale factors the source indices use, as PyTorch's
    return e:node("Resize", {x[1], roi, e:const(dle.tensor(scales, {dtype = "float32"}))}, attrs)
  end
  local sizes = {}
  for d = 1, k do sizes[d] = shape[2 + d] end
  local nc = slice(e, e:node("Shape", {x[1]}), 0, 2, 0)
  local full = e:node("Concat", {nc, e:ints(sizes)}, {axis = 0})
  return e:node("Resize", {x[1], roi, "", full}, attrs)
end

-- ---------------------------------------------------------------- scatter
ops.scatter = function(e, n, x)   -- repeated indices: dle's last write wins, ONNX leaves the order open
  return e:node("ScatterElements", {x[1], rebase_in(e, n, x[2], n.inputs[2]:dtype()), x[3]},
                {axis = a_ints(n)[1]})
end
local SCATTER_REDUCTION = {"add", "mul", nil, "max", "min"}
ops.scatter_reduce = function(e, n, x)
  local i = a_ints(n)
  local r = SCATTER_REDUCTION[i[2]]
  if not r then return e:unsupported(n, "ScatterElements has no mean reduction") end
  if i[3] ~= 1 then return e:unsupported(n, "ScatterElements always includes self (include_self = false)") end
  local need = (r == "max" or r == "min") and 18 or 16
  if e.opset < need then return e:unsupported(n, ("ScatterElements' reduction %s needs opset %d"):format(r, need)) end
  return e:node("ScatterElements", {x[1], rebase_in(e, n, x[2], n.inputs[2]:dtype()), x[3]},
                {axis = i[1], reduction = r})
end

-- ---------------------------------------------------------------- recurrent cells
-- the k-th slice of the given width along the last dim of x
local function chunk(e, x, k, width)
  return slice(e, x, (k - 1) * width, k * width, -1)
end
local act_why = "the activated gates feed only dle's backward"
ops.lstm_cell_fused = function(e, n, x)   -- xg, hg {N, 4H} (i, f, g, o), c {N, H} -> h', c'
  local H = n:shape()[2]
  local g = e:node("Add", {x[1], x[2]})
  local function gate(k, act) return e:node(act, {chunk(e, g, k, H)}) end
  local c = e:node("Add", {e:node("Mul", {gate(2, "Sigmoid"), x[3]}),
                           e:node("Mul", {gate(1, "Sigmoid"), gate(3, "Tanh")})})
  return e:node("Mul", {gate(4, "Sigmoid"), e:node("Tanh", {c})}), c, e:unsupported_result(n, 3, act_why)
end
ops.gru_cell_fused = function(e, n, x)   -- xg, hg {N, 3H} (r, z, n), h {N, H} -> h'
  local H, d = n:shape()[2], n:dtype()
  local function part(y, k) return chunk(e, y, k, H) end
  local r = e:node("Sigmoid", {e:node("Add", {part(x[1], 1), part(x[2], 1)})})
  local z = e:node("Sigmoid", {e:node("Add", {part(x[1], 2), part(x[2], 2)})})
  local m = e:node("Tanh", {e:node("Add", {part(x[1], 3), e:node("Mul", {r, part(x[2], 3)})})})
  local keep = e:node("Mul", {z, x[3]})
  return e:node("Add", {e:node("Mul", {e:node("Sub", {e:scalar(1, d), z}), m}), keep}),
         e:unsupported_result(n, 2, act_why)
end

-- diagonal (ints: offset, dim1, dim2): dim1 and dim2 moved last and flattened, then the diagonal's
-- positions gathered, appended as the last dim as dle's view does
ops.diagonal = function(e, n, x)
  local i = a_ints(n)
  local offset, d1, d2 = i[1], i[2], i[3]
  local shape = n.inputs[1]:shape()
  local perm = {}
  for d = 0, #shape - 1 do if d ~= d1 and d ~= d2 then perm[#perm + 1] = d end end
  perm[#perm + 1], perm[#perm + 2] = d1, d2
  local n1, n2 = shape[d1 + 1], shape[d2 + 1]
  local flat = {}
  for k = 1, #shape - 2 do flat[k] = 0 end   -- Reshape's 0: keep that dim
  flat[#flat + 1] = n1 * n2
  local rows = e:node("Reshape", {e:node("Transpose", x, {perm = perm}), e:ints(flat)})
  local pos = {}
  for r = math.max(0, -offset), n1 - 1 do
    local c = r + offset
    if c >= n2 then break end
    pos[#pos + 1] = r * n2 + c
  end
  return e:node("Gather", {rows, e:ints(pos)}, {axis = #shape - 2})
end

-- masked_scatter: the k-th true element of the (broadcast) mask takes source's k-th element, found
-- by a running count of the mask over the flattened self
ops.masked_scatter = function(e, n, x)
  local self_shape = e:node("Shape", {x[1]})
  local mask = e:node("Reshape", {e:node("Expand", {as(e, x[2], n.inputs[2]:dtype(), "bool"), self_shape}),
                                  e:ints({-1})})
  local count = e:node("CumSum", {as(e, mask, "bool", "int64"), e:ints(0)})
  local at = e:node("Max", {e:node("Sub", {count, e:scalar(1, "int64")}), e:scalar(0, "int64")})
  local taken = e:node("Gather", {e:node("Reshape", {x[3], e:ints({-1})}), at}, {axis = 0})
  local flat = e:node("Where", {mask, taken, e:node("Reshape", {x[1], e:ints({-1})})})
  return e:node("Reshape", {flat, self_shape})
end

-- ---------------------------------------------------------------- NaN rules, signs, quadrants
ops.nan_to_num = composed(function(e, d, x, n)   -- nan -> f[1], +inf -> f[2], -inf -> f[3]
  local pos = e:node("IsInf", {x}, {detect_negative = 0, detect_positive = 1})
  local neg = e:node("IsInf", {x}, {detect_negative = 1, detect_positive = 0})
  local y = e:node("Where", {neg, e:scalar(a_f(n, 3, 0), d), x})
  y = e:node("Where", {pos, e:scalar(a_f(n, 2, 0), d), y})
  return e:node("Where", {e:node("IsNaN", {x}), e:scalar(a_f(n, 1, 0), d), y})
end)
-- fmax / fmin: the other operand where one is NaN
local function nan_ignoring(op_type)
  return function(e, n, x)
    local a = same_type_inputs(e, n, x)
    local m = e:node(op_type, a)
    return e:node("Where", {e:node("IsNaN", {a[1]}), a[2], e:node("Where", {e:node("IsNaN", {a[2]}), a[1], m})})
  end
end
ops.fmax, ops.fmin = nan_ignoring("Max"), nan_ignoring("Min")
ops.copysign = function(e, n, x)   -- |a| with b's sign, -0.0 included (1 / -0.0 < 0)
  local a = same_type_inputs(e, n, x)
  local d = n:dtype()
  local zero = e:scalar(0, d)
  local negative = e:node("Or", {e:node("Less", {a[2], zero}),
                                 e:node("And", {e:node("Equal", {a[2], zero}),
                                                e:node("Less", {e:node("Div", {e:scalar(1, d), a[2]}), zero})})})
  local m = e:node("Abs", {a[1]})
  return e:node("Where", {negative, e:node("Neg", {m}), m})
end
ops.atan2 = function(e, n, x)   -- atan(y / x), moved by pi to x < 0's half plane; +-pi/2 on x = 0
  local a = same_type_inputs(e, n, x)
  local d = n:dtype()
  local y, xx, zero = a[1], a[2], e:scalar(0, d)
  local base = e:node("Atan", {e:node("Div", {y, xx})})
  local shifted = e:node("Where", {e:node("Less", {y, zero}), e:node("Sub", {base, e:scalar(math.pi, d)}),
                                   e:node("Add", {base, e:scalar(math.pi, d)})})
  local on_axis = e:node("Where", {e:node("Greater", {y, zero}), e:scalar(math.pi / 2, d),
                                   e:node("Where", {e:node("Less", {y, zero}), e:scalar(-math.pi / 2, d), zero})})
  local r = e:node("Where", {e:node("Less", {xx, zero}), shifted, base})
  return e:node("Where", {e:node("Equal", {xx, zero}), on_axis, r})
end

-- ---------------------------------------------------------------- more index and sort ops
ops.one_hot = function(e, n, x)
  local shape = n:shape()
  local values = e:const(dle.tensor({0, 1}, {dtype = n:dtype()}))
  return e:node("OneHot", {rebase_in(e, n, x[1], n.inputs[1]:dtype()), e:ints({shape[#shape]}), values},
                {axis = -1})
end
ops.kthvalue = function(e, n, x)   -- ints: dim, k (1-based); keepdim when the result keeps the dim
  local i = a_ints(n)
  local keep = #n:shape() == #n.inputs[1]:shape()
  local v, idx = e:node("TopK", {x[1], e:ints({i[2]})}, {axis = i[1], largest = 0, sorted = 1}, 2)
  local function kth(t)
    t = slice(e, t, i[2] - 1, i[2], i[1])
    if not keep then t = e:node("Squeeze", {t, e:ints({i[1]})}) end
    return t
  end
  return kth(v), rebase_out(e, n, kth(idx))
end
ops.index_add = function(e, n, x)   -- src's rows added at index along dim: ScatterElements(add)
  if e.opset < 16 then return e:unsupported(n, "ScatterElements' reduction needs opset 16") end
  local dim, nd = a_ints(n)[1], #n:shape()
  local shape = {}
  for d = 0, nd - 1 do shape[d + 1] = d == dim and -1 or 1 end
  local idx = e:node("Reshape", {rebase_in(e, n, x[2], n.inputs[2]:dtype()), e:ints(shape)})
  idx = e:node("Expand", {idx, e:node("Shape", {x[3]})})
  return e:node("ScatterElements", {x[1], idx, x[3]}, {axis = dim, reduction = "add"})
end

-- ---------------------------------------------------------------- not expressible, with reasons
local backward = "a gradient op: it appears only in backward graphs, which are not exported"
for _, name in ipairs({"gelu_grad", "gelu_backward", "conv2d_grad_input", "conv2d_grad_weight", "avg_pool2d_grad",
    "layer_norm_grad_input", "layer_norm_grad_affine", "batch_norm_grad_input", "batch_norm_grad_affine",
    "cross_entropy_backward", "embedding_backward", "sdpa_score_grad", "sdpa_backward", "mse_loss_backward",
    "nll_loss_backward", "binary_cross_entropy_with_logits_backward", "soft_cross_entropy_backward"}) do
  why[name] = backward
end
local random = "draws from dle's Philox stream, which ONNX's Random* ops cannot reproduce"
why.rand, why.randn, why.randint, why.dropout = random, random, random, random
local loss = "a training loss: not exported (export the model, not its loss)"
for _, name in ipairs({"cross_entropy", "mse_loss", "nll_loss", "binary_cross_entropy_with_logits",
                       "soft_cross_entropy"}) do why[name] = loss end
local linalg = "ONNX has no operator for this decomposition"
for _, name in ipairs({"linalg_solve", "linalg_inv", "linalg_slogdet", "linalg_cholesky", "linalg_qr",
                       "linalg_svd", "linalg_eigh"}) do why[name] = linalg end
ops.linalg_det = function(e, _, x) return e:node("Det", x) end
why.erfinv = "ONNX has no inverse error function"
why.fft = "FFTW transforms over any dims with PyTorch's norms; ONNX's DFT (opset 17) is not mapped yet"
why.cumprod = "ONNX has CumSum only (a log-space product is wrong for zeros and negatives)"
why.logcumsumexp = "ONNX has CumSum only (exp overflows outside a fused log-space scan)"
why.cummax, why.cummin = "ONNX has no running max/min", "ONNX has no running max/min"
why.group_norm_grad_input, why.group_norm_grad_affine, why.upsample_backward = backward, backward, backward
why.lstm_cell_fused_backward, why.gru_cell_fused_backward, why.ctc_loss_backward = backward, backward, backward
why.ctc_loss = loss
why.bincount = "its length is read from the data (max + 1): ONNX cannot size a result by a value"
why.searchsorted = "ONNX has no binary search (a comparison count by ReduceSum could express it)"
why.mode = "ONNX has no per-line most-frequent value"
local sized_by_data = "its result size depends on the data, which dle's tracer cannot replay"
why.nonzero, why.masked_select, why.unique = sized_by_data, sized_by_data, sized_by_data

return M
