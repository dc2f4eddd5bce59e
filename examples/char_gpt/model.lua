--- The char-level GPT of train.lua (also timed by scripts/bench's training-step figure): token +
-- learned position Embeddings, pre-LayerNorm TransformerBlocks (causal attention, GELU MLP 4d), a
-- final LayerNorm and an output head (or the token embedding, tied). dofile this file to get the
-- class: GPT({vocab, context, d, heads, layers, tie}).
local dle = require("dle")
local nn = dle.nn

local GPT = nn.Module:extend("GPT")

--- @param opts {vocab, context, d, heads, layers, tie}
function GPT:init(opts)
  self.context, self.d, self.tie = opts.context, opts.d, opts.tie
  self.wte = nn.Embedding(opts.vocab, opts.d)
  self.wpe = nn.Embedding(opts.context, opts.d)
  local blocks = {}
  for i = 1, opts.layers do blocks[i] = nn.TransformerBlock(opts.d, opts.heads, {causal = true}) end
  self.blocks = blocks
  self.ln_f = nn.LayerNorm(opts.d)
  if not opts.tie then self.head = nn.Linear(opts.d, opts.vocab, {bias = false}) end
  -- GPT-2 init: N(0, 0.02) matrices and embeddings, zero biases, residual projections scaled
  -- by 1/sqrt(2 * layers)
  for name, p in self:named_parameters() do
    if name:match("bias$") then nn.init.zeros_(p)
    elseif p:dim() == 2 then
      local std = 0.02
      if name:match("attn%.proj%.weight$") or name:match("fc2%.weight$") then
        std = 0.02 / math.sqrt(2 * opts.layers)
      end
      nn.init.normal_(p, 0, std)
    end
  end
  self._pos = {}
end

--- @param ids int64 {B, T} (T <= context)
-- @return logits {B, T, vocab}
function GPT:forward(ids)
  local T = ids:size(2)
  if T > self.context then error("GPT: sequence of " .. T .. " tokens exceeds the context " .. self.context, 2) end
  local pos = self._pos[T]
  if not pos then
    pos = dle.arange(1, T + 1, 1, {dtype = "int64"})
    self._pos[T] = pos
  end
  local x = self.wte(ids) + self.wpe(pos)
  for _, b in ipairs(self.blocks) do x = b(x) end
  x = self.ln_f(x)
  if self.tie then return x:matmul(self.wte.weight:t()) end
  return self.head(x)
end

return GPT
