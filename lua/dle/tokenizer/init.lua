--- dle.tokenizer: byte-level BPE tokenizers (GPT-2's scheme, and the Llama 3 / Qwen2 variants of
-- it): text -> UTF-8 bytes -> pre-tokens (GPT-2's, Llama 3's or Qwen2's regex, from the
-- tokenizer.json) -> each pre-token's bytes as mapped characters (dle.tokenizer.bytes) -> BPE
-- merges by rank (or the whole pre-token when the vocabulary has it and ignore_merges is set) ->
-- vocabulary ids.
--   local tok = dle.tokenizer.load("checkpoint_dir")   -- tokenizer.json, or vocab.json + merges.txt
--   local ids = tok:encode("Hello world")              -- int64 tensor of token values (0-based)
--   print(tok:decode(ids))
-- Special (added) tokens are matched literally in the text before pre-tokenization.
local dle = require("dle")
local check = require("dle.check")
local bytes = require("dle.tokenizer.bytes")
local pretokenize = require("dle.tokenizer.pretokenize")
local json = require("dle.io.json")

local M = {}

local Tokenizer = {}
Tokenizer.__index = Tokenizer
Tokenizer.__name = "dle.Tokenizer"

local FN = "dle.tokenizer.load"

local function read_text(path) return json.read_text(FN, path) end
local function read_json(path) return json.read_object(FN, path) end

local function is_file(path)
  local f = io.open(path, "rb")
  if not f then return false end
  local ok = f:read(0) ~= nil or f:seek("end") == 0
  f:close()
  return ok
end

