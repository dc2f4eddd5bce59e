--- Weight-only quantization (lua/dle/quant.lua, engine/quant.c, kernels/cpu/quant.c): the block
-- bytes of hand-built inputs and of a plain Lua re-statement of ggml's Q8_0/Q4_0 rules, the
-- error bound of each format, products with a quantized weight against the dequantized reference
-- (both forms, odd sizes, batch 1 and many, the scalar path under DLE_SIMD=0, 1 and 2 threads),
-- the gradient with respect to x, nn.utils.quantize_ and generation with quantized models, and
-- the errors of bad input.
local dle = require("dle")
local H = require("helpers")

local KINDS = {"q8_0", "q4_0", "q4_k"}
local BLOCK = {q8_0 = 32, q4_0 = 32, q4_k = 256}
local BYTES = {q8_0 = 34, q4_0 = 18, q4_k = 144}

local function bytes_of(q)
  local b = q:blocks():contiguous():view(-1):totable()
  return string.char(table.unpack(b))
end

-- The two little-endian bytes of the float16 nearest to v (dle's float16 conversion does the
-- rounding; the bits are then read off the exactly representable value).
local function half_bytes(v)
  local x = dle.tensor({v}):half():float():item()
  local bits = (x < 0 or 1 / x < 0) and 0x8000 or 0
  local a = math.abs(x)
  if a < 2.0 ^ -14 then
    bits = bits | math.tointeger(a * 2.0 ^ 24)
  else
    local e = -14
    while a >= 2.0 ^ (e + 1) do e = e + 1 end
    bits = bits | ((e + 15) << 10) | math.tointeger((a / 2.0 ^ e - 1) * 1024)
  end
  return string.pack("<I2", bits)
end

