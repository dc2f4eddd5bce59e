-- nnops_spec.lua — forward results, options and errors of the fused nn ops (dle.cross_entropy,
-- dle.embedding, dle.dropout, dle.sdpa and their use by dle.nn.functional), against references
-- composed of other dle ops or computed by hand: odd sizes, non-contiguous inputs, float32 and
-- float64, sizes large enough for the threaded paths, ignore_index, label smoothing, reductions,
-- padding_idx, causal/bool/float masks, fully masked rows, dropout determinism under a seed and
-- its mean, and errors on bad shapes and indices. Gradients: grad_nnops_spec.lua. An optional
-- comparison with PyTorch runs when /usr/bin/python3 can import torch.
local dle = require("dle")
local H = require("helpers")

local F = dle.nn.functional
local I64 = {dtype = "int64"}

local function randn(shape, seed, dtype, scale)
  return dle.tensor(H.values(shape, {seed = seed, lo = -(scale or 1), hi = scale or 1}), {dtype = dtype or "float64"})
end

local function max_abs(a, b) return (a - b):abs():max():item() end

--- Targets 1..c (int64 {n}) from a seed.
local function classes(n, c, seed)
  local v = {}
  for i = 1, n do v[i] = (i * 7 + seed * 13) % c + 1 end
  return dle.tensor(v, I64)
end

-- cross-entropy from log_softmax + gather: {n} losses
local function ce_rows(x, t) return -x:log_softmax(2):gather(2, t:unsqueeze(2)):squeeze(2) end

