-- dtypes_int_spec.lua — the integer dtypes int8, int16, uint16, uint32, uint64: names, creation,
-- printing, conversions, promotion (PyTorch's for int8/int16, NumPy's for the unsigned types
-- PyTorch has no arithmetic for), wrap-around arithmetic, division, comparisons, reductions,
-- indexing, copies and the file formats; int8/int16 arithmetic against PyTorch when installed.
local dle = require("dle")
local H = require("helpers")

local NEW = {"int8", "int16", "uint16", "uint32", "uint64"}
local RANGE = {int8 = {-128, 127}, int16 = {-32768, 32767}, uint16 = {0, 65535},
               uint32 = {0, 4294967295}, uint64 = {0, nil}}
local SIZE = {int8 = 1, int16 = 2, uint16 = 2, uint32 = 4, uint64 = 8}

local function of(dt, v) return dle.tensor(v or {1, 2}, {dtype = dt}) end

-- 2^64 - 1 as a uint64 tensor (Lua integers stop at 2^63 - 1): int64 -1 wraps to it.
local function u64_max() return of("int64", {-1}):to("uint64") end

describe("integer dtypes: names and creation", function()
  it("each name and the alias short make tensors of that dtype and element size", function()
    for _, dt in ipairs(NEW) do
      local t = dle.zeros(2, 3, {dtype = dt})
      assert.are.equal(dt, t:dtype())
      assert.are.equal(SIZE[dt], t:element_size())
      assert.is_false(t:is_floating_point())
    end
    assert.are.equal("int16", dle.zeros(2, {dtype = "short"}):dtype())
  end)

  it("an unknown dtype name is an error listing every valid name", function()
    local ok, err = pcall(dle.zeros, 2, {dtype = "int4"})
    assert.is_false(ok)
    assert.matches("unknown dtype 'int4'", err, 1, true)
    for _, dt in ipairs({"float32", "bool", "int8", "int16", "uint16", "uint32", "uint64",
                         "float8_e4m3fn", "float8_e5m2"}) do
      assert.matches(dt, err, 1, true)
    end
  end)

  it("values at each end of the range survive creation, item and totable exactly", function()
    for _, dt in ipairs(NEW) do
      local lo, hi = RANGE[dt][1], RANGE[dt][2] or math.maxinteger
      local t = of(dt, {lo, hi, 7})
      assert.are.same({lo, hi, 7}, t:totable(), dt)
      assert.are.equal(hi, t[2], dt)
      assert.are.equal("integer", math.type(t[3]), dt)
      assert.are.equal(lo, t:min():item(), dt)
    end
  end)

  it("uint64 values above Lua's largest integer read back as floats of that value", function()
    local m = u64_max()
    assert.are.equal(2.0 ^ 64, m:item())
    assert.are.equal("float", math.type(m:item()))
  end)

  it("printing shows the dtype and the values", function()
    local s = tostring(of("int8", {-5, 100}))
    assert.matches("int8", s, 1, true)
    assert.matches("-5", s, 1, true)
    assert.matches("100", s, 1, true)
    assert.matches("uint32", tostring(of("uint32", {4000000000})), 1, true)
    assert.matches("4000000000", tostring(of("uint32", {4000000000})), 1, true)
  end)
end)

describe("integer dtypes: conversions", function()
  it("floats saturate into each integer range and NaN becomes 0", function()
    local f = of("float64", {-1e30, 1e30, 0 / 0, -3.7, 3.7})
    assert.are.same({-128, 127, 0, -3, 3}, f:to("int8"):totable())
    assert.are.same({-32768, 32767, 0, -3, 3}, f:to("int16"):totable())
    assert.are.same({0, 65535, 0, 0, 3}, f:to("uint16"):totable())
    assert.are.same({0, 4294967295, 0, 0, 3}, f:to("uint32"):totable())
    local u = f:to("uint64")
    assert.are.equal(2.0 ^ 64, u[2])
    assert.are.same({0, 0, 0, 3}, {u[1], u[3], u[4], u[5]})
  end)

  it("integers wrap into narrower integers as C casts (and PyTorch) do", function()
    local i = of("int64", {300, -129, 65536 + 5, -1})
    assert.are.same({44, 127, 5, -1}, i:to("int8"):totable())
    assert.are.same({300, -129, 5, -1}, i:to("int16"):totable())
    assert.are.same({300, 65407, 5, 65535}, i:to("uint16"):totable())
    assert.are.same({300, 4294967167, 65541, 4294967295}, i:to("uint32"):totable())
  end)

  it("every pair of dtypes converts both ways, values kept where both hold them", function()
    local all = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool",
                 "int8", "int16", "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2"}
    for _, a in ipairs(all) do
      for _, b in ipairs(all) do
        local v = (a == "bool" or b == "bool") and {0, 1, 1} or {0, 1, 3}
        local t = of(a, v):to(b)
        assert.are.equal(b, t:dtype())
        local want = b == "bool" and {false, true, true} or v
        assert.are.same(want, t:totable(), a .. " -> " .. b)
      end
    end
  end)
