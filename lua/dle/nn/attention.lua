--- dle.nn.MultiheadAttention and dle.nn.functional.scaled_dot_product_attention, built on the fused
-- attention op dle.sdpa (scores, mask, softmax and the value product in one C kernel per batch
-- element; a fused backward; dle.sdpa(qkv, opts) with q, k, v packed {3, ..., T, E} for
-- self-attention). This file returns the class and adds the
-- function (and causal_mask) to dle.nn.functional; dle.nn registers the class:
--   local attn = dle.nn.MultiheadAttention(128, 4, {causal = true})
--   local y = attn(x)                                  -- x {B, T, 128} -> y {B, T, 128}
--   local o = dle.nn.functional.scaled_dot_product_attention(q, k, v, {causal = true})
local dle = require("dle")
local check = require("dle.check")
local Module = require("dle.nn.module")
local F = require("dle.nn.functional")
local Linear = require("dle.nn.linear")

-- The options each function knows (check.options).
local SDPA_OPTS = {"scale", "mask", "causal", "dropout_p", "training", "generator"}
local FORWARD_OPTS = {"mask"}

local shape_str = require("dle.check").shape_str

-- Causal masks (bool, true above the diagonal = position not allowed), cached by "Tq,Tk,device".
-- Top-left aligned as PyTorch's is_causal: query i may see keys 1..i.
local causal_cache = setmetatable({}, {__mode = "v"})

--- The cached causal mask: a bool tensor {Tq, Tk}, true where key j > query i (masked out).
-- @param tq number of queries
-- @param tk number of keys (default tq)
-- @param device optional device string (default "cpu")
-- @return bool tensor {tq, tk}; do not modify it
local function causal_mask(tq, tk, device)
  tq = check.integer_min(tq, "causal_mask", "tq", 0)
  tk = check.integer_min(tk or tq, "causal_mask", "tk", 0)
  device = check.string(device or "cpu", "causal_mask", "device")
  local key = tq .. "," .. tk .. "," .. device
  local m = causal_cache[key]
  if not m then
    m = dle.ones(tq, tk, {dtype = "bool"}):triu(1)
    if device ~= "cpu" then m = m:to(device) end
    causal_cache[key] = m
  end
  return m
end

--- scaled_dot_product_attention(q, k, v, opts): softmax(q k^T * scale + mask) v over the last
-- two dimensions; q is {..., Tq, D}, k {..., Tk, D}, v {..., Tk, Dv} (leading dims broadcast,
-- e.g. {B, H, T, D}).
-- @param opts optional table:
--   causal     boolean: query i attends to keys 1..i only (applied inside the kernel)
--   mask       bool tensor broadcastable to {..., Tq, Tk}, true = may attend (PyTorch's
--              attn_mask convention), or a float tensor added to the scores (-inf blocks)
--   scale      number, default 1/sqrt(D)
--   dropout_p  probability of dropping attention weights (default 0), only when training: the
--              op's attention probabilities go through F.dropout and are multiplied by v again
--   training   boolean (default true; dropout only applies when true)
--   generator  dle.Generator for the dropout mask
-- @return tensor {..., Tq, Dv}
-- A query row whose keys are all masked gives zero weights and a zero output (PyTorch: NaN).
local function scaled_dot_product_attention(q, k, v, opts)
  opts = check.options(opts, "scaled_dot_product_attention", SDPA_OPTS)
  for _, p in ipairs({{"q", q}, {"k", k}, {"v", v}}) do
    if not dle.is_tensor(p[2]) then
      check.error("scaled_dot_product_attention: " .. p[1] .. " must be a tensor, got " .. type(p[2]))
    end
    if p[2]:dim() < 2 then
      check.error("scaled_dot_product_attention: " .. p[1] .. " must have at least 2 dimensions {..., T, D}, got "
        .. shape_str(p[2]))
    end
  end
  local D = q:size(-1)
  if k:size(-1) ~= D then
    check.error("scaled_dot_product_attention: q " .. shape_str(q) .. " and k " .. shape_str(k)
      .. " have different feature sizes (" .. D .. " vs " .. k:size(-1) .. ")")
  end
  if k:size(-2) ~= v:size(-2) then
    check.error("scaled_dot_product_attention: k " .. shape_str(k) .. " and v " .. shape_str(v)
      .. " have different lengths (" .. k:size(-2) .. " vs " .. v:size(-2) .. ")")
  end
  local scale = opts.scale or 1 / math.sqrt(D)
  if type(scale) ~= "number" then
    check.error("scaled_dot_product_attention: scale must be a number, got " .. type(scale))
  end
  local mask = opts.mask
  if mask ~= nil and not dle.is_tensor(mask) then
    check.error("scaled_dot_product_attention: mask must be a tensor, got " .. type(mask))
  end
  local ok, out, probs = pcall(dle.sdpa, q, k, v, {mask = mask, causal = opts.causal, scale = scale})
  if not ok then check.error("scaled_dot_product_attention: " .. tostring(out)) end
  local p = opts.dropout_p or 0
  if p > 0 and opts.training ~= false then
    out = F.dropout(probs, p, true, {generator = opts.generator}):matmul(v)
  end
  return out
