-- margin_losses_spec.lua — F.multi_margin_loss / nn.MultiMarginLoss and F.multilabel_margin_loss /
-- nn.MultiLabelMarginLoss (compositions of dle ops): values against a scalar Lua formula, 1-D
-- inputs, p = 2, margin and class weights, end-of-targets markers, float64 gradchecks (reverse and
-- forward), errors naming the function, and PyTorch's values and gradients when torch is present.
local dle = require("dle")
local H = require("helpers")

local F, nn = dle.nn.functional, dle.nn
local I64 = {dtype = "int64"}

local x = H.seeded({3, 4}, 1, -1, 1)
local y = dle.tensor({1, 3, 4}, I64)
local ylab = dle.tensor({{4, 1, 0, 0}, {2, 0, 3, 0}, {1, 2, 3, 4}}, I64)

describe("multi_margin_loss", function()
  it("equals sum over i ~= y of max(0, margin - x_y + x_i)^p w_y / C, per row", function()
    local w = dle.tensor({0.5, 1, 2, 1.5}, {dtype = "float64"})
    local got = F.multi_margin_loss(x, y, {reduction = "none", p = 2, margin = 0.7, weight = w}):totable()
    local xt = x:totable()
    for n = 1, 3 do
      local s, yn = 0, y:totable()[n]
      for i = 1, 4 do
        if i ~= yn then s = s + math.max(0, 0.7 - xt[n][yn] + xt[n][i]) ^ 2 * w:totable()[yn] end
      end
      assert.is_true(math.abs(got[n] - s / 4) < 1e-14)
    end
    assert.is_true(math.abs(F.multi_margin_loss(x[2], dle.tensor(3, I64)):item()
      - F.multi_margin_loss(x, y, {reduction = "none"})[2]) < 1e-14)
    assert.are.equal(F.multi_margin_loss(x, y):item(), nn.MultiMarginLoss()(x, y):item())
  end)

  it("gradcheck in the input (reverse and forward), p = 1 and 2", function()
    H.gradcheck(function(a) return F.multi_margin_loss(a, y) end, {x})
    H.gradcheck(function(a) return F.multi_margin_loss(a, y, {p = 2, reduction = "sum"}) end, {x})
  end)

  it("bad input names the function", function()
    local ok, err = pcall(F.multi_margin_loss, x, dle.tensor({1, 5, 2}, I64))
    assert.is_false(ok)
    assert.matches("multi_margin_loss: target values must be classes in %[1, 4%]", err)
    err = select(2, pcall(F.multi_margin_loss, x, y, {p = 3}))
    assert.is_false(ok)
    assert.matches("multi_margin_loss: p must be 1 or 2", err)
    err = select(2, pcall(F.multi_margin_loss, x, dle.tensor({1, 2}, I64)))
    assert.matches("multi_margin_loss: target has shape {2}, expected {3}", err)
  end)
end)

describe("multilabel_margin_loss", function()
  it("sums max(0, 1 - (x_j - x_i)) over targets j before the end marker and non-targets i, / C", function()
    local got = F.multilabel_margin_loss(x, ylab, {reduction = "none"}):totable()
    local xt, tt = x:totable(), ylab:totable()
    for n = 1, 3 do
      local targets, is = {}, {}
      for _, v in ipairs(tt[n]) do
        if v < 1 then break end
        targets[#targets + 1], is[v] = v, true
      end
      local s = 0
      for _, j in ipairs(targets) do
        for i = 1, 4 do if not is[i] then s = s + math.max(0, 1 - (xt[n][j] - xt[n][i])) end end
      end
      assert.is_true(math.abs(got[n] - s / 4) < 1e-14, "row " .. n)
    end
    assert.are.equal(F.multilabel_margin_loss(x, ylab):item(), nn.MultiLabelMarginLoss()(x, ylab):item())
  end)

  it("gradcheck in the input (reverse and forward)", function()
    H.gradcheck(function(a) return F.multilabel_margin_loss(a, ylab) end, {x})
  end)

  it("agrees with PyTorch in float64 (values and gradients, both losses)", function()
    if H.without_torch(pending) then return end
    local xs, xl = x:clone():requires_grad_(), x:clone():requires_grad_()
    local w = dle.tensor({0.5, 1, 2, 1.5}, {dtype = "float64"})
    local a = F.multi_margin_loss(xs, y, {p = 2, margin = 0.7, weight = w})
    a:backward()
    local b = F.multilabel_margin_loss(xl, ylab, {reduction = "sum"})
    b:backward()
    local out = H.run_torch({x = x, y = y:double(), t = ylab:double(), w = w}, {
      "xs = x.clone().requires_grad_(); xl = x.clone().requires_grad_()",
      "a = torch.nn.functional.multi_margin_loss(xs, y.long() - 1, p=2, margin=0.7, weight=w); p(a)",
      "a.backward(); p(xs.grad)",
      "b = torch.nn.functional.multilabel_margin_loss(xl, t.long() - 1, reduction='sum'); p(b)",
      "b.backward(); p(xl.grad)"})
    H.assert_torch_numbers({a:item()}, out[1], 1e-12, "multi_margin")
    H.assert_torch_numbers(H.flat(xs.grad:totable()), out[2], 1e-12, "multi_margin grad")
    H.assert_torch_numbers({b:item()}, out[3], 1e-12, "multilabel_margin")
    H.assert_torch_numbers(H.flat(xl.grad:totable()), out[4], 1e-12, "multilabel_margin grad")
  end)
end)
