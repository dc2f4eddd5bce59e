-- nn_activations_spec.lua — the activations of dle.nn.functional added for issue 17 (leaky_relu,
-- elu, selu, celu, softplus, softsign, mish, hardswish, hardsigmoid, hardtanh, relu6, prelu, glu,
-- logsigmoid, softmin, tanhshrink, softshrink, hardshrink) and their modules: values against
-- scalar Lua formulas, on both sides of every kink and on non-contiguous inputs; float64
-- gradchecks (reverse and forward mode) away from the kinks; stability at large |x|; the modules'
-- arguments and PReLU's parameter; errors naming the function; optionally PyTorch's values and
-- gradients in float64.
local dle = require("dle")
local H = require("helpers")

local nn, F = dle.nn, dle.nn.functional
local F64 = {dtype = "float64"}

local SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
local function sigmoid(v) return 1 / (1 + math.exp(-v)) end
local function softplus(v, b, th)
  b, th = b or 1, th or 20
  if v * b > th then return v end
  return math.log(1 + math.exp(b * v)) / b
end
local function clamp(v, lo, hi) return math.min(math.max(v, lo), hi) end
local function tanh(v) return 1 - 2 / (math.exp(2 * v) + 1) end

-- name -> {call(x), scalar reference(v)}
local cases = {
  leaky_relu = {function(x) return F.leaky_relu(x, 0.2) end, function(v) return v > 0 and v or 0.2 * v end},
  leaky_relu_default = {function(x) return F.leaky_relu(x) end, function(v) return v > 0 and v or 0.01 * v end},
  elu = {function(x) return F.elu(x, 1.5) end, function(v) return v > 0 and v or 1.5 * (math.exp(v) - 1) end},
  selu = {F.selu, function(v) return SELU_S * (v > 0 and v or SELU_A * (math.exp(v) - 1)) end},
  celu = {function(x) return F.celu(x, 0.7) end, function(v) return v > 0 and v or 0.7 * (math.exp(v / 0.7) - 1) end},
  softplus = {function(x) return F.softplus(x, 2, 3) end, function(v) return softplus(v, 2, 3) end},
  softplus_default = {F.softplus, function(v) return softplus(v) end},
  softsign = {F.softsign, function(v) return v / (1 + math.abs(v)) end},
  mish = {F.mish, function(v) return v * tanh(softplus(v)) end},
  hardswish = {F.hardswish, function(v) return v * clamp(v + 3, 0, 6) / 6 end},
  hardsigmoid = {F.hardsigmoid, function(v) return clamp(v + 3, 0, 6) / 6 end},
  hardtanh = {function(x) return F.hardtanh(x, -0.5, 2) end, function(v) return clamp(v, -0.5, 2) end},
  relu6 = {F.relu6, function(v) return clamp(v, 0, 6) end},
  logsigmoid = {F.logsigmoid, function(v) return math.log(sigmoid(v)) end},
  tanhshrink = {F.tanhshrink, function(v) return v - tanh(v) end},
  softshrink = {function(x) return F.softshrink(x, 0.3) end,
                function(v) return v > 0.3 and v - 0.3 or (v < -0.3 and v + 0.3 or 0) end},
  hardshrink = {function(x) return F.hardshrink(x, 0.3) end, function(v) return math.abs(v) > 0.3 and v or 0 end},
}
local names = {}
for n in pairs(cases) do names[#names + 1] = n end
table.sort(names)

-- values on both sides of every kink (0, +-0.3, +-0.5, +-3, 2, 6), none on one
local points = {{-7.1, -3.4, -2.9, -0.7, -0.45, -0.25, -0.05}, {0.05, 0.25, 0.45, 1.3, 2.6, 3.2, 6.4}}

describe("activations: values", function()
  for _, n in ipairs(names) do
    it(n .. " matches its scalar formula, contiguous and in every non-contiguous layout", function()
      local call, ref = cases[n][1], cases[n][2]
      local want = H.map(points, ref)
      H.each_layout(points, "float64", function(layout, x)
        H.assert_close(call(x), want, {rtol = 1e-12, atol = 1e-14, msg = layout})
      end)
      H.assert_close(call(dle.tensor(points)), want, {rtol = 1e-5, atol = 1e-6, msg = "float32"})
    end)
  end

  it("softplus, logsigmoid, elu, mish, selu stay finite with finite gradients at |x| = 1000", function()
    for _, n in ipairs({"softplus_default", "logsigmoid", "elu", "mish", "selu", "celu"}) do
      local x = dle.tensor({-1000, 1000}, F64):requires_grad_()
      local y = cases[n][1](x)
      y:sum():backward()
      for _, v in ipairs(y:totable()) do assert.is_true(v == v and math.abs(v) < math.huge, n .. " value " .. v) end
      for _, v in ipairs(x.grad:totable()) do assert.is_true(v == v and math.abs(v) < math.huge, n .. " grad " .. v) end
    end
    assert.are.equal(-1000, F.logsigmoid(dle.tensor({-1000}, F64)):item())
    assert.are.equal(1000, F.softplus(dle.tensor({1000}, F64)):item())
  end)

  it("softmin is softmax of -x along dim; glu halves dim into a * sigmoid(b)", function()
    local x = H.seeded({3, 4}, 1)
    H.assert_close(F.softmin(x, 1), (-x):softmax(1):totable(), {rtol = 1e-14, atol = 0})
    H.assert_close(F.softmin(x), (-x):softmax(2):totable(), {rtol = 1e-14, atol = 0})
    local g = F.glu(x)
    assert.are.same({3, 2}, g:shape())
    H.assert_close(g, (x:narrow(2, 1, 2) * x:narrow(2, 3, 2):sigmoid()):totable(), {rtol = 0, atol = 0})
    local g1 = F.glu(H.seeded({4, 3}, 2), 1)
    assert.are.same({2, 3}, g1:shape())
  end)

  it("prelu: one slope, or one per channel on dimension 2 (dimension 1 of a 1-D input)", function()
    local x = dle.tensor({{{-1, 2}, {-3, 4}}, {{5, -6}, {7, -8}}}, F64)   -- {N=2, C=2, L=2}
    local w = dle.tensor({0.1, 0.5}, F64)
    H.assert_close(F.prelu(x, w), {{{-0.1, 2}, {-1.5, 4}}, {{5, -0.6}, {7, -4}}}, {rtol = 1e-15, atol = 0})
    H.assert_close(F.prelu(x, dle.tensor({0.25}, F64)):reshape(-1), {-0.25, 2, -0.75, 4, 5, -1.5, 7, -2},
      {rtol = 1e-15, atol = 0})
    H.assert_close(F.prelu(dle.tensor({-2, -4}, F64), w), {-0.2, -2}, {rtol = 1e-15, atol = 0})
  end)
end)

describe("activations: gradients (float64, reverse and forward mode)", function()
  -- values away from every kink
  local x = dle.tensor({{-2.7, -1.1, -0.4, -0.2}, {0.15, 0.35, 1.7, 3.9}}, F64)
  for _, n in ipairs(names) do
    it(n .. " passes gradcheck", function()
      H.gradcheck(cases[n][1], {x:clone()})
    end)
  end
  it("softmin, glu (both halves), prelu (input and per-channel weight) pass gradcheck", function()
    H.gradcheck(function(z) return F.softmin(z, 1) end, {H.seeded({3, 4}, 3)})
    H.gradcheck(function(z) return F.glu(z, 2) end, {H.seeded({3, 4}, 4)})
    H.gradcheck(function(z, w) return F.prelu(z, w) end, {H.seeded({2, 3, 2}, 5, -1, 1):add(0.01),
      dle.tensor({0.1, 0.2, 0.3}, F64)})
    H.gradcheck(function(z) return F.mish(z:t()) end, {H.seeded({3, 2}, 6)})
  end)
end)

describe("activation modules", function()
  it("call the functional form with their arguments and print them", function()
    local x = H.seeded({2, 5}, 7, -4, 4)
    local pairs_ = {
      {nn.LeakyReLU(0.2), F.leaky_relu(x, 0.2)}, {nn.ELU(1.5), F.elu(x, 1.5)}, {nn.SELU(), F.selu(x)},
      {nn.CELU(0.7), F.celu(x, 0.7)}, {nn.Softplus(2, 3), F.softplus(x, 2, 3)}, {nn.Softsign(), F.softsign(x)},
      {nn.Mish(), F.mish(x)}, {nn.Hardswish(), F.hardswish(x)}, {nn.Hardsigmoid(), F.hardsigmoid(x)},
      {nn.Hardtanh(-2, 2), F.hardtanh(x, -2, 2)}, {nn.ReLU6(), F.relu6(x)}, {nn.LogSigmoid(), F.logsigmoid(x)},
      {nn.Softmin(1), F.softmin(x, 1)}, {nn.Tanhshrink(), F.tanhshrink(x)}, {nn.Softshrink(1), F.softshrink(x, 1)},
      {nn.Hardshrink(1), F.hardshrink(x, 1)}, {nn.GLU(1), F.glu(x, 1)},
    }
    for _, p in ipairs(pairs_) do
      H.assert_close(p[1](x), p[2]:totable(), {rtol = 0, atol = 0, msg = p[1].__name})
    end
    assert.are.equal("Softplus(beta=2, threshold=3)", tostring(nn.Softplus(2, 3)))
    assert.are.equal("LeakyReLU()", tostring(nn.LeakyReLU()))
  end)

  it("PReLU has a learnable weight {num_parameters} filled with init, trained by backward", function()
    local m = nn.PReLU(3, 0.1, {dtype = "float64"})
    assert.are.same({3}, m.weight:shape())
    assert.are.same({"weight"}, {m:named_parameters()[1][1]})
    H.assert_close(m.weight, {0.1, 0.1, 0.1}, {rtol = 0, atol = 0})
    local x = dle.tensor({{-1, -2, 3}, {-4, 5, -6}}, F64)
    m(x):sum():backward()
    H.assert_close(m.weight.grad, {-5, -2, -6}, {rtol = 0, atol = 0})
    assert.are.same({1}, nn.PReLU().weight:shape())
    assert.are.equal(0.25, nn.PReLU().weight:item())
  end)
end)

describe("activation errors", function()
  it("name the function, the argument and the shapes", function()
    H.assert_error(function() F.leaky_relu(3) end, "leaky_relu: input must be a tensor, got number 3")
    H.assert_error(function() F.elu(dle.tensor({1, 2}, {dtype = "int64"})) end, "elu: input must be a float tensor")
    H.assert_error(function() F.softplus(dle.ones(2), "a") end, "softplus: beta must be a number")
    H.assert_error(function() F.hardtanh(dle.ones(2), 1, -1) end, "hardtanh: min_val (1) must not exceed max_val (-1)")
    H.assert_error(function() F.glu(dle.ones(2, 3)) end, "glu: dimension -1 of input {2,3} has odd size 3")
    H.assert_error(function() F.glu(dle.ones(2, 4), 5) end, "glu:", "out of range")
    H.assert_error(function() F.softmin(dle.ones(2, 4), 5) end, "softmin:", "out of range")
    H.assert_error(function() F.prelu(dle.ones(2, 4, 3), dle.ones(3)) end,
      "prelu: weight has 3 slopes but input {2,4,3} has 4 channels (dimension 2)")
    H.assert_error(function() F.softshrink(dle.ones(2), -1) end, "softshrink: lambd must be >= 0")
    H.assert_error(function() nn.Softplus(0) end, "Softplus: softplus: beta must not be 0")
    H.assert_error(function() nn.LeakyReLU("x") end, "LeakyReLU: negative_slope must be a number")
    H.assert_error(function() nn.PReLU(0) end, "PReLU: expected num_parameters >= 1, got 0")
  end)
end)

-- Optional: PyTorch's numbers (skipped when /usr/bin/python3 cannot import torch).
describe("activations against PyTorch (optional)", function()
  it("values and gradients of every activation match torch 1e-12 in float64", function()
    if H.without_torch(pending) then return end
    local x = dle.tensor({{-25, -2.7, -1.1, -0.4, -0.2}, {0.15, 0.35, 1.7, 3.9, 30}}, F64)
    local w = dle.tensor({0.3, 0.7, 0.1, 0.2, 0.9}, F64)
    local calls = {   -- dle call, torch expression of x
      {function(z) return F.leaky_relu(z, 0.2) end, "F.leaky_relu(x, 0.2)"},
      {function(z) return F.elu(z, 1.5) end, "F.elu(x, 1.5)"}, {F.selu, "F.selu(x)"},
      -- alpha 0.5: PyTorch's celu gradient rounds 1 / alpha to float32 (derivatives.yaml)
      {function(z) return F.celu(z, 0.5) end, "F.celu(x, 0.5)"},
      {function(z) return F.softplus(z, 2, 3) end, "F.softplus(x, 2, 3)"}, {F.softplus, "F.softplus(x)"},
      {F.softsign, "F.softsign(x)"}, {F.mish, "F.mish(x)"}, {F.hardswish, "F.hardswish(x)"},
      -- values only: PyTorch's hardsigmoid gradient is float32's 1/6 even in float64
      {F.hardsigmoid, "F.hardsigmoid(x)", values_only = true},
      {function(z) return F.hardtanh(z, -0.5, 2) end, "F.hardtanh(x, -0.5, 2)"},
      {F.relu6, "F.relu6(x)"}, {F.logsigmoid, "F.logsigmoid(x)"}, {F.tanhshrink, "F.tanhshrink(x)"},
      {function(z) return F.softshrink(z, 0.3) end, "F.softshrink(x, 0.3)"},
      {function(z) return F.hardshrink(z, 0.3) end, "F.hardshrink(x, 0.3)"},
      {function(z) return F.softmin(z, 1) end, "F.softmin(x, 0)"},
      {function(z) return F.glu(z, 1) end, "F.glu(x, 0)"},
      {function(z) return F.prelu(z, w) end, "F.prelu(x, w)"},
    }
    local py = {"import torch, torch.nn.functional as F", "w = " .. H.torch_literal(w), "out = []"}
    local got = {}
    for _, c in ipairs(calls) do
      py[#py + 1] = "x = " .. H.torch_literal(x) .. ".requires_grad_()"
      py[#py + 1] = "y = " .. c[2] .. "; (y * torch.arange(1, y.numel() + 1, dtype=torch.float64)"
        .. ".reshape(y.shape)).sum().backward()"
      py[#py + 1] = "out += y.reshape(-1).tolist()" .. (c.values_only and "" or " + x.grad.reshape(-1).tolist()")
      local z = x:clone():requires_grad_()
      local y = c[1](z);
      (y * dle.arange(1, y:numel() + 1, F64):reshape(y:shape())):sum():backward()
      for _, v in ipairs(y:reshape(-1):totable()) do got[#got + 1] = v end
      if not c.values_only then
        for _, v in ipairs(z.grad:reshape(-1):totable()) do got[#got + 1] = v end
      end
    end
    py[#py + 1] = "print(' '.join(repr(v) for v in out))"
    H.assert_torch_numbers(got, H.run_python(py)[1], 1e-12, "value")
  end)
end)
