-- losses_spec.lua — forward values and gradients of the fused losses (dle.mse_loss, dle.nll_loss,
-- dle.binary_cross_entropy_with_logits, dle.soft_cross_entropy and the F.* forms built on them):
-- hand-computed values; agreement with the composite formulas they replaced (dle ops, float64)
-- for every reduction and option; non-contiguous, odd-sized and multi-block inputs (the kernels
-- work in blocks of 1024 elements and read a per-class pos_weight in runs); large logits stay
-- finite in float32; bad shapes, dtypes and targets give errors naming the function and the
-- shapes. The comparison with PyTorch runs when /usr/bin/python3 can import torch.
local dle = require("dle")
local H = require("helpers")

local F = dle.nn.functional
local F64 = {dtype = "float64"}
local I64 = {dtype = "int64"}

local randn = H.seeded

local function reduce(loss, r)
  if r == "none" then return loss end
  if r == "sum" then return loss:sum() end
  return loss:mean()
end

-- the composite formulas functional.lua used before the fused ops
local composite = {}
function composite.mse(x, y, r) return reduce((x - y) * (x - y), r) end
function composite.bce(x, y, w, r)
  local sp = (-x:abs()):exp():log1p()
  local loss
  if w then
    loss = (1 - y) * x + ((w - 1) * y + 1) * (sp + (-x):relu())
  else
    loss = x:relu() - x * y + sp
  end
  return reduce(loss, r)
end
function composite.nll(lp, t, o)
  local C = lp:size(2)
  local keep = o.ignore_index and t:ne(o.ignore_index) or dle.ones(t:size(1), {dtype = "bool"})
  local tc = dle.where(keep, t, dle.ones_like(t))
  local eps = o.label_smoothing or 0
  local loss = -lp:gather(2, tc:unsqueeze(2)):squeeze(2) * (1 - eps) - lp:sum(2) * (eps / C)
  local kf = keep:to(lp:dtype())
  loss = loss * kf
  if o.reduction == "none" then return loss end
  if o.reduction == "sum" then return loss:sum() end
  return loss:sum() / kf:sum()
end
function composite.soft_ce(x, t, o)
  local eps, C = o.label_smoothing or 0, x:size(2)
  local q = t * (1 - eps) + eps / C
  return reduce(-(x:log_softmax(2) * q):sum(2), o.reduction)
end

local function close(a, b, tol) H.assert_close(a, b:totable(), {rtol = tol or 1e-12, atol = tol or 1e-12}) end

