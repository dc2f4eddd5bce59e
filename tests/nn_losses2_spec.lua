-- nn_losses2_spec.lua — the losses of dle.nn.functional added for issue 17 (l1, smooth_l1, huber,
-- kl_div, binary_cross_entropy, poisson_nll, cosine_embedding, margin_ranking, triplet_margin,
-- multilabel_soft_margin, hinge_embedding, soft_margin, gaussian_nll) and cosine_similarity,
-- normalize, pairwise_distance: elementwise values against scalar Lua formulas, the reductions
-- (none / sum / mean) agreeing with each other, float64 gradchecks (reverse and forward mode) in
-- every float input, the modules equal to the functions, errors naming the function, and
-- optionally PyTorch's values and gradients in float64.
local dle = require("dle")
local H = require("helpers")

local nn, F = dle.nn, dle.nn.functional
local F64 = {dtype = "float64"}

local x = dle.tensor({{-1.5, -0.3, 0.2, 0.9}, {2.5, -2.2, 0.6, 1.4}}, F64)
local y = dle.tensor({{-1.0, 0.4, 0.1, 2.4}, {1.0, -2.1, -0.3, 1.45}}, F64)
local p = dle.tensor({{0.1, 0.35, 0.6, 0.95}, {0.5, 0.2, 0.75, 0.05}}, F64)     -- probabilities
local q = dle.tensor({{0.2, 0.3, 0.1, 0.4}, {0.25, 0.25, 0.4, 0.1}}, F64)      -- a distribution per row
local sign = dle.tensor({{1, -1, 1, -1}, {-1, -1, 1, 1}}, F64)
local labels = dle.tensor({1, -1}, F64)

local function elementwise(a, b, f)
  return H.zipmap(f, a:totable(), b:totable())
end
local function sum_of(t)
  local s = 0
  for _, v in ipairs(H.flat(t)) do s = s + v end
  return s
end