end

F.scaled_dot_product_attention = scaled_dot_product_attention
F.causal_mask = causal_mask

local MultiheadAttention = Module:extend("MultiheadAttention")

--- MultiheadAttention(d, heads, opts): one fused QKV Linear (d -> 3d), heads of size d/heads,
-- scaled dot-product attention, heads merged, output Linear (d -> d).
-- @param d model (embedding) size, divisible by heads
-- @param heads number of heads
-- @param opts optional {causal = false, bias = true, dropout = 0 (on the attention weights),
--   dtype = "float32", generator = g (init and dropout)}
function MultiheadAttention:init(d, heads, opts)
  opts = check.layer_args("MultiheadAttention", opts, {"causal", "bias", "dropout", "dtype", "generator"},
                          "positive integers (d, heads)", d, heads)
  if d % heads ~= 0 then
    check.error("MultiheadAttention: d = " .. d .. " is not divisible by heads = " .. heads)
  end
  local dropout = opts.dropout or 0
  if type(dropout) ~= "number" or dropout < 0 or dropout > 1 then
    check.error("MultiheadAttention: dropout must be a number in [0, 1], got " .. tostring(dropout))
  end
  self.embed_dim, self.num_heads, self.head_dim = d, heads, d // heads
  self.causal, self.dropout = opts.causal and true or false, dropout
  self.generator = opts.generator
  local lo = {bias = opts.bias ~= false, dtype = opts.dtype, generator = opts.generator}
  self.qkv = Linear(d, 3 * d, lo)
  self.proj = Linear(d, d, lo)
end

-- {B, T, d} -> {B, H, T, Dh}
function MultiheadAttention:_split(t)
  local B, T = t:size(1), t:size(2)
  return t:reshape(B, T, self.num_heads, self.head_dim):transpose(2, 3)
end

function MultiheadAttention:_check(name, x)
  if not dle.is_tensor(x) then
    check.error("MultiheadAttention: " .. name .. " must be a tensor, got " .. type(x))
  end
  if x:dim() ~= 3 or x:size(3) ~= self.embed_dim then
    check.error("MultiheadAttention: " .. name .. " has shape " .. shape_str(x) .. ", expected {B, T, "
      .. self.embed_dim .. "}")
  end
end