describe("mse_loss", function()
  it("is the mean / sum / elementwise squared difference", function()
    local a, b = dle.tensor({{1, 2}, {3, 4}}), dle.tensor({{0, 2}, {5, 3.5}})
    H.assert_close(dle.mse_loss(a, b), 5.25 / 4)
    H.assert_close(dle.mse_loss(a, b, {reduction = "sum"}), 5.25)
    H.assert_close(dle.mse_loss(a, b, {reduction = "none"}), {{1, 0}, {4, 0.25}})
  end)

  it("matches the composite formula on every layout, and on 3000 and 40000 elements", function()
    local vx, vy = H.values({5, 7}, {seed = 1}), H.values({5, 7}, {seed = 2})
    for _, layout in ipairs(H.layouts) do
      local x, y = H.make(vx, "float64", layout), H.make(vy, "float64", layout)
      for _, r in ipairs({"mean", "sum", "none"}) do
        close(dle.mse_loss(x, y, {reduction = r}), composite.mse(x, y, r))
      end
    end
    for _, n in ipairs({3000, 40000}) do
      local x, y = randn({n}, 3), randn({n}, 4)
      close(dle.mse_loss(x, y), composite.mse(x, y), 1e-10)
      close(dle.mse_loss(x, y, {reduction = "none"}), composite.mse(x, y, "none"))
    end
  end)

  it("gradients of input and target are +-2 (x - y) / n", function()
    local x = dle.tensor({1, 2, 4}):requires_grad_(true)
    local y = dle.tensor({0, 3, 4}):requires_grad_(true)
    dle.mse_loss(x, y):backward()
    H.assert_close(x.grad, {2 / 3, -2 / 3, 0})
    H.assert_close(y.grad, {-2 / 3, 2 / 3, 0})
  end)

  it("keeps float16 and float64, promotes integer inputs to float32; empty mean is NaN, sum 0", function()
    assert.are.equal("float16", dle.mse_loss(dle.ones(3, {dtype = "float16"}),
                                             dle.zeros(3, {dtype = "float16"})):dtype())
    assert.are.equal("float64", dle.mse_loss(dle.ones(3, F64), dle.zeros(3, F64)):dtype())
    local i = dle.mse_loss(dle.tensor({1, 2}, {dtype = "int32"}), dle.tensor({0, 0}, {dtype = "int32"}))
    assert.are.equal("float32", i:dtype())
    H.assert_close(i, 2.5)
    local m = dle.mse_loss(dle.zeros(0), dle.zeros(0)):item()
    assert.is_true(m ~= m)
    H.assert_close(dle.mse_loss(dle.zeros(0), dle.zeros(0), {reduction = "sum"}), 0)
  end)

  it("rejects shape mismatches, bool inputs and bad reductions naming the function", function()
    H.assert_error(function() F.mse_loss(dle.zeros(2, 2), dle.zeros(2)) end, "mse_loss", "{2,2}", "{2}")
    H.assert_error(function() dle.mse_loss(dle.zeros(2, 3), dle.zeros(3, 2)) end, "mse_loss", "{2,3}", "{3,2}")
    H.assert_error(function() dle.mse_loss(dle.zeros(2, {dtype = "bool"}), dle.zeros(2)) end, "mse_loss", "bool")
    H.assert_error(function() F.mse_loss(dle.zeros(2), dle.zeros(2), {reduction = "avg"}) end, "mse_loss", "avg")
    H.assert_error(function() dle.zeros(2):mse_loss_backward(dle.zeros(2), dle.zeros(2)) end,
      "mse_loss_backward", "grad_output", "{2}")
  end)
end)

describe("nll_loss", function()
  local lp = dle.tensor({{-0.1, -2, -3}, {-1.5, -0.5, -2}}, F64)

  it("picks -logp at the 1-based target, with ignore_index, reductions and label smoothing", function()
    local t = dle.tensor({2, 1}, I64)
    H.assert_close(dle.nll_loss(lp, t), 1.75)
    H.assert_close(dle.nll_loss(lp, t, {reduction = "sum"}), 3.5)
    H.assert_close(dle.nll_loss(lp, t, {reduction = "none"}), {2, 1.5})
    H.assert_close(dle.nll_loss(lp, t, {ignore_index = 1}), 2)
    H.assert_close(dle.nll_loss(lp, t, {ignore_index = 1, reduction = "none"}), {2, 0})
    -- eps = 0.3: 0.7 * 2 + 0.1 * 5.1 and 0.7 * 1.5 + 0.1 * 4
    H.assert_close(dle.nll_loss(lp, t, {label_smoothing = 0.3, reduction = "none"}), {1.91, 1.45})
  end)

  it("matches the composite formula (all options) and F.nll_loss on {N, C, d} inputs", function()
    local x = randn({37, 11}, 5, -4, 0)
    local t = dle.tensor(H.values({37}, {seed = 6, lo = 1, hi = 11, int = true}), I64)
    t[3], t[10] = -1, -1
    for _, o in ipairs({{}, {reduction = "sum"}, {reduction = "none"}, {ignore_index = -1},
                        {ignore_index = -1, label_smoothing = 0.2, reduction = "none"}}) do
      local tt = o.ignore_index and t or t:clamp(1, 11)
      close(dle.nll_loss(x, tt, o), composite.nll(x, tt, o))
    end
    local x3 = randn({2, 3, 4}, 7)
    local t3 = dle.tensor({{1, 3, 2, 2}, {3, 3, 1, 2}}, I64)
    local ref = composite.nll(x3:permute(1, 3, 2):reshape(-1, 3), t3:reshape(-1), {reduction = "none"})
    close(F.nll_loss(x3, t3, {reduction = "none"}), ref:reshape(2, 4))
    close(F.nll_loss(x3:transpose(1, 3):transpose(1, 3), t3), ref:mean())
  end)

  it("backward scatters -gy / count into the target column", function()
    local x = lp:clone():requires_grad_(true)
    dle.nll_loss(x, dle.tensor({2, -1}, I64), {ignore_index = -1}):backward()
    H.assert_close(x.grad, {{0, -1, 0}, {0, 0, 0}})
    local g = dle.tensor({1, 2}, F64):nll_loss_backward(dle.tensor({3, 1}, I64), 3, {reduction = "none"})
    H.assert_close(g, {{0, 0, -1}, {-2, 0, 0}})
  end)

  it("gives an error naming nll_loss and the target for out-of-range targets; rejects bad shapes and dtypes", function()
    H.assert_error(function() dle.nll_loss(lp, dle.tensor({4, 1}, I64)) end, "nll_loss", "target 4", "3 classes")
    H.assert_error(function() F.nll_loss(lp, dle.tensor({0, 1}, I64)) end, "nll_loss", "target 0")
    H.assert_error(function() F.nll_loss(lp, dle.tensor({1, 2, 3}, I64)) end, "nll_loss", "{2,3}", "{3}")
    H.assert_error(function() dle.nll_loss(lp, dle.tensor({1.0, 2.0})) end, "nll_loss", "int64")
    H.assert_error(function() dle.nll_loss(dle.zeros(2, 3, 4), dle.tensor({1, 2}, I64)) end, "nll_loss", "{2,3,4}")
    H.assert_error(function() dle.nll_loss(lp, dle.tensor({1, 2}, I64), {label_smoothing = 2}) end,
      "nll_loss", "label_smoothing")
    H.assert_error(function() dle.ones(2):nll_loss_backward(dle.tensor({1, 2}, I64), 3) end,
      "nll_loss_backward", "grad_output")
  end)
end)

