--- dle.models.gpt2: GPT-2 (pre-LayerNorm blocks, learned positions, tanh-GELU MLP, tied head) from
-- dle.nn parts, with Hugging Face's module and parameter names:
--   local m = dle.models.gpt2.GPT2{vocab_size = 50257, n_positions = 1024, n_embd = 768, n_layer = 12, n_head = 12}
--   local m = dle.models.gpt2.from_pretrained("dir")      -- config.json + model.safetensors
--   local m = dle.models.gpt2.from_llmc("gpt2_124M.bin")  -- llm.c's checkpoint
--   local logits = m(ids)                                 -- ids int64 {B, T} of token values
local dle = require("dle")
local check = require("dle.check")
local Module = dle.nn.Module
local L = require("dle.models.layers")
local generation = require("dle.models.generation")

local M = {}

local DEFAULTS = {vocab_size = 50257, n_positions = 1024, n_embd = 768, n_layer = 12, n_head = 12,
  layer_norm_epsilon = 1e-5, tie_word_embeddings = true, activation_function = "gelu_new"}

-- GPT-2's "gelu_new": the tanh approximation (dle.gelu is the exact erf form).
local C0 = math.sqrt(2 / math.pi)
local function gelu_tanh(x)
  return x * 0.5 * (((x * x * x) * 0.044715 + x) * C0):tanh() + x * 0.5
end
local ACTIVATIONS = {gelu_new = gelu_tanh, gelu_pytorch_tanh = gelu_tanh, gelu = function(x) return x:gelu() end,
  relu = function(x) return x:relu() end}

--- The config with defaults filled in and checked (fn names the caller in errors).
local function complete(cfg, fn)
  if type(cfg) ~= "table" then check.error(fn .. ": config must be a table, got " .. check.typename(cfg)) end
  local c = {}
  for k, v in pairs(DEFAULTS) do c[k] = v end
  for k, v in pairs(cfg) do c[k] = v end
  for _, k in ipairs({"vocab_size", "n_positions", "n_embd", "n_layer", "n_head"}) do
    if math.type(c[k]) ~= "integer" or c[k] < 1 then
      check.error(string.format("%s: config.%s must be a positive integer, got %s", fn, k, tostring(c[k])))
    end
  end
  if c.n_embd % c.n_head ~= 0 then
    check.error(string.format("%s: config.n_embd = %d is not divisible by n_head = %d", fn, c.n_embd, c.n_head))
  end
  if not ACTIVATIONS[c.activation_function] then
    check.error(fn .. ": config.activation_function " .. tostring(c.activation_function) .. " is not supported")
  end
  if c.n_inner ~= nil and (math.type(c.n_inner) ~= "integer" or c.n_inner < 1) then
    check.error(fn .. ": config.n_inner must be a positive integer or absent, got " .. tostring(c.n_inner))
  end
  return c
end

local Block = Module:extend("GPT2Block")

function Block:init(c, src, prefix, g, conv1d)
  local d, hidden = c.n_embd, c.n_inner or 4 * c.n_embd
  self.n_head, self.head_dim = c.n_head, d // c.n_head
  self.act = ACTIVATIONS[c.activation_function]
  self.ln_1 = L.norm(src, prefix .. "ln_1", d, c.layer_norm_epsilon)
  self.attn = Module()
  self.attn.c_attn = L.linear(src, prefix .. "attn.c_attn", d, 3 * d, {bias = true, transposed = conv1d, generator = g})
  self.attn.c_proj = L.linear(src, prefix .. "attn.c_proj", d, d, {bias = true, transposed = conv1d, generator = g})
  self.ln_2 = L.norm(src, prefix .. "ln_2", d, c.layer_norm_epsilon)
  self.mlp = Module()
  self.mlp.c_fc = L.linear(src, prefix .. "mlp.c_fc", d, hidden, {bias = true, transposed = conv1d, generator = g})
  self.mlp.c_proj = L.linear(src, prefix .. "mlp.c_proj", hidden, d, {bias = true, transposed = conv1d, generator = g})
end

function Block:forward(x, cache, layer)
  local B, T, d = x:size(1), x:size(2), x:size(3)
  local H, Dh = self.n_head, self.head_dim
  local qkv = self.attn.c_attn(self.ln_1(x)):view(B, T, 3, H, Dh)
  local o
  if cache then
    local q = qkv:select(3, 1):transpose(2, 3)
    o = L.attend(q, qkv:select(3, 2):transpose(2, 3), qkv:select(3, 3):transpose(2, 3), cache, layer)
  else
    -- the packed form: one gradient tensor for q, k and v
    o = dle.sdpa(qkv:permute(3, 1, 4, 2, 5), {causal = true})
  end
  x = x + self.attn.c_proj(o:transpose(2, 3):reshape(B, T, d))
  return x + self.mlp.c_proj(self.act(self.mlp.c_fc(self.ln_2(x))))
end

local GPT2 = Module:extend("GPT2")
M.GPT2 = GPT2

