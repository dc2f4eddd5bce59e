-- covers: cross_entropy cross_entropy_backward embedding embedding_backward dropout sdpa sdpa_score_grad
-- covers: sdpa_backward
-- grad_nnops_spec.lua — gradient rules of the fused nn ops: reverse and forward mode against
-- central finite differences in float64 (dle.gradcheck with forward = true; every float output is
-- checked, so cross_entropy's lse and sdpa's probabilities too) for each option (reductions,
-- ignore_index, label smoothing, padding_idx, causal, bool/float masks, broadcast batch dims), the
-- backward ops reached as tensor methods, and double backward (create_graph) of every forward op
-- against finite differences of its gradient.
local dle = require("dle")
local H = require("helpers")

local F = dle.nn.functional
local F64 = {dtype = "float64"}
local I64 = {dtype = "int64"}

local function randn(shape, seed, scale)
  return dle.tensor(H.values(shape, {seed = seed, lo = -(scale or 1), hi = scale or 1}), F64)
end

local check = H.gradcheck
local gradients_of = H.gradients_of
-- double backward: reverse mode over the gradient (the backward ops' forward rules are checked
-- directly on those ops)
local function check2(f, inputs) check(f, inputs, {forward = false}) end

describe("cross_entropy gradients", function()
  local variants = H.class_target_variants()
  local targets, with_ignored = variants[1].t, variants[4].t   -- all rows, and rows 2 and 5 ignored (-1)
  for k, v in ipairs(variants) do
    it("gradcheck of the loss and lse with " .. v.name, function()
      check(function(x) return dle.cross_entropy(x, v.t, v.o) end, {randn({5, 4}, k, 2)})
    end)
  end

  it("gradcheck of cross_entropy_backward in grad_output, logits and lse (mean and none)", function()
    local x = randn({5, 4}, 11, 2)
    local lse = dle.no_grad(function() return select(2, dle.cross_entropy(x, targets)) end)
    local o = {ignore_index = -1, label_smoothing = 0.1}
    check(function(g, x_, l) return g:cross_entropy_backward(x_, with_ignored, l, o) end,
          {dle.tensor(1.3, F64), x, lse})
    local on = {reduction = "none", ignore_index = -1}
    check(function(g, x_, l) return g:cross_entropy_backward(x_, with_ignored, l, on) end,
          {randn({5}, 12), x, lse})
  end)

  it("double backward of cross_entropy (mean with smoothing, none weighted)", function()
    local x = randn({5, 4}, 21, 2)
    check2(gradients_of(function(x_)
      return dle.cross_entropy(x_, with_ignored, {ignore_index = -1, label_smoothing = 0.3})
    end), {x})
    local w = randn({5}, 22)
    check2(gradients_of(function(x_) return (dle.cross_entropy(x_, targets, {reduction = "none"}) * w):sum() end), {x})
  end)

  it("gradcheck of F.cross_entropy on {N, C, d} logits (classes moved last for the op)", function()
    local t = dle.tensor({{1, 3}, {2, 2}}, I64)
    check(function(x) return F.cross_entropy(x, t, {reduction = "none"}) end, {randn({2, 3, 2}, 31)})
  end)
end)

describe("embedding gradients", function()
  local idx = dle.tensor({{1, 3, 3}, {5, 2, 1}}, I64)

  it("gradcheck of embedding in the weight (repeated rows accumulate)", function()
    check(function(w) return dle.embedding(w, idx) end, {randn({5, 3}, 41)})
  end)

  it("padding_idx rows get no gradient; gradcheck where the padding positions are masked out", function()
    local w = randn({5, 3}, 42):requires_grad_(true)
    dle.embedding(w, idx, {padding_idx = 3}):sum():backward()
    H.assert_close(w.grad, {{2, 2, 2}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}})
    local keep = idx:ne(3):to("float64"):unsqueeze(3)
    check(function(w_) return dle.embedding(w_, idx, {padding_idx = 3}) * keep end, {randn({5, 3}, 43)})
  end)

  it("gradcheck of embedding_backward in grad_output (with and without padding_idx)", function()
    check(function(g) return g:embedding_backward(idx, 6) end, {randn({2, 3, 4}, 44)})
    check(function(g) return g:embedding_backward(idx, 5, {padding_idx = 1}) end, {randn({2, 3, 4}, 45)})
  end)

  it("double backward of a loss of embedding", function()
    check2(gradients_of(function(w) return (dle.embedding(w, idx) ^ 3):sum() end), {randn({5, 3}, 46)})
  end)