--- forward(x) self-attention, or forward(q, k, v) cross attention (k and v default to q).
-- @param q tensor {B, Tq, d} (or {Tq, d}, unbatched)
-- @param k optional tensor {B, Tk, d}
-- @param v optional tensor {B, Tk, d} (default k)
-- @param opts optional {mask = bool/float tensor as in scaled_dot_product_attention}
-- @return tensor {B, Tq, d}
function MultiheadAttention:forward(q, k, v, opts)
  if type(k) == "table" and not dle.is_tensor(k) then opts, k = k, nil end
  opts = check.options(opts, "MultiheadAttention:forward", FORWARD_OPTS)
  check.opt_tensor(k, "MultiheadAttention", "key")
  check.opt_tensor(v, "MultiheadAttention", "value")
  local unbatched = dle.is_tensor(q) and q:dim() == 2
  if unbatched then
    q = q:unsqueeze(1)
    if k then k = k:unsqueeze(1) end
    if v then v = v:unsqueeze(1) end
  end
  self:_check("query", q)
  local d = self.embed_dim
  local W, b = self.qkv.weight, self.qkv.bias
  local drop = self.dropout > 0 and self.training
  if k == nil and v == nil and not drop then
    -- self-attention: one product with the fused weight, its {B, T, 3d} result viewed as q, k, v
    -- stacked {3, B, H, T, Dh} and handed to the packed attention op, whose gradient comes back
    -- as one {B, T, 3d} tensor: one weight-gradient and one input-gradient product instead of
    -- three each plus two sums (and no zero-padded slice gradients)
    local B, T, H = q:size(1), q:size(2), self.num_heads
    local qkv = F.linear(q, W, b):view(B, T, 3, H, self.head_dim):permute(3, 1, 4, 2, 5)
    local ok, o = pcall(dle.sdpa, qkv, {causal = self.causal, mask = opts.mask})
    if not ok then check.error("MultiheadAttention: " .. tostring(o)) end
    local y = self.proj(o:transpose(2, 3):reshape(B, T, d))
    if unbatched then y = y:squeeze(1) end
    return y
  end
  local Q, K, V
  if k == nil and v == nil then
    k, v = q, q   -- self-attention with attention dropout (which needs v apart)
  else
    v = v or k
    self:_check("key", k)
    self:_check("value", v)
    if k:size(1) ~= q:size(1) or v:size(1) ~= q:size(1) or k:size(2) ~= v:size(2) then
      check.error("MultiheadAttention: query " .. shape_str(q) .. ", key " .. shape_str(k) .. " and value "
        .. shape_str(v) .. " do not match (same batch; key and value of the same length)")
    end
  end
  -- cross attention: three products with slices of the fused weight rather than one product
  -- sliced afterwards: the backward of slicing a {B, T, 3d} result pads each slice's gradient to
  -- full size and sums the three
  local function part(x, i)
    return F.linear(x, W:narrow(1, (i - 1) * d + 1, d), b and b:narrow(1, (i - 1) * d + 1, d))
  end
  Q, K, V = self:_split(part(q, 1)), self:_split(part(k, 2)), self:_split(part(v, 3))
  local o = scaled_dot_product_attention(Q, K, V, {
    causal = self.causal, mask = opts.mask, dropout_p = self.dropout, training = self.training,
    generator = self.generator,
  })
  local B, T = o:size(1), o:size(3)
  local y = self.proj(o:transpose(2, 3):reshape(B, T, d))
  if unbatched then y = y:squeeze(1) end
  return y
end

--- Forward FLOPs, 2*m*n*k per matmul: the Q, K, V and output projections plus the two attention
-- matmuls (q k^T and weights @ v), counted dense (the causal mask does not halve them):
-- self-attention on {B, T, d}: 2*B*T*d*3d + 2*B*T*T*d + 2*B*T*T*d + 2*B*T*d*d = 8BTd^2 + 4BT^2d.
-- @param input_shape {B, T, d} (or {T, d}), or the inputs list summary() passes ({q[, k, v]})
-- @param kv_len optional key length Tk for cross attention (default T)
-- @return number
function MultiheadAttention:flops(input_shape, kv_len)
  local d = self.embed_dim
  local tk
  if type(input_shape) == "table" and dle.is_tensor(input_shape[1]) then
    local inputs = input_shape
    if dle.is_tensor(inputs[2]) then tk = inputs[2]:size(-2) end
    input_shape = inputs[1]:shape()
  elseif type(kv_len) == "number" then
    tk = kv_len
  end
  if type(input_shape) ~= "table" or #input_shape < 2 then
    check.error("MultiheadAttention:flops: expected an input shape {B, T, d}")
  end
  local T = input_shape[#input_shape - 1]
  local B = 1
  for i = 1, #input_shape - 2 do B = B * input_shape[i] end
  tk = tk or T
  local proj = 2 * B * T * d * d + 2 * B * tk * d * 2 * d + 2 * B * T * d * d
  local attn = 2 * B * T * tk * d * 2
  return proj + attn
end

function MultiheadAttention:extra_repr()
  return string.format("embed_dim=%d, num_heads=%d, causal=%s, dropout=%s", self.embed_dim, self.num_heads,
    tostring(self.causal), tostring(self.dropout))
end

return MultiheadAttention
