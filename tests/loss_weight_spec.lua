-- loss_weight_spec.lua — per-class weights (opts.weight, {C}) of F.cross_entropy, F.nll_loss and
-- their modules: PyTorch 1.13's definition checked by hand and against PyTorch in float64 (every
-- reduction, with ignore_index and label smoothing, class and probability targets, a
-- {N, C, d} input); all-ones weights give the fused unweighted loss; gradients in reverse and
-- forward mode against finite differences (dle.gradcheck) and dle.jvp against the reverse
-- gradient; bad weights and int32 targets are errors naming the function.
local dle = require("dle")
local H = require("helpers")

local F = dle.nn.functional
local randn = H.seeded
local F64, I64 = {dtype = "float64"}, {dtype = "int64"}

local function close(a, b, tol, what)
  local d = (a - b):abs():max():item()
  assert.is_true(d < (tol or 1e-12), (what or "") .. ": max abs difference " .. d)
end

local x = randn({5, 4}, 1, -3, 3)
local w = dle.tensor({0.5, 2.0, 1.0, 3.0}, F64)
local t = dle.tensor({2, 4, 1, 3, 4}, I64)
local t_ign = dle.tensor({2, -1, 1, 3, -1}, I64)

describe("cross_entropy weight", function()
  it("mean divides the weighted sum by the sum of the targets' weights (hand-computed)", function()
    local lp = x:log_softmax(2):totable()
    local num, den = 0, 0
    for i, c in ipairs(t:totable()) do
      num = num - w[c] * lp[i][c]
      den = den + w[c]
    end
    assert.is_true(math.abs(F.cross_entropy(x, t, {weight = w}):item() - num / den) < 1e-12)
    assert.is_true(math.abs(F.cross_entropy(x, t, {weight = w, reduction = "sum"}):item() - num) < 1e-12)
    local none = F.cross_entropy(x, t, {weight = w, reduction = "none"}):totable()
    for i, c in ipairs(t:totable()) do assert.is_true(math.abs(none[i] + w[c] * lp[i][c]) < 1e-12) end
  end)

  it("differs from the unweighted loss (the option is not ignored)", function()
    assert.is_true(math.abs(F.cross_entropy(x, t, {weight = w}):item() - F.cross_entropy(x, t):item()) > 1e-3)
  end)

  it("all-ones weights give the fused unweighted loss for every reduction and option", function()
    local ones = dle.ones(4, F64)
    for _, v in ipairs(H.class_target_variants()) do
      local o = {weight = ones}
      for k, val in pairs(v.o) do o[k] = val end
      close(F.cross_entropy(x, v.t, o), F.cross_entropy(x, v.t, v.o), 1e-12, "cross_entropy " .. v.name)
      close(F.nll_loss(x:log_softmax(2), v.t, o), F.nll_loss(x:log_softmax(2), v.t, v.o), 1e-12, "nll " .. v.name)
    end
  end)

  it("nll_loss of log_softmax, CrossEntropyLoss and NLLLoss agree with cross_entropy", function()
    local o = {weight = w, ignore_index = -1, label_smoothing = 0.2}
    local ce = F.cross_entropy(x, t_ign, o)
    close(F.nll_loss(x:log_softmax(2), t_ign, o), ce, 1e-12, "nll_loss")
    close(dle.nn.CrossEntropyLoss(o)(x, t_ign), ce, 1e-12, "CrossEntropyLoss")
    close(dle.nn.NLLLoss({weight = w, reduction = "sum"})(x:log_softmax(2), t),
          F.cross_entropy(x, t, {weight = w, reduction = "sum"}), 1e-12, "NLLLoss")
  end)

  it("a float32 weight with float64 logits is converted; the result keeps the logits' dtype", function()
    local l = F.cross_entropy(x, t, {weight = w:to("float32")})
    assert.are.equal("float64", l:dtype())
    close(l, F.cross_entropy(x, t, {weight = w}), 1e-12)
  end)

  it("bad weights and targets are errors naming the function and what was given", function()
    H.assert_error(function() F.cross_entropy(x, t, {weight = dle.ones(3, F64)}) end,
      "cross_entropy: weight must be a float tensor of shape {4}", "{3}")
    H.assert_error(function() F.nll_loss(x, t, {weight = dle.ones(4, I64)}) end, "nll_loss: weight", "int64")
    H.assert_error(function() F.cross_entropy(x, t, {weight = 2}) end, "cross_entropy: weight", "number")
    H.assert_error(function() F.cross_entropy(x, t - 1, {weight = w}) end,
      "cross_entropy: target 0 (row 3) is out of range for 4 classes")
    H.assert_error(function() F.cross_entropy(x, t, {weight = w, reduction = "avg"}) end,
      "cross_entropy: reduction must be")
  end)
end)

