-- covers: masked_select masked_scatter mode scatter scatter_reduce
-- grad_select_spec.lua — gradient rules (reverse and forward mode) of the select family and of
-- scatter / scatter_reduce: float64 dle.gradcheck (forward = true) on odd and broadcast shapes,
-- non-contiguous inputs and every dim; every reduction of scatter_reduce with and without
-- include_self (prod with a zero, amax/amin ties in closed form); mode on lines whose ties move
-- together; the compositions median, nanmedian, quantile (every interpolation), take_along_dim,
-- index_put and t[mask] = v; double backward; PyTorch's gradients when python3-torch is there.
local dle = require("dle")
local H = require("helpers")

local F64 = {dtype = "float64"}
local gen = dle.Generator(20261128)
local R, I, B = H.randn64(gen), H.int64, H.bool
local check = H.gradcheck

-- distinct values (no ties: finite differences do not reorder them)
local function distinct(shape, seed)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local perm = dle.randperm(n, {generator = dle.Generator(seed)}):double():reshape(shape)
  return perm / n + R(table.unpack(shape)) * 1e-3
end

describe("gradients of masked_select and masked_scatter", function()
  it("masked_select: reverse and forward mode, broadcast mask, transposed input", function()
    local mask = B({{true, false, true}, {false, false, true}})
    check(function(x) return dle.masked_select(x, mask) end, {R(2, 3)})
    check(function(x) return dle.masked_select(x, B({true, false, true})) end, {R(4, 3)})
    check(function(x) return dle.masked_select(x, mask) end, {R(3, 2):t()})
    check(function(x) return dle.masked_select(x, mask) end, {R(1, 3)}) -- x broadcast by the mask
  end)

  it("masked_scatter: gradients of self and of source (whose unused tail gets zeros)", function()
    local mask = B({{true, false, true}, {false, true, false}})
    check(function(s, src) return dle.masked_scatter(s, mask, src) end, {R(2, 3), R(5)})
    check(function(s, src) return dle.masked_scatter(s, B({false, true, true}), src) end, {R(3, 2):t(), R(2, 3)})
    local s, src = R(2, 3):requires_grad_(), R(4):requires_grad_()
    local weights = dle.arange(1, 7):view(2, 3):double()
    local gs, gsrc = table.unpack(dle.grad((dle.masked_scatter(s, mask, src) * weights):sum(), {s, src}))
    assert.are.same({{0, 2, 0}, {4, 0, 6}}, gs:totable())
    assert.are.same({1, 3, 5, 0}, gsrc:totable())
  end)

  it("t[mask] = v and index_put record through autograd like index_put_", function()
    local mask = B({{true, false}, {false, true}, {true, true}})
    check(function(x, v)
      local y = x * 1
      y[mask] = v
      return y
    end, {R(3, 2), R(4)})
    check(function(x, v) return dle.index_put(x, {I({3, 1, 3})}, v, {accumulate = true}) end, {R(3, 2), R(3, 2)})
    check(function(x, v) return dle.index_put(x, {I({3, 1}), I({2, 1})}, v) end, {R(3, 2), R(2)})
    check(function(x) return x[I({2, 2, 1})] end, {R(3, 2)})
    check(function(x) return x[B({true, false, true})] end, {R(3, 2)})
  end)
end)

