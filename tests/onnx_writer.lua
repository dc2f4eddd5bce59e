-- onnx_writer.lua — a minimal protobuf writer of ONNX ModelProto/TensorProto bytes for tests (the
-- ONNX loader's unit tests and the file fuzzer's seeds), so they need neither Python nor files from
-- elsewhere. Field numbers are onnx.proto's. Only what the tests use is written.
--   W.model{opset = 13, nodes = {W.node("Add", {"x", "y"}, {"z"}, {axis = W.int(1)})},
--           inputs = {W.value("x", 1, {"N", 3})}, outputs = {...}, initializers = {W.tensor("y", t)}}
local W = {}

local function varint(v)
  local out = {}
  repeat
    local b = v & 0x7F
    v = v >> 7   -- logical shift: negative numbers take 10 bytes, as protobuf writes them
    out[#out + 1] = string.char(v ~= 0 and (b | 0x80) or b)
  until v == 0
  return table.concat(out)
end

local function key(field, wire) return varint(field << 3 | wire) end
local function int_field(field, v) return key(field, 0) .. varint(v) end
local function bytes_field(field, s) return key(field, 2) .. varint(#s) .. s end
local function float_field(field, v) return key(field, 5) .. string.pack("<f", v) end
W.varint, W.int_field, W.bytes_field = varint, int_field, bytes_field

-- ONNX data type numbers and element encodings of dle dtypes.
local TYPES = {float32 = {1, "<f"}, uint8 = {2, "B"}, int32 = {6, "<i4"}, int64 = {7, "<i8"},
               bool = {9, "B"}, float64 = {11, "<d"}}
W.TYPES = TYPES

--- TensorProto bytes: {name, dims, data_type, raw (bytes)} given as they are (for bad tensors too).
function W.raw_tensor(t)
  local parts = {}
  for _, d in ipairs(t.dims or {}) do parts[#parts + 1] = int_field(1, d) end
  parts[#parts + 1] = int_field(2, t.data_type)
  if t.name then parts[#parts + 1] = bytes_field(8, t.name) end
  if t.raw then parts[#parts + 1] = bytes_field(9, t.raw) end
  if t.float_data then
    local f = {}
    for i, v in ipairs(t.float_data) do f[i] = string.pack("<f", v) end
    parts[#parts + 1] = bytes_field(4, table.concat(f))
  end
  return table.concat(parts)
end

--- TensorProto bytes of a dle tensor (raw_data, little-endian).
function W.tensor(name, x)
  local ty = assert(TYPES[x:dtype()], "onnx_writer: no ONNX type for " .. x:dtype())
  local vals = x:reshape(-1):totable()
  local raw = {}
  for i, v in ipairs(vals) do
    if type(v) == "boolean" then v = v and 1 or 0 end
    raw[i] = string.pack(ty[2], v)
  end
  return W.raw_tensor{name = name, dims = x:shape(), data_type = ty[1], raw = table.concat(raw)}
end

--- Attribute values: W.int(3), W.float(0.5), W.ints{1, 2}, W.str("x"), W.tensor_attr(bytes)
-- (and W.graph_attr below).
function W.int(v) return {type = 2, body = int_field(3, v)} end
function W.float(v) return {type = 1, body = float_field(2, v)} end
function W.str(v) return {type = 3, body = bytes_field(4, v)} end
function W.tensor_attr(tp) return {type = 4, body = bytes_field(5, tp)} end
function W.ints(list)
  local p = {}
  for i, v in ipairs(list) do p[i] = varint(v) end
  return {type = 7, body = bytes_field(8, table.concat(p))}
end

--- NodeProto bytes.
function W.node(op_type, inputs, outputs, attrs, name)
  local parts = {}
  for _, s in ipairs(inputs) do parts[#parts + 1] = bytes_field(1, s) end
  for _, s in ipairs(outputs) do parts[#parts + 1] = bytes_field(2, s) end
  parts[#parts + 1] = bytes_field(3, name or (op_type .. "_" .. outputs[1]))
  parts[#parts + 1] = bytes_field(4, op_type)
  local names = {}
  for k in pairs(attrs or {}) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    local a = attrs[k]
    parts[#parts + 1] = bytes_field(5, bytes_field(1, k) .. a.body .. int_field(20, a.type))
  end
  return table.concat(parts)
end

--- TypeProto bytes: a tensor of ONNX type elem_type whose dims (when given) are numbers or names.
function W.tensor_type(elem_type, dims)
  local d = {}
  for i, v in ipairs(dims or {}) do
    d[i] = bytes_field(1, type(v) == "string" and bytes_field(2, v) or int_field(1, v))
  end
  return bytes_field(1, int_field(1, elem_type) .. (dims and bytes_field(2, table.concat(d)) or ""))
end

--- TypeProto bytes: a sequence, or an optional, of the values of TypeProto bytes `elem`.
function W.sequence_type(elem) return bytes_field(4, bytes_field(1, elem)) end
function W.optional_type(elem) return bytes_field(9, bytes_field(1, elem)) end

--- ValueInfoProto bytes: a tensor of ONNX type elem_type whose dims are numbers or names, or (a
-- string as the second argument) a value of those TypeProto bytes.
function W.value(name, elem_type, dims)
  local ty = type(elem_type) == "string" and elem_type or W.tensor_type(elem_type, dims)
  return bytes_field(1, name) .. bytes_field(2, ty)
end

--- SequenceProto bytes holding the TensorProto bytes of the list `tensors` (elem_type TENSOR).
function W.sequence(name, tensors)
  local parts = {bytes_field(1, name), int_field(2, 1)}
  for _, t in ipairs(tensors) do parts[#parts + 1] = bytes_field(3, t) end
  return table.concat(parts)
end

--- OptionalProto bytes: holding TensorProto bytes (kind "tensor"), SequenceProto bytes
-- ("sequence"), or nothing (value nil).
function W.optional(name, kind, value)
  if value == nil then return bytes_field(1, name) end
  local tensor = kind == "tensor"
  return bytes_field(1, name) .. int_field(2, tensor and 1 or 3) .. bytes_field(tensor and 3 or 5, value)
end

--- GraphProto bytes of m = {nodes, name, initializers, inputs, outputs}.
function W.graph(m)
  local g = {}
  for _, n in ipairs(m.nodes) do g[#g + 1] = bytes_field(1, n) end
  g[#g + 1] = bytes_field(2, m.name or "g")
  for _, t in ipairs(m.initializers or {}) do g[#g + 1] = bytes_field(5, t) end
  for _, v in ipairs(m.inputs or {}) do g[#g + 1] = bytes_field(11, v) end
  for _, v in ipairs(m.outputs or {}) do g[#g + 1] = bytes_field(12, v) end
  return table.concat(g)
end

--- An attribute holding a subgraph (a body): W.graph_attr{nodes = ..., inputs = ..., outputs = ...}.
function W.graph_attr(m) return {type = 5, body = bytes_field(6, W.graph(m))} end

--- ModelProto bytes (ir_version 8, the default domain at m.opset).
function W.model(m)
  return int_field(1, 8) .. bytes_field(2, "dle-tests") .. bytes_field(7, W.graph(m))
      .. bytes_field(8, bytes_field(1, "") .. int_field(2, m.opset or 13))
end

return W
