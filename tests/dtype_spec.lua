-- dtype_spec.lua — the dtype promotion rule of mixed operations and conversions between dtypes
-- (float/double/half/bfloat16/long/int/byte/bool/to), with the rounding and overflow behaviour of
-- the reduced-precision formats.
local dle = require("dle")
local H = require("helpers")

local ALL = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"}

local function of(dt, v) return dle.tensor(v or {1, 2}, {dtype = dt}) end

describe("dtype promotion", function()
  it("float beats int", function()
    for _, i in ipairs({"int32", "int64", "uint8", "bool"}) do
      for _, f in ipairs({"float32", "float64", "float16", "bfloat16"}) do
        assert.are.equal(f, (of(i) + of(f)):dtype(), i .. " + " .. f)
        assert.are.equal(f, (of(f) * of(i)):dtype(), f .. " * " .. i)
      end
    end
  end)

  it("the wider float wins", function()
    assert.are.equal("float64", (of("float32") + of("float64")):dtype())
    assert.are.equal("float64", (of("float16") - of("float64")):dtype())
    assert.are.equal("float32", (of("float16") * of("float32")):dtype())
    assert.are.equal("float32", (of("bfloat16") + of("float32")):dtype())
    assert.are.equal("float64", (of("bfloat16") + of("float64")):dtype())
  end)

  it("float16 with bfloat16 gives float32", function()
    local r = of("float16", {1.5, 2}) + of("bfloat16", {0.25, 3})
    assert.are.equal("float32", r:dtype())
    assert.are.same({1.75, 5}, r:totable())
    assert.are.equal("float32", (of("bfloat16") * of("float16")):dtype())
  end)

  it("wider integers win, and bool is the narrowest", function()
    assert.are.equal("int64", (of("int32") + of("int64")):dtype())
    assert.are.equal("int32", (of("uint8") + of("int32")):dtype())
    assert.are.equal("uint8", (of("uint8") + of("bool")):dtype())
    assert.are.equal("int64", (of("bool") + of("int64")):dtype())
  end)

  it("an int tensor plus a fractional number gives float32", function()
    local r = of("int64", {1, 2, 3}) + 0.5
    assert.are.equal("float32", r:dtype())
    assert.are.same({1.5, 2.5, 3.5}, r:totable())
    assert.are.equal("float32", (0.5 * of("int32")):dtype())
  end)

  it("an int tensor plus a whole number stays int", function()
    local r = of("int64", {1, 2, 3}) + 2
    assert.are.equal("int64", r:dtype())
    assert.are.same({3, 4, 5}, r:totable())
    assert.are.equal("int32", (of("int32") * 3):dtype())
    assert.are.equal("int64", (of("int64") + 2.0):dtype())
  end)

  it("a float tensor with a Lua number keeps its dtype", function()
    for _, f in ipairs({"float32", "float64", "float16", "bfloat16"}) do
      assert.are.equal(f, (of(f) + 1):dtype())
      assert.are.equal(f, (2.5 * of(f)):dtype())
      assert.are.equal(f, (of(f) / 3):dtype())
      assert.are.equal(f, (of(f) ^ 2):dtype())
      assert.are.equal(f, (of(f) - 0.1):dtype())
    end
  end)

  it("float32 + a Lua number is computed in float32", function()
    local x = dle.tensor({1})
    -- 1 + 1e-8 rounds back to 1 in float32
    assert.are.equal(1, (x + 1e-8):item())
    assert.are.equal(1 + 1e-8, (x:double() + 1e-8):item())
  end)

  it("bool arithmetic gives int64", function()
    local a, b = dle.tensor({true, false, true}), dle.tensor({true, true, false})
    local s = a + b
    assert.are.equal("int64", s:dtype())
    assert.are.same({2, 1, 1}, s:totable())
    assert.are.equal("int64", (a * b):dtype())
    assert.are.equal("int64", (a + 1):dtype())
    assert.are.same({2, 1, 2}, (a + 1):totable())
    assert.are.equal("int64", (-a):dtype())
    assert.are.equal("float32", (a + 0.5):dtype())
  end)

  it("division always gives a float", function()
    assert.are.equal("float32", (of("int64") / of("int64")):dtype())
    assert.are.equal("float32", (of("bool") / 2):dtype())
    assert.are.equal("float64", (of("int32") / of("float64")):dtype())
  end)

  it("comparisons give bool whatever the operands", function()
    for _, dt in ipairs(ALL) do
      assert.are.equal("bool", of(dt):lt(of("float64")):dtype(), dt)
      assert.are.equal("bool", of(dt):eq(1):dtype(), dt)
    end
  end)

  it("float-only math on integer tensors gives float32", function()
    for _, dt in ipairs({"int32", "int64", "uint8", "bool"}) do
      assert.are.equal("float32", of(dt):exp():dtype(), dt)
      assert.are.equal("float32", of(dt):sqrt():dtype(), dt)
    end
  end)

  it("the result values are computed in the promoted dtype", function()
    local i = dle.tensor({2 ^ 40 + 1}, {dtype = "int64"})
    local r = i + dle.tensor({0.5}, {dtype = "float64"})
    assert.are.equal(2 ^ 40 + 1.5, r[1])
    local big = dle.tensor({math.maxinteger - 1}, {dtype = "int64"})
    assert.are.same({math.maxinteger}, (big + 1):totable())
  end)

  it("Lua integers beyond 2^53 combine exactly with int64 tensors", function()
    local n = math.tointeger(2 ^ 53) + 1
    local t = dle.tensor({0, 1, -1}, {dtype = "int64"})
    assert.are.same({n, n + 1, n - 1}, (t + n):totable())
    assert.are.same({n, n + 1, n - 1}, (n + t):totable())
    assert.are.same({-n, 1 - n, -1 - n}, (t - n):totable())
    assert.are.same({false, false, false}, t:eq(n):totable())
    assert.are.same({true}, dle.tensor({n}, {dtype = "int64"}):eq(n):totable())
    assert.are.same({false}, dle.tensor({n - 1}, {dtype = "int64"}):eq(n):totable())
    assert.are.same({n - 1}, dle.tensor({n}, {dtype = "int64"}):sub(1):totable())
  end)

  it("an int tensor with inf or nan gives float32", function()
    local t = dle.tensor({1, 2}, {dtype = "int64"})
    assert.are.equal("float32", (t + math.huge):dtype())
    assert.are.same({math.huge, math.huge}, (t + math.huge):totable())
    local r = (t * (0 / 0)):totable()
    assert.is_true(r[1] ~= r[1])
    assert.are.equal("float32", (dle.tensor({true}) - math.huge):dtype())
  end)
end)

