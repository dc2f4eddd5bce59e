-- covers: neg abs sign exp log expm1 log1p sqrt rsqrt reciprocal sin cos tanh sigmoid relu gelu
-- covers: gelu_grad gelu_backward silu pow_scalar clamp add sub mul div pow maximum minimum where copy
-- covers: frac tan asin acos atan sinh cosh asinh acosh atanh erf erfc erfinv log2 log10 exp2 nan_to_num
-- covers: atan2 fmod remainder fmax fmin hypot logaddexp copysign
-- grad_elementwise_spec.lua — gradient rules of the elementwise family (unary, binary, where)
-- and of copy: reverse and forward mode against central finite differences in float64
-- (dle.gradcheck with forward = true) on odd-shaped inputs, broadcast operands, numbers as
-- operands, non-contiguous (transposed, narrowed) inputs and every attribute variant
-- (pow_scalar exponents, clamp with one or both bounds); the PyTorch conventions at
-- non-differentiable points (relu'(0) = abs'(0) = 0, clamp passes the gradient at its bounds,
-- maximum/minimum split ties evenly); numerical stability at large inputs; double backward
-- (create_graph) against finite differences of the gradient and closed forms; the seed
-- examples of the issue.
local dle = require("dle")
local H = require("helpers")

local F64 = {dtype = "float64"}

local check = H.gradcheck  -- dle.gradcheck in both modes (forward = false: reverse only)

--- f(inputs...) -> tensor; returns a function giving all of f's gradients (for the sum of f's
-- output) with create_graph, so gradcheck of it (reverse mode: check2) compares second
-- derivatives with finite differences of the gradient.
local function gradients_of(f)
  return H.gradients_of(function(...) return f(...):sum() end)
end

local function check2(f, inputs) check(gradients_of(f), inputs, {forward = false}) end

local function randn(...) return dle.randn({...}, F64) end

--- Normal values pushed at least `gap` away from 0 (for abs, sign, relu, ...).
local function away0(gap, ...)
  local x = randn(...)
  return x:sign() * (x:abs() + gap)
end

--- Values in [lo, hi).
local function uniform(lo, hi, ...)
  return dle.rand({...}, F64) * (hi - lo) + lo
end

--- b with |a - b| >= gap everywhere (b broadcasts to a's shape when a's shape is given).
local function distinct_from(a, gap)
  local r = randn(table.unpack(a:shape()))
  return a + r:sign() * (r:abs() + gap)
end

local function close(a, b, tol)
  tol = tol or 1e-9
  assert(math.abs(a - b) <= tol * (1 + math.abs(b)), string.format("expected %.12g, got %.12g", b, a))
end

local function all_close(t, expected, tol)
  local got = t:contiguous():view(-1):totable()
  local want = type(expected) == "table" and expected or nil
  for i, v in ipairs(got) do close(v, want and want[i] or expected, tol) end
end

local function leaf(values) return dle.tensor(values, {dtype = "float64", requires_grad = true}) end

