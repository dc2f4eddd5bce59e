--- dle.fft: PyTorch's torch.fft on FFTW (the op `fft`, engine/ops/fft.c and kernels/cpu/fft.c).
-- Every transform takes PyTorch's arguments, n (or s) and dim positionally, and an options table
-- that may also carry them by name with norm: `dle.fft.rfft(x, 16, -1, {norm = "ortho"})`,
-- `dle.fft.fft2(x, {s = {8, 8}})`. dims are 1-based (negative from the end); n crops or
-- zero-pads the signal; norm is "backward" (the default: the inverse scales by 1/n), "ortho"
-- (both by 1/sqrt(n)) or "forward" (the forward scales by 1/n). Real inputs to fft/ifft are made
-- complex (integers: complex64); rfft of a complex input is an error. Every transform is
-- differentiable, reverse and forward mode (engine/ops/fft_grad.c; docs/complex_fft.md).
-- @module fft

local check = require("dle.check")
local dle = require("dle")
local core = dle.core

local M = {}
local fft = {}

local C2C, C2C_INVERSE, R2C, C2R = 0, 1, 2, 3
local NORMS = {backward = 0, ortho = 1, forward = 2}
-- hfft / ihfft are the other direction of irfft / rfft, so their norm is the mirror one
local DUAL = {backward = "forward", ortho = "ortho", forward = "backward"}
local KNOWN_1D = {"n", "dim", "norm"}
local KNOWN_ND = {"s", "dim", "norm"}

local function fail(fmt, ...) check.error(string.format(fmt, ...)) end

local function norm_of(fn, norm)
  norm = norm == nil and "backward" or norm
  if NORMS[norm] == nil then
    fail('%s: norm must be "backward", "ortho" or "forward", got %s', fn,
      type(norm) == "string" and '"' .. norm .. '"' or tostring(norm))
  end
  return norm
end

-- dim (1-based, negative from the end) -> 0-based, or an error naming fn
local function dim0(fn, x, d)
  local nd = x:dim()
  local i = math.tointeger(d)
  if not i or i == 0 or i > nd or i < -nd then
    fail("%s: dim %s out of range for an input of shape %s (1-based, or negative from the end)", fn,
      tostring(d), check.shape_str(x))
  end
  return i > 0 and i - 1 or nd + i
end

local function length(fn, v, what)
  if v == nil then return -1 end
  local i = math.tointeger(v)
  if not i or i < 1 then fail("%s: %s must be a positive integer, got %s", fn, what, tostring(v)) end
  return i
end

-- An options table (a list of lengths or dims is not one: it has element 1).
local function is_options(v) return type(v) == "table" and not dle.is_tensor(v) and v[1] == nil end