describe("binary_cross_entropy_with_logits", function()
  local xs, ys = {-3, -0.5, 0, 2, 4}, {0, 1, 0.5, 1, 0}

  it("is -[w y log s(x) + (1 - y) log(1 - s(x))] (pos_weight w = 1 or 2)", function()
    for _, w in ipairs({1, 2}) do
      local ref = {}
      for i, x in ipairs(xs) do
        local s = 1 / (1 + math.exp(-x))
        ref[i] = -(w * ys[i] * math.log(s) + (1 - ys[i]) * math.log(1 - s))
      end
      local x, y = dle.tensor(xs, F64), dle.tensor(ys, F64)
      local o = w == 2 and {pos_weight = 2} or {}
      o.reduction = "none"
      H.assert_close(dle.binary_cross_entropy_with_logits(x, y, o), ref, {rtol = 1e-12, atol = 1e-12})
      -- float32: the kernel's log1p polynomial stays within float rounding
      H.assert_close(dle.binary_cross_entropy_with_logits(x:float(), y:float(), o), ref, {rtol = 1e-6, atol = 1e-7})
    end
  end)

  it("gradient in x is sigmoid(x) - y (over n for the mean), in y -x", function()
    local x = dle.tensor(xs, F64):requires_grad_(true)
    local y = dle.tensor(ys, F64):requires_grad_(true)
    dle.binary_cross_entropy_with_logits(x, y, {reduction = "sum"}):backward()
    local ref = {}
    for i, v in ipairs(xs) do ref[i] = 1 / (1 + math.exp(-v)) - ys[i] end
    H.assert_close(x.grad, ref)
    H.assert_close(y.grad, {3, 0.5, 0, -2, -4})
  end)

  it("matches the composite formula with per-class, {C, 1}-shaped and number pos_weight, on many blocks", function()
    local x, y = randn({37, 101}, 8, -6, 6), randn({37, 101}, 9, 0, 1)
    local wc, wr = randn({101}, 10, 0.5, 3), randn({37, 1}, 11, 0.5, 3)
    for _, r in ipairs({"mean", "sum", "none"}) do
      local o = {reduction = r}
      close(dle.binary_cross_entropy_with_logits(x, y, o), composite.bce(x, y, nil, r), 1e-10)
      for _, w in ipairs({wc, wr, dle.tensor(2.5, F64)}) do
        o.pos_weight = w
        close(dle.binary_cross_entropy_with_logits(x, y, o), composite.bce(x, y, w, r), 1e-10)
      end
      o.pos_weight = 2.5
      close(dle.binary_cross_entropy_with_logits(x, y, o), composite.bce(x, y, dle.tensor(2.5, F64), r), 1e-10)
    end
    -- 40400 elements: blocks on several threads, each reading its own runs of the weights
    local xb, yb, wb = randn({400, 101}, 16, -6, 6), randn({400, 101}, 17, 0, 1), randn({101}, 18, 0.5, 3)
    close(dle.binary_cross_entropy_with_logits(xb, yb, {pos_weight = wb}), composite.bce(xb, yb, wb), 1e-10)
    -- float32 against the float64 composite, on a transposed input
    local xf, yf = x:float():t():contiguous():t(), y:float()
    close(dle.binary_cross_entropy_with_logits(xf, yf, {pos_weight = wc:float(), reduction = "none"}):double(),
          composite.bce(x, y, wc, "none"), 2e-5)
  end)

  it("stays finite for logits of +-1e4 in float32 (loss and gradients)", function()
    local x = dle.tensor({1e4, -1e4, 1e4, -1e4, 0}):requires_grad_(true)
    local y = dle.tensor({0, 1, 1, 0, 0.5})
    local loss = dle.binary_cross_entropy_with_logits(x, y, {reduction = "none", pos_weight = 3})
    H.assert_close(loss, {1e4, 3e4, 0, 0, math.log(2) * 2}, {rtol = 1e-6})
    loss:sum():backward()
    H.assert_close(x.grad, {1, -3, 0, 0, 0.5 - 0.5 * 2}, {atol = 1e-6})
  end)

  it("rejects shape mismatches, pos_weight that does not broadcast, bool inputs", function()
    local x = dle.zeros(4, 3)
    H.assert_error(function() F.binary_cross_entropy_with_logits(x, dle.zeros(3, 4)) end,
      "binary_cross_entropy_with_logits", "{4,3}", "{3,4}")
    H.assert_error(function() dle.binary_cross_entropy_with_logits(x, x, {pos_weight = dle.ones(4)}) end,
      "binary_cross_entropy_with_logits", "pos_weight", "{4}", "{4,3}")
    H.assert_error(function() dle.binary_cross_entropy_with_logits(x, x, {pos_weight = "2"}) end,
      "binary_cross_entropy_with_logits", "pos_weight")
    H.assert_error(function() dle.binary_cross_entropy_with_logits(x, dle.zeros(4, 3, {dtype = "bool"})) end,
      "binary_cross_entropy_with_logits", "bool")
  end)
end)

