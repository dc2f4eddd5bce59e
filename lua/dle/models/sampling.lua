--- dle.models.sampling: picking the next token from one row of logits — greedy (argmax) or a
-- draw from softmax(logits / temperature) restricted to the top_k most likely tokens and to the
-- smallest set whose probability reaches top_p (nucleus). The restriction is done on a Lua table of
-- the row's probabilities, in this one function, until dle has a sort/topk op to do it with.
local dle = require "dle"

local S = {}

--- Token ids (0-based values) of the most likely tokens whose probabilities (descending) are kept
-- by top_k and top_p, with their probabilities; all tokens when neither is set.
-- @param probs list of probabilities (index i is token i - 1)
local function nucleus(probs, top_k, top_p)
  local order = {}
  for i = 1, #probs do order[i] = i end
  if not top_k and not top_p then return order end
  table.sort(order, function(a, b) return probs[a] > probs[b] or probs[a] == probs[b] and a < b end)
  local n = #order
  if top_k then n = math.min(n, top_k) end
  if top_p then
    local acc = 0
    for i = 1, n do
      acc = acc + probs[order[i]]
      if acc >= top_p then n = i; break end
    end
  end
  for i = #order, n + 1, -1 do order[i] = nil end
  return order
end
S._nucleus = nucleus

--- The next token of each row of logits {B, V}: int64 {B} of 0-based token values.
-- @param logits float tensor {B, V}
-- @param opts {temperature (0: greedy), top_k, top_p, generator}
function S.next_tokens(logits, opts)
  local B = logits:size(1)
  if opts.temperature == 0 then return logits:argmax(2) - 1 end
  local probs = (logits:double() / opts.temperature):softmax(2)
  local u = dle.rand(B, {dtype = "float64", generator = opts.generator}):totable()
  local out = {}
  for b = 1, B do
    local p = probs[b]:totable()
    local keep = nucleus(p, opts.top_k, opts.top_p)
    local total = 0
    for _, i in ipairs(keep) do total = total + p[i] end
    local target, acc, pick = u[b] * total, 0, keep[#keep]
    for _, i in ipairs(keep) do
      acc = acc + p[i]
      if acc > target then pick = i; break end
    end
    out[b] = pick - 1
  end
  return dle.tensor(out, {dtype = "int64"})
end

return S