end)

describe("integer dtypes: promotion", function()
  -- {a, b, result}: PyTorch's rule where it has both dtypes, NumPy's for uint16/32/64
  local CASES = {
    {"int8", "int8", "int8"}, {"int8", "int16", "int16"}, {"int8", "int32", "int32"},
    {"int16", "int64", "int64"}, {"uint8", "int8", "int16"}, {"uint8", "int16", "int16"},
    {"uint16", "int8", "int32"}, {"uint16", "int16", "int32"}, {"uint16", "int32", "int32"},
    {"uint16", "uint8", "uint16"}, {"uint32", "int8", "int64"}, {"uint32", "int32", "int64"},
    {"uint32", "uint16", "uint32"}, {"uint32", "int64", "int64"}, {"uint64", "uint32", "uint64"},
    {"uint64", "int8", "float64"}, {"uint64", "int64", "float64"}, {"bool", "int8", "int8"},
    {"bool", "uint64", "uint64"}, {"int8", "float16", "float16"}, {"uint64", "float32", "float32"},
    {"int16", "bfloat16", "bfloat16"},
  }
  it("mixed integer operands compute in the dtype of the table, either order", function()
    for _, c in ipairs(CASES) do
      assert.are.equal(c[3], (of(c[1]) + of(c[2])):dtype(), c[1] .. " + " .. c[2])
      assert.are.equal(c[3], (of(c[2]) * of(c[1])):dtype(), c[2] .. " * " .. c[1])
    end
  end)

  it("a whole Lua number keeps the integer dtype, a fraction gives float32", function()
    for _, dt in ipairs(NEW) do
      assert.are.equal(dt, (of(dt) + 3):dtype(), dt)
      assert.are.equal("float32", (of(dt) + 0.5):dtype(), dt)
    end
  end)

  it("mixed uint8 + int8 values are computed in int16 (no wrap at 8 bits)", function()
    assert.are.same({101, 199}, (of("uint8", {100, 200}) + of("int8", {1, -1})):totable())
  end)

  it("uint64 with int64 computes in float64, as NumPy", function()
    local r = of("uint64", {3}) - of("int64", {5})
    assert.are.equal("float64", r:dtype())
    assert.are.equal(-2, r:item())
  end)
end)

