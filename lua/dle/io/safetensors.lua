--- dle.io.safetensors: dle.save_safetensors / dle.load_safetensors. The header is JSON, read
-- and written with lua-cjson (dle.io.json); the checks on it are the format's: dtypes, shapes,
-- data_offsets (exact integers, inside the file, matching shape x dtype, not overlapping),
-- __metadata__ as strings to strings.
local core = require("dle.core")
local common = require("dle.io.common")
local atomic = require("dle.io.atomic")
local json = require("dle.io.json")

local ELSIZE, fail = common.ELSIZE, common.fail

local MAX_HEADER = 100 * 1024 * 1024

local ST_OF = {float32 = "F32", float64 = "F64", float16 = "F16", bfloat16 = "BF16",
  int32 = "I32", int64 = "I64", uint8 = "U8", bool = "BOOL", int8 = "I8", int16 = "I16", uint16 = "U16",
  uint32 = "U32", uint64 = "U64", float8_e4m3fn = "F8_E4M3", float8_e5m2 = "F8_E5M2"}
local DTYPE_OF_ST = {}
for k, v in pairs(ST_OF) do DTYPE_OF_ST[v] = k end

-- A decoded JSON value as messages show it.
local function show(v)
  if v == json.null then return "null" end
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "table" then return json.is_array(v) and "an array" or "an object" end
  return tostring(json.integer(v) or v)
end