describe("dle.cross_entropy", function()
  it("matches -log_softmax at the target for mean, sum and none on odd sizes (float32, float64)", function()
    for _, dt in ipairs({"float64", "float32"}) do
      local x, t = randn({7, 13}, 1, dt, 3), classes(7, 13, 1)
      local ref = ce_rows(x, t)
      local tol = dt == "float64" and 1e-12 or 1e-5
      assert.is_true(max_abs(dle.cross_entropy(x, t, {reduction = "none"}), ref) < tol)
      assert.is_true(math.abs(dle.cross_entropy(x, t):item() - ref:mean():item()) < tol)
      assert.is_true(math.abs(dle.cross_entropy(x, t, {reduction = "sum"}):item() - ref:sum():item()) < 10 * tol)
      assert.are.equal(dt, dle.cross_entropy(x, t):dtype())
    end
  end)

  it("returns the row log-sum-exp as its second result", function()
    local x = randn({5, 9}, 2)
    local _, lse = dle.cross_entropy(x, classes(5, 9, 2))
    assert.is_true(max_abs(lse, x:logsumexp(2)) < 1e-12)
  end)

  it("reads non-contiguous logits (a transpose) and int32 targets", function()
    local xt = randn({11, 6}, 3)
    local x = xt:transpose(1, 2)
    assert.is_false(x:is_contiguous())
    local t = classes(6, 11, 3)
    H.assert_close(dle.cross_entropy(x, t:to("int32"), {reduction = "none"}), ce_rows(x:contiguous(), t):totable())
  end)

  it("leaves ignore_index rows out of the loss and out of the mean's count", function()
    local x = randn({4, 5}, 4)
    local t = dle.tensor({2, -100, 5, -100}, I64)
    local ref = ce_rows(x, dle.tensor({2, 1, 5, 1}, I64)):totable()
    H.assert_close(dle.cross_entropy(x, t, {ignore_index = -100, reduction = "none"}), {ref[1], 0, ref[3], 0})
    H.assert_close(dle.cross_entropy(x, t, {ignore_index = -100}), (ref[1] + ref[3]) / 2)
    H.assert_close(dle.cross_entropy(x, t, {ignore_index = -100, reduction = "sum"}), ref[1] + ref[3])
    -- an ignore_index that is a valid class ignores that class
    H.assert_close(dle.cross_entropy(x, dle.tensor({2, 3, 5, 3}, I64), {ignore_index = 3}), (ref[1] + ref[3]) / 2)
  end)

  it("mixes the uniform distribution in with label smoothing: (1-e) nll + e mean(-log p)", function()
    local x, t = randn({6, 4}, 5, nil, 2), classes(6, 4, 5)
    local e = 0.15
    local ref = ce_rows(x, t) * (1 - e) - x:log_softmax(2):mean(2) * e
    H.assert_close(dle.cross_entropy(x, t, {label_smoothing = e, reduction = "none"}), ref:totable())
    H.assert_close(dle.cross_entropy(x, t, {label_smoothing = e}), ref:mean():item())
  end)

  it("is stable for logits of 1e4 (float32): no NaN or inf, exact values", function()
    local x = dle.tensor({{1e4, 0, -1e4}, {1e4, 0, -1e4}, {-1e4, -1e4, -1e4}})
    local t = dle.tensor({1, 2, 3}, I64)
    H.assert_close(dle.cross_entropy(x, t, {reduction = "none"}), {0, 1e4, math.log(3)})
    local xg = x:clone():requires_grad_(true)
    dle.cross_entropy(xg, t):backward()
    H.assert_close(xg.grad, {{0, 0, 0}, {1 / 3, -1 / 3, 0}, {1 / 9, 1 / 9, -2 / 9}}, {atol = 1e-5})
  end)

  it("backward is (softmax - onehot) / N, and matches the composite's gradient with smoothing and ignore", function()
    local x, t = randn({9, 7}, 6, nil, 2), classes(9, 7, 6)
    t[4] = -1
    local o = {ignore_index = -1, label_smoothing = 0.25}
    local a = x:clone():requires_grad_(true)
    dle.cross_entropy(a, t, o):backward()
    local b = x:clone():requires_grad_(true)
    local keep = t:ne(-1)
    local tc = dle.where(keep, t, dle.ones_like(t))
    local lp = b:log_softmax(2)
    local rows = -lp:gather(2, tc:unsqueeze(2)):squeeze(2) * 0.75 - lp:mean(2) * 0.25
    local kf = keep:to("float64")
    local loss = (rows * kf):sum() / kf:sum()
    loss:backward()
    assert.is_true(max_abs(a.grad, b.grad) < 1e-12)
  end)

  it("runs the threaded path ({300, 1000}) with the same results as row by row", function()
    local x = dle.randn(300, 1000, {generator = dle.Generator(7)}) * 4
    local t = classes(300, 1000, 7)
    local rows = dle.cross_entropy(x, t, {reduction = "none"})
    assert.is_true(max_abs(rows, ce_rows(x, t)) < 1e-4)
    assert.is_true(math.abs(dle.cross_entropy(x, t):item() - rows:mean():item()) < 1e-4)
  end)

  it("computes float16 logits in float32 and returns float16", function()
    local x, t = randn({3, 4}, 8), classes(3, 4, 8)
    local l = dle.cross_entropy(x:to("float16"), t)
    assert.are.equal("float16", l:dtype())
    assert.is_true(math.abs(l:item() - ce_rows(x, t):mean():item()) < 1e-2)
  end)

  it("names the function and the shapes on bad input", function()
    local x = randn({4, 3}, 9)
    H.assert_error(function() dle.cross_entropy(randn({2, 3, 4}, 1), classes(2, 3, 1)) end, "cross_entropy", "{2,3,4}")
    H.assert_error(function() dle.cross_entropy(x, classes(3, 3, 1)) end, "cross_entropy", "{4}", "{3}")
    H.assert_error(function() dle.cross_entropy(x, dle.tensor({1, 2, 4, 1}, I64)) end, "cross_entropy", "target 4",
                   "3 classes")
    H.assert_error(function() dle.cross_entropy(x, dle.tensor({1, 0, 2, 1}, I64)) end, "cross_entropy", "target 0")
    H.assert_error(function() dle.cross_entropy(x, dle.tensor({1, 2, 3, 1})) end, "cross_entropy", "int64", "float32")
    H.assert_error(function() dle.cross_entropy(x, classes(4, 3, 1), {label_smoothing = 1.5}) end, "label_smoothing",
                   "1.5")
    H.assert_error(function() dle.cross_entropy(x, classes(4, 3, 1), {reduction = "avg"}) end, "reduction", "avg")
    H.assert_error(function() F.cross_entropy(x, dle.tensor({1, 2}, I64)) end, "cross_entropy", "{4,3}", "{2}")
  end)

  it("F.cross_entropy handles {C} logits with a 0-dim target and {N, C, d} logits", function()
    local x = randn({4}, 10)
    H.assert_close(F.cross_entropy(x, dle.tensor(3, I64)), -x:log_softmax(1)[3])
    local x3, t3 = randn({2, 3, 5}, 11), dle.tensor({{1, 2, 3, 1, 2}, {3, 3, 1, 2, 1}}, I64)
    local ref = ce_rows(x3:permute(1, 3, 2):reshape(10, 3), t3:reshape(10)):reshape(2, 5)
    H.assert_close(F.cross_entropy(x3, t3, {reduction = "none"}), ref:totable())
  end)
end)