describe("integer dtypes: arithmetic", function()
  it("+ - * wrap around in the storage width", function()
    assert.are.same({-56, 127}, (of("int8", {100, -128}) + of("int8", {100, -1})):totable())
    assert.are.same({-32768}, (of("int16", {32767}) + 1):totable())
    assert.are.same({0, 65534}, (of("uint16", {65535, 65535}) + of("uint16", {1, 65535})):totable())
    assert.are.same({1}, (of("uint16", {65535}) * of("uint16", {65535})):totable())
    assert.are.same({0}, (of("uint32", {4294967295}) + 1):totable())
    assert.are.same({4294967295}, (of("uint32", {0}) - 1):totable())
    assert.are.same({0}, (u64_max() + 1):totable())
    assert.are.same({-128}, (-of("int8", {-128})):totable())
  end)

  it("floor division and remainder round toward minus infinity on signed types", function()
    local a, b = of("int8", {7, -7, 7, -7}), of("int8", {2, 2, -2, -2})
    assert.are.same({3, -4, -4, 3}, (a // b):totable())
    assert.are.same({1, 1, -1, -1}, (a % b):totable())
    assert.are.same({1, -1, 1, -1}, dle.fmod(a, b):totable())
    assert.are.equal("int8", (a // b):dtype())
    assert.are.same({3.5, -3.5, -3.5, 3.5}, (a / b):totable())
    assert.are.equal("float32", (a / b):dtype())
  end)

  it("uint64 divides, takes remainders and compares as unsigned beyond 2^63", function()
    local m = u64_max()
    assert.are.equal(math.maxinteger, (m // of("uint64", {2})):item())
    assert.are.equal(5, (m % of("uint64", {10})):item())
    assert.are.equal(5, dle.fmod(m, of("uint64", {10})):item())
    assert.is_true(m:gt(of("uint64", {1})):item())
    assert.is_false(m:lt(of("uint64", {1})):item())
    assert.are.equal(2.0 ^ 64, dle.maximum(m, of("uint64", {1})):item())
    assert.are.equal(2.0 ^ 64, m:abs():item())
  end)

  it("integer division by zero is an error, not a value", function()
    for _, dt in ipairs(NEW) do
      H.assert_error(function() return of(dt, {1}) // of(dt, {0}) end, "zero")
    end
  end)

  it("comparisons give bool on every integer dtype", function()
    for _, dt in ipairs(NEW) do
      local a, b = of(dt, {1, 5, 3}), of(dt, {2, 5, 1})
      assert.are.same({true, false, false}, (a:lt(b)):totable(), dt)
      assert.are.same({false, true, false}, (a:eq(b)):totable(), dt)
      assert.are.same({false, true, true}, (a:ge(b)):totable(), dt)
    end
  end)

  it("float ops on integer tensors give float32; clamp and abs keep the dtype", function()
    for _, dt in ipairs(NEW) do
      assert.are.equal("float32", of(dt, {4}):sqrt():dtype(), dt)
      assert.are.same({2}, of(dt, {4}):sqrt():totable(), dt)
      assert.are.same({2, 3}, of(dt, {1, 9}):clamp(2, 3):totable(), dt)
      assert.are.equal(dt, of(dt, {1, 9}):clamp(2, 3):dtype(), dt)
    end
    assert.are.same({5, 0}, of("int16", {-5, 0}):abs():totable())
  end)
end)

describe("integer dtypes: reductions, indexing and copies", function()
  it("sum and prod give int64 (uint64: uint64, as NumPy), max and min keep the dtype", function()
    for _, dt in ipairs(NEW) do
      local t = of(dt, {100, 27, 1})
      assert.are.equal(dt == "uint64" and "uint64" or "int64", t:sum():dtype(), dt)
      assert.are.equal(128, t:sum():item(), dt)
      assert.are.equal(2700, t:prod():item(), dt)
      assert.are.equal(dt, t:max():dtype(), dt)
      assert.are.equal(100, t:max():item(), dt)
      assert.are.equal(1, t:min():item(), dt)
    end
    assert.are.equal(-256, of("int8", {-128, -128}):sum():item())
  end)

  it("a uint64 sum above 2^63 keeps its value (int64 would turn it negative); products wrap modulo 2^64", function()
    local big = of("int64", {1 << 62}):to("uint64"):expand(3)
    local s = big:sum()
    assert.are.equal("uint64", s:dtype())
    assert.truthy(tostring(s):find("13835058055282163712", 1, true), tostring(s))
    assert.are.equal("uint64", big:sum(1, {keepdim = true}):dtype())
    -- 2^62 * 2^62 * 2^62 = 2^186 = 0 modulo 2^64
    assert.are.equal(0, big:prod():to("int64"):item())
  end)

  it("transposed views copy, index, sort and concatenate", function()
    for _, dt in ipairs(NEW) do
      local t = dle.arange(0, 6, {dtype = dt}):reshape(2, 3)
      local tt = t:t()
      assert.is_false(tt:is_contiguous())
      assert.are.same({{0, 3}, {1, 4}, {2, 5}}, tt:contiguous():totable(), dt)
      assert.are.same({{2, 5}}, tt:index_select(1, H.int64({3})):totable(), dt)
      t[1][2] = 9
      assert.are.same({{0, 9, 2}, {3, 4, 5}}, t:totable(), dt)
      local s = of(dt, {3, 1, 2}):sort()
      assert.are.same({1, 2, 3}, s:totable(), dt)
      assert.are.same({3, 1, 2, 1, 2}, dle.cat({of(dt, {3}), of(dt, {1, 2}), of(dt, {1, 2})}):totable(), dt)
    end
  end)
end)

describe("integer dtypes: files", function()
  local function tmp(ext) return os.tmpname() .. ext end

  it("dle.save / dle.load keep dtype and values, views included", function()
    local p = tmp(".dle")
    local data = {}
    for _, dt in ipairs(NEW) do data[dt] = of(dt, {RANGE[dt][1], 7, RANGE[dt][2] or math.maxinteger}) end
    data.view = of("int16", {1, 2, 3, 4}):reshape(2, 2):t()
    dle.save(p, data)
    local back = dle.load(p)
    os.remove(p)
    for _, dt in ipairs(NEW) do
      assert.are.equal(dt, back[dt]:dtype())
      assert.are.same(data[dt]:totable(), back[dt]:totable(), dt)
    end
    assert.are.same({{1, 3}, {2, 4}}, back.view:totable())
  end)

  it("npy and safetensors round-trip every integer dtype", function()
    for _, dt in ipairs(NEW) do
      local t = of(dt, {{RANGE[dt][1], 5}, {6, RANGE[dt][2] or math.maxinteger}})
      local p = tmp(".npy")
      dle.save_npy(p, t)
      local n = dle.load_npy(p)
      os.remove(p)
      assert.are.equal(dt, n:dtype())
      assert.are.same(t:totable(), n:totable(), dt)
      local q = tmp(".safetensors")
      dle.save_safetensors(q, {x = t})
      local s = dle.load_safetensors(q)
      os.remove(q)
      assert.are.equal(dt, s.x:dtype())
      assert.are.same(t:totable(), s.x:totable(), dt)
    end
  end)

  it("npy files carry NumPy's dtype codes (read by numpy when installed)", function()
    local p = tmp(".npy")
    dle.save_npy(p, of("uint16", {1, 65535}))
    local f = assert(io.open(p, "rb"))
    local head = f:read(128)
    f:close()
    assert.matches("'<u2'", head, 1, true)
    local py = io.popen("/usr/bin/python3 -c \"import numpy; a = numpy.load('" .. p ..
      "'); print(a.dtype, a.tolist())\" 2>/dev/null")
    local out = py and py:read("*a") or ""
    if py then py:close() end
    os.remove(p)
    if out == "" then return end -- numpy not installed
    assert.matches("uint16 [1, 65535]", out, 1, true)
  end)
end)

describe("integer dtypes: ONNX", function()
  it("a model with inputs, constants and outputs of each integer dtype saves and loads back", function()
    local dir = H.tmpdir()
    for _, dt in ipairs(NEW) do
      local c = of(dt, {3, 1, 4})
      local f = function(x) return x + c, x:gt(c) end
      local path = dir .. "/" .. dt .. ".onnx"
      local x = of(dt, {5, 0, 9})
      dle.onnx.save(path, f, {x})
      local m = dle.onnx.load(path, {requires_grad = false})
      local y, g = m(x)
      assert.are.equal(dt, y:dtype())
      assert.are.same({8, 1, 13}, y:totable(), dt)
      assert.are.same({true, false, true}, g:totable(), dt)
    end
  end)
end)

describe("integer dtypes against PyTorch", function()
  it("int8 and int16 arithmetic, division and sums match torch's", function()
    if H.without_torch(pending) then return end
    local lines = {}
    local results = {}
    for _, dt in ipairs({"int8", "int16"}) do
      local a = of(dt, {100, -100, 77, -128, 5, -7, 127, 0})
      local b = of(dt, {100, 27, -3, -1, 3, 2, 127, 9})
      local ta = string.format("torch.tensor(%s, dtype=torch.%s)", "[100, -100, 77, -128, 5, -7, 127, 0]", dt)
      local tb = string.format("torch.tensor(%s, dtype=torch.%s)", "[100, 27, -3, -1, 3, 2, 127, 9]", dt)
      lines[#lines + 1] = "a = " .. ta
      lines[#lines + 1] = "b = " .. tb
      local exprs = {
        {"a + b", a + b}, {"a - b", a - b}, {"a * b", a * b}, {"torch.div(a, b, rounding_mode='floor')", a // b},
        {"torch.remainder(a, b)", a % b}, {"torch.fmod(a, b)", dle.fmod(a, b)}, {"-a", -a},
        {"a.abs()", a:abs()}, {"(a < b).to(torch.int8)", (a:lt(b)):to("int8")},
        {"a.sum().reshape(1)", a:sum():reshape(1)}, {"a + torch.tensor([200, 1, 2, 3, 4, 5, 6, 7], dtype=torch.uint8)",
          a + of("uint8", {200, 1, 2, 3, 4, 5, 6, 7})},
      }
      for _, e in ipairs(exprs) do
        lines[#lines + 1] = "r = " .. e[1]
        lines[#lines + 1] = "print(str(r.dtype).replace('torch.', ''), ' '.join(str(int(z)) for z in r.tolist()))"
        results[#results + 1] = {dt .. ": " .. e[1], e[2]}
      end
    end
    local out = H.run_python({"import torch", table.unpack(lines)})
    assert.are.equal(#results, #out)
    for i, r in ipairs(results) do
      local vals = {}
      for _, v in ipairs(r[2]:totable()) do vals[#vals + 1] = tostring(math.tointeger(v) or v) end
      assert.are.equal(out[i], r[2]:dtype() .. " " .. table.concat(vals, " "), r[1])
    end
  end)
end)