describe("gradients of scatter and scatter_reduce", function()
  -- a permutation along dim 1 of {3, 4} (no two writes to one place)
  local perm = I({{2, 1, 3, 3}, {1, 3, 2, 1}, {3, 2, 1, 2}})
  local repeated = I({{1, 1, 3, 3}, {1, 3, 1, 3}, {3, 1, 1, 3}})

  it("scatter: reverse and forward, each dim, a transposed self, a larger src", function()
    check(function(s, src) return s:scatter(1, perm, src) end, {R(3, 4), R(3, 4)})
    check(function(s, src) return s:scatter(2, I({{4, 1}, {2, 3}, {1, 4}}), src) end, {R(4, 3):t(), R(3, 3)})
    check(function(s) return s:scatter(1, perm:narrow(1, 1, 1), 2.5) end, {R(3, 4)})
  end)

  for _, reduce in ipairs({"sum", "prod", "mean", "amax", "amin"}) do
    for _, include_self in ipairs({true, false}) do
      it(reduce .. (include_self and "" or " without self") .. ": reverse and forward mode along each dim", function()
        local opts = {include_self = include_self}
        local s, src = distinct({3, 4}, 1), distinct({3, 4}, 2)
        if reduce == "prod" then s, src = s + 0.5, src + 0.5 end -- away from zero
        check(function(a, b) return a:scatter_reduce(1, repeated, b, reduce, opts) end, {s, src})
        check(function(a, b) return a:scatter_reduce(2, repeated:t():narrow(1, 1, 3), b, reduce, opts) end,
          {s:t():contiguous():t(), src:narrow(2, 1, 3)})
      end)
    end
  end

  it("prod: a single zero gets the product of the others; two zeros give zeros", function()
    local s = dle.tensor({2, 3}, F64):requires_grad_()
    local src = dle.tensor({0, 5, 0, 0}, F64):requires_grad_()
    local idx = I({1, 1, 2, 2})
    local gs, gsrc = table.unpack(dle.grad(s:scatter_reduce(1, idx, src, "prod"):sum(), {s, src}))
    assert.are.same({0, 0}, gs:totable())
    assert.are.same({10, 0, 0, 0}, gsrc:totable())
    check(function(a, b) return a:scatter_reduce(1, idx, b, "prod") end,
      {dle.tensor({2, 3}, F64), dle.tensor({0, 5, 0.5, 4}, F64)})
  end)

  it("amax: tied elements share the gradient evenly", function()
    local s = dle.tensor({1, 3}, F64):requires_grad_()
    local src = dle.tensor({3, 2, 7}, F64):requires_grad_()
    local gs, gsrc = table.unpack(dle.grad(s:scatter_reduce(1, I({2, 2, 1}), src, "amax"):sum(), {s, src}))
    assert.are.same({0, 0.5}, gs:totable())
    assert.are.same({0.5, 0, 1}, gsrc:totable())
  end)

  it("has second derivatives (gradients of gradients) matching finite differences", function()
    check(H.gradients_of(function(a, b) return (a:scatter_reduce(1, I({1, 2, 1}), b, "mean") ^ 3):sum() end),
      {R(2), R(3)}, {forward = false})
    check(H.gradients_of(function(x) return (dle.masked_select(x, B({true, false, true})) ^ 3):sum() end),
      {R(3)}, {forward = false})
  end)
end)

describe("gradients of mode, median, quantile, take_along_dim", function()
  it("mode: each value appears twice, so ties move together; the gradient goes to the mode", function()
    local function doubled(a) return dle.cat({a, a}, 2) end
    check(function(a) return (doubled(a):mode(2)) end, {distinct({3, 4}, 5)})
    check(function(a) return (doubled(a):mode(2, true)) end, {distinct({3, 4}, 6)})
    local x = dle.tensor({{2, 5, 2, 1}}, F64):requires_grad_()
    local g = dle.grad((x:mode(2) * 3):sum(), {x})[1]
    assert.are.same({{0, 0, 3, 0}}, g:totable())
  end)

  it("median, nanmedian: the gradient goes to the picked element (NaN lines too)", function()
    check(function(x) return (x:median(2)) end, {distinct({3, 5}, 7)})
    check(function(x) return x:median() end, {distinct({4, 3}, 8)})
    check(function(x) return (x:median(1, true)) end, {distinct({4, 3}, 9):t()})
    local nan = dle.tensor({{0, 0, 0, 0}, {0, 0 / 0, 0, 0}}, F64)
    check(function(x) return (x:nanmedian(2)) end, {distinct({2, 4}, 10) + nan})
  end)

  it("quantile and nanquantile in every interpolation", function()
    for _, how in ipairs({"linear", "lower", "higher", "midpoint", "nearest"}) do
      check(function(x) return x:quantile(dle.tensor({0.2, 0.75}, F64), 2, false, {interpolation = how}) end,
        {distinct({3, 5}, 11)})
      check(function(x) return x:nanquantile(0.4, 1, true, {interpolation = how}) end, {distinct({5, 2}, 12)})
    end
  end)

  it("take_along_dim and take", function()
    check(function(x) return x:take_along_dim(I({{1, 3}, {2, 2}}), 2) end, {R(2, 3)})
    check(function(x) return dle.take(x, I({{6, 1}, {-1, 2}})) end, {R(2, 3)})
  end)
end)