describe("elementwise gradients", function()
  before_each(function() dle.manual_seed(1234) end)

  -- ------------------------------------------------------------------ seed examples (the issue)
  describe("seed examples", function()
    local function y_of(x1, x2) return dle.log(x1) + x1 * x2 - dle.sin(x2) end

    it("y = ln(x1) + x1 x2 - sin(x2) at (2, 5): value and dy/dx1, dy/dx2 by reverse mode", function()
      local x1, x2 = leaf({2}), leaf({5})
      local y = y_of(x1, x2)
      close(y:item(), math.log(2) + 10 - math.sin(5), 1e-12)
      close(y:item(), 11.652, 1e-4)
      local g = dle.grad(y, {x1, x2})
      close(g[1]:item(), 5.5, 1e-12)
      close(g[2]:item(), 2 - math.cos(5), 1e-12)
    end)

    it("y = ln(x1) + x1 x2 - sin(x2) at (2, 5): dy/dx1 = 5.5 and dy/dx2 = 2 - cos 5 by forward mode", function()
      local x1, x2 = dle.tensor({2}, F64), dle.tensor({5}, F64)
      local y, t1 = dle.jvp(y_of, {x1, x2}, {dle.ones_like(x1), dle.zeros_like(x2)})
      close(y:item(), 11.652, 1e-4)
      close(t1:item(), 5.5, 1e-12)
      local _, t2 = dle.jvp(y_of, {x1, x2}, {dle.zeros_like(x1), dle.ones_like(x2)})
      close(t2:item(), 2 - math.cos(5), 1e-12)
    end)

    it("f = (exp(v1) + 1) exp(v1): f' = 2 exp(2 v1) + exp(v1) by both modes and gradcheck", function()
      local f = function(v) local e = dle.exp(v) return (e + 1) * e end
      for _, v in ipairs({-1.5, 0, 0.7}) do
        local want = 2 * math.exp(2 * v) + math.exp(v)
        local x = leaf({v})
        close(dle.grad(f(x), {x})[1]:item(), want, 1e-12)
        local _, t = dle.jvp(f, {dle.tensor({v}, F64)}, {dle.ones({1}, F64)})
        close(t:item(), want, 1e-12)
      end
      check(f, {randn(3, 5)})
    end)

    it("d2/dx2 of x^3 at 1.5 is 9 (create_graph), for x^3 as pow_scalar, x*x*x and pow", function()
      for _, cube in ipairs({function(x) return x ^ 3 end, function(x) return x * x * x end,
                             function(x) return dle.pow(x, dle.tensor(3.0, F64)) end}) do
        local x = leaf({1.5})
        local g = dle.grad(cube(x), {x}, {create_graph = true})[1]
        close(g:item(), 3 * 1.5 ^ 2, 1e-12)
        local h = dle.grad(g, {x})[1]
        close(h:item(), 9, 1e-12)
      end
    end)
  end)

  -- ------------------------------------------------------------------ unary ops
  describe("unary", function()
    -- name -> input maker (values where the op is smooth) and the op
    local UNARY = {
      {"neg", function() return randn(3, 5) end},
      {"abs", function() return away0(0.1, 3, 5) end},
      {"sign", function() return away0(0.1, 3, 5) end},
      {"exp", function() return randn(3, 5) end},
      {"log", function() return uniform(0.2, 3, 3, 5) end},
      {"expm1", function() return randn(3, 5) end},
      {"log1p", function() return uniform(-0.7, 3, 3, 5) end},
      {"sqrt", function() return uniform(0.2, 3, 3, 5) end},
      {"rsqrt", function() return uniform(0.3, 3, 3, 5) end},
      {"reciprocal", function() return away0(0.3, 3, 5) end},
      {"sin", function() return randn(3, 5) * 2 end},
      {"cos", function() return randn(3, 5) * 2 end},
      {"tanh", function() return randn(3, 5) end},
      {"sigmoid", function() return randn(3, 5) * 2 end},
      {"relu", function() return away0(0.1, 3, 5) end},
      {"gelu", function() return randn(3, 5) * 2 end},
      {"gelu_grad", function() return randn(3, 5) * 2 end},  -- gelu's backward op
      {"silu", function() return randn(3, 5) * 2 end},
      {"frac", function() return uniform(0.1, 0.9, 3, 5) + dle.randint(-3, 3, {3, 5}):double() end},
      {"tan", function() return uniform(-1.3, 1.3, 3, 5) end},
      {"asin", function() return uniform(-0.9, 0.9, 3, 5) end},
      {"acos", function() return uniform(-0.9, 0.9, 3, 5) end},
      {"atan", function() return randn(3, 5) * 2 end},
      {"sinh", function() return randn(3, 5) * 2 end},
      {"cosh", function() return randn(3, 5) * 2 end},
      {"asinh", function() return randn(3, 5) * 2 end},
      {"acosh", function() return uniform(1.1, 4, 3, 5) end},
      {"atanh", function() return uniform(-0.9, 0.9, 3, 5) end},
      {"erf", function() return randn(3, 5) * 1.5 end},
      {"erfc", function() return randn(3, 5) * 1.5 end},
      {"erfinv", function() return uniform(-0.9, 0.9, 3, 5) end},
      {"log2", function() return uniform(0.2, 3, 3, 5) end},
      {"log10", function() return uniform(0.2, 3, 3, 5) end},
      {"exp2", function() return randn(3, 5) end},
      {"nan_to_num", function() return randn(3, 5) end},
    }

    for _, case in ipairs(UNARY) do
      local name, make = case[1], case[2]
      it(name .. ": reverse and forward mode match finite differences on 3x5", function()
        check(dle[name], {make()})
      end)
      it(name .. ": on transposed and narrowed (non-contiguous) inputs", function()
        local x = make() -- 3x5
        check(function(t) return dle[name](t:t()) end, {x})
        check(function(t) return dle[name](t:narrow(2, 2, 3)) end, {x})
      end)
    end

    it("gelu and its backward op match finite differences from the tails through 0", function()
      local x = dle.tensor({-9, -6, -3, -1, -0.51, -0.5, -0.49, -0.2, 0, 1e-4, 0.3, 0.49, 0.5, 0.51, 2, 5, 8}, F64)
      check(dle.gelu, {x})
      check(dle.gelu_grad, {x})
    end)

    it("gelu_grad is gelu' = Phi(x) + x phi(x) in float64 and float32", function()
      local xs = {-7, -2.5, -1, -0.3, 0, 0.3, 1, 2.5, 7}
      -- Phi(x) = gelu(x) / x from gelu's own (libm erf) float64 kernel, 1/2 at 0
      local gelu = dle.tensor(xs, F64):gelu():totable()
      for _, dt in ipairs({"float64", "float32"}) do
        local g = dle.tensor(xs, {dtype = dt}):gelu_grad():totable()
        for i, x in ipairs(xs) do
          local phi = math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
          local Phi = x == 0 and 0.5 or gelu[i] / x
          close(g[i], Phi + x * phi, dt == "float64" and 1e-12 or 1e-6)
        end
      end
    end)

    it("gelu_backward(x, g) = g gelu'(x): both modes, broadcast g, non-contiguous operands", function()
      local x = randn(3, 5) * 2
      check(dle.gelu_backward, {x, randn(3, 5)})
      check(dle.gelu_backward, {x, randn(5)})            -- g broadcast along rows
      check(dle.gelu_backward, {randn(3, 1) * 2, randn(3, 5)})  -- x broadcast
      check(function(a, b) return dle.gelu_backward(a:t(), b:narrow(2, 2, 5)) end, {randn(5, 3), randn(3, 7)})
    end)

    it("gelu_backward equals g * gelu_grad(x) in float32 and float64, on the vector and strided paths", function()
      -- 4099 elements: full AVX2 vectors plus a masked tail; the transposed and broadcast cases
      -- go through the kernels' strided path
      for _, dt in ipairs({"float64", "float32"}) do
        local x, g = dle.randn({4099}, {dtype = dt}) * 3, dle.randn({4099}, {dtype = dt})
        local cases = {
          {x, g},
          {x:view(1, 4099):expand(3, 4099):t(), g:view(4099, 1)},
          {x:narrow(1, 2, 4000):view(40, 100):t(), g:narrow(1, 1, 4000):view(100, 40)},
        }
        for i, c in ipairs(cases) do
          local got, want = dle.gelu_backward(c[1], c[2]), c[2] * c[1]:gelu_grad()
          assert.are.same(want:shape(), got:shape())
          assert.are.equal(dt, got:dtype())
          local err = (got - want):abs():max():item()
          assert(err <= (dt == "float64" and 1e-14 or 1e-6) * (1 + want:abs():max():item()),
            dt .. " case " .. i .. ": max error " .. err)
        end
      end
    end)

    it("gelu's gradient is one gelu_backward op (no separate multiply)", function()
      local x = dle.randn({4, 3}, {requires_grad = true})
      local y = x:gelu()
      local g = dle.randn(4, 3)
      local want = dle.gelu_backward(x:detach(), g)
      assert.are.same(want:totable(), dle.grad(y, {x}, {grad_outputs = {g}})[1]:totable())
    end)

    it("gelu' equals Phi(x) + x phi(x) (closed form at 0 and large |x|)", function()
      local x = leaf({0, 40, -40})
      local g = dle.grad(dle.gelu(x):sum(), {x})[1]:totable()
      close(g[1], 0.5, 1e-15)
      close(g[2], 1, 1e-15)
      close(g[3], 0, 1e-15)
    end)

    it("sign has a zero gradient in both modes", function()
      local x = leaf({-2, 0.5, 3})
      local g = dle.grad(dle.sign(x):sum(), {x}, {allow_unused = true})[1]
      if g then all_close(g, 0) end
      local _, t = dle.jvp(dle.sign, {dle.tensor({-2, 0.5}, F64)}, {dle.ones({2}, F64)})
      all_close(t, 0)
    end)

    it("relu'(0) = 0 and abs'(0) = 0 like PyTorch; sqrt'(0) = inf", function()
      local x = leaf({0, 2, -2})
      all_close(dle.grad(dle.relu(x):sum(), {x})[1], {0, 1, 0})
      all_close(dle.grad(dle.abs(x):sum(), {x})[1], {0, 1, -1})
      local z = leaf({0})
      assert.are.equal(math.huge, dle.grad(dle.sqrt(z):sum(), {z})[1]:item())
    end)

    it("sigmoid, tanh, silu, gelu, exp-free rules stay finite at large |x| (no NaN)", function()
      local x = leaf({-1000, -50, 50, 1000})
      for _, name in ipairs({"sigmoid", "tanh", "silu", "gelu", "relu"}) do
        local g = dle.grad(dle[name](x):sum(), {x})[1]:totable()
        for i, v in ipairs(g) do
          assert(v == v and math.abs(v) < math.huge, name .. "' not finite at element " .. i)
        end
      end
      -- sigmoid' = s (1 - s) from the output: exactly 0 far out, 1/4 at 0
      local s = leaf({-1000, 0, 1000})
      all_close(dle.grad(dle.sigmoid(s):sum(), {s})[1], {0, 0.25, 0}, 1e-15)
    end)

    it("pow_scalar: every exponent variant (2, 3, 0.5, -1.5, 1, 2.5 and integers on negatives)", function()
      local pos = uniform(0.3, 2, 3, 5)
      for _, p in ipairs({2, 3, 0.5, -1.5, 1, 2.5, -2}) do
        check(function(t) return t ^ p end, {pos})
        check(function(t) return t:pow(p) end, {pos:t()})
      end
      for _, p in ipairs({2, 3, -1}) do check(function(t) return t ^ p end, {away0(0.3, 3, 5)}) end
    end)

    it("pow_scalar with exponent 0 has a zero gradient (no NaN at x = 0, like PyTorch)", function()
      local x = leaf({0, 2, -3})
      local g = dle.grad((x ^ 0):sum(), {x}, {allow_unused = true})[1]
      if g then all_close(g, 0) end
      check(function(t) return t ^ 0 end, {randn(3, 5)})
    end)

    it("clamp: both bounds, lower only, upper only, on contiguous and transposed inputs", function()
      -- values at least 0.05 away from the bounds -0.5 and 0.5
      local x = randn(3, 5)
      x = dle.where(x:sub(0.5):abs():lt(0.05), x + 0.1, x)
      x = dle.where(x:add(0.5):abs():lt(0.05), x - 0.1, x)
      check(function(t) return t:clamp(-0.5, 0.5) end, {x})
      check(function(t) return t:clamp(-0.5) end, {x})
      check(function(t) return t:clamp(nil, 0.5) end, {x})
      check(function(t) return dle.clamp(t:t(), -0.5, 0.5) end, {x})
    end)

    it("clamp passes the gradient where lo <= x <= hi, bounds included (like PyTorch)", function()
      local x = leaf({-2, -1, 0, 1, 2})
      all_close(dle.grad(x:clamp(-1, 1):sum(), {x})[1], {0, 1, 1, 1, 0})
      local _, t = dle.jvp(function(v) return v:clamp(-1, 1) end, {dle.tensor({-2, -1, 0, 1, 2}, F64)},
                           {dle.ones({5}, F64)})
      all_close(t, {0, 1, 1, 1, 0})
    end)

    it("in-place unary ops (tanh_, sigmoid_, relu_, exp_, sqrt_) differentiate through the saved output", function()
      for _, name in ipairs({"tanh", "sigmoid", "relu", "exp", "sqrt"}) do
        check(function(t) local c = t * 1 c[name .. "_"](c) return c end, {uniform(0.2, 2, 3, 5)})
      end
    end)

    it("in-place ops that need their overwritten input: forward mode errors instead of a wrong tangent", function()
      local x, one = dle.tensor({0.5, 1}, F64), dle.ones({2}, F64)
      local ok, err = pcall(dle.jvp, function(t) local c = t * 1 c:sin_() return c end, {x}, {one})
      assert.is_false(ok)
      assert.matches("sin_: forward%-mode AD of this in%-place op needs the value of input 1", tostring(err))
      ok, err = pcall(dle.jvp, function(t) local c = t * 1 c:mul_(t) return c end, {x}, {one})
      assert.is_false(ok)
      assert.matches("mul_", tostring(err))
      -- scaling in place reads only the constant: fine
      local _, t = dle.jvp(function(v) local c = v * 1 c:mul_(3) return c end, {x}, {one})
      all_close(t, {3, 3})
      -- reverse mode: the saved input's version check catches it
      local l = leaf({0.5, 1})
      ok, err = pcall(function() local c = l * 1 c:sin_() return dle.grad(c:sum(), {l}) end)
      assert.is_false(ok)
      assert.matches("modified by an in%-place operation", tostring(err))
    end)

    it("a float32 input gets a float32 gradient", function()
      local x = dle.randn({3, 5}):requires_grad_(true)
      local g = dle.grad(dle.gelu(x):sum(), {x})[1]
      assert.are.equal("float32", g:dtype())
    end)
  end)

  -- ------------------------------------------------------------------ binary ops
  describe("binary", function()
    it("add, sub, mul: broadcast operands (3x5 with 5, 3x1, 1x5) and numbers", function()
      local a = randn(3, 5)
      for _, op in ipairs({"add", "sub", "mul"}) do
        for _, b in ipairs({randn(5), randn(3, 1), randn(1, 5), randn(3, 5)}) do
          check(function(x, y) return dle[op](x, y) end, {a, b})
          check(function(x, y) return dle[op](y, x) end, {a, b})
        end
        check(function(x) return dle[op](x, 2.5) end, {a})
        check(function(x) return dle[op](2.5, x) end, {a})
      end
    end)

    it("neg, add, sub, mul on transposed and narrowed operands", function()
      local a, b = randn(5, 3), randn(3, 7)
      check(function(x, y) return x:t() * y:narrow(2, 3, 5) - (-x:t()) + y:narrow(2, 1, 5) end, {a, b})
    end)

    it("div: broadcast operands, numbers on either side, non-contiguous", function()
      local a = randn(3, 5)
      for _, b in ipairs({away0(0.5, 5), away0(0.5, 3, 1), away0(0.5, 3, 5)}) do
        check(function(x, y) return x / y end, {a, b})
        check(function(x, y) return y / x end, {away0(0.5, 3, 5), b})
      end
      check(function(x) return x / 3 end, {a})
      check(function(x) return 3 / x end, {away0(0.5, 3, 5)})
      check(function(x, y) return x:t() / y:narrow(1, 2, 5) end, {a, away0(0.5, 7, 3)})
    end)

    it("pow (tensor ^ tensor): d/da = b a^(b-1), d/db = a^b log a, with broadcasting", function()
      local a = uniform(0.3, 2, 3, 5)
      check(function(x, y) return dle.pow(x, y) end, {a, randn(3, 5)})
      check(function(x, y) return dle.pow(x, y) end, {a, randn(5)})
      check(function(x, y) return dle.pow(x, y) end, {uniform(0.3, 2, 3, 1), randn(3, 5)})
      check(function(x, y) return dle.pow(x:t(), y) end, {uniform(0.3, 2, 5, 3), randn(1, 5)})
      check(function(y) return dle.pow(2, y) end, {randn(3, 5)}) -- number ^ tensor
      local x, y = leaf({2}), leaf({3})
      local g = dle.grad(dle.pow(x, y), {x, y})
      close(g[1]:item(), 3 * 4, 1e-12)
      close(g[2]:item(), 8 * math.log(2), 1e-12)
    end)

    it("pow at a = 0: d/db is 0 (no NaN) and d/da is 0 where b = 0, like PyTorch", function()
      local x, y = leaf({0, 0, 2}), leaf({2, 0, 0})
      local g = dle.grad(dle.pow(x, y):sum(), {x, y})
      all_close(g[1], {0, 0, 0})
      all_close(g[2], {0, 0, math.log(2)})
    end)

    it("maximum and minimum: distinct values, broadcast operands, numbers, non-contiguous", function()
      local a = randn(3, 5)
      for _, op in ipairs({"maximum", "minimum"}) do
        check(function(x, y) return dle[op](x, y) end, {a, distinct_from(a, 0.1)})
        local r = randn(5)
        local b = dle.where((a - r):abs():lt(0.1):sum(1):gt(0), r + 10, r) -- no near-ties
        check(function(x, y) return dle[op](x, y) end, {a, b})
        check(function(x) return dle[op](x, 0) end, {away0(0.1, 3, 5)})
        check(function(x, y) return dle[op](x:t(), y) end, {a, distinct_from(a:t(), 0.1)})
      end
    end)

    -- the new binary ops: a, b makers (3x5 with a broadcast 5) away from their kinks
    local BINARY_NEW = {
      {"atan2", function() return randn(3, 5) end, function() return away0(0.3, 5) end},
      {"hypot", function() return away0(0.3, 3, 5) end, function() return away0(0.3, 5) end},
      {"logaddexp", function() return randn(3, 5) * 3 end, function() return randn(5) * 3 end},
      {"copysign", function() return away0(0.2, 3, 5) end, function() return away0(0.2, 5) end},
      -- a / b kept 0.1 away from whole numbers, where fmod and remainder jump
      {"fmod", function() return dle.randint(-4, 4, {3, 5}):double() * 1.5 + uniform(0.15, 1.35, 3, 5) end,
       function() return dle.full({5}, 1.5, F64) + uniform(-0.01, 0.01, 5) end},
      {"remainder", function() return dle.randint(-4, 4, {3, 5}):double() * 1.5 + uniform(0.15, 1.35, 3, 5) end,
       function() return dle.full({5}, -1.5, F64) + uniform(-0.01, 0.01, 5) end},
      {"fmax", function() return randn(3, 5) end, function() return randn(5) + 10 * dle.sign(randn(5)) end},
      {"fmin", function() return randn(3, 5) end, function() return randn(5) + 10 * dle.sign(randn(5)) end},
    }
    for _, case in ipairs(BINARY_NEW) do
      local name, ma, mb = case[1], case[2], case[3]
      it(name .. ": both modes on broadcast operands, reversed, a number operand and transposed inputs", function()
        check(dle[name], {ma(), mb()})
        check(function(x, y) return dle[name](x:t(), y:view(5, 1)) end, {ma(), mb()})
        if name ~= "fmod" and name ~= "remainder" then
          check(function(y, x) return dle[name](x, y) end, {ma(), mb()})
        end
        check(function(x) return dle[name](x, 1.75) end, {ma()})
      end)
    end

    it("fmax and fmin give a tie and a NaN other operand's gradient to a (PyTorch's rule)", function()
      for _, op in ipairs({"fmax", "fmin"}) do
        local x, y = leaf({1, 2, 5}), leaf({1, 0 / 0, 3})
        local g = dle.grad(dle[op](x, y):sum(), {x, y})
        all_close(g[1], {1, 1, op == "fmax" and 1 or 0})
        all_close(g[2], {0, 0, op == "fmax" and 0 or 1})
      end
    end)

    it("copysign passes no gradient to its sign operand and 0 at a = 0; nan_to_num none at nan and inf", function()
      local a, b = leaf({0, 2, -3}), leaf({-1, -1, 1})
      local g = dle.grad(dle.copysign(a, b):sum(), {a, b})
      all_close(g[1], {0, -1, -1})
      all_close(g[2], {0, 0, 0})
      local x = leaf({0 / 0, math.huge, -math.huge, 2})
      all_close(dle.grad(x:nan_to_num():sum(), {x})[1], {0, 0, 0, 1})
    end)

    it("erfinv, tan, erf, atan2, logaddexp: second derivatives match finite differences (create_graph)", function()
      for _, name in ipairs({"erfinv", "tan", "erf", "asin", "atanh", "exp2"}) do
        check2(dle[name], {uniform(-0.8, 0.8, 2, 3)})
      end
      check2(dle.atan2, {randn(2, 3), away0(0.3, 2, 3)})
      check2(dle.logaddexp, {randn(2, 3), randn(2, 3)})
      check2(dle.hypot, {away0(0.3, 2, 3), away0(0.3, 2, 3)})
    end)

    it("maximum and minimum split the gradient of ties evenly (1/2 each, like PyTorch)", function()
      for _, op in ipairs({"maximum", "minimum"}) do
        local x, y = leaf({1, 2, 3}), leaf({1, 1, 4})
        local g = dle.grad(dle[op](x, y):sum(), {x, y})
        local gx = op == "maximum" and {0.5, 1, 0} or {0.5, 0, 1}
        local gy = op == "maximum" and {0.5, 0, 1} or {0.5, 1, 0}
        all_close(g[1], gx)
        all_close(g[2], gy)
        local _, t = dle.jvp(dle[op], {dle.tensor({1, 2, 3}, F64), dle.tensor({1, 1, 4}, F64)},
                             {dle.ones({3}, F64), dle.ones({3}, F64)})
        all_close(t, {1, 1, 1})
      end
    end)

    it("mul and div by a Lua number: the number's constant operand needs no gradient", function()
      local x = leaf({1, 2, 3})
      local g = dle.grad(((x * 2) / 4):sum(), {x})[1]
      all_close(g, {0.5, 0.5, 0.5})
    end)

    it("integer operands: x / int64 and int64 ^ x get full-precision float64 gradients", function()
      local x = leaf({1, 2})
      local n = dle.tensor({3, 7}, {dtype = "int64"})
      all_close(dle.grad((x / n):sum(), {x})[1], {1 / 3, 1 / 7}, 1e-15)
      all_close(dle.grad(dle.pow(n, x):sum(), {x})[1], {3 * math.log(3), 49 * math.log(7)}, 1e-15)
      all_close(dle.grad(dle.pow(x, n):sum(), {x})[1], {3, 7 * 2 ^ 6}, 1e-15)
      local _, t = dle.jvp(function(v) return v / n end, {dle.tensor({1, 2}, F64)}, {dle.ones({2}, F64)})
      all_close(t, {1 / 3, 1 / 7}, 1e-15)
    end)

    it("float16, bfloat16 and float32 inputs get gradients of their dtype from every rule", function()
      for _, dt in ipairs({"float32", "float16", "bfloat16"}) do
        local x = (dle.rand({4, 5}) + 0.2):to(dt):requires_grad_(true)
        for _, name in ipairs({"abs", "exp", "log", "expm1", "log1p", "sqrt", "rsqrt", "reciprocal", "sin",
                               "cos", "tanh", "sigmoid", "relu", "gelu", "silu"}) do
          assert.are.equal(dt, dle.grad(dle[name](x):sum(), {x})[1]:dtype(), name)
        end
        local y = x ^ 2.5 + x:clamp(0.3, 0.8) + dle.pow(x, x) + dle.maximum(x, 0.5) + dle.minimum(x, 0.5) +
                  x / (x + 1) + dle.where(x:gt(0.5), x, 0)
        local g = dle.grad(y:sum(), {x})[1]
        assert.are.equal(dt, g:dtype())
        local ref = dle.grad(dle.gelu(x:double()):sum(), {x})[1]:double()
        local low = dle.grad(dle.gelu(x):sum(), {x})[1]:double()
        assert((low - ref):abs():amax():item() < (dt == "float32" and 1e-6 or 2e-2), dt .. " gelu'")
      end
    end)

    it("mixed dtypes: float32 op float64 gives each input a gradient of its own dtype", function()
      local a = dle.randn({3, 5}):requires_grad_(true)
      local b = dle.randn({5}, F64):requires_grad_(true)
      local g = dle.grad((a / (b:abs() + 1)):sum(), {a, b})
      assert.are.equal("float32", g[1]:dtype())
      assert.are.equal("float64", g[2]:dtype())
    end)
  end)

  -- ------------------------------------------------------------------ where
  describe("where", function()
    it("gradient flows to a where cond holds, to b elsewhere; with broadcast cond, a and b", function()
      local a = randn(3, 5)
      local cond = randn(3, 5):gt(0)
      check(function(x, y) return dle.where(cond, x, y) end, {a, randn(3, 5)})
      check(function(x, y) return dle.where(cond, x, y) end, {a, randn(5)})
      local row = randn(5):gt(0)
      check(function(x, y) return dle.where(row, x, y) end, {randn(3, 1), randn(3, 5)})
      check(function(x) return dle.where(cond, x, 0) end, {a})
      check(function(y) return dle.where(cond, 1.5, y) end, {a})
      check(function(x, y) return dle.where(cond:t(), x:t(), y) end, {a, randn(5, 3)})
    end)

    it("closed form: ones where cond for a, elsewhere for b", function()
      local a, b = leaf({1, 2, 3}), leaf({4, 5, 6})
      local cond = dle.tensor({true, false, true})
      local g = dle.grad(dle.where(cond, a, b):sum(), {a, b})
      all_close(g[1], {1, 0, 1})
      all_close(g[2], {0, 1, 0})
    end)
  end)

  -- ------------------------------------------------------------------ copy
  describe("copy", function()
    it("clone and contiguous copies of non-contiguous inputs", function()
      check(function(x) return x:clone() end, {randn(3, 5)})
      check(function(x) return x:t():clone() end, {randn(3, 5)})
      check(function(x) return x:t():contiguous() end, {randn(3, 5)})
    end)

    it("a dtype-converting copy gets the gradient cast back (float64 -> float32 -> float64)", function()
      check(function(x) return x:to("float32"):to("float64") end, {randn(3, 5)},
            {eps = 1e-3, atol = 1e-3, rtol = 1e-3})
      local x = leaf({1, 2, 3})
      local y = x:to("float32")
      assert.are.equal("float32", y:dtype())
      local g = dle.grad((y * y):sum(), {x})[1]
      assert.are.equal("float64", g:dtype())
      all_close(g, {2, 4, 6}, 1e-6)
    end)

    it("copy_ into an existing tensor is recorded, with the source broadcast to it", function()
      check(function(x) local d = dle.zeros({3, 5}, F64) d:copy_(x) return d end, {randn(3, 5)})
      check(function(x) local d = dle.zeros({3, 5}, F64) d:copy_(x) return d end, {randn(5)})
      check(function(x) local d = dle.zeros({5, 3}, F64) d:copy_(x:t()) return d * d end, {randn(3, 5)})
      local x = leaf({1, 2, 3})
      local d = dle.zeros({2, 3}, F64)
      d:copy_(x)
      all_close(dle.grad(d:sum(), {x})[1], {2, 2, 2})
    end)
  end)

  -- ------------------------------------------------------------------ double backward
  describe("double backward (create_graph)", function()
    local SECOND = {
      {"abs", function() return away0(0.2, 3, 5) end},
      {"log", function() return uniform(0.3, 3, 3, 5) end},
      {"expm1", function() return randn(3, 5) end},
      {"log1p", function() return uniform(-0.6, 3, 3, 5) end},
      {"sqrt", function() return uniform(0.3, 3, 3, 5) end},
      {"rsqrt", function() return uniform(0.3, 3, 3, 5) end},
      {"reciprocal", function() return away0(0.4, 3, 5) end},
      {"sin", function() return randn(3, 5) end},
      {"cos", function() return randn(3, 5) end},
      {"tanh", function() return randn(3, 5) end},
      {"sigmoid", function() return randn(3, 5) end},
      {"relu", function() return away0(0.2, 3, 5) end},
      {"gelu", function() return randn(3, 5) * 2 end},
      {"silu", function() return randn(3, 5) * 2 end},
    }
    for _, case in ipairs(SECOND) do
      it(case[1] .. ": second derivatives match finite differences of the gradient", function()
        check2(function(x) return dle[case[1]](x) * x end, {case[2]()})
      end)
    end

    it("gelu_backward: second derivatives in x and g (gelu's own second derivative goes through it)", function()
      check2(function(x, g) return dle.gelu_backward(x, g) * x end, {randn(3, 5) * 2, randn(3, 5)})
      check2(function(x, g) return dle.gelu_backward(x, g) * g end, {randn(3, 5) * 2, randn(5)})
    end)

    it("pow_scalar and clamp: second derivatives", function()
      check2(function(x) return x ^ 3.5 end, {uniform(0.3, 2, 3, 5)})
      check2(function(x) return x:clamp(-0.5, 0.5) * x end, {uniform(0.1, 0.4, 3, 5)})
    end)

    it("div, pow, maximum, minimum, where: mixed second derivatives with broadcasting", function()
      local a = randn(3, 5)
      check2(function(x, y) return x / y end, {a, away0(0.5, 5)})
      check2(function(x, y) return dle.pow(x, y) end, {uniform(0.3, 2, 3, 5), randn(5)})
      check2(function(x, y) return dle.maximum(x, y) * x * y end, {a, distinct_from(a, 0.1)})
      check2(function(x, y) return dle.minimum(x, y) * x end, {a, distinct_from(a, 0.1)})
      local cond = randn(3, 5):gt(0)
      check2(function(x, y) return dle.where(cond, x * x, y * x) end, {a, randn(5)})
      check2(function(x) return x:to("float64"):clone() * x end, {randn(3, 5)})
    end)

    it("closed forms: tanh'' = -2 tanh (1 - tanh^2), sigmoid'' = s (1 - s)(1 - 2 s), log'' = -1/x^2", function()
      local v = 0.8
      local t, s = (math.exp(2 * v) - 1) / (math.exp(2 * v) + 1), 1 / (1 + math.exp(-v))
      for _, c in ipairs({{"tanh", -2 * t * (1 - t * t)}, {"sigmoid", s * (1 - s) * (1 - 2 * s)},
                          {"log", -1 / (v * v)},
                              {"gelu", math.exp(-v * v / 2) / math.sqrt(2 * math.pi) * (2 - v * v)}}) do
        local x = leaf({v})
        local g = dle.grad(dle[c[1]](x), {x}, {create_graph = true})[1]
        close(dle.grad(g, {x})[1]:item(), c[2], 1e-12)
      end
    end)
  end)

  it("the op table lists reverse and forward rules for every op this file covers", function()
    local mine = {}
    for line in io.lines((debug.getinfo(1, "S").source:match("^@(.*)$"))) do
      local ops = line:match("^%-%- covers:(.*)$")
      for op in (ops or ""):gmatch("[%w_]+") do mine[op] = true end
    end
    local seen = 0
    for _, o in ipairs(dle.core.op_table()) do
      if mine[o.name] then
        seen = seen + 1
        assert(o.differentiable and o.has_vjp and o.has_jvp, o.name .. " lacks a rule")
      end
    end
    assert.are.equal(55, seen)
  end)
end)
