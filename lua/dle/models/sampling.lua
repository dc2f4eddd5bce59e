--- dle.models.sampling: picking the next token from each row of logits — greedy (argmax) or a
-- draw from softmax(logits / temperature) restricted, as Hugging Face's warpers do in this order,
-- to the top_k most likely tokens (dle.topk) and then to the smallest set of those whose
-- renormalised probability reaches top_p (nucleus, on the sorted cumulative sum). All of it is
-- tensor ops over the whole batch: no Lua loop over the vocabulary.
local dle = require("dle")

local S = {}

--- The next token of each row of logits {B, V}: int64 {B} of 0-based token values.
-- @param logits float tensor {B, V}
-- @param opts {temperature (0: greedy), top_k, top_p, generator}
function S.next_tokens(logits, opts)
  local B, V = logits:size(1), logits:size(2)
  if opts.temperature == 0 then return logits:argmax(2) - 1 end
  local scores = logits:double() / opts.temperature
  local order -- {B, n}: token positions (1-based) of the candidates, most likely first
  if opts.top_k and opts.top_k < V then
    scores, order = scores:topk(opts.top_k, 2)
  elseif opts.top_p then
    scores, order = scores:sort(2, {descending = true, stable = true})
  end
  local probs = scores:softmax(2)
  if opts.top_p then
    -- keep a candidate while the mass before it is below top_p (the first is always kept)
    local before = probs:cumsum(2) - probs
    probs = dle.where(before:lt(opts.top_p), probs, 0)
  end
  -- the first candidate whose cumulative probability exceeds u * (kept mass)
  local cum = probs:cumsum(2)
  local u = dle.rand(B, 1, {dtype = "float64", generator = opts.generator})
  local target = u * cum:narrow(2, cum:size(2), 1)
  -- when u * mass rounds up to the whole mass, the last candidate with a nonzero probability
  local n = probs:size(2)
  local last = (probs:gt(0) * dle.arange(1, n + 1, {dtype = "int64"})):amax(2, true)
  local pick = dle.minimum(cum:le(target):sum(2, true) + 1, dle.maximum(last, 1))
  if order then pick = order:gather(2, pick) end
  return (pick - 1):view(B)
end

return S
