--- Attention: dle.nn.functional.scaled_dot_product_attention against a pure-Lua reference
-- (plain, causal, bool and float masks), causality, MultiheadAttention (shapes, parameters,
-- FLOPs, cross attention, errors), float64 gradchecks, TransformerBlock, and a tiny GPT that
-- learns a repeated string.
local dle = require("dle")
local H = require("helpers")
local nn = dle.nn
local F = nn.functional

-- Deterministic float64 values of a shape (nested table), distinct per seed.
local function vals(shape, seed)
  local n = 0
  return H.build(shape, function()
    n = n + 1
    return math.sin(n * 1.37 + seed * 2.11) * 1.5
  end)
end

-- Pure-Lua attention on one {T, D} slice: softmax(q k^T * scale + bias) v, where allowed(i, j)
-- says whether query i may see key j and bias(i, j) is an additive float mask (or nil).
local function ref_attention(q, k, v, scale, allowed, bias)
  local out = {}
  for i = 1, #q do
    local s, m = {}, -math.huge
    for j = 1, #k do
      if allowed(i, j) then
        local dot = 0
        for c = 1, #q[i] do dot = dot + q[i][c] * k[j][c] end
        s[j] = dot * scale + (bias and bias(i, j) or 0)
        m = math.max(m, s[j])
      end
    end
    local z = 0
    for j = 1, #k do if s[j] then s[j] = math.exp(s[j] - m); z = z + s[j] end end
    local row = {}
    for c = 1, #v[1] do
      local acc = 0
      for j = 1, #k do if s[j] then acc = acc + s[j] / z * v[j][c] end end
      row[c] = acc
    end
    out[i] = row
  end
  return out
end

-- Reference over {B, H, T, D} nested tables.
local function ref_batched(q, k, v, scale, allowed, bias)
  local out = {}
  for b = 1, #q do
    out[b] = {}
    for h = 1, #q[b] do
      out[b][h] = ref_attention(q[b][h], k[b][h], v[b][h], scale,
        function(i, j) return allowed(b, h, i, j) end, bias and function(i, j) return bias(b, h, i, j) end)
    end
  end
  return out
end

local function all() return true end