--- GPT2(config, opts): a GPT-2 language model with Hugging Face's parameter names
-- (transformer.wte, transformer.h[i].attn.c_attn, ..., lm_head tied to wte).
-- @param config table: vocab_size, n_positions, n_embd, n_layer, n_head, layer_norm_epsilon,
--   activation_function ("gelu_new"), n_inner (default 4 n_embd), tie_word_embeddings (true)
-- @param opts optional {generator = g (initialisation)}; loaders pass a weight source as opts.source
--   (weights in Hugging Face's Conv1D layout {in, out}, or {out, in} with linear_layout = true)
function GPT2:init(config, opts)
  opts = check.options(opts, "GPT2", {"generator", "source", "linear_layout"})
  local c = complete(config, "GPT2")
  local src, g = opts.source, opts.generator
  self.config = c
  local t = Module()
  t.wte = L.embedding(src, "transformer.wte", c.vocab_size, c.n_embd, {generator = g, std = 0.02})
  t.wpe = L.embedding(src, "transformer.wpe", c.n_positions, c.n_embd, {generator = g, std = 0.01})
  t.h = L.list(c.n_layer, function(i) return Block(c, src, "transformer.h." .. i .. ".", g, not opts.linear_layout) end)
  t.ln_f = L.norm(src, "transformer.ln_f", c.n_embd, c.layer_norm_epsilon)
  self.transformer = t
  if c.tie_word_embeddings or not src then
    self.lm_head = L.tied_head(t.wte)
  else
    self.lm_head = L.linear(src, "lm_head", c.n_embd, c.vocab_size, {bias = false})
  end
end

--- forward(ids, opts): logits {B, T, vocab} for int64 token values ids {B, T} (or {T}).
-- @param opts optional {cache = a KV cache (dle.models.layers.kv_cache; generate makes it),
--   last_only = true: logits of the last position only, {B, 1, vocab}}
function GPT2:forward(ids, opts)
  local c = self.config
  local cache, T, pos
  ids, cache, T, pos = L.step("GPT2", ids, opts, c.vocab_size, c.n_positions)
  local t = self.transformer
  local x = t.wte(ids + 1) + t.wpe(dle.arange(pos + 1, pos + T + 1, {dtype = "int64"}))
  for i, block in ipairs(t.h) do x = block(x, cache, i) end
  if cache then cache.pos = pos + T end
  if opts and opts.last_only then x = x:narrow(2, T, 1) end
  return self.lm_head(t.ln_f(x))
end

--- A KV cache for B sequences of up to max_len positions (what generate allocates).
function GPT2:new_cache(B, max_len)
  local c = self.config
  return L.kv_cache(c.n_layer, B, c.n_head, max_len, c.n_embd // c.n_head)
end

--- The longest sequence the model takes (n_positions).
function GPT2:max_positions() return self.config.n_positions end

GPT2.generate = generation.generate

--- Writes the model as a GGUF v3 file with llama.cpp's tensor names and metadata (quantized
-- weights as their blocks) that dle.models.from_gguf reads back.
-- @param path string
function GPT2:save_gguf(path)
  require("dle.models.gguf").save("GPT2:save_gguf", self, path, "gpt2")
end

--- Reads a Hugging Face GPT-2 checkpoint directory (config.json + model.safetensors or the sharded
-- model.safetensors.index.json; Conv1D weights stored {in, out}), memory-mapped: float32 weights
-- are used in place (copy-on-write), other float dtypes converted once.
-- @param dir directory
-- @param opts optional {}
-- @return GPT2 model (in eval mode)
function M.from_pretrained(dir, opts)
  local hf = require("dle.models.hf")
  return hf.build("dle.models.gpt2.from_pretrained", dir, opts, function(config, src)
    return GPT2(config, {source = src})
  end, function(src)
    -- the original gpt2 files have no "transformer." prefix; masks stored as buffers are not weights
    local renamed = {}
    for k, v in pairs(src) do
      if not (k:match("%.attn%.bias$") or k:match("%.attn%.masked_bias$")) then
        if not k:match("^transformer%.") and k ~= "lm_head.weight" then k = "transformer." .. k end
        renamed[k] = v
      end
    end
    return renamed
  end)
end

local CONV1D = {["attn.c_attn.weight"] = true, ["attn.c_proj.weight"] = true, ["mlp.c_fc.weight"] = true,
  ["mlp.c_proj.weight"] = true}

--- Writes the model as a Hugging Face checkpoint directory (config.json, model.safetensors with
-- Conv1D weights {in, out}) that from_pretrained reads back.
-- @param dir directory (created when missing)
function GPT2:save_pretrained(dir)
  require("dle.models.hf").save("GPT2:save_pretrained", self, dir, "gpt2", CONV1D)
end

--- Reads llm.c's GPT-2 checkpoint (gpt2_124M.bin: 256 int32 header, magic 20240326, version 3
-- float32 or 5 bfloat16, then the parameters in llm.c's order, wte padded to padded_vocab_size
-- rows), memory-mapped.
-- @param path file
-- @return GPT2 model (in eval mode)
function M.from_llmc(path)
  return require("dle.models.llmc").load(path, GPT2)
end

return M