describe("dle.embedding", function()
  it("picks rows like index_select for any index shape, odd sizes, float32 and float64", function()
    for _, dt in ipairs({"float32", "float64"}) do
      local w = randn({7, 5}, 20, dt)
      local ids = dle.tensor({{{7, 1, 3}}, {{2, 2, 6}}}, I64)
      local y = dle.embedding(w, ids)
      assert.are.same({2, 1, 3, 5}, y:shape())
      assert.is_true(y:equal(w:index_select(1, ids:reshape(-1)):reshape(2, 1, 3, 5)))
    end
  end)

  it("reads a non-contiguous weight and non-contiguous indices", function()
    local w = randn({5, 6}, 21):transpose(1, 2)             -- {6, 5}
    local ids = dle.tensor({{1, 2}, {6, 3}, {4, 4}}, I64):transpose(1, 2)  -- {2, 3}
    assert.is_true(dle.embedding(w, ids):equal(w:contiguous():index_select(1, ids:contiguous():reshape(-1)):reshape(2,
        3, 5)))
  end)

  it("backward is an index-add of the output gradient, skipping padding_idx", function()
    local w = randn({6, 130}, 22):requires_grad_(true)  -- D > 64: several column tasks
    local ids = dle.tensor(H.values({600}, {seed = 3, lo = 1, hi = 6.99}), I64)
    local g = randn({600, 130}, 23)
    dle.embedding(w, ids, {padding_idx = 2}):backward(g)
    local ref = dle.zeros(6, 130, {dtype = "float64"}):index_add(1, ids, g)
    ref[2] = 0
    assert.is_true(max_abs(w.grad, ref) < 1e-12)
    -- the forward still reads the padding row
    assert.is_true(dle.embedding(w, dle.tensor({2}, I64), {padding_idx = 2})[1]:equal(w[2]))
  end)

  it("nn.Embedding(padding_idx) starts that row at zero and never updates it", function()
    local e = dle.nn.Embedding(4, 3, {padding_idx = 4})
    assert.are.equal(0, e.weight[4]:abs():sum():item())
    e(dle.tensor({4, 1, 4}, I64)):sum():backward()
    H.assert_close(e.weight.grad, {{1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}})
    H.assert_error(function() dle.nn.Embedding(4, 3, {padding_idx = 5}) end, "Embedding", "padding_idx", "5")
  end)

  it("names the function, the index and the range on bad indices and shapes", function()
    local w = randn({5, 3}, 24)
    H.assert_error(function() dle.embedding(w, dle.tensor({1, 6}, I64)) end, "embedding", "index 6", "1..5")
    H.assert_error(function() dle.embedding(w, dle.tensor({{0}}, I64)) end, "embedding", "index 0", "1..5")
    H.assert_error(function() dle.embedding(w, dle.tensor({1.0})) end, "embedding", "int64", "float32")
    H.assert_error(function() dle.embedding(randn({5}, 1), dle.tensor({1}, I64)) end, "embedding", "2-D", "{5}")
    H.assert_error(function() randn({2, 3}, 1):embedding_backward(dle.tensor({1, 2, 3}, I64), 4) end,
      "embedding_backward", "{3}", "{2,3}")
  end)
end)

