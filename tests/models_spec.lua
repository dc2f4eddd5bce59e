--- dle.models: GPT-2 and Llama against PyTorch twins (tests/llm_twins.py writes Hugging Face
-- checkpoints with random weights: equal logits, greedy continuations and gradients; skipped without
-- /usr/bin/python3 + torch), the KV cache against full recomputation, sampling options, the llm.c
-- checkpoint format, memory-mapped loading and the errors of bad checkpoints and bad input.
local dle = require("dle")
local H = require("helpers")

local DIR = H.tmpdir()
teardown(function() os.execute("rm -rf '" .. DIR .. "'") end)

-- Python runs without the ASan preload (under scripts/test --asan, LD_PRELOAD would reach it)
local PY = "env -u LD_PRELOAD /usr/bin/python3"
local HAVE_TORCH = os.execute(PY .. " -c 'import torch' 2>/dev/null") == true
local function torch_it(name, fn)
  if HAVE_TORCH then it(name, fn) else pending(name .. " (needs /usr/bin/python3 with torch)") end
end

-- The message of the error fn(...) must raise.
local function err_of(fn, ...)
  local args = table.pack(...)
  return H.assert_error(function() return fn(table.unpack(args, 1, args.n)) end)
end

local function rel_err(a, b) return H.max_diff(a, b) / b:abs():max():item() end

-- A checkpoint directory written by the PyTorch twin script.
local function twin(arch, flags)
  local dir = DIR .. "/" .. arch .. flags:gsub("[ -]", "_")
  assert(os.execute("mkdir -p '" .. dir .. "'"))
  local p = io.popen(PY .. " tests/llm_twins.py " .. arch .. " '" .. dir .. "' " .. flags .. " 2>&1")
  local out = p:read("a")
  p:close()
  assert(out:match("ok"), out)
  return dir
end

local SMALL_GPT2 = {vocab_size = 50, n_positions = 32, n_embd = 16, n_layer = 2, n_head = 2}
local SMALL_LLAMA = {vocab_size = 50, hidden_size = 16, intermediate_size = 24, num_hidden_layers = 2,
  num_attention_heads = 4, num_key_value_heads = 2, max_position_embeddings = 64, rope_theta = 100}

-- The gradient of sum(logits * sin(arange)) for every parameter, by dle's names.
local function grads_of(m, ids)
  m:train()
  m:zero_grad()
  local y = m(ids)
  local w = dle.arange(0, y:numel()):sin():view(y:shape())
  ;(y * w):sum():backward()
  local out = {}
  for name, p in m:named_parameters() do out[name] = p.grad end
  m:eval()
  return out
end

-- dle's name of a Hugging Face parameter name (layer lists are 1-based in dle).
local function dle_name(hf) return (hf:gsub("%.(%d+)%.", function(i) return "." .. (tonumber(i) + 1) .. "." end)) end

