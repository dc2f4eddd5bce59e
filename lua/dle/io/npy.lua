--- dle.io.npy: dle.save_npy / dle.load_npy, the NumPy .npy format (1.0 written; 1.0, 2.0 and
-- 3.0 read).
local core = require("dle.core")
local common = require("dle.io.common")
local atomic = require("dle.io.atomic")

local ELSIZE, fail, align = common.ELSIZE, common.fail, common.align
local COMPLEX_PART = common.COMPLEX_PART

local NPY_OF = {float32 = "f4", float64 = "f8", float16 = "f2", int32 = "i4", int64 = "i8",
  uint8 = "u1", bool = "b1", int8 = "i1", int16 = "i2", uint16 = "u2", uint32 = "u4", uint64 = "u8",
  complex64 = "c8", complex128 = "c16"}
-- dtypes NumPy lacks, saved as float32 (which holds each of their values exactly)
local AS_FLOAT32 = {bfloat16 = true, float8_e4m3fn = true, float8_e5m2 = true}
local DTYPE_OF_NPY = {}
for k, v in pairs(NPY_OF) do DTYPE_OF_NPY[v] = k end

return function(dle)
  --- Saves a tensor as a NumPy .npy file (format 1.0, C order, little-endian). bfloat16,
  -- float8_e4m3fn and float8_e5m2 have no NumPy dtype: they are saved as float32 ('<f4'), which
  -- holds them exactly.
  -- @param path string
  -- @param t tensor
  local function save_npy(path, t)
    if not dle.is_tensor(t) then fail("dle.save_npy: expected a tensor, got %s", type(t)) end
    if AS_FLOAT32[t:dtype()] then t = t:float() end
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
    local total = align(10 + #dict + 1, 64)
    local header = dict .. string.rep(" ", total - 10 - #dict - 1) .. "\n"
    atomic.write("dle.save_npy", path, function(f)
      f:write("\x93NUMPY\1\0", string.pack("<I2", #header), header)
      core._io_write(f, t, "dle.save_npy: " .. path)
    end)
  end

  --- Loads a NumPy .npy file (format 1.0, 2.0 or 3.0) as a tensor. dtypes: f4 f8 f2 i1 i2 i4
  -- i8 u1 u2 u4 u8 b1, either byte order; fortran_order arrays are returned as contiguous C-order tensors.
  -- @param path string
  -- @return tensor
  local function load_npy(path)
    local fn = "dle.load_npy"
    return common.with_file(fn, path, function(f, size)
      local pre = common.read_at(f, 0, math.min(size, 8), fn, path, "header")
      if pre:sub(1, 6) ~= "\x93NUMPY" then
        fail("%s: %s: bad magic (not a .npy file: starts with %q)", fn, path, pre:sub(1, 6))
      end
      if #pre < 8 then fail("%s: %s: truncated header", fn, path) end
      local major, minor = pre:byte(7), pre:byte(8)
      local lenbytes = ({2, 4, 4})[major]
      if not lenbytes then fail("%s: %s: unsupported .npy version %d.%d", fn, path, major, minor) end
      local hl = string.unpack(lenbytes == 2 and "<I2" or "<I4",
        common.read_at(f, 8, lenbytes, fn, path, "header"))
      local start = 8 + lenbytes
      if hl > size - start then
        fail("%s: %s: truncated header (%d bytes announced, %d in the file)", fn, path, hl, size - start)
      end
      local h = common.read_at(f, start, hl, fn, path, "header")
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
          local digits = item:match("^%s*(%d+)L?%s*$")
          local n = digits and math.tointeger(tonumber(digits))
          if not n then fail("%s: %s: bad shape (%s)", fn, path, dims) end
          shape[#shape + 1] = n
        end
      end
      if #shape > 8 then fail("%s: %s: %d dims (at most 8 supported)", fn, path, #shape) end
      local data_at = start + hl
      -- a complex array is read as its (re, im) parts, so a big-endian file swaps each part
      local part = COMPLEX_PART[dtype]
      local function read(sizes)
        if not part then return core._io_read(f, data_at, dtype, sizes, swap, fn .. ": " .. path) end
        local s = table.move(sizes, 1, #sizes, 1, {})
        s[#s + 1] = 2
        return dle.view_as_complex(core._io_read(f, data_at, part, s, order == ">", fn .. ": " .. path))
      end
      if fortran == "True" and #shape > 1 then
        local rev, perm = {}, {}
        for i = 1, #shape do rev[i] = shape[#shape + 1 - i]; perm[i] = #shape + 1 - i end
        return read(rev):permute(perm):contiguous()
      end
      return read(shape)
    end)
  end

  return {save_npy = save_npy, load_npy = load_npy}
end