--- Errors when two of the named tensors share memory: safetensors stores every tensor on its
-- own, so tied weights would load untied. Tensors of one storage whose byte ranges overlap
-- share memory (the rule of the safetensors library); disjoint views of one storage do not.
local function check_shared(fn, names, tensors)
  local by_storage = {}
  for _, name in ipairs(names) do
    local t = tensors[name]
    local lo, hi = common.extent(t)
    if lo < hi then
      local sid = core._io_storage(t)
      local list = by_storage[sid] or {}
      by_storage[sid] = list
      local es = ELSIZE[t:dtype()]
      list[#list + 1] = {name = name, lo = lo * es, hi = hi * es}
    end
  end
  for _, list in pairs(by_storage) do
    table.sort(list, function(a, b) return a.lo < b.lo or a.lo == b.lo and a.name < b.name end)
    local reach = list[1]
    for i = 2, #list do
      local r = list[i]
      if r.lo < reach.hi then
        fail("%s: tensors %q and %q share memory (safetensors cannot store that: pass {copy_shared = true} "
          .. "as the 4th argument to write a copy of each)", fn, reach.name, r.name)
      end
      if r.hi > reach.hi then reach = r end
    end
  end
end

return function(dle)
  --- Saves a table of named tensors in the safetensors format (names sorted, so the file is
  -- deterministic; the JSON header is padded with spaces to a multiple of 8 bytes).
  -- Non-contiguous tensors are written contiguously. Tensors sharing memory (tied weights, the
  -- same tensor under two names, overlapping views) are an error naming both, unless
  -- opts.copy_shared is true: then each is written as a copy (they load untied).
  -- @param path string
  -- @param tensors table name -> tensor
  -- @param metadata optional table of string -> string, stored as "__metadata__"
  -- @param opts optional {copy_shared = boolean}
  local function save_safetensors(path, tensors, metadata, opts)
    local fn = "dle.save_safetensors"
    if type(tensors) ~= "table" then
      fail("%s: tensors must be a table of name -> tensor, got %s", fn, type(tensors))
    end
    if opts ~= nil and type(opts) ~= "table" then fail("%s: options must be a table, got %s", fn, type(opts)) end
    local names = {}
    for k, v in pairs(tensors) do
      if type(k) ~= "string" then fail("%s: tensor names must be strings, got %s %s", fn, type(k), tostring(k)) end
      if k == "__metadata__" then fail("%s: '__metadata__' is reserved and cannot name a tensor", fn) end
      if not dle.is_tensor(v) then fail("%s: %s is a %s, not a tensor", fn, k, type(v)) end
      if not ST_OF[v:dtype()] then
        fail("%s: %s is %s, which the safetensors format has no dtype for (its list has no complex type); "
          .. "save dle.view_as_real(t) instead, or use dle.save / dle.save_npy", fn, k, v:dtype())
      end
      names[#names + 1] = k
    end
    table.sort(names)
    if not (opts and opts.copy_shared) then check_shared(fn, names, tensors) end
    local parts = {}
    if metadata ~= nil then
      if type(metadata) ~= "table" then fail("%s: metadata must be a table of strings, got %s", fn, type(metadata)) end
      local keys, m = {}, {}
      for k, v in pairs(metadata) do
        if type(k) ~= "string" or type(v) ~= "string" then
          fail("%s: metadata must map strings to strings (%s = %s)", fn, tostring(k), tostring(v))
        end
        keys[#keys + 1] = k
      end
      table.sort(keys)
      for i, k in ipairs(keys) do m[i] = json.string(k) .. ":" .. json.string(metadata[k]) end
      parts[#parts + 1] = '"__metadata__":{' .. table.concat(m, ",") .. "}"
    end
    local cursor = 0
    for _, name in ipairs(names) do
      local t = tensors[name]
      local nb = common.nbytes_of(t)
      local shape = t:shape()
      for i = 1, #shape do shape[i] = tostring(shape[i]) end
      parts[#parts + 1] = string.format('%s:{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}',
        json.string(name), ST_OF[t:dtype()], table.concat(shape, ","), cursor, cursor + nb)
      cursor = cursor + nb
    end
    local header = "{" .. table.concat(parts, ",") .. "}"
    header = header .. string.rep(" ", common.align(#header, 8) - #header)
    atomic.write(fn, path, function(f)
      f:write(string.pack("<I8", #header), header)
      for _, name in ipairs(names) do core._io_write(f, tensors[name], fn .. ": " .. path) end
    end)
  end

  -- The checked shape, dtype and byte range of one header entry.
  local function entry(fn, path, name, e)
    if type(e) ~= "table" or json.is_array(e) and next(e) ~= nil then
      fail("%s: %s: entry %q is %s, not an object", fn, path, name, show(e))
    end
    local dtype = DTYPE_OF_ST[e.dtype]
    if not dtype then fail("%s: %s: bad dtype %s for %q", fn, path, show(e.dtype), name) end
    local shape, numel = {}, 1
    if not json.is_array(e.shape) or #e.shape > 8 then
      fail("%s: %s: bad shape for %q (%s; an array of at most 8 sizes expected)", fn, path, name, show(e.shape))
    end
    for i = 1, #e.shape do
      local s = json.integer(e.shape[i])
      if not s or s < 0 or s > 0 and numel > (1 << 56) // s then
        fail("%s: %s: bad shape for %q (size %d is %s)", fn, path, name, i, show(e.shape[i]))
      end
      shape[i] = s
      numel = numel * s
    end
    local offs = e.data_offsets
    local b = json.is_array(offs) and #offs == 2 and json.integer(offs[1])
    local en = b and json.integer(offs[2])
    if not b or not en or b < 0 or en < b then
      fail("%s: %s: bad data_offsets for %q (two integers begin <= end expected)", fn, path, name)
    end
    if en - b ~= numel * ELSIZE[dtype] then
      fail("%s: %s: %q has %d data bytes but shape and dtype %s need %d", fn, path, name,
        en - b, dtype, numel * ELSIZE[dtype])
    end
    return {name = name, dtype = dtype, shape = shape, b = b, en = en}
  end

  --- Loads a safetensors file.
  -- @param path string
  -- @param opts optional {mmap = false}: with mmap = true each tensor's storage is a private
  --   copy-on-write memory map of its bytes in the file (nothing is read until used; writes stay in
  --   memory, the file is never changed); a tensor whose offset is not a multiple of its element
  --   size is read instead
  -- @return table name -> tensor, and the "__metadata__" table (empty when absent)
  local function load_safetensors(path, opts)
    local fn = "dle.load_safetensors"
    if opts ~= nil and type(opts) ~= "table" then fail("%s: options must be a table, got %s", fn, type(opts)) end
    for k in pairs(opts or {}) do
      if k ~= "mmap" then fail("%s: unknown option %s (known: mmap)", fn, tostring(k)) end
    end
    local mmap = opts and opts.mmap
    return common.with_file(fn, path, function(f, size)
      local pre = common.read_at(f, 0, math.min(size, 8), fn, path, "header length")
      if #pre < 8 then fail("%s: %s: truncated header length (%d bytes)", fn, path, #pre) end
      local n = string.unpack("<i8", pre)
      if n < 2 or n > MAX_HEADER then fail("%s: %s: bad header length %d", fn, path, n) end
      if n > size - 8 then
        fail("%s: %s: truncated header (%d bytes announced, %d in the file)", fn, path, n, size - 8)
      end
      local h, err = json.decode(common.read_at(f, 8, n, fn, path, "header"))
      if h == nil then fail("%s: %s: invalid JSON header: %s", fn, path, err) end
      if type(h) ~= "table" or json.is_array(h) and next(h) ~= nil then
        fail("%s: %s: the header is %s, not a JSON object", fn, path, show(h))
      end
      local data_at, data_len = 8 + n, size - 8 - n
      local entries, meta = {}, {}
      for name, e in pairs(h) do
        if name == "__metadata__" then
          if type(e) ~= "table" or json.is_array(e) and next(e) ~= nil then
            fail("%s: %s: __metadata__ is %s, not an object", fn, path, show(e))
          end
          for k, v in pairs(e) do
            if type(v) ~= "string" then
              fail("%s: %s: __metadata__ value of %s is %s, not a string", fn, path, show(k), show(v))
            end
            meta[k] = v
          end
        else
          entries[#entries + 1] = entry(fn, path, name, e)
        end
      end
      -- in file order: each range within the data section and clear of those before it (prev:
      -- the one reaching furthest)
      table.sort(entries, function(a, c) return a.b < c.b or a.b == c.b and a.name < c.name end)
      local prev
      for _, e in ipairs(entries) do
        if e.en > data_len then
          fail("%s: %s: truncated data (%q needs bytes %d..%d, the data section has %d)", fn, path,
            e.name, e.b, e.en, data_len)
        end
        if prev and e.b < prev.en and e.en > e.b then
          fail("%s: %s: %q (bytes %d..%d) overlaps %q (bytes %d..%d)", fn, path, e.name, e.b, e.en,
            prev.name, prev.b, prev.en)
        end
        if e.en > e.b and (not prev or e.en > prev.en) then prev = e end
      end
      local out = {}
      for _, e in ipairs(entries) do
        local at = data_at + e.b
        if mmap and at % ELSIZE[e.dtype] == 0 then
          out[e.name] = core._memmap(path, e.dtype, e.shape, at, false)
        else
          out[e.name] = core._io_read(f, at, e.dtype, e.shape, false, fn .. ": " .. path)
        end
      end
      return out, meta
    end)
  end

  return {save_safetensors = save_safetensors, load_safetensors = load_safetensors}
end