describe("dle.models against PyTorch twins", function()
  local cases = {
    {"gpt2", "", "GPT-2 (Conv1D weights, tied head)"},
    {"llama", "--gqa", "Llama with grouped-query attention (4 heads, 2 key/value heads)"},
    {"llama", "--tied --shards --half", "Llama, tied embeddings, sharded index, float16/bfloat16 tensors"},
  }
  for _, c in ipairs(cases) do
    local arch, flags, what = c[1], c[2], c[3]
    torch_it(what .. ": equal logits (1e-4 relative), equal greedy continuation and gradients", function()
      local dir = twin(arch, flags)
      local m = dle.models[arch].from_pretrained(dir)
      assert.are.same({}, m.unused_weights)
      local ref = dle.load_safetensors(dir .. "/reference.safetensors")
      local y = m(ref.ids)
      assert.are.same(ref.logits:shape(), y:shape())
      assert.is_true(rel_err(y, ref.logits) < 1e-4, "logits differ by " .. rel_err(y, ref.logits))
      local out = m:generate(ref.ids:narrow(1, 1, 1), {max_new_tokens = 10, temperature = 0})
      assert.are.same(ref.greedy:totable(), out:totable())
      local g = grads_of(m, ref.ids)
      local n = 0
      for k, want in pairs(ref) do
        local hf = k:match("^grad%.(.*)")
        if hf then
          local got = g[dle_name(hf)]
          assert.is_not_nil(got, "no gradient for " .. hf)
          if got:dim() == 2 and got:size(1) ~= want:size(1) then want = want:t() end   -- Conv1D layout
          assert.is_true(rel_err(got, want) < 1e-4, hf .. " gradient differs by " .. rel_err(got, want))
          n = n + 1
        end
      end
      assert.is_true(n >= 3)
    end)
  end

  torch_it("float32 weights are memory-mapped: loading allocates far less than the weights' bytes", function()
    local dir = twin("llama", "--gqa")
    dle.empty_cache()
    local before = dle.memory_stats().allocated
    local m = dle.models.llama.from_pretrained(dir)
    local bytes = 0
    for _, p in ipairs(m:parameters()) do bytes = bytes + 4 * p:numel() end
    local grown = dle.memory_stats().allocated - before
    assert.is_true(grown < bytes / 4, "loading allocated " .. grown .. " bytes for " .. bytes .. " bytes of weights")
  end)
end)

