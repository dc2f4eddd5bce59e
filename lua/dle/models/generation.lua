--- dle.models.generation: model:generate for the language models (GPT-2, Llama): a prefill of the
-- prompt, then one token per step, with a KV cache allocated once per call (each step writes its
-- keys and values into a narrow of it) and no gradient recording.
local dle = require("dle")
local check = require("dle.check")
local L = require("dle.models.layers")
local sampling = require("dle.models.sampling")

local G = {}

local OPTS = {"max_new_tokens", "temperature", "top_k", "top_p", "generator", "stop"}

-- The stop option as a set of token values.
local function stop_set(stop, vocab)
  local set, list = {}, stop
  if stop == nil then return set end
  if math.type(stop) == "integer" then list = {stop} end
  if type(list) ~= "table" then
    check.error("generate: stop must be a token id or a list of them, got " .. check.typename(stop))
  end
  for _, s in ipairs(list) do
    if math.type(s) ~= "integer" or s < 0 or s >= vocab then
      check.error(string.format("generate: stop ids must be integers in [0, %d), got %s", vocab, tostring(s)))
    end
    set[s] = true
  end
  return set
end

--- generate(ids, opts): continues int64 token values ids {B, T} (or {T}) with a KV cache.
-- A row that produced a stop id keeps repeating it; generation ends when every row has stopped.
-- @param opts optional {max_new_tokens = 20, temperature = 1 (0: greedy), top_k = nil (all),
--   top_p = nil (1), generator = dle.Generator (sampling), stop = id or list of ids}
-- @return int64 ids {B, T + n} including the prompt (n <= max_new_tokens), and a table of
--   statistics {new_tokens, prefill_seconds, decode_seconds, kv_cache_bytes_per_token}
function G.generate(self, ids, opts)
  opts = check.options(opts, "generate", OPTS)
  local vocab = self.config.vocab_size
  ids = L.check_ids("generate", ids, vocab)
  local max_new = opts.max_new_tokens or 20
  if math.type(max_new) ~= "integer" or max_new < 0 then
    check.error("generate: max_new_tokens must be a non-negative integer, got " .. tostring(max_new))
  end
  local o = {temperature = opts.temperature or 1, top_k = opts.top_k, top_p = opts.top_p, generator = opts.generator}
  if type(o.temperature) ~= "number" or not (o.temperature >= 0) then -- luacheck: ignore 581 (NaN)
    check.error("generate: temperature must be a number >= 0, got " .. tostring(o.temperature))
  end
  if o.top_k ~= nil and (math.type(o.top_k) ~= "integer" or o.top_k < 1) then
    check.error("generate: top_k must be a positive integer, got " .. tostring(o.top_k))
  end
  if o.top_p ~= nil and (type(o.top_p) ~= "number" or not (o.top_p > 0 and o.top_p <= 1)) then -- luacheck: ignore 581
    check.error("generate: top_p must be a number in (0, 1], got " .. tostring(o.top_p))
  end
  local stops = stop_set(opts.stop, vocab)
  local B, T0 = ids:size(1), ids:size(2)
  local total = T0 + max_new
  if total > self:max_positions() then
    check.error(string.format("generate: prompt (%d) + max_new_tokens (%d) exceed the model's %d positions",
      T0, max_new, self:max_positions()))
  end
  local out = dle.empty(B, total, {dtype = "int64"})
  out:narrow(2, 1, T0):copy_(ids)
  local cache = self:new_cache(B, total)
  local stats = {new_tokens = 0, kv_cache_bytes_per_token = cache.bytes_per_token // B}
  local finished, n_finished, n = {}, 0, 0
  dle.no_grad(function()
    local t0 = dle.time()
    local logits = self:forward(ids, {cache = cache, last_only = true})
    stats.prefill_seconds = dle.time() - t0
    t0 = dle.time()
    for step = 1, max_new do
      local nxt = sampling.next_tokens(logits:select(2, 1), o)
      if next(stops) then
        local vals = nxt:totable()
        for b = 1, B do
          if finished[b] then vals[b] = finished[b]
          elseif stops[vals[b]] then finished[b] = vals[b]; n_finished = n_finished + 1 end
        end
        nxt = dle.tensor(vals, {dtype = "int64"})
      end
      out:narrow(2, T0 + step, 1):copy_(nxt:unsqueeze(2))
      n = step
      if n_finished == B or step == max_new then break end
      logits = self:forward(nxt:unsqueeze(2), {cache = cache, last_only = true})
    end
    stats.decode_seconds = dle.time() - t0
  end)
  stats.new_tokens = n
  return out:narrow(2, 1, T0 + n):contiguous(), stats
end

return G
