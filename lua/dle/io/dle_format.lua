--- dle.io.dle_format: dle.save / dle.load, dle's own file format. All integers little-endian:
--   bytes 0..3    "DLE\0"
--   bytes 4..7    u32 version (2 written; 1 and 2 read)
--   bytes 8..15   i64 length D of the description
--   bytes 16..23  i64 data_start (a multiple of 64, >= 32 + D)
--   bytes 24..31  i64 length of the data section
--   bytes 32..    the description (string.pack formats in quotes):
--     version 2:  "i8" S storages, each "s1" dtype, "i8" offset (from data_start, a multiple of 64),
--                 "i8" element count;
--                 "i8" N tensors, each "i8" storage (1-based), "B" ndim, ndim x "i8" sizes,
--                 ndim x "i8" strides, "i8" offset (elements into the stored storage), "B" flags
--                 (1 = requires_grad);
--                 then one tagged value.
--     version 1:  one tagged value.
--   A tagged value:
--     "t" / "f"   true / false
--     "i" i8      integer            "d" f64    float (integers and floats stay apart)
--     "s" s8      string (any bytes, zeros included)
--     "T" i8 n    table of n key/value pairs (keys: strings, numbers, booleans; sorted)
--     "R" i8 k    (version 2) the k-th tensor of the tensor list
--     "X" s1 dtype, u8 ndim, ndim x i8 sizes, i8 offset, i8 nbytes, u8 flags   (version 1 only)
--                 a contiguous tensor stored at data_start + offset
--   data_start..  raw storage bytes (C order for version 1 tensors), each 64-byte aligned.
-- Version 2 keeps aliasing: tensors sharing a storage store, once, the span of it their views
-- cover, and load as views of one new storage with their own sizes and strides (offsets count
-- from the start of the stored span). A tensor object reached twice is stored once and loads as
-- one object. Tables reached twice (without a cycle) are stored twice and load as two copies.
-- No C `long`s and no device names: CUDA tensors are saved as CPU data and load on the CPU.
-- Dtypes are written by name ("int8", "float8_e4m3fn", ...), so dtypes added to dle need no new
-- version: older files hold only names this reader knows, and an older reader rejects a new name
-- as a bad dtype (a clean error) rather than misreading its bytes.
local core = require("dle.core")
local common = require("dle.io.common")
local atomic = require("dle.io.atomic")

local ELSIZE, FLOAT, fail, align = common.ELSIZE, common.FLOAT, common.fail, common.align

local VERSION = 2
local MAGIC = "DLE\0"
local HEADER = 32
local ALIGN = 64
local MAX_DEPTH = 200

