--- Shared helpers for the busted specs: nested-table arrays (shape, map, broadcasting), pure-Lua
-- reference math, deterministic test values, approximate comparison with readable failures, and
-- makers of non-contiguous tensors holding given values (to run an op on every memory layout).
-- Specs load it with `local H = require("helpers")` (.busted puts tests/ on the path).
local dle = require("dle")

local H = {}

-- ---------------------------------------------------------------- nested tables as arrays

--- Shape of a nested table (a number or boolean is 0-dim: {}).
function H.shape(v)
  local s = {}
  while type(v) == "table" do
    s[#s + 1] = #v
    v = v[1]
  end
  return s
end

--- Number of elements of a shape.
function H.numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

--- Leaves of a nested table in row-major order.
function H.flat(v, acc)
  acc = acc or {}
  if type(v) == "table" then
    for i = 1, #v do H.flat(v[i], acc) end
  else
    acc[#acc + 1] = v
  end
  return acc
end

--- Nested table of `shape` whose element at 1-based multi-index idx is f(idx) (idx is reused:
-- copy it if you keep it). A 0-dim shape gives f({}) itself.
function H.build(shape, f)
  local idx = {}
  local function rec(d)
    if d > #shape then return f(idx) end
    local out = {}
    for i = 1, shape[d] do
      idx[d] = i
      out[i] = rec(d + 1)
    end
    idx[d] = nil
    return out
  end
  return rec(1)
end

--- Calls visit() for every assignment of 1..sizes[k] to into[k], k running over the list keys (a
-- nested loop, the first key outermost): the sums and reductions of the pure-Lua references.
function H.each_assignment(keys, sizes, into, visit)
  local function rec(n)
    if n > #keys then return visit() end
    for v = 1, sizes[keys[n]] do
      into[keys[n]] = v
      rec(n + 1)
    end
  end
  rec(1)
end

--- A list of records keyed by their field `field` (a later record wins a repeated key); each key
-- maps to its record, or to `value` when given (H.index_by(list, "name", true) is a set).
function H.index_by(list, field, value)
  local t = {}
  for _, r in ipairs(list) do
    if value == nil then t[r[field]] = r else t[r[field]] = value end
  end
  return t
end

--- Element of a nested table at a 1-based multi-index.
function H.get(v, idx)
  for _, i in ipairs(idx) do v = v[i] end
  return v
end

--- Nested table from a flat list and a shape.
function H.unflat(list, shape)
  local strides, s = {}, 1
  for d = #shape, 1, -1 do strides[d] = s; s = s * shape[d] end
  return H.build(shape, function(idx)
    local k = 1
    for d = 1, #shape do k = k + (idx[d] - 1) * strides[d] end
    return list[k]
  end)
end

--- f applied to every leaf.
function H.map(v, f)
  if type(v) ~= "table" then return f(v) end
  local out = {}
  for i = 1, #v do out[i] = H.map(v[i], f) end
  return out
end

--- Broadcast shape of two shapes (NumPy rules), or nil when they do not broadcast.
function H.broadcast_shape(a, b)
  local n = math.max(#a, #b)
  local out = {}
  for i = 0, n - 1 do
    local sa, sb = a[#a - i] or 1, b[#b - i] or 1
    if sa ~= sb and sa ~= 1 and sb ~= 1 then return nil end
    out[n - i] = sa == 1 and sb or sa
  end
  return out
end

-- Element of v (shape vs) at idx of a broadcast result of rank #idx.
local function bget(v, vs, idx)
  local off = #idx - #vs
  for d = 1, #vs do v = v[vs[d] == 1 and 1 or idx[off + d]] end
  return v
end

--- f(a_i, b_i, ...) over the broadcast of any number of nested tables or scalars.
function H.zipmap(f, ...)
  local args, shapes, shape = {...}, {}, {}
  for k, a in ipairs(args) do
    shapes[k] = H.shape(a)
    shape = assert(H.broadcast_shape(shape, shapes[k]), "zipmap: shapes do not broadcast")
  end
  return H.build(shape, function(idx)
    local vals = {}
    for k, a in ipairs(args) do vals[k] = bget(a, shapes[k], idx) end
    return f(table.unpack(vals, 1, #args))
  end)
end

--- Permutation of a nested table: result dim d is source dim perm[d] (1-based, like t:permute).
function H.permute(v, perm)
  local s = H.shape(v)
  local ns = {}
  for d = 1, #perm do ns[d] = s[perm[d]] end
  local src = {}
  return H.build(ns, function(idx)
    for d = 1, #perm do src[perm[d]] = idx[d] end
    return H.get(v, src)
  end)
end

--- Transpose of a 2-D nested table.
function H.transpose(v) return H.permute(v, {2, 1}) end

-- ---------------------------------------------------------------- deterministic values

--- Pseudo-random values (a fixed LCG, so every run sees the same numbers; dle.rand is not used
-- so that these helpers do not depend on the code under test). opts: lo, hi (default -3..3),
-- int = true for integers in [lo, hi], seed.
function H.values(shape, opts)
  opts = opts or {}
  local lo, hi = opts.lo or -3, opts.hi or 3
  local state = opts.seed or 12345
  local function nxt()
    state = (state * 1103515245 + 12345) % 2147483648
    return state / 2147483648
  end
  return H.build(shape, function()
    local u = nxt()
    if opts.int then return math.floor(lo + u * (hi - lo + 1)) end
    return lo + u * (hi - lo)
  end)
end

--- A tensor of H.values in [lo, hi] (default -1..1) of shape, float64 unless dtype is given.
function H.seeded(shape, seed, lo, hi, dtype)
  return dle.tensor(H.values(shape, {seed = seed, lo = lo or -1, hi = hi or 1}), {dtype = dtype or "float64"})
end

--- randn(...) -> a float64 tensor of those sizes drawn from gen: a spec's own dle.Generator (so
-- that it does not depend on the global generator's state), or the global one when nil.
function H.randn64(gen)
  return function(...) return dle.randn({...}, {dtype = "float64", generator = gen}) end
end

--- int64 and bool tensors of nested Lua tables.
function H.int64(tbl) return dle.tensor(tbl, {dtype = "int64"}) end
function H.bool(tbl) return dle.tensor(tbl, {dtype = "bool"}) end

--- The float32 value nearest to x (what a float32 tensor stores).
function H.f32(x)
  if x ~= x or x == math.huge or x == -math.huge then return x end
  if math.abs(x) >= 3.4028235677973366e38 then return x > 0 and math.huge or -math.huge end
  return (string.unpack("<f", string.pack("<f", x)))
end

-- ---------------------------------------------------------------- reference math

local SQRT_PI = math.sqrt(math.pi)

--- erf(x) to ~1e-15: Taylor series near 0, continued fraction for erfc in the tails.
function H.erf(x)
  if x ~= x then return x end
  local ax = math.abs(x)
  if ax < 2.5 then
    local sum, term, n = x, x, 0
    repeat
      n = n + 1
      term = -term * x * x / n
      local add = term / (2 * n + 1)
      sum = sum + add
    until math.abs(add) <= 1e-17 * math.abs(sum)
    return 2 / SQRT_PI * sum
  end
  -- erfc(ax) = exp(-ax^2)/sqrt(pi) / (ax + (1/2)/(ax + 1/(ax + (3/2)/(ax + ...))))
  local f = ax
  for k = 60, 1, -1 do f = ax + (k / 2) / f end
  local erfc = math.exp(-ax * ax) / SQRT_PI / f
  return x > 0 and 1 - erfc or erfc - 1
end

--- Round half to even (what dle.round and C's nearbyint do).
function H.round_even(x)
  if x ~= x or x == math.huge or x == -math.huge then return x end
  local f = math.floor(x)
  local d = x - f
  local r
  if d > 0.5 then r = f + 1
  elseif d < 0.5 then r = f
  else r = (f % 2 == 0) and f or f + 1 end
  if r == 0 and x < 0 then return -0.0 end
  return r + 0.0
end

local function sigmoid(x)
  if x >= 0 then return 1 / (1 + math.exp(-x)) end
  local e = math.exp(x)
  return e / (1 + e)
end

-- Kahan's tricks: the rounding error of exp(x) / 1 + x cancels in the ratio.
local function expm1(x)
  local u = math.exp(x)
  if u == 1 then return x end
  if u - 1 == -1 then return -1.0 end
  if u == math.huge then return u end
  return (u - 1) * x / math.log(u)
end

local function log1p(x)
  local u = 1 + x
  if u == 1 then return x end
  return math.log(u) * x / (u - 1)  -- corrects the rounding of 1 + x
end

--- Reference implementations of the elementwise ops, by dle name (numbers in, number out).
H.ref = {
  neg = function(x) return -x end,
  abs = math.abs,
  sign = function(x) return x > 0 and 1 or (x < 0 and -1 or 0) end,
  exp = math.exp,
  log = math.log,
  expm1 = expm1,
  log1p = log1p,
  sqrt = math.sqrt,
  rsqrt = function(x) return 1 / math.sqrt(x) end,
  reciprocal = function(x) return 1 / x end,
  sin = math.sin,
  cos = math.cos,
  tanh = function(x)
    if math.abs(x) > 20 then return x > 0 and 1.0 or -1.0 end
    local e = expm1(2 * x)
    return e / (e + 2)
  end,
  sigmoid = sigmoid,
  relu = function(x) return x > 0 and x or 0 end,
  gelu = function(x) return 0.5 * x * (1 + H.erf(x / math.sqrt(2))) end,
  silu = function(x) return x * sigmoid(x) end,
  floor = math.floor,
  ceil = math.ceil,
  round = H.round_even,
  add = function(a, b) return a + b end,
  sub = function(a, b) return a - b end,
  mul = function(a, b) return a * b end,
  div = function(a, b) return a / b end,
  pow = function(a, b) return a ^ b end,
  maximum = function(a, b) if a ~= a or b ~= b then return 0 / 0 end return math.max(a, b) end,
  minimum = function(a, b) if a ~= a or b ~= b then return 0 / 0 end return math.min(a, b) end,
  eq = function(a, b) return a == b end,
  ne = function(a, b) return a ~= b end,
  lt = function(a, b) return a < b end,
  le = function(a, b) return a <= b end,
  gt = function(a, b) return a > b end,
  ge = function(a, b) return a >= b end,
}

local LN2 = math.log(2)
local function sinh(x) return (expm1(x) - expm1(-x)) / 2 end
local function trunc(x) return x < 0 and math.ceil(x) or math.floor(x) end
local function erfinv(y) -- Newton on H.erf from a bracket-safe start
  if y <= -1 or y >= 1 then return y == 1 and math.huge or (y == -1 and -math.huge or 0 / 0) end
  local x = 0
  for _ = 1, 100 do
    local step = (H.erf(x) - y) / (2 / SQRT_PI * math.exp(-x * x))
    x = x - step
    if math.abs(step) <= 1e-16 * (1 + math.abs(x)) then break end
  end
  return x
end
local more = {
  tan = math.tan, asin = math.asin, acos = math.acos, atan = math.atan,
  sinh = sinh,
  cosh = function(x) return (math.exp(x) + math.exp(-x)) / 2 end,
  asinh = function(x)
    local a = math.abs(x)
    local r = log1p(a + a * a / (1 + math.sqrt(1 + a * a)))
    return x < 0 and -r or r
  end,
  acosh = function(x) return math.log(x + math.sqrt(x * x - 1)) end,
  atanh = function(x) return 0.5 * log1p(2 * x / (1 - x)) end,
  erf = H.erf,
  erfc = function(x) return 1 - H.erf(x) end,
  erfinv = erfinv,
  log2 = function(x) return math.log(x, 2) end,
  log10 = function(x) return math.log(x, 10) end,
  exp2 = function(x) return math.exp(x * LN2) end,
  trunc = trunc,
  frac = function(x) return x - trunc(x) end,
  atan2 = function(a, b) return math.atan(a, b) end,
  fmod = math.fmod,
  remainder = function(a, b) return a % b end,       -- Lua's float % has the sign of b
  floor_divide = function(a, b) return a // b end,
  fmax = function(a, b) if a ~= a then return b end if b ~= b then return a end return math.max(a, b) end,
  fmin = function(a, b) if a ~= a then return b end if b ~= b then return a end return math.min(a, b) end,
  hypot = function(a, b) return math.sqrt(a * a + b * b) end,
  logaddexp = function(a, b) local m = math.max(a, b) return m + log1p(math.exp(-math.abs(a - b))) end,
  copysign = function(a, b) a = math.abs(a) return (b < 0 or 1 / b < 0) and -a or a end,
}
for k, f in pairs(more) do H.ref[k] = f end

-- ---------------------------------------------------------------- comparison

--- Default tolerances per dtype (relative and absolute).
H.tol = {
  float64 = {rtol = 1e-10, atol = 1e-12},
  float32 = {rtol = 1e-5, atol = 1e-6},
  float16 = {rtol = 2e-3, atol = 1e-3},
  bfloat16 = {rtol = 1.6e-2, atol = 1e-2},
}

local function fmt_idx(path)
  return "[" .. table.concat(path, "][") .. "]"
end

local function close(a, b, rtol, atol)
  if type(a) ~= "number" or type(b) ~= "number" then return a == b end
  if a ~= a or b ~= b then return a ~= a and b ~= b end
  if a == b then return true end                      -- infinities, exact values
  return math.abs(a - b) <= atol + rtol * math.abs(b)
end

--- Compares nested tables or numbers: returns true, or false and a message naming the first
-- differing position. Numbers match within atol + rtol * |expected| (NaN matches NaN, an
-- infinity only itself); anything else (booleans) must be equal.
function H.approx(actual, expected, rtol, atol, path)
  rtol, atol, path = rtol or 1e-5, atol or 1e-6, path or {}
  if type(expected) == "table" then
    if type(actual) ~= "table" then
      return false, "at " .. fmt_idx(path) .. ": expected a table, got " .. tostring(actual)
    end
    if #actual ~= #expected then
      return false, string.format("at %s: expected %d entries, got %d", fmt_idx(path), #expected, #actual)
    end
    for i = 1, #expected do
      path[#path + 1] = i
      local ok, msg = H.approx(actual[i], expected[i], rtol, atol, path)
      path[#path] = nil
      if not ok then return false, msg end
    end
    return true
  end
  if not close(actual, expected, rtol, atol) then
    return false, string.format("at %s: expected %s, got %s", fmt_idx(path), tostring(expected), tostring(actual))
  end
  return true
end

--- Asserts that a tensor (or nested table / number) matches the expected values. opts: rtol, atol
-- (default: H.tol for the tensor's dtype, exact for integer and bool dtypes), dtype (the
-- expected dtype), shape (expected shape, default the shape of `expected`), msg (prefix).
function H.assert_close(actual, expected, opts)
  opts = opts or {}
  local prefix = opts.msg and (opts.msg .. ": ") or ""
  local rtol, atol = opts.rtol, opts.atol
  if dle.is_tensor(actual) then
    if opts.dtype and actual:dtype() ~= opts.dtype then
      error(prefix .. "expected dtype " .. opts.dtype .. ", got " .. actual:dtype(), 2)
    end
    local want_shape = opts.shape or H.shape(expected)
    local ok, msg = H.approx(actual:shape(), want_shape, 0, 0)
    if not ok then
      error(prefix .. "shape {" .. table.concat(actual:shape(), ",") .. "} differs from {" ..
            table.concat(want_shape, ",") .. "} " .. msg, 2)
    end
    local t = H.tol[actual:dtype()] or {rtol = 0, atol = 0}
    rtol, atol = rtol or t.rtol, atol or t.atol
    actual = actual:totable()
  end
  local ok, msg = H.approx(actual, expected, rtol or 1e-5, atol or 1e-6)
  if not ok then error(prefix .. msg, 2) end
  return true
end

--- Asserts that fn() raises an error whose message contains every given plain string (found
-- literally, not as patterns); returns the message.
function H.assert_error(fn, ...)
  local needles = {...}
  local ok, err = pcall(fn)
  if ok then error("expected an error, but the call succeeded", 2) end
  err = tostring(err)
  for _, s in ipairs(needles) do
    if not err:find(s, 1, true) then
      error(string.format("error message %q does not contain %q", err, s), 2)
    end
  end
  return err
end

-- ---------------------------------------------------------------- tensors in every layout

--- A tensor holding `values` (nested table, number or boolean) in the given layout:
--   "contiguous"  plain dle.tensor
--   "transposed"  dims stored in reverse order, viewed back with permute (non-contiguous, >= 2-D)
--   "strided"     every element followed by junk in memory (select of a trailing dim of 2)
--   "sliced"      a narrow of a padded tensor in every dim (nonzero storage offset)
--   "expanded"    only for values that repeat along dim 1: an expand of the first row (stride 0)
-- Junk elements hold 999 so a kernel that reads past the view shows up as a wrong value.
function H.make(values, dtype, layout)
  local opts = {dtype = dtype or "float32"}
  local shape = H.shape(values)
  local nd = #shape
  layout = layout or "contiguous"
  if layout == "contiguous" or (layout == "transposed" and nd < 2) then
    return dle.tensor(values, opts)
  elseif layout == "transposed" then
    local perm = {}
    for d = 1, nd do perm[d] = nd + 1 - d end
    return dle.tensor(H.permute(values, perm), opts):permute(perm)
  elseif layout == "strided" then
    local junk = type(H.flat(values)[1]) == "boolean" and true or 999
    return dle.tensor(H.map(values, function(x) return {x, junk} end), opts):select(nd + 1, 1)
  elseif layout == "sliced" then
    if nd == 0 then
      return dle.tensor({999, values, 999}, opts):select(1, 2)
    end
    local junk = type(H.flat(values)[1]) == "boolean" and true or 999
    local padded = {}
    for d = 1, nd do padded[d] = shape[d] + 3 end
    local src = {}
    local big = H.build(padded, function(idx)
      for d = 1, nd do
        local i = idx[d] - 1
        if i < 1 or i > shape[d] then return junk end
        src[d] = i
      end
      return H.get(values, src)
    end)
    local t = dle.tensor(big, opts)
    for d = 1, nd do t = t:narrow(d, 2, shape[d]) end
    return t
  elseif layout == "expanded" then
    assert(nd >= 1, "expanded layout needs at least one dim")
    return dle.tensor({values[1]}, opts):expand(shape)
  end
  error("make: unknown layout '" .. tostring(layout) .. "'")
end

--- Layout names every op should be tested on (see H.make).
H.layouts = {"contiguous", "transposed", "strided", "sliced"}

--- Calls f(layout_name, tensor) for each layout of `values`.
function H.each_layout(values, dtype, f)
  for _, layout in ipairs(H.layouts) do f(layout, H.make(values, dtype, layout)) end
end

--- Values that repeat along dim 1 (rows all equal to `row`): for the "expanded" layout.
function H.repeat_rows(row, n)
  local out = {}
  for i = 1, n do out[i] = row end
  return out
end

-- ---------------------------------------------------------------- the environment

--- Whether a file exists (and can be read).
function H.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

--- The path of a command on PATH, or nil.
function H.command_path(cmd)
  local p = io.popen("command -v " .. cmd .. " 2>/dev/null")
  local out = p and p:read("l")
  if p then p:close() end
  if out == "" then return nil end
  return out
end

--- s quoted for a POSIX shell: one word, whatever it holds.
function H.shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

--- Whether a command is on PATH.
function H.have_command(cmd) return H.command_path(cmd) ~= nil end

--- The nvcc the build uses, found as premake5.lua finds it: $NVCC when set (nil when that file is
-- not there), else /usr/local/cuda/bin/nvcc, else the one on PATH; nil when there is none.
function H.nvcc()
  local env = os.getenv("NVCC") or ""
  if env ~= "" then return H.exists(env) and env or nil end
  if H.exists("/usr/local/cuda/bin/nvcc") then return "/usr/local/cuda/bin/nvcc" end
  return H.command_path("nvcc")
end

--- An optional library is built exactly when what it needs (named by `needs`) was found (found: a
-- boolean): raises otherwise. Returns whether it was built.
function H.assert_built_when(found, library, needs)
  local built = H.exists(library)
  if built ~= found then
    local fmt = built and "%s exists, yet what it needs (%s) was not found"
      or "%s was not built although what it needs (%s) was found"
    error(string.format(fmt, library, needs), 2)
  end
  return built
end

-- ---------------------------------------------------------------- gradient checks

--- dle.gradcheck in reverse and (unless opts.forward == false) forward mode, failing with its
-- message and the largest error.
function H.gradcheck(f, inputs, opts)
  opts = opts or {}
  if opts.forward == nil then opts.forward = true end
  local ok, err, msg = dle.gradcheck(f, inputs, opts)
  if not ok then error(string.format("gradcheck failed (max abs error %g): %s", err, tostring(msg)), 2) end
end

--- f(inputs...) -> scalar; returns a function giving all of f's gradients with create_graph, so
-- a (reverse-mode) gradcheck of it compares second derivatives with finite differences of the
-- gradient. Each gradient is a fresh tensor (g * 1), never a view sharing an input's storage.
function H.gradients_of(f)
  return function(...)
    local ins = {...}
    return dle.enable_grad(function()
      local grads = dle.grad(f(table.unpack(ins)), ins, {create_graph = true, allow_unused = true})
      local out = {}
      for i = 1, #ins do out[i] = grads[i] and grads[i] * 1 or dle.zeros_like(ins[i]) end
      return table.unpack(out)
    end)
  end
end

-- ---------------------------------------------------------------- graphs

--- Asserts the counters of dle.compile_info(f) named in want ({traces = 1, replays = 3, ...}).
function H.assert_compile_info(f, want)
  local info, keys = dle.compile_info(f), {}
  for k in pairs(want) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    if info[k] ~= want[k] then
      error(string.format("compile_info(f).%s: expected %s, got %s", k, tostring(want[k]), tostring(info[k])), 2)
    end
  end
end

--- How many live nodes of graph g have op `op`.
function H.count_ops(g, op)
  local c = 0
  for _, n in ipairs(g:nodes()) do if n.op == op then c = c + 1 end end
  return c
end

--- The largest absolute difference of two tensors, in float64.
function H.max_diff(a, b) return (a:double() - b:double()):abs():max():item() end

-- ---------------------------------------------------------------- PyTorch (optional)

--- Can /usr/bin/python3 import torch? (Specs that compare with PyTorch skip when it cannot.)
function H.torch_available()
  local p = io.popen("/usr/bin/python3 -c 'import torch' 2>/dev/null && echo yes")
  local out = p and p:read("*a") or ""
  if p then p:close() end
  return out:match("yes") ~= nil
end

--- Puts the thread count back when the running test ends (busted's finally, passed in).
function H.keep_threads(finally)
  local threads = dle.get_num_threads()
  finally(function() dle.set_num_threads(threads) end)
end

--- Runs the tests of the enclosing describe block on one thread (busted's setup and teardown,
-- passed in), and puts the thread count back after them.
function H.one_thread(setup, teardown)
  local threads
  setup(function() threads = dle.get_num_threads(); dle.set_num_threads(1) end)
  teardown(function() dle.set_num_threads(threads) end)
end

--- The elements ({name, attrs}) and the text of <text> elements of an SVG document, by lua-expat
-- (a parse error fails the calling test).
function H.svg_elements(path)
  local lxp = require("lxp")
  local elements, texts, current = {}, {}, nil
  local p = lxp.new({
    StartElement = function(_, name, attrs)
      elements[#elements + 1] = {name = name, attrs = attrs}
      current = name
    end,
    CharacterData = function(_, s) if current == "text" then texts[#texts + 1] = s end end,
    EndElement = function() current = nil end,
  })
  local f = assert(io.open(path))
  assert(p:parse(f:read("a")))
  f:close()
  assert(p:parse())
  p:close()
  return elements, texts
end

--- Checks what an example leaves of a run: a JSONL log whose every line is a JSON object with a
-- step, `key` in at least `min_rows` of them, and an SVG of its curves with one polyline per
-- series, a legend naming `key`, and tick labels. Returns the log's rows.
function H.check_run_files(jsonl, svg, key, min_rows)
  local cjson = require("cjson")
  local rows, with_key = {}, 0
  for line in assert(io.open(jsonl)):lines() do
    local row = cjson.decode(line)
    assert(type(row) == "table" and type(row.step) == "number" and row.step % 1 == 0,
           jsonl .. ": a line without an integer step: " .. line)
    if row[key] ~= nil then with_key = with_key + 1 end
    rows[#rows + 1] = row
  end
  assert(with_key >= min_rows, string.format("%s: %d rows with %s, want %d or more", jsonl, with_key, key, min_rows))
  local elements, texts = H.svg_elements(svg)
  assert(elements[1].name == "svg", svg .. " is not an SVG document")
  local polylines, legend = 0, {}
  for _, e in ipairs(elements) do
    if e.name == "polyline" then polylines = polylines + 1 end
    if e.name == "text" and e.attrs.class == "legend" then legend[#legend + 1] = e end
  end
  assert(polylines >= 1 and polylines == #legend, string.format("%s: %d polylines, %d legend entries", svg,
                                                                 polylines, #legend))
  local all = "|" .. table.concat(texts, "|") .. "|"
  assert(all:find("|" .. key .. "|", 1, true), svg .. ": no legend entry " .. key .. " in " .. all)
  assert(all:find("|%-?[%d.]+|"), svg .. ": no tick labels in " .. all)
  return rows
end

--- Sets one of the engine's algorithm thresholds (dle.core._tuning: "winograd_min_tiles", ...) for the
-- tests of the enclosing describe block (busted's setup and teardown, passed in), so that small
-- inputs reach the path large ones take; restores it after them.
function H.tuning(name, value, setup, teardown)
  local old
  setup(function() old = dle.core._tuning(name, value) end)
  teardown(function() dle.core._tuning(name, old) end)
end

--- For the optional PyTorch comparisons: false when python3 can import torch; otherwise marks the
-- running test pending (busted's pending, passed in) and returns true.
--   if H.without_torch(pending) then return end
function H.without_torch(pending)
  if H.torch_available() then return false end
  pending("python3 with torch is not available")
  return true
end

--- Runs Python lines after "import torch", a p(t) printing tensor t's elements (float repr,
-- whitespace-separated) on one line, and NAME = torch.tensor(...) for each NAME = dle tensor of
-- tensors (exact float64 copies); returns the output lines (read them with H.torch_line).
function H.run_torch(tensors, lines)
  local all = {"import torch", "def p(t): print(' '.join(repr(float(z)) for z in t.reshape(-1).tolist()))"}
  local names = {}
  for name in pairs(tensors) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do all[#all + 1] = name .. " = " .. H.torch_literal(tensors[name]) end
  for _, l in ipairs(lines) do all[#all + 1] = l end
  return H.run_python(all)
end

--- The numbers of one line of PyTorch output, as a list.
function H.torch_line(line)
  local r = {}
  for z in line:gmatch("%S+") do r[#r + 1] = tonumber(z) end
  return r
end

--- Asserts that line, numbers PyTorch printed (whitespace-separated), holds as many numbers as
-- the list values and each within tol of its value; what names the values in the messages.
function H.assert_torch_numbers(values, line, tol, what)
  local i = 0
  for z in line:gmatch("%S+") do
    i = i + 1
    -- not (d < tol): a NaN on either side fails
    if not (math.abs((values[i] or math.huge) - tonumber(z)) < tol) then -- luacheck: ignore 581
      error(what .. " " .. i .. ": " .. tostring(values[i]) .. " vs torch " .. z, 2)
    end
  end
  if i ~= #values then error(#values .. " " .. what .. " values, torch printed " .. i, 2) end
end

--- A Python expression building float64 tensor t exactly (17 significant digits).
function H.torch_literal(t)
  local flat = {}
  for i, val in ipairs(t:reshape(-1):totable()) do flat[i] = string.format("%.17g", val) end
  return "torch.tensor([" .. table.concat(flat, ",") .. "], dtype=torch.float64).reshape(" ..
    table.concat(t:shape(), ",") .. ")"
end

--- Runs the Python lines with /usr/bin/python3; returns its output lines.
function H.run_python(lines)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(table.concat(lines, "\n"))
  f:close()
  local p = io.popen("/usr/bin/python3 " .. path)
  local out = {}
  for l in p:lines() do out[#out + 1] = l end
  p:close()
  os.remove(path)
  return out
end

--- A complex128 tensor of shape whose real and imaginary parts are H.seeded (seeds seed and
-- seed + 7) in [lo, hi] (default -1..1).
function H.seeded_complex(shape, seed, lo, hi)
  return dle.complex(H.seeded(shape, seed, lo, hi), H.seeded(shape, seed + 7, lo, hi))
end

--- Compares dle's reverse-mode gradients with PyTorch's (one python3 run for all cases). Each
-- case: {name, ins = list of float64 / complex128 tensors, f = dle function of them, py = the
-- same in PyTorch of a, b, c (the inputs)}. A seeded grad_output W of the result's shape and
-- dtype goes to both dle.grad and torch.autograd.grad; complex gradients are compared as
-- view_as_real, within tol per number. The inputs' parts go to Python as exact float64.
function H.assert_torch_grads(cases, tol)
  local tensors, lines, expected = {}, {}, {}
  -- the Python expression of t, sent as tensors[name] (0-dim ones as 1 element, reshaped back)
  local function real_part(name, t)
    if t:dim() > 0 then tensors[name] = t:contiguous() return name end
    tensors[name] = t:reshape(1)
    return name .. ".reshape(())"
  end
  local function send(name, t)
    if not t:is_complex() then return real_part(name, t) end
    return string.format("torch.complex(%s, %s)", real_part(name .. "_re", t:real()),
      real_part(name .. "_im", t:imag()))
  end
  for ci, case in ipairs(cases) do
    local ins = {}
    for i, x in ipairs(case.ins) do ins[i] = x:detach():clone():requires_grad_(true) end
    local y = case.f(table.unpack(ins))
    local W = y:is_complex() and H.seeded_complex(y:shape(), 100 + ci) or H.seeded(y:shape(), 100 + ci)
    local grads = dle.grad(y, ins, {grad_outputs = W, allow_unused = true})
    local names, index = {}, {}
    for i, x in ipairs(ins) do
      local letter = ({"a", "b", "c"})[i]
      names[i], index[letter] = string.format("c%d_%s", ci, letter), i
      lines[#lines + 1] = string.format("%s = %s.requires_grad_()", names[i], send(names[i], x:detach()))
      expected[#expected + 1] = {case.name, grads[i] or dle.zeros_like(x)}
    end
    local expr = case.py:gsub("%f[%w]([abc])%f[^%w]", function(v) return names[index[v]] or v end)
    lines[#lines + 1] = string.format("gs = torch.autograd.grad(%s, [%s], %s, allow_unused=True)", expr,
      table.concat(names, ", "), send("w" .. ci, W))
    lines[#lines + 1] = "for g in gs: p(torch.view_as_real(g.resolve_conj()) if g.is_complex() else g)"
  end
  local out = H.run_torch(tensors, lines)
  assert(#out == #expected, string.format("PyTorch printed %d lines for %d input gradients: %s", #out,
    #expected, table.concat(out, "\n")))
  for k, e in ipairs(expected) do
    local g = e[2]
    local flat = (g:is_complex() and dle.view_as_real(g) or g):contiguous():view(-1):totable()
    H.assert_torch_numbers(flat, out[k], tol, e[1] .. ": input gradient element")
  end
end

--- The option sets the class-target losses (cross_entropy, nll_loss) are gradchecked with: 1-based
-- int64 targets for 5 rows of 4 classes, with and without ignored rows (-1), each reduction and
-- label smoothing. @return list of {name, t = targets, o = options}
function H.class_target_variants()
  local targets = dle.tensor({2, 4, 1, 3, 4}, {dtype = "int64"})
  local with_ignored = dle.tensor({2, -1, 1, 3, -1}, {dtype = "int64"})
  return {
    {name = "mean", t = targets, o = {}},
    {name = "sum", t = targets, o = {reduction = "sum"}},
    {name = "none", t = targets, o = {reduction = "none"}},
    {name = "mean, ignore_index and label smoothing 0.2", t = with_ignored,
     o = {ignore_index = -1, label_smoothing = 0.2}},
    {name = "none, ignore_index", t = with_ignored, o = {reduction = "none", ignore_index = -1}},
    {name = "sum, label smoothing 1", t = targets, o = {reduction = "sum", label_smoothing = 1}},
  }
end


-- ---------------------------------------------------------------- files

--- Writes bytes to path (replacing it).
function H.write_file(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

--- The bytes of path, or nil when it cannot be opened.
function H.read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

--- A new empty directory under /tmp (the caller removes it).
function H.tmpdir()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'"))
  return dir
end

--- Compares cases with PyTorch in float64, values and gradients, in one python run. Each case is
-- {name, dle function of the inputs, PyTorch expression of a, b, c, d (its inputs, in order), inputs};
-- the gradient is that of sum(y * w) for w = arange(numel) / 7, taken with respect to every input.
-- tol is one tolerance or {value, gradient} (default 1e-10). Returns false (after pending) when
-- torch is missing.
function H.compare_with_torch(cases, tol, pending)
  if H.without_torch(pending) then return false end
  local value_tol = type(tol) == "table" and tol[1] or tol or 1e-10
  local grad_tol = type(tol) == "table" and tol[2] or tol or 1e-10
  local tensors, names = {}, {"a", "b", "c", "d"}
  local lines = {"import warnings", "warnings.filterwarnings('ignore')"}
  for i, c in ipairs(cases) do
    local py, list = c[3], {}
    for k, t in ipairs(c[4]) do
      tensors[names[k] .. i] = t
      py = py:gsub("%f[%w]" .. names[k] .. "%f[%W]", names[k] .. i)
      list[k] = names[k] .. i
    end
    lines[#lines + 1] = string.format("xs%d = [%s]", i, table.concat(list, ", "))
    lines[#lines + 1] = "for t in xs" .. i .. ": t.requires_grad_()"
    lines[#lines + 1] = "y = " .. py
    lines[#lines + 1] = "p(y)"
    lines[#lines + 1] = "w = torch.arange(y.numel(), dtype=torch.float64).reshape(y.shape) / 7"
    lines[#lines + 1] = "g = torch.autograd.grad((y * w).sum(), xs" .. i .. ")"
    lines[#lines + 1] = "p(torch.cat([t.reshape(-1) for t in g]))"
  end
  local out = H.run_torch(tensors, lines)
  assert(#out == 2 * #cases, "PyTorch printed: " .. table.concat(out, "\n"))
  for i, c in ipairs(cases) do
    local xs = {}
    for k, t in ipairs(c[4]) do xs[k] = t:clone():requires_grad_() end
    local y = c[2](table.unpack(xs))
    H.assert_torch_numbers(y:reshape(-1):totable(), out[2 * i - 1], value_tol, c[1] .. ": value")
    local w = dle.arange(0, y:numel(), {dtype = "float64"}):reshape(y:shape()) / 7
    local g = dle.grad((y * w):sum(), xs)
    local flat = {}
    for _, t in ipairs(g) do for _, v in ipairs(t:reshape(-1):totable()) do flat[#flat + 1] = v end end
    H.assert_torch_numbers(flat, out[2 * i], grad_tol, c[1] .. ": gradient")
  end
  return true
end

--- Inside a describe block: one `it` comparing cases with PyTorch (H.compare_with_torch with tol),
-- then per case an `it` running H.gradcheck (reverse and forward mode) on its function at
-- inputs(c) (default: its inputs c[4]). busted's it and pending are passed in: a required module
-- does not see them.
function H.torch_and_gradcheck(it, pending, cases, tol, inputs)
  it("match PyTorch in float64, values and gradients", function()
    H.compare_with_torch(cases, tol, pending)
  end)
  for _, c in ipairs(cases) do
    it(c[1] .. ": gradcheck in reverse and forward mode", function()
      H.gradcheck(c[2], inputs and inputs(c) or c[4])
    end)
  end
end

return H
