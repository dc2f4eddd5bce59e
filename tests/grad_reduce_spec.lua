-- covers: sum mean prod var std logsumexp amax amin max min softmax log_softmax
-- grad_reduce_spec.lua — gradient rules (reverse and forward mode) of the reductions and of
-- softmax/log_softmax: float64 dle.gradcheck on small odd shapes over every dims/keepdim variant,
-- negative dims, several dims, all dims, non-contiguous and broadcast operands; prod with zeros;
-- var/std corrections; ties of amax/amin; max/min sending the gradient to the selected index;
-- large logits; softmax cross-entropy; double backward (create_graph) against finite differences
-- and closed forms.
local dle = require("dle")
local H = require("helpers")

local F64 = {dtype = "float64"}

-- Deterministic distinct float64 values (no ties, away from 0 unless lo/hi say otherwise).
local function vals(shape, seed, lo, hi)
  return dle.tensor(H.values(shape, {seed = seed, lo = lo, hi = hi}), F64)
end

local check = H.gradcheck

-- f(x) -> the gradient of sum(g(x) * w) with create_graph, so gradcheck of it checks the
-- second derivative (double backward) against finite differences of the gradient.
local function grad_of(g, w)
  return function(x)
    return dle.enable_grad(function()
      local y = g(x)
      return dle.grad((y * w):sum(), {x}, {create_graph = true})[1]
    end)
  end
end

local function all_finite(t)
  for _, v in ipairs(H.flat(t:totable())) do
    if v ~= v or v == math.huge or v == -math.huge then return false end
  end
  return true
end

-- The dims/keepdim variants every reduction over a list of dims is checked on.
local function variants(op)
  return {
    {"over all dims", {3, 5}, function(x) return x[op](x) end},
    {"over dim 2", {3, 5}, function(x) return x[op](x, 2) end},
    {"over dim 1 with keepdim", {3, 5}, function(x) return x[op](x, 1, true) end},
    {"over dim -1 with keepdim", {3, 5}, function(x) return x[op](x, -1, true) end},
    {"over dims {1,3} of a 3-D input", {2, 3, 4}, function(x) return x[op](x, {1, 3}) end},
    {"over dims {-1,-3} with keepdim", {2, 3, 4}, function(x) return x[op](x, {-1, -3}, true) end},
    {"over dim -2 of a 3-D input", {2, 3, 4}, function(x) return x[op](x, -2) end},
    {"of a transposed input", {3, 5}, function(x) return x:t()[op](x:t(), 2) end},
    {"of a narrowed input", {3, 5}, function(x) local v = x:narrow(2, 2, 3) return v[op](v, 1) end},
  }
end

local REDUCTIONS = {"sum", "mean", "prod", "var", "std", "logsumexp", "amax", "amin"}