describe("attention operands read in place", function()
  -- q, k, v as MultiheadAttention makes them: {B, T, H*E} projections split into heads
  local B, T, Hh, E = 2, 5, 3, 4
  local function heads(x) return x:reshape(B, T, Hh, E):transpose(2, 3) end

  it("head-split views give the same output as contiguous copies, float32 and float64", function()
    for _, dt in ipairs({"float32", "float64"}) do
      local q, k, v = heads(dle.randn(B, T, Hh * E, {dtype = dt})), heads(dle.randn(B, T, Hh * E, {dtype = dt})),
                      heads(dle.randn(B, T, Hh * E, {dtype = dt}))
      assert.is_false(q:is_contiguous())
      local o, p = dle.sdpa(q, k, v, {causal = true})
      local o2, p2 = dle.sdpa(q:contiguous(), k:contiguous(), v:contiguous(), {causal = true})
      H.assert_close(o, o2:totable(), {atol = dt == "float32" and 1e-6 or 1e-12, rtol = dt == "float32" and 1e-5
                                       or 1e-12})
      H.assert_close(p, p2:totable(), {atol = dt == "float32" and 1e-6 or 1e-12, rtol = dt == "float32" and 1e-5
                                       or 1e-12})
    end
  end)

  it("the output is laid out like q, so merging the heads back is a view", function()
    local q, k, v = heads(dle.randn(B, T, Hh * E)), heads(dle.randn(B, T, Hh * E)), heads(dle.randn(B, T, Hh * E))
    local o = dle.sdpa(q, k, v)
    assert.same({B, Hh, T, E}, o:shape())
    assert.is_true(o:transpose(2, 3):is_contiguous())
    local oc = dle.sdpa(q:contiguous(), k:contiguous(), v:contiguous())
    assert.is_true(oc:is_contiguous())
  end)

  it("broadcast batch dims (stride 0) and rows wider apart than their length (a narrowed last dim)", function()
    local q = dle.randn(2, 3, 4, 6):narrow(4, 2, 3)          -- rows 6 apart, 3 long
    local k = dle.randn(1, 3, 5, 3):expand(2, 3, 5, 3)       -- batch stride 0
    local v = dle.randn(5, 2)                                -- shared by every batch element
    local o = dle.sdpa(q, k, v, {scale = 0.3})
    local o2 = dle.sdpa(q:contiguous(), k:contiguous(), v:expand(2, 3, 5, 2):contiguous(), {scale = 0.3})
    H.assert_close(o, o2:totable(), {rtol = 1e-5, atol = 1e-6})
  end)

  -- causal attention runs in blocks of 64 queries that stop at the last key they can see: sizes
  -- around and across the block edge, L > S and L < S, against the composite (matmul, mask,
  -- softmax, matmul) forward and its autograd gradients, in float64 (BLAS products) and float32
  -- (the AVX2 small products, E = 5 and Ev = 3 columns: vector tails only)
  for _, c in ipairs({{L = 130, S = 130}, {L = 64, S = 64}, {L = 65, S = 65}, {L = 150, S = 140},
                      {L = 100, S = 200}, {L = 129, S = 70}, {L = 130, S = 130, dtype = "float32"},
                      {L = 65, S = 65, dtype = "float32", E = 37}, {L = 100, S = 200, dtype = "float32"}}) do
    local dt = c.dtype or "float64"
    it(string.format("causal blocks: L = %d, S = %d, %s, with a bool mask, forward and gradients", c.L, c.S, dt),
       function()
      local o64 = {dtype = dt}
      local e = c.E or 5
      local q, k, v = dle.randn(2, c.L, e, o64), dle.randn(2, c.S, e, o64), dle.randn(2, c.S, 3, o64)
      local keep = dle.rand(c.L, c.S, o64):gt(0.2)
      local g = dle.randn(2, c.L, 3, o64)
      local function grads(f)
        local qq, kk, vv = q:clone():requires_grad_(), k:clone():requires_grad_(), v:clone():requires_grad_()
        local out, p = f(qq, kk, vv)
        ;(out * g):sum():backward()
        return out, p, qq.grad, kk.grad, vv.grad
      end
      local causal = dle.ones(c.L, c.S, {dtype = "bool"}):tril()
      local out, p, dq, dk, dv = grads(function(a, b, c_) return dle.sdpa(a, b, c_,
          {mask = keep, causal = true, scale = 0.4}) end)
      local rout, rp, rdq, rdk, rdv = grads(function(a, b, c_)
        local sc = (a:matmul(b:transpose(2, 3)) * 0.4):masked_fill(dle.where(causal, keep, causal):logical_not(),
                                                                   -math.huge)
        local pr = sc:softmax(3)
        pr = pr:masked_fill(pr:ne(pr), 0)   -- rows with no allowed key: zeros, as sdpa gives
        return pr:matmul(c_), pr
      end)
      local tol = dt == "float64" and {rtol = 1e-10, atol = 1e-10} or {rtol = 1e-4, atol = 1e-4}
      H.assert_close(out, rout:totable(), tol)
      H.assert_close(p, rp:totable(), tol)
      H.assert_close(dq, rdq:totable(), tol)
      H.assert_close(dk, rdk:totable(), tol)
      H.assert_close(dv, rdv:totable(), tol)
    end)
  end

  it("a last dim that is not contiguous is copied, with the same result", function()
    local q = dle.randn(2, 4, 3):transpose(2, 3)  -- {2, 3, 4} with column stride 3
    local k, v = dle.randn(2, 5, 4), dle.randn(2, 5, 2)
    H.assert_close(dle.sdpa(q, k, v), dle.sdpa(q:contiguous(), k, v):totable(), {rtol = 1e-5, atol = 1e-6})
  end)
end)

