--- dle.models.layers: what GPT-2 and Llama share — dle.nn layers either freshly initialised or
-- adopting tensors a checkpoint already holds (no init, no copy: a memory-mapped float32 weight
-- becomes the parameter itself), the weight source a loader hands the model, the KV cache,
-- causal masks for a cached step, and the attention call (grouped-query included).
local dle = require("dle")
local check = require("dle.check")
local nn = dle.nn
local F = nn.functional

local L = {}

-- A subclass of cls whose init does nothing, so that an instance can be filled with given tensors
-- (it is still a cls: methods, __name and isinstance-style checks go through cls).
local blanks = setmetatable({}, {__mode = "k"})
local function blank_of(cls)
  local b = blanks[cls]
  if not b then
    b = cls:extend(cls.__name)
    b.init = function() end
    blanks[cls] = b
  end
  return b
end

--- An instance of the dle.nn class cls without running its init: fields are assigned in list
-- order ({{name, value}, ...}; tensors that require grad register as parameters).
-- @param cls a dle.nn.Module class (dle.nn.Linear, ...)
-- @param fields list of {name, value}
-- @return the module
function L.adopt(cls, fields)
  local m = blank_of(cls)()
  for _, kv in ipairs(fields) do m[kv[1]] = kv[2] end
  return m
end

-- ---------------------------------------------------------------- weight sources

local Source = {}
Source.__index = Source

--- A weight source over a table name -> tensor (as loaded from a checkpoint): take() hands out
-- each tensor once, checked against the shape the architecture expects, as a float32 leaf that
-- requires grad. `where` names the checkpoint in errors; `fn` the loading function.
-- @param tensors table name -> tensor
-- @param fn string, e.g. "dle.models.gpt2.from_pretrained"
-- @param where string, the checkpoint's path
-- @return source
function L.source(tensors, fn, where)
  return setmetatable({tensors = tensors, fn = fn, where = where, used = {}}, Source)
end

local function shape_of(list) return "{" .. table.concat(list, ",") .. "}" end

