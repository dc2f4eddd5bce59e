--- dle.io.gguf: dle.load_gguf / dle.save_gguf, GGUF version 3 (llama.cpp's model files).
-- Layout (little-endian): "GGUF", uint32 version, uint64 tensor count, uint64 metadata count;
-- the metadata (key string, uint32 value type, value); the tensor infos (name, uint32 n_dims,
-- uint64 dims innermost first, uint32 ggml type, uint64 offset into the data section); padding to
-- general.alignment (default 32); the data section, each tensor at an aligned offset. Strings are
-- a uint64 length and the bytes. Shapes are PyTorch's order (GGUF's dims reversed).
-- Metadata values come back as Lua values (integers, floats, booleans, strings, lists for arrays)
-- with a third result naming each key's GGUF type ("uint32", "array<string>", ...), which
-- save_gguf takes back as opts.types so that a file round-trips with its types.
local core = require("dle.core")
local common = require("dle.io.common")
local atomic = require("dle.io.atomic")
local quant = require("dle.quant")

local fail = common.fail

local MAGIC, VERSION, DEFAULT_ALIGNMENT = "GGUF", 3, 32

-- Metadata value types: id -> {name, string.pack format}; strings and arrays are read apart.
local VTYPES = {
  [0] = {"uint8", "<I1"}, [1] = {"int8", "<i1"}, [2] = {"uint16", "<I2"}, [3] = {"int16", "<i2"},
  [4] = {"uint32", "<I4"}, [5] = {"int32", "<i4"}, [6] = {"float32", "<f"}, [7] = {"bool", "<I1"},
  [8] = {"string"}, [9] = {"array"}, [10] = {"uint64", "<I8"}, [11] = {"int64", "<i8"},
  [12] = {"float64", "<d"},
}
local VTYPE_ID = {}
for id, t in pairs(VTYPES) do VTYPE_ID[t[1]] = id end

-- ggml tensor types dle reads and writes: id -> dtype (float) or quantization kind.
local GGML = {[0] = {dtype = "float32"}, [1] = {dtype = "float16"}, [30] = {dtype = "bfloat16"},
  [8] = {kind = "q8_0"}, [2] = {kind = "q4_0"}, [12] = {kind = "q4_k"}}
local GGML_ID = {float32 = 0, float16 = 1, bfloat16 = 30, q8_0 = 8, q4_0 = 2, q4_k = 12}
-- names of the other ggml types, for messages
local GGML_OTHER = {[3] = "q4_1", [6] = "q5_0", [7] = "q5_1", [9] = "q8_1", [10] = "q2_k", [11] = "q3_k",
  [13] = "q5_k", [14] = "q6_k", [15] = "q8_k", [24] = "i8", [25] = "i16", [26] = "i32", [27] = "i64",
  [28] = "f64"}

local MAX_DIMS, MAX_ARRAY_DEPTH = 8, 8
local CHUNK = 1 << 20

-- ---------------------------------------------------------------- reading

-- A forward reader over the file's first bytes, refilled a chunk at a time: r.pos is the offset of
-- the next byte; every read checks the file is long enough and names what it was reading.
local function reader(f, size, fn, path)
  return {f = f, size = size, fn = fn, path = path, pos = 0, buf = "", at = 0}
end

local function need(r, n, what)
  if n > r.size - r.pos then
    fail("%s: %s: truncated %s at offset %d (needs %d bytes, %d left in the file)", r.fn, r.path, what, r.pos, n,
      r.size - r.pos)
  end
  if r.pos + n > r.at + #r.buf then
    r.f:seek("set", r.pos)
    r.buf = r.f:read(math.min(math.max(n, CHUNK), r.size - r.pos)) or ""
    r.at = r.pos
    if #r.buf < n then fail("%s: %s: cannot read %s at offset %d", r.fn, r.path, what, r.pos) end
  end
end

local function unpack(r, fmt, n, what)
  need(r, n, what)
  local v = string.unpack(fmt, r.buf, r.pos - r.at + 1)
  r.pos = r.pos + n
  return v
end

