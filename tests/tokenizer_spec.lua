--- dle.tokenizer: GPT-2's byte-to-unicode map (a bijection of the 256 bytes onto printable
-- characters), its pre-tokenization regex (contractions, spaces, digits, punctuation, Unicode
-- letters and numbers), byte-level BPE with hand-written vocabularies and merges (tokenizer.json in
-- both merge formats, vocab.json + merges.txt, special tokens), round trips of arbitrary UTF-8 and
-- random bytes, and the errors of bad files.
local dle = require("dle")
local H = require("helpers")
local bytes = require("dle.tokenizer.bytes")
local pretokenize = require("dle.tokenizer.pretokenize")

local DIR = H.tmpdir()
teardown(function() os.execute("rm -rf '" .. DIR .. "'") end)

-- The message of the error fn(...) must raise.
local function err_of(fn, ...)
  local args = table.pack(...)
  return H.assert_error(function() return fn(table.unpack(args, 1, args.n)) end)
end

describe("GPT-2's byte-to-unicode map", function()
  it("maps the 256 bytes to 256 distinct characters; printable Latin-1 bytes to themselves", function()
    local seen, n = {}, 0
    for b = 0, 255 do
      local ch = bytes.char_of[b]
      assert.is_nil(seen[ch])
      seen[ch], n = true, n + 1
      assert.are.equal(b, bytes.byte_of[ch])
    end
    assert.are.equal(256, n)
    assert.are.equal("A", bytes.char_of[65])
    assert.are.equal("Ġ", bytes.char_of[32])       -- space: U+0120, GPT-2's familiar marker
    assert.are.equal("Ċ", bytes.char_of[10])       -- newline: U+010A
    assert.are.equal("é", bytes.char_of[0xE9])
    assert.are.equal(utf8.char(0x100), bytes.char_of[0])
    assert.are.equal(utf8.char(0x143), bytes.char_of[0xAD])   -- the last unprintable byte
  end)

  it("round-trips random byte strings", function()
    local g = dle.Generator(5)
    for _ = 1, 20 do
      local vals = dle.randint(0, 256, {200}, {generator = g}):totable()
      local s = string.char(table.unpack(vals))
      assert.are.equal(s, (bytes.decode(bytes.encode(s))))
    end
  end)
end)

