--- dle.io.common: what every file format of dle.io shares — element sizes, errors that name the
-- dle function, and reading a file by byte ranges with "truncated" errors.
local core = require("dle.core")

local M = {}

-- Element sizes of the dtypes a file may name.
M.ELSIZE = {
  float32 = 4, float64 = 8, float16 = 2, bfloat16 = 2, int32 = 4, int64 = 8, uint8 = 1, bool = 1,
  complex64 = 8, complex128 = 16,
  int8 = 1, int16 = 2, uint16 = 2, uint32 = 4, uint64 = 8, float8_e4m3fn = 1, float8_e5m2 = 1,
}
-- The dtype of each part (re, im) of a complex dtype.
M.COMPLEX_PART = {complex64 = "float32", complex128 = "float64"}
M.FLOAT = {float32 = true, float64 = true, float16 = true, bfloat16 = true, float8_e4m3fn = true,
  float8_e5m2 = true}

function M.align(n, a)
  return (n + a - 1) // a * a
end

--- Raises a formatted message as is (no position: the public wrapper adds the caller's).
function M.fail(fmt, ...)
  error(string.format(fmt, ...), 0)
end
local fail = M.fail

--- Wraps impl so that its errors are reported at the line that called the public function.
function M.public(impl)
  return function(...)
    local res = table.pack(pcall(impl, ...))
    if not res[1] then error(res[2], 2) end
    return table.unpack(res, 2, res.n)
  end
end

function M.nbytes_of(t)
  return t:numel() * M.ELSIZE[t:dtype()]
end

--- Opens path for reading and returns the file and its size.
local function open_read(fn, path)
  if type(path) ~= "string" then fail("%s: path must be a string, got %s", fn, type(path)) end
  local f, msg = io.open(path, "rb")
  if not f then fail("%s: cannot open %s", fn, msg) end
  local probe, why = f:read(0)   -- a directory opens, then fails to read ("Is a directory")
  if probe == nil and why then
    f:close()
    fail("%s: cannot read %s: %s", fn, path, why)
  end
  local ok, size = pcall(core._io_file_size, f, fn .. ": " .. path)
  if not ok then
    f:close()
    error(size, 0)
  end
  return f, size
end

--- Runs body(f, size) on the opened file and closes it whatever happens.
function M.with_file(fn, path, body)
  local f, size = open_read(fn, path)
  local res = table.pack(pcall(body, f, size))
  f:close()
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

--- Reads exactly n bytes at offset, or fails with "truncated <what>".
function M.read_at(f, offset, n, fn, path, what)
  f:seek("set", offset)
  local s = n > 0 and f:read(n) or ""
  if not s or #s ~= n then
    fail("%s: %s: truncated %s (wanted %d bytes at offset %d, got %d)", fn, path, what, n, offset,
      s and #s or 0)
  end
  return s
end

--- The smallest and one-past-largest element offsets a tensor touches; lo == hi when empty.
function M.extent(t)
  local lo = t:storage_offset()
  local hi = lo
  local sizes, strides = t:shape(), t:stride()
  for d = 1, #sizes do
    if sizes[d] == 0 then return lo, lo end
    local span = (sizes[d] - 1) * strides[d]
    if span < 0 then lo = lo + span else hi = hi + span end
  end
  return lo, hi + 1
end

return M
