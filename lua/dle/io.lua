--- dle.io: file formats. Adds to `dle`:
--   dle.save(path, value) / dle.load(path)       dle's own checkpoint format (below)
--   dle.save_npy(path, t) / dle.load_npy(path)   NumPy .npy (v1.0 written; 1.0, 2.0, 3.0 read)
--   dle.save_safetensors(path, tensors, metadata) / dle.load_safetensors(path)
--
-- The dle format (version 1), all integers little-endian:
--   bytes 0..3    "DLE\0"
--   bytes 4..7    u32 version (1)
--   bytes 8..15   u64 length D of the description
--   bytes 16..23  u64 data_start (a multiple of 64, >= 32 + D)
--   bytes 24..31  u64 length of the data section
--   bytes 32..    the description: one tagged value, written with string.pack:
--     "t" / "f"   true / false
--     "i" i8      integer            "d" f64    float (integers and floats stay apart)
--     "s" s8      string (any bytes, zeros included)
--     "T" i8 n    table of n key/value pairs (keys: strings, numbers, booleans; sorted)
--     "X" s1 dtype name, u8 ndim, ndim x i8 sizes, i8 offset (from data_start, a multiple of
--         64), i8 nbytes, u8 flags (1 = requires_grad): a tensor
--   data_start..  raw C-order tensor data, each tensor 64-byte aligned.
-- No C `long`s and no device names: a CUDA tensor is saved as CPU data, loads on the CPU.
-- Writes go to path .. ".tmp-<pid>", are flushed and fsync'ed, then renamed over path.
local core = require "dle.core"
local check = require "dle.check"

local VERSION = 1
local MAGIC = "DLE\0"
local HEADER = 32
local ALIGN = 64
local MAX_DEPTH = 200

-- Element sizes of the dtypes a file may name.
local ELSIZE = {
  float32 = 4, float64 = 8, float16 = 2, bfloat16 = 2, int32 = 4, int64 = 8, uint8 = 1, bool = 1,
}

local function align(n, a)
  return (n + a - 1) // a * a
end

local function fail(fmt, ...)
  error(string.format(fmt, ...), 0)
end

-- Wraps impl so that its errors are reported at the line that called the public function.
local function public(impl)
  return function(...)
    local res = table.pack(pcall(impl, ...))
    if not res[1] then error(res[2], 2) end
    return table.unpack(res, 2, res.n)
  end
end

local FLOAT = {float32 = true, float64 = true, float16 = true, bfloat16 = true}

local function nbytes_of(t)
  return t:numel() * ELSIZE[t:dtype()]
end

-- Writes a file atomically: write(f, tmp) fills it; then fsync, close, rename over path.
local function atomic_write(fn, path, write)
  if type(path) ~= "string" then fail("%s: path must be a string, got %s", fn, type(path)) end
  local tmp = path .. ".tmp-" .. core._io_pid()
  local f, msg = io.open(tmp, "wb")
  if not f then fail("%s: cannot create the temporary file: %s", fn, msg) end
  local ok, err = pcall(function()
    write(f)
    core._io_sync(f, fn .. ": " .. path)
  end)
  f:close()
  if ok then
    local rok, rmsg = os.rename(tmp, path)
    if not rok then ok, err = false, string.format("%s: cannot rename %s to %s: %s", fn, tmp, path, rmsg) end
  end
  if not ok then
    os.remove(tmp)
    error(err, 0)
  end
end

-- Opens path for reading and returns the file and its size.
local function open_read(fn, path)
  if type(path) ~= "string" then fail("%s: path must be a string, got %s", fn, type(path)) end
  local f, msg = io.open(path, "rb")
  if not f then fail("%s: cannot open %s", fn, msg) end
  local probe, why = f:read(0)   -- a directory opens, then fails to read ("Is a directory")
  if probe == nil and why then
    f:close()
    fail("%s: cannot read %s: %s", fn, path, why)
  end
  local size = core._io_file_size(f, fn .. ": " .. path)
  return f, size