describe("GPT-2 pre-tokenization", function()
  local cases = {
    {"Hello world, it's 2024!", {"Hello", " world", ",", " it", "'s", " 2024", "!"}},
    {"don't DON'T they're we've I'd you'll I'm", {"don", "'t", " DON", "'", "T", " they", "'re", " we", "'ve",
      " I", "'d", " you", "'ll", " I", "'m"}},
    {"a   b", {"a", "  ", " b"}},                      -- \s+(?!\S): all spaces but the last
    {"end  ", {"end", "  "}},                           -- trailing spaces: all of them
    {"x\n\ny", {"x", "\n", "\n", "y"}},
    {"a\tb \t c", {"a", "\t", "b", " \t", " c"}},
    {"x=3.14; y+=42 ...!?", {"x", "=", "3", ".", "14", ";", " y", "+=", "42", " ...!?"}},
    {"naïve café Привет 世界", {"naïve", " café", " Привет", " 世界"}},
    {"２３ ½ ٣", {"２３", " ½", " ٣"}},             -- fullwidth, vulgar fraction, Arabic-Indic: numbers
    {"a'b 's", {"a", "'", "b", " '", "s"}},
    {"emoji 🙂🙂!", {"emoji", " 🙂🙂!"}},
    {"", {}},
  }
  for _, c in ipairs(cases) do
    local shown = c[1]:gsub("\n", "\\n"):gsub("\t", "\\t")
    it('splits "' .. shown .. "\" as GPT-2's regex does", function()
      assert.are.same(c[2], pretokenize.split(c[1]))
    end)
  end

  -- the reference: GPT-2's pattern run by Python's regex module (Debian python3-regex)
  -- (without the ASan preload, which under scripts/test --asan would reach Python)
  local PY = "env -u LD_PRELOAD /usr/bin/python3"
  local have_regex = os.execute(PY .. " -c 'import regex' 2>/dev/null")
  for _, scheme in ipairs({"gpt2", "llama3", "qwen2"}) do
    local name = "splits 300 random strings (letters, digits, spaces, newlines, apostrophes, marks, CJK, emoji) as "
      .. "Python's regex module does with " .. scheme .. "'s pattern"
    if not have_regex then
      pending(name .. " (needs /usr/bin/python3 with regex: Debian python3-regex)")
    else
      it(name, function()
        local alphabet = {"a", "b", "s", "t", "d", "m", "l", "r", "e", "v", "Z", "S", "T", "L", "é", "ß", "ſ", "Ж",
          "中", "ー", "0", "7", "1", "2", "２", "½", "٣", " ", " ", " ", "\t", "\n", "\r", "\r\n",
          utf8.char(0xA0), utf8.char(0x3000), utf8.char(0x2009), "'", "'", "'", ",", ".", "!", "-", "_", "$", "🙂",
          utf8.char(0x301), utf8.char(0x200B), "\0", "\x7f"}
        local g = dle.Generator(17)
        local strings = {}
        for i = 1, 300 do
          local n = dle.randint(1, 16, {1}, {generator = g}):item()
          local picks = dle.randint(1, #alphabet + 1, {n}, {generator = g}):totable()
          local parts = {}
          for k, p in ipairs(picks) do parts[k] = alphabet[p] end
          strings[i] = table.concat(parts)
        end
        local input = DIR .. "/strings.json"
        local quoted = {}
        for i, s in ipairs(strings) do quoted[i] = dle.io.json_string(s) end
        H.write_file(input, "{\"pattern\":" .. dle.io.json_string(pretokenize.PATTERNS[scheme]) .. ",\"strings\":["
          .. table.concat(quoted, ",") .. "]}")
        local script = DIR .. "/split.py"
        H.write_file(script, table.concat({
          "import json, regex",
          "d = json.load(open('" .. input .. "'))",
          "pat = regex.compile(d['pattern'])",
          "print(json.dumps([pat.findall(s) for s in d['strings']]))",
        }, "\n"))
        local p = io.popen(PY .. " " .. script)
        local want = dle.io.json_decode(p:read("a"))
        p:close()
        assert.are.equal(300, #want)
        for i, s in ipairs(strings) do
          assert.are.same(want[i], pretokenize.split(s, scheme), string.format("%s, string %d: %q", scheme, i, s))
        end
      end)
    end
  end

  it("splits invalid UTF-8 without losing bytes", function()
    local s = "ab\xff\xfe cd\xc3"
    assert.are.equal(s, table.concat(pretokenize.split(s)))
  end)
end)

-- A tokenizer whose vocabulary holds every byte's character (ids 0..255 in byte order) plus merges.
local function byte_vocab()
  local vocab = {}
  for b = 0, 255 do vocab[bytes.char_of[b]] = b end
  return vocab
end

local function write_tokenizer_json(path, vocab, merges, added, pre, model_extra)
  local items = {}
  for k, v in pairs(vocab) do items[#items + 1] = dle.io.json_string(k) .. ":" .. v end
  local ms = {}
  for i, m in ipairs(merges) do ms[i] = m end
  local added_parts = {}
  for i, a in ipairs(added or {}) do
    added_parts[i] = string.format('{"id":%d,"content":%s,"special":true}', a[2], dle.io.json_string(a[1]))
  end
  H.write_file(path, string.format('{"version":"1.0","added_tokens":[%s],"pre_tokenizer":%s,'
    .. '"model":{"type":"BPE",%s"vocab":{%s},"merges":[%s]}}', table.concat(added_parts, ","),
    pre or '{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}',
    model_extra or "", table.concat(items, ","), table.concat(ms, ",")))
end

describe("byte-level BPE", function()
  -- merges in rank order: "Ġ t" -> "Ġt", "h e" -> "he", "Ġt he" -> "Ġthe", "l l" -> "ll", "e ll" -> "ell"
  local MERGES = {{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"l", "l"}, {"e", "ll"}}
  local function vocab_with_merges()
    local v = byte_vocab()
    for i, m in ipairs(MERGES) do v[m[1] .. m[2]] = 255 + i end
    return v
  end
  -- a tokenizer.json of the byte vocabulary with MERGES as "a b" strings, loaded
  local function merges_tokenizer(path)
    local ms = {}
    for i, m in ipairs(MERGES) do ms[i] = dle.io.json_string(m[1] .. " " .. m[2]) end
    write_tokenizer_json(path, vocab_with_merges(), ms)
    return dle.tokenizer.load(path)
  end

  it("applies merges by rank (tokenizer.json, merges as \"a b\" strings) and decodes back", function()
    local tok = merges_tokenizer(DIR .. "/tokenizer.json")
    local ids = tok:encode("hello the tell")
    assert.are.equal("int64", ids:dtype())
    -- "hello" -> h e l l o -> "he" l l o -> "he" "ll" o (no "he ll" merge); " the" -> "Ġthe";
    -- " tell" -> "Ġt" e l l -> "Ġt" "ell"
    assert.are.same({257, 259, string.byte("o"), 258, 256, 260}, ids:totable())
    assert.are.equal("hello the tell", tok:decode(ids))
    assert.are.equal(261, tok.vocab_size)
  end)

  it("reads merges given as pairs, and vocab.json + merges.txt; both tokenize the same", function()
    local ms = {}
    for i, m in ipairs(MERGES) do ms[i] = "[" .. dle.io.json_string(m[1]) .. "," .. dle.io.json_string(m[2]) .. "]" end
    local dir = DIR .. "/pairs"
    os.execute("mkdir -p '" .. dir .. "'")
    write_tokenizer_json(dir .. "/tokenizer.json", vocab_with_merges(), ms)
    local dir2 = DIR .. "/vm"
    os.execute("mkdir -p '" .. dir2 .. "'")
    local items = {}
    for k, v in pairs(vocab_with_merges()) do items[#items + 1] = dle.io.json_string(k) .. ":" .. v end
    H.write_file(dir2 .. "/vocab.json", "{" .. table.concat(items, ",") .. "}")
    local lines = {"#version: 0.2"}
    for _, m in ipairs(MERGES) do lines[#lines + 1] = m[1] .. " " .. m[2] end
    H.write_file(dir2 .. "/merges.txt", table.concat(lines, "\n") .. "\n")
    local a, b = dle.tokenizer.load(dir), dle.tokenizer.load(dir2)
    local c = dle.tokenizer.load(dir2 .. "/vocab.json")
    local text = "the hell, the tell!"
    assert.are.same(a:encode(text):totable(), b:encode(text):totable())
    assert.are.same(a:encode(text):totable(), c:encode(text):totable())
  end)

  it("round-trips arbitrary UTF-8 and random bytes", function()
    local tok = merges_tokenizer(DIR .. "/rt.json")
    for _, s in ipairs({"", " ", "Grüße, 世界! 🙂 it's\n\n  tell   the\t", "ab\xff\xfe\0 \xc3"}) do
      assert.are.equal(s, tok:decode(tok:encode(s)))
    end
    local g = dle.Generator(9)
    for _ = 1, 10 do
      local s = string.char(table.unpack(dle.randint(0, 256, {300}, {generator = g}):totable()))
      assert.are.equal(s, tok:decode(tok:encode(s)))
    end
  end)

  it("matches special (added) tokens literally and decodes them as text", function()
    local path = DIR .. "/special.json"
    write_tokenizer_json(path, byte_vocab(), {}, {{"<|endoftext|>", 300}})
    local tok = dle.tokenizer.load(path)
    local ids = tok:encode("a<|endoftext|>b")
    assert.are.same({string.byte("a"), 300, string.byte("b")}, ids:totable())
    assert.are.equal("a<|endoftext|>b", tok:decode(ids))
  end)

  -- Llama 3's pre_tokenizer: a Split by its regex, then a ByteLevel that only maps bytes
  local function split_pre(scheme)
    return '{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":'
      .. dle.io.json_string(pretokenize.PATTERNS[scheme]) .. '},"behavior":"Isolated","invert":false},'
      .. '{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]}'
  end

  it("reads a Split pre-tokenizer by Llama 3's or Qwen2's regex: digits split in threes (ones), merges stay inside",
     function()
    -- one merge "3 4": GPT-2 keeps "123456" whole, so 3 and 4 merge; Llama 3 splits 123|456, Qwen2 every digit
    local v = byte_vocab()
    v["34"] = 256
    local path = DIR .. "/l3.json"
    local text = "x 123456"
    write_tokenizer_json(path, v, {'"3 4"'}, nil, split_pre("llama3"))
    local l3 = dle.tokenizer.load(path)
    assert.are.equal("llama3", l3.scheme)
    write_tokenizer_json(path, v, {'"3 4"'})
    local g2 = dle.tokenizer.load(path)
    write_tokenizer_json(path, v, {'"3 4"'}, nil, split_pre("qwen2"))
    local q2 = dle.tokenizer.load(path)
    local function has_34(tok)
      for _, id in ipairs(tok:encode(text):totable()) do if id == 256 then return true end end
      return false
    end
    assert.is_true(has_34(g2))
    assert.is_false(has_34(l3))
    assert.is_false(has_34(q2))
    for _, tok in ipairs({l3, g2, q2}) do assert.are.equal(text, tok:decode(tok:encode(text))) end
  end)

  it("ignore_merges (Llama 3): a pre-token found in the vocabulary is one token, merges or not", function()
    local v = byte_vocab()
    v["Ġworld"] = 300
    local path = DIR .. "/im.json"
    write_tokenizer_json(path, v, {}, nil, split_pre("llama3"), '"ignore_merges":true,')
    local tok = dle.tokenizer.load(path)
    assert.are.same({string.byte("a"), 300}, tok:encode("a world"):totable())
    write_tokenizer_json(path, v, {}, nil, split_pre("llama3"))
    local plain = dle.tokenizer.load(path)
    assert.are.equal(7, plain:encode("a world"):numel())
  end)

  it("an unknown Split regex or a Split without ByteLevel is an error quoting it", function()
    local path = DIR .. "/bad_split.json"
    local pre = '{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\\\d+"},'
      .. '"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]}'
    write_tokenizer_json(path, byte_vocab(), {}, nil, pre)
    assert.matches("pre%-tokenizer Split by .* is not supported", err_of(dle.tokenizer.load, path))
    local only = '{"type":"Split","pattern":{"Regex":' .. dle.io.json_string(pretokenize.PATTERNS.llama3)
      .. '},"behavior":"Isolated","invert":false}'
    write_tokenizer_json(path, byte_vocab(), {}, nil, only)
    assert.matches("without ByteLevel is not supported", err_of(dle.tokenizer.load, path))
  end)

  it("bad files and ids are errors naming the function and the file", function()
    local missing = DIR .. "/nothing"
    assert.matches("dle.tokenizer.load: .*nothing is not a tokenizer.json", err_of(dle.tokenizer.load, missing))
    local path = DIR .. "/bad.json"
    H.write_file(path, "{not json")
    assert.matches("dle.tokenizer.load: .*bad.json: .*invalid JSON", err_of(dle.tokenizer.load, path))
    write_tokenizer_json(path, byte_vocab(), {}, nil, '{"type":"Whitespace"}')
    assert.matches("pre%-tokenizer Whitespace is not supported", err_of(dle.tokenizer.load, path))
    write_tokenizer_json(path, byte_vocab(), {})
    local tok = dle.tokenizer.load(path)
    assert.matches("decode: id 999 %(position 2%) is not in the vocabulary", err_of(tok.decode, tok, {1, 999}))
    assert.matches("encode: text must be a string, got number", err_of(tok.encode, tok, 42))
  end)
end)