describe("scaled_dot_product_attention", function()
  local qv, kv, vv = vals({2, 2, 3, 4}, 1), vals({2, 2, 5, 4}, 2), vals({2, 2, 5, 3}, 3)
  local o64 = {dtype = "float64"}
  local q, k, v = dle.tensor(qv, o64), dle.tensor(kv, o64), dle.tensor(vv, o64)

  it("matches the pure-Lua reference without a mask (Tq=3, Tk=5, Dv=3, scale 1/sqrt(D))", function()
    local out = F.scaled_dot_product_attention(q, k, v)
    H.assert_close(out, ref_batched(qv, kv, vv, 0.5, all), {rtol = 1e-10, atol = 1e-12})
  end)

  it("uses an explicit scale", function()
    local out = F.scaled_dot_product_attention(q, k, v, {scale = 0.3})
    H.assert_close(out, ref_batched(qv, kv, vv, 0.3, all), {rtol = 1e-10, atol = 1e-12})
  end)

  it("matches the reference with causal = true (query i sees keys 1..i)", function()
    local sq = dle.tensor(vals({2, 2, 4, 4}, 4), o64)
    local sk, sv = dle.tensor(vals({2, 2, 4, 4}, 5), o64), dle.tensor(vals({2, 2, 4, 3}, 6), o64)
    local out = F.scaled_dot_product_attention(sq, sk, sv, {causal = true})
    local want = ref_batched(sq:totable(), sk:totable(), sv:totable(), 0.5,
      function(_, _, i, j) return j <= i end)
    H.assert_close(out, want, {rtol = 1e-10, atol = 1e-12})
    -- the first query sees only the first key: its output is v's first row
    H.assert_close(out:select(3, 1), sv:select(3, 1):totable(), {rtol = 1e-12, atol = 1e-12})
  end)

  it("matches the reference with a broadcast bool mask (true = may attend)", function()
    -- {B, 1, Tq, Tk}: per-batch key padding, broadcast over heads
    local mv = H.build({2, 1, 3, 5}, function(idx) return not (idx[1] == 1 and idx[4] >= 4) and
      not (idx[1] == 2 and idx[4] == idx[3]) end)
    local mask = dle.tensor(mv, {dtype = "bool"})
    local out = F.scaled_dot_product_attention(q, k, v, {mask = mask})
    local want = ref_batched(qv, kv, vv, 0.5, function(b, _, i, j) return mv[b][1][i][j] end)
    H.assert_close(out, want, {rtol = 1e-10, atol = 1e-12})
  end)

  it("adds a float mask to the scores, combined with causal", function()
    local sq = dle.tensor(vals({1, 2, 4, 4}, 7), o64)
    local sk, sv = dle.tensor(vals({1, 2, 4, 4}, 8), o64), dle.tensor(vals({1, 2, 4, 2}, 9), o64)
    local bv = vals({4, 4}, 10)
    local out = F.scaled_dot_product_attention(sq, sk, sv, {causal = true, mask = dle.tensor(bv, o64)})
    local want = ref_batched(sq:totable(), sk:totable(), sv:totable(), 0.5,
      function(_, _, i, j) return j <= i end, function(_, _, i, j) return bv[i][j] end)
    H.assert_close(out, want, {rtol = 1e-10, atol = 1e-12})
  end)

  it("works on 3-D inputs {B, T, D} in float32", function()
    local a = dle.tensor(vals({2, 3, 4}, 11))
    local out = F.scaled_dot_product_attention(a, a, a, {causal = true})
    local want = {}
    for b = 1, 2 do
      local av = a:select(1, b):totable()
      want[b] = ref_attention(av, av, av, 0.5, function(i, j) return j <= i end)
    end
    H.assert_close(out, want, {rtol = 1e-5, atol = 1e-6})
  end)

  it("ignores future positions with causal = true (changing a later key/value leaves earlier rows unchanged)",
     function()
    local sq = dle.randn(1, 2, 6, 4, {dtype = "float64"})
    local sk, sv = dle.randn(1, 2, 6, 4, {dtype = "float64"}), dle.randn(1, 2, 6, 4, {dtype = "float64"})
    local base = F.scaled_dot_product_attention(sq, sk, sv, {causal = true})
    local k2, v2 = sk:clone(), sv:clone()
    k2:narrow(3, 5, 1):fill_(7)
    v2:narrow(3, 5, 1):fill_(-3)
    local out = F.scaled_dot_product_attention(sq, k2, v2, {causal = true})
    H.assert_close(out:narrow(3, 1, 4), base:narrow(3, 1, 4):totable(), {rtol = 0, atol = 0})
    local diff = (out:narrow(3, 5, 2) - base:narrow(3, 5, 2)):abs():max():item()
    assert.is_true(diff > 1e-3, "rows 5 and 6 should change, max difference " .. diff)
  end)

  it("drops attention weights only when training (dropout_p)", function()
    local a = dle.randn(1, 1, 4, 4)
    local plain = F.scaled_dot_product_attention(a, a, a)
    local eval = F.scaled_dot_product_attention(a, a, a, {dropout_p = 0.5, training = false})
    H.assert_close(eval, plain:totable(), {rtol = 0, atol = 0})
    local dropped = F.scaled_dot_product_attention(a, a, a, {dropout_p = 0.9, generator = dle.Generator(1)})
    assert.is_true((dropped - plain):abs():max():item() > 1e-4)
  end)

  it("passes a float64 gradcheck (q, k, v; causal and with a bool mask)", function()
    local sq, sk, sv = dle.randn(2, 2, 3, 4, o64), dle.randn(2, 2, 3, 4, o64), dle.randn(2, 2, 3, 2, o64)
    local ok, err = dle.gradcheck(function(a, b, c)
      return F.scaled_dot_product_attention(a, b, c, {causal = true})
    end, {sq, sk, sv})
    assert.is_true(ok, "causal max error " .. tostring(err))
    local mask = dle.tensor({{true, false, true}, {true, true, false}, {false, true, true}}, {dtype = "bool"})
    ok, err = dle.gradcheck(function(a, b, c)
      return F.scaled_dot_product_attention(a, b, c, {mask = mask, scale = 0.7})
    end, {sq, sk, sv})
    assert.is_true(ok, "masked max error " .. tostring(err))
  end)

  it("names the function and the shapes on bad input", function()
    H.assert_error(function() F.scaled_dot_product_attention(dle.zeros(2, 3, 4), dle.zeros(2, 3, 5),
                                                             dle.zeros(2, 3, 4)) end,
      "scaled_dot_product_attention", "{2,3,4}", "{2,3,5}")
    H.assert_error(function() F.scaled_dot_product_attention(dle.zeros(2, 3, 4), dle.zeros(2, 3, 4),
                                                             dle.zeros(2, 2, 4)) end,
      "scaled_dot_product_attention", "different lengths")
    H.assert_error(function() F.scaled_dot_product_attention(dle.zeros(3, 4), dle.zeros(3, 4), dle.zeros(3, 4),
                                                             {mask = dle.ones(5, 5)}) end,
      "scaled_dot_product_attention", "mask {5,5}")
  end)
end)

