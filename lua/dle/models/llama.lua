--- dle.models.llama: the Llama architecture (also Qwen2, Mistral, SmolLM checkpoints): RMSNorm,
-- rotary position embeddings (Hugging Face's rotate-half convention, rope_theta), SwiGLU MLP,
-- grouped-query attention (num_key_value_heads <= num_attention_heads), optionally tied embeddings;
-- built from dle.nn parts with Hugging Face's parameter names (model.layers[i].self_attn.q_proj, ...).
--   local m = dle.models.llama.Llama{vocab_size = 32000, hidden_size = 64, intermediate_size = 128,
--     num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2}
--   local m = dle.models.llama.from_pretrained("dir")
local dle = require("dle")
local check = require("dle.check")
local Module = dle.nn.Module
local L = require("dle.models.layers")
local generation = require("dle.models.generation")
local rope = require("dle.models.rope")

local M = {}

local DEFAULTS = {vocab_size = 32000, hidden_size = 4096, intermediate_size = 11008, num_hidden_layers = 32,
  num_attention_heads = 32, rms_norm_eps = 1e-6, rope_theta = 10000, max_position_embeddings = 2048,
  tie_word_embeddings = false, attention_bias = false, mlp_bias = false, hidden_act = "silu"}

local function complete(cfg, fn)
  if type(cfg) ~= "table" then check.error(fn .. ": config must be a table, got " .. check.typename(cfg)) end
  local c = {}
  for k, v in pairs(DEFAULTS) do c[k] = v end
  for k, v in pairs(cfg) do c[k] = v end
  c.num_key_value_heads = c.num_key_value_heads or c.num_attention_heads
  if c.head_dim == nil then
    c.head_dim = math.tointeger(c.hidden_size / c.num_attention_heads) or c.hidden_size / c.num_attention_heads
  end
  -- Qwen2 checkpoints have biases on q, k, v without saying so in the config
  if cfg.attention_bias == nil and c.model_type == "qwen2" then c.qkv_bias = true else c.qkv_bias = c.attention_bias end
  for _, k in ipairs({"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
      "num_key_value_heads", "head_dim", "max_position_embeddings"}) do
    if math.type(c[k]) ~= "integer" or c[k] < 1 then
      check.error(string.format("%s: config.%s must be a positive integer, got %s", fn, k, tostring(c[k])))
    end
  end
  if c.num_attention_heads % c.num_key_value_heads ~= 0 then
    check.error(string.format("%s: config.num_attention_heads = %d is not a multiple of num_key_value_heads = %d",
      fn, c.num_attention_heads, c.num_key_value_heads))
  end
  if c.head_dim % 2 ~= 0 then
    check.error(fn .. ": config.head_dim must be even for rotary embeddings, got " .. c.head_dim)
  end
  if c.hidden_act ~= "silu" then
    check.error(fn .. ": config.hidden_act " .. tostring(c.hidden_act) .. " is not supported (silu)")
  end
  c._rope = rope.scaling(c, fn)
  return c
end

-- rotate_half(x) = cat(-x2, x1) with x1, x2 the two halves of the last dimension.
local function rotate_half(x)
  local h = x:size(-1) // 2
  return dle.cat({-x:narrow(-1, h + 1, h), x:narrow(-1, 1, h)}, -1)
end

local Layer = Module:extend("LlamaDecoderLayer")

function Layer:init(c, src, prefix, g)
  local d, hd, H, Hkv = c.hidden_size, c.head_dim, c.num_attention_heads, c.num_key_value_heads
  self.n_head, self.n_kv_head, self.head_dim = H, Hkv, hd
  self.input_layernorm = L.norm(src, prefix .. "input_layernorm", d, c.rms_norm_eps, true)
  local a = Module()
  local qo = {bias = c.qkv_bias, generator = g}
  a.q_proj = L.linear(src, prefix .. "self_attn.q_proj", d, H * hd, qo)
  a.k_proj = L.linear(src, prefix .. "self_attn.k_proj", d, Hkv * hd, qo)
  a.v_proj = L.linear(src, prefix .. "self_attn.v_proj", d, Hkv * hd, qo)
  a.o_proj = L.linear(src, prefix .. "self_attn.o_proj", H * hd, d, {bias = c.attention_bias, generator = g})
  self.self_attn = a
  self.post_attention_layernorm = L.norm(src, prefix .. "post_attention_layernorm", d, c.rms_norm_eps, true)
  local mo = {bias = c.mlp_bias, generator = g}
  local mlp = Module()
  mlp.gate_proj = L.linear(src, prefix .. "mlp.gate_proj", d, c.intermediate_size, mo)
  mlp.up_proj = L.linear(src, prefix .. "mlp.up_proj", d, c.intermediate_size, mo)
  mlp.down_proj = L.linear(src, prefix .. "mlp.down_proj", c.intermediate_size, d, mo)
  self.mlp = mlp
end

-- x {B, T, d}; cos, sin {T, head_dim} for this step's positions.
function Layer:forward(x, cos, sin, cache, layer)
  local B, T = x:size(1), x:size(2)
  local a, hd = self.self_attn, self.head_dim
  local h = self.input_layernorm(x)
  local q = a.q_proj(h):view(B, T, self.n_head, hd):transpose(2, 3)
  local k = a.k_proj(h):view(B, T, self.n_kv_head, hd):transpose(2, 3)
  local v = a.v_proj(h):view(B, T, self.n_kv_head, hd):transpose(2, 3)
  q = q * cos + rotate_half(q) * sin
  k = k * cos + rotate_half(k) * sin
  local o = L.attend(q, k, v, cache, layer)
  x = x + a.o_proj(o:transpose(2, 3):reshape(B, T, self.n_head * hd))
  local n = self.post_attention_layernorm(x)
  local mlp = self.mlp
  return x + mlp.down_proj(mlp.gate_proj(n):silu() * mlp.up_proj(n))
end

local Llama = Module:extend("Llama")
M.Llama = Llama

--- Llama(config, opts): a Llama-architecture language model with Hugging Face's parameter names.
-- @param config table as Hugging Face's LlamaConfig: vocab_size, hidden_size, intermediate_size,
--   num_hidden_layers, num_attention_heads, num_key_value_heads (default: num_attention_heads),
--   head_dim (default hidden_size / num_attention_heads), rms_norm_eps (1e-6), rope_theta (10000),
--   max_position_embeddings (2048), tie_word_embeddings (false), attention_bias, mlp_bias,
--   rope_scaling (nil, or {rope_type = "linear" | "dynamic" | "llama3", factor, ...}: dle.models.rope)
-- @param opts optional {generator = g (initialisation)}; loaders pass a weight source as opts.source
function Llama:init(config, opts)
  opts = check.options(opts, "Llama", {"generator", "source"})
  local c = complete(config, "Llama")
  local src, g = opts.source, opts.generator
  self.config = c
  local m = Module()
  m.embed_tokens = L.embedding(src, "model.embed_tokens", c.vocab_size, c.hidden_size, {generator = g, std = 0.02})
  m.layers = L.list(c.num_hidden_layers, function(i) return Layer(c, src, "model.layers." .. i .. ".", g) end)
  m.norm = L.norm(src, "model.norm", c.hidden_size, c.rms_norm_eps, true)
  self.model = m
  if c.tie_word_embeddings then
    self.lm_head = L.tied_head(m.embed_tokens)
  else
    self.lm_head = L.linear(src, "lm_head", c.hidden_size, c.vocab_size, {bias = false, generator = g})
  end
end

-- cos and sin {T, head_dim} for positions pos .. pos + T - 1: tables grown by doubling and kept,
-- except under dynamic scaling past max_position_embeddings, where the frequencies depend on the
-- length (pos + T), as in Hugging Face's dynamic rotary embedding.
function Llama:_rope(pos, T)
  local c, n = self.config, pos + T
  if rope.depends_on_length(c) and n > c.max_position_embeddings then
    local cos, sin = rope.tables(rope.inv_freq(c, n), n)
    return cos:narrow(1, pos + 1, T), sin:narrow(1, pos + 1, T)
  end
  if not self._cos or self._cos:size(1) < n then
    local len = math.max(n, 2 * (self._cos and self._cos:size(1) or 32))
    if rope.depends_on_length(c) then len = math.min(len, c.max_position_embeddings) end
    self._cos, self._sin = rope.tables(rope.inv_freq(c, len), len)
  end
  return self._cos:narrow(1, pos + 1, T), self._sin:narrow(1, pos + 1, T)
end

--- forward(ids, opts): logits {B, T, vocab} for int64 token values ids {B, T} (or {T}).
-- @param opts optional {cache = a KV cache (generate makes it), last_only = true: logits of the
--   last position only, {B, 1, vocab}}
function Llama:forward(ids, opts)
  local c = self.config
  local cache, T, pos
  ids, cache, T, pos = L.step("Llama", ids, opts, c.vocab_size, nil)
  local cos, sin = self:_rope(pos, T)
  local x = self.model.embed_tokens(ids + 1)
  for i, layer in ipairs(self.model.layers) do x = layer(x, cos, sin, cache, i) end
  if cache then cache.pos = pos + T end
  if opts and opts.last_only then x = x:narrow(2, T, 1) end
  return self.lm_head(self.model.norm(x))
end

--- A KV cache for B sequences of up to max_len positions (what generate allocates).
function Llama:new_cache(B, max_len)
  local c = self.config
  return L.kv_cache(c.num_hidden_layers, B, c.num_key_value_heads, max_len, c.head_dim)
end

--- The longest sequence the model takes: max_position_embeddings, times factor under dynamic
-- rope scaling (which exists to run past it).
function Llama:max_positions()
  local c = self.config
  return rope.depends_on_length(c) and math.floor(c.max_position_embeddings * c._rope.factor)
    or c.max_position_embeddings
end

Llama.generate = generation.generate

--- Writes the model as a GGUF v3 file with llama.cpp's tensor names and metadata (quantized
-- weights as their blocks) that dle.models.from_gguf reads back.
-- @param path string
function Llama:save_gguf(path)
  require("dle.models.gguf").save("Llama:save_gguf", self, path, "llama")
end

--- Writes the model as a Hugging Face checkpoint directory (config.json, model.safetensors) that
-- from_pretrained reads back.
-- @param dir directory (created when missing)
function Llama:save_pretrained(dir)
  require("dle.models.hf").save("Llama:save_pretrained", self, dir, "llama")
end

--- Reads a Hugging Face Llama-architecture checkpoint directory (config.json + model.safetensors or
-- the sharded model.safetensors.index.json), memory-mapped: float32 weights used in place
-- (copy-on-write), other float dtypes converted once.
-- @param dir directory
-- @param opts optional {}
-- @return Llama model (in eval mode)
function M.from_pretrained(dir, opts)
  local hf = require("dle.models.hf")
  return hf.build("dle.models.llama.from_pretrained", dir, opts, function(config, src)
    return Llama(config, {source = src})
  end)
end

return M
