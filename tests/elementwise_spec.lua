-- elementwise_spec.lua — unary math, binary arithmetic (operators and methods, numbers on either
-- side), comparisons, where, logical_not and the in-place forms, each checked against a pure-Lua
-- reference on contiguous, transposed, strided, sliced, expanded, broadcast, 0-dim and odd-sized
-- inputs, in float32 and float64 (int64 where it applies), plus aliasing and numerical stability.
local dle = require("dle")
local H = require("helpers")

local FLOATS = {"float32", "float64"}
local ODD = {7, 13}

-- Input values as the tensor stores them (float32 rounds), so the reference sees the same numbers.
local function stored(values, dtype)
  if dtype == "float32" then return H.map(values, H.f32) end
  return values
end

-- ---------------------------------------------------------------- unary ops

-- name -> domain of test inputs (lo, hi), integer-capable flag
local UNARY = {
  {"neg", -3, 3, int = true}, {"abs", -3, 3, int = true}, {"sign", -3, 3, int = true},
  {"relu", -3, 3, int = true}, {"exp", -3, 3}, {"log", 0.1, 5}, {"expm1", -1, 1},
  {"log1p", -0.9, 3}, {"sqrt", 0, 5}, {"rsqrt", 0.1, 5}, {"reciprocal", 0.3, 3},
  {"sin", -3, 3}, {"cos", -3, 3}, {"tanh", -3, 3}, {"sigmoid", -6, 6}, {"gelu", -4, 4},
  {"silu", -6, 6}, {"floor", -3, 3}, {"ceil", -3, 3}, {"round", -3, 3},
  {"trunc", -3, 3}, {"frac", -3, 3}, {"tan", -1.4, 1.4}, {"asin", -0.99, 0.99}, {"acos", -0.99, 0.99},
  {"atan", -5, 5}, {"sinh", -4, 4}, {"cosh", -4, 4}, {"asinh", -5, 5}, {"acosh", 1.01, 5},
  {"atanh", -0.95, 0.95}, {"erf", -3, 3}, {"erfc", -2, 2}, {"erfinv", -0.999, 0.999},
  {"log2", 0.1, 5}, {"log10", 0.1, 5}, {"exp2", -5, 5},
}

describe("unary ops", function()
  for k, spec in ipairs(UNARY) do
    local name, lo, hi = spec[1], spec[2], spec[3]
    local ref = H.ref[name]
    for _, dt in ipairs(FLOATS) do
      it(name .. " " .. dt .. " matches the Lua reference on every layout (7x13)", function()
        local v = stored(H.values(ODD, {lo = lo, hi = hi, seed = k}), dt)
        if name == "round" then v[1][1], v[1][2], v[1][3], v[1][4] = 0.5, 1.5, 2.5, -0.5 end
        local want = H.map(v, ref)
        H.each_layout(v, dt, function(layout, x)
          H.assert_close(x[name](x), want, {dtype = dt, msg = name .. " " .. layout})
          H.assert_close(dle[name](x), want, {dtype = dt, msg = "dle." .. name .. " " .. layout})
        end)
      end)
    end

    it(name .. " works on 0-dim and expanded (stride 0) inputs", function()
      local s = dle.tensor((lo + hi) / 2, {dtype = "float64"})
      local r = s[name](s)
      assert.are.same({}, r:shape())
      H.assert_close(r:item(), ref((lo + hi) / 2), {rtol = 1e-12})
      local row = H.values({5}, {lo = lo, hi = hi, seed = 99})
      local x = H.make(H.repeat_rows(row, 4), "float64", "expanded")
      local out = x[name](x)
      assert.is_true(out:is_contiguous())
      H.assert_close(out, H.repeat_rows(H.map(row, ref), 4), {dtype = "float64"})
    end)
  end

  it("int64 neg, abs, sign and relu stay int64 and are exact", function()
    local v = H.values(ODD, {lo = -50, hi = 50, int = true})
    for _, name in ipairs({"neg", "abs", "sign", "relu"}) do
      H.each_layout(v, "int64", function(layout, x)
        H.assert_close(x[name](x), H.map(v, H.ref[name]), {dtype = "int64", msg = name .. " " .. layout})
      end)
    end
  end)

  it("int64 floor, ceil and round return the values unchanged", function()
    local v = H.values({3, 5}, {lo = -9, hi = 9, int = true})
    for _, name in ipairs({"floor", "ceil", "round"}) do
      H.assert_close(dle.tensor(v, {dtype = "int64"})[name](dle.tensor(v, {dtype = "int64"})), v, {dtype = "int64"})
    end
  end)

  it("float ops on int64 inputs give float32", function()
    local x = dle.tensor({{1, 2}, {3, 4}}, {dtype = "int64"})
    for _, name in ipairs({"exp", "log", "sqrt", "sin", "tanh", "sigmoid", "gelu", "silu", "reciprocal"}) do
      local r = x[name](x)
      assert.are.equal("float32", r:dtype())
      H.assert_close(r, H.map({{1, 2}, {3, 4}}, H.ref[name]), {msg = name})
    end
  end)

  it("float16 and bfloat16 compute in float32 and round on store", function()
    local v = H.values({4, 5}, {lo = -2, hi = 2})
    for _, dt in ipairs({"float16", "bfloat16"}) do
      local x = dle.tensor(v, {dtype = dt})
      local xs = x:double():totable()
      for _, name in ipairs({"exp", "tanh", "sigmoid", "neg"}) do
        H.assert_close(x[name](x), H.map(xs, H.ref[name]), {dtype = dt, msg = name .. " " .. dt})
      end
    end
  end)

  it("a large transposed input (beyond the parallel grain) is computed correctly", function()
    local v = H.values({181, 191}, {lo = -4, hi = 4, seed = 7})
    local x = H.make(v, "float64", "transposed")
    H.assert_close(x:exp(), H.map(v, math.exp), {dtype = "float64"})
    H.assert_close(x:tanh(), H.map(v, H.ref.tanh), {dtype = "float64"})
  end)

  it("logical_not gives bool, from bool and from numbers", function()
    local b = dle.tensor({{true, false}, {false, true}})
    assert.are.same({{false, true}, {true, false}}, b:logical_not():totable())
    assert.are.same({{false, true}, {true, false}}, dle.logical_not(b:t():t()):totable())
    local f = dle.tensor({0, 2, -1, 0})
    local r = f:logical_not()
    assert.are.equal("bool", r:dtype())
    assert.are.same({true, false, false, true}, r:totable())
    assert.are.same({true, false, true}, H.make({false, true, false}, "bool", "strided"):logical_not():totable())
  end)
end)