--- A tokenizer from vocab (token string -> id), merges (list of {left, right} in rank order) and
-- special token strings (list); where names the source in errors.
function M.new(vocab, merges, specials, where)
  local self = setmetatable({vocab = vocab, id_to_token = {}, ranks = {}, specials = {}, cache = {}, scheme = "gpt2"},
    Tokenizer)
  local size = 0
  for tok, id in pairs(vocab) do
    if math.type(id) ~= "integer" or id < 0 then
      check.error(string.format("%s: %s: token %q has id %s, expected a non-negative integer", FN, where, tok,
        tostring(id)))
    end
    self.id_to_token[id] = tok
    size = math.max(size, id + 1)
  end
  for rank, m in ipairs(merges) do
    local key = m[1] .. " " .. m[2]
    if self.ranks[key] == nil then self.ranks[key] = rank end
  end
  for _, s in ipairs(specials or {}) do
    if vocab[s] then self.specials[#self.specials + 1] = s end
  end
  table.sort(self.specials, function(a, b) return #a > #b end)   -- longest first
  self.vocab_size = size
  return self
end

-- The merges of a tokenizer.json model: strings "a b" or pairs ["a", "b"].
local function parse_merges(list, where)
  local out = {}
  for i, m in ipairs(list) do
    if type(m) == "string" then
      local a, b = m:match("^(.-) (.+)$")
      if not a then check.error(string.format("%s: %s: merge %d (%q) is not two tokens", FN, where, i, m)) end
      out[i] = {a, b}
    elseif type(m) == "table" and type(m[1]) == "string" and type(m[2]) == "string" then
      out[i] = {m[1], m[2]}
    else
      check.error(string.format("%s: %s: merge %d is neither \"a b\" nor [a, b]", FN, where, i))
    end
  end
  return out
end

-- The pre-tokenization scheme (dle.tokenizer.pretokenize) of a tokenizer.json's pre_tokenizer:
-- GPT-2's ByteLevel with its own regex, or a Split by a known regex (Llama 3's, Qwen2's) followed
-- by a ByteLevel that only maps bytes (use_regex false). Anything else is an error naming it.
local function pre_tokenizer_scheme(pt, where)
  if pt == nil then return "gpt2" end
  local function unsupported(what)
    check.error(string.format("%s: %s: pre-tokenizer %s is not supported (GPT-2's ByteLevel, or a Split by "
      .. "Llama 3's or Qwen2's regex then ByteLevel)", FN, where, what))
  end
  local parts = pt.type == "Sequence" and (pt.pretokenizers or {}) or {pt}
  local scheme, byte_level
  for _, p in ipairs(parts) do
    if p.type == "ByteLevel" then
      if p.add_prefix_space then
        check.error(FN .. ": " .. where .. ": ByteLevel add_prefix_space = true is not supported")
      end
      byte_level = true
      if p.use_regex ~= false then
        if scheme then unsupported("Split followed by a ByteLevel with its own regex") end
        scheme = "gpt2"
      end
    elseif p.type == "Split" then
      local pattern = type(p.pattern) == "table" and p.pattern.Regex
      local known = type(pattern) == "string" and pretokenize.scheme_of(pattern)
      if not known or scheme or p.behavior ~= "Isolated" or p.invert then
        unsupported("Split by " .. (type(pattern) == "string" and string.format("%q", pattern) or "a non-regex pattern")
          .. " (behavior " .. tostring(p.behavior) .. ")")
      end
      scheme = known
    else
      unsupported(tostring(p.type))
    end
  end
  if not byte_level then unsupported("without ByteLevel") end
  return scheme or unsupported("ByteLevel without a regex")
end

local function from_tokenizer_json(path)
  local j = read_json(path)
  local model = j.model
  if type(model) ~= "table" or (model.type ~= nil and model.type ~= "BPE") then
    check.error(string.format("%s: %s: model type %s is not supported (BPE)", FN, path,
      type(model) == "table" and tostring(model.type) or "missing"))
  end
  if type(model.vocab) ~= "table" or type(model.merges) ~= "table" then
    check.error(FN .. ": " .. path .. ": model.vocab and model.merges are required")
  end
  local scheme = pre_tokenizer_scheme(j.pre_tokenizer, path)
  local vocab, specials = {}, {}
  for k, v in pairs(model.vocab) do vocab[k] = v end
  for _, a in ipairs(j.added_tokens or {}) do
    if type(a) == "table" and type(a.content) == "string" and math.type(a.id) == "integer" then
      vocab[a.content] = a.id
      specials[#specials + 1] = a.content
    end
  end
  local tok = M.new(vocab, parse_merges(model.merges, path), specials, path)
  tok.scheme = scheme
  -- Llama 3's tokenizer: a pre-token that is itself in the vocabulary is one token, unmerged
  tok.ignore_merges = model.ignore_merges == true
  return tok
end

local function from_vocab_merges(vpath, mpath)
  local vocab = read_json(vpath)
  local merges, n = {}, 0
  for line in (read_text(mpath) .. "\n"):gmatch("([^\n]*)\n") do
    line = line:gsub("\r$", "")
    n = n + 1
    if not (n == 1 and line:match("^#version")) and line ~= "" then
      local a, b = line:match("^(%S+) (%S+)$")
      if not a then check.error(string.format("%s: %s: line %d (%q) is not a merge \"a b\"", FN, mpath, n, line)) end
      merges[#merges + 1] = {a, b}
    end
  end
  local specials = {}
  for tok in pairs(vocab) do if tok:match("^<|.*|>$") then specials[#specials + 1] = tok end end
  return M.new(vocab, merges, specials, vpath)
end

--- Loads a byte-level BPE tokenizer: a tokenizer.json file, vocab.json (with merges.txt beside it),
-- or a directory holding tokenizer.json or vocab.json + merges.txt.
-- @param path file or directory
-- @return tokenizer with :encode(str), :decode(ids), .vocab_size
function M.load(path)
  check.string(path, FN, "path")
  if is_file(path) then
    if path:match("vocab%.json$") then
      return from_vocab_merges(path, path:gsub("vocab%.json$", "merges.txt"))
    end
    return from_tokenizer_json(path)
  end
  if is_file(path .. "/tokenizer.json") then return from_tokenizer_json(path .. "/tokenizer.json") end
  if is_file(path .. "/vocab.json") and is_file(path .. "/merges.txt") then
    return from_vocab_merges(path .. "/vocab.json", path .. "/merges.txt")
  end
  check.error(FN .. ": " .. path .. " is not a tokenizer.json file nor a directory holding tokenizer.json or "
    .. "vocab.json + merges.txt")
end

-- The BPE of one pre-token (a string of mapped characters): its token strings.
function Tokenizer:_bpe(word)
  local hit = self.cache[word]
  if hit then return hit end
  if self.ignore_merges and self.vocab[word] then
    self.cache[word] = {word}
    return self.cache[word]
  end
  local syms = {}
  for _, cp in utf8.codes(word) do syms[#syms + 1] = utf8.char(cp) end
  local ranks = self.ranks
  while #syms > 1 do
    local best, at
    for i = 1, #syms - 1 do
      local r = ranks[syms[i] .. " " .. syms[i + 1]]
      if r and (not best or r < best) then best, at = r, i end
    end
    if not best then break end
    local a, b = syms[at], syms[at + 1]
    local merged, i = {}, 1
    while i <= #syms do
      if i < #syms and syms[i] == a and syms[i + 1] == b then
        merged[#merged + 1] = a .. b
        i = i + 2
      else
        merged[#merged + 1] = syms[i]
        i = i + 1
      end
    end
    syms = merged
  end
  self.cache[word] = syms
  return syms
end

-- Appends the ids of ordinary text (no special tokens) to out.
function Tokenizer:_encode_text(s, out)
  for _, piece in ipairs(pretokenize.split(s, self.scheme)) do
    for _, tok in ipairs(self:_bpe(bytes.encode(piece))) do
      local id = self.vocab[tok]
      if id == nil then
        check.error(string.format("encode: token %q (from %q) is not in the vocabulary", tok, piece))
      end
      out[#out + 1] = id
    end
  end
end

--- Encodes a string (any bytes) into token ids.
-- @param s string
-- @return int64 tensor {n} of 0-based token values
function Tokenizer:encode(s)
  check.string(s, "encode", "text")
  local out, i = {}, 1
  while i <= #s do
    local first, which
    for _, sp in ipairs(self.specials) do
      local a = s:find(sp, i, true)
      if a and (not first or a < first) then first, which = a, sp end
    end
    if not first then self:_encode_text(s:sub(i), out); break end
    if first > i then self:_encode_text(s:sub(i, first - 1), out) end
    out[#out + 1] = self.vocab[which]
    i = first + #which
  end
  return dle.tensor(out, {dtype = "int64"})
end

--- Decodes token ids back into a string.
-- @param ids int64 tensor {n} (or {1, n}) or a Lua list of integers
-- @return string
function Tokenizer:decode(ids)
  local list = ids
  if dle.is_tensor(ids) then
    if ids:dim() == 2 and ids:size(1) == 1 then ids = ids[1] end
    if ids:dim() ~= 1 then check.error("decode: ids must be 1-D (or {1, n}), got " .. check.shape_str(ids)) end
    list = ids:numel() > 0 and ids:totable() or {}
  elseif type(ids) ~= "table" then
    check.error("decode: ids must be a tensor or a list of integers, got " .. check.typename(ids))
  end
  local parts = {}
  for i, id in ipairs(list) do
    local tok = math.type(id) == "integer" and self.id_to_token[id] or nil
    if not tok then
      check.error(string.format("decode: id %s (position %d) is not in the vocabulary (size %d)", tostring(id), i,
        self.vocab_size))
    end
    parts[i] = tok
  end
  -- special tokens are text as they are; the rest is mapped bytes
  local out = {}
  local special = {}
  for _, s in ipairs(self.specials) do special[s] = true end
  for _, tok in ipairs(parts) do out[#out + 1] = special[tok] and tok or (bytes.decode(tok)) end
  return table.concat(out)
end

M.Tokenizer = Tokenizer
check.export(M)
return M
