--- bench/entries_quant.lua — weight-only quantization (issue 20 point 6): greedy decoding with a
-- KV cache of a Llama-shaped model of about 350M parameters (width 1024, 24 layers, 16 heads,
-- SwiGLU 2816, vocab 32000, untied head; random weights made here), too big for the caches in
-- float32, 1 prompt token then 8 new tokens per iteration, in tokens/s: Q8_0 and Q4_0 weights
-- (every Linear, head included, quantized by dle.nn.utils.quantize_) against dle's own float32.
-- Targets: Q8_0 >= 1.7x and Q4_0 >= 2.5x float32. Below each, the achieved GB/s: the bytes of the
-- Linear weights read per token (the embedding's one row is left out) times tokens/s.
local CONFIG = {vocab_size = 32000, hidden_size = 1024, intermediate_size = 2816, num_hidden_layers = 24,
  num_attention_heads = 16, num_key_value_heads = 16, max_position_embeddings = 256}
local NEW = 8

return function(ctx)
  local dle = ctx.dle
  local models = {}   -- built once per kind, kept across thread settings (the float32 one is 1.4 GB)

  local function model(kind)
    if not models[kind] then
      local m = dle.models.llama.Llama(CONFIG, {generator = dle.Generator(0)}):eval()
      if kind ~= "float32" then dle.nn.utils.quantize_(m, kind) end
      collectgarbage()
      collectgarbage()
      models[kind] = m
    end
    return models[kind]
  end

  -- bytes of the Linear weights one token reads: q, k, v, o, gate, up, down in each layer and the
  -- head, at 4 bytes a value (float32) or a block's bytes per 32 values
  local c = CONFIG
  local values = c.num_hidden_layers * (4 * c.hidden_size * c.hidden_size + 3 * c.hidden_size * c.intermediate_size)
    + c.vocab_size * c.hidden_size
  local BYTES = {float32 = 4, q8_0 = 34 / 32, q4_0 = 18 / 32}
  local function weight_bytes(kind) return values * BYTES[kind] end

  local function decode(kind)
    local m = model(kind)
    local prompt = dle.tensor({{1}}, {dtype = "int64"})
    return function() return m:generate(prompt, {max_new_tokens = NEW, temperature = 0}) end
  end

  local function entry(kind, min)
    return {
      key = "decode_350m_" .. kind,
      name = string.format("Llama 350M-shaped greedy decoding, %s weights, 1+%d tokens", kind, NEW),
      unit = "tokens/s", work = NEW, target = {ref = "dle float32", min = min},
      bytes_per_work = weight_bytes(kind), bytes_label = string.format("%.0f MB of weights per token",
        weight_bytes(kind) / 1e6),
      dle = function() return decode(kind) end,
      refs = {{kind = "lua", label = "dle float32", fn = function() return decode("float32") end,
        bytes_per_work = weight_bytes("float32")}},
    }
  end

  return {entry("q8_0", 1.7), entry("q4_0", 2.5)}
end