describe("conversions", function()
  local v = {{-2.75, -0.5, 0}, {0.5, 1.5, 300.25}}

  it("float, double, half, bfloat16, long, int, byte and bool give the named dtype", function()
    local t = dle.tensor(v)
    local cases = {float = "float32", double = "float64", half = "float16", bfloat16 = "bfloat16",
                   long = "int64", int = "int32", byte = "uint8", bool = "bool"}
    for method, dt in pairs(cases) do
      local r = t[method](t)
      assert.are.equal(dt, r:dtype(), method)
      assert.are.same({2, 3}, r:shape())
    end
  end)

  it("to() takes every dtype name and the aliases", function()
    local t = dle.tensor(v)
    for _, dt in ipairs(ALL) do assert.are.equal(dt, t:to(dt):dtype()) end
    assert.are.equal("float64", t:to("double"):dtype())
    assert.are.equal("int64", t:to("long"):dtype())
    assert.are.equal("float16", t:to("half"):dtype())
  end)

  it("float to integer truncates toward zero", function()
    local t = dle.tensor(v)
    assert.are.same({{-2, 0, 0}, {0, 1, 300}}, t:long():totable())
    assert.are.same({{-2, 0, 0}, {0, 1, 300}}, t:int():totable())
  end)

  it("float to uint8 saturates at 0 and 255", function()
    assert.are.same({{0, 0, 0}, {0, 1, 255}}, dle.tensor(v):byte():totable())
  end)

  it("to bool is nonzero, and bool to numbers is 0/1", function()
    assert.are.same({{true, true, false}, {true, true, true}}, dle.tensor(v):bool():totable())
    local b = dle.tensor({true, false})
    assert.are.same({1, 0}, b:float():totable())
    assert.are.same({1, 0}, b:long():totable())
    assert.are.equal("integer", math.type(b:long()[1]))
  end)

  it("NaN to an integer dtype is 0; infinities saturate", function()
    local t = dle.tensor({0 / 0, math.huge, -math.huge})
    assert.are.same({0, math.maxinteger, math.mininteger}, t:long():totable())
    assert.are.same({0, 2147483647, -2147483648}, t:int():totable())
    assert.are.same({0, 255, 0}, t:byte():totable())
    assert.are.same({true, true, true}, t:bool():totable())
  end)

  it("conversions read non-contiguous views", function()
    local t = H.make(v, "float64", "transposed")
    assert.are.same({{-2, 0, 0}, {0, 1, 300}}, t:long():totable())
    local s = H.make(v, "float32", "sliced")
    assert.are.same(v, s:double():totable())
  end)

  it("int64 to float64 and back is exact for values up to 2^53", function()
    local big = 2 ^ 53
    local t = dle.tensor({math.tointeger(big), -math.tointeger(big), 12345}, {dtype = "int64"})
    assert.are.same(t:totable(), t:double():long():totable())
  end)

  it("every pair of dtypes converts small whole numbers exactly", function()
    for _, from in ipairs(ALL) do
      for _, to in ipairs(ALL) do
        local vals = from == "bool" and {0, 1, 1} or {0, 1, 100}
        local r = dle.tensor(vals, {dtype = from}):to(to)
        assert.are.equal(to, r:dtype())
        local want = to == "bool" and {false, true, true} or (from == "bool" and {0, 1, 1} or {0, 1, 100})
        assert.are.same(want, r:totable(), from .. " -> " .. to)
      end
    end
  end)

  it("a conversion makes a copy that does not share storage", function()
    local t = dle.tensor({1, 2})
    local d = t:double()
    assert.is_false(dle.same_storage(t, d))
    d[1] = 5
    assert.are.equal(1, t[1])
  end)
end)