describe("pow and clamp", function()
  for _, dt in ipairs(FLOATS) do
    it("pow(p) with a number exponent matches a^p (" .. dt .. ")", function()
      local v = stored(H.values(ODD, {lo = 0.2, hi = 3}), dt)
      for _, p in ipairs({2, 3, 0.5, -1, -1.5, 0}) do
        H.each_layout(v, dt, function(layout, x)
          local want = H.map(v, function(a) return a ^ p end)
          H.assert_close(x:pow(p), want, {dtype = dt, msg = "pow " .. p .. " " .. layout})
          H.assert_close(x ^ p, want, {dtype = dt, msg = "^ " .. p .. " " .. layout})
        end)
      end
    end)

    it("clamp(lo, hi) bounds values; either bound may be nil (" .. dt .. ")", function()
      local v = stored(H.values(ODD, {lo = -3, hi = 3}), dt)
      H.each_layout(v, dt, function(layout, x)
        H.assert_close(x:clamp(-1, 1.5), H.map(v, function(a) return math.min(math.max(a, -1), 1.5) end),
                       {dtype = dt, msg = layout})
        H.assert_close(x:clamp(nil, 0.5), H.map(v, function(a) return math.min(a, 0.5) end), {dtype = dt})
        H.assert_close(dle.clamp(x, 0), H.map(v, function(a) return math.max(a, 0) end), {dtype = dt})
      end)
    end)
  end

  it("int64 pow with a whole exponent stays int64; fractional or negative gives float32", function()
    local x = dle.tensor({{1, 2, 3}, {4, 5, 6}}, {dtype = "int64"})
    local sq = x:pow(2)
    assert.are.equal("int64", sq:dtype())
    assert.are.same({{1, 4, 9}, {16, 25, 36}}, sq:totable())
    local r = x:pow(0.5)
    assert.are.equal("float32", r:dtype())
    H.assert_close(r, H.map({{1, 2, 3}, {4, 5, 6}}, math.sqrt))
    assert.are.equal("float32", x:pow(-1):dtype())
    H.assert_close(x:pow(-1), H.map({{1, 2, 3}, {4, 5, 6}}, function(a) return 1 / a end))
  end)

  it("int64 clamp stays int64", function()
    local x = dle.tensor({-5, 0, 5, 10}, {dtype = "int64"})
    local c = x:clamp(-2, 7)
    assert.are.equal("int64", c:dtype())
    assert.are.same({-2, 0, 5, 7}, c:totable())
  end)

  it("clamp with min > max is an error", function()
    H.assert_error(function() return dle.ones(2):clamp(2, 1) end, "clamp:")
  end)

  it("clip is clamp", function()
    assert.are.same({0, 0.5, 1}, dle.tensor({-1, 0.5, 2}):clip(0, 1):totable())
  end)
end)

-- ---------------------------------------------------------------- binary ops

