--- sampling_spec.lua — dle.models.sampling.next_tokens: greedy, temperature, top_k and top_p
-- (Hugging Face's order: top_k first, then top_p on the renormalised top-k probabilities) checked
-- by the empirical frequencies of many seeded draws against the probabilities a plain Lua
-- reference computes, and the edge cases: ties, zero-probability tokens, a batch of rows.
local dle = require("dle")
local S = require("dle.models.sampling")

-- The distribution next_tokens should draw from, by plain Lua over one row of logits.
local function expected(row, T, top_k, top_p)
  local idx = {}
  for i = 1, #row do idx[i] = i end
  table.sort(idx, function(a, b) return row[a] > row[b] or row[a] == row[b] and a < b end)
  local n = top_k and math.min(top_k, #row) or #row
  local m, p, z = row[idx[1]] / T, {}, 0
  for i = 1, n do p[i] = math.exp(row[idx[i]] / T - m); z = z + p[i] end
  for i = 1, n do p[i] = p[i] / z end
  if top_p then
    local acc, keep = 0, n
    for i = 1, n do
      if acc >= top_p then keep = i - 1; break end
      acc = acc + p[i]
    end
    z = 0
    for i = 1, keep do z = z + p[i] end
    for i = 1, n do p[i] = i <= keep and p[i] / z or 0 end
  end
  local dist = {}
  for i = 1, #row do dist[i - 1] = 0 end
  for i = 1, n do dist[idx[i] - 1] = p[i] end
  return dist
end

local function frequencies(logits, opts, draws)
  local rows = logits:size(1)
  local counts = {}
  for r = 1, rows do counts[r] = {} end
  local tiled = dle.cat((function() local t = {} for i = 1, draws do t[i] = logits end return t end)(), 1)
  local toks = S.next_tokens(tiled, opts):totable()
  for i, t in ipairs(toks) do
    local r = (i - 1) % rows + 1
    counts[r][t] = (counts[r][t] or 0) + 1
  end
  return counts
end

describe("next_tokens draws from the filtered distribution", function()
  local row = {2.0, 0.5, 1.0, -1.0, 2.0, 0.0, 1.5, -3.0}
  local logits = dle.tensor({row})
  local draws = 20000
  local cases = {
    {T = 1.0}, {T = 0.7, top_k = 3}, {T = 1.3, top_p = 0.8}, {T = 1.0, top_k = 5, top_p = 0.6},
    {T = 2.0, top_p = 0.999},
  }
  for _, c in ipairs(cases) do
    local name = ("T=%g top_k=%s top_p=%s"):format(c.T, tostring(c.top_k), tostring(c.top_p))
    it(name .. ": frequencies within 4 sigma of the reference, filtered tokens never drawn", function()
      local want = expected(row, c.T, c.top_k, c.top_p)
      local counts = frequencies(logits, {temperature = c.T, top_k = c.top_k, top_p = c.top_p,
                                          generator = dle.Generator(42)}, draws)[1]
      for tok = 0, #row - 1 do
        local p, got = want[tok], (counts[tok] or 0) / draws
        if p == 0 then
          assert.are.equal(0, counts[tok] or 0, name .. ": token " .. tok .. " was filtered out")
        else
          local sigma = math.sqrt(p * (1 - p) / draws)
          assert.is_true(math.abs(got - p) <= 4 * sigma + 1e-12,
                         ("%s: token %d drawn %.4f, expected %.4f"):format(name, tok, got, p))
        end
      end
    end)
  end

  it("top_k = 1 and a tiny top_p are greedy; ties go to the lower token id, as a stable sort", function()
    local l = dle.tensor({{1.0, 3.0, 3.0, 0.0}, {5.0, -1.0, 5.0, 2.0}})
    for seed = 1, 20 do
      local g = dle.Generator(seed)
      assert.are.same({1, 0}, S.next_tokens(l, {temperature = 1, top_k = 1, generator = g}):totable())
      assert.are.same({1, 0}, S.next_tokens(l, {temperature = 1, top_p = 1e-9, generator = g}):totable())
    end
    assert.are.same({1, 0}, S.next_tokens(l, {temperature = 0}):totable())
  end)

  it("never draws a token whose probability is zero, whatever the uniform draw", function()
    local l = dle.tensor({{0.0, -math.huge, 0.0, -math.huge, -math.huge}})
    for seed = 1, 200 do
      local t = S.next_tokens(l, {temperature = 1, generator = dle.Generator(seed)}):totable()[1]
      assert.is_true(t == 0 or t == 2, "drew token " .. t)
    end
  end)

  it("draws each row of a batch from its own distribution", function()
    local l = dle.tensor({{10, 0, 0}, {0, 10, 0}, {0, 0, 10}})
    local t = S.next_tokens(l, {temperature = 0.1, generator = dle.Generator(3)}):totable()
    assert.are.same({0, 1, 2}, t)
    assert.are.equal("int64", S.next_tokens(l, {temperature = 1}):dtype())
  end)
end)
