--- rope_spec.lua — dle.models.rope: the rotary frequencies of each rope_scaling kind against a
-- plain Lua transcription of Hugging Face's formulas (modeling_rope_utils), the Llama model using
-- them (a scaled model differs from the plain one only where the formulas say), the round trip of
-- rope_scaling through save_pretrained / from_pretrained, and bad configs.
local dle = require("dle")
local rope = require("dle.models.rope")

-- theta^(-2j/dim) and the kinds' changes, one frequency at a time
local function reference(kind, s, theta, dim, max_pos, seq_len)
  local out = {}
  for j = 0, dim / 2 - 1 do
    local base = theta
    if kind == "dynamic" and seq_len > max_pos then
      base = theta * ((s.factor * seq_len / max_pos) - (s.factor - 1)) ^ (dim / (dim - 2))
    end
    local f = 1 / base ^ (2 * j / dim)
    if kind == "linear" then f = f / s.factor end
    if kind == "llama3" then
      local wl = 2 * math.pi / f
      local lo_wl, hi_wl = s.original_max_position_embeddings / s.low_freq_factor,
                           s.original_max_position_embeddings / s.high_freq_factor
      if wl > lo_wl then
        f = f / s.factor
      elseif wl >= hi_wl then
        local sm = (s.original_max_position_embeddings / wl - s.low_freq_factor)
                   / (s.high_freq_factor - s.low_freq_factor)
        f = (1 - sm) * f / s.factor + sm * f
      end
    end
    out[j + 1] = f
  end
  return out
end

local function config(scaling)
  local c = {rope_theta = 500000, head_dim = 128, max_position_embeddings = 1024, rope_scaling = scaling}
  c._rope = rope.scaling(c, "test")
  return c
end

describe("rotary frequencies", function()
  local llama3 = {rope_type = "llama3", factor = 8, low_freq_factor = 1, high_freq_factor = 4,
                  original_max_position_embeddings = 8192}
  local cases = {
    {nil, nil, 100}, {"linear", {type = "linear", factor = 4}, 100},
    {"dynamic", {rope_type = "dynamic", factor = 2}, 512}, {"dynamic", {rope_type = "dynamic", factor = 2}, 3000},
    {"llama3", llama3, 100},
  }
  for _, case in ipairs(cases) do
    local kind, s, len = case[1], case[2], case[3]
    it(("%s scaling at length %d matches the formula for every frequency"):format(kind or "no", len), function()
      local got = rope.inv_freq(config(s), len):totable()
      local want = reference(kind, s, 500000, 128, 1024, len)
      assert.are.equal(#want, #got)
      for j = 1, #want do
        assert.is_true(math.abs(got[j] - want[j]) <= 1e-12 * want[j],
                       ("frequency %d: %g vs %g"):format(j, got[j], want[j]))
      end
    end)
  end

  it("llama3 keeps the short wavelengths, divides the long ones by factor and blends between", function()
    local plain = rope.inv_freq(config(nil), 1):totable()
    local got = rope.inv_freq(config(llama3), 1):totable()
    local kept, divided, blended = 0, 0, 0
    for j = 1, #got do
      if got[j] == plain[j] then kept = kept + 1
      elseif math.abs(got[j] - plain[j] / 8) <= 1e-15 * plain[j] then divided = divided + 1
      else blended = blended + 1; assert.is_true(got[j] < plain[j] and got[j] > plain[j] / 8) end
    end
    assert.is_true(kept > 0 and divided > 0 and blended > 0,
                   ("%d kept, %d divided, %d blended"):format(kept, divided, blended))
  end)

  it("bad rope_scaling tables are errors naming the model and the key", function()
    local function err(s)
      local ok, msg = pcall(rope.scaling, {rope_scaling = s}, "Llama")
      assert.is_false(ok)
      return msg
    end
    assert.matches('Llama: config.rope_scaling type "yarn" is not supported', err({rope_type = "yarn", factor = 2}))
    assert.matches("rope_scaling.factor must be a positive number", err({type = "linear"}))
    assert.matches("low_freq_factor", err({rope_type = "llama3", factor = 8}))
    assert.matches("must be a table", err(3))
  end)
end)

describe("a Llama with rope_scaling", function()
  local cfg = {vocab_size = 40, hidden_size = 16, intermediate_size = 32, num_hidden_layers = 1,
               num_attention_heads = 2, num_key_value_heads = 1, max_position_embeddings = 64}
  local function model(scaling)
    local c = {}
    for k, v in pairs(cfg) do c[k] = v end
    c.rope_scaling = scaling
    return dle.models.llama.Llama(c, {generator = dle.Generator(4)})
  end
  local ids = dle.tensor({{3, 1, 4, 1, 5, 9, 2, 6}}, {dtype = "int64"})

  it("linear scaling by 1 changes nothing; by 4 changes the logits; position 1 is never rotated", function()
    local plain = model(nil)(ids)
    local same = model({type = "linear", factor = 1})(ids)
    local scaled = model({type = "linear", factor = 4})(ids)
    assert.are.equal(0, (plain - same):abs():max():item())
    assert.is_true((plain - scaled):abs():max():item() > 1e-4)
    -- the first position has angle 0 whatever the frequencies
    assert.is_true((plain:narrow(2, 1, 1) - scaled:narrow(2, 1, 1)):abs():max():item() < 1e-6)
  end)

  it("dynamic scaling equals plain rotary up to max_position_embeddings; past it the frequencies follow the length",
     function()
    local m = model({rope_type = "dynamic", factor = 2})
    assert.is_true((model(nil)(ids) - m(ids)):abs():max():item() < 1e-6)
    local long = dle.randint(0, 40, {1, 70}, {dtype = "int64", generator = dle.Generator(2)})
    local full = m(long)
    assert.are.same({1, 70, 40}, full:shape())
    assert.are.equal(128, m:max_positions())
    -- the first 64 positions run alone use plain rotary; inside the 70-long run, the grown base
    local head = m(long:narrow(2, 1, 64))
    assert.is_true((full:narrow(2, 2, 63) - head:narrow(2, 2, 63)):abs():max():item() > 1e-5)
    assert.is_true((full:narrow(2, 1, 1) - head:narrow(2, 1, 1)):abs():max():item() < 1e-6)
  end)

  it("save_pretrained writes rope_scaling and from_pretrained reads the same model back", function()
    local dir = os.tmpname()
    os.remove(dir)
    local m = model({rope_type = "llama3", factor = 8, low_freq_factor = 1, high_freq_factor = 4,
                     original_max_position_embeddings = 16})
    m:save_pretrained(dir)
    local back = dle.models.llama.from_pretrained(dir)
    os.execute("rm -rf '" .. dir .. "'")
    assert.are.equal("llama3", back.config.rope_scaling.rope_type)
    assert.are.equal(0, (m(ids) - back(ids)):abs():max():item())
  end)
end)
