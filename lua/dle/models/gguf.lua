--- dle.models.gguf: GPT-2 and Llama models from and to GGUF files with llama.cpp's names
-- (token_embd, blk.N.attn_q, ..., output_norm, output) and metadata keys (<arch>.block_count,
-- ...). llama.cpp's converter permutes the rows of Llama's q and k projections (each head's two
-- rotary halves interleaved, for its rotate-pairs rope); from_gguf undoes it and save redoes it, so
-- the model keeps Hugging Face's rotate-half layout. Quantized weights stay quantized: a Linear
-- whose weight is Q8_0/Q4_0/Q4_K in the file computes from the blocks (dle.quant).
local dle = require("dle")
local check = require("dle.check")
local L = require("dle.models.layers")

local G = {}

-- Hugging Face name pieces <-> GGUF ones: whole-model names, then the parts of a layer's names
-- (under "model.layers.N." / "transformer.h.N." and "blk.N.").
local ARCH = {
  llama = {
    layer = "model.layers.",
    top = {{"model.embed_tokens.", "token_embd."}, {"model.norm.", "output_norm."}, {"lm_head.", "output."}},
    part = {{"input_layernorm.", "attn_norm."}, {"self_attn.q_proj.", "attn_q."}, {"self_attn.k_proj.", "attn_k."},
      {"self_attn.v_proj.", "attn_v."}, {"self_attn.o_proj.", "attn_output."},
      {"post_attention_layernorm.", "ffn_norm."}, {"mlp.gate_proj.", "ffn_gate."}, {"mlp.up_proj.", "ffn_up."},
      {"mlp.down_proj.", "ffn_down."}},
  },
  gpt2 = {
    layer = "transformer.h.",
    top = {{"transformer.wte.", "token_embd."}, {"transformer.wpe.", "position_embd."},
      {"transformer.ln_f.", "output_norm."}, {"lm_head.", "output."}},
    part = {{"ln_1.", "attn_norm."}, {"attn.c_attn.", "attn_qkv."}, {"attn.c_proj.", "attn_output."},
      {"ln_2.", "ffn_norm."}, {"mlp.c_fc.", "ffn_up."}, {"mlp.c_proj.", "ffn_down."}},
  },
}

