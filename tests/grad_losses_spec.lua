-- covers: mse_loss mse_loss_backward nll_loss nll_loss_backward binary_cross_entropy_with_logits
-- covers: binary_cross_entropy_with_logits_backward soft_cross_entropy soft_cross_entropy_backward
-- grad_losses_spec.lua — gradient rules of the fused losses: reverse and forward mode against
-- central finite differences in float64 (H.gradcheck: dle.gradcheck with forward = true, every
-- float input and every output, so the targets' gradients of mse, bce and soft cross-entropy, bce's
-- pos_weight and soft cross-entropy's lse too) for every reduction and option; the backward ops
-- reached as tensor methods (their own reverse and forward rules); and double backward
-- (create_graph) of each loss against finite differences of its gradient.
local dle = require("dle")
local H = require("helpers")

local F = dle.nn.functional
local F64 = {dtype = "float64"}
local I64 = {dtype = "int64"}

local randn = H.seeded

local check = H.gradcheck
local function check2(f, inputs) check(f, inputs, {forward = false}) end
local gradients_of = H.gradients_of

-- The three reductions as gradcheck variants ({name, o = options}), then the extra ones.
local function reductions_and(extra)
  local v = {{name = "mean", o = {}}, {name = "sum", o = {reduction = "sum"}},
    {name = "none", o = {reduction = "none"}}}
  for _, e in ipairs(extra or {}) do v[#v + 1] = e end
  return v
end

local reductions = {{}, {reduction = "sum"}, {reduction = "none"}}
local function rname(o) return o.reduction or "mean" end

describe("mse_loss gradients", function()
  for k, o in ipairs(reductions) do
    it("gradcheck in input and target, reduction " .. rname(o), function()
      check(function(x, y) return dle.mse_loss(x, y, o) end, {randn({3, 5}, k), randn({3, 5}, 10 + k)})
    end)
    it("gradcheck of mse_loss_backward in grad_output, input and target, reduction " .. rname(o), function()
      local gy = o.reduction == "none" and randn({3, 5}, 20 + k) or dle.tensor(0.7, F64)
      check(function(g, x, y) return g:mse_loss_backward(x, y, o) end,
            {gy, randn({3, 5}, 30 + k), randn({3, 5}, 40 + k)})
    end)
  end

  it("gradcheck on transposed (non-contiguous) inputs of odd sizes", function()
    check(function(x, y) return dle.mse_loss(x:t(), y:narrow(1, 2, 7)) end, {randn({3, 7}, 51), randn({9, 3}, 52)})
  end)

  it("double backward (mean, and none weighted)", function()
    check2(gradients_of(function(x, y) return dle.mse_loss(x, y) end), {randn({4, 3}, 53), randn({4, 3}, 54)})
    local w = randn({4, 3}, 55)
    check2(gradients_of(function(x, y) return (F.mse_loss(x, y, {reduction = "none"}) * w):sum() end),
           {randn({4, 3}, 56), randn({4, 3}, 57)})
  end)
end)

describe("nll_loss gradients", function()
  local variants = H.class_target_variants()
  local with_ignored = variants[4].t   -- rows 2 and 5 ignored (-1)
  for k, v in ipairs(variants) do
    it("gradcheck with " .. v.name, function()
      check(function(lp) return dle.nll_loss(lp, v.t, v.o) end, {randn({5, 4}, 60 + k, -3, 0)})
    end)
    it("gradcheck of nll_loss_backward in grad_output with " .. v.name, function()
      local gy = v.o.reduction == "none" and randn({5}, 70 + k) or dle.tensor(1.3, F64)
      check(function(g) return g:nll_loss_backward(v.t, 4, v.o) end, {gy})
    end)
  end

  it("gradcheck of F.nll_loss on {N, C, d} and {C} inputs (classes moved last for the op)", function()
    local t = dle.tensor({{1, 3}, {2, 2}}, I64)
    check(function(x) return F.nll_loss(x, t, {reduction = "none"}) end, {randn({2, 3, 2}, 81)})
    check(function(x) return F.nll_loss(x, dle.tensor(2, I64)) end, {randn({3}, 82)})
  end)

  it("double backward of nll_loss of log_softmax (second derivatives come from log_softmax)", function()
    check2(gradients_of(function(x)
      return dle.nll_loss(x:log_softmax(2), with_ignored, {ignore_index = -1, label_smoothing = 0.1})
    end), {randn({5, 4}, 83, -2, 2)})
  end)
end)

describe("binary_cross_entropy_with_logits gradients", function()
  local variants = reductions_and()
  for k, v in ipairs(variants) do
    it("gradcheck in x and y, reduction " .. v.name, function()
      check(function(x, y) return dle.binary_cross_entropy_with_logits(x, y, v.o) end,
            {randn({3, 4}, 90 + k, -4, 4), randn({3, 4}, 100 + k, 0, 1)})
    end)
    it("gradcheck in x, y and a per-class pos_weight {4}, reduction " .. v.name, function()
      check(function(x, y, w)
        return dle.binary_cross_entropy_with_logits(x, y, {reduction = v.o.reduction, pos_weight = w})
      end, {randn({3, 4}, 110 + k, -4, 4), randn({3, 4}, 120 + k, 0, 1), randn({4}, 130 + k, 0.5, 3)})
    end)
    it("gradcheck of the backward op in grad_output, x, y and pos_weight, reduction " .. v.name, function()
      local gy = v.o.reduction == "none" and randn({3, 4}, 140 + k) or dle.tensor(0.8, F64)
      check(function(g, x, y, w)
        return g:binary_cross_entropy_with_logits_backward(x, y, {reduction = v.o.reduction, pos_weight = w})
      end, {gy, randn({3, 4}, 150 + k, -3, 3), randn({3, 4}, 160 + k, 0, 1), randn({4}, 170 + k, 0.5, 3)})
      check(function(g, x, y) return g:binary_cross_entropy_with_logits_backward(x, y, v.o) end,
            {gy, randn({3, 4}, 180 + k, -3, 3), randn({3, 4}, 190 + k, 0, 1)})
    end)
  end

  it("gradcheck with a number pos_weight, a {2, 1} pos_weight (expanded) and a transposed input", function()
    local y = randn({2, 3}, 201, 0, 1)
    check(function(x) return F.binary_cross_entropy_with_logits(x:t(), y, {pos_weight = 2.5}) end,
          {randn({3, 2}, 202, -3, 3)})
    check(function(x, w) return dle.binary_cross_entropy_with_logits(x, y, {pos_weight = w, reduction = "sum"}) end,
          {randn({2, 3}, 203, -3, 3), randn({2, 1}, 204, 0.5, 2)})
  end)

  it("double backward (mean with pos_weight, none weighted)", function()
    check2(gradients_of(function(x, y, w)
      return dle.binary_cross_entropy_with_logits(x, y, {pos_weight = w})
    end), {randn({3, 4}, 211, -3, 3), randn({3, 4}, 212, 0, 1), randn({4}, 213, 0.5, 2)})
    local m = randn({3, 4}, 214)
    check2(gradients_of(function(x, y)
      return (dle.binary_cross_entropy_with_logits(x, y, {reduction = "none"}) * m):sum()
    end), {randn({3, 4}, 215, -3, 3), randn({3, 4}, 216, 0, 1)})
  end)
end)

describe("soft_cross_entropy gradients", function()
  local variants = reductions_and({
    {name = "mean, label smoothing 0.2", o = {label_smoothing = 0.2}},
    {name = "none, label smoothing 1", o = {reduction = "none", label_smoothing = 1}},
  })
  for k, v in ipairs(variants) do
    it("gradcheck of the loss and lse in logits and targets with " .. v.name, function()
      check(function(x, t) return dle.soft_cross_entropy(x, t, v.o) end,
            {randn({4, 5}, 220 + k, -2, 2), randn({4, 5}, 230 + k, 0, 1)})
    end)
  end

  it("gradcheck of soft_cross_entropy_backward in grad_output, logits, targets and lse", function()
    local x = randn({4, 5}, 241, -2, 2)
    local t = randn({4, 5}, 242, 0, 1)
    local lse = dle.no_grad(function() return select(2, dle.soft_cross_entropy(x, t)) end)
    local o = {label_smoothing = 0.1}
    check(function(g, x_, t_, l) return g:soft_cross_entropy_backward(x_, t_, l, o) end,
          {dle.tensor(1.3, F64), x, t, lse})
    local on = {reduction = "none", label_smoothing = 0.3}
    check(function(g, x_, t_, l) return g:soft_cross_entropy_backward(x_, t_, l, on) end, {randn({4}, 243), x, t, lse})
  end)

  it("gradcheck of F.cross_entropy with probability targets on {N, C, d} (classes moved last)", function()
    check(function(x, t) return F.cross_entropy(x, t, {reduction = "none", label_smoothing = 0.1}) end,
          {randn({2, 3, 2}, 251), randn({2, 3, 2}, 252, 0, 1)})
  end)

  it("double backward (mean with smoothing, none weighted) in logits and targets", function()
    check2(gradients_of(function(x, t) return dle.soft_cross_entropy(x, t, {label_smoothing = 0.3}) end),
           {randn({3, 4}, 261, -2, 2), randn({3, 4}, 262, 0, 1)})
    local w = randn({3}, 263)
    check2(gradients_of(function(x, t) return (dle.soft_cross_entropy(x, t, {reduction = "none"}) * w):sum() end),
           {randn({3, 4}, 264, -2, 2), randn({3, 4}, 265, 0, 1)})
  end)
end)