-- ggml's Q8_0 and Q4_0 reference rules, restated in Lua over float32 values (the scale is
-- computed in float32 as the C code does: d = amax / 127, id = 1 / d, both rounded to float32)
local f32 = H.f32
local function ref_q8_0(x)
  local amax = 0
  for i = 1, 32 do amax = math.max(amax, math.abs(x[i])) end
  local d = f32(amax / 127)
  local id = d ~= 0 and f32(1 / d) or 0
  local out = {half_bytes(d)}
  for i = 1, 32 do
    local v = f32(x[i] * id)
    local q = v >= 0 and math.floor(v + 0.5) or -math.floor(-v + 0.5)
    out[#out + 1] = string.pack("<i1", q)
  end
  return table.concat(out)
end
local function ref_q4_0(x)
  local amax, max = 0, 0
  for i = 1, 32 do
    if amax < math.abs(x[i]) then amax, max = math.abs(x[i]), x[i] end
  end
  local d = f32(max / -8)
  local id = d ~= 0 and f32(1 / d) or 0
  local out = {half_bytes(d)}
  local function level(v)
    local t = f32(f32(v * id) + 8.5)
    return math.min(15, t >= 0 and math.floor(t) or -math.floor(-t))
  end
  for i = 1, 16 do out[#out + 1] = string.char(level(x[i]) | (level(x[i + 16]) << 4)) end
  return table.concat(out)
end

describe("quantized tensors", function()
  it("Q8_0, Q4_0 and Q4_K blocks of hand-built inputs have ggml's exact bytes", function()
    -- Q4_0: -8..7 twice: the value of largest magnitude is -8, so d = 1 and the levels are x + 8
    local x = {}
    for i = 1, 32 do x[i] = (i - 1) % 16 - 8 end
    local want = {"\0\60"}
    for i = 0, 15 do want[#want + 1] = string.char(i * 17) end
    assert.are.equal(table.concat(want), bytes_of(dle.quantize(dle.tensor({x}), "q4_0")))
    -- Q8_0: -16..15: amax 16, d = 16/127 = float16 0x3008, levels round(x * 127 / 16)
    for i = 1, 32 do x[i] = i - 17 end
    want = {"\8\48"}
    for i = 1, 32 do
      local v = x[i] * 127 / 16
      want[#want + 1] = string.pack("<i1", v >= 0 and math.floor(v + 0.5) or -math.floor(-v + 0.5))
    end
    assert.are.equal(table.concat(want), bytes_of(dle.quantize(dle.tensor({x}), "q8_0")))
    -- Q4_K: every sub-block holds 0..15 twice: scale 1 and min 0 fit exactly, so the six-bit
    -- scales are all 63 (d = 1/63 = float16 0x2410), the mins 0 (dmin 0), and the levels are the values
    local y = {}
    for i = 1, 256 do y[i] = (i - 1) % 16 end
    want = {"\16\36", "\0\0", string.rep("\255", 4), string.rep("\0", 4), string.rep("\15", 4)}
    for _ = 1, 4 do
      for l = 0, 31 do want[#want + 1] = string.char((l % 16) * 17) end
    end
    local q = dle.quantize(dle.tensor({y}), "q4_k")
    assert.are.equal(144, q:nbytes())
    assert.are.equal(table.concat(want), bytes_of(q))
    H.assert_close(q:dequantize(), {y}, {rtol = 1e-3, atol = 0})
  end)

  it("Q8_0 and Q4_0 bytes of random rows equal a Lua restatement of ggml's reference rules", function()
    local g = dle.Generator(11)
    local w = (dle.randn(3, 64, {generator = g}) * 3):totable()
    for _, kind in ipairs({"q8_0", "q4_0"}) do
      local want = {}
      for r = 1, 3 do
        for b = 0, 1 do
          local x = {}
          for i = 1, 32 do x[i] = f32(w[r][32 * b + i]) end
          want[#want + 1] = (kind == "q8_0" and ref_q8_0 or ref_q4_0)(x)
        end
      end
      assert.are.equal(table.concat(want), bytes_of(dle.quantize(dle.tensor(w), kind)), kind)
    end
  end)

  it("dequantize(quantize(w)) is within each format's bound, per block, at small and large scales", function()
    local g = dle.Generator(7)
    local rms = {}
    for _, scale in ipairs({1, 1e-2, 100}) do
      local w = dle.randn(16, 512, {generator = g}) * scale + dle.rand(16, 512, {generator = g}) * scale
      for _, kind in ipairs(KINDS) do
        local q = dle.quantize(w, kind)
        local e = q:dequantize() - w
        local B = BLOCK[kind]
        local wb = w:view(16, 512 // B, B)
        local err = e:abs():view(16, 512 // B, B):amax(3)
        local amax, range = wb:abs():amax(3), wb:amax(3) - wb:amin(3)
        -- Q8_0: half a step of amax/127, plus the float16 rounding of the scale over 127 steps;
        -- Q4_0: one step of amax/8 (the largest positive level is 7, not 8); Q4_K: a step of the
        -- super-block's range / 15
        local bound = kind == "q8_0" and amax * (1 / 254 + 2 ^ -11) or kind == "q4_0" and amax * (1 / 8 + 2 ^ -10)
          or range / 15
        assert.is_true((err - bound):max():item() <= 0, kind .. " at scale " .. scale)
        rms[kind] = ((e * e):mean():sqrt() / (w * w):mean():sqrt()):item()
      end
      -- Q4_K's searched scales and mins beat Q4_0's plain absmax grid at the same bits per weight
      assert.is_true(rms.q4_k < rms.q4_0, string.format("q4_k %g vs q4_0 %g", rms.q4_k, rms.q4_0))
    end
  end)

  it("has shape, dtype, nbytes, numel, a transposed view and prints its kind and size", function()
    local w = dle.randn(2, 3, 64)
    for _, kind in ipairs({"q8_0", "q4_0"}) do
      local q = dle.quantize(w, kind)
      assert.are.same({2, 3, 64}, q:shape())
      assert.are.equal(kind, q:dtype())
      assert.are.equal(3, q:dim())
      assert.are.equal(384, q:numel())
      assert.are.equal(6 * 2 * BYTES[kind], q:nbytes())
      assert.are.same({6, 2 * BYTES[kind]}, q:blocks():shape())
      assert.are.equal("[dle.QuantizedTensor " .. kind .. " of size 2x3x64, " .. q:nbytes() .. " bytes]", tostring(q))
      assert.is_false(q.requires_grad)
    end
    local q = dle.quantize(dle.randn(5, 32), "q8_0")
    assert.are.same({32, 5}, q:t():shape())
    assert.are.equal(q, q:t():t())
    H.assert_close(q:t():dequantize(), q:dequantize():t():totable())
    assert.truthy(tostring(q:t()):find("(transposed)", 1, true))
  end)

  it("rejects bad input with errors naming the function, the argument and the shapes", function()
    H.assert_error(function() dle.quantize(dle.randn(2, 100), "q4_k") end,
      "quantize: q4_k needs the last dimension to be a multiple of 256, got shape {2,100}")
    H.assert_error(function() dle.quantize(dle.randn(2, 32), "q5_1") end,
      "quantize: unknown quantization type \"q5_1\" (known: q8_0, q4_0, q4_k)")
    H.assert_error(function() dle.quantize(dle.ones(2, 32, {dtype = "int32"}), "q8_0") end,
      "quantize: input must be a float tensor, got int32 {2,32}")
    H.assert_error(function() dle.quantize("w", "q8_0") end, "quantize:")
    local q = dle.quantize(dle.randn(4, 64), "q4_0")
    H.assert_error(function() q:requires_grad_(true) end, "requires_grad_: a quantized q4_0 tensor cannot require grad")
    H.assert_error(function() dle.matmul(dle.randn(3, 63), q:t()) end,
      "matmul: shapes {3,63} float32 and {64,4} q4_0 (transposed) cannot be multiplied")
    H.assert_error(function() dle.matmul(q, dle.randn(64, 2)) end,
      "matmul: a quantized tensor can only be the right operand")
    H.assert_error(function() dle.matmul(dle.randn(2, 3, 4), dle.quantize(dle.randn(2, 3, 32), "q8_0")) end,
      "matmul: a quantized weight must be 2-D, got shape {2,3,32}")
    H.assert_error(function() dle.nn.functional.linear(dle.randn(2, 5), q) end,
      "linear: input has shape {2,5}, expected last dimension 64 (quantized q4_0 weight {4,64})")
    H.assert_error(function() q:t():t():t():t():size(3) end, "size: dim 3 out of range")
  end)
end)

describe("products with a quantized weight", function()
  local g = dle.Generator(5)
  -- rows not a multiple of 8, one and many activation rows, leading dims
  local CASES = {{1}, {3}, {17}, {2, 3}}

  it("x @ W^T (matmul(x, q:t()) and F.linear) is within 1e-3 of the dequantized reference", function()
    for _, kind in ipairs(KINDS) do
      local K = kind == "q4_k" and 512 or 96
      local q = dle.quantize(dle.randn(37, K, {generator = g}), kind)
      local Wd = q:dequantize()
      for _, lead in ipairs(CASES) do
        local shape = {table.unpack(lead)}
        shape[#shape + 1] = K
        local x = dle.randn(shape, {generator = g})
        local ref = x:matmul(Wd:t())
        local y = dle.matmul(x, q:t())
        assert.are.same(ref:shape(), y:shape())
        assert.is_true(H.max_diff(y, ref) < 1e-3, kind .. " " .. table.concat(shape, "x"))
        local b = dle.randn(37, {generator = g})
        assert.is_true(H.max_diff(dle.nn.functional.linear(x, q, b), ref + b) < 1e-3)
        assert.is_true(H.max_diff(x:matmul(q:t()), ref) < 1e-3)
      end
    end
  end)

  it("x @ W (matmul(x, q)) is within 1e-3 of the dequantized reference", function()
    for _, kind in ipairs(KINDS) do
      local K = kind == "q4_k" and 256 or 64
      local q = dle.quantize(dle.randn(37, K, {generator = g}), kind)
      for _, m in ipairs({1, 5, 19}) do
        local x = dle.randn(m, 37, {generator = g})
        assert.is_true(H.max_diff(dle.matmul(x, q), x:matmul(q:dequantize())) < 1e-3, kind .. " m=" .. m)
      end
    end
  end)

  it("takes non-contiguous, float64 and float16 activations and returns their dtype", function()
    local q = dle.quantize(dle.randn(9, 64, {generator = g}), "q8_0")
    local x = dle.randn(64, 4, {generator = g}):t()
    assert.is_true(H.max_diff(dle.matmul(x, q:t()), x:matmul(q:dequantize():t())) < 1e-3)
    local y = dle.matmul(x:double(), q:t())
    assert.are.equal("float64", y:dtype())
    assert.are.equal("float16", dle.matmul(x:half(), q:t()):dtype())
  end)

  it("gives the same results on 1 and 2 threads and on the scalar path (DLE_SIMD=0)", function()
    local dir = H.tmpdir()
    local q = dle.quantize(dle.randn(37, 512, {generator = g}), "q4_k")
    local x1, x3 = dle.randn(1, 512, {generator = g}), dle.randn(3, 512, {generator = g})
    local n = dle.get_num_threads()
    local ys = {}
    for _, t in ipairs({1, 2}) do
      dle.set_num_threads(t)
      local u = dle.randn(2, 37, {generator = dle.Generator(1)})
      ys[t] = {dle.matmul(x1, q:t()), dle.matmul(x3, q:t()), dle.matmul(u, q)}
    end
    dle.set_num_threads(n)
    for k = 1, 3 do assert.are.equal(0, H.max_diff(ys[1][k], ys[2][k])) end
    -- the portable kernels in a child process with the AVX2 ones turned off, against this
    -- process's fused AVX2 dot products, on the same seeded inputs, for every format
    local code = [[local dle = require("dle"); local out = {}
      for _, kind in ipairs({"q8_0", "q4_0", "q4_k"}) do
        local g = dle.Generator(42)
        local q = dle.quantize(dle.randn(37, 512, {generator = g}), kind)
        out[kind] = dle.matmul(dle.randn(1, 512, {generator = g}), q:t())
      end
      dle.save(arg[1], out)]]
    local f = assert(io.open(dir .. "/child.lua", "w"))
    f:write(code)
    f:close()
    local env = string.format("DLE_SIMD=0 LUA_PATH='%s' LUA_CPATH='%s'", package.path, package.cpath)
    assert.is_true(os.execute(env .. " lua5.4 " .. dir .. "/child.lua " .. dir .. "/out.dle"))
    local scalar = dle.load(dir .. "/out.dle")
    for _, kind in ipairs(KINDS) do
      local g2 = dle.Generator(42)
      local q2 = dle.quantize(dle.randn(37, 512, {generator = g2}), kind)
      local y = dle.matmul(dle.randn(1, 512, {generator = g2}), q2:t())
      assert.is_true(H.max_diff(scalar[kind], y) < 1e-3, kind)
    end
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("one-row products on the polling pool equal OpenMP's and 1 thread's, over many runs and thread counts", function()
    -- 1031 rows split unevenly over 2 and 3 parts; 3 then 2 leaves a worker with no part; the
    -- pool's handoff is exercised by runs back to back, with and without the polling
    local n = dle.get_num_threads()
    local old = dle.core._tuning("spin_pool_poll_us")
    for _, kind in ipairs(KINDS) do
      local q = dle.quantize(dle.randn(1031, 512, {generator = g}), kind)
      local x = dle.randn(1, 512, {generator = g})
      dle.set_num_threads(1)
      local want = dle.matmul(x, q:t())
      for _, setting in ipairs({{3, old}, {2, old}, {2, 0}, {3, 0}, {2, 1}}) do
        dle.set_num_threads(setting[1])
        dle.core._tuning("spin_pool_poll_us", setting[2])
        for _ = 1, 200 do
          local y = dle.matmul(x, q:t())
          assert.are.equal(0, H.max_diff(want, y), kind .. " on " .. setting[1] .. " threads")
        end
      end
      dle.core._tuning("spin_pool_poll_us", old)
    end
    dle.set_num_threads(n)
  end)

  it("lets the gradient reach x (g @ W from the blocks), as with the dequantized float weight", function()
    for _, kind in ipairs(KINDS) do
      local K = BLOCK[kind] * 2
      local q = dle.quantize(dle.randn(11, K, {generator = g}), kind)
      local Wd = q:dequantize()
      local x0 = dle.randn(2, 3, K, {generator = g})
      local x = x0:clone():requires_grad_(true)
      local r = x0:clone():requires_grad_(true)
      local c = dle.randn(2, 3, 11, {generator = g})
      dle.nn.functional.linear(x, q):mul(c):sum():backward()
      r:matmul(Wd:t()):mul(c):sum():backward()
      assert.is_true(H.max_diff(x.grad, r.grad) < 1e-3, kind)
      -- the other form: x @ W
      local u = dle.randn(4, 11, {generator = g}):requires_grad_(true)
      local v = u:detach():clone():requires_grad_(true)
      local c2 = dle.randn(4, K, {generator = g})
      dle.matmul(u, q):mul(c2):sum():backward()
      v:matmul(Wd):mul(c2):sum():backward()
      assert.is_true(H.max_diff(u.grad, v.grad) < 1e-3, kind)
    end
  end)

  it("trains a float LoRA adapter over a quantized base layer with the reference's gradients", function()
    local nn = dle.nn
    local base = nn.Linear(64, 16, {generator = g})
    local ref = nn.Linear(64, 16)
    dle.nn.utils.quantize_(base, "q8_0")
    dle.no_grad(function() ref.weight:copy_(base.weight:dequantize()); ref.bias:copy_(base.bias) end)
    local A0, B0 = dle.randn(4, 64, {generator = g}) * 0.1, dle.randn(16, 4, {generator = g}) * 0.1
    local grads = {}
    for k, layer in ipairs({base, ref}) do
      local A, B = A0:clone():requires_grad_(true), B0:clone():requires_grad_(true)
      local x = dle.randn(5, 64, {generator = dle.Generator(2)})
      local y = layer(x) + x:matmul(A:t()):matmul(B:t())
      y:mul(y):mean():backward()
      grads[k] = {A.grad, B.grad}
    end
    assert.is_true(H.max_diff(grads[1][1], grads[2][1]) < 1e-4)
    assert.is_true(H.max_diff(grads[1][2], grads[2][2]) < 1e-4)
  end)
end)

describe("nn.utils.quantize_", function()
  it("converts every Linear in place; their weights leave the parameters, biases stay float", function()
    local nn = dle.nn
    local net = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8))
    local x = dle.randn(3, 64)
    local ref = net(x)
    local n_before = #net:parameters()
    local _, n = dle.nn.utils.quantize_(net, "q8_0")
    assert.are.equal(2, n)
    assert.are.equal(n_before - 2, #net:parameters())
    for _, p in ipairs(net:parameters()) do assert.are.equal(1, p:dim()) end
    assert.is_true(dle.is_quantized(net[1].weight))
    assert.is_true(H.max_diff(net(x), ref) < 0.05)
    H.assert_error(function() dle.nn.utils.quantize_(nn.Sequential(nn.Linear(10, 4)), "q8_0") end,
      "quantize_: layer \"1\": q8_0 needs the last dimension to be a multiple of 32, got shape {4,10}")
    H.assert_error(function() dle.nn.utils.quantize_(net, "q8_0", {embeddings = true}) end, "quantize_: unknown option")
  end)

  local function tiny(arch)
    local g = dle.Generator(9)
    if arch == "gpt2" then
      return dle.models.gpt2.GPT2({vocab_size = 64, n_positions = 32, n_embd = 64, n_layer = 2, n_head = 4},
        {generator = g})
    end
    return dle.models.llama.Llama({vocab_size = 64, hidden_size = 64, intermediate_size = 128, num_hidden_layers = 2,
      num_attention_heads = 4, num_key_value_heads = 2, max_position_embeddings = 64}, {generator = g})
  end

  for _, arch in ipairs({"gpt2", "llama"}) do
    it(arch .. ": a quantized model generates as the float model holding the dequantized weights", function()
      for _, kind in ipairs({"q8_0", "q4_0"}) do
        local m, r = tiny(arch):eval(), tiny(arch):eval()
        dle.nn.utils.quantize_(m, kind)
        -- the reference: the same model with each quantized weight dequantized back into a float Linear
        local qm = {}
        for name, mod in m:named_modules() do qm[name] = mod end
        for name, mod in r:named_modules() do
          local w = qm[name] and rawget(qm[name], "weight")
          if dle.is_quantized(w) then dle.no_grad(function() mod.weight:copy_(w:dequantize()) end) end
        end
        local ids = dle.tensor({{3, 14, 15, 9}}, {dtype = "int64"})
        assert.is_true(H.max_diff(m(ids), r(ids)) < 1e-3)
        local a = m:generate(ids, {max_new_tokens = 8, temperature = 0})
        local b = r:generate(ids, {max_new_tokens = 8, temperature = 0})
        assert.are.same(b:totable(), a:totable())
      end
    end)
  end

  it("leaves a tied output head float unless asked (then the embedding stays float)", function()
    local m = tiny("gpt2")
    local _, n = dle.nn.utils.quantize_(m, "q8_0")
    assert.are.equal(8, n)   -- 4 Linears in each of 2 blocks
    assert.is_true(dle.is_tensor(m.lm_head.weight))
    local _, n2 = dle.nn.utils.quantize_(m, "q8_0", {tied = true})
    assert.are.equal(1, n2)
    assert.is_true(dle.is_quantized(m.lm_head.weight))
    assert.is_true(dle.is_tensor(m.transformer.wte.weight))
  end)
end)