--- The tensor `name` with shape `shape` (transposed = true: stored {shape[2], shape[1]}, as
-- GPT-2's Conv1D weights, and returned as a transposed view, no copy). A quantized tensor (GGUF)
-- is returned as it is when keep_quantized (a Linear's weight), else dequantized.
function Source:take(name, shape, transposed, keep_quantized)
  local t = self.tensors[name]
  if t == nil then check.error(string.format("%s: %s: missing tensor %q", self.fn, self.where, name)) end
  local want = transposed and {shape[2], shape[1]} or shape
  if shape_of(t:shape()) ~= shape_of(want) then
    check.error(string.format("%s: %s: tensor %q has shape %s, the config needs %s", self.fn, self.where, name,
      shape_of(t:shape()), shape_of(want)))
  end
  if dle.is_quantized(t) then
    self.used[name] = true
    if keep_quantized and not transposed then return t end
    t = t:dequantize()
    if transposed then t = t:t() end
    return t:requires_grad_(true)
  end
  if not t:is_floating_point() then
    check.error(string.format("%s: %s: tensor %q has dtype %s, expected a float dtype", self.fn, self.where,
      name, t:dtype()))
  end
  self.used[name] = true
  if t:dtype() ~= "float32" then t = t:float() end   -- converted once; the mapping is dropped
  if transposed then t = t:t() end
  return t:requires_grad_(true)
end

--- Whether the source holds `name`.
function Source:has(name) return self.tensors[name] ~= nil end

--- Names held but never taken (sorted).
function Source:unused()
  local out = {}
  for k in pairs(self.tensors) do if not self.used[k] then out[#out + 1] = k end end
  table.sort(out)
  return out
end

-- ---------------------------------------------------------------- layers

--- Linear(in, out): fresh (src nil) or adopting `name`.weight (and .bias) from src.
-- @param opts {bias = bool, transposed = bool (Conv1D layout in the file), generator}
function L.linear(src, name, in_f, out_f, opts)
  if not src then return nn.Linear(in_f, out_f, {bias = opts.bias, generator = opts.generator}) end
  return L.adopt(nn.Linear, {
    {"in_features", in_f}, {"out_features", out_f},
    {"weight", src:take(name .. ".weight", {out_f, in_f}, opts.transposed, true)},
    {"bias", opts.bias and src:take(name .. ".bias", {out_f}) or nil},
  })
end

--- Embedding(n, d): fresh (weights ~ N(0, std^2)) or adopting `name`.weight.
function L.embedding(src, name, n, d, opts)
  if not src then
    local e = nn.Embedding(n, d, {generator = opts.generator})
    if opts.std then dle.no_grad(function() e.weight:mul_(opts.std) end) end
    return e
  end
  return L.adopt(nn.Embedding, {{"num_embeddings", n}, {"embedding_dim", d},
    {"weight", src:take(name .. ".weight", {n, d})}})
end

--- LayerNorm(d) (with bias) or RMSNorm(d) (rms = true): fresh or adopting `name`.weight/.bias.
function L.norm(src, name, d, eps, rms)
  local cls = rms and nn.RMSNorm or nn.LayerNorm
  if not src then return cls(d, {eps = eps}) end
  return L.adopt(cls, {{"shape", {d}}, {"normalized_shape", d}, {"eps", eps},
    {"weight", src:take(name .. ".weight", {d})}, {"bias", (not rms) and src:take(name .. ".bias", {d}) or nil}})
end

--- The output head {vocab, d} sharing the embedding's weight (tied embeddings).
function L.tied_head(embedding)
  local w = embedding.weight
  return L.adopt(nn.Linear, {{"in_features", w:size(2)}, {"out_features", w:size(1)}, {"weight", w}})
end

--- A plain Lua list of n modules, made by make(i) with i 0-based (checkpoint layer numbers).
function L.list(n, make)
  local out = {}
  for i = 0, n - 1 do out[i + 1] = make(i) end
  return out
end

-- ---------------------------------------------------------------- KV cache and attention

--- A KV cache for one generate call: per layer, keys and values {B, Hkv, max_len, D}, allocated
-- once; `pos` tokens are filled. Each step writes its keys/values into a narrow of the buffers.
-- @return cache {k = {...}, v = {...}, pos = 0, max_len}
function L.kv_cache(n_layers, B, n_kv_heads, max_len, head_dim)
  local c = {k = {}, v = {}, pos = 0, max_len = max_len}
  for i = 1, n_layers do
    c.k[i] = dle.zeros(B, n_kv_heads, max_len, head_dim)
    c.v[i] = dle.zeros(B, n_kv_heads, max_len, head_dim)
  end
  c.bytes_per_token = 2 * n_layers * B * n_kv_heads * head_dim * 4
  return c
end

-- Bool mask {T, pos + T}: query i (at position pos + i) may see keys 1..pos + i.
local function cached_causal_mask(T, pos)
  return dle.ones(T, pos + T, {dtype = "bool"}):tril(pos)
end

--- Attention of q {B, H, T, D} over k, v {B, Hkv, S, D} (H a multiple of Hkv: grouped-query),
-- causal. With a cache (layer i), k and v are this step's {B, Hkv, T, D}: they are written at
-- cache.pos and the attention runs over everything cached so far.
-- @return {B, H, T, D}
function L.attend(q, k, v, cache, layer)
  local B, H, T, D = q:size(1), q:size(2), q:size(3), q:size(4)
  local Hkv = k:size(2)
  local causal, mask = true, nil
  if cache then
    local pos = cache.pos
    if pos + T > cache.max_len then
      check.error(string.format("generate: the KV cache holds %d positions, step needs %d", cache.max_len, pos + T))
    end
    cache.k[layer]:narrow(3, pos + 1, T):copy_(k)
    cache.v[layer]:narrow(3, pos + 1, T):copy_(v)
    k = cache.k[layer]:narrow(3, 1, pos + T)
    v = cache.v[layer]:narrow(3, 1, pos + T)
    if pos > 0 then
      causal = false
      if T > 1 then mask = cached_causal_mask(T, pos) end
    end
  end
  if H == Hkv then return F.scaled_dot_product_attention(q, k, v, {causal = causal, mask = mask}) end
  local G = H // Hkv
  if T == 1 and not causal then
    -- one query per head: a group's G queries are G rows against the shared keys (no copy)
    return F.scaled_dot_product_attention(q:reshape(B, Hkv, G, D), k, v):view(B, H, 1, D)
  end
  local o = F.scaled_dot_product_attention(q:reshape(B, Hkv, G, T, D), k:unsqueeze(3), v:unsqueeze(3),
    {causal = causal, mask = mask})
  return o:reshape(B, H, T, D)
end

--- What a language model's forward(ids, opts) starts with: the options and ids checked, the
-- cache (or nil), the step's length T and first position pos; max_positions (or nil: no limit)
-- bounds pos + T.
-- @return ids {B, T}, cache, T, pos
function L.step(fn, ids, opts, vocab, max_positions)
  opts = check.options(opts, fn, {"cache", "last_only"})
  ids = L.check_ids(fn, ids, vocab)
  local cache = opts.cache
  local T, pos = ids:size(2), cache and cache.pos or 0
  if max_positions and pos + T > max_positions then
    check.error(string.format("%s: %d positions exceed the model's %d", fn, pos + T, max_positions))
  end
  return ids, cache, T, pos
end

--- Checks model input ids: an int64 tensor {B, T} (or {T}, made {1, T}) of values in [0, vocab).
-- @return ids {B, T}
function L.check_ids(fn, ids, vocab)
  if not dle.is_tensor(ids) then check.error(fn .. ": ids must be an int64 tensor, got " .. check.typename(ids)) end
  if ids:dtype() ~= "int64" then
    check.error(fn .. ": ids must be int64 token values, got " .. ids:dtype() .. " " .. check.shape_str(ids))
  end
  if ids:dim() == 1 then ids = ids:unsqueeze(1) end
  if ids:dim() ~= 2 or ids:numel() == 0 then
    check.error(fn .. ": ids must have shape {B, T} with T >= 1, got " .. check.shape_str(ids))
  end
  local lo, hi = ids:min():item(), ids:max():item()
  if lo < 0 or hi >= vocab then
    check.error(string.format("%s: token ids must be in [0, %d), got values %d..%d", fn, vocab, lo, hi))
  end
  return ids
end

return L