describe("dle.dropout", function()
  it("keeps an element when the float32 uniform dle.rand draws for it is >= p, scaled by 1/(1-p)", function()
    local x = randn({37, 11}, 30) + 5
    local y = dle.dropout(x, 0.3, {generator = dle.Generator(9)})
    local keep = dle.rand({37, 11}, {generator = dle.Generator(9)}):ge(0.3)
    assert.is_true(y:ne(0):equal(keep))
    assert.is_true(max_abs(y, dle.where(keep, x / 0.7, dle.zeros_like(x))) < 1e-12)
  end)

  it("is reproducible under dle.manual_seed, advances the generator, and does not depend on threads", function()
    local x = dle.ones(300, 300)
    dle.manual_seed(5)
    local a, b = dle.dropout(x, 0.5), dle.dropout(x, 0.5)
    assert.is_false(a:equal(b))
    local n = dle.get_num_threads()
    dle.set_num_threads(1)
    dle.manual_seed(5)
    local a1 = dle.dropout(x, 0.5)
    dle.set_num_threads(n)
    assert.is_true(a:equal(a1))
  end)

  it("keeps the mean: about 1-p of the elements survive, and E[y] = x", function()
    local x = dle.ones(200000)
    for _, p in ipairs({0.1, 0.5, 0.9}) do
      local y = dle.dropout(x, p, {generator = dle.Generator(11)})
      local kept = y:ne(0):to("float32"):mean():item()
      assert.is_true(math.abs(kept - (1 - p)) < 0.01, "kept fraction " .. kept .. " for p = " .. p)
      assert.is_true(math.abs(y:mean():item() - 1) < 0.03, "mean " .. y:mean():item() .. " for p = " .. p)
    end
  end)

  it("p = 0 and eval mode are the identity, p = 1 gives zeros; non-contiguous input; float64", function()
    local x = randn({4, 6}, 31):transpose(1, 2)
    assert.is_true(F.dropout(x, 0.4, false):equal(x))
    assert.is_true(F.dropout(x, 0, true):equal(x))
    assert.is_true(dle.dropout(x, 0):equal(x))
    assert.is_true(dle.dropout(x, 1):equal(dle.zeros_like(x)))
    local y = dle.dropout(x, 0.5, {generator = dle.Generator(2)})
    assert.are.equal("float64", y:dtype())
    local ref = dle.dropout(x:contiguous(), 0.5, {generator = dle.Generator(2)})
    assert.is_true(y:equal(ref))
  end)

  it("rejects p outside [0, 1]", function()
    H.assert_error(function() dle.dropout(dle.ones(2), 1.5) end, "dropout", "1.5")
    H.assert_error(function() F.dropout(dle.ones(2), -0.1) end, "dropout", "-0.1")
  end)
end)

-- the composite attention that dle.nn used before the fused op
local function sdpa_ref(q, k, v, o)
  o = o or {}
  local scale = o.scale or 1 / math.sqrt(q:size(-1))
  local s = q:matmul(k:transpose(-2, -1)) * scale
  if o.causal then
    s = s:masked_fill(dle.ones(q:size(-2), k:size(-2), {dtype = "bool"}):triu(1), -math.huge)
  end
  if o.mask then
    if o.mask:dtype() == "bool" then s = s:masked_fill(o.mask:logical_not(), -math.huge) else s = s + o.mask end
  end
  local p = s:softmax(-1)
  return p:matmul(v), p
end

