--- dle.tokenizer.pretokenize: GPT-2's pre-tokenization, the regular expression
--   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
-- written out as a scanner over code points (Lua patterns have no Unicode classes): at each
-- position the first alternative that matches, taking as much as it can, as the regex engine does.
-- \p{L} and \p{N} come from Unicode's tables (dle.tokenizer.unicode_classes), \s is White_Space.
-- Text that is not valid UTF-8 is scanned byte by byte past the bad bytes (each is "other").
local classes = require "dle.tokenizer.unicode_classes"

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

--- Splits s into GPT-2's pre-tokens (a list of strings whose concatenation is s).
function P.split(s)
  local cps, at = decode(s)
  local n = #cps
  local cls = {}
  for i = 1, n do cls[i] = cps[i] < 0 and "O" or class_of(cps[i]) end
  local out = {}
  local i = 1
  local function run(j, c) -- end of the run of class c starting at j (j itself included)
    while j <= n and cls[j] == c do j = j + 1 end
    return j
  end
  while i <= n do
    local j
    if cps[i] == 39 then -- "'": the contractions, lower case only (as GPT-2's pattern)
      for _, c in ipairs(CONTRACTIONS) do
        if s:sub(at[i] + 1, at[i] + #c) == c and at[i] + #c < at[n + 1] then j = i + 1 + #c; break end
      end
    end
    if not j then
      local k = (cps[i] == 32 and i < n and cls[i + 1] ~= "S") and i + 1 or i
      local c = cls[k]
      if c ~= "S" then
        j = run(k, c)
      else
        local e = run(i, "S") -- \s+(?!\S): all of it at the end, else all but the last one
        if e > n or e - i == 1 then j = e else j = e - 1 end
      end
    end
    out[#out + 1] = s:sub(at[i], at[j] - 1)
    i = j
  end
  return out
end

return P
