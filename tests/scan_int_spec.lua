-- scan_int_spec.lua — cumsum, cumprod, cummax and cummin on every integer dtype, exact: values
-- spread over each dtype's whole range (so sums and products wrap) against a Lua integer reference
-- along every dim of an odd-sized input in every layout, plus a long uint64 line through the
-- two-pass parallel cumsum at 1 and 2 threads. Lua integers wrap modulo 2^64, which is int64's
-- wrapping and uint64's modular arithmetic (NumPy's for unsigned) alike; uint64 values are handled
-- as the int64 of the same bits (dle.tensor and t:to("int64") wrap) and compared unsigned.
local dle = require("dle")
local H = require("helpers")

-- dtype -> {lo, hi} of its values (uint64's upper half as negative int64 bit patterns)
local RANGES = {
  int8 = {-128, 127}, int16 = {-32768, 32767}, int32 = {-2147483648, 2147483647},
  int64 = {math.mininteger, math.maxinteger}, uint8 = {0, 255}, uint16 = {0, 65535},
  uint32 = {0, 4294967295}, uint64 = {math.mininteger, math.maxinteger},
}
local DTYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}

-- Deterministic integers in [lo, hi] (a 64-bit LCG; its high bits scaled into the range), with
-- both ends of the range among them.
local function ints(n, lo, hi, seed)
  local s, out = seed, {}
  for i = 1, n do
    s = s * 6364136223846793005 + 1442695040888963407
    local r = s >> 11 -- 53 random bits, non-negative
    if hi - lo < 0 or hi - lo >= (1 << 53) then -- the whole 64-bit range
      out[i] = s
    else
      out[i] = lo + r % (hi - lo + 1)
    end
  end
  out[1], out[n // 2] = lo, hi
  return out
end

-- x "above" a for cummax (ties to the later element, as PyTorch); uint64 compares unsigned
local function above(dt, x, a)
  if dt == "uint64" then return not math.ult(x, a) end
  return x >= a
end

-- The scan of nested table v along dim d: {values, 1-based indices} (indices for extremes only).
local function reference(v, d, op, dt)
  local inds = {}
  local vals = H.build(H.shape(v), function(idx)
    local acc, at, best = nil, {}, nil
    for i = 1, #idx do at[i] = idx[i] end
    for k = 1, idx[d] do
      at[d] = k
      local x = H.get(v, at)
      if op == "cumsum" then acc = (acc or 0) + x
      elseif op == "cumprod" then acc = (acc or 1) * x
      elseif acc == nil or (op == "cummax" and above(dt, x, acc)) or (op == "cummin" and above(dt, acc, x)) then
        acc, best = x, k
      end
    end
    inds[#inds + 1] = best
    return acc
  end)
  return vals, inds
end

-- A tensor's values as Lua integers of the same bits (uint64 through a wrapping cast to int64).
local function bits(t) return t:to("int64"):totable() end

describe("scan ops on integer dtypes: exact values with wrap-around", function()
  for _, dt in ipairs(DTYPES) do
    it(dt .. ": cumsum, cumprod, cummax and cummin match a wrapping Lua reference along every dim of a "
       .. "{3,5,7} input in every layout", function()
      local lo, hi = RANGES[dt][1], RANGES[dt][2]
      local v = H.unflat(ints(105, lo, hi, #dt * 7919), {3, 5, 7})
      for _, op in ipairs({"cumsum", "cumprod", "cummax", "cummin"}) do
        local want_dtype = (op == "cumsum" or op == "cumprod") and dt ~= "uint64" and "int64" or dt
        for d = 1, 3 do
          local ev, ei = reference(v, d, op, dt)
          H.each_layout(v, dt, function(layout, t)
            local msg = ("%s %s dim %d %s"):format(dt, op, d, layout)
            local y, i = t[op](t, d)
            assert.are.equal(want_dtype, y:dtype(), msg)
            assert.are.same(ev, bits(y), msg)
            if i then assert.are.same(ei, i:reshape(-1):totable(), msg) end
          end)
        end
      end
    end)
  end
end)

describe("scan ops on integer dtypes: the dtype rules at the edges", function()
  local function u64(list) return dle.tensor(list, {dtype = "int64"}):to("uint64") end

  it("uint64 cumsum and cumprod stay uint64 and wrap modulo 2^64 (as NumPy)", function()
    local s = u64({-1, 1, 2}):cumsum(1) -- 2^64 - 1, 1, 2
    assert.are.equal("uint64", s:dtype())
    assert.are.same({-1, 0, 2}, bits(s))
    local p = u64({1 << 32, 1 << 32, 3}):cumprod(1)
    assert.are.equal("uint64", p:dtype())
    assert.are.same({1 << 32, 0, 0}, bits(p))
  end)

  it("narrower integers count in int64 (as PyTorch): uint32 and int8 sums pass their own range", function()
    local u32 = dle.tensor({4294967295, 4294967295}, {dtype = "uint32"})
    assert.are.same({4294967295, 8589934590}, u32:cumsum(1):totable())
    assert.are.same({-128, -256, -384}, dle.full({3}, -128, {dtype = "int8"}):cumsum(1):totable())
    assert.are.same({math.maxinteger, math.mininteger},
                    dle.tensor({math.maxinteger, 1}, {dtype = "int64"}):cumsum(1):totable())
  end)

  it("uint64 cummax and cummin compare unsigned: 2^63 and 2^64 - 1 are the largest values", function()
    local x = u64({1, math.mininteger, 5, -1, -1})
    local v, i = x:cummax(1)
    assert.are.equal("uint64", v:dtype())
    assert.are.same({1, math.mininteger, math.mininteger, -1, -1}, bits(v))
    assert.are.same({1, 2, 2, 4, 5}, i:totable())
    v, i = x:cummin(1)
    assert.are.same({1, 1, 1, 1, 1}, bits(v))
    assert.are.same({1, 1, 1, 1, 1}, i:totable())
  end)
end)

describe("scan ops on integer dtypes: a long uint64 line", function()
  it("cumsum of 300007 uint64 values (the two-pass parallel scan) matches at 1 and 2 threads", function()
    H.keep_threads(finally)
    local n = 300007
    local v = ints(n, math.mininteger, math.maxinteger, 42)
    local x = dle.tensor(v, {dtype = "int64"}):to("uint64")
    local acc = 0
    for k = 1, n do
      acc = acc + v[k]
      v[k] = acc
    end
    for _, threads in ipairs({1, 2}) do
      dle.set_num_threads(threads)
      local got, bad = bits(x:cumsum(1)), nil
      for k = 1, n do if got[k] ~= v[k] then bad = bad or k end end
      assert.is_nil(bad, bad and ("element %d at %d threads"):format(bad, threads))
    end
  end)
end)