end

-- Runs body(f, size) on the opened file and closes it whatever happens.
local function with_file(fn, path, body)
  local f, size = open_read(fn, path)
  local res = table.pack(pcall(body, f, size))
  f:close()
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

-- Reads exactly n bytes at offset, or fails with "truncated <what>".
local function read_at(f, offset, n, fn, path, what)
  f:seek("set", offset)
  local s = n > 0 and f:read(n) or ""
  if not s or #s ~= n then
    fail("%s: %s: truncated %s (wanted %d bytes at offset %d, got %d)", fn, path, what, n, offset,
      s and #s or 0)
  end
  return s
end

-- Key order for deterministic files: booleans, then numbers, then strings.
local KEY_RANK = {boolean = 1, number = 2, string = 3}
local function key_less(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return KEY_RANK[ta] < KEY_RANK[tb] end
  if ta == "boolean" then return (not a) and b end
  return a < b
end

local function key_str(k)
  if type(k) == "string" then return string.format("%q", k) end
  return tostring(k)
end

return function(dle)
  local is_tensor = dle.is_tensor

  ---------------------------------------------------------------- dle.save / dle.load

  -- Appends the description of v to parts; tensors go to the `tensors` list with their
  -- data offsets. `where` is the key path for messages, `active` the tables being walked.
  local function encode(v, parts, st, where, active, depth)
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
      local dtype = v:dtype()
      local shape = v:shape()
      local nb = nbytes_of(v)
      local off = align(st.cursor, ALIGN)
      st.cursor = off + nb
      st.tensors[#st.tensors + 1] = {t = v, offset = off, nbytes = nb}
      local p = {string.pack("<c1s1B", "X", dtype, #shape)}
      for i = 1, #shape do p[#p + 1] = string.pack("<i8", shape[i]) end
      p[#p + 1] = string.pack("<i8i8B", off, nb, v.requires_grad and 1 or 0)
      parts[#parts + 1] = table.concat(p)
    elseif tv == "table" then
      if active[v] then fail("dle.save: the table at %s contains itself (a cycle)", where) end
      if depth >= MAX_DEPTH then fail("dle.save: tables nested deeper than %d at %s", MAX_DEPTH, where) end
      active[v] = true
      local keys = {}
      for k in pairs(v) do
        if not KEY_RANK[type(k)] then
          fail("dle.save: table key of type %s at %s (keys must be strings, numbers or booleans)",
            type(k), where)
        end
        keys[#keys + 1] = k
      end
      table.sort(keys, key_less)
      parts[#parts + 1] = string.pack("<c1i8", "T", #keys)
      for _, k in ipairs(keys) do
        encode(k, parts, st, where, active, depth + 1)
        encode(v[k], parts, st, where .. "[" .. key_str(k) .. "]", active, depth + 1)
      end
      active[v] = nil
    else
      fail("dle.save: cannot save a %s at %s (tensors, tables, numbers, strings, booleans only)",
        tv, where)
    end
  end

  --- Saves a value to a file (atomically): a tensor, or nested tables of tensors, numbers
  -- (integers stay integers), strings and booleans, e.g. a checkpoint
  -- {model = net:state_dict(), optim = opt:state_dict(), step = 10, rng = dle.get_rng_state()}.
  -- Tensors are stored contiguous, on the CPU; a tensor reached twice is stored twice.
  -- @param path string
  -- @param value the value to store
  local function save(path, value)
    if value == nil then fail("dle.save: nothing to save (value is nil)") end
    local parts, st = {}, {cursor = 0, tensors = {}}
    encode(value, parts, st, "value", {}, 0)
    local desc = table.concat(parts)
    local data_start = align(HEADER + #desc, ALIGN)
    local data_len = st.cursor
    atomic_write("dle.save", path, function(f)
      f:write(string.pack("<c4I4i8i8i8", MAGIC, VERSION, #desc, data_start, data_len), desc,
        string.rep("\0", data_start - HEADER - #desc))
      local pos = 0
      for _, e in ipairs(st.tensors) do
        if e.offset > pos then f:write(string.rep("\0", e.offset - pos)) end
        local n = core._io_write(f, e.t, "dle.save: " .. path)
        if n ~= e.nbytes then fail("dle.save: %s: wrote %d bytes of a tensor, expected %d", path, n, e.nbytes) end
        pos = e.offset + n
      end
    end)
  end

  -- Decoder state: the description string, the position in it, and what tensors need.
  local function decode(d, f, path, where, depth)
    local desc = d.desc
    local function need(n, what)
      if d.pos + n - 1 > #desc then
        fail("dle.load: %s: truncated description (%s at %s)", path, what, where)
      end
    end
    local function unpack(fmt, what)
      need(string.packsize(fmt), what)
      local r = table.pack(string.unpack(fmt, desc, d.pos))
      d.pos = r[r.n]
      return table.unpack(r, 1, r.n - 1)
    end
    if depth > MAX_DEPTH then fail("dle.load: %s: corrupt description (nested deeper than %d)", path, MAX_DEPTH) end
    local tag = unpack("c1", "a value tag")
    if tag == "t" then return true end
    if tag == "f" then return false end
    if tag == "i" then return (unpack("<i8", "an integer")) end
    if tag == "d" then return (unpack("<d", "a float")) end
    if tag == "s" then
      local n = unpack("<i8", "a string length")
      if n < 0 then fail("dle.load: %s: corrupt description (negative string length at %s)", path, where) end
      need(n, "a string")
      local s = desc:sub(d.pos, d.pos + n - 1)
      d.pos = d.pos + n
      return s
    end
    if tag == "T" then
      local n = unpack("<i8", "a table size")
      if n < 0 or n > (#desc - d.pos + 1) // 2 then
        fail("dle.load: %s: corrupt description (table of %d entries at %s)", path, n, where)
      end
      local t = {}
      for _ = 1, n do
        local k = decode(d, f, path, where, depth + 1)
        if type(k) ~= "string" and type(k) ~= "number" and type(k) ~= "boolean" or k ~= k then
          fail("dle.load: %s: corrupt description (bad table key at %s)", path, where)
        end
        t[k] = decode(d, f, path, where .. "[" .. key_str(k) .. "]", depth + 1)
      end
      return t
    end
    if tag == "X" then
      local dlen = unpack("B", "a dtype")
      need(dlen, "a dtype")
      local dtype = desc:sub(d.pos, d.pos + dlen - 1)
      d.pos = d.pos + dlen
      if not ELSIZE[dtype] then
        fail("dle.load: %s: bad dtype %q for the tensor at %s", path, dtype, where)
      end
      local ndim = unpack("B", "a tensor rank")
      if ndim > 8 then fail("dle.load: %s: corrupt description (tensor of %d dims at %s)", path, ndim, where) end
      local shape, numel = {}, 1
      for i = 1, ndim do
        shape[i] = unpack("<i8", "a tensor size")
        if shape[i] < 0 or shape[i] > 0 and numel > (1 << 56) // shape[i] then
          fail("dle.load: %s: corrupt description (bad size %d at %s)", path, shape[i], where)
        end
        numel = numel * shape[i]
      end
      local off, nb, flags = unpack("<i8i8B", "a tensor record")
      if nb ~= numel * ELSIZE[dtype] or numel < 0 then
        fail("dle.load: %s: corrupt description (tensor at %s: %d bytes for %d %s elements)", path,
          where, nb, numel, dtype)
      end
      if off < 0 or off > d.data_len or nb > d.data_len - off then
        fail("dle.load: %s: truncated data (tensor at %s needs bytes %d..%d of a %d-byte data section)",
          path, where, off, off + nb, d.data_len)
      end
      local t = core._io_read(f, d.data_start + off, dtype, shape, false, "dle.load: " .. path)
      if flags & 1 == 1 and FLOAT[dtype] then t:requires_grad_(true) end
      return t
    end
    fail("dle.load: %s: corrupt description (unknown tag %q at byte %d)", path, tag, HEADER + d.pos - 1)
  end

  --- Loads a value written by dle.save. Tensors come back on the CPU, contiguous.
  -- Errors name the path and the problem: bad magic, unsupported version, truncated
  -- description or data, bad dtype.
  -- @param path string
  -- @return the saved value
  local function load(path)
    return with_file("dle.load", path, function(f, size)
      local head = read_at(f, 0, math.min(size, HEADER), "dle.load", path, "header")
      if #head < 4 or head:sub(1, 4) ~= MAGIC then
        fail("dle.load: %s: bad magic (not a dle file: starts with %q)", path, head:sub(1, 4))
      end
      local version = #head >= 8 and string.unpack("<I4", head, 5)
      if version and version ~= VERSION then
        fail("dle.load: %s: unsupported version %d (this dle reads version %d)", path, version, VERSION)
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
      local d = {desc = read_at(f, HEADER, dlen, "dle.load", path, "description"), pos = 1,
        data_start = data_start, data_len = data_len}
      local value = decode(d, f, path, "value", 0)
      if d.pos ~= dlen + 1 then
        fail("dle.load: %s: corrupt description (%d unread bytes at its end)", path, dlen + 1 - d.pos)
      end
      return value
    end)
  end

  ---------------------------------------------------------------- NumPy .npy

  local NPY_OF = {float32 = "f4", float64 = "f8", float16 = "f2", int32 = "i4", int64 = "i8",
    uint8 = "u1", bool = "b1"}
  local DTYPE_OF_NPY = {f4 = "float32", f8 = "float64", f2 = "float16", i4 = "int32",
    i8 = "int64", u1 = "uint8", b1 = "bool"}

  --- Saves a tensor as a NumPy .npy file (format 1.0, C order, little-endian). bfloat16 has
  -- no NumPy dtype: it is saved as float32 ('<f4'), which holds it exactly.
  -- @param path string
  -- @param t tensor
  local function save_npy(path, t)
    if not is_tensor(t) then fail("dle.save_npy: expected a tensor, got %s", type(t)) end
    if t:dtype() == "bfloat16" then t = t:float() end
    local code = NPY_OF[t:dtype()]
    local descr = (code:sub(2) == "1" and "|" or "<") .. code
    local shape = t:shape()
    local dims
    if #shape == 1 then
      dims = "(" .. shape[1] .. ",)"
    else
      local s = {}
      for i = 1, #shape do s[i] = tostring(shape[i]) end
      dims = "(" .. table.concat(s, ", ") .. ")"
    end
    local dict = string.format("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, dims)
    local total = align(10 + #dict + 1, ALIGN)
    local header = dict .. string.rep(" ", total - 10 - #dict - 1) .. "\n"
    atomic_write("dle.save_npy", path, function(f)
      f:write("\x93NUMPY\1\0", string.pack("<I2", #header), header)
      core._io_write(f, t, "dle.save_npy: " .. path)
    end)
  end

  --- Loads a NumPy .npy file (format 1.0, 2.0 or 3.0) as a tensor. dtypes: f4 f8 f2 i4 i8
  -- u1 b1, either byte order; fortran_order arrays are returned as contiguous C-order tensors.
  -- @param path string
  -- @return tensor
  local function load_npy(path)
    local fn = "dle.load_npy"
    return with_file(fn, path, function(f, size)
      local pre = read_at(f, 0, math.min(size, 8), fn, path, "header")
      if pre:sub(1, 6) ~= "\x93NUMPY" then
        fail("%s: %s: bad magic (not a .npy file: starts with %q)", fn, path, pre:sub(1, 6))
      end
      if #pre < 8 then fail("%s: %s: truncated header", fn, path) end
      local major, minor = pre:byte(7), pre:byte(8)
      local lenbytes = ({2, 4, 4})[major]
      if not lenbytes then fail("%s: %s: unsupported .npy version %d.%d", fn, path, major, minor) end
      local hl = string.unpack(lenbytes == 2 and "<I2" or "<I4",
        read_at(f, 8, lenbytes, fn, path, "header"))
      local start = 8 + lenbytes
      if hl > size - start then
        fail("%s: %s: truncated header (%d bytes announced, %d in the file)", fn, path, hl, size - start)
      end
      local h = read_at(f, start, hl, fn, path, "header")
      local descr = h:match("['\"]descr['\"]%s*:%s*['\"]([^'\"]*)['\"]")
      local fortran = h:match("['\"]fortran_order['\"]%s*:%s*(%a+)")
      local dims = h:match("['\"]shape['\"]%s*:%s*%(([^)]*)%)")
      if not descr or not fortran or not dims or (fortran ~= "True" and fortran ~= "False") then
        fail("%s: %s: bad header %q", fn, path, h)
      end
      local order, code = descr:match("^([<>|=]?)(%a%d+)$")
      local dtype = code and DTYPE_OF_NPY[code]
      if not dtype then fail("%s: %s: unsupported dtype %q", fn, path, descr) end
      local swap = order == ">" and ELSIZE[dtype] > 1
      local shape = {}
      for item in dims:gmatch("[^,]+") do
        if item:match("%S") then
          local n = math.tointeger(tonumber((item:gsub("[%sL]", ""))))
          if not n or n < 0 then fail("%s: %s: bad shape (%s)", fn, path, dims) end
          shape[#shape + 1] = n
        end
      end
      if #shape > 8 then fail("%s: %s: %d dims (at most 8 supported)", fn, path, #shape) end
      local data_at = start + hl
      if fortran == "True" and #shape > 1 then
        local rev, perm = {}, {}
        for i = 1, #shape do rev[i] = shape[#shape + 1 - i]; perm[i] = #shape + 1 - i end
        local t = core._io_read(f, data_at, dtype, rev, swap, fn .. ": " .. path)
        return t:permute(perm):contiguous()
      end
      return core._io_read(f, data_at, dtype, shape, swap, fn .. ": " .. path)
    end)
  end

  ---------------------------------------------------------------- JSON (safetensors headers)

  local function json_string(s)
    return '"' .. s:gsub('[%c"\\]', function(c)
      if c == '"' then return '\\"' end
      if c == "\\" then return "\\\\" end
      return string.format("\\u%04x", c:byte())
    end) .. '"'
  end

  -- A minimal JSON parser: objects, arrays, strings, numbers, true/false/null (null -> nil).
  local function json_decode(s, fn, path)
    local pos = 1
    local function bad(what)
      fail("%s: %s: invalid JSON header at byte %d: %s", fn, path, pos, what)
    end
    local function ws()
      pos = s:find("[^ \t\r\n]", pos) or #s + 1
    end
    local value
    local function str()
      pos = pos + 1
      local out = {}
      while true do
        local c = s:sub(pos, pos)
        if c == "" then bad("unterminated string") end
        if c == '"' then pos = pos + 1; break end
        if c == "\\" then
          local e = s:sub(pos + 1, pos + 1)
          local simple = ({['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n",
            r = "\r", t = "\t"})[e]
          if simple then
            out[#out + 1] = simple
            pos = pos + 2
          elseif e == "u" then
            local hex = s:match("^%x%x%x%x", pos + 2)
            if not hex then bad("bad \\u escape") end
            local cp = tonumber(hex, 16)
            pos = pos + 6
            if cp >= 0xD800 and cp <= 0xDBFF then
              local lo = s:match("^\\u(%x%x%x%x)", pos)
              lo = lo and tonumber(lo, 16)
              if not lo or lo < 0xDC00 or lo > 0xDFFF then bad("unpaired surrogate") end
              cp = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
              pos = pos + 6
            end
            out[#out + 1] = utf8.char(cp)
          else
            bad("bad escape")
          end
        elseif c:byte() < 32 then
          bad("control character in string")
        else
          local j = s:find('["\\%c]', pos) or #s + 1
          out[#out + 1] = s:sub(pos, j - 1)
          pos = j
        end
      end
      return table.concat(out)
    end
    function value(depth)
      if depth > 64 then bad("nested too deeply") end
      ws()
      local c = s:sub(pos, pos)
      if c == "{" then
        pos = pos + 1
        local obj = {}
        ws()
        if s:sub(pos, pos) == "}" then pos = pos + 1; return obj end
        while true do
          ws()
          if s:sub(pos, pos) ~= '"' then bad("expected a string key") end
          local k = str()
          ws()
          if s:sub(pos, pos) ~= ":" then bad("expected ':'") end
          pos = pos + 1
          obj[k] = value(depth + 1)
          ws()
          c = s:sub(pos, pos)
          pos = pos + 1
          if c == "}" then return obj end
          if c ~= "," then pos = pos - 1; bad("expected ',' or '}'") end
        end
      elseif c == "[" then
        pos = pos + 1
        local arr, n = {}, 0
        ws()
        if s:sub(pos, pos) == "]" then pos = pos + 1; return arr end
        while true do
          n = n + 1
          arr[n] = value(depth + 1)
          ws()
          c = s:sub(pos, pos)
          pos = pos + 1
          if c == "]" then return arr end
          if c ~= "," then pos = pos - 1; bad("expected ',' or ']'") end
        end
      elseif c == '"' then
        return str()
      elseif s:find("^true", pos) then
        pos = pos + 4; return true
      elseif s:find("^false", pos) then
        pos = pos + 5; return false
      elseif s:find("^null", pos) then
        pos = pos + 4; return nil
      else
        local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
        local v = num and tonumber(num)
        if not v then bad(c == "" and "unexpected end" or "unexpected character " .. string.format("%q", c)) end
        pos = pos + #num
        return v
      end
    end
    local v = value(0)
    ws()
    if pos <= #s then bad("trailing characters") end
    return v
  end

  ---------------------------------------------------------------- safetensors

  local ST_OF = {float32 = "F32", float64 = "F64", float16 = "F16", bfloat16 = "BF16",
    int32 = "I32", int64 = "I64", uint8 = "U8", bool = "BOOL"}
  local DTYPE_OF_ST = {}
  for k, v in pairs(ST_OF) do DTYPE_OF_ST[v] = k end

  --- Saves a table of named tensors in the safetensors format (names sorted, so the file is
  -- deterministic; the JSON header is padded with spaces to a multiple of 8 bytes).
  -- @param path string
  -- @param tensors table name -> tensor
  -- @param metadata optional table of string -> string, stored as "__metadata__"
  local function save_safetensors(path, tensors, metadata)
    local fn = "dle.save_safetensors"
    if type(tensors) ~= "table" then fail("%s: tensors must be a table of name -> tensor, got %s", fn, type(tensors)) end
    local names = {}
    for k, v in pairs(tensors) do
      if type(k) ~= "string" then fail("%s: tensor names must be strings, got %s %s", fn, type(k), tostring(k)) end
      if k == "__metadata__" then fail("%s: '__metadata__' is reserved and cannot name a tensor", fn) end
      if not is_tensor(v) then fail("%s: %s is a %s, not a tensor", fn, k, type(v)) end
      names[#names + 1] = k
    end
    table.sort(names)
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
      for i, k in ipairs(keys) do m[i] = json_string(k) .. ":" .. json_string(metadata[k]) end
      parts[#parts + 1] = '"__metadata__":{' .. table.concat(m, ",") .. "}"
    end
    local cursor = 0
    for _, name in ipairs(names) do
      local t = tensors[name]
      local nb = nbytes_of(t)
      local shape = t:shape()
      for i = 1, #shape do shape[i] = tostring(shape[i]) end
      parts[#parts + 1] = string.format('%s:{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}',
        json_string(name), ST_OF[t:dtype()], table.concat(shape, ","), cursor, cursor + nb)
      cursor = cursor + nb
    end
    local header = "{" .. table.concat(parts, ",") .. "}"
    header = header .. string.rep(" ", align(#header, 8) - #header)
    atomic_write(fn, path, function(f)
      f:write(string.pack("<I8", #header), header)
      for _, name in ipairs(names) do core._io_write(f, tensors[name], fn .. ": " .. path) end
    end)
  end

  --- Loads a safetensors file.
  -- @param path string
  -- @return table name -> tensor, and the "__metadata__" table (empty when absent)
  local function load_safetensors(path)
    local fn = "dle.load_safetensors"
    return with_file(fn, path, function(f, size)
      local pre = read_at(f, 0, math.min(size, 8), fn, path, "header length")
      if #pre < 8 then fail("%s: %s: truncated header length (%d bytes)", fn, path, #pre) end
      local n = string.unpack("<i8", pre)
      if n < 2 or n > 100 * 1024 * 1024 then fail("%s: %s: bad header length %d", fn, path, n) end
      if n > size - 8 then
        fail("%s: %s: truncated header (%d bytes announced, %d in the file)", fn, path, n, size - 8)
      end
      local h = json_decode(read_at(f, 8, n, fn, path, "header"), fn, path)
      if type(h) ~= "table" then fail("%s: %s: the header is not a JSON object", fn, path) end
      local data_at, data_len = 8 + n, size - 8 - n
      local out, meta = {}, {}
      local names = {}
      for name in pairs(h) do names[#names + 1] = name end
      table.sort(names)
      for _, name in ipairs(names) do
        local e = h[name]
        if name == "__metadata__" then
          if type(e) ~= "table" then fail("%s: %s: __metadata__ is not an object", fn, path) end
          for k, v in pairs(e) do meta[k] = v end
        else
          if type(e) ~= "table" then fail("%s: %s: entry %q is not an object", fn, path, name) end
          local dtype = DTYPE_OF_ST[e.dtype]
          if not dtype then fail("%s: %s: bad dtype %s for %q", fn, path, tostring(e.dtype), name) end
          local shape, numel = e.shape, 1
          if type(shape) ~= "table" or #shape > 8 then fail("%s: %s: bad shape for %q", fn, path, name) end
          for i = 1, #shape do
            local s = math.tointeger(shape[i])
            if not s or s < 0 or s > 0 and numel > (1 << 56) // s then
              fail("%s: %s: bad shape for %q", fn, path, name)
            end
            shape[i] = s
            numel = numel * s
          end
          local offs = e.data_offsets
          local b = type(offs) == "table" and math.tointeger(offs[1])
          local en = type(offs) == "table" and math.tointeger(offs[2])
          if not b or not en or b < 0 or en < b then
            fail("%s: %s: bad data_offsets for %q", fn, path, name)
          end
          if en - b ~= numel * ELSIZE[dtype] then
            fail("%s: %s: %q has %d data bytes but shape and dtype %s need %d", fn, path, name,
              en - b, dtype, numel * ELSIZE[dtype])
          end
          if en > data_len then
            fail("%s: %s: truncated data (%q needs bytes %d..%d, the data section has %d)", fn, path,
              name, b, en, data_len)
          end
          out[name] = core._io_read(f, data_at + b, dtype, shape, false, fn .. ": " .. path)
        end
      end
      return out, meta
    end)
  end

  dle.save = public(save)
  dle.load = public(load)
  dle.save_npy = public(save_npy)
  dle.load_npy = public(load_npy)
  dle.save_safetensors = public(save_safetensors)
  dle.load_safetensors = public(load_safetensors)
  dle.io = {
    json_decode = check.public(function(s)
      check.string(s, "dle.io.json_decode", "text")
      return json_decode(s, "dle.io.json_decode", "string")
    end),
    json_string = function(s)
      check.string(s, "dle.io.json_string", "s")
      return json_string(s)
    end,
  }
end