describe("dle.models: generation", function()
  for _, c in ipairs({{"gpt2", "GPT2", SMALL_GPT2}, {"llama", "Llama", SMALL_LLAMA}}) do
    local arch, cls, cfg = c[1], c[2], c[3]
    local function model() return dle.models[arch][cls](cfg, {generator = dle.Generator(3)}) end

    it(cls .. ": greedy decoding with the KV cache equals the argmax of full recomputation", function()
      local m = model()
      local prompt = dle.tensor({{3, 1, 4, 1, 5}, {9, 2, 6, 5, 3}}, {dtype = "int64"})
      local out = m:generate(prompt, {max_new_tokens = 12, temperature = 0})
      assert.are.same({2, 17}, out:shape())
      assert.are.same(prompt:totable(), out:narrow(2, 1, 5):totable())
      local full = dle.no_grad(function() return m(out:narrow(2, 1, 16)) end):argmax(3) - 1
      assert.are.same(full:narrow(2, 5, 12):totable(), out:narrow(2, 6, 12):totable())
    end)

    it(cls .. ": a multi-token step over a filled cache (bottom-right causal mask) equals recomputation", function()
      local m = model()
      local ids = dle.tensor({{7, 8, 9, 10, 11, 12, 13}}, {dtype = "int64"})
      local cache = m:new_cache(1, 7)
      local first = dle.no_grad(function() return m(ids:narrow(2, 1, 3), {cache = cache}) end)
      local rest = dle.no_grad(function() return m(ids:narrow(2, 4, 4), {cache = cache}) end)
      local full = dle.no_grad(function() return m(ids) end)
      assert.is_true(H.max_diff(dle.cat({first, rest}, 2), full) < 1e-5)
    end)

    it(cls .. ": seeded sampling repeats; top_k = 1 is greedy; top_p keeps only likely tokens", function()
      local m = model()
      local prompt = dle.tensor({1, 2, 3}, {dtype = "int64"})
      local a = m:generate(prompt, {max_new_tokens = 8, temperature = 1.5, generator = dle.Generator(11)})
      local b = m:generate(prompt, {max_new_tokens = 8, temperature = 1.5, generator = dle.Generator(11)})
      assert.are.same(a:totable(), b:totable())
      local greedy = m:generate(prompt, {max_new_tokens = 8, temperature = 0})
      local k1 = m:generate(prompt, {max_new_tokens = 8, temperature = 2, top_k = 1, generator = dle.Generator(5)})
      assert.are.same(greedy:totable(), k1:totable())
      local p0 = m:generate(prompt, {max_new_tokens = 8, temperature = 2, top_p = 1e-9, generator = dle.Generator(5)})
      assert.are.same(greedy:totable(), p0:totable())
    end)

    it(cls .. ": generation ends when every row has produced a stop id", function()
      local m = model()
      local prompt = dle.tensor({{1, 2, 3}}, {dtype = "int64"})
      local greedy = m:generate(prompt, {max_new_tokens = 6, temperature = 0})
      local stop = greedy[1][5]   -- the second generated token
      local out, stats = m:generate(prompt, {max_new_tokens = 6, temperature = 0, stop = {stop}})
      local first = 4
      while greedy[1][first] ~= stop do first = first + 1 end
      assert.are.same(first, out:size(2))
      assert.are.same(first - 3, stats.new_tokens)
    end)

    it(cls .. ": bad ids and options are errors naming the function", function()
      local m = model()
      assert.matches("ids must be int64", err_of(function() return m(dle.tensor({1, 2})) end))
      local big = dle.tensor({1, 50}, {dtype = "int64"})
      assert.matches("token ids must be in %[0, 50%)", err_of(function() return m(big) end))
      local p = dle.tensor({1}, {dtype = "int64"})
      assert.matches("generate: top_p", err_of(function() return m:generate(p, {top_p = 2}) end))
      assert.matches("generate: temperature", err_of(function() return m:generate(p, {temperature = -1}) end))
      assert.matches("generate: unknown option", err_of(function() return m:generate(p, {max_tokens = 3}) end))
      assert.matches("exceed the model's", err_of(function() return m:generate(p, {max_new_tokens = 100}) end))
    end)
  end

  it("KV-cache bytes per token: 2 (keys and values) x layers x key/value heads x head size x 4 bytes", function()
    local m = dle.models.llama.Llama(SMALL_LLAMA)
    local _, stats = m:generate(dle.tensor({1}, {dtype = "int64"}), {max_new_tokens = 2, temperature = 0})
    assert.are.equal(2 * 2 * 2 * 4 * 4, stats.kv_cache_bytes_per_token)
  end)

  it("a Llama trains: loss falls over a few AdamW steps on a fixed batch", function()
    local m = dle.models.llama.Llama(SMALL_LLAMA, {generator = dle.Generator(1)})
    local opt = dle.optim.AdamW(m:parameters(), {lr = 1e-2})
    local ids = dle.randint(0, 50, {2, 9}, {generator = dle.Generator(2)}):long()
    local x, y = ids:narrow(2, 1, 8), ids:narrow(2, 2, 8)
    local first, last
    for _ = 1, 10 do
      opt:zero_grad()
      local loss = dle.nn.functional.cross_entropy(m(x):reshape(16, 50), (y + 1):reshape(16))
      loss:backward()
      opt:step()
      first = first or loss:item()
      last = loss:item()
    end
    assert.is_true(last < first * 0.8, first .. " -> " .. last)
  end)
end)

describe("dle.nn.RMSNorm", function()
  it("is x / sqrt(mean(x^2) + eps) * weight, with PyTorch's default eps (float32 machine epsilon)", function()
    local n = dle.nn.RMSNorm(4)
    n.weight = dle.tensor({1, 2, 3, 4}):requires_grad_(true)
    local x = dle.tensor({{1, -2, 3, -4}, {0.5, 0.5, 0.5, 0.5}})
    local y = n(x):totable()
    local xs = x:totable()
    for r = 1, 2 do
      local ms = 0
      for j = 1, 4 do ms = ms + xs[r][j] ^ 2 / 4 end
      for j = 1, 4 do assert.is_true(math.abs(y[r][j] - xs[r][j] / math.sqrt(ms + 2 ^ -23) * j) < 1e-5) end
    end
    assert.matches("RMSNorm: input has shape {2,3}", err_of(function() return n(dle.zeros(2, 3)) end))
  end)

  it("passes gradcheck (input and weight)", function()
    local n = dle.nn.RMSNorm({2, 3}, {eps = 1e-3, dtype = "float64"})
    local x = dle.randn(2, 2, 3, {dtype = "float64", requires_grad = true})
    local ok, err = dle.gradcheck(function(a, w) n.weight = w; return n(a) end,
      {x, dle.randn(2, 3, {dtype = "float64", requires_grad = true})})
    assert.is_true(ok, tostring(err))
  end)
end)

