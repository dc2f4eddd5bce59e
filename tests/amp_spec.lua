-- Mixed precision: dle.autocast (the per-op dtype policy, float32 accumulation, gradients through
-- the casts, nesting and restoring) and dle.amp.GradScaler (loss scaling for float16).
local dle = require("dle")
local nn = dle.nn
local F = nn.functional
local H = require("helpers")

local function bf16(fn, ...) return dle.autocast("bfloat16", fn, ...) end

-- largest |a - b| over all elements, in float64
local function max_diff(a, b)
  return (a:double() - b:double()):abs():max():item()
end

describe("dle.autocast policy", function()
  it("runs matmul, mm, bmm, addmm and einsum in the autocast dtype", function()
    local a, b = dle.randn(4, 5), dle.randn(5, 3)
    local r = bf16(function()
      return {a:matmul(b), a:mm(b), dle.bmm(a:unsqueeze(1), b:unsqueeze(1)), dle.addmm(dle.ones(3), a, b),
              dle.einsum("ij,jk->ik", a, b), dle.einsum("ij->i", a)}
    end)
    for i, t in ipairs(r) do assert.are.equal("bfloat16", t:dtype(), "result " .. i) end
    local h = dle.autocast("float16", function() return a:matmul(b) end)
    assert.are.equal("float16", h:dtype())
  end)

  it("runs nn.Linear (weight and bias) and conv2d in the autocast dtype", function()
    dle.manual_seed(1)
    local lin, conv = nn.Linear(5, 3), nn.Conv2d(2, 4, 3, {padding = 1})
    local y, z = bf16(function() return lin(dle.randn(6, 5)), conv(dle.randn(1, 2, 5, 5)) end)
    assert.are.equal("bfloat16", y:dtype())
    assert.are.equal("bfloat16", z:dtype())
    assert.are.same({1, 4, 5, 5}, z:shape())
    assert.are.equal("float32", lin.weight:dtype())   -- parameters are not converted
  end)

  it("runs attention in the autocast dtype, the functional form and the module", function()
    dle.manual_seed(2)
    local q, k, v = dle.randn(2, 3, 4, 8), dle.randn(2, 3, 6, 8), dle.randn(2, 3, 6, 8)
    local mha = nn.MultiheadAttention(8, 2, {causal = true})
    local o, m = bf16(function()
      return F.scaled_dot_product_attention(q, k, v), mha(dle.randn(2, 5, 8))
    end)
    assert.are.equal("bfloat16", o:dtype())
    assert.are.equal("bfloat16", m:dtype())
    local ref = F.scaled_dot_product_attention(q, k, v)
    assert.is_true(max_diff(o, ref) < 0.05, "bfloat16 attention far from float32: " .. max_diff(o, ref))
  end)

  it("computes softmax, log_softmax, layer_norm, reductions and exp/log in float32 from bfloat16 inputs", function()
    local x = dle.randn(4, 6):bfloat16()
    local r = bf16(function()
      return {x:softmax(2), x:log_softmax(2), F.layer_norm(x, nil, nil, 1e-5, {6}), x:sum(), x:mean(2),
              x:var(), x:logsumexp(2), x:exp(), x:abs():log(), x:pow(2)}
    end)
    for i, t in ipairs(r) do assert.are.equal("float32", t:dtype(), "result " .. i) end
    H.assert_close(r[1], x:float():softmax(2):totable(), {rtol = 1e-6, atol = 1e-7})
  end)

  it("lets a reduction's explicit dtype win over float32, as PyTorch", function()
    local x = dle.ones(4, 3):bfloat16()
    local s, m, on = bf16(function()
      return x:sum({dtype = "bfloat16"}), x:mean(1, {dtype = "float16"}), dle.is_autocast_enabled()
    end)
    assert.are.equal("bfloat16", s:dtype())
    assert.are.equal("float16", m:dtype())
    assert.are.equal(12, s:item())
    assert.is_true(on)   -- switched back on after the reductions
  end)

  it("computes the losses in float32 from low-precision logits", function()
    local logits, targets = dle.randn(5, 3):bfloat16(), dle.tensor({1, 2, 3, 1, 2}, {dtype = "int64"})
    local ce, mse, bce, nll = dle.autocast("float16", function()
      local l = logits:half()
      return F.cross_entropy(l, targets), F.mse_loss(l, dle.zeros(5, 3):half()),
             F.binary_cross_entropy_with_logits(l, dle.ones(5, 3):half()),
             F.nll_loss(l:log_softmax(2), targets)
    end)
    for _, t in ipairs({ce, mse, bce, nll}) do assert.are.equal("float32", t:dtype()) end
    H.assert_close(ce, F.cross_entropy(logits:half():float(), targets):item(), {rtol = 1e-6})
  end)

  it("leaves other ops to the usual promotion, and float64 and integer inputs alone", function()
    local x16, x32 = dle.ones(3):bfloat16(), dle.ones(3)
    local r = bf16(function()
      return {x16 + x16, x16 + x32, x16:relu(), x32:tanh(),
              dle.ones(2, 3, {dtype = "float64"}):matmul(dle.ones(3, 2, {dtype = "float64"})),
              dle.ones(2, 3, {dtype = "int64"}):matmul(dle.ones(3, 2, {dtype = "int64"})),
              dle.ones(3, {dtype = "float64"}):exp()}
    end)
    local want = {"bfloat16", "float32", "bfloat16", "float32", "float64", "int64", "float64"}
    for i, t in ipairs(r) do assert.are.equal(want[i], t:dtype(), "result " .. i) end
  end)

  it("does not autocast an op writing into a given output (out= and in-place forms)", function()
    local a, b, out = dle.randn(3, 4), dle.randn(4, 2), dle.zeros(3, 2)
    bf16(function() dle.matmul(a, b, {out = out}) end)
    H.assert_close(out, a:matmul(b):totable(), {rtol = 1e-6, atol = 1e-6, dtype = "float32"})
  end)

  it("leaves everything in float32 when autocast is off, before, after and outside it", function()
    assert.is_false(dle.is_autocast_enabled())
    local a, b = dle.randn(3, 4), dle.randn(4, 2)
    local lin = nn.Linear(4, 2)
    assert.are.equal("float32", a:matmul(b):dtype())
    assert.are.equal("float32", lin(a):dtype())
    bf16(function() return a:matmul(b) end)
    assert.is_false(dle.is_autocast_enabled())
    assert.are.equal("float32", a:matmul(b):dtype())
    assert.are.equal("float32", dle.conv2d(dle.randn(1, 1, 4, 4), dle.randn(1, 1, 3, 3)):dtype())
  end)
end)