local function read_string(r, what)
  local at = r.pos
  local n = unpack(r, "<I8", 8, what .. " length")
  if n < 0 or n > r.size - r.pos then
    fail("%s: %s: bad length %d of %s at offset %d (%d bytes left in the file)", r.fn, r.path, n, what, at,
      r.size - r.pos)
  end
  if n == 0 then return "" end
  need(r, n, what)
  local s = r.buf:sub(r.pos - r.at + 1, r.pos - r.at + n)
  r.pos = r.pos + n
  return s
end

-- Reads one value of type id; returns it and its type name.
local function read_value(r, id, what, depth)
  local t = VTYPES[id]
  if not t then fail("%s: %s: bad metadata value type %d for %s at offset %d", r.fn, r.path, id, what, r.pos - 4) end
  local name = t[1]
  if name == "string" then return read_string(r, what), name end
  if name == "bool" then
    local at = r.pos
    local b = unpack(r, "<I1", 1, what)
    if b > 1 then fail("%s: %s: bad bool %d for %s at offset %d", r.fn, r.path, b, what, at) end
    return b == 1, name
  end
  if name ~= "array" then return unpack(r, t[2], string.packsize(t[2]), what), name end
  if depth >= MAX_ARRAY_DEPTH then
    fail("%s: %s: arrays nested too deep in %s at offset %d", r.fn, r.path, what, r.pos)
  end
  local at = r.pos
  local item = unpack(r, "<I4", 4, what .. " item type")
  local n = unpack(r, "<I8", 8, what .. " length")
  -- each item takes at least one byte (strings and arrays at least 8): a count the file cannot hold is an error
  -- before anything is allocated
  local it = VTYPES[item]
  local least = it and (it[2] and string.packsize(it[2]) or 8) or 1
  if n < 0 or n > (r.size - r.pos) // least then
    fail("%s: %s: bad array length %d of %s at offset %d", r.fn, r.path, n, what, at)
  end
  local out, iname = {}, it and it[1] or "?"
  for i = 1, n do out[i], iname = read_value(r, item, what, depth + 1) end
  if n == 0 and not it then fail("%s: %s: bad array item type %d for %s at offset %d", r.fn, r.path, item, what, at) end
  return out, "array<" .. iname .. ">"
end

-- The n metadata pairs: key -> value and key -> GGUF type name.
local function read_metadata(r, n)
  local meta, types = {}, {}
  for _ = 1, n do
    local at = r.pos
    local key = read_string(r, "metadata key")
    if types[key] then fail("%s: %s: metadata key %q repeated at offset %d", r.fn, r.path, key, at) end
    local id = unpack(r, "<I4", 4, "value type of " .. key)
    meta[key], types[key] = read_value(r, id, string.format("metadata %q", key), 0)
  end
  return meta, types
end

-- One tensor info, checked: {name, at (its offset in the file), shape (PyTorch's order), g (its
-- GGML entry), off (in the data section), nbytes, numel}.
local function read_tensor_info(r, alignment)
  local fn, path, at = r.fn, r.path, r.pos
  local name = read_string(r, "tensor name")
  local nd = unpack(r, "<I4", 4, "dimension count of " .. name)
  if nd > MAX_DIMS then
    fail("%s: %s: tensor %q has %d dimensions (at most %d) at offset %d", fn, path, name, nd, MAX_DIMS, at)
  end
  local shape, numel = {}, 1
  for d = 1, nd do
    local s = unpack(r, "<I8", 8, "dimension of " .. name)
    if s < 0 or s > 0 and numel > (1 << 56) // s then
      fail("%s: %s: tensor %q has a bad dimension %d at offset %d", fn, path, name, s, r.pos - 8)
    end
    shape[nd + 1 - d] = s
    numel = numel * s
  end
  local gt = unpack(r, "<I4", 4, "type of " .. name)
  local off = unpack(r, "<I8", 8, "offset of " .. name)
  local g = GGML[gt]
  if not g then
    fail("%s: %s: tensor %q has ggml type %d%s, which dle does not read (f32, f16, bf16, q8_0, q4_0, q4_k)",
      fn, path, name, gt, GGML_OTHER[gt] and " (" .. GGML_OTHER[gt] .. ")" or "")
  end
  local nbytes
  if g.kind then
    local block, bytes = core._qtype_info(g.kind)
    if nd < 1 or shape[nd] % block ~= 0 then
      fail("%s: %s: %s tensor %q has rows of %s values, not a multiple of %d", fn, path, g.kind, name,
        tostring(shape[nd]), block)
    end
    nbytes = numel // block * bytes
  else
    nbytes = numel * common.ELSIZE[g.dtype]
  end
  if off < 0 or off % alignment ~= 0 then
    fail("%s: %s: tensor %q has offset %d, not a multiple of the alignment %d", fn, path, name, off, alignment)
  end
  return {name = name, at = at, shape = shape, g = g, off = off, nbytes = nbytes, numel = numel}
