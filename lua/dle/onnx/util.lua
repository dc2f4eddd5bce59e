--- dle.onnx.util: helpers the op tables share: ONNX axes as dle dims, tensors as Lua integer
-- lists (shape inputs), ONNX data type numbers as dle dtypes, padding with a constant.
local dle = require("dle")

local U = {}

-- ONNX TensorProto.DataType numbers of the types dle has.
U.DTYPES = {[1] = "float32", [2] = "uint8", [3] = "int8", [4] = "uint16", [5] = "int16", [6] = "int32",
            [7] = "int64", [9] = "bool", [10] = "float16", [11] = "float64", [12] = "uint32", [13] = "uint64",
            [16] = "bfloat16"}
U.TYPE_NAMES = {[0] = "UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING",
                "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"}

--- Raises the error every op mapping gives for input it cannot run ("dle.onnx: node 'n' (Op): ...").
function U.fail(ctx, msg)
  error(("dle.onnx: node '%s' (%s): %s"):format(ctx.node.name, ctx.node.op_type, msg), 0)
end

--- The dle dtype of ONNX data type number `t`, or an error naming the node.
function U.dtype(ctx, t)
  local d = U.DTYPES[t]
  if not d then U.fail(ctx, "unsupported data type " .. (U.TYPE_NAMES[t] or tostring(t))) end
  return d
end

--- The 1-based positive dim of ONNX axis `axis` (0-based, negative from the end) of a rank-`rank` tensor.
function U.dim(ctx, axis, rank)
  local d = axis < 0 and axis + rank + 1 or axis + 1
  if d < 1 or d > math.max(rank, 1) then
    U.fail(ctx, ("axis %d out of range for rank %d"):format(axis, rank))
  end
  return d
end

--- The dims of a list of ONNX axes, sorted ascending.
function U.dims(ctx, axes, rank)
  local out = {}
  for i, a in ipairs(axes) do out[i] = U.dim(ctx, a, rank) end
  table.sort(out)
  return out
end

-- Values of tensors known without reading them (constants read once at load time, Shape's
-- outputs): reading a tensor into Lua inside dle.graph.trace makes the trace unsafe, so shape
-- arithmetic on such values keeps imported models traceable.
local known = setmetatable({}, {__mode = "k"})

--- Records the Lua list of values of t (flattened) and returns t.
function U.remember(t, values)
  known[t] = values
  return t
end

--- A tensor's values (flattened) as a Lua list; remembered for the next time.
function U.values(t)
  if t == nil then return nil end
  local v = known[t]
  if v then return v end
  v = t:reshape(-1):totable()
  known[t] = v
  return v
end

--- A 0-d or 1-d integer tensor (a shape, axes, starts...) as a Lua list of integers.
function U.ints(t)
  if t == nil then return nil end
  local v = U.values(t)
  local out = {}
  for i, x in ipairs(v) do out[i] = math.tointeger(x) or math.floor(x) end
  return out
end

--- A tensor's one value as a Lua number.
function U.scalar(t)
  return U.values(t)[1]
end

--- x padded along dim d by `before` and `after` elements of `value` (concatenation: exact and
-- differentiable; negative amounts crop).
function U.pad_dim(x, d, before, after, value)
  if before < 0 then x = x:narrow(d, 1 - before, x:size(d) + before); before = 0 end
  if after < 0 then x = x:narrow(d, 1, x:size(d) + after); after = 0 end
  if before == 0 and after == 0 then return x end
  local parts = {}
  local function block(n)
    local s = x:shape()
    s[d] = n
    return dle.full(s, value, {dtype = x:dtype()})
  end
  if before > 0 then parts[#parts + 1] = block(before) end
  parts[#parts + 1] = x
  if after > 0 then parts[#parts + 1] = block(after) end
  return dle.cat(parts, d)
end

--- True when x has a floating-point dtype.
function U.is_float(x) return x:is_floating_point() end

return U