describe("dle.autocast numerics", function()
  it("accumulates matmul in float32: a length-4096 dot product of ones is exactly 4096", function()
    -- accumulating in bfloat16 would stop at 256 (256 + 1 rounds back to 256), float16 at 2048
    local ones = dle.ones(4096)
    assert.are.equal(4096, bf16(function() return ones:matmul(ones) end):item())
    assert.are.equal(4096, dle.autocast("float16", function() return ones:matmul(ones) end):item())
    local m = bf16(function() return dle.ones(3, 4096):matmul(dle.ones(4096, 5)) end)
    H.assert_close(m, H.build({3, 5}, function() return 4096 end), {rtol = 0, atol = 0})
  end)

  it("accumulates conv2d in float32: 4096 input channels of ones sum to exactly 4096", function()
    local y = bf16(function() return dle.conv2d(dle.ones(1, 4096, 2, 2), dle.ones(2, 4096, 1, 1)) end)
    assert.are.equal("bfloat16", y:dtype())
    H.assert_close(y, H.build({1, 2, 2, 2}, function() return 4096 end), {rtol = 0, atol = 0})
  end)

  it("adds a matmul's bias in float32 too, rounding once (addmm, Linear)", function()
    -- 257 ones sum to 257 (not a bfloat16): rounding it before adding the bias 1 gives 256 + 1 ->
    -- 256; one rounding of 258 gives 258
    local y = bf16(function() return dle.addmm(dle.ones(1), dle.ones(1, 257), dle.ones(257, 1)) end)
    assert.are.equal(258, y:item())
    local lin = nn.Linear(257, 1)
    dle.no_grad(function() lin.weight:fill_(1); lin.bias:fill_(1) end)
    assert.are.equal(258, bf16(function() return lin(dle.ones(1, 257)) end):item())
  end)

  it("gives bfloat16/float16 matmul results within one rounding of the float32 product of the rounded inputs",
     function()
    dle.manual_seed(3)
    local a, b = dle.randn(33, 130), dle.randn(130, 17)
    for _, dt in ipairs({"bfloat16", "float16"}) do
      local eps = dt == "bfloat16" and 2 ^ -8 or 2 ^ -11   -- half an ulp, relative
      local r = dle.autocast(dt, function() return a:matmul(b) end):double()
      local ref = a:to(dt):double():matmul(b:to(dt):double())
      local err = ((r - ref):abs() - ref:abs() * eps):max():item()
      assert.is_true(err <= 1e-12, dt .. ": an element is off by more than one rounding (" .. err .. ")")
      -- and close to the float32 product itself
      assert.is_true(max_diff(r, a:matmul(b)) < 0.5, dt .. " far from float32")
    end
  end)
end)

