--- The input maker of scripts/gpu-check's op cases: I = inputs.new(device, dtype, seed) makes random
-- tensors on `device` in `dtype` (I.dtype, I.device). Values are drawn on the CPU in float64 from a
-- generator seeded with `seed`, cast, then moved, so two input makers of the same seed and dtype give
-- the same values on any two devices (the comparison's premise).
local dle = require("dle")

local M = {}

function M.new(device, dtype, seed)
  local I = {device = device, dtype = dtype}
  local gen = dle.Generator(seed)
  local is_float = dle.zeros(1, {dtype = dtype}):is_floating_point()

  -- values drawn in float64 (CPU), cast to dtype (or to_dtype), moved to the device
  local function put(t, to_dtype) return t:to(to_dtype or dtype):to(device) end
  local function uniform(shape, lo, hi)
    return dle.rand(shape, {dtype = "float64", generator = gen}) * (hi - lo) + lo
  end
  local function ints(shape, lo, hi) -- integers lo..hi inclusive, as float64
    return (uniform(shape, lo, hi + 1)):floor():clamp(lo, hi)
  end

  --- random values of the dtype: normal floats, integers in -5..5 (0..9 for uint8), bools
  function I.x(shape)
    if dtype == "bool" then return put(uniform(shape, 0, 1):lt(0.5)) end
    if dtype == "uint8" then return put(ints(shape, 0, 9)) end
    if not is_float then return put(ints(shape, -5, 5)) end
    return put(dle.randn(shape, {dtype = "float64", generator = gen}))
  end
  --- positive values (0.25 to 2.25; integers 1..9)
  function I.pos(shape)
    if not is_float then return put(ints(shape, 1, 9)) end
    return put(uniform(shape, 0.25, 2.25))
  end
  --- values in (-0.9, 0.9) (integers: 0)
  function I.unit(shape) return put(uniform(shape, -0.9, 0.9)) end
  --- values in (1.1, 3)
  function I.above1(shape) return put(uniform(shape, 1.1, 3)) end
  --- divisors: away from 0 (integers 1..4 with random signs; bool true)
  function I.nonzero(shape)
    if dtype == "bool" then return put(dle.ones(shape, {dtype = "bool"})) end
    local sign = dtype == "uint8" and 1 or uniform(shape, 0, 1):lt(0.5):double() * 2 - 1
    return put(ints(shape, 1, 4) * sign)
  end
  --- exponents 0..3 (integer pow stays exact)
  function I.exponent(shape) return put(ints(shape, 0, 3)) end
  --- distinct values (no ties, so sort orders and indices agree across devices)
  function I.distinct(shape)
    local n = 1
    for _, s in ipairs(shape) do n = n * s end
    local perm = dle.randperm and dle.randperm(n, {generator = gen}) or dle.rand(n, {generator = gen}):argsort()
    local v = perm:double():view(shape)
    if dtype == "bool" then return put(v:lt(n / 2)) end
    if is_float then v = v / 4 - n / 8 end
    return put(v:clamp(0, dtype == "uint8" and 255 or math.huge))
  end
  --- small integers 0..3 (many ties: for mode and unique)
  function I.small_ints(shape) return put(ints(shape, 0, 3)) end
  --- a bool mask
  function I.mask(shape) return put(uniform(shape, 0, 1):lt(0.5), "bool") end
  --- int64 indices 1..hi (1-based)
  function I.idx(shape, hi) return put(ints(shape, 1, hi), "int64") end
  --- int64 indices 1..hi, distinct along dim 1 within each column (a scatter without collisions)
  function I.perm_idx(shape, hi)
    local cols = {}
    for j = 1, shape[2] do
      local p = dle.rand(hi, {generator = gen}):argsort():narrow(1, 1, shape[1])
      cols[j] = p:view(shape[1], 1)
    end
    return put(dle.cat(cols, 2), "int64")
  end
  --- random values of t's shape (weights of a backward pass)
  function I.like(t) return I.x(t:shape()) end
  --- t as a leaf that requires grad, on the device
  function I.leaf(t) return t:detach():requires_grad_(true) end
  --- a generator for random ops, the same seed for every device
  function I.gen() return dle.Generator(seed) end
  return I
end

return M