end

return function(dle)
  --- Loads a GGUF v3 file: tensors (float32/float16/bfloat16 as tensors, Q8_0/Q4_0/Q4_K as
  -- quantized tensors), memory-mapped (copy-on-write; the file is never changed), and metadata.
  -- @param path string
  -- @return tensors (name -> tensor or quantized tensor), metadata (key -> value), types (key ->
  --   GGUF type name: "uint32", "string", "array<float32>", ...)
  local function load_gguf(path)
    local fn = "dle.load_gguf"
    return common.with_file(fn, path, function(f, size)
      local r = reader(f, size, fn, path)
      local magic = (size >= 4) and (f:read(4) or "") or ""
      if magic ~= MAGIC then
        fail("%s: %s: not a GGUF file (the first bytes are not \"GGUF\")", fn, path)
      end
      r.pos = 4
      local version = unpack(r, "<I4", 4, "version")
      if version ~= VERSION then fail("%s: %s: GGUF version %d is not supported (3 is)", fn, path, version) end
      local n_tensors = unpack(r, "<I8", 8, "tensor count")
      local n_kv = unpack(r, "<I8", 8, "metadata count")
      -- a key takes at least 12 bytes (length, type), a tensor info at least 24
      if n_kv < 0 or n_kv > (size - r.pos) // 12 then
        fail("%s: %s: bad metadata count %d at offset 16", fn, path, n_kv)
      end
      if n_tensors < 0 or n_tensors > (size - r.pos) // 24 then
        fail("%s: %s: bad tensor count %d at offset 8", fn, path, n_tensors)
      end
      local meta, types = read_metadata(r, n_kv)
      local alignment = meta["general.alignment"]
      if alignment == nil then
        alignment = DEFAULT_ALIGNMENT
      elseif types["general.alignment"] ~= "uint32" or alignment < 1 or alignment & (alignment - 1) ~= 0 then
        fail("%s: %s: general.alignment must be a uint32 power of two, got %s %s", fn, path,
          types["general.alignment"], tostring(alignment))
      end
      local infos, seen = {}, {}
      for i = 1, n_tensors do
        infos[i] = read_tensor_info(r, alignment)
        if seen[infos[i].name] then
          fail("%s: %s: tensor %q repeated at offset %d", fn, path, infos[i].name, infos[i].at)
        end
        seen[infos[i].name] = true
      end
      local data_at = common.align(r.pos, alignment)
      local out = {}
      for _, e in ipairs(infos) do
        if e.off > size - data_at or e.nbytes > size - data_at - e.off then
          fail("%s: %s: truncated data: tensor %q needs bytes %d..%d of the data section at offset %d, the file has %d",
            fn, path, e.name, e.off, e.off + e.nbytes, data_at, size - data_at)
        end
        local at = data_at + e.off
        if e.g.kind then
          local block, bytes = core._qtype_info(e.g.kind)
          local cols = e.shape[#e.shape]
          local blocks = core._memmap(path, "uint8", {e.numel // cols, cols // block * bytes}, at, false)
          out[e.name] = quant.from_blocks(fn, blocks, e.g.kind, e.shape)
        elseif at % common.ELSIZE[e.g.dtype] == 0 then
          out[e.name] = core._memmap(path, e.g.dtype, e.shape, at, false)
        else
          out[e.name] = core._io_read(f, at, e.g.dtype, e.shape, false, fn .. ": " .. path)
        end
      end
      return out, meta, types
    end)
  end

  -- ---------------------------------------------------------------- writing

  -- The GGUF type of a plain Lua value (gguf-py's choice: integers int32 when they fit, else
  -- int64; floats float32; lists arrays of their first item's type).
  local function infer(fn, key, v)
    local t = math.type(v)
    if t == "integer" then return (v >= -(1 << 31) and v < (1 << 31)) and "int32" or "int64" end
    if t == "float" then return "float32" end
    if type(v) == "boolean" then return "bool" end
    if type(v) == "string" then return "string" end
    if type(v) == "table" and not dle.is_tensor(v) then
      return "array<" .. (v[1] == nil and "int32" or infer(fn, key, v[1])) .. ">"
    end
    fail("%s: metadata %q: cannot store a %s", fn, key, type(v))
  end

  local function pack_string(s) return string.pack("<I8", #s) .. s end

  -- The bytes of value v of GGUF type `ty` (a name as types[] gives them).
  local function pack_value(fn, key, ty, v, parts)
    local item = ty:match("^array<(.*)>$")
    if item then
      if type(v) ~= "table" then fail("%s: metadata %q: type %s needs a list, got %s", fn, key, ty, type(v)) end
      local base = item:match("^array<") and "array" or item
      if not VTYPE_ID[base] then fail("%s: metadata %q: unknown type %s", fn, key, ty) end
      parts[#parts + 1] = string.pack("<I4I8", VTYPE_ID[base], #v)
      for i = 1, #v do pack_value(fn, key, item, v[i], parts) end
      return
    end
    local id = VTYPE_ID[ty]
    if not id or ty == "array" then fail("%s: metadata %q: unknown type %s", fn, key, tostring(ty)) end
    if ty == "string" then
      if type(v) ~= "string" then fail("%s: metadata %q: type string needs a string, got %s", fn, key, type(v)) end
      parts[#parts + 1] = pack_string(v)
    elseif ty == "bool" then
      if type(v) ~= "boolean" then fail("%s: metadata %q: type bool needs a boolean, got %s", fn, key, type(v)) end
      parts[#parts + 1] = string.pack("<I1", v and 1 or 0)
    elseif ty == "float32" or ty == "float64" then
      if type(v) ~= "number" then fail("%s: metadata %q: type %s needs a number, got %s", fn, key, ty, type(v)) end
      parts[#parts + 1] = string.pack(VTYPES[id][2], v)
    else
      if math.type(v) ~= "integer" then
        fail("%s: metadata %q: type %s needs an integer, got %s", fn, key, ty, tostring(v))
      end
      local ok, bytes = pcall(string.pack, VTYPES[id][2], v)
      if not ok then fail("%s: metadata %q: %d does not fit a %s", fn, key, v, ty) end
      parts[#parts + 1] = bytes
    end
  end

  --- Saves tensors and metadata as a GGUF v3 file (atomically: a temp file renamed over path).
  -- Tensors are written in name order: float32, float16 and bfloat16 tensors as F32/F16/BF16 (others are
  -- an error), quantized tensors (dle.quantize) as their blocks. Metadata values are typed by
  -- opts.types[key] when given (names as load_gguf's third result), else by their Lua type
  -- (integer: int32 or int64, float: float32, boolean, string, list: array).
  -- general.alignment (a uint32 power of two) sets the data alignment (default 32).
  -- @param path string
  -- @param tensors table name -> tensor or quantized tensor
  -- @param metadata optional table key -> value
  -- @param opts optional {types = {key -> type name}}
  local function save_gguf(path, tensors, metadata, opts)
    local fn = "dle.save_gguf"
    if type(tensors) ~= "table" then
      fail("%s: tensors must be a table of name -> tensor, got %s", fn, type(tensors))
    end
    if metadata ~= nil and type(metadata) ~= "table" then
      fail("%s: metadata must be a table, got %s", fn, type(metadata))
    end
    if opts ~= nil and type(opts) ~= "table" then fail("%s: options must be a table, got %s", fn, type(opts)) end
    for k in pairs(opts or {}) do
      if k ~= "types" then fail("%s: unknown option %s (known: types)", fn, tostring(k)) end
    end
    local given = opts and opts.types or {}
    if type(given) ~= "table" then fail("%s: opts.types must be a table, got %s", fn, type(given)) end
    metadata = metadata or {}
    local keys = {}
    for k in pairs(metadata) do
      if type(k) ~= "string" then fail("%s: metadata keys must be strings, got %s", fn, type(k)) end
      keys[#keys + 1] = k
    end
    table.sort(keys)
    local alignment = DEFAULT_ALIGNMENT
    if metadata["general.alignment"] ~= nil then
      alignment = metadata["general.alignment"]
      local ty = given["general.alignment"] or "uint32"
      if ty ~= "uint32" or math.type(alignment) ~= "integer" or alignment < 1 or alignment & (alignment - 1) ~= 0
        or alignment >= (1 << 32) then
        fail("%s: general.alignment must be a uint32 power of two, got %s", fn, tostring(alignment))
      end
      given = setmetatable({["general.alignment"] = "uint32"}, {__index = given})
    end
    local names = {}
    for name, t in pairs(tensors) do
      if type(name) ~= "string" then fail("%s: tensor names must be strings, got %s", fn, type(name)) end
      if not (dle.is_tensor(t) or dle.is_quantized(t)) then
        fail("%s: %s is a %s, not a tensor", fn, name, type(t))
      end
      local dt = t:dtype()
      if not GGML_ID[dt] then
        fail("%s: tensor %q is %s; GGUF tensors here are float32, float16, bfloat16 or quantized (q8_0, q4_0, q4_k)",
          fn, name, dt)
      end
      if dle.is_quantized(t) and t:is_transposed() then
        fail("%s: tensor %q is a transposed view of a quantized tensor; save the tensor itself", fn, name)
      end
      names[#names + 1] = name
    end
    table.sort(names)
    local parts = {MAGIC, string.pack("<I4I8I8", VERSION, #names, #keys)}
    for _, k in ipairs(keys) do
      local v = metadata[k]
      local ty = given[k] or infer(fn, k, v)
      if type(ty) ~= "string" then fail("%s: opts.types[%q] must be a type name, got %s", fn, k, type(ty)) end
      local base = ty:match("^array<") and "array" or ty
      if not VTYPE_ID[base] then fail("%s: metadata %q: unknown type %s", fn, k, ty) end
      parts[#parts + 1] = pack_string(k) .. string.pack("<I4", VTYPE_ID[base])
      pack_value(fn, k, ty, v, parts)
    end
    local offs, cursor = {}, 0
    for i, name in ipairs(names) do
      local t = tensors[name]
      local shape = t:shape()
      local dims = {}
      for d = #shape, 1, -1 do dims[#dims + 1] = string.pack("<I8", shape[d]) end
      local nb = dle.is_quantized(t) and t:nbytes() or common.nbytes_of(t)
      offs[i] = cursor
      parts[#parts + 1] = pack_string(name) .. string.pack("<I4", #shape) .. table.concat(dims)
        .. string.pack("<I4I8", GGML_ID[t:dtype()], cursor)
      cursor = common.align(cursor + nb, alignment)
    end
    local header = table.concat(parts)
    atomic.write(fn, path, function(f)
      f:write(header, string.rep("\0", common.align(#header, alignment) - #header))
      local pos = 0
      for i, name in ipairs(names) do
        local t = tensors[name]
        f:write(string.rep("\0", offs[i] - pos))
        local data = dle.is_quantized(t) and t:blocks() or t
        core._io_write(f, data, fn .. ": " .. path)
        pos = offs[i] + (dle.is_quantized(t) and t:nbytes() or common.nbytes_of(t))
      end
    end)
  end

  return {load_gguf = load_gguf, save_gguf = save_gguf}
end