-- The positional arguments a (n or s) and b (dim), with the trailing options table, which may
-- come early and may carry them by name (PyTorch's keywords), each given once.
local function split_args(fn, known, a, b, opts)
  if opts == nil and b == nil and is_options(a) then a, opts = nil, a end
  if opts == nil and is_options(b) then b, opts = nil, b end
  opts = check.options(opts, fn, known)
  local first = known[1]
  if a ~= nil and opts[first] ~= nil then fail("%s: %s given twice", fn, first) end
  if b ~= nil and opts.dim ~= nil then fail("%s: dim given twice", fn) end
  if a == nil then a = opts[first] end
  if b == nil then b = opts.dim end
  return a, b, norm_of(fn, opts.norm)
end

local function call(fn, kind, x, dims, ns, norm)
  local d0 = {}
  for i, d in ipairs(dims) do
    d0[i] = dim0(fn, x, d)
    for j = 1, i - 1 do
      if d0[j] == d0[i] then fail("%s: dim %d appears twice", fn, dims[i]) end
    end
  end
  return core._fft(x, kind, d0, ns, NORMS[norm], fn)
end

-- The dims, lengths and norm of a 1-D transform's arguments.
local function one_dim_args(fn, x, n, dim, opts)
  check.tensor(x, fn, "input")
  local norm
  n, dim, norm = split_args(fn, KNOWN_1D, n, dim, opts)
  if x:dim() == 0 then fail("%s: expected an input with at least 1 dim, got a 0-dim tensor", fn) end
  return {dim == nil and -1 or dim}, {length(fn, n, "n")}, norm
end

local function one_dim(fn, kind)
  return function(x, n, dim, opts)
    local dims, ns, norm = one_dim_args(fn, x, n, dim, opts)
    return call(fn, kind, x, dims, ns, norm)
  end
end

-- The dims and lengths of an n-dim transform: PyTorch's rules for s and dim (s alone: the last
-- #s dims; neither: all dims, or `default` dims when given).
local function nd_args(fn, x, s, dim, default)
  if s ~= nil and type(s) ~= "table" then fail("%s: s must be a list of lengths, got %s", fn, check.typename(s)) end
  if dim ~= nil and type(dim) ~= "table" then dim = {dim} end
  if s ~= nil and dim ~= nil and #s ~= #dim then
    fail("%s: s and dim must have the same length, got %d and %d", fn, #s, #dim)
  end
  if dim == nil then
    if s ~= nil then
      dim = {}
      for i = 1, #s do dim[i] = i - #s - 1 end
    else
      dim = default or {}
      if not default then for i = 1, x:dim() do dim[i] = i end end
    end
  end
  if #dim == 0 then fail("%s: expected at least one dim to transform (input of shape %s)", fn, check.shape_str(x)) end
  local ns = {}
  for i = 1, #dim do ns[i] = length(fn, s and s[i], "s[" .. i .. "]") end
  return dim, ns
end

-- The tensor, dims, lengths and norm of an n-dim transform's call.
local function n_dim_args(fn, x, s, dim, opts, default)
  check.tensor(x, fn, "input")
  local norm
  s, dim, norm = split_args(fn, KNOWN_ND, s, dim, opts)
  local dims, ns = nd_args(fn, x, s, dim, default)
  return dims, ns, norm
end

local function n_dim(fn, kind, default)
  return function(x, s, dim, opts)
    local dims, ns, norm = n_dim_args(fn, x, s, dim, opts, default)
    return call(fn, kind, x, dims, ns, norm)
  end
end

--- fft(x, n, dim, opts): the 1-D discrete Fourier transform along dim (default -1).
fft.fft = one_dim("fft.fft", C2C)
--- ifft(x, n, dim, opts): its inverse.
fft.ifft = one_dim("fft.ifft", C2C_INVERSE)
--- rfft(x, n, dim, opts): the FFT of a real input, the n/2+1 non-negative frequencies.
fft.rfft = one_dim("fft.rfft", R2C)
--- irfft(x, n, dim, opts): the inverse of rfft, a real result of length n (default 2 * (size - 1)).
fft.irfft = one_dim("fft.irfft", C2R)

local LAST2 = {-2, -1}
--- fft2(x, s, dim, opts), ifft2, rfft2, irfft2: over dim (default the last two).
fft.fft2 = n_dim("fft.fft2", C2C, LAST2)
fft.ifft2 = n_dim("fft.ifft2", C2C_INVERSE, LAST2)
fft.rfft2 = n_dim("fft.rfft2", R2C, LAST2)
fft.irfft2 = n_dim("fft.irfft2", C2R, LAST2)
--- fftn(x, s, dim, opts), ifftn, rfftn, irfftn: over dim (default all, or the last #s).
fft.fftn = n_dim("fft.fftn", C2C)
fft.ifftn = n_dim("fft.ifftn", C2C_INVERSE)
fft.rfftn = n_dim("fft.rfftn", R2C)
fft.irfftn = n_dim("fft.irfftn", C2R)

--- hfft(x, n, dim, opts): the FFT of a Hermitian-symmetric signal given by its first half, real
-- (irfft of conj(x) with the mirrored norm).
function fft.hfft(x, n, dim, opts)
  local dims, ns, norm = one_dim_args("fft.hfft", x, n, dim, opts)
  return call("fft.hfft", C2R, dle.conj(x), dims, ns, DUAL[norm])
end

--- ihfft(x, n, dim, opts): the inverse of hfft for a real input: conj(rfft(x)) with the mirrored
-- norm.
function fft.ihfft(x, n, dim, opts)
  local dims, ns, norm = one_dim_args("fft.ihfft", x, n, dim, opts)
  return dle.conj(call("fft.ihfft", R2C, x, dims, ns, DUAL[norm]))
end

-- hfftn/ihfftn over the dims of an n-dim call: as hfft/ihfft, the last dim being the halved one.
local function hermitian_n_dim(fn, inverse, default)
  return function(x, s, dim, opts)
    local dims, ns, norm = n_dim_args(fn, x, s, dim, opts, default)
    if inverse then return dle.conj(call(fn, R2C, x, dims, ns, DUAL[norm])) end
    return call(fn, C2R, dle.conj(x), dims, ns, DUAL[norm])
  end
end

--- hfft2(x, s, dim, opts), ihfft2: hfft/ihfft over dim (default the last two; the last one is the
-- Hermitian-halved one).
fft.hfft2 = hermitian_n_dim("fft.hfft2", false, LAST2)
fft.ihfft2 = hermitian_n_dim("fft.ihfft2", true, LAST2)
--- hfftn(x, s, dim, opts), ihfftn: over dim (default all, or the last #s).
fft.hfftn = hermitian_n_dim("fft.hfftn", false)
fft.ihfftn = hermitian_n_dim("fft.ihfftn", true)

local FREQ_OPTS = {"dtype", "device", "requires_grad"}
local function freq_args(fn, n, d, opts)
  if type(d) == "table" and opts == nil then d, opts = nil, d end
  opts = check.options(opts, fn, FREQ_OPTS)
  n = check.integer_min(n, fn, "n", 1)
  d = d == nil and 1.0 or check.number(d, fn, "d")
  if d == 0 then fail("%s: d (the sample spacing) must not be 0", fn) end
  return n, d, {dtype = opts.dtype, device = opts.device, requires_grad = opts.requires_grad}
end

--- fftfreq(n, d, opts): the sample frequencies of an n-point FFT with spacing d (default 1):
-- 0, 1, ..., ceil(n/2)-1, -floor(n/2), ..., -1, all / (d n). opts: dtype, device, requires_grad.
function fft.fftfreq(n, d, opts)
  local o
  n, d, o = freq_args("fft.fftfreq", n, d, opts)
  local k = {}
  for i = 0, n - 1 do k[i + 1] = (i < (n + 1) // 2 and i or i - n) / (d * n) end
  return dle.tensor(k, o)
end

--- rfftfreq(n, d, opts): the frequencies of rfft: 0, 1, ..., n//2, all / (d n).
function fft.rfftfreq(n, d, opts)
  local o
  n, d, o = freq_args("fft.rfftfreq", n, d, opts)
  local k = {}
  for i = 0, n // 2 do k[i + 1] = i / (d * n) end
  return dle.tensor(k, o)
end

-- roll x by floor(size/2) (sign +1) or back (sign -1) along dim (a number or list; default all)
local function shift(fn, x, dim, sign)
  check.tensor(x, fn, "input")
  if dim == nil then
    dim = {}
    for i = 1, x:dim() do dim[i] = i end
  elseif type(dim) ~= "table" then
    dim = {dim}
  end
  if #dim == 0 then return x:clone() end
  local shifts, dims = {}, {}
  for i, d in ipairs(dim) do
    dims[i] = dim0(fn, x, d) + 1
    shifts[i] = sign * (x:size(dims[i]) // 2)
  end
  -- roll has no complex kernel: a complex x rolls as its (re, im) pairs, which keep their dims
  if x:is_complex() then
    return dle.view_as_complex(dle.roll(dle.view_as_real(x), shifts, dims):contiguous())
  end
  return dle.roll(x, shifts, dims)
end

--- fftshift(x, dim): the zero frequency moved to the middle (a roll by floor(size/2) along dim,
-- default all dims).
function fft.fftshift(x, dim) return shift("fft.fftshift", x, dim, 1) end
--- ifftshift(x, dim): the inverse of fftshift.
function fft.ifftshift(x, dim) return shift("fft.ifftshift", x, dim, -1) end

function M.install(d)
  d.fft = check.export(fft)
end

return M