describe("reduction gradients", function()
  for k, op in ipairs(REDUCTIONS) do
    for j, v in ipairs(variants(op)) do
      local name, shape, f = v[1], v[2], v[3]
      it(op .. " " .. name .. ": reverse and forward mode match finite differences", function()
        -- prod: magnitudes near 1 keep the products moderate
        local x = op == "prod" and vals(shape, 100 * k + j, 0.5, 1.5) or vals(shape, 100 * k + j)
        check(f, {x})
      end)
    end
    it(op .. " of a broadcast operand: gradients reach both inputs", function()
      local x, b = vals({3, 5}, 31 + k, 0.5, 1.5), vals({1, 5}, 61 + k, 0.5, 1.5)
      check(function(a, c) local s = a * c return s[op](s, 2) end, {x, b})
    end)
    it(op .. " of an expanded (stride 0) operand: gradient summed over the copies", function()
      local b = vals({1, 4}, 91 + k, 0.5, 1.5)
      check(function(c) local e = c:expand(3, 4) return e[op](e, {1, 2}) end, {b})
    end)
  end

  it("sum and mean of a 0-dim input", function()
    local x = dle.tensor(1.7, F64)
    check(function(t) return t:sum() end, {x})
    check(function(t) return t:mean() end, {x})
    local y = x:detach():requires_grad_(true)
    y:mean():backward()
    H.assert_close(y.grad, 1.0)
  end)

  it("mean: gradient is g / N in every reduced element", function()
    local x = vals({3, 5}, 7):requires_grad_(true)
    x:mean(2):backward(dle.tensor({1, 2, 3}, F64))
    H.assert_close(x.grad, H.build({3, 5}, function(i) return i[1] / 5 end))
  end)

  describe("prod with zeros", function()
    it("exactly one zero in a row: the zero gets the product of the others, the rest 0", function()
      local x = dle.tensor({{1.5, 0, -2, 0.5}, {0.7, 1.1, -1.3, 0.9}}, F64):requires_grad_(true)
      x:prod(2):sum():backward()
      H.assert_close(x.grad, {{0, 1.5 * -2 * 0.5, 0, 0},
                              {1.1 * -1.3 * 0.9, 0.7 * -1.3 * 0.9, 0.7 * 1.1 * 0.9, 0.7 * 1.1 * -1.3}},
                     {rtol = 1e-12, atol = 1e-12})
      assert.is_true(all_finite(x.grad))
    end)
    it("one zero: reverse and forward mode match finite differences", function()
      local x = dle.tensor({{1.5, 0, -2, 0.5, 1.2}, {0.7, 1.1, -1.3, 0.9, 0}, {0.6, 0.8, 1.3, -0.9, 1.4}}, F64)
      check(function(t) return t:prod(2) end, {x})
      check(function(t) return t:prod(-1, true) end, {x})
    end)
    it("two zeros in a slice: every gradient of that slice is 0", function()
      local x = dle.tensor({{1.5, 0, -2, 0, 1.2}, {0.7, 1.1, -1.3, 0.9, 1.1}}, F64)
      check(function(t) return t:prod(2) end, {x})
      local y = x:detach():requires_grad_(true)
      y:prod(2):sum():backward()
      H.assert_close(y.grad[1], {0, 0, 0, 0, 0})
    end)
    it("one zero, reduced over all dims and over dim 1", function()
      local x = dle.tensor({{1.5, 0.3, -2}, {0.7, 0, 1.3}, {1.1, 0.9, 0}}, F64)
      check(function(t) return t:prod() end, {x})
      check(function(t) return t:prod(1) end, {x})
    end)
  end)

  describe("var and std corrections", function()
    for _, c in ipairs({0, 1, 2}) do
      it("var with correction " .. c, function()
        check(function(t) return t:var(2, {correction = c}) end, {vals({3, 5}, 200 + c)})
        check(function(t) return t:var({correction = c}) end, {vals({3, 5}, 210 + c)})
      end)
      it("std with correction " .. c .. " and keepdim", function()
        check(function(t) return t:std(1, true, {correction = c}) end, {vals({3, 5}, 220 + c)})
        check(function(t) return t:std({-1, 1}, {correction = c}) end, {vals({2, 3, 4}, 230 + c)})
      end)
    end
    it("var{unbiased = false} equals correction 0", function()
      check(function(t) return t:var(2, {unbiased = false}) end, {vals({3, 5}, 240)})
    end)
    it("std of a constant slice has gradient 0, not NaN (as PyTorch)", function()
      local x = dle.tensor({{2, 2, 2}, {1, 2, 4}}, F64):requires_grad_(true)
      x:std(2):sum():backward()
      assert.is_true(all_finite(x.grad))
      H.assert_close(x.grad[1], {0, 0, 0})
    end)
  end)

  describe("amax and amin ties", function()
    it("amax splits the gradient evenly among tied maxima (reverse and forward)", function()
      local x = dle.tensor({{1, 3, 3}, {2, 2, 2}, {0, 5, 1}}, F64):requires_grad_(true)
      x:amax(2):backward(dle.tensor({1, 2, 3}, F64))
      H.assert_close(x.grad, {{0, 0.5, 0.5}, {2 / 3, 2 / 3, 2 / 3}, {0, 3, 0}}, {rtol = 1e-12})
      local _, t = dle.jvp(function(v) return v:amax(2) end, x:detach(),
                           dle.tensor({{9, 1, 3}, {1, 2, 6}, {7, 4, 8}}, F64))
      H.assert_close(t, {2, 3, 4}, {rtol = 1e-12})
    end)
    it("amin over all dims splits among ties", function()
      local x = dle.tensor({{1, 3, 1}, {2, 1, 2}}, F64):requires_grad_(true)
      x:amin():backward()
      H.assert_close(x.grad, {{1 / 3, 0, 1 / 3}, {0, 1 / 3, 0}}, {rtol = 1e-12})
    end)
  end)
end)