describe("losses: values", function()
  local cases = {
    {"l1_loss", function(o) return F.l1_loss(x, y, o) end,
      elementwise(x, y, function(a, b) return math.abs(a - b) end)},
    {"smooth_l1_loss beta 0.5", function(o) o.beta = 0.5; return F.smooth_l1_loss(x, y, o) end,
      elementwise(x, y, function(a, b)
        local d = math.abs(a - b)
        return d < 0.5 and 0.5 * d * d / 0.5 or d - 0.25
      end)},
    {"huber_loss delta 0.5", function(o) o.delta = 0.5; return F.huber_loss(x, y, o) end,
      elementwise(x, y, function(a, b)
        local d = math.abs(a - b)
        return d < 0.5 and 0.5 * d * d or 0.5 * (d - 0.25)
      end)},
    {"kl_div", function(o) return F.kl_div(x:log_softmax(2), q, o) end,
      elementwise(x:log_softmax(2), q, function(a, b) return b * (math.log(b) - a) end)},
    {"kl_div log_target", function(o) o.log_target = true; return F.kl_div(x:log_softmax(2), q:log(), o) end,
      elementwise(x:log_softmax(2), q, function(a, b) return b * (math.log(b) - a) end)},
    {"binary_cross_entropy", function(o) return F.binary_cross_entropy(p, q, o) end,
      elementwise(p, q, function(a, b) return -(b * math.log(a) + (1 - b) * math.log(1 - a)) end)},
    {"poisson_nll_loss", function(o) return F.poisson_nll_loss(x, p * 3, o) end,
      elementwise(x, p * 3, function(a, b) return math.exp(a) - b * a end)},
    {"poisson_nll_loss full, not log_input", function(o)
      o.full, o.log_input = true, false
      return F.poisson_nll_loss(p, y:abs() * 2, o)
    end, elementwise(p, y:abs() * 2, function(a, b)
      local l = a - b * math.log(a + 1e-8)
      if b > 1 then l = l + b * math.log(b) - b + 0.5 * math.log(2 * math.pi * b) end
      return l
    end)},
    {"hinge_embedding_loss", function(o) return F.hinge_embedding_loss(x, sign, o) end,
      elementwise(x, sign, function(a, b) return b == 1 and a or math.max(0, 1 - a) end)},
    {"soft_margin_loss", function(o) return F.soft_margin_loss(x, sign, o) end,
      elementwise(x, sign, function(a, b) return math.log(1 + math.exp(-a * b)) end)},
    {"margin_ranking_loss margin 0.1", function(o) o.margin = 0.1; return F.margin_ranking_loss(x, y, sign, o) end,
      H.zipmap(function(a, b, s) return math.max(0, -s * (a - b) + 0.1) end, x:totable(), y:totable(), sign:totable())},
    {"gaussian_nll_loss full", function(o) o.full = true; return F.gaussian_nll_loss(x, y, p, o) end,
      H.zipmap(function(a, b, v) return 0.5 * (math.log(v) + (a - b) ^ 2 / v) + 0.5 * math.log(2 * math.pi) end,
        x:totable(), y:totable(), p:totable())},
  }
  for _, c in ipairs(cases) do
    it(c[1] .. ": elementwise values for reduction none, their sum and mean for sum and mean", function()
      local n = #H.flat(c[3])
      H.assert_close(c[2]({reduction = "none"}), c[3], {rtol = 1e-12, atol = 1e-14})
      H.assert_close(c[2]({reduction = "sum"}):item(), sum_of(c[3]), {rtol = 1e-12, atol = 1e-14})
      H.assert_close(c[2]({}):item(), sum_of(c[3]) / n, {rtol = 1e-12, atol = 1e-14})
    end)
  end

  it("kl_div: batchmean divides the sum by the batch size; zero targets add nothing", function()
    local lp = x:log_softmax(2)
    H.assert_close(F.kl_div(lp, q, {reduction = "batchmean"}):item(), F.kl_div(lp, q, {reduction = "sum"}):item() / 2,
      {rtol = 1e-14, atol = 0})
    local t0 = dle.tensor({{0, 0.5, 0.5, 0}, {1, 0, 0, 0}}, F64)
    local l = F.kl_div(lp, t0, {reduction = "none"}):totable()
    assert.are.equal(0, l[1][1])
    assert.are.equal(0, l[2][4])
    local z = lp:clone():requires_grad_()
    local t = t0:clone():requires_grad_()
    F.kl_div(z, t, {reduction = "sum"}):backward()
    for _, v in ipairs(t.grad:reshape(-1):totable()) do assert.is_true(v == v, "NaN gradient at a zero target") end
  end)

  it("binary_cross_entropy clamps each log at -100 and applies weight", function()
    local l = F.binary_cross_entropy(dle.tensor({0, 1, 0.5}, F64), dle.tensor({1, 0, 1}, F64), {reduction = "none"})
    H.assert_close(l, {100, 100, math.log(2)}, {rtol = 1e-15, atol = 0})
    local w = dle.tensor({1, 2, 3, 4}, F64)
    H.assert_close(F.binary_cross_entropy(p, q, {weight = w, reduction = "none"}),
      (F.binary_cross_entropy(p, q, {reduction = "none"}) * w):totable(), {rtol = 1e-15, atol = 0})
  end)

  it("cosine_embedding_loss: 1 - cos for label 1, max(0, cos - margin) for -1, per row", function()
    local function cos(a, b)
      local ab, aa, bb = 0, 1e-12, 1e-12
      for i = 1, #a do ab = ab + a[i] * b[i]; aa = aa + a[i] ^ 2; bb = bb + b[i] ^ 2 end
      return ab / math.sqrt(aa * bb)
    end
    local xt, yt = x:totable(), y:totable()
    local want = {1 - cos(xt[1], yt[1]), math.max(0, cos(xt[2], yt[2]) - 0.2)}
    H.assert_close(F.cosine_embedding_loss(x, y, labels, {margin = 0.2, reduction = "none"}), want,
      {rtol = 1e-12, atol = 1e-14})
    H.assert_close(F.cosine_embedding_loss(x[1], y[1], dle.tensor(1, F64)):item(), want[1], {rtol = 1e-12, atol = 0})
  end)

  it("triplet_margin_loss: max(0, margin + d(a, p) - d(a, n)), d the p-norm of a - b + eps; swap", function()
    local n = y * -0.5 + 0.3
    local function dist(a, b, pw)
      local s = 0
      for i = 1, #a do s = s + math.abs(a[i] - b[i] + 1e-6) ^ pw end
      return s ^ (1 / pw)
    end
    local xt, yt, nt = x:totable(), y:totable(), n:totable()
    for _, pw in ipairs({2, 1, 3}) do
      local want = {}
      for r = 1, 2 do want[r] = math.max(0, 1 + dist(xt[r], yt[r], pw) - dist(xt[r], nt[r], pw)) end
      H.assert_close(F.triplet_margin_loss(x, y, n, {p = pw, reduction = "none"}), want, {rtol = 1e-12, atol = 1e-14})
      local swapped = {}
      for r = 1, 2 do
        swapped[r] = math.max(0, 1 + dist(xt[r], yt[r], pw) - math.min(dist(xt[r], nt[r], pw), dist(yt[r], nt[r], pw)))
      end
      H.assert_close(F.triplet_margin_loss(x, y, n, {p = pw, swap = true, reduction = "none"}), swapped,
        {rtol = 1e-12, atol = 1e-14})
    end
  end)

  it("multilabel_soft_margin_loss averages the per-class logistic losses of each row", function()
    local xt, st = x:totable(), sign:gt(0):double():totable()
    local want = {}
    for r = 1, 2 do
      local s = 0
      for c = 1, 4 do
        local sg = 1 / (1 + math.exp(-xt[r][c]))
        s = s - (st[r][c] * math.log(sg) + (1 - st[r][c]) * math.log(1 - sg)) * c
      end
      want[r] = s / 4
    end
    H.assert_close(F.multilabel_soft_margin_loss(x, sign:gt(0):double(), {weight = dle.tensor({1, 2, 3, 4}, F64),
      reduction = "none"}), want, {rtol = 1e-12, atol = 1e-14})
  end)

  it("gaussian_nll_loss: var of input's shape, without the last dim, or with it 1; clamped at eps", function()
    local v = dle.tensor({0.5, 2}, F64)
    local full = v:unsqueeze(2):expand(2, 4)
    local want = F.gaussian_nll_loss(x, y, full:contiguous()):item()
    H.assert_close(F.gaussian_nll_loss(x, y, v):item(), want, {rtol = 1e-15, atol = 0})
    H.assert_close(F.gaussian_nll_loss(x, y, v:unsqueeze(2)):item(), want, {rtol = 1e-15, atol = 0})
    local tiny = dle.full({2, 4}, 1e-9, F64)
    H.assert_close(F.gaussian_nll_loss(x, y, tiny, {eps = 1e-3}):item(),
      F.gaussian_nll_loss(x, y, dle.full({2, 4}, 1e-3, F64)):item(), {rtol = 1e-15, atol = 0})
    -- the clamp is in value only: the gradient in var is the unclamped formula's at the clamped value
    local vv = tiny:clone():requires_grad_()
    F.gaussian_nll_loss(x, y, vv, {eps = 1e-3, reduction = "sum"}):backward()
    local d2 = ((x - y) ^ 2):totable()
    H.assert_close(vv.grad, H.map(d2, function(d) return 0.5 * (1 / 1e-3 - d / 1e-6) end), {rtol = 1e-12, atol = 0})
  end)

  it("cosine_similarity, normalize and pairwise_distance follow their formulas (dim 2 by default)", function()
    local xt, yt = x:totable(), y:totable()
    local cs, nx, pd = {}, {}, {}
    for r = 1, 2 do
      local ab, aa, bb, dd = 0, 0, 0, 0
      for c = 1, 4 do
        ab = ab + xt[r][c] * yt[r][c]; aa = aa + xt[r][c] ^ 2; bb = bb + yt[r][c] ^ 2
        dd = dd + (xt[r][c] - yt[r][c] + 1e-6) ^ 2
      end
      cs[r], pd[r], nx[r] = ab / math.sqrt(aa * bb), math.sqrt(dd), {}
      for c = 1, 4 do nx[r][c] = xt[r][c] / math.sqrt(aa) end
    end
    H.assert_close(F.cosine_similarity(x, y), cs, {rtol = 1e-12, atol = 0})
    H.assert_close(F.normalize(x), nx, {rtol = 1e-12, atol = 0})
    H.assert_close(F.pairwise_distance(x, y), pd, {rtol = 1e-12, atol = 0})
    assert.are.same({2, 1}, F.pairwise_distance(x, y, 2, 1e-6, true):shape())
    H.assert_close(F.normalize(x, 1, 1):abs():sum(1), {1, 1, 1, 1}, {rtol = 1e-12, atol = 0})
    H.assert_close(F.normalize(dle.zeros(2, 3, F64)), {{0, 0, 0}, {0, 0, 0}}, {rtol = 0, atol = 0})
    H.assert_close(F.cosine_similarity(x, y, 1):shape(), {4}, {rtol = 0, atol = 0})
  end)
end)