describe("dle.sdpa", function()
  local bmask = dle.tensor({{true, false, true, true, false, true, true}, {true, true, true, false, false, false, true},
                            {false, true, true, true, true, true, true}, {true, true, false, true, true, true, false},
                            {true, false, false, false, true, true, true}}, {dtype = "bool"})
  local cases = {
    {name = "no mask", o = {}},
    {name = "causal (L = 5 < S = 7, top-left aligned)", o = {causal = true}},
    {name = "a bool mask broadcast over batch and heads", o = {mask = bmask}},
    {name = "a float mask and scale 0.3", o = {mask = randn({1, 5, 7}, 40), scale = 0.3}},
    {name = "causal with a bool mask", o = {causal = true, mask = bmask}},
  }
  for _, c in ipairs(cases) do
    it("matches the composite reference with " .. c.name .. " (float64 and float32, {2, 3, L, E})", function()
      for _, dt in ipairs({"float64", "float32"}) do
        local q, k, v = randn({2, 3, 5, 3}, 41, dt), randn({2, 3, 7, 3}, 42, dt), randn({2, 3, 7, 6}, 43, dt)
        local o = c.o
        if o.mask and o.mask:dtype() ~= "bool" then o = {mask = o.mask:to(dt), scale = o.scale} end
        local out, p = dle.sdpa(q, k, v, o)
        local ro, rp = sdpa_ref(q, k, v, o)
        local tol = dt == "float64" and 1e-12 or 1e-5
        assert.is_true(max_abs(out, ro) < tol, "output differs by " .. max_abs(out, ro))
        assert.is_true(max_abs(p, rp) < tol, "probs differ by " .. max_abs(p, rp))
        assert.are.equal(dt, out:dtype())
      end
    end)
  end

  it("reads non-contiguous q, k, v (heads split by a transpose, as MultiheadAttention does)", function()
    local x = randn({2, 6, 3, 4}, 44)                -- {B, T, H, D}
    local q = x:transpose(2, 3)                      -- {B, H, T, D}, not contiguous
    local k, v = q * 0.5, q + 1
    assert.is_false(q:is_contiguous())
    local out = dle.sdpa(q, k, v, {causal = true})
    assert.is_true(max_abs(out, (sdpa_ref(q:contiguous(), k:contiguous(), v:contiguous(), {causal = true}))) < 1e-12)
  end)

  it("broadcasts batch dims: k and v shared by every head", function()
    local q, k, v = randn({2, 4, 3, 5}, 45), randn({2, 1, 6, 5}, 46), randn({6, 2}, 47)
    local out = dle.sdpa(q, k, v)
    assert.are.same({2, 4, 3, 2}, out:shape())
    assert.is_true(max_abs(out, (sdpa_ref(q, k, v))) < 1e-12)
  end)

  it("gives zero weights and a zero output for a fully masked row (no NaN), as bool or -inf float mask", function()
    local q, k, v = randn({3, 4}, 48), randn({5, 4}, 49), randn({5, 2}, 50)
    local m = dle.ones(3, 5, {dtype = "bool"})
    m[2] = false
    local out, p = dle.sdpa(q, k, v, {mask = m})
    H.assert_close(out[2], {0, 0})
    H.assert_close(p[2], {0, 0, 0, 0, 0})
    assert.is_true(max_abs(out[1], (sdpa_ref(q, k, v))[1]) < 1e-12)
    local fm = dle.zeros(3, 5, {dtype = "float64"})
    fm[3] = -math.huge
    local out2 = dle.sdpa(q, k, v, {mask = fm})
    H.assert_close(out2[3], {0, 0})
    assert.are.equal(0, out2:ne(out2):sum():item())  -- no NaN
  end)

  it("is stable for large scores (|q k^T| ~ 1e5): no NaN, one-hot rows", function()
    local q, k, v = randn({4, 3}, 51, "float32", 300), randn({4, 3}, 52, "float32", 300), randn({4, 2}, 53, "float32")
    local out, p = dle.sdpa(q, k, v, {scale = 1})
    assert.are.equal(0, out:ne(out):sum():item())  -- no NaN
    H.assert_close(p:sum(-1), {1, 1, 1, 1}, {atol = 1e-5})
  end)

  it("handles an empty key set and zero-size batches", function()
    local out = dle.sdpa(dle.zeros(2, 3), dle.zeros(0, 3), dle.zeros(0, 4))
    assert.is_true(out:equal(dle.zeros(2, 4)))
    assert.are.same({0, 2, 4}, dle.sdpa(dle.zeros(0, 2, 3), dle.zeros(0, 5, 3), dle.zeros(0, 5, 4)):shape())
  end)

  it("matches the composite's gradients in q, k, v (float64, causal with a float mask)", function()
    local q, k, v = randn({2, 4, 3}, 54), randn({2, 4, 3}, 55), randn({2, 4, 2}, 56)
    local m = randn({4, 4}, 57)
    local w = randn({2, 4, 2}, 58)
    local function grads(fn)
      local a, b, c = q:clone():requires_grad_(true), k:clone():requires_grad_(true), v:clone():requires_grad_(true)
      local out = fn(a, b, c, {causal = true, mask = m})
      local loss = (out * w):sum()
      loss:backward()
      return a.grad, b.grad, c.grad
    end
    local g1 = {grads(dle.sdpa)}
    local g2 = {grads(sdpa_ref)}
    for i = 1, 3 do assert.is_true(max_abs(g1[i], g2[i]) < 1e-12, "input " .. i) end
  end)

  it("gives the same bits with 1 and 2 threads (batch elements split between threads)", function()
    local g = dle.Generator(12)
    local q, k, v, w = dle.randn(6, 9, 5, {generator = g}), dle.randn(6, 7, 5, {generator = g}),
                       dle.randn(6, 7, 3, {generator = g}), dle.randn(6, 9, 3, {generator = g})
    local n = dle.get_num_threads()
    local res = {}
    for _, t in ipairs({1, 2}) do
      dle.set_num_threads(t)
      local o, p = dle.sdpa(q, k, v, {causal = true})
      res[t] = {o, p, w:sdpa_score_grad(v, p, 0.3)}
    end
    dle.set_num_threads(n)
    for i = 1, 3 do assert.is_true(res[1][i]:equal(res[2][i]), "result " .. i) end
  end)

  it("names the function and the shapes on bad input", function()
    H.assert_error(function() dle.sdpa(dle.zeros(3, 4), dle.zeros(3, 5), dle.zeros(3, 4)) end, "sdpa", "{3,4}", "{3,5}")
    H.assert_error(function() dle.sdpa(dle.zeros(3, 4), dle.zeros(3, 4), dle.zeros(2, 4)) end, "sdpa",
                   "different lengths")
    H.assert_error(function() dle.sdpa(dle.zeros(4), dle.zeros(3, 4), dle.zeros(3, 4)) end, "sdpa", "q", "{4}")
    H.assert_error(function() dle.sdpa(dle.zeros(3, 4), dle.zeros(3, 4), dle.zeros(3, 4), {mask = dle.ones(5, 5)}) end,
      "sdpa", "mask {5,5}", "{3,3}")
    H.assert_error(function() dle.sdpa(dle.zeros(3, 4), dle.zeros(3, 4), dle.zeros(3, 4),
                                       {mask = dle.ones(3, 3, I64)}) end,
      "sdpa", "mask", "int64")
    H.assert_error(function() dle.sdpa(dle.zeros(2, 3, 4), dle.zeros(3, 3, 4), dle.zeros(3, 3, 4)) end, "sdpa", "{2}",
                   "{3}")
  end)
end)