describe("cross_entropy with probability targets (soft_cross_entropy)", function()
  it("is -sum t log softmax(x) per row, lse the row log-sum-exp", function()
    local x = dle.tensor({{1, 2, 3}, {0, 0, 0}}, F64)
    local t = dle.tensor({{0, 0, 1}, {0.5, 0.5, 0}}, F64)
    local l1 = math.log(math.exp(1) + math.exp(2) + math.exp(3))
    local loss, lse = dle.soft_cross_entropy(x, t, {reduction = "none"})
    H.assert_close(loss, {l1 - 3, math.log(3)})
    H.assert_close(lse, {l1, math.log(3)})
    H.assert_close(F.cross_entropy(x, t), (l1 - 3 + math.log(3)) / 2)
    -- one-hot probabilities give the class-target loss, with smoothing too
    H.assert_close(F.cross_entropy(x, dle.tensor({{0, 0, 1}, {1, 0, 0}}, F64), {label_smoothing = 0.2}),
      F.cross_entropy(x, dle.tensor({3, 1}, I64), {label_smoothing = 0.2}):item())
  end)

  it("matches the composite formula (all options, {N, C, d} logits, a transposed input)", function()
    local x, t = randn({33, 17}, 12, -5, 5), randn({33, 17}, 13, 0, 1)
    for _, o in ipairs({{}, {reduction = "sum"}, {reduction = "none"}, {label_smoothing = 0.2},
                        {label_smoothing = 1, reduction = "none"}}) do
      close(dle.soft_cross_entropy(x, t, o), composite.soft_ce(x, t, o), 1e-10)
      close(F.cross_entropy(x:t():contiguous():t(), t, o), composite.soft_ce(x, t, o), 1e-10)
    end
    local x3, t3 = randn({2, 3, 4}, 14), randn({2, 3, 4}, 15, 0, 1)
    local ref = composite.soft_ce(x3:permute(1, 3, 2):reshape(-1, 3), t3:permute(1, 3, 2):reshape(-1, 3),
                                  {reduction = "none"})
    close(F.cross_entropy(x3, t3, {reduction = "none"}), ref:reshape(2, 4), 1e-10)
  end)

  it("stays finite for logits of +-1e4 in float32 (loss, lse and gradients)", function()
    local x = dle.tensor({{1e4, -1e4, 0}, {-1e4, -1e4, 1e4}}):requires_grad_(true)
    local t = dle.tensor({{0.5, 0, 0.5}, {0, 0, 1}})
    local loss, lse = dle.soft_cross_entropy(x, t, {reduction = "none"})
    H.assert_close(loss, {5e3, 0}, {rtol = 1e-6})
    H.assert_close(lse, {1e4, 1e4}, {rtol = 1e-6})
    loss:sum():backward()
    H.assert_close(x.grad, {{0.5, 0, -0.5}, {0, 0, 0}}, {atol = 1e-6})
  end)

  it("rejects probability targets of another shape and bad smoothing, naming the function", function()
    local x = dle.zeros(2, 3)
    H.assert_error(function() F.cross_entropy(x, dle.zeros(3, 2)) end, "cross_entropy", "{3,2}", "{2,3}")
    H.assert_error(function() dle.soft_cross_entropy(x, dle.zeros(2, 4)) end, "soft_cross_entropy", "{2,3}", "{2,4}")
    H.assert_error(function() dle.soft_cross_entropy(x, x, {label_smoothing = -0.5}) end,
      "soft_cross_entropy", "label_smoothing")
    H.assert_error(function() dle.soft_cross_entropy(dle.zeros(2, 3, 4), dle.zeros(2, 3, 4)) end,
      "soft_cross_entropy", "2-D")
    H.assert_error(function() dle.soft_cross_entropy(dle.zeros(2, 0), dle.zeros(2, 0)) end,
      "soft_cross_entropy", "no classes")
  end)
end)