describe("nn.MultiheadAttention", function()
  it("is registered in dle.nn and maps {B, T, d} to {B, T, d}", function()
    assert.are.equal(require("dle.nn.attention"), nn.MultiheadAttention)
    local m = nn.MultiheadAttention(8, 2, {causal = true})
    assert.are.same({2, 5, 8}, m(dle.randn(2, 5, 8)):shape())
    assert.are.same({5, 8}, m(dle.randn(5, 8)):shape())
  end)

  it("has 4d^2 + 4d parameters (fused qkv and output projection), 4d^2 without bias", function()
    local m = nn.MultiheadAttention(8, 2)
    assert.are.equal(4 * 64 + 4 * 8, m:num_parameters())
    assert.are.same({"qkv.weight", "qkv.bias", "proj.weight", "proj.bias"},
      (function() local n = {} for name in m:named_parameters() do n[#n + 1] = name end return n end)())
    assert.are.same({24, 8}, m.qkv.weight:shape())
    assert.are.equal(4 * 64, nn.MultiheadAttention(8, 4, {bias = false}):num_parameters())
  end)

  it("equals a hand-composed forward: fused projection, per-head SDPA, merge, output projection", function()
    local g = dle.Generator(3)
    local m = nn.MultiheadAttention(6, 2, {causal = true, generator = g}):to("float64")
    local x = dle.randn(2, 4, 6, {dtype = "float64"})
    local y = m(x)
    local qkv = x:matmul(m.qkv.weight:t()) + m.qkv.bias
    local heads = {}
    for h = 1, 2 do
      local function part(i) return qkv:narrow(3, (i - 1) * 6 + (h - 1) * 3 + 1, 3) end
      heads[h] = F.scaled_dot_product_attention(part(1), part(2), part(3), {causal = true})
    end
    local want = dle.cat(heads, 3):matmul(m.proj.weight:t()) + m.proj.bias
    H.assert_close(y, want:totable(), {rtol = 1e-10, atol = 1e-12})
  end)

  it("is causal: changing token 4 changes outputs 4.. but not 1..3", function()
    local m = nn.MultiheadAttention(8, 2, {causal = true})
    local x = dle.randn(1, 6, 8)
    local base = m(x)
    local x2 = x:clone()
    x2:narrow(2, 4, 1):fill_(2.5)
    local out = m(x2)
    H.assert_close(out:narrow(2, 1, 3), base:narrow(2, 1, 3):totable(), {rtol = 0, atol = 0})
    assert.is_true((out:narrow(2, 4, 1) - base:narrow(2, 4, 1)):abs():max():item() > 1e-4)
    -- without causal every position sees token 4
    local full = nn.MultiheadAttention(8, 2)
    assert.is_true((full(x2):narrow(2, 1, 1) - full(x):narrow(2, 1, 1)):abs():max():item() > 1e-6)
  end)

  it("does cross attention forward(q, k, v) with Tk != Tq and equals self-attention when q = k = v", function()
    local m = nn.MultiheadAttention(8, 4)
    local q, kv = dle.randn(2, 3, 8), dle.randn(2, 7, 8)
    assert.are.same({2, 3, 8}, m(q, kv, kv):shape())
    local x = dle.randn(2, 5, 8)
    H.assert_close(m(x, x, x), m(x):totable(), {rtol = 1e-5, atol = 1e-6})
  end)

  it("self-attention (one fused product, packed q, k, v) has the gradients of the three-product path", function()
    -- m(x) runs the packed op; m(x, x, x) the cross-attention path with three weight slices
    local m = nn.MultiheadAttention(8, 2, {causal = true, generator = dle.Generator(6)})
    local x = dle.randn({3, 5, 8}, {requires_grad = true})
    local g = dle.randn(3, 5, 8)
    local params = {x, m.qkv.weight, m.qkv.bias, m.proj.weight}
    local packed = dle.grad(m(x), params, {grad_outputs = {g}})
    local three = dle.grad(m(x, x, x), params, {grad_outputs = {g}})
    for i = 1, #params do H.assert_close(packed[i], three[i]:totable(), {rtol = 1e-4, atol = 1e-5}) end
    assert.is_true(packed[1]:abs():max():item() > 0)
  end)

  it("with attention dropout: the three-product path when training, the packed one in eval", function()
    local m = nn.MultiheadAttention(8, 2, {causal = true, dropout = 0.5, generator = dle.Generator(7)})
    local x = dle.randn({2, 4, 8}, {requires_grad = true})
    local y = m(x)                                   -- training: weights dropped
    local gx = dle.grad(y:sum(), {x})[1]
    assert.are.same({2, 4, 8}, gx:shape())
    m:eval()
    local ref = nn.MultiheadAttention(8, 2, {causal = true})
    ref.qkv.weight, ref.qkv.bias, ref.proj.weight, ref.proj.bias = m.qkv.weight, m.qkv.bias, m.proj.weight, m.proj.bias
    H.assert_close(m(x), ref(x):totable(), {rtol = 0, atol = 0})
    assert.is_true((y - m(x)):abs():max():item() > 1e-3)  -- dropout did act when training
  end)

  it("counts FLOPs as 8BTd^2 + 4BT^2d for self-attention (and per shape for cross attention)", function()
    local m = nn.MultiheadAttention(16, 4)
    local B, T, d = 2, 10, 16
    assert.are.equal(8 * B * T * d * d + 4 * B * T * T * d, m:flops({B, T, d}))
    -- cross: q proj 2BTqd^2, kv proj 4BTkd^2, out proj 2BTqd^2, attention 4BTqTkd
    assert.are.equal(2 * B * 3 * d * d + 4 * B * 7 * d * d + 2 * B * 3 * d * d + 4 * B * 3 * 7 * d,
      m:flops({dle.zeros(B, 3, d), dle.zeros(B, 7, d), dle.zeros(B, 7, d)}))
  end)

  it("passes a float64 gradcheck of forward in the input and both projection weights", function()
    local m = nn.MultiheadAttention(4, 2, {causal = true, generator = dle.Generator(5)}):to("float64")
    local W1, W2 = m.qkv.weight, m.proj.weight
    local x = dle.randn(2, 3, 4, {dtype = "float64"})
    local ok, err = dle.gradcheck(function(xx, w1, w2)
      rawset(m.qkv, "weight", w1)
      rawset(m.proj, "weight", w2)
      return m(xx)
    end, {x, W1, W2})
    rawset(m.qkv, "weight", W1)
    rawset(m.proj, "weight", W2)
    assert.is_true(ok, "max error " .. tostring(err))
  end)

  it("rejects bad sizes and inputs with messages naming the class and the shapes", function()
    H.assert_error(function() nn.MultiheadAttention(10, 3) end, "MultiheadAttention", "10", "3")
    local m = nn.MultiheadAttention(8, 2)
    H.assert_error(function() m(dle.zeros(2, 5, 7)) end, "MultiheadAttention", "{2,5,7}", "8")
    H.assert_error(function() m(dle.zeros(2, 5, 8), dle.zeros(3, 5, 8), dle.zeros(3, 5, 8)) end,
      "MultiheadAttention", "do not match")
  end)
end)

describe("nn.TransformerBlock", function()
  it("keeps the shape, is causal and has 12d^2 + 13d parameters (MLP 4d, two LayerNorms)", function()
    local d = 8
    local blk = nn.TransformerBlock(d, 2, {causal = true})
    local x = dle.randn(2, 5, d)
    local y = blk(x)
    assert.are.same({2, 5, d}, y:shape())
    assert.are.equal(12 * d * d + 13 * d, blk:num_parameters())
    local x2 = x:clone()
    x2:narrow(2, 5, 1):fill_(1)
    H.assert_close(blk(x2):narrow(2, 1, 4), y:narrow(2, 1, 4):totable(), {rtol = 0, atol = 0})
    assert.are.equal(blk.attn:flops({2, 5, d}) + 4 * 10 * d * 4 * d, blk:flops({2, 5, d}))
  end)
end)

describe("tiny GPT", function()
  it("learns a repeated string: 1 layer, d = 16, loss below 0.5 after 50 AdamW steps", function()
    local text = string.rep("the cat sat on the mat. ", 20)
    local vocab, lookup, ids = {}, {}, {}
    for i = 1, #text do
      local ch = text:sub(i, i)
      if not lookup[ch] then vocab[#vocab + 1] = ch; lookup[ch] = #vocab end
      ids[i] = lookup[ch]
    end
    local V, T, B, d = #vocab, 16, 16, 16
    local data = dle.tensor(ids, {dtype = "int64"})
    dle.manual_seed(0)
    local Tiny = nn.Module:extend("TinyGPT")
    function Tiny:init()
      self.wte = nn.Embedding(V, d)
      self.wpe = nn.Embedding(T, d)
      nn.init.normal_(self.wte.weight, 0, 0.1)
      nn.init.normal_(self.wpe.weight, 0, 0.1)
      self.block = nn.TransformerBlock(d, 2, {causal = true})
      self.ln = nn.LayerNorm(d)
      self.head = nn.Linear(d, V)
      self.pos = dle.arange(1, T + 1, 1, {dtype = "int64"})
    end
    function Tiny:forward(x)
      return self.head(self.ln(self.block(self.wte(x) + self.wpe(self.pos))))
    end
    local model = Tiny()
    local opt = dle.optim.AdamW(model:parameters(), {lr = 1e-2, weight_decay = 0.01})
    local gen = dle.Generator(0)
    local first, last
    for _ = 1, 50 do
      local starts = dle.randint(1, #ids - T, {B, 1}, {dtype = "int64", generator = gen})
      local idx = (starts + dle.arange(0, T, 1, {dtype = "int64"})):reshape(-1)
      local x = data:index_select(1, idx):view(B, T)
      local y = data:index_select(1, idx + 1):view(B, T)
      local loss = F.cross_entropy(model(x):view(B * T, V), y:view(B * T))
      opt:zero_grad()
      loss:backward()
      opt:step()
      first = first or loss:item()
      last = loss:item()
    end
    assert.is_true(first > 1.5, "initial loss " .. first .. " should be near log(" .. V .. ")")
    assert.is_true(last < 0.5, "final loss " .. last .. " (from " .. first .. ")")
  end)
end)