-- Optional: the same numbers from PyTorch (skipped when /usr/bin/python3 cannot import torch).
describe("PyTorch agreement (optional)", function()
  it("cross_entropy (smoothing, ignore_index) and causal SDPA match torch 1e-10 in float64", function()
    if H.without_torch(pending) then return end
    local x, t = randn({4, 5}, 60, nil, 3), dle.tensor({2, 5, -1, 1}, I64)
    local q, k, v = randn({1, 2, 4, 3}, 61), randn({1, 2, 4, 3}, 62), randn({1, 2, 4, 2}, 63)
    local py = H.torch_literal
    local out = H.run_python({
      "import torch, torch.nn.functional as F",
      "x = " .. py(x),
      "t = torch.tensor([1, 4, -2, 0])",
      "ce = F.cross_entropy(x, t, ignore_index=-2, label_smoothing=0.1)",
      "q, k, v = " .. py(q) .. ", " .. py(k) .. ", " .. py(v),
      "s = (q @ k.transpose(-2, -1)) / 3 ** 0.5",
      "s = s.masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1), float('-inf'))",
      "o = s.softmax(-1) @ v",
      "print(repr(ce.item()))",
      "print(' '.join(repr(z) for z in o.reshape(-1).tolist()))",
    })
    local ce_line, o_line = out[1], out[2]
    local ce = dle.cross_entropy(x, t, {ignore_index = -1, label_smoothing = 0.1}):item()
    assert.is_true(math.abs(ce - tonumber(ce_line)) < 1e-10, "cross_entropy " .. ce .. " vs torch " .. ce_line)
    local got = dle.sdpa(q, k, v, {causal = true}):reshape(-1):totable()
    H.assert_torch_numbers(got, o_line, 1e-10, "sdpa element")
  end)
end)