describe("max/min (values and indices) gradients", function()
  local cases = {
    {"along dim 2", {3, 5}, 2, false},
    {"along dim 1 with keepdim", {3, 5}, 1, true},
    {"along dim -1", {3, 5}, -1, false},
    {"along dim 2 of a 3-D input with keepdim", {2, 3, 4}, 2, true},
  }
  for k, op in ipairs({"max", "min"}) do
    for j, c in ipairs(cases) do
      it(op .. " " .. c[1] .. ": reverse and forward mode match finite differences", function()
        check(function(t) return t[op](t, c[3], c[4]) end, {vals(c[2], 300 + 10 * k + j)})
      end)
    end
    it(op .. " of a transposed and of a narrowed input", function()
      check(function(t) return t:t()[op](t:t(), 2) end, {vals({3, 5}, 350 + k)})
      check(function(t) local v = t:narrow(1, 2, 2) return v[op](v, 2) end, {vals({3, 5}, 360 + k)})
    end)
    it(op .. ": the gradient goes to the returned index only (even with ties)", function()
      local x = dle.tensor({{1, 4, 4, 0}, {3, -2, 3, -2}}, F64):requires_grad_(true)
      local v, i = x[op](x, 2)
      v:backward(dle.tensor({10, 20}, F64))
      local idx = i:totable()
      local want = H.build({2, 4}, function(p) return p[2] == idx[p[1]] and 10 * p[1] or 0 end)
      H.assert_close(x.grad, want)
      assert.is_nil(i.grad_fn)
    end)
  end
  it("max of a 0-dim input passes the gradient through", function()
    local x = dle.tensor(2.5, F64)
    check(function(t) return t:max(1) end, {x})
  end)
end)

describe("softmax and log_softmax gradients", function()
  local cases = {
    {"along dim 2", {3, 5}, function(f, x) return x[f](x, 2) end},
    {"along dim 1", {3, 5}, function(f, x) return x[f](x, 1) end},
    {"along dim -1", {3, 5}, function(f, x) return x[f](x, -1) end},
    {"along dim 2 of a 3-D input", {2, 3, 4}, function(f, x) return x[f](x, 2) end},
    {"of a transposed input", {3, 5}, function(f, x) return x:t()[f](x:t(), 2) end},
    {"of a narrowed input", {3, 5}, function(f, x) local v = x:narrow(2, 1, 4) return v[f](v, 1) end},
  }
  for k, f in ipairs({"softmax", "log_softmax"}) do
    for j, c in ipairs(cases) do
      it(f .. " " .. c[1] .. ": reverse and forward mode match finite differences", function()
        check(function(x) return c[3](f, x) end, {vals(c[2], 400 + 10 * k + j)})
      end)
    end
    it(f .. " of a broadcast sum", function()
      check(function(a, b) local s = a + b return s[f](s, 2) end, {vals({3, 5}, 450 + k), vals({5}, 460 + k)})
    end)
    it(f .. " of a 0-dim input", function()
      check(function(x) return x[f](x, 1) end, {dle.tensor(0.3, F64)})
    end)
  end

  it("large logits: softmax, log_softmax and logsumexp gradients are finite (float32 and float64)", function()
    for _, dt in ipairs({"float32", "float64"}) do
      local rows = {{1000, 0, -1000, 999}, {-5000, -5001, 3000, 2}}
      local x = dle.tensor(rows, {dtype = dt, requires_grad = true})
      local w = dle.tensor({{1, 2, 3, 4}, {5, 6, 7, 8}}, {dtype = dt})
      local gs = dle.grad((x:softmax(2) * w):sum(), {x})[1]
      local gl = dle.grad((x:log_softmax(2) * w):sum(), {x})[1]
      local ge = dle.grad(x:logsumexp(2):sum(), {x})[1]
      assert.is_true(all_finite(gs), "softmax " .. dt)
      assert.is_true(all_finite(gl), "log_softmax " .. dt)
      assert.is_true(all_finite(ge), "logsumexp " .. dt)
      -- logsumexp' = softmax; log_softmax' = w - softmax * sum(w)
      -- (float32: x - logsumexp(x) near 1000 carries the ulp of 1000, ~6e-5)
      local s = x:detach():softmax(2)
      local tol = dt == "float32" and {rtol = 1e-3, atol = 1e-3} or {rtol = 1e-10, atol = 1e-12}
      H.assert_close(ge, s:totable(), tol)
      H.assert_close(gl, (w - s * w:sum(2, true)):totable(), tol)
      local _, t = dle.jvp(function(v) return v:log_softmax(2) end, x:detach(), w)
      assert.is_true(all_finite(t), "log_softmax jvp " .. dt)
    end
  end)

  it("cross-entropy from log_softmax + gather, mean over the batch: gradient (softmax - onehot) / batch", function()
    local logits = vals({4, 5}, 500):requires_grad_(true)
    local targets = dle.tensor({{2}, {5}, {1}, {3}}, {dtype = "int64"})
    local loss = -(logits:log_softmax(2):gather(2, targets)):mean()
    loss:backward()
    local s = logits:detach():softmax(2):totable()
    local tg = {2, 5, 1, 3}
    local want = H.build({4, 5}, function(p) return (s[p[1]][p[2]] - (p[2] == tg[p[1]] and 1 or 0)) / 4 end)
    H.assert_close(logits.grad, want, {rtol = 1e-10, atol = 1e-12})
  end)
end)