end)

describe("dropout gradients", function()
  -- a fresh generator per call: every evaluation draws the same mask
  local function drop(x, p) return dle.dropout(x, p, {generator = dle.Generator(7)}) end

  it("gradcheck of dropout (p = 0.4, 0 and 1) on a non-contiguous input", function()
    for _, p in ipairs({0.4, 0, 1}) do
      check(function(x) return drop(x:transpose(1, 2), p) end, {randn({4, 6}, 51)})
    end
  end)

  it("the gradient uses the forward's mask: zero exactly where the output was dropped", function()
    local x = (randn({50}, 52) + 3):requires_grad_(true)
    local y = drop(x, 0.5)
    y:sum():backward()
    local kept = y:ne(0):to("float64")
    H.assert_close(x.grad, (kept * 2):totable())
  end)

  it("double backward of a loss of dropout", function()
    check2(gradients_of(function(x) return (drop(x, 0.3) ^ 3):sum() end), {randn({3, 5}, 53)})
  end)
end)

describe("sdpa gradients", function()
  local bmask = dle.tensor({{true, false, true, true}, {true, true, false, false}, {false, true, true, true}},
                           {dtype = "bool"})
  local variants = {
    {name = "no mask", o = {}},
    {name = "causal", o = {causal = true}},
    {name = "a broadcast bool mask and scale 0.7", o = {mask = bmask, scale = 0.7}},
    {name = "causal and a bool mask", o = {mask = bmask, causal = true}},
  }
  for n, v in ipairs(variants) do
    it("gradcheck of out and probs in q, k, v with " .. v.name .. " (L = 3, S = 4)", function()
      local q, k, val = randn({2, 3, 5}, 60 + n), randn({2, 4, 5}, 70 + n), randn({2, 4, 2}, 80 + n)
      check(function(a, b, c) return dle.sdpa(a, b, c, v.o) end, {q, k, val})
    end)
  end

  it("gradcheck with a float mask that requires grad too", function()
    local q, k, v = randn({2, 3, 4}, 91), randn({2, 3, 4}, 92), randn({2, 3, 2}, 93)
    check(function(a, b, c, m) return dle.sdpa(a, b, c, {mask = m}) end, {q, k, v, randn({3, 3}, 94)})
  end)

  it("gradcheck with broadcast batch dims (k, v shared by the heads) and transposed inputs", function()
    local q = randn({2, 2, 4, 3}, 95)
    local k, v = randn({2, 1, 3, 4}, 96), randn({1, 4, 2}, 97)
    check(function(a, b, c) return dle.sdpa(a, b:transpose(-2, -1), c, {causal = true}) end, {q, k, v})
  end)

  it("gradcheck through head-split views of one projection (read in place, no copy)", function()
    -- {B, T, 3 * H * E} split into q, k, v and heads as MultiheadAttention does: strided operands
    local B, T, Hh, E = 2, 3, 2, 2
    local function heads(x, i) return x:narrow(3, (i - 1) * Hh * E + 1, Hh * E):reshape(B, T, Hh, E):transpose(2, 3) end
    check(function(x) return dle.sdpa(heads(x, 1), heads(x, 2), heads(x, 3), {causal = true}) end,
          {randn({B, T, 3 * Hh * E}, 121)})
  end)

  it("sdpa_backward on head-split views equals it on contiguous copies", function()
    local B, T, Hh, E = 2, 4, 3, 2
    local x, g = randn({B, T, 3 * Hh * E}, 122), randn({B, Hh, T, E}, 123)
    local function heads(i) return x:narrow(3, (i - 1) * Hh * E + 1, Hh * E):reshape(B, T, Hh, E):transpose(2, 3) end
    local q, k, v = heads(1), heads(2), heads(3)
    assert.is_false(q:is_contiguous())
    local _, p = dle.sdpa(q, k, v, {scale = 0.6})
    local gt = g:transpose(2, 3):contiguous():transpose(2, 3) -- a strided gradient too
    local dq, dk, dv = gt:sdpa_backward(q, k, v, p, 0.6)
    local dq2, dk2, dv2 = g:sdpa_backward(q:contiguous(), k:contiguous(), v:contiguous(), p, 0.6)
    H.assert_close(dq, dq2:totable(), {rtol = 1e-12, atol = 1e-12})
    H.assert_close(dk, dk2:totable(), {rtol = 1e-12, atol = 1e-12})
    H.assert_close(dv, dv2:totable(), {rtol = 1e-12, atol = 1e-12})
    -- each gradient is laid out like its input: the heads of dk and dv merge back into a
    -- {B, T, H*E} view without a copy
    for _, d in ipairs({dq, dk, dv}) do
      local merged = d:transpose(2, 3):view(B, T, Hh * E)
      assert.are.same({B, T, Hh * E}, merged:shape())
    end
  end)

  it("a fully masked query row has zero output and zero gradient (gradcheck passes)", function()
    local m = dle.tensor({{true, true}, {false, false}, {true, false}}, {dtype = "bool"})
    check(function(a, b, c) return dle.sdpa(a, b, c, {mask = m}) end,
          {randn({3, 2}, 98), randn({2, 2}, 99), randn({2, 3}, 100)})
  end)

  it("gradcheck of sdpa_score_grad in grad_output, v and probs", function()
    local p = dle.randn(2, 3, 4, F64):softmax(-1)
    check(function(g, v, p_) return g:sdpa_score_grad(v, p_, 0.6) end,
          {randn({2, 3, 2}, 101), randn({2, 4, 2}, 102), p})
  end)

  it("gradcheck of sdpa_backward (dq, dk and dv) in all five inputs, with broadcast batch dims", function()
    local p = dle.randn(2, 3, 4, F64):softmax(-1)
    check(function(g, q, k, v, p_) return g:sdpa_backward(q, k, v, p_, 0.6) end,
          {randn({2, 3, 2}, 131), randn({2, 3, 5}, 132), randn({1, 4, 5}, 133), randn({2, 4, 2}, 134), p})
  end)

  it("sdpa_backward equals the score gradient followed by the three products", function()
    local g, q, k, v = randn({2, 3, 2}, 141), randn({2, 3, 5}, 142), randn({2, 4, 5}, 143), randn({2, 4, 2}, 144)
    local _, p = dle.sdpa(q, k, v, {scale = 0.6})
    local dq, dk, dv = g:sdpa_backward(q, k, v, p, 0.6)
    local ds = g:sdpa_score_grad(v, p, 0.6)
    H.assert_close(dq, ds:matmul(k):totable())
    H.assert_close(dk, ds:transpose(-2, -1):matmul(q):totable())
    H.assert_close(dv, p:transpose(-2, -1):matmul(g):totable())
  end)

  it("double backward of sdpa (causal, and with a float mask)", function()
    local q, k, v = randn({2, 3, 4}, 111), randn({2, 3, 4}, 112), randn({2, 3, 2}, 113)
    check2(gradients_of(function(a, b, c) return (dle.sdpa(a, b, c, {causal = true}) ^ 2):sum() end), {q, k, v})
    local m = randn({3, 3}, 114)
    check2(gradients_of(function(a, b, c, m_)
      local o, p = dle.sdpa(a, b, c, {mask = m_})
      return (o ^ 2):sum() + (p ^ 2):sum()
    end), {q, k, v, m})
  end)

  describe("packed q, k, v (one {3, ..., T, E} input)", function()
    local B, T, Hh, E = 2, 4, 3, 2
    -- a self-attention projection {B, T, 3*Hh*E} viewed as q, k, v stacked {3, B, Hh, T, E}
    local function packed(x) return x:view(B, T, 3, Hh, E):permute(3, 1, 4, 2, 5) end

    it("equals sdpa on the three views, outputs and gradient", function()
      local x = randn({B, T, 3 * Hh * E}, 151):requires_grad_()
      local p = packed(x)
      local o1, p1 = dle.sdpa(p, {causal = true, scale = 0.7})
      local o2, p2 = dle.sdpa(p:select(1, 1), p:select(1, 2), p:select(1, 3), {causal = true, scale = 0.7})
      H.assert_close(o1, o2:totable(), {rtol = 1e-14, atol = 1e-14})
      H.assert_close(p1, p2:totable(), {rtol = 1e-14, atol = 1e-14})
      local g = randn({B, Hh, T, E}, 152)
      local g1 = dle.grad(o1, {x}, {grad_outputs = {g}, retain_graph = true})[1]
      local g2 = dle.grad(o2, {x}, {grad_outputs = {g}})[1]
      H.assert_close(g1, g2:totable(), {rtol = 1e-12, atol = 1e-12})
    end)

    it("the fused kernel writes the gradient in the projection's layout (no copy to merge it)", function()
      local x = randn({B, T, 3 * Hh * E}, 153):requires_grad_()
      local o = dle.sdpa(packed(x), {causal = true})
      local g = dle.grad(o, {x}, {grad_outputs = {randn({B, Hh, T, E}, 154)}})[1]
      assert.is_true(g:is_contiguous())
      -- and the gradient a packed input receives before the view/permute is laid out like it
      local p = packed(x):detach():requires_grad_()
      local gp = dle.grad(dle.sdpa(p, {causal = true}), {p}, {grad_outputs = {randn({B, Hh, T, E}, 155)}})[1]
      assert.are.same(p:stride(), gp:stride())
    end)

    it("gradcheck in both modes: causal, bool mask, float mask with its own gradient", function()
      check(function(x) return dle.sdpa(packed(x), {causal = true}) end, {randn({B, T, 3 * Hh * E}, 156)})
      local bm = dle.tensor({{true, false, true, true}, {true, true, false, true}, {false, true, true, true},
                             {true, true, true, false}}, {dtype = "bool"})
      check(function(x) return dle.sdpa(packed(x), {mask = bm}) end, {randn({B, T, 3 * Hh * E}, 157)})
      check(function(x, m)
        local o, p = dle.sdpa(packed(x), {mask = m})
        return (o ^ 2):sum() + (p ^ 2):sum()
      end, {randn({B, T, 3 * Hh * E}, 158), randn({T, T}, 159)})
    end)

    it("double backward (create_graph goes through differentiable ops)", function()
      check2(gradients_of(function(x) return (dle.sdpa(packed(x), {causal = true}) ^ 2):sum() end),
             {randn({B, T, 3 * Hh * E}, 162)})
    end)

    it("a packed input that is not {3, ...} is an error naming sdpa and the shape", function()
      local ok, err = pcall(dle.sdpa, randn({2, 4, 3}, 163))
      assert.is_false(ok)
      assert.matches("sdpa: packed q, k, v must have shape {3, ..., T, E}, got {2,4,3}", err, 1, true)
      ok, err = pcall(dle.sdpa, randn({3, 4}, 164))
      assert.is_false(ok)
      assert.matches("sdpa", err, 1, true)
    end)
  end)

  it("gradcheck of scaled_dot_product_attention with attention dropout (through the probs output)", function()
    local q, k, v = randn({1, 2, 4, 3}, 121), randn({1, 2, 4, 3}, 122), randn({1, 2, 4, 3}, 123)
    check(function(a, b, c)
      return F.scaled_dot_product_attention(a, b, c, {causal = true, dropout_p = 0.3, generator = dle.Generator(4)})
    end, {q, k, v})
  end)
end)
