-- fp8_spec.lua — float8_e4m3fn and float8_e5m2: every one of the 256 codes of each decoded and
-- re-encoded against a reference computed here from the formats' definitions (and against
-- PyTorch when it has the dtypes), rounding of values between codes (ties to even), saturation,
-- arithmetic and promotion, and dle.fp8.quantize / dle.fp8.scaled_matmul with their errors.
local dle = require("dle")
local H = require("helpers")

-- The formats by definition: exponent bits, mantissa bits, bias, whether all-ones exponent is
-- inf/NaN (e5m2, IEEE-like) or only S.1111.111 is NaN (e4m3fn).
local FORMATS = {
  float8_e4m3fn = {E = 4, M = 3, bias = 7, ieee = false, max = 448},
  float8_e5m2 = {E = 5, M = 2, bias = 15, ieee = true, max = 57344},
}

-- The value of code c (0..255) in format f.
local function decode(f, c)
  local s = (c & 0x80) ~= 0 and -1 or 1
  local e = (c >> f.M) & ((1 << f.E) - 1)
  local m = c & ((1 << f.M) - 1)
  local emax = (1 << f.E) - 1
  if f.ieee and e == emax then return m == 0 and s * math.huge or 0 / 0 end
  if not f.ieee and e == emax and m == (1 << f.M) - 1 then return 0 / 0 end
  if e == 0 then return s * (m / (1 << f.M) * 2.0 ^ (1 - f.bias)) end -- -1 * 0.0 is -0.0
  return s * ((1 + m / (1 << f.M)) * 2.0 ^ (e - f.bias))
end

