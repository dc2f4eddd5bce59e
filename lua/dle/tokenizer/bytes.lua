--- dle.tokenizer.bytes: GPT-2's bytes-to-unicode map. Every byte gets a printable character: the
-- printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves, the other 68 bytes
-- (controls, space, 0x7F-0xA0, 0xAD) for U+0100 onwards in byte order. Tokens of a byte-level BPE
-- vocabulary are strings of these characters.
local B = {}

local to_char, to_byte = {}, {}
do
  local function printable(b) return (b >= 33 and b <= 126) or (b >= 161 and b <= 172) or (b >= 174 and b <= 255) end
  local n = 0
  for b = 0, 255 do
    local cp = b
    if not printable(b) then
      cp = 256 + n
      n = n + 1
    end
    local ch = utf8.char(cp)
    to_char[b], to_byte[ch] = ch, b
  end
end

--- The character (a UTF-8 string) standing for byte b (0..255).
B.char_of = to_char
--- The byte (0..255) a character stands for, or nil.
B.byte_of = to_byte

--- A byte string as a string of the mapped characters.
function B.encode(s)
  local out = {}
  for i = 1, #s do out[i] = to_char[s:byte(i)] end
  return table.concat(out)
end

--- The bytes a string of mapped characters stands for; characters outside the map are kept as
-- their own UTF-8 (and reported by the second result, true).
function B.decode(s)
  local out, odd = {}, false
  for _, cp in utf8.codes(s, true) do
    local ch = utf8.char(cp)
    local b = to_byte[ch]
    if b then out[#out + 1] = string.char(b) else out[#out + 1] = ch; odd = true end
  end
  return table.concat(out), odd
end

return B