describe("double backward (create_graph)", function()
  local w35 = vals({3, 5}, 600)
  local w3 = vals({3}, 601)
  local w31 = vals({3, 1}, 602)
  local cases = {
    {"sum", function(x) return x:sum(2):pow(3) end, w3},
    {"mean", function(x) return (x:mean(-1) * x:mean(-1)) end, w3},
    {"prod", function(x) return x:prod(2) end, w3},
    {"var", function(x) return x:var(2) end, w3},
    {"std", function(x) return x:std(2, true) end, w31},
    {"logsumexp", function(x) return x:logsumexp(2) end, w3},
    {"amax", function(x) return x:amax(2) * x:amax(2) end, w3},
    {"max", function(x) local v = x:max(2) return v * v end, w3},
    {"min", function(x) local v = x:min(2) return v:exp() end, w3},
    {"softmax", function(x) return x:softmax(2) end, w35},
    {"log_softmax", function(x) return x:log_softmax(1) end, w35},
  }
  for j, c in ipairs(cases) do
    it(c[1] .. ": the gradient's own gradient matches finite differences", function()
      local x = c[1] == "prod" and vals({3, 5}, 700 + j, 0.5, 1.5) or vals({3, 5}, 700 + j)
      check(grad_of(c[2], c[3]), {x}, {forward = false})
    end)
  end

  it("var: gradient of <grad var, v> is 2 / (N - c) (v - mean(v)) (closed form)", function()
    local x = vals({7}, 800):requires_grad_(true)
    local v = vals({7}, 801)
    for _, c in ipairs({0, 1}) do
      local g = dle.grad(x:var({correction = c}), {x}, {create_graph = true})[1]
      local h = dle.grad((g * v):sum(), {x})[1]
      H.assert_close(h, ((v - v:mean()) * (2 / (7 - c))):totable(), {rtol = 1e-12, atol = 1e-12})
    end
  end)

  it("logsumexp: Hessian-vector product is s*v - s*sum(s*v) (closed form)", function()
    local x = vals({6}, 810):requires_grad_(true)
    local v = vals({6}, 811)
    local g = dle.grad(x:logsumexp(), {x}, {create_graph = true})[1]
    local h = dle.grad((g * v):sum(), {x})[1]
    local s = x:detach():softmax(1)
    H.assert_close(h, (s * v - s * (s * v):sum()):totable(), {rtol = 1e-10, atol = 1e-12})
  end)
end)