-- A tensor of the given fp8 dtype holding the raw codes (a list of bytes), through a memory map.
local function from_codes(dtype, codes)
  local p = os.tmpname()
  local f = assert(io.open(p, "wb"))
  for _, c in ipairs(codes) do f:write(string.char(c)) end
  f:close()
  local t = dle.data.memmap(p, dtype, {#codes}):clone()
  os.remove(p)
  return t
end

-- The raw codes of a 1-D fp8 tensor, read back from a safetensors file (F8_E4M3 / F8_E5M2).
local function codes_of(t)
  local p = os.tmpname()
  dle.save_safetensors(p, {x = t})
  local f = assert(io.open(p, "rb"))
  local all = f:read("a")
  f:close()
  os.remove(p)
  local hl = string.unpack("<I8", all)
  local data = all:sub(9 + hl)
  local r = {}
  for i = 1, #data do r[i] = data:byte(i) end
  return r
end

local function same_value(a, b)
  if a ~= a then return b ~= b end
  return a == b and (a ~= 0 or 1 / a == 1 / b) -- -0 and +0 apart
end

local ALL_CODES = {}
for c = 0, 255 do ALL_CODES[c + 1] = c end

for dtype, f in pairs(FORMATS) do
  describe(dtype .. " codes", function()
    it("decodes each of the 256 codes to the value the format defines", function()
      local v = from_codes(dtype, ALL_CODES):double():totable()
      for c = 0, 255 do
        assert.is_true(same_value(v[c + 1], decode(f, c)),
          string.format("code 0x%02x: dle %s, reference %s", c, tostring(v[c + 1]), tostring(decode(f, c))))
      end
    end)

    it("re-encodes each decoded code to the same code (NaNs to a NaN, infinities saturate)", function()
      local back = codes_of(from_codes(dtype, ALL_CODES):float():to(dtype))
      for c = 0, 255 do
        local want = decode(f, c)
        local got = decode(f, back[c + 1])
        if want ~= want then
          assert.is_true(got ~= got, string.format("code 0x%02x (NaN) re-encoded to 0x%02x", c, back[c + 1]))
        elseif want == math.huge or want == -math.huge then
          assert.are.equal(want > 0 and f.max or -f.max, got, string.format("code 0x%02x (inf)", c))
        else
          assert.are.equal(c, back[c + 1], string.format("code 0x%02x re-encoded to 0x%02x", c, back[c + 1]))
        end
      end
    end)

    it("rounds values between neighbouring codes to the nearest, ties to the even code", function()
      local xs, want = {}, {}
      for c = 0, 0x7e do
        local lo, hi = decode(f, c), decode(f, c + 1)
        if hi == hi and hi < math.huge then
          local mid, gap = (lo + hi) / 2, (hi - lo) / 64
          local even = (c % 2 == 0) and c or c + 1
          for _, case in ipairs({{mid, even}, {mid - gap, c}, {mid + gap, c + 1}}) do
            xs[#xs + 1], want[#want + 1] = case[1], case[2]
            xs[#xs + 1], want[#want + 1] = -case[1], case[2] | 0x80
          end
        end
      end
      local got = codes_of(dle.tensor(xs, {dtype = "float32"}):to(dtype))
      for i = 1, #xs do
        assert.are.equal(want[i], got[i],
          string.format("%.9g -> 0x%02x, expected 0x%02x", xs[i], got[i], want[i]))
      end
    end)

    it("saturates beyond the largest finite value, infinities included; NaN stays NaN", function()
      local t = dle.tensor({f.max * 1.03, f.max * 4, 1e30, math.huge, -math.huge, -1e30, 0 / 0},
        {dtype = "float32"}):to(dtype):double():totable()
      assert.are.same({f.max, f.max, f.max, f.max, -f.max, -f.max}, {table.unpack(t, 1, 6)})
      assert.is_true(t[7] ~= t[7])
      local d = dle.tensor({f.max * 1.03, -1e300}, {dtype = "float64"}):to(dtype):double():totable()
      assert.are.same({f.max, -f.max}, d)
    end)

    it("matches PyTorch's conversion on every code when torch has the dtype", function()
      local probe = H.torch_available() and H.run_python({"import torch",
        "print(hasattr(torch, '" .. dtype .. "'))"})[1]
      if probe ~= "True" then
        pending("python3 with torch having torch." .. dtype .. " is not available")
        return
      end
      local out = H.run_python({"import torch",
        "t = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch." .. dtype .. ")",
        "print(' '.join(repr(float(z)) for z in t.double().tolist()))"})
      local v = from_codes(dtype, ALL_CODES):double():totable()
      local i = 0
      for z in out[1]:gmatch("%S+") do
        i = i + 1
        assert.is_true(same_value(v[i], tonumber(z)), string.format("code 0x%02x", i - 1))
      end
      assert.are.equal(256, i)
    end)
  end)
end

describe("fp8 arithmetic and promotion", function()
  local function e4(v) return dle.tensor(v, {dtype = "float8_e4m3fn"}) end
  local function e5(v) return dle.tensor(v, {dtype = "float8_e5m2"}) end

  it("computes in float and stores back in the fp8 dtype", function()
    local r = e4({1, 2, 300}) + e4({0.125, 0.25, 300})
    assert.are.equal("float8_e4m3fn", r:dtype())
    assert.are.same({1.125, 2.25, 448}, r:double():totable())
    local m = e5({3}) * e5({5})
    assert.are.equal("float8_e5m2", m:dtype())
    assert.are.equal(16, m:item()) -- 15 rounds to 16 with 2 mantissa bits
    assert.are.same({2}, e4({4}):sqrt():double():totable())
  end)

  it("promotes fp8 with any other float to the other float, and the two fp8 kinds to float32", function()
    assert.are.equal("float16", (e4({1}) + dle.tensor({1}, {dtype = "float16"})):dtype())
    assert.are.equal("bfloat16", (e5({1}) * dle.tensor({1}, {dtype = "bfloat16"})):dtype())
    assert.are.equal("float64", (e4({1}) + dle.tensor({1}, {dtype = "float64"})):dtype())
    assert.are.equal("float32", (e4({1}) + e5({1})):dtype())
    assert.are.equal("float8_e5m2", (e5({1}) + dle.tensor({1}, {dtype = "int64"})):dtype())
    assert.are.equal("float8_e4m3fn", (e4({1}) + 1):dtype())
  end)

  it("reduces in float: sum keeps the dtype, mean too", function()
    local t = e4({1, 2, 3, 4})
    assert.are.equal("float8_e4m3fn", t:sum():dtype())
    assert.are.equal(10, t:sum():item())
    assert.are.equal(2.5, t:mean():item())
  end)

  it("saves and loads through dle.save, safetensors and npy (as float32)", function()
    local t = e4({-448, 0.5, 3.5})
    local p = os.tmpname()
    dle.save(p, {t = t, u = e5({57344})})
    local back = dle.load(p)
    os.remove(p)
    assert.are.equal("float8_e4m3fn", back.t:dtype())
    assert.are.same({-448, 0.5, 3.5}, back.t:double():totable())
    assert.are.equal("float8_e5m2", back.u:dtype())
    dle.save_npy(p, t)
    local n = dle.load_npy(p)
    os.remove(p)
    assert.are.equal("float32", n:dtype())
    assert.are.same({-448, 0.5, 3.5}, n:double():totable())
  end)
end)

describe("dle.fp8.quantize", function()
  it("scales by amax / the format's largest value, so x ~= x_fp8 * scale", function()
    local x = H.seeded({8, 5}, 3, -3, 3)
    for dtype, f in pairs(FORMATS) do
      local q, s = dle.fp8.quantize(x, dtype)
      assert.are.equal(dtype, q:dtype())
      assert.are.equal("float32", s:dtype())
      assert.are.equal(0, s:dim())
      H.assert_close(s:item(), x:abs():max():item() / f.max, {rtol = 1e-6})
      assert.are.equal(f.max, q:double():abs():max():item())
      local err = H.max_diff(q:double() * s:item(), x) / x:abs():max():item()
      assert.is_true(err <= 2.0 ^ -f.M, "relative error " .. err)
    end
  end)

  it("gives scale 1 for an all-zero tensor and refuses non-finite values or a bad dtype", function()
    local q, s = dle.fp8.quantize(dle.zeros(3))
    assert.are.equal(1, s:item())
    assert.are.same({0, 0, 0}, q:double():totable())
    H.assert_error(function() return dle.fp8.quantize(dle.tensor({1, math.huge})) end,
      "dle.fp8.quantize", "infinite or NaN")
    H.assert_error(function() return dle.fp8.quantize(dle.zeros(2), "float16") end,
      "dle.fp8.quantize", "float8_e4m3fn")
    H.assert_error(function() return dle.fp8.quantize(dle.zeros(2, {dtype = "int32"})) end,
      "dle.fp8.quantize", "int32")
  end)
end)

describe("dle.fp8.scaled_matmul", function()
  local a = H.seeded({6, 4}, 11, -2, 2)
  local b = H.seeded({4, 3}, 12, -2, 2)
  local a8, sa = dle.fp8.quantize(a, "float8_e4m3fn")
  local b8, sb = dle.fp8.quantize(b, "float8_e5m2")

  it("equals (a * a_scale) @ (b * b_scale) computed in float64, in each out_dtype", function()
    local want = (a8:double() * sa:item()):matmul(b8:double() * sb:item())
    local y = dle.fp8.scaled_matmul(a8, b8, sa, sb)
    assert.are.equal("float32", y:dtype())
    assert.are.same({6, 3}, y:shape())
    assert.is_true(H.max_diff(y, want) < 1e-5)
    for dt, tol in pairs({float64 = 1e-5, float16 = 1e-2, bfloat16 = 5e-2}) do
      local z = dle.fp8.scaled_matmul(a8, b8, sa, sb, {out_dtype = dt})
      assert.are.equal(dt, z:dtype())
      assert.is_true(H.max_diff(z, want) < tol, dt)
    end
    -- and it approximates the float product it stands for
    assert.is_true(H.max_diff(y, a:matmul(b)) / a:matmul(b):abs():max():item() < 0.15)
  end)

  it("takes non-contiguous operands", function()
    local at = a8:t():contiguous():t()
    assert.is_false(at:is_contiguous())
    assert.are.same(dle.fp8.scaled_matmul(a8, b8, sa, sb):totable(),
      dle.fp8.scaled_matmul(at, b8, sa, sb):totable())
  end)

  it("errors name the function and the shapes or dtypes", function()
    local f = dle.fp8.scaled_matmul
    H.assert_error(function() return f(a, b8, sa, sb) end, "dle.fp8.scaled_matmul", "a must be float8",
      a:dtype() .. " {6,4}")
    H.assert_error(function() return f(a8:reshape(24), b8, sa, sb) end, "dle.fp8.scaled_matmul", "2-D", "{24}")
    H.assert_error(function() return f(a8, a8, sa, sb) end, "dle.fp8.scaled_matmul", "{6,4}", "{6,4}")
    H.assert_error(function() return f(a8, b8, sa:reshape(1), sb) end, "dle.fp8.scaled_matmul", "a_scale", "0-d", "{1}")
    H.assert_error(function() return f(a8, b8, sa, sb:double()) end, "dle.fp8.scaled_matmul", "b_scale", "float64")
    H.assert_error(function() return f(a8, b8, sa, sb, {out_dtype = "int32"}) end, "dle.fp8.scaled_matmul", "int32")
    H.assert_error(function() return f(a8, b8, sa, sb, {bogus = 1}) end, "dle.fp8.scaled_matmul",
      "unknown option 'bogus'")
    H.assert_error(function() return f(a8, b8, nil, sb) end, "dle.fp8.scaled_matmul", "a_scale")
    local sg = dle.tensor(1.0, {requires_grad = true})
    H.assert_error(function() return f(a8, b8, sg, sb) end, "dle.fp8.scaled_matmul", "no gradient")
  end)
end)