describe("losses: gradients (float64, reverse and forward mode)", function()
  local n = y * -0.5 + 0.3
  local bin = sign:gt(0):double()
  local grads = {
    {"l1_loss", function(a, b) return F.l1_loss(a, b) end, {x, y}},
    {"smooth_l1_loss", function(a, b) return F.smooth_l1_loss(a, b, {beta = 0.5, reduction = "sum"}) end, {x, y}},
    {"huber_loss", function(a, b) return F.huber_loss(a, b, {delta = 0.5, reduction = "none"}) end, {x, y}},
    {"kl_div", function(a, b) return F.kl_div(a, b, {reduction = "batchmean"}) end, {x:log_softmax(2), q}},
    {"kl_div log_target", function(a, b) return F.kl_div(a, b, {log_target = true}) end, {x:log_softmax(2), q:log()}},
    {"binary_cross_entropy", function(a, b) return F.binary_cross_entropy(a, b, {weight = p}) end, {p, q}},
    {"poisson_nll_loss", function(a, b) return F.poisson_nll_loss(a, b, {reduction = "sum"}) end, {x, p}},
    {"poisson_nll_loss full", function(a, b) return F.poisson_nll_loss(a, b, {log_input = false, full = true}) end,
      {p, y:abs() * 2}},
    {"cosine_embedding_loss", function(a, b) return F.cosine_embedding_loss(a, b, labels, {margin = -0.5}) end, {x, y}},
    {"margin_ranking_loss", function(a, b) return F.margin_ranking_loss(a, b, sign, {reduction = "none"}) end, {x, y}},
    {"triplet_margin_loss", function(a, b, c) return F.triplet_margin_loss(a, b, c, {margin = 3, swap = true}) end,
      {x, y, n}},
    {"triplet_margin_loss p=1", function(a, b, c) return F.triplet_margin_loss(a, b, c, {margin = 3, p = 1}) end,
      {x, y, n}},
    {"multilabel_soft_margin_loss", function(a, b) return F.multilabel_soft_margin_loss(a, b) end, {x, bin}},
    {"hinge_embedding_loss", function(a) return F.hinge_embedding_loss(a, sign, {margin = 0.5}) end, {x}},
    {"soft_margin_loss", function(a) return F.soft_margin_loss(a, sign, {reduction = "sum"}) end, {x}},
    {"gaussian_nll_loss", function(a, b, v) return F.gaussian_nll_loss(a, b, v, {full = true}) end, {x, y, p}},
    {"cosine_similarity", function(a, b) return F.cosine_similarity(a, b) end, {x, y}},
    {"normalize", function(a) return F.normalize(a, 3, 1) end, {x}},
    {"pairwise_distance", function(a, b) return F.pairwise_distance(a, b, 1.5) end, {x, y}},
  }
  for _, g in ipairs(grads) do
    it(g[1] .. " passes gradcheck in every float input", function()
      local ins = {}
      for i, t in ipairs(g[3]) do ins[i] = t:clone() end
      H.gradcheck(g[2], ins)
    end)
  end
  it("gradcheck on transposed (non-contiguous) inputs", function()
    H.gradcheck(function(a, b) return F.smooth_l1_loss(a:t(), b:t()) end, {x:t():contiguous(), y:t():contiguous()})
    H.gradcheck(function(a, b) return F.cosine_similarity(a:t(), b:t(), 1) end, {x:clone(), y:clone()})
  end)
end)

