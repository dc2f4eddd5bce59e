--- dle.tokenizer.pretokenize: the pre-tokenization regular expressions of the byte-level BPE
-- tokenizers dle reads, each written out as a scanner over code points (Lua patterns have no
-- Unicode classes): at each position the first alternative that matches, taking as much as it
-- can, as the regex engine does. The schemes (P.PATTERNS holds their regexes):
--   gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
--   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
--           \s*[\r\n]+|\s+(?!\S)|\s+
--   qwen2:  llama3's with \p{N} (one digit) for \p{N}{1,3}
-- \p{L} and \p{N} come from Unicode's tables (dle.tokenizer.unicode_classes), \s is White_Space.
-- Text that is not valid UTF-8 is scanned byte by byte past the bad bytes (each is "other").
local classes = require("dle.tokenizer.unicode_classes")

local P = {}

-- Binary search of cp in a flat list of inclusive ranges {a1, b1, a2, b2, ...}.
local function in_ranges(r, cp)
  local lo, hi = 1, #r // 2
  while lo <= hi do
    local mid = (lo + hi) // 2
    if cp < r[2 * mid - 1] then hi = mid - 1
    elseif cp > r[2 * mid] then lo = mid + 1
    else return true end
  end
  return false
end

local SPACE = {[0x20] = true, [0x85] = true, [0xA0] = true, [0x1680] = true, [0x2028] = true, [0x2029] = true,
  [0x202F] = true, [0x205F] = true, [0x3000] = true}
for c = 0x09, 0x0D do SPACE[c] = true end
for c = 0x2000, 0x200A do SPACE[c] = true end

-- The class of a code point: "L" letter, "N" number, "S" white space, "O" other.
local function class_of(cp)
  if cp < 128 then
    if (cp >= 65 and cp <= 90) or (cp >= 97 and cp <= 122) then return "L" end
    if cp >= 48 and cp <= 57 then return "N" end
    if SPACE[cp] then return "S" end
    return "O"
  end
  if SPACE[cp] then return "S" end
  if in_ranges(classes.L, cp) then return "L" end
  if in_ranges(classes.N, cp) then return "N" end
  return "O"
end
P.class_of = class_of

-- Code points and byte offsets of s: cps[i], at[i] (start byte of i), at[n + 1] = #s + 1. A byte
-- that does not start valid UTF-8 is a code point of its own (class "O").
local function decode(s)
  local cps, at, i, n = {}, {}, 1, #s
  while i <= n do
    local ok, cp = pcall(utf8.codepoint, s, i)
    local len
    if ok then
      len = #utf8.char(cp)
    else
      cp, len = -1, 1
    end
    cps[#cps + 1], at[#at + 1] = cp, i
    i = i + len
  end
  at[#at + 1] = n + 1
  return cps, at
end

local CONTRACTIONS = {"s", "t", "re", "ve", "m", "ll", "d"}

P.PATTERNS = {
  gpt2 = [['s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+]],
  llama3 = [[(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|]]
    .. [[\s*[\r\n]+|\s+(?!\S)|\s+]],
  qwen2 = [[(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|]]
    .. [[\s*[\r\n]+|\s+(?!\S)|\s+]],
}

--- The scheme whose regex is pattern (a tokenizer.json Split pre-tokenizer's), or nil.
function P.scheme_of(pattern)
  for name, p in pairs(P.PATTERNS) do if p == pattern then return name end end
  return nil
end

-- What differs between the schemes: contractions in any case, a letter run's optional first
-- character (" " only, or any one that is not CR/LF/letter/digit), the longest digit run (nil:
-- any, with an optional leading space), newlines ending a punctuation run and \s*[\r\n]+.
local SCHEMES = {
  gpt2 = {fold = false, lead = "space", digits = nil, newlines = false},
  llama3 = {fold = true, lead = "other", digits = 3, newlines = true},
  qwen2 = {fold = true, lead = "other", digits = 1, newlines = true},
}

local function is_newline(cp) return cp == 10 or cp == 13 end

--- Splits s into pre-tokens (a list of strings whose concatenation is s) by the scheme (default gpt2).
function P.split(s, scheme)
  local sc = SCHEMES[scheme or "gpt2"] or error("pretokenize.split: unknown scheme " .. tostring(scheme))
  local cps, at = decode(s)
  local n = #cps
  local cls = {}
  for i = 1, n do cls[i] = cps[i] < 0 and "O" or class_of(cps[i]) end
  local out = {}
  local i = 1
  local function run(j, c, limit) -- end of the run of class c from j (at most limit long)
    local stop = limit and math.min(n + 1, j + limit) or n + 1
    while j < stop and cls[j] == c do j = j + 1 end
    return j
  end
  -- whether code point cp is the ASCII letter ch, or (folding case) its capital or a letter that
  -- case-folds to it (U+017F long s folds to s)
  local function same_letter(cp, ch)
    local b = ch:byte()
    return cp == b or sc.fold and (cp == b - 32 or (ch == "s" and cp == 0x17F))
  end
  local function contraction()
    if cps[i] ~= 39 then return nil end
    for _, c in ipairs(CONTRACTIONS) do
      local ok = i + #c <= n
      for k = 1, #c do ok = ok and same_letter(cps[i + k], c:sub(k, k)) end
      if ok then return i + 1 + #c end
    end
  end
  local function letters() -- a letter run with its optional lead character
    if cls[i] == "L" then return run(i, "L") end
    if i < n and cls[i + 1] == "L" then
      local lead = sc.lead == "space" and cps[i] == 32
        or sc.lead == "other" and cls[i] ~= "N" and not is_newline(cps[i])
      if lead then return run(i + 1, "L") end
    end
  end
  local function digits()
    if sc.digits then return cls[i] == "N" and run(i, "N", sc.digits) or nil end
    local k = (cps[i] == 32 and i < n and cls[i + 1] == "N") and i + 1 or i
    return cls[k] == "N" and run(k, "N") or nil
  end
  local function punctuation() -- ` ?[^\s\p{L}\p{N}]+`, then [\r\n]* when the scheme has it
    local k = (cps[i] == 32 and i < n and cls[i + 1] == "O") and i + 1 or i
    if cls[k] ~= "O" then return nil end
    local j = run(k, "O")
    if sc.newlines then while j <= n and is_newline(cps[j]) do j = j + 1 end end
    return j
  end
  local function spaces() -- \s*[\r\n]+ (when the scheme has it), then \s+(?!\S), then \s+
    local e = run(i, "S")
    if sc.newlines then
      for j = e - 1, i, -1 do if is_newline(cps[j]) then return j + 1 end end
    end
    if e > n or e - i == 1 then return e end
    return e - 1
  end
  while i <= n do
    local j = contraction() or letters() or digits() or punctuation() or spaces()
    out[#out + 1] = s:sub(at[i], at[j] - 1)
    i = j
  end
  return out
end

return P
