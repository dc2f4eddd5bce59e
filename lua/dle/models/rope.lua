--- dle.models.rope: the rotary embeddings' inverse frequencies and cos/sin tables, with the
-- rope_scaling kinds of Hugging Face's configs (modeling_rope_utils): none/"default",
-- "linear" (positions divided by factor), "dynamic" (NTK-aware: the base grows once a sequence
-- passes max_position_embeddings) and "llama3" (Llama 3.1/3.2: long wavelengths divided by
-- factor, short ones kept, a smooth blend between). Frequencies in float64, tables in float32.
local dle = require("dle")
local check = require("dle.check")

local R = {}

local KNOWN = {default = true, linear = true, dynamic = true, llama3 = true}

-- The scaling kind and its table (nil for plain rotary embeddings), checked.
function R.scaling(c, fn)
  local s = c.rope_scaling
  if s == nil then return nil end
  if type(s) ~= "table" then check.error(fn .. ": config.rope_scaling must be a table, got " .. check.typename(s)) end
  local kind = s.rope_type or s.type
  if kind == nil then check.error(fn .. ": config.rope_scaling needs rope_type (default, linear, dynamic, llama3)") end
  if not KNOWN[kind] then
    check.error(string.format("%s: config.rope_scaling type %q is not supported (default, linear, dynamic, llama3)",
      fn, tostring(kind)))
  end
  if kind == "default" then return nil end
  local function number(k, positive)
    local v = s[k]
    if type(v) ~= "number" or (positive and v <= 0) then
      check.error(string.format("%s: config.rope_scaling.%s must be a %snumber for %s scaling, got %s", fn, k,
        positive and "positive " or "", kind, tostring(v)))
    end
    return v
  end
  local r = {kind = kind, factor = number("factor", true)}
  if kind == "llama3" then
    r.low_freq_factor, r.high_freq_factor = number("low_freq_factor", true), number("high_freq_factor", true)
    r.original = number("original_max_position_embeddings", true)
    if r.high_freq_factor <= r.low_freq_factor then
      check.error(fn .. ": config.rope_scaling.high_freq_factor must exceed low_freq_factor")
    end
  end
  return r
end

-- theta^(-2j / dim), j = 0 .. dim/2 - 1, float64.
local function plain(theta, dim)
  return (dle.arange(0, dim, 2, {dtype = "float64"}) * (-math.log(theta) / dim)):exp()
end

--- The inverse frequencies {head_dim / 2} (float64) for sequences of seq_len positions.
-- @param c the model config (rope_theta, head_dim, max_position_embeddings, the checked scaling as c._rope)
function R.inv_freq(c, seq_len)
  local s, dim = c._rope, c.head_dim
  if not s then return plain(c.rope_theta, dim) end
  if s.kind == "linear" then return plain(c.rope_theta, dim) / s.factor end
  if s.kind == "dynamic" then
    local max = c.max_position_embeddings
    if seq_len <= max then return plain(c.rope_theta, dim) end
    local base = c.rope_theta * ((s.factor * seq_len / max) - (s.factor - 1)) ^ (dim / (dim - 2))
    return plain(base, dim)
  end
  -- llama3: wavelengths above original / low_freq_factor are divided by factor, those below
  -- original / high_freq_factor kept, and the ones between blended by where they fall
  local inv = plain(c.rope_theta, dim)
  local wavelen = (2 * math.pi) / inv
  local smooth = ((s.original / wavelen) - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
  local blended = (1 - smooth) * inv / s.factor + smooth * inv
  local long = wavelen:gt(s.original / s.low_freq_factor)
  local short = wavelen:lt(s.original / s.high_freq_factor)
  return dle.where(long, inv / s.factor, dle.where(short, inv, blended))
end

--- cos and sin {n, head_dim} (float32) for positions 0 .. n - 1 with the inverse frequencies inv.
function R.tables(inv, n)
  local freqs = dle.arange(0, n, {dtype = "float64"}):unsqueeze(2) * inv:unsqueeze(1)
  local emb = dle.cat({freqs, freqs}, 2)
  return emb:cos():float(), emb:sin():float()
end

--- Whether the frequencies depend on the sequence length (then tables are not reused across lengths).
function R.depends_on_length(c) return c._rope ~= nil and c._rope.kind == "dynamic" end

return R