describe("loss modules", function()
  it("call the function with their options", function()
    local n = y * -0.5 + 0.3
    local same = {
      {nn.L1Loss({reduction = "sum"})(x, y), F.l1_loss(x, y, {reduction = "sum"})},
      {nn.SmoothL1Loss({beta = 0.3})(x, y), F.smooth_l1_loss(x, y, {beta = 0.3})},
      {nn.HuberLoss({delta = 2})(x, y), F.huber_loss(x, y, {delta = 2})},
      {nn.KLDivLoss({reduction = "batchmean"})(x, q), F.kl_div(x, q, {reduction = "batchmean"})},
      {nn.BCELoss({weight = q})(p, q), F.binary_cross_entropy(p, q, {weight = q})},
      {nn.PoissonNLLLoss({full = true})(x, p * 4), F.poisson_nll_loss(x, p * 4, {full = true})},
      {nn.CosineEmbeddingLoss({margin = 0.1})(x, y, labels), F.cosine_embedding_loss(x, y, labels, {margin = 0.1})},
      {nn.MarginRankingLoss({margin = 1})(x, y, sign), F.margin_ranking_loss(x, y, sign, {margin = 1})},
      {nn.TripletMarginLoss({p = 1})(x, y, n), F.triplet_margin_loss(x, y, n, {p = 1})},
      {nn.MultiLabelSoftMarginLoss()(x, p), F.multilabel_soft_margin_loss(x, p)},
      {nn.HingeEmbeddingLoss({margin = 2})(x, sign), F.hinge_embedding_loss(x, sign, {margin = 2})},
      {nn.SoftMarginLoss()(x, sign), F.soft_margin_loss(x, sign)},
      {nn.GaussianNLLLoss({full = true})(x, y, p), F.gaussian_nll_loss(x, y, p, {full = true})},
    }
    for i, s in ipairs(same) do assert.are.equal(s[2]:item(), s[1]:item(), "loss " .. i) end
    assert.are.equal("HuberLoss(reduction=sum)", tostring(nn.HuberLoss({reduction = "sum"})))
  end)
end)