describe("class targets are int64 only (PyTorch's rule)", function()
  for _, dt in ipairs({"int32", "uint8", "bool"}) do
    it("cross_entropy and nll_loss reject " .. dt .. " targets naming the dtype", function()
      H.assert_error(function() F.cross_entropy(x, t:to(dt)) end,
        "cross_entropy: targets must be int64 class indices, got " .. dt)
      H.assert_error(function() F.nll_loss(x, t:to(dt)) end, "nll_loss: targets must be int64 class indices, got "
                     .. dt)
    end)
  end
end)

describe("cross_entropy weight gradients", function()
  local cases = {
    {"mean", {}}, {"sum", {reduction = "sum"}}, {"none", {reduction = "none"}},
    {"mean, ignore_index, smoothing 0.2", {ignore_index = -1, label_smoothing = 0.2}},
    {"none, ignore_index, smoothing 0.1", {reduction = "none", ignore_index = -1, label_smoothing = 0.1}},
  }
  for _, c in ipairs(cases) do
    local o = {weight = w}
    for k, v in pairs(c[2]) do o[k] = v end
    local targets = o.ignore_index and t_ign or t
    it("reverse and forward mode match finite differences, " .. c[1], function()
      H.gradcheck(function(z) return F.cross_entropy(z, targets, o) end, {randn({5, 4}, 11)})
      H.gradcheck(function(z) return F.nll_loss(z, targets, o) end, {randn({5, 4}, 12, -3, -0.1)})
    end)
  end

  it("probability targets with weights: gradients in logits and probabilities", function()
    local p = randn({5, 4}, 13, 0.1, 1)
    H.gradcheck(function(z, q) return F.cross_entropy(z, q, {weight = w, label_smoothing = 0.1}) end,
      {randn({5, 4}, 14), p})
  end)

  it("dle.jvp's output tangent equals the reverse gradient dotted with the tangent", function()
    local o = {weight = w, ignore_index = -1, label_smoothing = 0.3}
    local v = randn({5, 4}, 15)
    local _, tan = dle.jvp(function(z) return F.cross_entropy(z, t_ign, o) end, {x}, {v})
    local z = x:detach():requires_grad_()
    F.cross_entropy(z, t_ign, o):backward()
    assert.is_true(math.abs(tan:item() - (z.grad * v):sum():item()) < 1e-12)
  end)
end)

-- Optional: PyTorch's numbers (skipped when /usr/bin/python3 cannot import torch).
describe("cross_entropy weight against PyTorch (optional)", function()
  it("cross_entropy / nll_loss with weight, every reduction, ignore_index, smoothing, {N, C, d} and probabilities " ..
      "match torch 1e-12 in float64", function()
    if H.without_torch(pending) then return end
    local x3 = randn({2, 4, 3}, 21, -2, 2)
    local t3 = dle.tensor({{1, 4, -1}, {3, 3, 2}}, I64)
    local p = randn({5, 4}, 22, 0.1, 1)
    p = p / p:sum(2, true)
    local py = H.torch_literal
    local lines = H.run_python({
      "import torch, torch.nn.functional as F",
      "x, w, x3, p = " .. py(x) .. ", " .. py(w) .. ", " .. py(x3) .. ", " .. py(p),
      "t = torch.tensor([1, 3, 0, 2, 3]); ti = torch.tensor([1, -2, 0, 2, -2])",
      "t3 = torch.tensor([[0, 3, -2], [2, 2, 1]])",
      "r = []",
      "for red in ['mean', 'sum', 'none']:",
      "  r.append(F.cross_entropy(x, t, weight=w, reduction=red))",
      "  r.append(F.cross_entropy(x, ti, weight=w, reduction=red, ignore_index=-2, label_smoothing=0.2))",
      "  r.append(F.cross_entropy(x3, t3, weight=w, reduction=red, ignore_index=-2, label_smoothing=0.1))",
      "  r.append(F.nll_loss(x.log_softmax(1), ti, weight=w, reduction=red, ignore_index=-2))",
      "  r.append(F.cross_entropy(x, p, weight=w, reduction=red, label_smoothing=0.3))",
      "print(' '.join(repr(v) for v in torch.cat([v.reshape(-1) for v in r]).tolist()))",
    })
    local got = {}
    for _, red in ipairs({"mean", "sum", "none"}) do
      got[#got + 1] = F.cross_entropy(x, t, {weight = w, reduction = red})
      got[#got + 1] = F.cross_entropy(x, t_ign, {weight = w, reduction = red, ignore_index = -1, label_smoothing = 0.2})
      got[#got + 1] = F.cross_entropy(x3, t3, {weight = w, reduction = red, ignore_index = -1, label_smoothing = 0.1})
      got[#got + 1] = F.nll_loss(x:log_softmax(2), t_ign, {weight = w, reduction = red, ignore_index = -1})
      got[#got + 1] = F.cross_entropy(x, p, {weight = w, reduction = red, label_smoothing = 0.3})
    end
    local flat = {}
    for _, g in ipairs(got) do for _, v in ipairs(g:reshape(-1):totable()) do flat[#flat + 1] = v end end
    H.assert_torch_numbers(flat, lines[1], 1e-12, "value")
  end)
end)
