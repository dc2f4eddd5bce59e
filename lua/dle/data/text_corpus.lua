--- dle.data.TextCorpus: a byte-level text corpus for character language models.
--   local c = dle.data.text_corpus("kjv")          -- or {path = "input.txt"}
--   local ids = c:encode("In the beginning")         -- int64 ids, 1-based
--   print(c:decode(ids), c.vocab_size)
--   local x, y = c:batch(32, 128, {generator = g})   -- random windows, y is x shifted by one
-- data is the file's bytes as a uint8 tensor (memory-mapped, never copied); ids maps every byte
-- to its 1-based vocabulary id (int64); vocab lists the distinct bytes in byte order.
local dle = require("dle")
local check = require("dle.check")

local TextCorpus = {}
TextCorpus.__index = TextCorpus
TextCorpus.__name = "dle.data.TextCorpus"

local function file_size(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local size = f:seek("end")
  f:close()
  return size
end

-- The cache directory: $DLE_CACHE, else ~/.cache/dle.
local function cache_dir(opts)
  local dir = opts.cache or os.getenv("DLE_CACHE")
  if not dir or dir == "" then
    local home = os.getenv("HOME")
    if not home or home == "" then error("text_corpus: neither DLE_CACHE nor HOME is set", 0) end
    dir = home .. "/.cache/dle"
  end
  return dir
end

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Generates the King James Bible text (one verse per line, references stripped) into
-- dir/kjv.txt unless it is already there; returns the path.
local function kjv_path(opts)
  local dir = cache_dir(opts)
  local path = dir .. "/kjv.txt"
  if file_size(path) then return path end
  local probe = io.popen("command -v bible 2>/dev/null")
  local found = probe and probe:read("a") or ""
  if probe then probe:close() end
  if found == "" then
    error("text_corpus: the kjv corpus needs the `bible` command: install the Debian packages "
      .. "bible-kjv-text and bible-kjv", 0)
  end
  os.execute("mkdir -p " .. shell_quote(dir))
  local p = io.popen("bible -f -l 100000 'gen1:1-rev22:21' </dev/null")
  local text = p:read("a")
  p:close()
  local lines, n = {}, 0
  for line in text:gmatch("[^\n]+") do
    -- sed -E 's/^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ //'
    n = n + 1
    lines[n] = line:gsub("^[1-3]?%a+%d+:%d+ ", "", 1)
  end
  if n < 1000 then
    error(string.format("text_corpus: `bible` printed %d lines, expected about 31102 verses", n), 0)
  end
  -- Written to a temporary name and renamed, so a crash never leaves a partial corpus behind.
  local tmp = string.format("%s.tmp%d", path, math.random(1, 1 << 30))
  local f, err = io.open(tmp, "wb")
  if not f then error("text_corpus: cannot write the cache: " .. tostring(err), 0) end
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
  local ok, rerr = os.rename(tmp, path)
  if not ok then
    os.remove(tmp)
    error("text_corpus: cannot write the cache: " .. tostring(rerr), 0)
  end
  return path
end

--- Opens a corpus (use dle.data.text_corpus).
-- @param spec "kjv", or {path = file} or {name = "kjv", cache = dir}
-- @return TextCorpus
function TextCorpus.new(spec)
  local opts = type(spec) == "table" and spec or {name = spec}
  local path = opts.path
  if not path then
    if opts.name == "kjv" then path = kjv_path(opts)
    else
      error(string.format('text_corpus: expected {path = file} or the name "kjv", got %s',
        tostring(opts.name)), 0)
    end
  end
  local size, err = file_size(path)
  if not size then error("text_corpus: cannot open " .. tostring(err), 0) end
  if size == 0 then error("text_corpus: " .. path .. " is empty", 0) end
  local self = setmetatable({path = path}, TextCorpus)
  self.data = dle.data.memmap(path, "uint8", {size})
  -- The vocabulary: the distinct bytes, found by searching the text once per byte value.
  local f = assert(io.open(path, "rb"))
  local text = f:read("a")
  f:close()
  local vocab, lookup = {}, {}
  local table_ids = {}
  for b = 0, 255 do
    if text:find(string.char(b), 1, true) then
      vocab[#vocab + 1] = string.char(b)
      lookup[b] = #vocab
    end
    table_ids[b + 1] = lookup[b] or 0
  end
  self.vocab, self.vocab_size, self._lookup = vocab, #vocab, lookup
  -- ids = id_of_byte[byte + 1], gathered for the whole corpus at once.
  local id_of_byte = dle.tensor(table_ids, {dtype = "int64"})
  self.ids = id_of_byte:index_select(1, self.data:long():add_(1))
  return self
end

--- Number of bytes in the corpus.
function TextCorpus:__len() return self.data:numel() end

--- Encodes a string into vocabulary ids.
-- @param s string (every byte must be in the vocabulary)
-- @return int64 tensor of 1-based ids, of length #s
function TextCorpus:encode(s)
  if type(s) ~= "string" then error("TextCorpus:encode: expected a string, got " .. type(s), 2) end
  local out = {}
  for i = 1, #s do
    local id = self._lookup[s:byte(i)]
    if not id then
      error(string.format("TextCorpus:encode: byte %d (%q) at position %d is not in the vocabulary",
        s:byte(i), s:sub(i, i), i), 2)
    end
    out[i] = id
  end
  return dle.tensor(out, {dtype = "int64"})
end

--- Decodes ids back to a string.
-- @param ids int64 tensor (any shape, read in order) or a Lua list of 1-based ids
-- @return string
function TextCorpus:decode(ids)
  local list = ids
  if type(ids) ~= "table" then
    if not require("dle.core").is_tensor(ids) then
      error("TextCorpus:decode: expected a tensor or a list of ids, got " .. type(ids), 2)
    end
    list = ids:numel() > 0 and ids:reshape(-1):totable() or {}
  end
  local out = {}
  for i, id in ipairs(list) do
    local ch = self.vocab[math.tointeger(id)]
    if not ch then
      error(string.format("TextCorpus:decode: id %s at position %d is outside 1..%d", tostring(id), i,
        self.vocab_size), 2)
    end
    out[i] = ch
  end
  return table.concat(out)
end

--- Random training windows: x[b] = ids[s .. s+T-1], y[b] = ids[s+1 .. s+T] for random starts s.
-- @param batch_size B
-- @param block_size T (the corpus needs more than T bytes)
-- @param opts {generator = dle.Generator, ids = tensor (defaults to self.ids; e.g. a split made
--   with narrow)}
-- @return x, y int64 B x T
function TextCorpus:batch(batch_size, block_size, opts)
  opts = check.table(opts, "TextCorpus:batch", "options", true) or {}
  local ids = opts.ids or self.ids
  local n = ids:numel()
  if n <= block_size then
    error(string.format("TextCorpus:batch: %d ids cannot hold a window of %d plus its target", n,
      block_size), 2)
  end
  local starts = dle.randint(1, n - block_size + 1, {batch_size, 1},
    {dtype = "int64", generator = opts.generator})
  local idx = starts + dle.arange(0, block_size, 1, {dtype = "int64"})
  local flat = idx:reshape(-1)
  local x = ids:index_select(1, flat):view(batch_size, block_size)
  local y = ids:index_select(1, flat + 1):view(batch_size, block_size)
  return x, y
end

function TextCorpus:__tostring()
  return string.format("dle.data.TextCorpus(%s: %d bytes, vocabulary of %d)", self.path,
    self.data:numel(), self.vocab_size)
end

return TextCorpus