describe("loss errors", function()
  it("name the function, the argument, the shapes or the bad option value", function()
    H.assert_error(function() F.l1_loss(x, y:t()) end, "l1_loss: input has shape {2,4} but target has shape {4,2}")
    H.assert_error(function() F.l1_loss(x, 1) end, "l1_loss: target must be a tensor, got number 1")
    H.assert_error(function() F.huber_loss(x, y, {delta = 0}) end, "huber_loss: delta must be a number > 0")
    H.assert_error(function() F.kl_div(x, y, {reduction = "avg"}) end,
      "kl_div: reduction must be 'mean', 'sum', 'none' or 'batchmean', got 'avg'")
    H.assert_error(function() F.l1_loss(x, y, {reduction = "batchmean"}) end,
      "l1_loss: reduction must be 'mean', 'sum' or 'none', got 'batchmean'")
    H.assert_error(function() F.binary_cross_entropy(x, p) end, "binary_cross_entropy: input must hold probabilities "
      .. "in [0, 1], got values in [-2.2, 2.5]")
    H.assert_error(function() F.binary_cross_entropy(p, q, {weight = dle.ones(3, F64)}) end, "binary_cross_entropy:")
    H.assert_error(function() F.cosine_embedding_loss(x, y, dle.ones(3, F64)) end,
      "cosine_embedding_loss: inputs are {2,4}, so target must have shape {2}, got {3}")
    H.assert_error(function() F.triplet_margin_loss(x, y, x:t()) end,
      "triplet_margin_loss: anchor has shape {2,4} but negative has shape {4,2}")
    H.assert_error(function() F.gaussian_nll_loss(x, y, dle.ones(3, F64)) end,
      "gaussian_nll_loss: var has shape {3}; for input {2,4} it must be {2,4}, {2} or that with its last size 1")
    H.assert_error(function() F.gaussian_nll_loss(x, y, -p) end, "gaussian_nll_loss: var has negative entries")
    H.assert_error(function() F.poisson_nll_loss(x, y, {full = 1}) end, "poisson_nll_loss: full must be a boolean")
    H.assert_error(function() F.cosine_similarity(x, y:narrow(2, 1, 3)) end, "cosine_similarity:")
    H.assert_error(function() F.normalize(x, 0) end, "normalize: p must be a number > 0, got number 0")
    H.assert_error(function() nn.TripletMarginLoss()(x, y, x, x) end, "TripletMarginLoss: expected 3 tensors, got 4")
    local ints = dle.tensor({1, 2}, {dtype = "int64"})
    H.assert_error(function() F.l1_loss(ints, ints) end,
      "l1_loss: input must be a float tensor, got int64")
  end)
end)

