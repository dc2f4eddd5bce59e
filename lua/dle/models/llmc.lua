--- dle.models.llmc: llm.c's GPT-2 checkpoint (train_gpt2.py's write_model): a header of 256 int32
-- (little-endian) — magic 20240326, version (3: float32, 5: bfloat16), max_seq_len, vocab_size,
-- num_layers, num_heads, channels, padded_vocab_size — then the 16 parameter tensors back to back,
-- each layer's tensors stacked per kind (all ln_1 weights, then all ln_1 biases, ...), Linear
-- weights {out, in}. Each tensor is memory-mapped; wte's padding rows are left out.
local dle = require("dle")
local check = require("dle.check")
local L = require("dle.models.layers")

local M = {}

local FN = "dle.models.gpt2.from_llmc"
local MAGIC = 20240326
local DTYPE = {[3] = "float32", [5] = "bfloat16"}

-- The parameter kinds in file order: name (Hugging Face's, %d = layer), shape per layer (nil: global).
local function layout(Vp, T, C)
  return {
    {"transformer.wte.weight", nil, {Vp, C}}, {"transformer.wpe.weight", nil, {T, C}},
    {"transformer.h.%d.ln_1.weight", {C}}, {"transformer.h.%d.ln_1.bias", {C}},
    {"transformer.h.%d.attn.c_attn.weight", {3 * C, C}}, {"transformer.h.%d.attn.c_attn.bias", {3 * C}},
    {"transformer.h.%d.attn.c_proj.weight", {C, C}}, {"transformer.h.%d.attn.c_proj.bias", {C}},
    {"transformer.h.%d.ln_2.weight", {C}}, {"transformer.h.%d.ln_2.bias", {C}},
    {"transformer.h.%d.mlp.c_fc.weight", {4 * C, C}}, {"transformer.h.%d.mlp.c_fc.bias", {4 * C}},
    {"transformer.h.%d.mlp.c_proj.weight", {C, 4 * C}}, {"transformer.h.%d.mlp.c_proj.bias", {C}},
    {"transformer.ln_f.weight", nil, {C}}, {"transformer.ln_f.bias", nil, {C}},
  }
end

local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

--- Loads path as a GPT2 model (cls: the GPT2 class).
function M.load(path, cls)
  check.string(path, FN, "path")
  local f, err = io.open(path, "rb")
  if not f then check.error(FN .. ": cannot open " .. tostring(err)) end
  local head = f:read(1024)
  local size = f:seek("end")
  f:close()
  if not head or #head < 1024 then
    check.error(string.format("%s: %s: truncated header (%d of 1024 bytes)", FN, path, head and #head or 0))
  end
  local h = {string.unpack("<" .. string.rep("i4", 8), head)}
  if h[1] ~= MAGIC then
    check.error(string.format("%s: %s: bad magic %d (an llm.c GPT-2 checkpoint has %d)", FN, path, h[1], MAGIC))
  end
  local dtype = DTYPE[h[2]]
  if not dtype then
    check.error(string.format("%s: %s: unsupported version %d (3: float32, 5: bfloat16)", FN, path, h[2]))
  end
  local T, V, Lyr, NH, C, Vp = h[3], h[4], h[5], h[6], h[7], h[8]
  for i, v in ipairs({T, V, Lyr, NH, C, Vp}) do
    if v < 1 or v > (1 << 24) then
      check.error(string.format("%s: %s: bad header value %d at int %d", FN, path, v, i + 2))
    end
  end
  if Vp < V then check.error(string.format("%s: %s: padded vocab %d < vocab %d", FN, path, Vp, V)) end
  if C % NH ~= 0 then check.error(string.format("%s: %s: channels %d not divisible by heads %d", FN, path, C, NH)) end
  local kinds = layout(Vp, T, C)
  local esz = dtype == "float32" and 4 or 2
  local total = 0
  for _, k in ipairs(kinds) do total = total + numel(k[3] or k[2]) * (k[3] and 1 or Lyr) end
  if size ~= 1024 + total * esz then
    check.error(string.format("%s: %s: the header's model (%d layers, %d channels, vocab %d/%d, %d positions, %s) "
      .. "needs %d bytes, the file has %d", FN, path, Lyr, C, V, Vp, T, dtype, 1024 + total * esz, size))
  end
  local tensors, at = {}, 1024
  for _, k in ipairs(kinds) do
    local name, per, whole = k[1], k[2], k[3]
    if whole then
      tensors[name] = dle.data.memmap(path, dtype, whole, {offset = at})
      at = at + numel(whole) * esz
    else
      for i = 0, Lyr - 1 do
        tensors[name:format(i)] = dle.data.memmap(path, dtype, per, {offset = at})
        at = at + numel(per) * esz
      end
    end
  end
  -- the padding rows of wte are not tokens
  tensors["transformer.wte.weight"] = tensors["transformer.wte.weight"]:narrow(1, 1, V)
  local src = L.source(tensors, FN, path)
  local model = cls({vocab_size = V, n_positions = T, n_embd = C, n_layer = Lyr, n_head = NH},
    {source = src, linear_layout = true})
  model:eval()
  return model
end

return M
