--- dle.nn.TransformerBlock(d, heads, {causal, mlp_ratio = 4, dropout = 0, bias = true, dtype,
-- generator}): a pre-LayerNorm transformer block (GPT-2 style):
--   x = x + dropout(attn(ln1(x)));  x = x + dropout(fc2(gelu(fc1(ln2(x)))))
-- with attn a MultiheadAttention and an MLP of hidden size mlp_ratio * d. This file returns the
-- class; dle.nn registers it.
local dle = require("dle")
local check = require("dle.check")
local Module = require("dle.nn.module")
local F = require("dle.nn.functional")
local Linear = require("dle.nn.linear")
local LayerNorm = require("dle.nn.layer_norm")
local MultiheadAttention = require("dle.nn.attention")

local TransformerBlock = Module:extend("TransformerBlock")

--- @param d model size
-- @param heads number of attention heads (divides d)
-- @param opts optional {causal = false, mlp_ratio = 4, dropout = 0 (residual branches and
--   attention weights), bias = true, dtype = "float32", generator = g}
function TransformerBlock:init(d, heads, opts)
  opts = check.layer_args("TransformerBlock", opts, {"causal", "mlp_ratio", "dropout", "bias", "dtype", "generator"},
                          "a positive integer size d", d)
  local ratio = opts.mlp_ratio or 4
  local hidden = math.tointeger(ratio * d)
  if not hidden or hidden < 1 then
    check.error("TransformerBlock: mlp_ratio * d must be a positive integer, got " .. tostring(ratio * d))
  end
  self.embed_dim, self.hidden = d, hidden
  self.dropout = opts.dropout or 0
  self.generator = opts.generator
  if math.type(heads) ~= "integer" or heads < 1 or d % heads ~= 0 then
    check.error(string.format("TransformerBlock: heads must be a positive integer dividing d = %d, got %s", d,
      tostring(heads)))
  end
  local lo = {bias = opts.bias ~= false, dtype = opts.dtype, generator = opts.generator}
  self.ln1 = LayerNorm(d, {dtype = opts.dtype})
  self.attn = MultiheadAttention(d, heads, {causal = opts.causal, bias = opts.bias, dropout = self.dropout,
    dtype = opts.dtype, generator = opts.generator})
  self.ln2 = LayerNorm(d, {dtype = opts.dtype})
  self.fc1 = Linear(d, hidden, lo)
  self.fc2 = Linear(hidden, d, lo)
end

--- @param x tensor {B, T, d}
-- @param opts optional {mask = ...} passed to the attention
-- @return tensor {B, T, d}
function TransformerBlock:forward(x, opts)
  if not dle.is_tensor(x) or x:dim() < 2 or x:size(-1) ~= self.embed_dim then
    check.error("TransformerBlock: input has shape " .. (dle.is_tensor(x)
                                                         and ("{" .. table.concat(x:shape(), ",") .. "}")
      or type(x)) .. ", expected {B, T, " .. self.embed_dim .. "}")
  end
  local p, tr = self.dropout, self.training
  local g = {generator = self.generator}
  x = x + F.dropout(self.attn(self.ln1(x), opts), p, tr, g)
  x = x + F.dropout(self.fc2(self.fc1(self.ln2(x)):gelu()), p, tr, g)
  return x
end

--- Forward FLOPs (2*m*n*k per matmul): the attention's (see MultiheadAttention:flops) plus the
-- MLP's 2 * 2*B*T*d*hidden.
-- @param input_shape {B, T, d}, or the inputs list summary() passes
-- @return number
function TransformerBlock:flops(input_shape)
  if type(input_shape) == "table" and dle.is_tensor(input_shape[1]) then input_shape = input_shape[1]:shape() end
  local n = 1
  for i = 1, #input_shape - 1 do n = n * input_shape[i] end
  return self.attn:flops(input_shape) + 4 * n * self.embed_dim * self.hidden
end

function TransformerBlock:extra_repr()
  return string.format("d=%d, heads=%d, hidden=%d, causal=%s", self.embed_dim, self.attn.num_heads, self.hidden,
    tostring(self.attn.causal))
end

return TransformerBlock