-- name -> domain of a, domain of b, operator (if any)
local BINARY = {
  {"add", {-3, 3}, {-3, 3}, function(a, b) return a + b end},
  {"sub", {-3, 3}, {-3, 3}, function(a, b) return a - b end},
  {"mul", {-3, 3}, {-3, 3}, function(a, b) return a * b end},
  {"div", {-3, 3}, {0.5, 3}, function(a, b) return a / b end},
  {"pow", {0.2, 3}, {-2, 2}, nil},
  {"maximum", {-3, 3}, {-3, 3}, nil},
  {"minimum", {-3, 3}, {-3, 3}, nil},
  {"atan2", {-3, 3}, {-3, 3}, nil},
  {"fmod", {-5, 5}, {0.5, 3}, nil},
  {"remainder", {-5, 5}, {-3, 3}, function(a, b) return a % b end},
  {"floor_divide", {-5, 5}, {0.5, 3}, function(a, b) return a // b end},
  {"fmax", {-3, 3}, {-3, 3}, nil},
  {"fmin", {-3, 3}, {-3, 3}, nil},
  {"hypot", {-3, 3}, {-3, 3}, nil},
  {"logaddexp", {-30, 30}, {-3, 3}, nil},
  {"copysign", {-3, 3}, {-3, 3}, nil},
}

describe("binary ops", function()
  for k, spec in ipairs(BINARY) do
    local name, da, db, operator = spec[1], spec[2], spec[3], spec[4]
    local ref = H.ref[name]
    for _, dt in ipairs(FLOATS) do
      it(name .. " " .. dt .. " matches the reference on every pair of layouts (7x13)", function()
        local va = stored(H.values(ODD, {lo = da[1], hi = da[2], seed = k}), dt)
        local vb = stored(H.values(ODD, {lo = db[1], hi = db[2], seed = k + 100}), dt)
        local want = H.zipmap(ref, va, vb)
        for _, la in ipairs(H.layouts) do
          for _, lb in ipairs(H.layouts) do
            local a, b = H.make(va, dt, la), H.make(vb, dt, lb)
            local msg = name .. " " .. la .. " with " .. lb
            H.assert_close(a[name](a, b), want, {dtype = dt, msg = msg})
            if lb == "contiguous" then
              H.assert_close(dle[name](a, b), want, {dtype = dt, msg = "dle." .. msg})
              if operator then H.assert_close(operator(a, b), want, {dtype = dt, msg = "operator " .. msg}) end
            end
          end
        end
      end)

      it(name .. " " .. dt .. " broadcasts {3,1} with {1,4}, {2,3} with {3}, and 0-dim", function()
        local cases = {{{3, 1}, {1, 4}}, {{2, 3}, {3}}, {{3}, {2, 3}}, {{2, 3}, {}}, {{}, {2, 3}},
                       {{4, 1, 3}, {2, 1}}, {{}, {}}}
        for c, shapes in ipairs(cases) do
          local va = stored(H.values(shapes[1], {lo = da[1], hi = da[2], seed = c}), dt)
          local vb = stored(H.values(shapes[2], {lo = db[1], hi = db[2], seed = c + 50}), dt)
          local want = H.zipmap(ref, va, vb)
          local a, b = dle.tensor(va, {dtype = dt}), dle.tensor(vb, {dtype = dt})
          local msg = string.format("%s {%s} with {%s}", name, table.concat(shapes[1], ","),
                                    table.concat(shapes[2], ","))
          H.assert_close(a[name](a, b), want, {dtype = dt, shape = H.broadcast_shape(shapes[1], shapes[2]), msg = msg})
          if #shapes[1] > 0 then   -- the same through non-contiguous operands
            local ta, tb = H.make(va, dt, "sliced"), H.make(vb, dt, "strided")
            H.assert_close(ta[name](ta, tb), want, {dtype = dt, msg = msg .. " (views)"})
          end
        end
      end)
    end
  end

  it("int64 add, sub, mul, maximum, minimum and pow are exact and stay int64", function()
    local va = H.values(ODD, {lo = -20, hi = 20, int = true, seed = 3})
    local vb = H.values(ODD, {lo = -20, hi = 20, int = true, seed = 4})
    for _, name in ipairs({"add", "sub", "mul", "maximum", "minimum"}) do
      for _, la in ipairs(H.layouts) do
        local a, b = H.make(va, "int64", la), H.make(vb, "int64", "transposed")
        H.assert_close(a[name](a, b), H.zipmap(H.ref[name], va, vb), {dtype = "int64", msg = name .. " " .. la})
      end
    end
    local pa = H.values({3, 4}, {lo = -3, hi = 3, int = true})
    local pb = H.values({3, 4}, {lo = 0, hi = 4, int = true, seed = 9})
    local want = H.zipmap(function(a, b) return math.tointeger(a ^ b) end, pa, pb)
    H.assert_close(dle.tensor(pa, {dtype = "int64"}):pow(dle.tensor(pb, {dtype = "int64"})), want, {dtype = "int64"})
  end)

  it("int64 division is true division into float32", function()
    local a, b = dle.tensor({7, -7, 6}, {dtype = "int64"}), dle.tensor({2, 2, 4}, {dtype = "int64"})
    local r = a / b
    assert.are.equal("float32", r:dtype())
    assert.are.same({3.5, -3.5, 1.5}, r:totable())
  end)

  it("maximum and minimum propagate NaN", function()
    local nan = 0 / 0
    local a, b = dle.tensor({nan, 1, 2}), dle.tensor({1, nan, 3})
    local mx, mn = a:maximum(b):totable(), a:minimum(b):totable()
    assert.is_true(mx[1] ~= mx[1] and mx[2] ~= mx[2])
    assert.is_true(mn[1] ~= mn[1] and mn[2] ~= mn[2])
    assert.are.equal(3, mx[3])
    assert.are.equal(2, mn[3])
  end)

  it("a large broadcast (beyond the parallel grain) is computed correctly", function()
    local va = H.values({200, 1}, {seed = 1})
    local vb = H.values({1, 190}, {seed = 2})
    local r = dle.tensor(va, {dtype = "float64"}) * dle.tensor(vb, {dtype = "float64"}):t():t()
    H.assert_close(r, H.zipmap(H.ref.mul, va, vb), {dtype = "float64"})
  end)

  it("shapes that do not broadcast raise an error naming the op and both shapes", function()
    H.assert_error(function() return dle.ones(2, 3) + dle.ones(4) end, "add:", "{2,3}", "{4}")
    H.assert_error(function() return dle.ones(2, 3):mul(dle.ones(3, 2)) end, "mul:", "{2,3}", "{3,2}")
    H.assert_error(function() return dle.ones(2, 3):lt(dle.ones(2)) end, "lt:", "{2,3}", "{2}")
  end)
end)

describe("numbers on either side", function()
  for _, dt in ipairs(FLOATS) do
    it("+ - * / ^ with a number on the left or right (" .. dt .. ")", function()
      local v = stored(H.values(ODD, {lo = 0.5, hi = 3}), dt)
      H.each_layout(v, dt, function(layout, t)
        local function check(r, f, what)
          H.assert_close(r, H.map(v, f), {dtype = dt, msg = what .. " " .. layout})
        end
        check(t + 2, function(a) return a + 2 end, "t + 2")
        check(2 + t, function(a) return 2 + a end, "2 + t")
        check(t - 2, function(a) return a - 2 end, "t - 2")
        check(2 - t, function(a) return 2 - a end, "2 - t")
        check(t * 1.5, function(a) return a * 1.5 end, "t * 1.5")
        check(1.5 * t, function(a) return 1.5 * a end, "1.5 * t")
        check(t / 4, function(a) return a / 4 end, "t / 4")
        check(4 / t, function(a) return 4 / a end, "4 / t")
        check(t ^ 2, function(a) return a ^ 2 end, "t ^ 2")
        check(2 ^ t, function(a) return 2 ^ a end, "2 ^ t")
        check(-t, function(a) return -a end, "-t")
        check(t:add(1), function(a) return a + 1 end, "t:add(1)")
        check(dle.sub(1, t), function(a) return 1 - a end, "dle.sub(1, t)")
        check(t:maximum(1), function(a) return math.max(a, 1) end, "t:maximum(1)")
      end)
    end)
  end

  it("a tensor ^ a tensor exponent", function()
    local a, b = dle.tensor({2, 3, 4}), dle.tensor({3, 2, 0.5})
    H.assert_close(a ^ b, {8, 9, 2})
    H.assert_close(a:pow(b), {8, 9, 2})
  end)

  it("number results keep the tensor's shape, including 0-dim", function()
    local s = dle.tensor(3)
    local r = s * 2
    assert.are.same({}, r:shape())
    assert.are.equal(6, r:item())
    assert.are.same({}, (1 - s):shape())
  end)

  it("an arithmetic operator on a non-tensor non-number is an error naming the op", function()
    H.assert_error(function() return dle.ones(2) + "x" end, "add:", "string")
    H.assert_error(function() return {} * dle.ones(2) end, "mul:", "table")
  end)
end)

-- ---------------------------------------------------------------- the small-op lane

-- Small float ops on contiguous operands of one shape and dtype take a short route in the engine
-- (ops.c, small_lane_shape); a 0-dim operand may broadcast there. Anything else must leave it.
describe("small-op lane", function()
  for _, dt in ipairs(FLOATS) do
    it("a 0-dim tensor operand broadcasts on either side, over {}, {1}, {5} and {3,4} (" .. dt .. ")", function()
      local s = dle.tensor(1.5, {dtype = dt})
      for _, shape in ipairs({{}, {1}, {5}, {3, 4}}) do
        local v = stored(H.values(shape, {lo = 0.5, hi = 3}), dt)
        local t = dle.tensor(v, {dtype = dt})
        local what = dt .. " " .. table.concat(shape, "x")
        H.assert_close(t * s, H.map(v, function(a) return a * 1.5 end), {dtype = dt, msg = "t * s " .. what})
        H.assert_close(s - t, H.map(v, function(a) return 1.5 - a end), {dtype = dt, msg = "s - t " .. what})
        H.assert_close(s / t, H.map(v, function(a) return 1.5 / a end), {dtype = dt, msg = "s / t " .. what})
        H.assert_close(t:maximum(s), H.map(v, function(a) return math.max(a, 1.5) end), {dtype = dt, msg = what})
        assert.are.same(shape, (s + t):shape(), what)
        assert.are.equal(dt, (t * s):dtype())
      end
    end)
  end

  it("operands of other dtypes, or integers, are promoted as the general rule says", function()
    local t32, s64 = dle.tensor({1, 2, 3}), dle.tensor(0.5, {dtype = "float64"})
    assert.are.equal("float64", (t32 * s64):dtype())
    H.assert_close(t32 * s64, {0.5, 1, 1.5})
    local i = dle.tensor({1, 2, 3}, {dtype = "int64"})
    assert.are.equal("int64", (i * 2):dtype())
    assert.are.equal("float32", (i * 0.5):dtype())
    assert.are.equal("bool", dle.tensor({0, 2}):logical_not():dtype())
  end)

  it("an input requiring grad is recorded with grad on, and computed without record under no_grad", function()
    local x = dle.tensor({1, 2, 3}):requires_grad_()
    local y = x * 2 + x
    assert.is_true(y.requires_grad)
    y:sum():backward()
    H.assert_close(x.grad, {3, 3, 3})
    local z = dle.no_grad(function() return x * 2 + x end)
    assert.is_false(z.requires_grad)
    assert.is_nil(z.grad_fn)
    H.assert_close(z, {3, 6, 9})
  end)

  it("an input carrying a tangent gets its output's tangent (forward mode)", function()
    local x = dle.tensor({1, 2, 3})
    local _, t = dle.jvp(function(a) return (a * a):exp() * 2 end, x, dle.ones(3))
    -- d/da 2 exp(a^2) = 4 a exp(a^2)
    H.assert_close(t, H.map({1, 2, 3}, function(a) return 4 * a * math.exp(a * a) end), {rtol = 1e-5})
  end)
end)

-- ---------------------------------------------------------------- comparisons and where

describe("comparisons", function()
  local CMP = {"eq", "ne", "lt", "le", "gt", "ge"}
  for _, dt in ipairs({"float32", "float64", "int64"}) do
    it("eq ne lt le gt ge give bool results matching the reference (" .. dt .. ")", function()
      local va = H.values(ODD, {lo = -2, hi = 2, int = true, seed = 1})
      local vb = H.values(ODD, {lo = -2, hi = 2, int = true, seed = 2})
      for _, name in ipairs(CMP) do
        local want = H.zipmap(H.ref[name], va, vb)
        for _, la in ipairs(H.layouts) do
          local a, b = H.make(va, dt, la), H.make(vb, dt, "transposed")
          local r = a[name](a, b)
          assert.are.equal("bool", r:dtype())
          assert.are.same(want, r:totable(), name .. " " .. la)
        end
        assert.are.same(want, dle[name](dle.tensor(va, {dtype = dt}), dle.tensor(vb, {dtype = dt})):totable())
      end
    end)
  end

  it("compare with numbers on either side and broadcast", function()
    local a = dle.tensor({{1, 2, 3}, {4, 5, 6}})
    assert.are.same({{false, false, true}, {true, true, true}}, a:ge(3):totable())
    assert.are.same({{true, true, false}, {false, false, false}}, dle.gt(3, a):totable())
    local col, row = dle.tensor({{1}, {2}, {3}}), dle.tensor({{2, 1, 3, 0}})
    assert.are.same({{true, false, true, false}, {false, false, true, false}, {false, false, false, false}},
                    col:lt(row):totable())
    assert.are.same({{false, true, false}, {false, false, false}}, a:eq(dle.tensor({0, 2, 0})):totable())
  end)

  it("compare 0-dim tensors with each other and with matrices", function()
    local s = dle.tensor(2)
    local r = s:lt(dle.tensor(3))
    assert.are.same({}, r:shape())
    assert.is_true(r:item())
    assert.are.same({{false, false, true}, {true, true, true}}, dle.tensor({{1, 2, 3}, {4, 5, 6}}):gt(s):totable())
    assert.are.same({{true, false}}, s:ge(dle.tensor({{2, 3}})):totable())
  end)

  it("compare across dtypes by promoting", function()
    local i = dle.tensor({1, 2, 3}, {dtype = "int64"})
    local f = dle.tensor({1, 2.5, 2.5})
    assert.are.same({true, false, false}, i:eq(f):totable())
    assert.are.same({false, true, false}, i:lt(f):totable())
    assert.are.same({false, false, true}, i:gt(2.5):totable())
  end)

  it("NaN compares unequal to everything", function()
    local n = dle.tensor({0 / 0, 1})
    assert.are.same({false, true}, n:eq(n):totable())
    assert.are.same({true, false}, n:ne(n):totable())
    assert.are.same({false, false}, n:lt(0):totable())
  end)

  it("bool tensors compare", function()
    local a, b = dle.tensor({true, false, true}), dle.tensor({true, true, false})
    assert.are.same({true, false, false}, a:eq(b):totable())
    assert.are.same({false, false, true}, a:gt(b):totable())
  end)

  it("comparisons have no in-place forms", function()
    assert.is_nil(dle.ones(2).eq_)
    assert.is_nil(dle.ones(2).lt_)
  end)
end)

describe("where", function()
  for _, dt in ipairs({"float32", "float64", "int64"}) do
    it("picks a where cond is true and b elsewhere, on every layout (" .. dt .. ")", function()
      local c = H.map(H.values(ODD, {lo = 0, hi = 1, int = true, seed = 5}), function(x) return x == 1 end)
      local va = H.values(ODD, {lo = -9, hi = 9, int = true, seed = 6})
      local vb = H.values(ODD, {lo = -9, hi = 9, int = true, seed = 7})
      local want = H.zipmap(function(cc, a, b) if cc then return a end return b end, c, va, vb)
      for _, lc in ipairs(H.layouts) do
        for _, la in ipairs(H.layouts) do
          local r = dle.where(H.make(c, "bool", lc), H.make(va, dt, la), H.make(vb, dt, "sliced"))
          H.assert_close(r, want, {dtype = dt, msg = lc .. " " .. la})
        end
      end
    end)
  end

  it("broadcasts cond {3,1}, a {1,4} and b {4}", function()
    local c = {{true}, {false}, {true}}
    local a = {{1, 2, 3, 4}}
    local b = {10, 20, 30, 40}
    local want = H.zipmap(function(cc, x, y) if cc then return x end return y end, c, a, b)
    H.assert_close(dle.where(dle.tensor(c), dle.tensor(a), dle.tensor(b)), want, {shape = {3, 4}})
  end)

  it("broadcasts a 0-dim condition and 0-dim values", function()
    local x = dle.tensor({{1, 2}, {3, 4}})
    assert.are.same({{1, 2}, {3, 4}}, dle.where(dle.tensor(true), x, dle.tensor(0)):totable())
    assert.are.same({{0, 0}, {0, 0}}, dle.where(dle.tensor(false), x, dle.tensor(0)):totable())
    local r = dle.where(dle.tensor(true), dle.tensor(1), dle.tensor(2))
    assert.are.same({}, r:shape())
    assert.are.equal(1, r:item())
  end)

  it("accepts numbers for a or b", function()
    local c = dle.tensor({true, false, true})
    local x = dle.tensor({1, 2, 3}, {dtype = "float64"})
    local r = dle.where(c, x, 0)
    assert.are.equal("float64", r:dtype())
    assert.are.same({1, 0, 3}, r:totable())
    assert.are.same({-1, 2, -1}, dle.where(c, -1, x):totable())
    assert.are.same({5, 7, 5}, dle.where(c, 5, 7):totable())
  end)

  it("promotes a and b to a common dtype", function()
    local r = dle.where(dle.tensor({true, false}), dle.tensor({1, 2}, {dtype = "int64"}), dle.tensor({0.5, 0.5}))
    assert.are.equal("float32", r:dtype())
    assert.are.same({1, 0.5}, r:totable())
  end)

  it("rejects a non-bool condition and non-broadcastable shapes", function()
    H.assert_error(function() return dle.where(dle.ones(2), dle.ones(2), dle.ones(2)) end, "where:", "bool", "float32")
    H.assert_error(function() return dle.where(dle.ones(2):bool(), dle.ones(3), dle.ones(2)) end, "where:", "{2}",
                   "{3}")
    H.assert_error(function() return dle.where(dle.ones(2):bool(), "a", 1) end, "where:", "string")
  end)
end)

-- ---------------------------------------------------------------- in-place forms

describe("in-place ops", function()
  it("add_, sub_, mul_, div_, pow_ with tensors and numbers return self and write in place", function()
    local v = H.values({3, 5}, {lo = 0.5, hi = 2})
    for _, case in ipairs({
      {"add_", 2, function(a) return a + 2 end}, {"sub_", 2, function(a) return a - 2 end},
      {"mul_", 3, function(a) return a * 3 end}, {"div_", 4, function(a) return a / 4 end},
      {"pow_", 2, function(a) return a ^ 2 end}, {"maximum_", 1, function(a) return math.max(a, 1) end},
    }) do
      local t = dle.tensor(v, {dtype = "float64"})
      local r = t[case[1]](t, case[2])
      assert.are.equal(t, r)
      H.assert_close(t, H.map(v, case[3]), {dtype = "float64", msg = case[1]})
      local u = dle.tensor(v, {dtype = "float64"})
      u[case[1]](u, dle.full({5}, case[2], {dtype = "float64"}))   -- broadcast tensor operand
      H.assert_close(u, H.map(v, case[3]), {dtype = "float64", msg = case[1] .. " tensor"})
    end
  end)

  it("unary in-place forms (exp_, neg_, abs_, relu_, sigmoid_, clamp_, ...) write in place", function()
    local v = H.values({4, 6}, {lo = -2, hi = 2})
    for _, name in ipairs({"exp", "neg", "abs", "relu", "sigmoid", "tanh", "sin", "floor", "sign"}) do
      local t = dle.tensor(v, {dtype = "float64"})
      assert.are.equal(t, t[name .. "_"](t))
      H.assert_close(t, H.map(v, H.ref[name]), {dtype = "float64", msg = name .. "_"})
    end
    local t = dle.tensor(v, {dtype = "float64"})
    t:clamp_(-1, 1)
    H.assert_close(t, H.map(v, function(a) return math.min(math.max(a, -1), 1) end), {dtype = "float64"})
  end)

  for _, dt in ipairs(FLOATS) do
    it("in-place ops on non-contiguous views update only the viewed elements (" .. dt .. ")", function()
      local v = stored(H.values({5, 6}, {lo = 0.5, hi = 2}), dt)
      -- transposed view of the whole tensor
      local base = dle.tensor(v, {dtype = dt})
      base:t():mul_(2)
      H.assert_close(base, H.map(v, function(a) return a * 2 end), {dtype = dt, msg = "t():mul_"})
      -- a column (strided) and a block (narrow)
      base = dle.tensor(v, {dtype = dt})
      base:select(2, 3):add_(10)
      base:narrow(1, 2, 2):narrow(2, 4, 3):exp_()
      local want = H.build({5, 6}, function(i)
        local x = v[i[1]][i[2]]
        if i[2] == 3 then x = x + 10 end
        if i[1] >= 2 and i[1] <= 3 and i[2] >= 4 then x = math.exp(x) end
        return x
      end)
      H.assert_close(base, want, {dtype = dt, msg = "select/narrow"})
      -- an in-place op with a broadcast operand through a transposed view
      base = dle.tensor(v, {dtype = dt})
      base:t():sub_(dle.tensor({{1}, {2}, {3}, {4}, {5}, {6}}, {dtype = dt}))
      H.assert_close(base, H.build({5, 6}, function(i) return v[i[1]][i[2]] - i[2] end), {dtype = dt})
      -- clamp_ and pow_ on a strided view
      base = dle.tensor(v, {dtype = dt})
      base:narrow(2, 1, 6):select(1, 5):clamp_(1, 1.5)
      H.assert_close(base[5], H.map(v[5], function(a) return math.min(math.max(a, 1), 1.5) end), {dtype = dt})
    end)
  end

  it("add, sub and their in-place forms take PyTorch's {alpha = s} (a + s*b); other extra arguments are errors",
     function()
    local v = H.values({2, 3}, {seed = 5})
    local a = dle.tensor(v, {dtype = "float64"})
    local b = dle.tensor({10, 20, 30}, {dtype = "float64"})
    local want = H.map(v, function(x) return x end)
    for i = 1, 2 do for j = 1, 3 do want[i][j] = v[i][j] + 2 * 10 * j end end
    H.assert_close(a:add(b, {alpha = 2}), want, {dtype = "float64"})
    H.assert_close(dle.sub(a, b, {alpha = -2}), want, {dtype = "float64"})
    local c = a:clone()
    assert.are.equal(c, c:add_(b, {alpha = 2}))
    H.assert_close(c, want, {dtype = "float64"})
    assert.are.same({7, 8}, dle.tensor({1, 2}, {dtype = "int64"}):add(3, {alpha = 2}):totable())
    local x, y = dle.ones(2, {requires_grad = true}), dle.ones(2, {requires_grad = true})
    x:sub(y, {alpha = 3}):sum():backward()
    assert.are.same({-3, -3}, y.grad:totable())
    H.assert_error(function() return a:add(b, 2) end, "add:", "argument #3", "alpha")
    H.assert_error(function() return a:mul(b, {alpha = 2}) end, "mul:", "argument #3")
    H.assert_error(function() return a:add(b, {alpha = "x"}) end, "add:", "alpha", "string")
  end)

  it("a:add_(a) doubles a", function()
    local v = H.values({4, 4}, {seed = 11})
    local a = dle.tensor(v, {dtype = "float64"})
    a:add_(a)
    H.assert_close(a, H.map(v, function(x) return 2 * x end), {dtype = "float64"})
  end)

  it("a:add_(a:t()) on a square matrix gives a + a^T (the reads see the old values)", function()
    for _, n in ipairs({4, 7, 200}) do
      local v = H.values({n, n}, {seed = n})
      local want = H.build({n, n}, function(i) return v[i[1]][i[2]] + v[i[2]][i[1]] end)
      local a = dle.tensor(v, {dtype = "float64"})
      a:add_(a:t())
      H.assert_close(a, want, {dtype = "float64", msg = "n = " .. n})
      local b = dle.tensor(v, {dtype = "float64"})
      b:t():add_(b)
      H.assert_close(b, want, {dtype = "float64", msg = "t():add_ n = " .. n})
    end
  end)

  it("a:mul_(a:t()) and overlapping shifted views read the old values", function()
    local v = H.values({5, 5}, {seed = 3})
    local a = dle.tensor(v, {dtype = "float64"})
    a:mul_(a:t())
    H.assert_close(a, H.build({5, 5}, function(i) return v[i[1]][i[2]] * v[i[2]][i[1]] end), {dtype = "float64"})
    local s = dle.arange(1, 7, {dtype = "float64"})  -- 1..6
    s:narrow(1, 2, 5):add_(s:narrow(1, 1, 5))
    assert.are.same({1, 3, 5, 7, 9, 11}, s:totable())
  end)

  it("an in-place op on an expanded tensor (shared elements) is an error", function()
    local e = dle.zeros(3):expand(2, 3)
    H.assert_error(function() return e:add_(1) end, "add:", "expanded", "{2,3}")
    H.assert_error(function() return e:exp_() end, "exp:", "expanded")
    assert.are.same({0, 0, 0}, e[1]:totable())
    e[1]:add_(1)   -- a single row of it has no shared elements
    assert.are.same({{1, 1, 1}, {1, 1, 1}}, e:totable())
  end)

  it("an in-place result PyTorch cannot cast into self's dtype is an error, not a truncation", function()
    local i = dle.tensor({1, 2, 3}, {dtype = "int64"})
    H.assert_error(function() return i:exp_() end, "exp:", "float32", "int64")
    H.assert_error(function() return i:add_(0.5) end, "add:", "float32", "int64")
    H.assert_error(function() return i:mul_(dle.ones(3)) end, "mul:", "float32", "int64")
    H.assert_error(function() return i:sqrt_() end, "sqrt:", "int64")
    local b = dle.tensor({true, false}, {dtype = "bool"})
    H.assert_error(function() return b:add_(b) end, "add:", "int64", "bool")
    assert.are.same({1, 2, 3}, i:totable())                -- untouched
    assert.are.same({3, 4, 5}, i:add_(2):totable())         -- integers stay integers
    local h = dle.ones(2, {dtype = "float16"})
    assert.are.same({3, 3}, h:add_(dle.full({2}, 2)):totable())   -- float into a narrower float: allowed
    assert.are.same({2, 3}, dle.ones(2):add_(dle.tensor({1, 2}, {dtype = "int64"})):totable())
  end)

  it("x:where(cond, y) is PyTorch's method form, where(cond, x, y); to() takes one argument", function()
    local x = dle.tensor({1, 2, 3})
    local c = x:gt(1.5)
    assert.are.same({0, 2, 3}, x:where(c, 0):totable())
    assert.are.same({-1, 2, 3}, x:where(c, dle.full({3}, -1)):totable())
    assert.are.same({-1, 2, 3}, dle.where(c, x, -1):totable())
    H.assert_error(function() return x:where(c) end, "where:", "condition")
    H.assert_error(function() return x:to("float64", "int64") end, "to:", "one dtype or device")
  end)

  it("an in-place result that would need a bigger shape is an error", function()
    H.assert_error(function() return dle.ones(3):add_(dle.ones(2, 3)) end, "add", "{2,3}", "{3}")
  end)

  it("in-place ops bump the version counter", function()
    local a = dle.ones(3)
    local v0 = a:_version()
    a:add_(1)
    local v1 = a:_version()
    assert.is_true(v1 > v0)
    a:exp_()
    assert.is_true(a:_version() > v1)
  end)

  it("an in-place op on an int64 tensor keeps its dtype", function()
    local a = dle.tensor({1, 2, 3}, {dtype = "int64"})
    a:add_(2)
    a:mul_(dle.tensor({2, 2, 2}, {dtype = "int64"}))
    assert.are.equal("int64", a:dtype())
    assert.are.same({6, 8, 10}, a:totable())
  end)
end)

-- ---------------------------------------------------------------- numerical stability

describe("numerical stability", function()
  for _, dt in ipairs(FLOATS) do
    it("sigmoid, silu, tanh and gelu stay finite at huge arguments (" .. dt .. ")", function()
      local x = dle.tensor({-1000, -100, 100, 1000}, {dtype = dt})
      local xs = x:totable()
      assert.are.same({0, 1}, dle.tensor({-1000, 1000}, {dtype = dt}):sigmoid():totable())
      assert.are.same({0, 1000}, dle.tensor({-1000, 1000}, {dtype = dt}):silu():totable())
      assert.are.same({-1, 1}, dle.tensor({-1000, 1000}, {dtype = dt}):tanh():totable())
      assert.are.same({0, 1000}, dle.tensor({-1000, 1000}, {dtype = dt}):gelu():totable())
      for _, name in ipairs({"sigmoid", "silu", "tanh", "gelu"}) do
        H.assert_close(x[name](x), H.map(xs, H.ref[name]), {dtype = dt, msg = name})
      end
      for _, name in ipairs({"sigmoid", "silu", "tanh", "gelu", "relu", "abs", "sign"}) do
        for _, y in ipairs(H.flat(x[name](x):totable())) do
          assert.is_true(y == y, name .. " gave NaN")
        end
      end
    end)

    it("exp overflows to inf and log(0) is -inf, without NaN (" .. dt .. ")", function()
      assert.are.same({math.huge, 0}, dle.tensor({1000, -1000}, {dtype = dt}):exp():totable())
      assert.are.same({-math.huge}, dle.tensor({0}, {dtype = dt}):log():totable())
      assert.are.same({math.huge}, dle.tensor({0}, {dtype = dt}):reciprocal():totable())
    end)
  end

  it("expm1 and log1p are accurate near zero", function()
    local x = dle.tensor({1e-10, -1e-12}, {dtype = "float64"})
    H.assert_close(x:expm1(), {1e-10 + 5e-21, -1e-12 + 5e-25}, {rtol = 1e-14})
    H.assert_close(x:log1p(), {1e-10 - 5e-21, -1e-12 - 5e-25}, {rtol = 1e-14})
    local f = dle.tensor({1e-8})
    H.assert_close(f:expm1(), {1e-8}, {rtol = 1e-6})
  end)

  it("sqrt of a negative number is NaN (not an error)", function()
    local r = dle.tensor({-1}):sqrt():totable()
    assert.is_true(r[1] ~= r[1])
  end)
end)

-- ---------------------------------------------------------------- threads

describe("threads", function()
  -- Light ops (relu, add, mul, gt, copies) go on several threads from a larger size than heavy
  -- ones (exp, gelu, pow): kernels/cpu/cpu_loop.h. Sizes below, between and above both grains, odd
  -- so the thread ranges do not split evenly, contiguous, transposed and broadcast.
  it("unary, binary, comparison and copy results are the same bits at 1 and 2 threads", function()
    H.keep_threads(finally)
    for _, rows in ipairs({5, 129, 1031}) do -- 5x253 < 32768 < 129x253 < 262144 < 1031x253
      local g = dle.Generator(rows)
      local a, b = dle.randn(rows, 253, {generator = g}), dle.randn(rows, 253, {generator = g})
      local bt, row = dle.randn(253, rows, {generator = g}):t(), dle.randn(253, {generator = g})
      local function all()
        return {a:relu(), a + b, a * bt, a:gt(row), a:exp(), a:gelu(), a:pow(3), bt:contiguous(),
                a:to("float64"), (a + row):tanh()}
      end
      dle.set_num_threads(1)
      local one = all()
      dle.set_num_threads(2)
      local two = all()
      for i = 1, #one do
        assert.is_true(one[i]:equal(two[i]), string.format("result %d at %d rows", i, rows))
      end
    end
  end)
end)

-- ---------------------------------------------------------------- special values, integers, PyTorch

describe("special values of the trigonometric, hyperbolic, error and predicate ops", function()
  local nan, inf = 0 / 0, math.huge
  local function same(want, got, msg)
    for i, w in ipairs(want) do
      local g = got[i]
      local ok = (w ~= w and g ~= g) or w == g and (w ~= 0 or 1 / w == 1 / g) -- -0 is not 0
      assert(ok, (msg or "") .. " element " .. i .. ": want " .. tostring(w) .. ", got " .. tostring(g))
    end
  end

  for _, dt in ipairs({"float32", "float64"}) do
    it("domain edges give PyTorch's nan/inf/-0 (" .. dt .. ")", function()
      local function f(name, xs) return dle[name](dle.tensor(xs, {dtype = dt})):totable() end
      same({nan, nan, dt == "float32" and H.f32(math.pi / 2) or math.pi / 2}, f("asin", {1.5, -1.5, 1}), "asin")
      same({nan, 0}, f("acos", {1.5, 1}), "acos")
      same({inf, -inf, nan, nan}, f("erfinv", {1, -1, 1.5, nan}), "erfinv")
      same({inf, -inf, nan}, f("atanh", {1, -1, 2}), "atanh")
      same({nan, 0}, f("acosh", {0.5, 1}), "acosh")
      same({-inf, nan, inf}, f("log2", {0, -1, inf}), "log2")
      same({-inf, 3}, f("log10", {0, 1000}), "log10")
      same({0, inf, 1024}, f("exp2", {-inf, inf, 10}), "exp2")
      same({1, -1, 0, -0.0}, f("erf", {inf, -inf, 0, -0.0}), "erf")
      same({-0.0, -0.0, 2, -2}, f("trunc", {-0.5, -0.0, 2.7, -2.7}), "trunc")
      same({-0.5, nan}, f("frac", {-2.5, inf}), "frac")
      same({inf, -inf}, f("sinh", {inf, -inf}), "sinh")
      same({inf, 1}, f("cosh", {-inf, 0}), "cosh")
    end)

    it("isnan, isinf, isfinite give bool on nan, +-inf, +-0 and numbers (" .. dt .. ")", function()
      local x = dle.tensor({nan, inf, -inf, 0, -0.0, 1.5}, {dtype = dt})
      assert.are.equal("bool", x:isnan():dtype())
      assert.are.same({true, false, false, false, false, false}, x:isnan():totable())
      assert.are.same({false, true, true, false, false, false}, dle.isinf(x):totable())
      assert.are.same({false, false, false, true, true, true}, x:isfinite():totable())
      -- strided input
      assert.are.same({true, false, false}, x:view(3, 2):t():select(1, 1):isnan():totable())
    end)

    it("nan_to_num: defaults (0, largest and lowest finite), positional and named values (" .. dt .. ")", function()
      local big = dt == "float32" and 3.4028234663852886e38 or 1.7976931348623157e308
      local x = dle.tensor({nan, inf, -inf, 2.5}, {dtype = dt})
      same({0, big, -big, 2.5}, x:nan_to_num():totable(), "defaults")
      same({1, 2, 3, 2.5}, dle.nan_to_num(x, 1, 2, 3):totable(), "positional")
      same({-1, big, -7, 2.5}, x:nan_to_num({nan = -1, neginf = -7}):totable(), "named")
      local y = x:clone()
      assert.are.equal(y, y:nan_to_num_({posinf = 9}))
      same({0, 9, -big, 2.5}, y:totable(), "in place")
    end)

    it("copysign takes the sign of -0; fmax/fmin ignore NaN, maximum/minimum propagate it (" .. dt .. ")", function()
      local a = dle.tensor({1, 2, nan, nan, 3}, {dtype = dt})
      local b = dle.tensor({-0.0, nan, 4, nan, 1}, {dtype = dt})
      local s = dle.tensor({-0.0, 0.0, -inf, inf, -1}, {dtype = dt})
      same({-1, 2, nan, nan, -3}, dle.copysign(a, s):totable(), "copysign")
      same({1, 2, 4, nan, 3}, dle.fmax(a, b):totable(), "fmax")
      same({-0.0, 2, 4, nan, 1}, dle.fmin(a, b):totable(), "fmin")
      same({1, nan, nan, nan, 3}, dle.maximum(a, b):totable(), "maximum")
    end)

    it("remainder, fmod and floor_divide by 0 and with infinities follow PyTorch (" .. dt .. ")", function()
      local a = dle.tensor({5, -5, 5, -5, inf}, {dtype = dt})
      local b = dle.tensor({0, 0, inf, inf, 2}, {dtype = dt})
      same({nan, nan, 5, inf, nan}, (a % b):totable(), "remainder")
      same({nan, nan, 5, -5, nan}, dle.fmod(a, b):totable(), "fmod")
      same({inf, -inf, 0, -1, nan}, (a // b):totable(), "floor_divide")
    end)
  end

  it("float16 and bfloat16 compute the new ops in float32 and round on store", function()
    local v = H.values({3, 4}, {lo = -0.9, hi = 0.9, seed = 5})
    for _, dt in ipairs({"float16", "bfloat16"}) do
      local x = dle.tensor(v, {dtype = dt})
      local xs = x:double():totable()
      for _, name in ipairs({"asin", "atanh", "erf", "erfinv", "tan", "exp2"}) do
        H.assert_close(x[name](x), H.map(xs, H.ref[name]), {dtype = dt, msg = name .. " " .. dt})
      end
      H.assert_close(dle.atan2(x, x:t():t() + 1), H.zipmap(H.ref.atan2, xs, H.map(xs, function(e) return e + 1 end)),
                     {dtype = dt, msg = "atan2 " .. dt})
    end
  end)

  it("float ops give float32 on int64; isnan/isinf/isfinite, trunc and nan_to_num accept integers", function()
    local x = dle.tensor({{1, 2}, {3, 4}}, {dtype = "int64"})
    for _, name in ipairs({"tan", "atan", "erf", "log2", "exp2", "sinh"}) do
      assert.are.equal("float32", x[name](x):dtype(), name)
    end
    assert.are.same({{false, false}, {false, false}}, x:isnan():totable())
    assert.are.same({{true, true}, {true, true}}, x:isfinite():totable())
    assert.are.same({{false, false}, {false, false}}, x:isinf():totable())
    assert.are.same({{1, 2}, {3, 4}}, x:trunc():totable())
    assert.are.equal("int64", x:nan_to_num():dtype())
    assert.are.equal("float32", dle.atan2(x, x):dtype())
  end)

  it("frac of an integer tensor is an error naming frac and the dtype", function()
    H.assert_error(function() return dle.tensor({1, 2}, {dtype = "int64"}):frac() end, "frac", "int64")
  end)

  it("nan_to_num rejects unknown options and non-numbers", function()
    H.assert_error(function() return dle.ones(2):nan_to_num({nann = 1}) end, "nan_to_num", "nann")
    H.assert_error(function() return dle.ones(2):nan_to_num("x") end, "nan_to_num", "nan")
  end)
end)

describe("integer remainder, floor_divide, fmod, fmax and fmin", function()
  for _, dt in ipairs({"int64", "int32", "uint8"}) do
    it(dt .. " matches Lua's integer // and % (floor rounding, sign of the divisor) on every layout", function()
      local lo = dt == "uint8" and 0 or -50
      local va = H.values(ODD, {lo = lo, hi = 50, int = true, seed = 3})
      local vb = H.map(H.values(ODD, {lo = lo, hi = 9, int = true, seed = 4}), function(v) return v == 0 and 7 or v end)
      local ref = {
        remainder = function(a, b) return a % b end,
        floor_divide = function(a, b) return a // b end,
        fmod = function(a, b) return math.fmod(a, b) end,
        fmax = math.max, fmin = math.min,
      }
      for name, f in pairs(ref) do
        local want = H.zipmap(f, va, vb)
        for _, la in ipairs(H.layouts) do
          local a, b = H.make(va, dt, la), H.make(vb, dt, "contiguous")
          local r = dle[name](a, b)
          assert.are.equal(dt, r:dtype(), name)
          assert.are.same(want, r:totable(), name .. " " .. dt .. " " .. la)
        end
      end
    end)
  end

  it("integer division by zero is an error naming the op (PyTorch's ZeroDivisionError), never a silent 0; "
     .. "INT64_MIN // -1 wraps, % -1 is 0", function()
    local a = dle.tensor({7, -7, 0, math.mininteger}, {dtype = "int64"})
    local z = dle.tensor({1, 0, 2, 3}, {dtype = "int64"})
    local function raises(f, name, shape)
      local ok, msg = pcall(f)
      assert.is_false(ok, name)
      assert.truthy(msg:find(name .. ": integer division by zero", 1, true), msg)
      assert.truthy(msg:find("shape " .. shape, 1, true), msg)
    end
    raises(function() return a // z end, "floor_divide", "{4}")
    raises(function() return a % z end, "remainder", "{4}")
    raises(function() return dle.fmod(a, z) end, "fmod", "{4}")
    raises(function() return dle.tensor({7, -7, 0, 3}, {dtype = "int32"}) // 0 end, "floor_divide", "{}")
    -- a float operand makes it a float division: inf and nan, as PyTorch
    local f = (dle.tensor({7, -7}, {dtype = "int64"}) // dle.zeros(2)):totable()
    assert.are.same({math.huge, -math.huge}, f)
    local m = dle.tensor({math.mininteger}, {dtype = "int64"})
    assert.are.same({math.mininteger}, (m // -1):totable())
    assert.are.same({0}, (m % -1):totable())
    assert.are.same({0}, dle.fmod(m, -1):totable())
  end)

  it("% and // take numbers on either side and keep int64 exact", function()
    local a = dle.tensor({-7, 7}, {dtype = "int64"})
    assert.are.same({2, 1}, (a % 3):totable())
    assert.are.same({-3, 2}, (a // 3):totable())
    assert.are.same({-3, 2}, (20 // a):totable())
    assert.are.same({-1, 6}, (20 % a):totable())
    assert.are.same({"int64"}, {(a // 2):dtype()})
    H.assert_close((a % 2.5), {0.5, 2}, {dtype = "float32"})
  end)
end)

describe("new elementwise ops against PyTorch (float64)", function()
  local UN = {"tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc",
              "erfinv", "log2", "log10", "exp2", "trunc", "frac", "nan_to_num"}
  local BIN = {"atan2", "fmod", "remainder", "floor_divide", "fmax", "fmin", "hypot", "logaddexp", "copysign"}
  local function input(name)
    local lo, hi = -0.95, 0.95
    if name == "acosh" then lo, hi = 1.05, 4 elseif name == "log2" or name == "log10" then lo, hi = 0.1, 4 end
    return dle.rand({3, 5}, {dtype = "float64"}) * (hi - lo) + lo
  end

  it("values and gradients of the unary and binary ops match torch", function()
    if H.without_torch(pending) then return end
    dle.manual_seed(17)
    local py, want = {"import torch"}, {}
    local function emit(expr_torch, y, grads)
      py[#py + 1] = "print(' '.join('%.17g' % v for v in (" .. expr_torch .. ").reshape(-1).tolist()))"
      want[#want + 1] = y:reshape(-1):totable()
      for _, g in ipairs(grads) do
        py[#py + 1] = "print(' '.join('%.17g' % v for v in " .. g[1] .. ".reshape(-1).tolist()))"
        want[#want + 1] = g[2]:reshape(-1):totable()
      end
    end
    for _, name in ipairs(UN) do
      local x = input(name):requires_grad_(true)
      local y = dle[name](x)
      local g = name == "trunc" and dle.zeros_like(x) or dle.grad(y:sum(), {x})[1] -- trunc: no gradient
      py[#py + 1] = "x = " .. H.torch_literal(x:detach()) .. ".requires_grad_()"
      py[#py + 1] = "y = torch." .. name .. "(x); y.sum().backward()" ..
        (name == "trunc" and "; x.grad = torch.zeros_like(x)" or "")
      emit("y.detach()", y:detach(), {{"x.grad", g}})
    end
    for _, name in ipairs(BIN) do
      local a = (dle.rand({3, 5}, {dtype = "float64"}) * 6 - 3):requires_grad_(true)
      local b = (dle.rand({5}, {dtype = "float64"}) * 2 + 0.5):requires_grad_(true) -- broadcast
      if name == "copysign" then b = (b - 1.5):detach():requires_grad_(true) end
      local y = dle[name](a, b)
      local ga = name == "floor_divide" and dle.zeros_like(a) or dle.grad(y:sum(), {a, b})[1]
      local gb = name == "floor_divide" and dle.zeros_like(b) or dle.grad(dle[name](a, b):sum(), {a, b})[2]
      py[#py + 1] = "a = " .. H.torch_literal(a:detach()) .. ".requires_grad_()"
      py[#py + 1] = "b = " .. H.torch_literal(b:detach()) .. ".requires_grad_()"
      if name == "floor_divide" then
        py[#py + 1] = "y = torch.div(a, b, rounding_mode='floor')"
        py[#py + 1] = "a.grad = torch.zeros_like(a); b.grad = torch.zeros_like(b)"
      else
        py[#py + 1] = "y = torch." .. name .. "(a, b); y.sum().backward()"
      end
      emit("y.detach()", y:detach(), {{"a.grad", ga}, {"b.grad", gb}})
    end
    local out = H.run_python(py)
    assert.are.equal(#want, #out)
    for i, w in ipairs(want) do H.assert_torch_numbers(w, out[i], 1e-9, "line " .. i) end
  end)
end)

describe("lerp, addcmul and addcdiv (compositions)", function()
  local function T(v) return dle.tensor(v, {dtype = "float64"}) end

  it("compute input + w (end - input), input + v t1 t2, input + v t1 / t2, broadcasting, strided", function()
    local x = T({{1, 2, 3}, {4, 5, 6}})
    local e = T({{3, 2, 1}, {0, 0, 0}}):t():contiguous():t() -- transposed storage
    H.assert_close(dle.lerp(x, e, 0.25), {{1.5, 2, 2.5}, {3, 3.75, 4.5}}, {dtype = "float64"})
    H.assert_close(x:lerp(e, T({0, 0.5, 1})), {{1, 2, 1}, {4, 2.5, 0}}, {dtype = "float64"})
    H.assert_close(dle.addcmul(x, x, T({1, 2, 3}), {value = 0.5}), {{1.5, 4, 7.5}, {6, 10, 15}}, {dtype = "float64"})
    H.assert_close(x:addcdiv(x:narrow(2, 1, 1), T({2, 4, 8})), {{1.5, 2.25, 3.125}, {6, 6, 6.5}}, {dtype = "float64"})
  end)

  it("in-place forms write into input and return it", function()
    local x = T({1, 2})
    assert.are.equal(x, x:addcmul_(T({2, 2}), T({3, 1}), {value = -1}))
    assert.are.same({-5, 0}, x:totable())
    x:lerp_(T({5, 10}), 0.5)
    assert.are.same({0, 5}, x:totable())
    x:addcdiv_(T({1, 1}), T({4, 2}))
    assert.are.same({0.25, 5.5}, x:totable())
  end)

  it("are differentiable in every tensor argument (gradcheck, both modes)", function()
    local r = function(...) return dle.randn({...}, {dtype = "float64"}) end
    H.gradcheck(function(a, b, w) return dle.lerp(a, b, w) end, {r(3, 4), r(3, 4), r(4)})
    H.gradcheck(function(a, b, c) return dle.addcmul(a, b, c, {value = 0.7}) end, {r(3, 4), r(4), r(3, 1)})
    H.gradcheck(function(a, b, c) return dle.addcdiv(a, b, c, {value = -2}) end, {r(3, 4), r(3, 4), r(4):abs() + 0.5})
  end)

  it("bad arguments are errors naming the function and the argument", function()
    local x = T({1, 2})
    H.assert_error(function() return dle.addcmul(x, x, x, {valeu = 1}) end, "addcmul", "valeu")
    H.assert_error(function() return dle.addcdiv(x, x, "y") end, "addcdiv", "tensor2")
    H.assert_error(function() return dle.lerp(x, x, "w") end, "lerp", "weight")
    H.assert_error(function() return dle.lerp(x, T({1, 2, 3}), 0.5) end, "lerp", "{2}", "{3}")
  end)
end)