-- name translated with the pairs of ARCH[arch] (from side i to side 3 - i: 1 is Hugging Face's,
-- 2 GGUF's); nil when no rule matches.
local function rename(arch, name, i)
  local a, o = ARCH[arch], 3 - i
  for _, p in ipairs(a.top) do
    if name:sub(1, #p[i]) == p[i] then return p[o] .. name:sub(#p[i] + 1) end
  end
  local prefix = i == 1 and a.layer or "blk."
  local n, rest = name:match("^" .. prefix:gsub("%.", "%%.") .. "(%d+)%.(.*)$")
  if not n then return nil end
  for _, p in ipairs(a.part) do
    if rest:sub(1, #p[i]) == p[i] then
      return (i == 1 and "blk." or a.layer) .. n .. "." .. p[o] .. rest:sub(#p[i] + 1)
    end
  end
  return nil
end

-- Rows of t (a tensor, or a quantized tensor's blocks) regrouped per head: each of the h heads'
-- rows viewed as {a, b} and transposed. {2, D/2} is llama.cpp's permutation, {D/2, 2} its inverse.
local function regroup_rows(t, h, a, b)
  local s = t:shape()
  local rest = {table.unpack(s, 2)}
  local v = t:reshape(h, a, b, table.unpack(rest)):transpose(2, 3)
  return v:reshape(table.unpack(s)):contiguous()
end

local function permute(t, h, inverse)
  local D = t:size(1) // h
  local a, b = 2, D // 2
  if inverse then a, b = b, a end
  if dle.is_quantized(t) then
    local quant = require("dle.quant")
    return quant.from_blocks("dle.models.from_gguf", regroup_rows(t:blocks(), h, a, b), t:dtype(), t:shape())
  end
  return regroup_rows(t, h, a, b)
end

-- A metadata value that must be a positive integer (or nil when optional and absent).
local function meta_int(fn, path, meta, key, optional)
  local v = meta[key]
  if v == nil and optional then return nil end
  if math.type(v) ~= "integer" or v < 1 then
    check.error(string.format("%s: %s: metadata %s must be a positive integer, got %s", fn, path, key, tostring(v)))
  end
  return v
end
local function meta_num(fn, path, meta, key, default)
  local v = meta[key]
  if v == nil then return default end
  if type(v) ~= "number" then
    check.error(string.format("%s: %s: metadata %s must be a number, got %s", fn, path, key, tostring(v)))
  end
  return v
end

local function vocab_of(fn, path, tensors)
  local e = tensors["token_embd.weight"]
  if e == nil or e:dim() ~= 2 then check.error(fn .. ": " .. path .. ": no 2-D tensor token_embd.weight") end
  return e:size(1)
end

local CONFIG = {
  llama = function(fn, path, meta, tensors)
    local H = meta_int(fn, path, meta, "llama.attention.head_count")
    local d = meta_int(fn, path, meta, "llama.embedding_length")
    local c = {vocab_size = vocab_of(fn, path, tensors), hidden_size = d,
      intermediate_size = meta_int(fn, path, meta, "llama.feed_forward_length"),
      num_hidden_layers = meta_int(fn, path, meta, "llama.block_count"), num_attention_heads = H,
      num_key_value_heads = meta_int(fn, path, meta, "llama.attention.head_count_kv", true) or H,
      head_dim = meta_int(fn, path, meta, "llama.rope.dimension_count", true),
      max_position_embeddings = meta_int(fn, path, meta, "llama.context_length", true) or 2048,
      rms_norm_eps = meta_num(fn, path, meta, "llama.attention.layer_norm_rms_epsilon", 1e-5),
      rope_theta = meta_num(fn, path, meta, "llama.rope.freq_base", 10000),
      tie_word_embeddings = tensors["output.weight"] == nil,
      mlp_bias = tensors["blk.0.ffn_gate.bias"] ~= nil}
    if tensors["blk.0.attn_output.bias"] ~= nil then
      c.attention_bias = true
    elseif tensors["blk.0.attn_q.bias"] ~= nil then
      c.model_type = "qwen2" -- biases on q, k and v only (dle.models.llama)
    end
    return c
  end,
  gpt2 = function(fn, path, meta, tensors)
    return {vocab_size = vocab_of(fn, path, tensors), n_embd = meta_int(fn, path, meta, "gpt2.embedding_length"),
      n_positions = meta_int(fn, path, meta, "gpt2.context_length"),
      n_layer = meta_int(fn, path, meta, "gpt2.block_count"),
      n_head = meta_int(fn, path, meta, "gpt2.attention.head_count"),
      n_inner = meta_int(fn, path, meta, "gpt2.feed_forward_length", true),
      layer_norm_epsilon = meta_num(fn, path, meta, "gpt2.attention.layer_norm_epsilon", 1e-5),
      tie_word_embeddings = tensors["output.weight"] == nil}
  end,
}

--- Reads a GGUF file of the llama or gpt2 architecture (general.architecture) into a dle model
-- (dle.models.llama.Llama or dle.models.gpt2.GPT2, in eval mode), tensors memory-mapped, quantized
-- Linear weights kept quantized (embeddings and norms dequantized). Tensor names the architecture
-- did not use are listed in model.unused_weights.
-- @param path string
-- @return model
function G.from_gguf(path)
  local fn = "dle.models.from_gguf"
  check.string(path, fn, "path")
  local tensors, meta = check.call(fn, dle.load_gguf, path)
  local arch = meta["general.architecture"]
  if not ARCH[arch] then
    check.error(string.format("%s: %s: general.architecture is %s; dle reads llama and gpt2", fn, path,
      type(arch) == "string" and string.format("%q", arch) or tostring(arch)))
  end
  local config = CONFIG[arch](fn, path, meta, tensors)
  local renamed = {}
  for name, t in pairs(tensors) do
    local hf = rename(arch, name, 2)
    if arch == "llama" and (name:match("%.attn_q%.") or name:match("%.attn_k%.")) then
      local h = name:match("%.attn_q%.") and config.num_attention_heads or config.num_key_value_heads
      if t:dim() < 1 or t:size(1) % (2 * h) ~= 0 then
        check.error(string.format("%s: %s: tensor %q of shape {%s} does not split into %d heads of an even size",
          fn, path, name, table.concat(t:shape(), ","), h))
      end
      t = permute(t, h, true)
    end
    renamed[hf or name] = t
  end
  local src = L.source(renamed, fn, path)
  -- the config comes from the file: its errors (a head count not dividing the width...) name the loader
  local model = check.call(fn, function()
    if arch == "llama" then return require("dle.models.llama").Llama(config, {source = src}) end
    return require("dle.models.gpt2").GPT2(config, {source = src, linear_layout = true})
  end)
  model:eval()
  model.unused_weights = src:unused()
  return model
end

-- Metadata of the model's config under llama.cpp's keys, and their GGUF types.
local function metadata(arch, c)
  local m, ty = {["general.architecture"] = arch}, {}
  local function put(k, v, t)
    if v ~= nil then m[k], ty[k] = v, t end
  end
  if arch == "llama" then
    if c.rope_scaling ~= nil then
      check.error("save_gguf: a Llama with rope_scaling is not written to GGUF by dle")
    end
    put("llama.vocab_size", c.vocab_size, "uint32")
    put("llama.context_length", c.max_position_embeddings, "uint32")
    put("llama.embedding_length", c.hidden_size, "uint32")
    put("llama.feed_forward_length", c.intermediate_size, "uint32")
    put("llama.block_count", c.num_hidden_layers, "uint32")
    put("llama.attention.head_count", c.num_attention_heads, "uint32")
    put("llama.attention.head_count_kv", c.num_key_value_heads, "uint32")
    put("llama.rope.dimension_count", c.head_dim, "uint32")
    put("llama.attention.layer_norm_rms_epsilon", c.rms_norm_eps, "float32")
    put("llama.rope.freq_base", c.rope_theta + 0.0, "float32")
  else
    put("gpt2.context_length", c.n_positions, "uint32")
    put("gpt2.embedding_length", c.n_embd, "uint32")
    put("gpt2.feed_forward_length", c.n_inner or 4 * c.n_embd, "uint32")
    put("gpt2.block_count", c.n_layer, "uint32")
    put("gpt2.attention.head_count", c.n_head, "uint32")
    put("gpt2.attention.layer_norm_epsilon", c.layer_norm_epsilon, "float32")
  end
  return m, ty
end

--- Writes a GPT2 or Llama model as a GGUF file that from_gguf (and llama.cpp's loader names)
-- read: weights under llama.cpp's names ({out, in} Linear weights; Llama's q and k rows permuted
-- as llama.cpp's converter does), quantized weights as their blocks, a tied head written once (as
-- token_embd), the config as <arch>.* metadata.
-- @param fn string, the caller named in errors
-- @param model the model
-- @param path string
function G.save(fn, model, path, arch)
  check.string(path, fn, "path")
  local c = model.config
  local tensors, seen = {}, {}
  for name, m in model:named_modules() do
    for _, field in ipairs({"weight", "bias"}) do
      local t = rawget(m, field)
      if t ~= nil and not seen[t] and (dle.is_tensor(t) or dle.is_quantized(t)) then
        seen[t] = true
        -- module names count list entries from 1, checkpoints from 0
        local hf = (name .. "." .. field):gsub("%.(%d+)%.", function(i) return "." .. (tonumber(i) - 1) .. "." end)
        local g = rename(arch, hf, 1)
        if not g then check.error(string.format("%s: no GGUF name for %s", fn, hf)) end
        if dle.is_tensor(t) then t = t:detach():contiguous() end
        if arch == "llama" and (g:match("%.attn_q%.") or g:match("%.attn_k%.")) then
          t = permute(t, g:match("%.attn_q%.") and c.num_attention_heads or c.num_key_value_heads, false)
        end
        tensors[g] = t
      end
    end
  end
  local meta, types = metadata(arch, c)
  dle.save_gguf(path, tensors, meta, {types = types})
end

return G