-- Optional: PyTorch's numbers (skipped when /usr/bin/python3 cannot import torch).
describe("losses against PyTorch (optional)", function()
  it("values and gradients of every loss and distance match torch 1e-12 in float64", function()
    if H.without_torch(pending) then return end
    local n = y * -0.5 + 0.3
    local bin = sign:gt(0):double()
    local lit = H.torch_literal
    local py = {"import torch, torch.nn.functional as F, warnings", "warnings.filterwarnings('ignore')",
      "X, Y, P, Q, S, N, B, L = " .. table.concat({lit(x), lit(y), lit(p), lit(q), lit(sign), lit(n), lit(bin),
        lit(labels)}, ", "), "out = []",
      "def run(f, *ins):",
      "  ins = [t.clone().requires_grad_() for t in ins]",
      "  r = f(*ins); r.sum().backward()",
      "  out.extend(r.reshape(-1).tolist())",
      "  for t in ins: out.extend(t.grad.reshape(-1).tolist())"}
    local got = {}
    local function run(f, ins, expr, names)
      local cl = {}
      for i, t in ipairs(ins) do cl[i] = t:clone():requires_grad_() end
      local r = f(table.unpack(cl))
      r:sum():backward()
      for _, v in ipairs(r:reshape(-1):totable()) do got[#got + 1] = v end
      for _, t in ipairs(cl) do for _, v in ipairs(t.grad:reshape(-1):totable()) do got[#got + 1] = v end end
      local lits = {}
      for i, t in ipairs(ins) do lits[i] = lit(t) end
      py[#py + 1] = "run(lambda " .. names .. ": " .. expr .. ", " .. table.concat(lits, ", ") .. ")"
    end
    for _, red in ipairs({"none", "sum", "mean"}) do
      local o = {reduction = red}
      local R = "reduction='" .. red .. "'"
      local function with(t) local c = {reduction = red}; for k, v in pairs(t) do c[k] = v end; return c end
      run(function(a, b) return F.l1_loss(a, b, o) end, {x, y}, "F.l1_loss(x, y, " .. R .. ")", "x, y")
      run(function(a, b) return F.smooth_l1_loss(a, b, with{beta = 0.5}) end, {x, y},
        "F.smooth_l1_loss(x, y, beta=0.5, " .. R .. ")", "x, y")
      run(function(a, b) return F.huber_loss(a, b, with{delta = 0.5}) end, {x, y},
        "F.huber_loss(x, y, delta=0.5, " .. R .. ")", "x, y")
      run(function(a, b) return F.kl_div(a, b, o) end, {x:log_softmax(2), q}, "F.kl_div(x, q, " .. R .. ")", "x, q")
      run(function(a, b) return F.kl_div(a, b, with{log_target = true}) end, {x:log_softmax(2), q:log()},
        "F.kl_div(x, q, log_target=True, " .. R .. ")", "x, q")
      run(function(a, b) return F.binary_cross_entropy(a, b, with{weight = q}) end, {p, q},
        "F.binary_cross_entropy(p, q, weight=Q, " .. R .. ")", "p, q")
      run(function(a, b) return F.poisson_nll_loss(a, b, o) end, {x, p}, "F.poisson_nll_loss(x, p, " .. R .. ")",
        "x, p")
      run(function(a, b) return F.poisson_nll_loss(a, b, with{log_input = false, full = true}) end, {p, y:abs() * 2},
        "F.poisson_nll_loss(p, y, log_input=False, full=True, " .. R .. ")", "p, y")
      run(function(a, b) return F.cosine_embedding_loss(a, b, labels, with{margin = -0.5}) end, {x, y},
        "F.cosine_embedding_loss(x, y, L, margin=-0.5, " .. R .. ")", "x, y")
      run(function(a, b) return F.margin_ranking_loss(a, b, sign, with{margin = 0.2}) end, {x, y},
        "F.margin_ranking_loss(x, y, S, margin=0.2, " .. R .. ")", "x, y")
      run(function(a, b, c) return F.triplet_margin_loss(a, b, c, with{margin = 3, p = 3, swap = true}) end, {x, y, n},
        "F.triplet_margin_loss(x, y, n, margin=3, p=3, swap=True, " .. R .. ")", "x, y, n")
      run(function(a, b) return F.multilabel_soft_margin_loss(a, b, with{weight = q[1]}) end, {x, bin},
        "F.multilabel_soft_margin_loss(x, b, weight=Q[0], " .. R .. ")", "x, b")
      run(function(a) return F.hinge_embedding_loss(a, sign, with{margin = 0.5}) end, {x},
        "F.hinge_embedding_loss(x, S, margin=0.5, " .. R .. ")", "x")
      run(function(a) return F.soft_margin_loss(a, sign, o) end, {x}, "F.soft_margin_loss(x, S, " .. R .. ")", "x")
      run(function(a, b, v) return F.gaussian_nll_loss(a, b, v, with{full = true}) end, {x, y, p},
        "F.gaussian_nll_loss(x, y, p, full=True, " .. R .. ")", "x, y, p")
    end
    run(function(a) return F.kl_div(a, q, {reduction = "batchmean"}) end, {x:log_softmax(2)},
      "F.kl_div(x, Q, reduction='batchmean')", "x")
    run(function(a, b) return F.cosine_similarity(a, b) end, {x, y}, "F.cosine_similarity(x, y)", "x, y")
    run(function(a, b) return F.cosine_similarity(a, b, 1) end, {x, y}, "F.cosine_similarity(x, y, 0)", "x, y")
    run(function(a) return F.normalize(a, 3, 1) end, {x}, "F.normalize(x, 3, 0)", "x")
    run(function(a, b) return F.pairwise_distance(a, b, 1.5) end, {x, y}, "F.pairwise_distance(x, y, 1.5)", "x, y")
    py[#py + 1] = "print(' '.join(repr(v) for v in out))"
    H.assert_torch_numbers(got, H.run_python(py)[1], 1e-12, "value")
  end)
end)