describe("dle.models.gpt2.from_llmc", function()
  -- llm.c's layout written from a dle GPT2 model: header, then each kind of tensor for all layers.
  local function write_llmc(path, m, version, pad)
    local c = m.config
    local V, C, Lyr = c.vocab_size, c.n_embd, c.n_layer
    local hdr = {20240326, version, c.n_positions, V, Lyr, c.n_head, C, V + pad}
    local parts = {string.pack("<" .. string.rep("i4", 8), table.unpack(hdr)) .. string.rep("\0", 1024 - 32)}
    local dt = version == 3 and "float32" or "bfloat16"
    local function put(t)
      -- the tensor's raw bytes: the data section of a one-tensor safetensors file
      local st = os.tmpname()
      dle.save_safetensors(st, {x = t:detach():contiguous():to(dt)})
      local s = H.read_file(st)
      os.remove(st)
      local n = string.unpack("<i8", s)
      parts[#parts + 1] = s:sub(9 + n)
    end
    local t, h = m.transformer, m.transformer.h
    put(dle.cat({t.wte.weight, dle.zeros(pad, C)}, 1))
    put(t.wpe.weight)
    local function each(f) for i = 1, Lyr do put(f(h[i])) end end
    each(function(b) return b.ln_1.weight end); each(function(b) return b.ln_1.bias end)
    each(function(b) return b.attn.c_attn.weight end); each(function(b) return b.attn.c_attn.bias end)
    each(function(b) return b.attn.c_proj.weight end); each(function(b) return b.attn.c_proj.bias end)
    each(function(b) return b.ln_2.weight end); each(function(b) return b.ln_2.bias end)
    each(function(b) return b.mlp.c_fc.weight end); each(function(b) return b.mlp.c_fc.bias end)
    each(function(b) return b.mlp.c_proj.weight end); each(function(b) return b.mlp.c_proj.bias end)
    put(t.ln_f.weight); put(t.ln_f.bias)
    H.write_file(path, table.concat(parts))
  end

  local m = dle.models.gpt2.GPT2(SMALL_GPT2, {generator = dle.Generator(4)})
  local ids = dle.tensor({{1, 4, 9, 16, 25}}, {dtype = "int64"})

  it("reads version 3 (float32, padded vocab) into a model with equal logits", function()
    local path = DIR .. "/m.bin"
    write_llmc(path, m, 3, 14)
    local l = dle.models.gpt2.from_llmc(path)
    assert.are.equal(50, l.config.vocab_size)
    assert.is_true(H.max_diff(l(ids), m(ids)) < 1e-5)
  end)

  it("reads version 5 (bfloat16) as float32 of the rounded weights", function()
    local path = DIR .. "/m5.bin"
    write_llmc(path, m, 5, 0)
    local l = dle.models.gpt2.from_llmc(path)
    assert.are.equal("float32", l.transformer.wte.weight:dtype())
    assert.is_true(H.max_diff(l.transformer.wte.weight, m.transformer.wte.weight:bfloat16():float()) == 0)
  end)

  it("bad files (missing, truncated, wrong magic or version, wrong sizes) are errors naming the file", function()
    local path = DIR .. "/bad.bin"
    write_llmc(path, m, 3, 0)
    local good = H.read_file(path)
    local load = dle.models.gpt2.from_llmc
    assert.matches("from_llmc: cannot open", err_of(load, DIR .. "/none.bin"))
    H.write_file(path, good:sub(1, 100))
    assert.matches("from_llmc: .*bad.bin: truncated header", err_of(load, path))
    H.write_file(path, string.pack("<i4", 1234) .. good:sub(5))
    assert.matches("bad magic 1234", err_of(load, path))
    H.write_file(path, good:sub(1, 4) .. string.pack("<i4", 4) .. good:sub(9))
    assert.matches("unsupported version 4", err_of(load, path))
    H.write_file(path, good:sub(1, #good - 4))
    assert.matches("bad.bin: the header's model .* needs %d+ bytes, the file has", err_of(load, path))
    H.write_file(path, good:sub(1, 24) .. string.pack("<i4", 18) .. good:sub(29))
    assert.matches("needs %d+ bytes", err_of(load, path))
  end)
end)

describe("dle.models from_pretrained: bad checkpoints", function()
  local function checkpoint(name, config, tensors)
    local dir = DIR .. "/" .. name
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    H.write_file(dir .. "/config.json", config)
    if tensors then dle.save_safetensors(dir .. "/model.safetensors", tensors) end
    return dir
  end
  local cfg = '{"vocab_size": 10, "n_positions": 8, "n_embd": 4, "n_layer": 1, "n_head": 2}'

  it("a missing directory, config or weight file is an error naming the path", function()
    local load = dle.models.gpt2.from_pretrained
    assert.matches("from_pretrained: cannot open .*config.json", err_of(load, DIR .. "/nothing"))
    local dir = checkpoint("noweights", cfg)
    assert.matches("noweights has neither model.safetensors nor model.safetensors.index.json", err_of(load, dir))
    dir = checkpoint("badjson", "{oops")
    assert.matches("badjson/config.json: .*invalid JSON", err_of(load, dir))
  end)

  it("a missing tensor or one whose shape disagrees with the config is an error naming both", function()
    local m = dle.models.gpt2.GPT2({vocab_size = 10, n_positions = 8, n_embd = 4, n_layer = 1, n_head = 2})
    local sd = {}
    for name, p in m:named_parameters() do
      local hf = name:gsub("%.(%d+)%.", function(i) return "." .. (tonumber(i) - 1) .. "." end)
      if hf:match("c_attn%.weight$") or hf:match("c_proj%.weight$") or hf:match("c_fc%.weight$") then
        sd[hf] = p:t():contiguous()
      else
        sd[hf] = p:detach()
      end
    end
    local full = {}
    for k, v in pairs(sd) do full[k] = v end
    assert.is_not_nil(dle.models.gpt2.from_pretrained(checkpoint("ok", cfg, full)))
    sd["transformer.h.0.mlp.c_fc.bias"] = nil
    assert.matches('missing tensor "transformer.h.0.mlp.c_fc.bias"',
      err_of(dle.models.gpt2.from_pretrained, checkpoint("missing", cfg, sd)))
    full["transformer.wpe.weight"] = dle.zeros(9, 4)
    assert.matches('shape.*model.safetensors: tensor "transformer.wpe.weight" has shape {9,4}, the config needs {8,4}',
      err_of(dle.models.gpt2.from_pretrained, checkpoint("shape", cfg, full)))
  end)

  it("bad configs are errors naming the field", function()
    assert.matches("config.n_head", err_of(dle.models.gpt2.GPT2, {n_head = 0}))
    assert.matches("not divisible by n_head", err_of(dle.models.gpt2.GPT2, {n_embd = 10, n_head = 3}))
    assert.matches("not a multiple of num_key_value_heads",
      err_of(dle.models.llama.Llama, {hidden_size = 16, num_attention_heads = 4, num_key_value_heads = 3}))
    assert.matches("rope_scaling needs rope_type",
      err_of(dle.models.llama.Llama, {hidden_size = 16, num_attention_heads = 4, rope_scaling = {factor = 8}}))
    assert.matches('rope_scaling type "yarn" is not supported',
      err_of(dle.models.llama.Llama,
             {hidden_size = 16, num_attention_heads = 4, rope_scaling = {type = "yarn", factor = 8}}))
  end)
end)