-- Key order for deterministic files: booleans, then numbers, then strings.
local KEY_RANK = {boolean = 1, number = 2, string = 3}
local function key_less(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return KEY_RANK[ta] < KEY_RANK[tb] end
  if ta == "boolean" then return (not a) and b end
  return a < b
end

--- The path of where[k] as messages show it: value.model.fwd, value[1], value["a b"].
local function child(where, k)
  if type(k) == "string" and k:match("^[%a_][%w_]*$") then return where .. "." .. k end
  if type(k) == "string" then return where .. "[" .. string.format("%q", k) .. "]" end
  return where .. "[" .. tostring(k) .. "]"
end

local WHAT_IS = {["function"] = "a function", thread = "a coroutine", userdata = "a userdata (not a tensor)",
  ["nil"] = "nil"}

return function(dle)
  local is_tensor = dle.is_tensor

  ---------------------------------------------------------------- writing

  -- Appends the tagged description of v to st.parts; tensors get their number in st.tensors.
  -- st.active maps the tables being walked to their paths (a cycle names both).
  local function encode(v, st, where, depth)
    local parts = st.parts
    local tv = type(v)
    if tv == "boolean" then
      parts[#parts + 1] = v and "t" or "f"
    elseif tv == "number" then
      if math.type(v) == "integer" then
        parts[#parts + 1] = string.pack("<c1i8", "i", v)
      else
        parts[#parts + 1] = string.pack("<c1d", "d", v)
      end
    elseif tv == "string" then
      parts[#parts + 1] = string.pack("<c1s8", "s", v)
    elseif is_tensor(v) then
      local id = st.tensor_id[v]
      if not id then
        id = #st.tensors + 1
        st.tensors[id] = v
        st.tensor_id[v] = id
      end
      parts[#parts + 1] = string.pack("<c1i8", "R", id)
    elseif tv == "table" then
      if st.active[v] then
        fail("dle.save: %s is a cycle: it is the table at %s, which contains it", where, st.active[v])
      end
      if getmetatable(v) ~= nil then
        fail("dle.save: %s is a table with a metatable (an object: save its state_dict() or a plain table)",
          where)
      end
      if depth >= MAX_DEPTH then fail("dle.save: tables nested deeper than %d at %s", MAX_DEPTH, where) end
      st.active[v] = where
      local keys = {}
      for k in pairs(v) do
        if not KEY_RANK[type(k)] then
          fail("dle.save: %s has a key of type %s (keys must be strings, numbers or booleans)", where,
            is_tensor(k) and "dle.Tensor" or type(k))
        end
        keys[#keys + 1] = k
      end
      table.sort(keys, key_less)
      parts[#parts + 1] = string.pack("<c1i8", "T", #keys)
      for _, k in ipairs(keys) do
        encode(k, st, where, depth + 1)
        encode(v[k], st, child(where, k), depth + 1)
      end
      st.active[v] = nil
    else
      fail("dle.save: %s is %s (dle.save stores tensors, tables, numbers, strings and booleans)", where,
        WHAT_IS[tv] or tv)
    end
  end

  -- Groups the tensors by storage (and dtype): each group stores the span [lo, hi) of elements
  -- its views cover, once. Returns the storage records (in order of first use), the record of
  -- each tensor, and the length of the data section.
  local function plan_storages(tensors)
    local storages, by_key, of_tensor = {}, {}, {}
    for i, t in ipairs(tensors) do
      local sid = core._io_storage(t)
      local key = by_key[sid] or {}
      by_key[sid] = key
      local s = key[t:dtype()]
      if not s then
        s = {base = t, dtype = t:dtype()}
        key[t:dtype()] = s
        storages[#storages + 1] = s
        s.index = #storages
      end
      local lo, hi = common.extent(t)
      if lo < hi then
        s.lo = s.lo and math.min(s.lo, lo) or lo
        s.hi = s.hi and math.max(s.hi, hi) or hi
      end
      of_tensor[i] = s
    end
    local cursor = 0
    for _, s in ipairs(storages) do
      s.lo, s.hi = s.lo or 0, s.hi or 0
      s.numel = s.hi - s.lo
      s.offset = align(cursor, ALIGN)
      cursor = s.offset + s.numel * ELSIZE[s.dtype]
    end
    return storages, of_tensor, cursor
  end

  local function describe_storages(storages, tensors, of_tensor)
    local p = {string.pack("<i8", #storages)}
    for _, s in ipairs(storages) do p[#p + 1] = string.pack("<s1i8i8", s.dtype, s.offset, s.numel) end
    p[#p + 1] = string.pack("<i8", #tensors)
    for i, t in ipairs(tensors) do
      local s = of_tensor[i]
      local sizes, strides = t:shape(), t:stride()
      local lo, hi = common.extent(t)
      -- an empty view touches nothing: its offset is kept only when it lies inside the span
      local off = t:storage_offset() - s.lo
      if lo == hi and (off < 0 or off > s.numel) then off = 0 end
      p[#p + 1] = string.pack("<i8B", s.index, #sizes)
      for d = 1, #sizes do p[#p + 1] = string.pack("<i8", sizes[d]) end
      for d = 1, #sizes do p[#p + 1] = string.pack("<i8", strides[d]) end
      p[#p + 1] = string.pack("<i8B", off, t.requires_grad and 1 or 0)
    end
    return table.concat(p)
  end

  --- Saves a value to a file (atomically): a tensor, or nested tables of tensors, numbers
  -- (integers stay integers), strings and booleans, e.g. a checkpoint
  -- {model = net:state_dict(), optim = opt:state_dict(), step = 10, rng = dle.get_rng_state()}.
  -- Aliasing is kept: tensors sharing memory (tied weights, views) are stored once and load
  -- sharing it; a tensor reached twice loads as one tensor. A table reached twice is stored
  -- twice (it loads as two equal tables). Functions, coroutines, other userdata, tables with a
  -- metatable and cycles are errors naming where they are (value.model.fwd).
  -- @param path string
  -- @param value the value to store
  local function save(path, value)
    if value == nil then fail("dle.save: nothing to save (value is nil)") end
    local st = {parts = {}, tensors = {}, tensor_id = {}, active = {}}
    encode(value, st, "value", 0)
    local storages, of_tensor, data_len = plan_storages(st.tensors)
    local desc = describe_storages(storages, st.tensors, of_tensor) .. table.concat(st.parts)
    local data_start = align(HEADER + #desc, ALIGN)
    atomic.write("dle.save", path, function(f)
      f:write(string.pack("<c4I4i8i8i8", MAGIC, VERSION, #desc, data_start, data_len), desc,
        string.rep("\0", data_start - HEADER - #desc))
      local pos = 0
      for _, s in ipairs(storages) do
        if s.offset > pos then f:write(string.rep("\0", s.offset - pos)) end
        local span = core._io_view(s.base, {s.numel}, {1}, s.numel > 0 and s.lo or 0, "dle.save")
        local nb = s.numel * ELSIZE[s.dtype]
        local n = core._io_write(f, span, "dle.save: " .. path)
        if n ~= nb then fail("dle.save: %s: wrote %d bytes of a storage, expected %d", path, n, nb) end
        pos = s.offset + n
      end
    end)
  end

  ---------------------------------------------------------------- reading

  -- Reads the description d.desc from d.pos: fixed formats, byte strings, counts, dtypes, sizes.
  local function reader(d, path)
    function d.need(n, what)
      if n < 0 or d.pos + n - 1 > #d.desc then
        fail("dle.load: %s: truncated description (%s)", path, what)
      end
    end
    function d.unpack(fmt, what)
      d.need(string.packsize(fmt), what)
      local r = table.pack(string.unpack(fmt, d.desc, d.pos))
      d.pos = r[r.n]
      return table.unpack(r, 1, r.n - 1)
    end
    function d.bytes(n, what)
      d.need(n, what)
      local s = d.desc:sub(d.pos, d.pos + n - 1)
      d.pos = d.pos + n
      return s
    end
    function d.count(what, min_record)
      local n = d.unpack("<i8", what)
      if n < 0 or n > (#d.desc - d.pos + 1) // min_record then
        fail("dle.load: %s: corrupt description (%d %s)", path, n, what)
      end
      return n
    end
    function d.dtype(where)
      local dtype = d.bytes(d.unpack("B", "a dtype"), "a dtype")
      if not ELSIZE[dtype] then fail("dle.load: %s: bad dtype %q for the tensor at %s", path, dtype, where) end
      return dtype
    end
    function d.sizes(ndim, where)
      if ndim > 8 then fail("dle.load: %s: corrupt description (tensor of %d dims at %s)", path, ndim, where) end
      local shape, numel = {}, 1
      for i = 1, ndim do
        shape[i] = d.unpack("<i8", "a tensor size")
        if shape[i] < 0 or shape[i] > 0 and numel > (1 << 56) // shape[i] then
          fail("dle.load: %s: corrupt description (bad size %d at %s)", path, shape[i], where)
        end
        numel = numel * shape[i]
      end
      return shape, numel
    end
    return d
  end

  -- Checks that nbytes at offset lie in the data section.
  local function check_data(d, path, where, off, nb)
    if off < 0 or off > d.data_len or nb > d.data_len - off then
      fail("dle.load: %s: truncated data (%s needs bytes %d..%d of a %d-byte data section)",
        path, where, off, off + nb, d.data_len)
    end
  end

  -- Version 1 tensor record (after its "X" tag): a contiguous tensor of its own.
  local function v1_tensor(d, f, path, where)
    local dtype = d.dtype(where)
    local shape, numel = d.sizes(d.unpack("B", "a tensor rank"), where)
    local off, nb, flags = d.unpack("<i8i8B", "a tensor record")
    if nb ~= numel * ELSIZE[dtype] then
      fail("dle.load: %s: corrupt description (tensor at %s: %d bytes for %d %s elements)", path,
        where, nb, numel, dtype)
    end
    check_data(d, path, "the tensor at " .. where, off, nb)
    local t = core._io_read(f, d.data_start + off, dtype, shape, false, "dle.load: " .. path)
    if flags & 1 == 1 and FLOAT[dtype] then t:requires_grad_(true) end
    return t
  end

  -- Version 2 storage and tensor lists: d.tensors[k] is the tensor "R" k names.
  local function v2_tensors(d, f, path)
    local storages = {}
    for i = 1, d.count("storages", 18) do
      local where = "storage " .. i
      local dtype = d.dtype(where)
      local off, numel = d.unpack("<i8i8", "a storage record")
      if off % ALIGN ~= 0 or numel < 0 or numel > d.data_len // ELSIZE[dtype] then
        fail("dle.load: %s: corrupt description (%s: %d elements at offset %d)", path, where, numel, off)
      end
      check_data(d, path, where, off, numel * ELSIZE[dtype])
      storages[i] = core._io_read(f, d.data_start + off, dtype, {numel}, false, "dle.load: " .. path)
    end
    d.tensors = {}
    for k = 1, d.count("tensors", 18) do
      local where = "tensor " .. k
      local si, ndim = d.unpack("<i8B", "a tensor record")
      local base = storages[si]
      if not base then
        fail("dle.load: %s: corrupt description (%s names storage %d of %d)", path, where, si, #storages)
      end
      local sizes = d.sizes(ndim, where)
      local strides = {}
      for i = 1, ndim do strides[i] = d.unpack("<i8", "a tensor stride") end
      local off, flags = d.unpack("<i8B", "a tensor record")
      local t = core._io_view(base, sizes, strides, off, "dle.load: " .. path .. ": " .. where)
      if flags & 1 == 1 and FLOAT[t:dtype()] then t:requires_grad_(true) end
      d.tensors[k] = t
    end
  end

  local function decode(d, f, path, where, depth)
    if depth > MAX_DEPTH then fail("dle.load: %s: corrupt description (nested deeper than %d)", path, MAX_DEPTH) end
    local tag = d.unpack("c1", "a value tag at " .. where)
    if tag == "t" then return true end
    if tag == "f" then return false end
    if tag == "i" then return (d.unpack("<i8", "an integer at " .. where)) end
    if tag == "d" then return (d.unpack("<d", "a float at " .. where)) end
    if tag == "s" then
      return d.bytes(d.unpack("<i8", "a string length at " .. where), "a string at " .. where)
    end
    if tag == "T" then
      local t = {}
      for _ = 1, d.count("table entries at " .. where, 2) do
        local k = decode(d, f, path, where, depth + 1)
        if type(k) ~= "string" and type(k) ~= "number" and type(k) ~= "boolean" or k ~= k then
          fail("dle.load: %s: corrupt description (bad table key at %s)", path, where)
        end
        t[k] = decode(d, f, path, child(where, k), depth + 1)
      end
      return t
    end
    if tag == "X" and d.version == 1 then return v1_tensor(d, f, path, where) end
    if tag == "R" and d.version == 2 then
      local k = d.unpack("<i8", "a tensor number at " .. where)
      local t = d.tensors[k]
      if not t then fail("dle.load: %s: corrupt description (%s names tensor %d of %d)", path, where, k, #d.tensors) end
      return t
    end
    fail("dle.load: %s: corrupt description (unknown tag %q at byte %d)", path, tag, HEADER + d.pos - 2)
  end

  --- Loads a value written by dle.save (file versions 1 and 2). Tensors come back on the CPU,
  -- with the aliasing they were saved with (version 2). Errors name the path and the problem:
  -- bad magic, unsupported version, truncated description or data, bad dtype.
  -- @param path string
  -- @return the saved value
  local function load(path)
    return common.with_file("dle.load", path, function(f, size)
      local head = common.read_at(f, 0, math.min(size, HEADER), "dle.load", path, "header")
      if #head < 4 or head:sub(1, 4) ~= MAGIC then
        fail("dle.load: %s: bad magic (not a dle file: starts with %q)", path, head:sub(1, 4))
      end
      local version = #head >= 8 and string.unpack("<I4", head, 5)
      if version and version ~= 1 and version ~= 2 then
        fail("dle.load: %s: unsupported version %d (this dle reads versions 1 and 2)", path, version)
      end
      if #head < HEADER then fail("dle.load: %s: truncated header (%d of %d bytes)", path, #head, HEADER) end
      local _, _, dlen, data_start, data_len = string.unpack("<c4I4i8i8i8", head)
      if dlen < 0 or dlen > size - HEADER then
        fail("dle.load: %s: truncated description (%d bytes announced, %d in the file)", path, dlen,
          size - HEADER)
      end
      if data_start < HEADER + dlen or data_start % ALIGN ~= 0 or data_len < 0 then
        fail("dle.load: %s: corrupt header (data section at %d, description ends at %d)", path,
          data_start, HEADER + dlen)
      end
      if data_start > size or data_len > size - data_start then
        fail("dle.load: %s: truncated data (file has %d bytes, expected %d)", path, size,
          data_start + data_len)
      end
      local d = reader({desc = common.read_at(f, HEADER, dlen, "dle.load", path, "description"), pos = 1,
        data_start = data_start, data_len = data_len, version = version}, path)
      if version == 2 then v2_tensors(d, f, path) end
      local value = decode(d, f, path, "value", 0)
      if d.pos ~= dlen + 1 then
        fail("dle.load: %s: corrupt description (%d unread bytes at its end)", path, dlen + 1 - d.pos)
      end
      return value
    end)
  end

  return {save = save, load = load}
end