-- Optional: the same numbers from PyTorch (skipped when /usr/bin/python3 cannot import torch).
describe("PyTorch agreement (optional)", function()
  it("mse, nll (ignore_index), bce (per-class pos_weight) and soft cross-entropy (smoothing) match torch 1e-10 in " ..
      "float64", function()
    if H.without_torch(pending) then return end
    local x, y, w = randn({4, 5}, 20, -3, 3), randn({4, 5}, 21, 0, 1), randn({5}, 22, 0.5, 2)
    local t = dle.tensor({2, 5, -1, 1}, I64)
    local py = H.torch_literal
    local line = H.run_python({
      "import torch, torch.nn.functional as F",
      "x, y, w = " .. py(x) .. ", " .. py(y) .. ", " .. py(w),
      "t = torch.tensor([1, 4, -2, 0])",
      "p = y / y.sum(1, keepdim=True)",
      "r = [F.mse_loss(x, y), F.nll_loss(x.log_softmax(1), t, ignore_index=-2),",
      "     F.binary_cross_entropy_with_logits(x, y, pos_weight=w),",
      "     F.cross_entropy(x, p, label_smoothing=0.1, reduction='sum')]",
      "print(' '.join(repr(v.item()) for v in r))",
    })[1]
    local probs = y / y:sum(2, true)
    local got = {
      dle.mse_loss(x, y):item(),
      dle.nll_loss(x:log_softmax(2), t, {ignore_index = -1}):item(),
      dle.binary_cross_entropy_with_logits(x, y, {pos_weight = w}):item(),
      F.cross_entropy(x, probs, {label_smoothing = 0.1, reduction = "sum"}):item(),
    }
    H.assert_torch_numbers(got, line, 1e-10, "loss")
  end)
end)