describe("dle.autocast gradients", function()
  it("gives float32 parameters float32 gradients through a bfloat16 forward", function()
    dle.manual_seed(4)
    local lin1, lin2 = nn.Linear(6, 8), nn.Linear(8, 3)
    local x, t = dle.randn(5, 6), dle.tensor({1, 2, 3, 1, 2}, {dtype = "int64"})
    local loss = bf16(function() return F.cross_entropy(lin2(lin1(x):relu()), t) end)
    assert.are.equal("float32", loss:dtype())
    loss:backward()
    -- the float32 run's gradients, for comparison
    local ref = {}
    for _, p in ipairs({lin1.weight, lin1.bias, lin2.weight, lin2.bias}) do
      assert.are.equal("float32", p.grad:dtype())
      ref[#ref + 1] = p.grad:clone()
      p.grad = nil
    end
    F.cross_entropy(lin2(lin1(x):relu()), t):backward()
    for i, p in ipairs({lin1.weight, lin1.bias, lin2.weight, lin2.bias}) do
      assert.is_true(max_diff(ref[i], p.grad) < 0.03, "gradient " .. i .. " far from float32")
    end
  end)

  it("runs backward in the dtypes forward recorded, even when called inside autocast", function()
    dle.manual_seed(5)
    local a = dle.randn(8, 64):requires_grad_()
    local b, g = dle.randn(64, 16), dle.randn(8, 16)
    local y = a:matmul(b)                    -- recorded in float32, outside autocast
    bf16(function() y:backward(g) end)       -- its gradient rule's matmul must stay float32
    H.assert_close(a.grad, g:matmul(b:t()):totable(), {rtol = 1e-6, atol = 1e-5, dtype = "float32"})
    assert.is_false(dle.is_autocast_enabled())
    -- and dle.grad inside autocast of a graph recorded inside it: float32 gradient, not rounded
    local w = dle.randn(64, 4):requires_grad_()
    local ga = bf16(function()
      local z = a:matmul(w)
      return dle.grad(z:float():sum(), {w})[1]
    end)
    assert.are.equal("float32", ga:dtype())
  end)

  it("checkpoint recomputes under the autocast mode of the forward", function()
    dle.manual_seed(6)
    local lin = nn.Linear(4, 4)
    local x = dle.randn(3, 4):requires_grad_()
    local y = bf16(function() return dle.checkpoint(lin, x) end)
    assert.are.equal("bfloat16", y:dtype())
    y:float():sum():backward()
    local g1 = lin.weight.grad:clone()
    lin.weight.grad = nil
    bf16(function() return lin(x) end):float():sum():backward()
    H.assert_close(g1, lin.weight.grad:totable(), {rtol = 0, atol = 0})
  end)

  it("carries forward-mode tangents through the casts", function()
    local a, b = dle.randn(3, 4), dle.randn(4, 2)
    local out, tan = bf16(function()
      return dle.jvp(function(x) return x:matmul(b) end, {a}, {dle.ones(3, 4)})
    end)
    assert.are.equal("bfloat16", out:dtype())
    assert.are.equal("bfloat16", tan:dtype())
    assert.is_true(max_diff(tan, dle.ones(3, 4):matmul(b)) < 0.05)
  end)
end)

describe("dle.autocast mode", function()
  it("returns fn's results and passes its arguments", function()
    local a, b, c = dle.autocast("bf16", function(x, y) return x + y, "s", nil end, 1, 2)
    assert.are.equal(3, a)
    assert.are.equal("s", b)
    assert.is_nil(c)
  end)

  it("tells whether it is on and in which dtype, and accepts dle's dtype aliases", function()
    assert.is_false(dle.is_autocast_enabled())
    for name, dt in pairs({bfloat16 = "bfloat16", bf16 = "bfloat16", float16 = "float16",
                           half = "float16", fp16 = "float16"}) do
      local on, got = dle.autocast(name, function() return dle.is_autocast_enabled(), dle.get_autocast_dtype() end)
      assert.is_true(on)
      assert.are.equal(dt, got, name)
    end
  end)

  it("nests: the inner dtype wins, and leaving it returns to the outer one", function()
    local a = dle.ones(2, 2)
    local inner, after = bf16(function()
      local i = dle.autocast("float16", function() return a:matmul(a):dtype() end)
      return i, a:matmul(a):dtype()
    end)
    assert.are.equal("float16", inner)
    assert.are.equal("bfloat16", after)
    assert.is_false(dle.is_autocast_enabled())
  end)

  it("restores the previous mode when fn raises, and raises the same error again", function()
    local err = {}
    local ok, e = pcall(dle.autocast, "float16", function() error(err) end)
    assert.is_false(ok)
    assert.are.equal(err, e)   -- the error value itself, not a copy
    assert.is_false(dle.is_autocast_enabled())
    local dt = bf16(function()
      local ok2, e2 = pcall(dle.autocast, "float16", function() error("boom") end)
      assert.is_false(ok2)
      assert.truthy(tostring(e2):find("boom", 1, true))
      return dle.get_autocast_dtype(), dle.is_autocast_enabled()
    end)
    assert.are.equal("bfloat16", dt)
    assert.is_false(dle.is_autocast_enabled())
  end)

  it("refuses other dtypes and a missing function, naming autocast and the value", function()
    H.assert_error(function() dle.autocast("float32", function() end) end, "autocast", '"float32"')
    H.assert_error(function() dle.autocast("int8", function() end) end, "autocast", '"int8"')
    H.assert_error(function() dle.autocast(16, function() end) end, "autocast", "number 16")
    H.assert_error(function() dle.autocast(nil, function() end) end, "autocast", "got nil")
    H.assert_error(function() dle.autocast("bfloat16", 3) end, "autocast", "fn must be a function")
    assert.is_false(dle.is_autocast_enabled())
  end)

  it("runs a callable table (a module) as fn", function()
    local lin = nn.Linear(3, 2)
    assert.are.equal("bfloat16", dle.autocast("bfloat16", lin, dle.ones(1, 3)):dtype())
  end)
end)

describe("dle.autocast cast cache", function()
  local no_cache = {dtype = "bfloat16", cache_enabled = false}

  -- the casts (calls of the copy op) made while fn runs
  local function casts(fn, ...)
    for _, r in ipairs(dle.profile(fn, ...):ops()) do
      if r.op == "copy" then return r.calls end
    end
    return 0
  end

  -- h times w, three times: an RNN-like cell unrolled over 3 steps with one weight
  local function unrolled(w, h)
    for _ = 1, 3 do h = h:matmul(w) end
    return h
  end

  it("casts a parameter used by 3 matmuls once, and at each use with cache_enabled = false", function()
    local w, h = dle.randn(8, 8):requires_grad_(), dle.randn(4, 8):bfloat16()
    assert.are.equal(1, casts(bf16, unrolled, w, h))
    assert.are.equal(3, casts(dle.autocast, no_cache, unrolled, w, h))
    -- nn.Linear's weight and bias, and einsum's operands, go through the cache too (Linear's
    -- product also copies its bias expanded, in bfloat16: compare with the uncached run)
    local lin = nn.Linear(8, 8)
    local function three(x) return lin(lin(lin(x))) end
    assert.are.equal(2 * 3 - 2, casts(dle.autocast, no_cache, three, h) - casts(bf16, three, h))
    assert.are.equal(1, casts(bf16, function()
      for _ = 1, 3 do dle.einsum("ij,jk->ik", h, w) end
    end))
  end)

  it("casts at every use what is not a float32 parameter: no requires_grad, a non-leaf, float16", function()
    local h = dle.randn(4, 8):bfloat16()
    assert.are.equal(3, casts(bf16, unrolled, dle.randn(8, 8), h))
    local w = dle.randn(8, 8):requires_grad_()
    assert.are.equal(3, casts(bf16, function() return unrolled(w * 2, h) end))   -- w * 2 has a grad_fn
    assert.are.equal(3, casts(bf16, unrolled, dle.randn(8, 8):half():requires_grad_(), h))
    local x, wb = dle.randn(4, 8), dle.randn(8, 8):bfloat16()                   -- an activation
    assert.are.equal(3, casts(bf16, function() for _ = 1, 3 do x:matmul(wb) end end))
  end)

  it("gives the parameter the sum of its uses' gradients, as without the cache", function()
    -- small integers: every product and sum is exact in bfloat16, so all runs agree exactly
    local w = dle.tensor({{1, -1, 0}, {2, 0, 1}, {0, 1, -1}}):requires_grad_()
    local h = dle.tensor({{1, 2, 0}, {0, -1, 1}})
    local function grad_of(region)
      w.grad = nil
      dle.autocast(region, unrolled, w, h):float():sum():backward()
      return w.grad
    end
    local w64 = w:detach():double():requires_grad_()
    unrolled(w64, h:double()):sum():backward()
    local want = w64.grad:totable()
    H.assert_close(grad_of(no_cache), want, {rtol = 0, atol = 0, dtype = "float32"})
    H.assert_close(grad_of("bfloat16"), want, {rtol = 0, atol = 0, dtype = "float32"})
    -- random values: as close to float64 as the uncached run
    dle.manual_seed(11)
    w = dle.randn(16, 16):mul(0.25):requires_grad_()
    h = dle.randn(4, 16)
    w64 = w:detach():double():requires_grad_()
    unrolled(w64, h:double()):sum():backward()
    local scale = w64.grad:abs():max():item()
    assert.is_true(max_diff(grad_of("bfloat16"), w64.grad) < 0.03 * scale)
  end)

  it("lets backward run inside the region between uses (gradients accumulated over micro-batches)", function()
    local w, x = dle.ones(4, 3):requires_grad_(), dle.ones(2, 4)
    bf16(function()
      for _ = 1, 2 do x:matmul(w):float():sum():backward() end
    end)
    H.assert_close(w.grad, H.build({4, 3}, function() return 4 end), {rtol = 0, atol = 0})
  end)

  it("casts again after the parameter is written in place inside the region (an optimizer step)", function()
    local w, x = dle.ones(4, 4):requires_grad_(), dle.ones(2, 4)
    local before, after = bf16(function()
      local y = x:matmul(w)
      dle.no_grad(function() w:add_(1) end)
      return y, x:matmul(w)
    end)
    H.assert_close(before, H.build({2, 4}, function() return 4 end), {rtol = 0, atol = 0})
    H.assert_close(after, H.build({2, 4}, function() return 8 end), {rtol = 0, atol = 0})
  end)

  it("does not serve a cast made under no_grad to an op that records, and reuses it under no_grad", function()
    local w, h = dle.randn(4, 4):requires_grad_(), dle.randn(2, 4):bfloat16()
    local y = bf16(function()
      dle.no_grad(function() return h:matmul(w) end)
      return h:matmul(w)
    end)
    assert.is_true(y.requires_grad)
    y:float():sum():backward()
    assert.are.equal("float32", w.grad:dtype())
    assert.are.equal(1, casts(bf16, function() return dle.no_grad(unrolled, w, h) end))
  end)

  it("holds nothing once the outermost region exits, normally or by an error", function()
    local w, h = dle.randn(256, 256):requires_grad_(), dle.randn(4, 256):bfloat16()
    local function allocated()
      collectgarbage()
      collectgarbage()
      return dle.memory_stats().allocated
    end
    local base = allocated()
    bf16(function() unrolled(w, h) end)                          -- its cast: 128 KiB
    assert.are.equal(base, allocated())
    local ok, err = pcall(bf16, function()
      unrolled(w, h)
      error("boom", 0)
    end)
    assert.is_false(ok)
    assert.are.equal("boom", err)
    assert.are.equal(base, allocated())
    assert.are.equal(1, casts(bf16, unrolled, w, h))             -- a new region casts anew
  end)

  it("shares the cache with nested regions, each dtype with its own cast", function()
    local w, x = dle.randn(4, 4):requires_grad_(), dle.randn(2, 4)
    local dtypes = {}
    -- x (an activation) is cast at each of the 4 matmuls, w once per dtype
    assert.are.equal(4 + 2, casts(bf16, function()
      dtypes[1] = x:matmul(w):dtype()
      dle.autocast("float16", function()
        dtypes[2], dtypes[3] = x:matmul(w):dtype(), x:matmul(w):dtype()
      end)
      dtypes[4] = x:matmul(w):dtype()   -- still cached: the inner exit did not clear it
    end))
    assert.are.same({"bfloat16", "float16", "float16", "bfloat16"}, dtypes)
    -- a nested region without the cache casts at each use, and the outer one caches again after it
    assert.are.equal(1 + 3, casts(bf16, function()
      dle.autocast({dtype = "bfloat16", cache_enabled = false}, unrolled, w, x:bfloat16())
      unrolled(w, x:bfloat16())
    end) - 2)   -- the two x:bfloat16()
  end)

  it("keeps dle.checkpoint's gradients when its parameters are also used outside it and backward runs inside " ..
     "the region", function()
    dle.manual_seed(12)
    local lin, x = nn.Linear(4, 4), dle.randn(3, 4)
    local function weight_grad(region)
      lin.weight.grad, lin.bias.grad = nil, nil
      dle.autocast(region, function()
        local y = lin(x) + dle.checkpoint(lin, x)
        y:float():sum():backward()
      end)
      return lin.weight.grad
    end
    local want = weight_grad(no_cache):totable()
    H.assert_close(weight_grad("bfloat16"), want, {rtol = 0, atol = 0})
  end)

  it("lets a trace inside the region record the cast from the live parameter", function()
    local w, x = dle.ones(4, 4):requires_grad_(), dle.ones(2, 4)
    local y = bf16(function()
      x:matmul(w)                                     -- w's cast is in the cache now
      local g = dle.graph.trace(function(a) return a:matmul(w) end, x)
      dle.no_grad(function() w:add_(1) end)
      return g:run(x)
    end)
    H.assert_close(y, H.build({2, 4}, function() return 8 end), {rtol = 0, atol = 0})
  end)

  it("does not serve a cached cast to a parameter that has since been given a forward-mode tangent", function()
    local w, h = dle.ones(3, 3):requires_grad_(), dle.ones(2, 3):bfloat16()
    local tangent = bf16(function()
      h:matmul(w)                                   -- cached without a tangent
      dle.core._set_tangent(w, dle.ones(3, 3))
      local y = h:matmul(w)
      dle.core._set_tangent(w, nil)
      return dle.core._tangent(y)
    end)
    H.assert_close(tangent, H.build({2, 3}, function() return 3 end), {rtol = 0, atol = 0})
  end)

  it("takes {dtype =, cache_enabled =} and refuses other options, naming autocast", function()
    assert.are.equal("float16", dle.autocast({dtype = "half"}, dle.get_autocast_dtype))
    H.assert_error(function() dle.autocast({dtype = "bfloat16", cache = false}, print) end,
      "autocast", "unknown option 'cache'")
    H.assert_error(function() dle.autocast({dtype = "bfloat16", cache_enabled = 1}, print) end,
      "autocast", "cache_enabled must be a boolean, got number")
    H.assert_error(function() dle.autocast({cache_enabled = false}, print) end, "autocast", "got nil")
    assert.is_false(dle.is_autocast_enabled())
  end)
end)

describe("training under autocast", function()
  -- a 2-layer MLP on a fixed regression problem, trained with Adam from the same initial weights
  local function train(dtype, steps)
    dle.manual_seed(7)
    local x = dle.randn(64, 8)
    local y = (x:matmul(dle.randn(8, 1)) + x:sin():sum(2, true) * 0.5)
    local model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
    local opt = dle.optim.Adam(model:parameters(), {lr = 0.02})
    local loss
    for _ = 1, steps do
      opt:zero_grad()
      local function fwd()
        local out = model(x)
        assert.are.equal(dtype or "float32", out:dtype())   -- the run is in the dtype it claims
        return F.mse_loss(out, y)
      end
      loss = dtype and dle.autocast(dtype, fwd) or fwd()
      loss:backward()
      opt:step()
    end
    return loss and loss:item(), F.mse_loss(model(x), y):item()
  end

  it("a small MLP trained for 40 steps in bfloat16 reaches a loss close to the float32 run", function()
    local first = select(2, train(nil, 0))
    local _, e32 = train(nil, 40)
    local l16, e16 = train("bfloat16", 40)
    assert.is_true(e32 < 0.3 * first, "float32 did not learn: " .. first .. " -> " .. e32)
    assert.is_true(math.abs(e16 - e32) < 0.02 * e32 + 1e-3,
      string.format("bfloat16 loss %.4f vs float32 %.4f (training loss %.4f)", e16, e32, l16))
  end)
end)

describe("dle.amp.GradScaler", function()
  local GradScaler = dle.amp.GradScaler

  local function setup(value)
    local w = dle.tensor(value or {1, 2, 3}):requires_grad_()
    return w, dle.optim.SGD({w}, {lr = 0.5})
  end

  it("loads on first use as dle.amp, the same table as require", function()
    local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."
    local p = assert(io.popen(string.format("%q -e %q 2>&1", root .. "/scripts/dle", [[
      local dle = require("dle")
      io.write(tostring(package.loaded["dle.amp"] == nil), " ", tostring(dle.amp == require("dle.amp")))]])))
    local out = p:read("a")
    p:close()
    assert.are.equal("true true", out)
  end)

  it("multiplies a loss, or a table of them, by the scale", function()
    local s = GradScaler{init_scale = 8}
    assert.are.equal(8, s:get_scale())
    assert.are.equal(2 ^ 16, GradScaler():get_scale())
    local l = dle.tensor(1.5)
    assert.are.equal(12, s:scale(l):item())
    local t = s:scale({l, {b = dle.tensor(2)}})
    assert.are.equal(12, t[1]:item())
    assert.are.equal(16, t[2].b:item())
  end)

  it("unscales the gradients before the step, which then uses the true gradients", function()
    local w, opt = setup()
    local s = GradScaler{init_scale = 1024}
    s:scale((w * w):sum()):backward()
    H.assert_close(w.grad, {2048, 4096, 6144})
    s:step(opt)
    H.assert_close(w.grad, {2, 4, 6})
    H.assert_close(w, {0, 0, 0})          -- w - 0.5 * 2w
    s:update()
    assert.are.equal(1024, s:get_scale())
  end)

  it("skips the step and backs off the scale when a gradient holds an inf or a NaN", function()
    for _, bad in ipairs({math.huge, -math.huge, 0 / 0}) do
      local w, opt = setup()
      local s = GradScaler{init_scale = 4, backoff_factor = 0.25}
      s:scale((w * dle.tensor({1, bad, 1})):sum()):backward()
      assert.is_nil(s:step(opt))
      H.assert_close(w, {1, 2, 3}, {rtol = 0, atol = 0})   -- not stepped
      s:update()
      assert.are.equal(1, s:get_scale())
      assert.are.equal(0, s:state_dict()._growth_tracker)
    end
  end)

  it("grows the scale after growth_interval clean steps in a row, and an inf restarts the count", function()
    local w, opt = setup()
    local s = GradScaler{init_scale = 2, growth_factor = 3, growth_interval = 3}
    local function step(bad)
      opt:zero_grad()
      s:scale((w * (bad and dle.tensor({0 / 0, 1, 1}) or dle.ones(3))):sum() * 1e-3):backward()
      s:step(opt)
      s:update()
    end
    step(); step()
    assert.are.equal(2, s:get_scale())
    step()
    assert.are.equal(6, s:get_scale())
    step(); step(); step(true)          -- backoff to 3, count restarts
    assert.are.equal(3, s:get_scale())
    step(); step()
    assert.are.equal(3, s:get_scale())
    step()
    assert.are.equal(9, s:get_scale())
  end)

  it("does not grow past float32's range (the loss is multiplied in float32)", function()
    local w, opt = setup()
    local s = GradScaler{init_scale = 2 ^ 127, growth_interval = 1}
    w.grad = dle.zeros(3)
    s:step(opt)
    s:update()
    assert.are.equal(2 ^ 127, s:get_scale())
  end)

  it("returns what the optimizer's step returned", function()
    local w = dle.ones(2):requires_grad_()
    local opt = {param_groups = {{params = {w}}}, step = function() return "stepped", 2 end}
    local s = GradScaler()
    s:scale(w:sum()):backward()
    local a, b = s:step(opt)
    assert.are.equal("stepped", a)
    assert.are.equal(2, b)
  end)

  it("takes update(new_scale) as a number or a one-element tensor", function()
    local s = GradScaler()
    s:update(128)
    assert.are.equal(128, s:get_scale())
    s:update(dle.tensor({32}))
    assert.are.equal(32, s:get_scale())
  end)

  it("lets unscale_ run once per step, before step, as PyTorch", function()
    local w, opt = setup()
    local s = GradScaler{init_scale = 4}
    s:scale(w:sum()):backward()
    s:unscale_(opt)
    H.assert_close(w.grad, {1, 1, 1})
    H.assert_error(function() s:unscale_(opt) end, "GradScaler:unscale_", "already been called")
    s:step(opt)                                   -- uses the gradients unscaled once
    H.assert_close(w, {0.5, 1.5, 2.5})
    H.assert_error(function() s:unscale_(opt) end, "GradScaler:unscale_", "after step()")
    H.assert_error(function() s:step(opt) end, "GradScaler:step", "already been called")
    s:update()
    opt:zero_grad()
    s:scale(w:sum()):backward()
    s:unscale_(opt)                               -- a new step: allowed again
    H.assert_close(w.grad, {1, 1, 1})
  end)

  it("round-trips its state through state_dict, dle.save and dle.load", function()
    local w, opt = setup()
    local s = GradScaler{init_scale = 512, growth_factor = 4, backoff_factor = 0.125, growth_interval = 7}
    s:scale(w:sum()):backward()
    s:step(opt)
    s:update()
    local path = os.tmpname()
    dle.save(path, {scaler = s:state_dict()})
    local sd = dle.load(path).scaler
    os.remove(path)
    local s2 = GradScaler()
    s2:load_state_dict(sd)
    assert.are.same(s:state_dict(), s2:state_dict())
    assert.are.same({scale = 512, growth_factor = 4, backoff_factor = 0.125, growth_interval = 7,
                     _growth_tracker = 1}, s2:state_dict())
    assert.are.equal(4, s2:get_growth_factor())
    assert.are.equal(0.125, s2:get_backoff_factor())
    assert.are.equal(7, s2:get_growth_interval())
  end)

  it("passes everything through when disabled", function()
    local w, opt = setup()
    local s = GradScaler{enabled = false}
    assert.is_false(s:is_enabled())
    assert.are.equal(1, s:get_scale())
    local loss = (w * w):sum()
    assert.are.equal(loss, s:scale(loss))
    loss:backward()
    s:unscale_(opt)
    H.assert_close(w.grad, {2, 4, 6})
    assert.are.equal(7, s:step(opt, function() return 7 end))   -- closures allowed: plain opt:step
    s:update()
    assert.are.same({}, s:state_dict())
    H.assert_error(function() GradScaler():load_state_dict({}) end, "GradScaler:load_state_dict", "empty")
  end)

  it("keeps small float16 gradients from flushing to zero", function()
    -- d loss / d w = x * 1e-4 = 1e-8: below float16's smallest subnormal (6e-8) in the float16
    -- backward of the matmul, unless the loss is scaled
    local function grad_of(scaler)
      local w = dle.ones(1, 1):requires_grad_()
      local x = dle.full({1, 1}, 1e-4)
      local loss = dle.autocast("float16", function() return (x:matmul(w):float() * 1e-4):sum() end)
      scaler:scale(loss):backward()
      local opt = dle.optim.SGD({w}, {lr = 0})
      scaler:unscale_(opt)
      return w.grad:item()
    end
    assert.are.equal(0, grad_of(GradScaler{enabled = false}))
    local g = grad_of(GradScaler())
    assert.is_true(math.abs(g - 1e-8) < 1e-10, "scaled gradient " .. g)
  end)

  it("refuses float16 gradients, a closure and an optimizer without gradients", function()
    local w = dle.ones(2, {dtype = "float16"}):requires_grad_()
    local opt = dle.optim.SGD({w}, {lr = 0.1})
    local s = GradScaler()
    s:scale(w:float():sum()):backward()
    H.assert_error(function() s:unscale_(opt) end, "GradScaler:unscale_", "float16")
    local w2, opt2 = setup()
    H.assert_error(function() s:step(opt2) end, "GradScaler:step", "no inf checks")
    H.assert_error(function() s:step(opt2, function() end) end, "GradScaler:step", "closure")
    H.assert_error(function() s:update() end, "GradScaler:update", "no inf checks")
    assert.is_nil(w2.grad)
  end)

  it("raises errors naming the function for bad arguments", function()
    H.assert_error(function() GradScaler(3) end, "GradScaler", "options")
    H.assert_error(function() GradScaler{init_scale = 0} end, "GradScaler", "init_scale")
    H.assert_error(function() GradScaler{init_scale = math.huge} end, "GradScaler", "init_scale")
    H.assert_error(function() GradScaler{growth_factor = 1} end, "GradScaler", "growth_factor")
    H.assert_error(function() GradScaler{backoff_factor = 1} end, "GradScaler", "backoff_factor")
    H.assert_error(function() GradScaler{growth_interval = 0} end, "GradScaler", "growth_interval")
    H.assert_error(function() GradScaler{enabled = "yes"} end, "GradScaler", "enabled")
    H.assert_error(function() GradScaler{initial_scale = 2} end, "GradScaler", "unknown option 'initial_scale'")
    local s = GradScaler()
    H.assert_error(function() s:scale(3) end, "GradScaler:scale", "outputs must be a tensor")
    H.assert_error(function() s:scale({dle.ones(1), "x"}) end, "GradScaler:scale", "outputs[2]")
    H.assert_error(function() s.scale(dle.ones(1)) end, "GradScaler:scale", "call it as a method")
    H.assert_error(function() s:unscale_(nil) end, "GradScaler:unscale_", "optimizer")
    H.assert_error(function() s:step({}) end, "GradScaler:step", "optimizer")
    H.assert_error(function() s:update(-1) end, "GradScaler:update", "new_scale")
    H.assert_error(function() s:update(dle.ones(2)) end, "GradScaler:update", "one element")
    H.assert_error(function() s:update("x") end, "GradScaler:update", "new_scale")
    H.assert_error(function() s:set_growth_factor(0.5) end, "GradScaler:set_growth_factor", "growth_factor")
    H.assert_error(function() s:set_backoff_factor(2) end, "GradScaler:set_backoff_factor", "backoff_factor")
    H.assert_error(function() s:set_growth_interval(1.5) end, "GradScaler:set_growth_interval", "growth_interval")
    H.assert_error(function() s:load_state_dict(5) end, "GradScaler:load_state_dict", "state_dict")
    H.assert_error(function() s:load_state_dict({scale = 2}) end, "GradScaler:load_state_dict", "growth_factor")
    H.assert_error(function()
      s:load_state_dict({scale = -1, growth_factor = 2, backoff_factor = 0.5, growth_interval = 1,
                         _growth_tracker = 0})
    end, "GradScaler:load_state_dict", "scale")
  end)
end)