describe("reduced precision", function()
  it("bfloat16 keeps 1e-8 (float32's range) while float16 flushes it to 0", function()
    local x = dle.tensor({1e-8})
    local bf = x:bfloat16():float()[1]
    assert.is_true(math.abs(bf - 1e-8) < 1e-10, "bfloat16 gave " .. bf)
    assert.are.equal(0, x:half():float()[1])
  end)

  it("both round pi to 3.140625", function()
    local x = dle.tensor({math.pi}, {dtype = "float64"})
    assert.are.equal(3.140625, x:half():double()[1])
    assert.are.equal(3.140625, x:bfloat16():double()[1])
  end)

  it("float16 overflows to inf beyond 65504 (after rounding)", function()
    local x = dle.tensor({1e5, -1e5, 65504, 65519, 65520})
    assert.are.same({math.huge, -math.huge, 65504, 65504, math.huge}, x:half():float():totable())
  end)

  it("bfloat16 reaches float32's range", function()
    local r = dle.tensor({1e30}):bfloat16():float()[1]
    assert.is_true(math.abs(r - 1e30) / 1e30 < 1 / 128)
  end)

  it("both round to nearest even", function()
    -- 1 + 2^-11 is halfway between float16 neighbours 1 and 1 + 2^-10: ties go to 1 (even)
    local h = dle.tensor({1 + 2 ^ -11, 1 + 3 * 2 ^ -11}, {dtype = "float64"}):half():double():totable()
    assert.are.same({1, 1 + 2 ^ -9}, h)
    local b = dle.tensor({1 + 2 ^ -8, 1 + 3 * 2 ^ -8}, {dtype = "float64"}):bfloat16():double():totable()
    assert.are.same({1, 1 + 2 ^ -6}, b)
  end)

  it("NaN and infinities survive the round trip", function()
    for _, m in ipairs({"half", "bfloat16"}) do
      local r = dle.tensor({0 / 0, math.huge, -math.huge})[m](dle.tensor({0 / 0, math.huge,
                                                                          -math.huge})):float():totable()
      assert.is_true(r[1] ~= r[1], m)
      assert.are.equal(math.huge, r[2])
      assert.are.equal(-math.huge, r[3])
    end
  end)

  -- Every positive finite value of a format with `mbits` mantissa bits, exponent bias `bias` and
  -- `emax` the largest normal exponent field, in increasing order; index parity = mantissa parity.
  local function all_values(mbits, bias, emax)
    local out, scale = {}, 2 ^ mbits
    for m = 0, scale - 1 do out[#out + 1] = m / scale * 2 ^ (1 - bias) end
    for e = 1, emax do
      for m = 0, scale - 1 do out[#out + 1] = (1 + m / scale) * 2 ^ (e - bias) end
    end
    return out
  end

  local function check_format(method, mbits, bias, emax)
    local vals = all_values(mbits, bias, emax)
    local neg = {}
    for i, v in ipairs(vals) do neg[i] = -v end
    for _, list in ipairs({vals, neg}) do
      local back = dle.tensor(list, {dtype = "float64"})[method](dle.tensor(list, {dtype = "float64"})):double()
      local ok, msg = H.approx(back:totable(), list, 0, 0)
      assert.is_true(ok, method .. " round trip " .. tostring(msg))
    end
    -- midpoints between neighbours tie to the even mantissa (the even 0-based index)
    local mids, want = {}, {}
    for k = 1, #vals - 1 do
      mids[k] = (vals[k] + vals[k + 1]) / 2
      want[k] = (k - 1) % 2 == 0 and vals[k] or vals[k + 1]
    end
    local got = dle.tensor(mids, {dtype = "float64"})[method](dle.tensor(mids, {dtype = "float64"})):double()
    local ok, msg = H.approx(got:totable(), want, 0, 0)
    assert.is_true(ok, method .. " midpoints " .. tostring(msg))
  end

  it("float16 represents all its 63488 finite values exactly and ties midpoints to even", function()
    check_format("half", 10, 15, 30)
  end)

  it("bfloat16 represents all its finite values exactly and ties midpoints to even", function()
    check_format("bfloat16", 7, 127, 254)
  end)

  it("float16 keeps subnormals down to 2^-24", function()
    local r = dle.tensor({2 ^ -24, 3 * 2 ^ -24, 2 ^ -26}):half():float():totable()
    assert.are.same({2 ^ -24, 3 * 2 ^ -24, 0}, r)
  end)
end)