describe("PyTorch's gradients (float64)", function()
  it("match for scatter_reduce, masked ops, median, quantile and mode", function()
    if H.without_torch(pending) then return end
    local s, src, w = distinct({3, 4}, 21), distinct({3, 4}, 22), distinct({3, 4}, 23)
    local idx = I({{1, 1, 3, 3}, {1, 3, 1, 3}, {3, 1, 1, 3}})
    local lines = {"i = torch.tensor([0, 0, 2, 2, 0, 2, 0, 2, 2, 0, 0, 2]).reshape(3, 4)",
                   "m = torch.tensor([1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0]).bool().reshape(3, 4)"}
    local reds = {"sum", "prod", "mean", "amax", "amin"}
    for _, r in ipairs(reds) do
      for _, inc in ipairs({"True", "False"}) do
        lines[#lines + 1] = "a = s.clone().requires_grad_(); b = src.clone().requires_grad_()"
        lines[#lines + 1] = string.format(
          "(a.scatter_reduce(0, i, b, '%s', include_self=%s) * w).sum().backward(); p(a.grad); p(b.grad)", r, inc)
      end
    end
    lines[#lines + 1] = "a = s.clone().requires_grad_()"
    lines[#lines + 1] = "y = (a.masked_select(m) * w.reshape(-1)[:7]).sum() + (a.median(1)[0] * w[:, 0]).sum()"
    lines[#lines + 1] = "y = y + (a.quantile(torch.tensor([0.3, 0.9], dtype=torch.float64), 0) * w[:2]).sum()"
    lines[#lines + 1] = "y.backward(); p(a.grad)"
    lines[#lines + 1] = "a = s.clone().requires_grad_(); (a.masked_scatter(m, src) * w).sum().backward(); p(a.grad)"
    local out = H.run_torch({s = s, src = src, w = w}, lines)
    local k = 0
    for _, r in ipairs(reds) do
      for _, inc in ipairs({true, false}) do
        local a, b = s:clone():requires_grad_(), src:clone():requires_grad_()
        local ga, gb = table.unpack(dle.grad((a:scatter_reduce(1, idx, b, r, {include_self = inc}) * w):sum(), {a, b}))
        k = k + 2
        H.assert_torch_numbers(ga:reshape(-1):totable(), out[k - 1], 1e-10, r .. " self")
        H.assert_torch_numbers(gb:reshape(-1):totable(), out[k], 1e-10, r .. " src")
      end
    end
    local m = B({{true, false, true, true}, {false, false, true, false}, {true, true, true, false}})
    local a = s:clone():requires_grad_()
    local y = (a:masked_select(m) * w:reshape(-1):narrow(1, 1, 7)):sum() + (a:median(2) * w:select(2, 1)):sum()
      + (a:quantile(dle.tensor({0.3, 0.9}, F64), 1) * w:narrow(1, 1, 2)):sum()
    H.assert_torch_numbers(dle.grad(y, {a})[1]:reshape(-1):totable(), out[k + 1], 1e-10,
      "masked_select/median/quantile")
    a = s:clone():requires_grad_()
    H.assert_torch_numbers(dle.grad((a:masked_scatter(m, src) * w):sum(), {a})[1]:reshape(-1):totable(), out[k + 2],
      1e-10, "masked_scatter")
  end)
end)
