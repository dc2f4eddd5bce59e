--- file_fuzz.lua — the file fuzzer: mutated files fed to every file loader of dle (dle.load,
-- dle.load_npy, dle.load_safetensors, dle.load_gguf, dle.models.from_gguf, dle.data.idx, dle.onnx.load,
-- dle.onnx.load_sequence, dle.onnx.load_optional,
-- dle.graph.load and the C API's
-- dle_graph_load + dle_graph_run). Seeds are valid files this script writes
-- itself with dle's writers (IDX and ONNX by hand); each case is one seed with 1-3 mutations: bit flips,
-- byte inserts and deletes, truncation, huge or negative sizes and counts written over integer
-- fields, dtype names swapped for wrong ones, numbers in text replaced (bad offsets and shapes),
-- control bytes (0x00-0x1F, 0x7F) and non-ASCII bytes put inside text fields (JSON strings, the
-- npy header, dle strings and dtype names).
-- The files are loaded in batches by a child process (this script with --child) under a time
-- limit (timeout -s KILL) and a memory limit (ulimit -v; under ASan, whose shadow memory
-- ulimit -v would break, ASan's hard_rss_limit_mb). Every load must return a value (whose
-- tensors are then read in full) or raise a Lua error string beginning with the loader's name
-- ("dle.load: ", "idx: "). Anything else is a failure: a crash or signal, a sanitizer report, a
-- time-out, a load slower than --slow seconds, an error like "attempt to index". Each failure is
-- saved as a reproducer (the file and a .txt with the reason) in the --out directory.
--   tests/fuzz/files --seed 7 --count 100000         the full run, under ASan (see that script)
--   scripts/dle tests/fuzz/file_fuzz.lua --count 300  a short run on the release build
--   scripts/dle tests/fuzz/file_fuzz.lua --seed 7 --only 1234   case 1234 alone, in this process
-- Options: --seed S (default 1), --count N (default 1000), --from I (first case, default 1),
--   --batch B (files per child, default 200), --formats dle,npy,... (default all),
--   --out DIR (reproducers, default /tmp/dle-file-fuzz-<seed>), --slow T (default 5 s, 20 s
--   under ASan),
--   --mem MB (memory limit per child, default 2048), --batch_seconds T (time limit per child,
--   default 60 s, 300 s under ASan), --only I.
-- Exit status 0 when no case failed.
-- Adding a format: one FORMATS entry {ext, name (the error prefix),
-- load(path), make_seed(r, dir) -> bytes, tokens (dtype-like names to swap), be (big-endian
-- integer fields)}.
-- tests/ on the path (the runner scripts set only lua/), for helpers.lua
local here = debug.getinfo(1, "S").source:match("^@(.-)[^/]*$") or "./"
package.path = here .. "../?.lua;" .. package.path
local dle = require("dle")

---------------------------------------------------------------- random numbers

-- A small deterministic generator (xorshift64*), one per case: case i is the same for any run.
local function rng(seed)
  local s = seed ~ 0x9E3779B97F4A7C15
  if s == 0 then s = 1 end
  local r = {}
  local function next64()
    s = s ~ (s >> 12)
    s = s ~ (s << 25)
    s = s ~ (s >> 27)
    return (s * 0x2545F4914F6CDD1D) >> 11   -- 53 non-negative bits
  end
  --- r(n): an integer in 1..n;  r(): a float in [0, 1)
  setmetatable(r, {__call = function(_, n)
    if n then return next64() % n + 1 end
    return next64() / (1 << 53)
  end})
  function r.pick(list) return list[r(#list)] end
  return r
end

local H = require("helpers")
local read_file, write_file = H.read_file, H.write_file

---------------------------------------------------------------- seeds

local DTYPES = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"}

-- A small random tensor of a random dtype, sometimes a view (transposed, narrowed, expanded).
local function random_tensor(r, dtypes)
  local ndim = r(4) - 1
  local shape = {}
  for i = 1, ndim do shape[i] = r(4) - 1 end
  local t = dle.randn(shape, {generator = r.gen}):mul(4):to(r.pick(dtypes or DTYPES))
  if ndim >= 2 and r(3) == 1 then t = t:transpose(1, 2) end
  if ndim >= 1 and t:size(1) > 1 and r(3) == 1 then t = t:narrow(1, 2, t:size(1) - 1) end
  if ndim == 0 and r(4) == 1 then t = t:view(1):expand(r(3), r(3)) end
  return t
end

-- The bytes of a file written by save(path) in dir.
local function saved(dir, ext, save)
  local p = dir .. "/seed." .. ext
  save(p)
  local s = read_file(p)
  os.remove(p)
  return s
end

local function seed_dle(r, dir)
  local base = random_tensor(r)
  local v = {step = r(1000), lr = r() , name = "run\0" .. r(99), flag = r(2) == 1,
    model = {w = base, tied = base, list = {1, 2.5, "x", {deep = true}}}}
  if base:dim() >= 1 and base:size(1) > 0 then v.model.view = base:select(1, 1) end
  if r(2) == 1 then v.extra = random_tensor(r) end
  if r(4) == 1 then v = random_tensor(r) end
  return saved(dir, "dle", function(p) dle.save(p, v) end)
end

local function seed_npy(r, dir)
  local t = random_tensor(r, {"float32", "float64", "float16", "int32", "int64", "uint8", "bool"})
  local s = saved(dir, "npy", function(p) dle.save_npy(p, t) end)
  local k = r(6)
  if k == 1 then      -- version 2.0: a 4-byte header length
    local hl = string.unpack("<I2", s, 9)
    s = "\x93NUMPY\2\0" .. string.pack("<I4", hl) .. s:sub(11)
  elseif k == 2 then  -- big-endian or Fortran order, as NumPy writes them
    s = s:gsub("'<", "'>", 1)
  elseif k == 3 then
    s = s:gsub("False", "True ", 1)
  end
  return s
end

local function seed_safetensors(r, dir)
  local t = {}
  for i = 1, r(4) - 1 do t[r.pick({"w", "b", "layer.0.weight", "emb\127", "é", tostring(i)})] = random_tensor(r) end
  local meta = r(2) == 1 and {format = "pt", note = "a\tb\"c"} or nil
  return saved(dir, "safetensors", function(p) dle.save_safetensors(p, t, meta, {copy_shared = true}) end)
end

-- IDX: magic 0 0 type ndim, big-endian u32 sizes, big-endian data. Sometimes gzip-compressed.
local IDX_TYPES = {[0x08] = 1, [0x09] = 1, [0x0B] = 2, [0x0C] = 4, [0x0D] = 4, [0x0E] = 8}
local function seed_idx(r, dir)
  local ty = r.pick({0x08, 0x09, 0x0B, 0x0C, 0x0D, 0x0E})
  local ndim = r(4)
  local parts, n = {string.char(0, 0, ty, ndim)}, 1
  for _ = 1, ndim do
    local d = r(5) - 1
    parts[#parts + 1] = string.pack(">I4", d)
    n = n * d
  end
  for i = 1, n * IDX_TYPES[ty] do parts[#parts + 1] = string.char((i * 37) % 256) end
  local s = table.concat(parts)
  if r(5) == 1 then
    local p = dir .. "/seed.idx"
    write_file(p, s)
    local pipe = assert(io.popen("gzip -nc '" .. p .. "'"))
    s = pipe:read("a")
    pipe:close()
    os.remove(p)
  end
  return s
end

-- An llm.c GPT-2 checkpoint (a 256-int32 header, then the parameters) of a tiny random model:
-- version 3 (float32) or 5 (bfloat16), padded vocab or not.
local function seed_llmc(r)
  local T, V, L, NH, C = r(4), r(6), r(2), 1, 2 * r(2)
  local Vp = V + r(3) - 1
  local version = r(2) == 1 and 3 or 5
  local n = Vp * C + T * C + L * (2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C)
    + 2 * C
  local parts = {string.pack("<" .. string.rep("i4", 8), 20240326, version, T, V, L, NH, C, Vp), string.rep("\0", 992)}
  local fmt = version == 3 and "<f" or "<I2"
  for i = 1, n do
    local v = (i * 7919 % 200 - 100) / 100
    local bf16 = string.unpack("<I4", string.pack("<f", v)) >> 16   -- the top half of the float32
    parts[#parts + 1] = version == 3 and string.pack(fmt, v) or string.pack(fmt, bf16)
  end
  return table.concat(parts)
end

-- A GGUF file: float32/float16/bfloat16 and Q8_0/Q4_0/Q4_K tensors, metadata of every value type
-- (arrays of numbers, strings and arrays), sometimes a general.alignment.
local function seed_gguf(r, dir)
  local tensors, meta, types = {}, {}, {}
  for k = 1, r(3) do
    tensors["t" .. k] = random_tensor(r, {"float32", "float16", "bfloat16"}):contiguous()
  end
  for k, kind in ipairs({"q8_0", "q4_0", "q4_k"}) do
    if r(2) == 1 then
      local cols = kind == "q4_k" and 256 or 32 * r(3)
      tensors["q" .. k] = dle.quantize(dle.randn(r(3), cols, {generator = r.gen}), kind)
    end
  end
  local scalar = {uint8 = 200, int8 = -5, uint16 = 60000, int16 = -300, uint32 = 70000, int32 = -70000,
    uint64 = 1 << 40, int64 = -(1 << 40), float32 = 0.5, float64 = 1 / 3, bool = true, string = "tok"}
  for ty, v in pairs(scalar) do
    if r(2) == 1 then meta["k." .. ty], types["k." .. ty] = v, ty end
    if r(3) == 1 then meta["a." .. ty], types["a." .. ty] = {v, v}, "array<" .. ty .. ">" end
  end
  meta["n.nested"], types["n.nested"] = {{"a", "b"}, {"c"}}, "array<array<string>>"
  if r(3) == 1 then meta["general.alignment"], types["general.alignment"] = 1 << (r(4) + 2), "uint32" end
  return saved(dir, "gguf", function(p) dle.save_gguf(p, tensors, meta, {types = types}) end)
end

-- A tiny random Llama or GPT-2 as a GGUF file, sometimes quantized (dle.models.from_gguf's input).
local function seed_gguf_model(r, dir)
  local g = r.gen
  local m
  if r(2) == 1 then
    m = dle.models.llama.Llama({vocab_size = 11, hidden_size = 32, intermediate_size = 64, num_hidden_layers = 1,
      num_attention_heads = 4, num_key_value_heads = r.pick({1, 2, 4}), max_position_embeddings = 16,
      tie_word_embeddings = r(2) == 1}, {generator = g})
  else
    m = dle.models.gpt2.GPT2({vocab_size = 11, n_positions = 16, n_embd = 32, n_layer = 1, n_head = 2}, {generator = g})
  end
  if r(2) == 1 then dle.nn.utils.quantize_(m, r.pick({"q8_0", "q4_0"})) end
  return saved(dir, "gguf", function(p) m:save_gguf(p) end)
end

-- An ONNX model (tests/onnx_writer.lua): a chain of a few ops over an input with a dynamic
-- batch, with initializers of several dtypes and an attribute or two.
local W = require("onnx_writer")
local function seed_onnx(r)
  local inits, nodes = {}, {}
  for k = 1, r(3) do
    inits[k] = W.tensor("w" .. k, random_tensor(r, {"float32", "float64", "int64", "int32", "uint8", "bool"}))
  end
  local prev = "x"
  for k = 1, r(4) do
    local op = r.pick({"Relu", "Sigmoid", "Softmax", "Transpose", "Identity"})
    local attrs = op == "Softmax" and {axis = W.int(-1)} or op == "Transpose" and {perm = W.ints({1, 0})} or nil
    nodes[k] = W.node(op, {prev}, {"h" .. k}, attrs)
    prev = "h" .. k
  end
  return W.model{opset = r.pick({7, 11, 13, 17}), nodes = nodes, initializers = inits,
                 inputs = {W.value("x", 1, {"N", r(4)})}, outputs = {W.value(prev, 1, {"N", "M"})}}
end

-- A SequenceProto of a few tensors, and an OptionalProto holding a tensor, such a sequence or
-- nothing: the values ONNX's backend tests store for sequence and optional inputs and outputs.
local function seed_onnx_sequence(r)
  local ts = {}
  for k = 1, r(4) - 1 do ts[k] = W.tensor("", random_tensor(r, {"float32", "int64", "bool", "uint8"})) end
  return W.sequence("s", ts)
end
local function seed_onnx_optional(r)
  local kind = r.pick({"tensor", "sequence", "none"})
  if kind == "tensor" then return W.optional("o", kind, W.tensor("", random_tensor(r, {"float32", "int32"}))) end
  if kind == "sequence" then return W.optional("o", kind, seed_onnx_sequence(r)) end
  return W.optional("o")
end

-- a small graph: a frozen linear + batch norm + relu (folded), or a trace with two results
local function seed_graph(r, dir)
  local nn = dle.nn
  local g
  if r(2) == 1 then
    local net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU())
    g = dle.freeze(net, dle.randn(2, 3, {generator = r.gen}))
  else
    local c = dle.randn(r(3), {generator = r.gen})
    g = dle.graph.trace(function(x) local v, i = (x * c):max(1); return v:tanh(), i, x:detach() end,
                        dle.randn(2, c:numel(), {generator = r.gen}))
  end
  return saved(dir, "dleg", function(p) dle.graph.save(p, g) end)
end

-- runs a loaded graph on zeros of its inputs' shapes (up to 1M elements each: a corrupt file may
-- declare any size); the ops' errors come back from g:run as "run: node k (op): ..."
local function run_graph(g)
  local xs = {}
  for k, n in ipairs(g.inputs) do
    local numel = 1
    for _, s in ipairs(n:shape()) do numel = numel * s end
    -- a size no input of this harness can have (checked before allocating: zeroing 16 GB is slow)
    if numel > 1e6 then return g end
    local made, x = pcall(dle.zeros, n:shape(), {dtype = n:dtype()})
    if not made then return g end
    xs[k] = x
  end
  local ok, res = pcall(g.run, g, table.unpack(xs))
  if ok then return res end
  error((tostring(res):gsub("^run: ", "dle.graph.load: (running the loaded graph) ")), 0)
end

local FORMATS = {
  dle = {ext = "dle", name = "dle.load", load = function(p) return dle.load(p) end, make_seed = seed_dle,
    tokens = {"float32", "float16", "bfloat16", "int64", "bool", "uint8"}},
  npy = {ext = "npy", name = "dle.load_npy", load = function(p) return dle.load_npy(p) end,
    make_seed = seed_npy, tokens = {"<f4", "<f8", "<f2", "<i4", "<i8", "|u1", "|b1", "False", "descr", "shape"}},
  safetensors = {ext = "safetensors", name = "dle.load_safetensors",
    load = function(p) return dle.load_safetensors(p) end, make_seed = seed_safetensors,
    tokens = {"F32", "F64", "F16", "BF16", "I32", "I64", "U8", "BOOL", "dtype", "shape", "data_offsets",
      "__metadata__"}},
  idx = {ext = "idx", name = "idx", load = function(p) return require("dle.data").idx(p) end,
    make_seed = seed_idx, be = true, tokens = {}},
  -- the memory-mapped path of dle.load_safetensors (the models' loaders use it)
  safetensors_mmap = {ext = "safetensors", name = "dle.load_safetensors",
    load = function(p) return dle.load_safetensors(p, {mmap = true}) end, make_seed = seed_safetensors,
    tokens = {"F32", "F64", "F16", "BF16", "I32", "I64", "U8", "BOOL", "dtype", "shape", "data_offsets"}},
  llmc = {ext = "bin", name = "dle.models.gpt2.from_llmc", make_seed = seed_llmc, tokens = {},
    load = function(p)
      local m = dle.models.gpt2.from_llmc(p)
      return dle.no_grad(function() return m(dle.tensor({{0}}, {dtype = "int64"})) end)
    end},
  -- quantized tensors are expanded in full (their blocks read)
  gguf = {ext = "gguf", name = "dle.load_gguf", make_seed = seed_gguf,
    tokens = {"general.alignment", "k.uint32", "k.string", "t1", "q1"},
    load = function(p)
      local t, m = dle.load_gguf(p)
      for _, v in pairs(t) do if dle.is_quantized(v) then v:dequantize() end end
      return t, m
    end},
  gguf_model = {ext = "gguf", name = "dle.models.from_gguf", make_seed = seed_gguf_model,
    tokens = {"general.architecture", "llama", "gpt2", "token_embd", "attn_q", "output", "llama.block_count",
      "llama.attention.head_count_kv"},
    load = function(p)
      local m = dle.models.from_gguf(p)
      return dle.no_grad(function() return m(dle.tensor({{0}}, {dtype = "int64"})) end)
    end},
  graph = {ext = "dleg", name = "dle.graph.load", load = function(p) return run_graph(dle.graph.load(p)) end,
    make_seed = seed_graph, tokens = {"float32", "int64", "matmul", "relu", "max", "tanh", "view", "conv2d"}},
  -- the C API's loader and runner (engine/graph_file.c), on the same files: its errors come back as
  -- dle_graph_load/dle_graph_run messages
  cgraph = {ext = "dleg", name = "dle_graph", make_seed = seed_graph,
    tokens = {"float32", "int64", "matmul", "relu", "max", "tanh", "view", "conv2d"},
    load = function(p)
      local ok, res = pcall(function()
        local c = dle.core._cgraph_load(p)
        local xs = {}
        for k, s in ipairs(dle.core._cgraph_inputs(c)) do
          local numel = 1
          for _, d in ipairs(s[1]) do numel = numel * d end
          if numel > 1e6 then return c end -- a size no input of this harness can have (as run_graph)
          local made, x = pcall(dle.zeros, s[1], {dtype = s[2]})
          if not made then return c end
          xs[k] = x
        end
        return dle.core._cgraph_run(c, table.unpack(xs))
      end)
      if ok then return res end
      -- dle_graph_load, dle_graph_input, dle_graph_run: one name for the classifier
      error((tostring(res):gsub("dle_graph_%a+: ", "dle_graph: ", 1)), 0)
    end},
  onnx = {ext = "onnx", name = "dle.onnx.load", load = function(p) return dle.onnx.load(p) end,
    make_seed = seed_onnx, tokens = {"Relu", "Sigmoid", "Softmax", "Transpose", "Identity", "axis", "perm"}},
  onnx_seq = {ext = "pb", name = "dle.onnx.load_sequence", load = function(p) return dle.onnx.load_sequence(p) end,
    make_seed = seed_onnx_sequence, tokens = {}},
  onnx_opt = {ext = "pb", name = "dle.onnx.load_optional", load = function(p) return dle.onnx.load_optional(p) end,
    make_seed = seed_onnx_optional, tokens = {}},
}
local FORMAT_NAMES = {"dle", "npy", "safetensors", "idx", "safetensors_mmap", "llmc", "onnx", "onnx_seq", "onnx_opt",
                      "graph", "cgraph"}

-- Not fuzzed: a loader that misbehaves on purpose, so that tests can check the classification
-- (file contents "ok", "named", "unnamed", "exit", "hang").
FORMATS.selftest = {ext = "txt", name = "selftest", tokens = {}, make_seed = function() return "ok" end,
  load = function(p)
    local s = read_file(p)
    if s == "named" then error("selftest: a named error", 0) end
    if s == "unnamed" then local x = nil; return x.field end
    if s == "exit" then os.exit(3) end
    if s == "hang" then while true do end end
    return 1
  end}

---------------------------------------------------------------- mutations

local HUGE = {0, 1, 2, 7, 8, 64, 255, 0x7F, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 32, 1 << 40,
  1 << 56, math.maxinteger // 16, math.maxinteger, math.mininteger, -1, -8, -64}
local BAD_TOKENS = {"float99", "F8", "<U4", "<c8", "|O", "int8", "I8", "complex64", "", "null", "[]",
  "{}", "\0", "F32\0", "BF16 "}
local BAD_NUMBERS = {"0", "-1", "4.5", "1e400", "-0", "9007199254740993", "18446744073709551616",
  "99999999999999999999", "NaN", "0x10", "1e3", "2147483648", "4294967296", "-9223372036854775808"}

-- Positions inside runs of at least 3 printable ASCII bytes (text fields), in the first 64 KB.
local function text_positions(s)
  local out = {}
  for a, run in s:sub(1, 65536):gmatch("()([%w%p ][%w%p ][%w%p ]+)") do
    for i = a, a + #run - 1 do out[#out + 1] = i end
  end
  return out
end

local function special_byte(r)
  if r(2) == 1 then return string.char(r(32) - 1) end   -- 0x00..0x1F
  if r(3) == 1 then return "\127" end
  return string.char(127 + r(128))                     -- 0x80..0xFF
end

local MUTATORS = {
  function(s, r)   -- bit flips
    local b = {s:byte(1, -1)}
    if #b == 0 then return s end
    for _ = 1, r(8) do
      local i = r(#b)
      b[i] = b[i] ~ (1 << (r(8) - 1))
    end
    local parts = {}
    for i = 1, #b, 4096 do parts[#parts + 1] = string.char(table.unpack(b, i, math.min(i + 4095, #b))) end
    return table.concat(parts)
  end,
  function(s, r)   -- random bytes inserted
    local i = r(#s + 1)
    local ins = {}
    for k = 1, r(16) do ins[k] = string.char(r(256) - 1) end
    return s:sub(1, i - 1) .. table.concat(ins) .. s:sub(i)
  end,
  function(s, r)   -- bytes deleted
    if #s == 0 then return s end
    local i = r(#s)
    return s:sub(1, i - 1) .. s:sub(i + r(16))
  end,
  function(s, r)   -- truncated
    return s:sub(1, r(#s + 1) - 1)
  end,
  function(s, r, fmt)   -- a huge, negative or edge integer over a 1/2/4/8-byte field
    if #s == 0 then return s end
    local w = r.pick({1, 2, 4, 8})
    local i = r(#s)
    local v = r.pick(HUGE)
    local be = fmt.be and r(4) > 1 or r(8) == 1
    local field = string.pack((be and ">" or "<") .. "i8", v)
    field = be and field:sub(9 - w) or field:sub(1, w)
    return s:sub(1, i - 1) .. field .. s:sub(i + w)
  end,
  function(s, r, fmt)   -- a dtype (or key) name swapped for another or a wrong one
    local toks = fmt.tokens
    if #toks == 0 then return s end
    local from = r.pick(toks)
    local to = r(2) == 1 and r.pick(toks) or r.pick(BAD_TOKENS)
    local a, b = s:find(from, 1, true)
    if not a then return s end
    if r(2) == 1 and #to ~= #from then   -- keep the length: length-prefixed fields stay aligned
      to = (to .. string.rep(" ", #from)):sub(1, #from)
    end
    return s:sub(1, a - 1) .. to .. s:sub(b + 1)
  end,
  function(s, r)   -- a number in text replaced (offsets, shapes, lengths)
    local spans = {}
    for a, num in s:sub(1, 65536):gmatch("()(%-?%d+)") do spans[#spans + 1] = {a, a + #num - 1} end
    if #spans == 0 then return s end
    local sp = r.pick(spans)
    return s:sub(1, sp[1] - 1) .. r.pick(BAD_NUMBERS) .. s:sub(sp[2] + 1)
  end,
  function(s, r)   -- control and non-ASCII bytes inside a text field, replacing or inserted
    local pos = text_positions(s)
    if #pos == 0 then return s end
    local i = r.pick(pos)
    if r(2) == 1 then return s:sub(1, i - 1) .. special_byte(r) .. s:sub(i + 1) end
    return s:sub(1, i - 1) .. special_byte(r) .. s:sub(i)
  end,
  function(s, r)   -- a region duplicated (repeated keys, records, nesting)
    if #s < 2 then return s end
    local a = r(#s)
    local b = math.min(#s, a + r(64))
    return s:sub(1, b) .. s:sub(a, b) .. s:sub(b + 1)
  end,
}

---------------------------------------------------------------- cases

local q = H.shell_quote

local function under_asan() return (os.getenv("LD_PRELOAD") or ""):find("asan") ~= nil end

local Fuzz = {}
Fuzz.__index = Fuzz

--- opts: seed, count, from, batch, slow, mem, out, formats (see the header), batch_seconds
-- (time limit of one child; default 60, 300 under ASan).
local function new(opts)
  opts.batch_seconds = opts.batch_seconds or (under_asan() and 300 or 60)
  opts.slow = opts.slow or (under_asan() and 20 or 5)
  local self = setmetatable({opts = opts, formats = {}}, Fuzz)
  for name in (opts.formats or table.concat(FORMAT_NAMES, ",")):gmatch("[^,]+") do
    assert(FORMATS[name], "file_fuzz: unknown format " .. name)
    self.formats[#self.formats + 1] = name
  end
  return self
end

-- The seed pool: 16 valid files per format, made once per run from the run's seed.
function Fuzz:seeds(dir)
  if self.pool then return self.pool end
  self.pool = {}
  local r = rng(self.opts.seed * 7919)
  r.gen = dle.Generator(self.opts.seed)   -- tensor values independent of dle's global RNG state
  for _, name in ipairs(self.formats) do
    local list = {}
    for k = 1, 16 do list[k] = FORMATS[name].make_seed(r, dir) end
    self.pool[name] = list
  end
  return self.pool
end

--- Case i: its format name and bytes.
function Fuzz:case(i, dir)
  local pool = self:seeds(dir)
  local r = rng(self.opts.seed * 1000003 + i)
  local name = self.formats[(i - 1) % #self.formats + 1]
  local fmt = FORMATS[name]
  local s = r.pick(pool[name])
  if r(20) > 1 then   -- 1 case in 20 is a seed as is: valid files must load
    for _ = 1, r(3) do s = r.pick(MUTATORS)(s, r, fmt) end
  end
  return name, s
end

---------------------------------------------------------------- the child: loading

-- Reads every tensor in v in full (a bad view geometry shows up here, under ASan).
local function touch(v, depth)
  if dle.is_tensor(v) then
    if v:numel() <= (1 << 24) then v:sum() end
  elseif type(v) == "table" and depth < 50 then
    for k, x in pairs(v) do touch(k, depth + 1); touch(x, depth + 1) end
  end
end

--- Loads the files listed in listfile ("i format path" lines); writes "B i", then "O i secs" or
-- "E i secs message" per file to outfile, flushed, so the parent sees where a crash happened.
local function child(listfile, outfile)
  local out = assert(io.open(outfile, "w"))
  for line in io.lines(listfile) do
    local i, name, path = line:match("^(%d+) (%S+) (.*)$")
    out:write("B ", i, "\n")
    out:flush()
    local t0 = os.clock()
    local res = table.pack(pcall(FORMATS[name].load, path))
    if res[1] then
      touch(res[2], 0)
      touch(res[3], 0)
      out:write(string.format("O %s %.3f\n", i, os.clock() - t0))
    else
      local msg = type(res[2]) == "string" and res[2] or ("non-string error: " .. tostring(res[2]))
      -- dle puts the caller's line (here, this file's) in front of its errors: that is not the
      -- loader's doing; a line inside dle stays and fails the case
      local own = msg:match("^([^:\n]+):%d+: ")
      if own and own:match("[^/]*$") == "file_fuzz.lua" then msg = msg:gsub("^[^:\n]+:%d+: ", "", 1) end
      out:write(string.format("E %s %.3f %s\n", i, os.clock() - t0, (msg:gsub("[\r\n]", " "))))
    end
    out:flush()
    res = nil -- luacheck: ignore 311 (dropped for the collection)
    collectgarbage()
  end
  out:close()
end

---------------------------------------------------------------- the parent: batches

-- This script's path, to run it again as the child.
local SCRIPT = debug.getinfo(1, "S").source:match("^@(.*)$")

--- Runs one child over cases[first..last]; returns the index of the next case to run and adds
-- failures to self.failures.
function Fuzz:run_child(cases, first, dir)
  local o = self.opts
  local list = dir .. "/list"
  local lf = assert(io.open(list, "w"))
  for k = first, #cases do lf:write(cases[k].i, " ", cases[k].name, " ", cases[k].path, "\n") end
  lf:close()
  local outfile, errfile = dir .. "/out", dir .. "/err"
  local limit = under_asan() and "" or string.format("ulimit -v %d; ", o.mem * 1024)
  local asan = under_asan() and string.format("ASAN_OPTIONS=%s ",
    q((os.getenv("ASAN_OPTIONS") or "") .. ":hard_rss_limit_mb=" .. o.mem)) or ""
  local cmd = string.format("%sLUA_PATH=%s LUA_CPATH=%s %sexec timeout -s KILL %s lua5.4 %s --child %s %s 2>%s",
    limit, q(package.path), q(package.cpath), asan, o.batch_seconds, q(SCRIPT), q(list), q(outfile), q(errfile))
  local _, how, code = os.execute("(" .. cmd .. ")")
  local by_i = {}
  for k = first, #cases do by_i[cases[k].i] = k end
  local last_begun, status = nil, {}
  for line in io.lines(outfile) do
    local kind, i, rest = line:match("^(%u) (%d+) ?(.*)$")
    i = math.tointeger(tonumber(i))
    if kind == "B" then last_begun = i
    else
      status[i] = true
      local secs, msg = rest:match("^(%S+) ?(.*)$")
      local case = cases[by_i[i]]
      local outcome = kind == "O" and "ok" or "errors"
      local per = self.stats.by[case.name] or {ok = 0, errors = 0}
      self.stats.by[case.name] = per
      self.stats[outcome], per[outcome] = self.stats[outcome] + 1, per[outcome] + 1
      if kind == "E" and msg:sub(1, #FORMATS[case.name].name + 2) ~= FORMATS[case.name].name .. ": " then
        self:fail(case, "error not naming " .. FORMATS[case.name].name .. ": " .. msg)
      elseif tonumber(secs) > o.slow then
        self:fail(case, string.format("slow: %s s (limit %s s)", secs, o.slow))
      end
    end
  end
  local sanitizer = read_file(errfile)
  -- a report, as scripts/test recognises one (ASan's "failed to allocate" warnings are not: a
  -- huge request failing is the expected path, reported by dle as an error)
  local report = sanitizer:find("==%d+==ERROR: ") or sanitizer:find("SUMMARY: %a*Sanitizer")
    or sanitizer:find(":%d+:%d+: runtime error: ")
  local clean = how == "exit" and code == 0 and not report
  if clean and last_begun == cases[#cases].i and status[last_begun] then return #cases + 1 end
  if last_begun and not status[last_begun] then
    local reason = how == "signal" and ("signal " .. code) or (code == 137 or code == 124) and "killed: time-out"
      or ("exit status " .. tostring(code) .. (code > 128 and " (signal " .. (code - 128) .. ")" or ""))
    self:fail(cases[by_i[last_begun]], reason .. "\n" .. sanitizer:sub(1, 4000))
    return by_i[last_begun] + 1
  end
  -- the child died outside any load (at start or exit: leaks, a crash in the collector)
  self:fail(cases[#cases], "child failed outside a load: " .. tostring(how) .. " " .. tostring(code) ..
    "\n" .. sanitizer:sub(1, 4000))
  return #cases + 1
end

--- Records a failure and saves its reproducer in opts.out.
function Fuzz:fail(case, reason)
  os.execute("mkdir -p " .. q(self.opts.out))
  local base = string.format("%s/case-%d-%d.%s", self.opts.out, self.opts.seed, case.i, FORMATS[case.name].ext)
  write_file(base, case.bytes)
  write_file(base .. ".txt", string.format("%s\nreplay: tests/fuzz/files --seed %d --only %d   (ASan; "
    .. "scripts/dle tests/fuzz/file_fuzz.lua ... on the release build)\n", reason, self.opts.seed, case.i))
  self.failures[#self.failures + 1] = {i = case.i, name = case.name, reason = reason, file = base}
end

--- Runs cases from..from+count-1 in batches; returns the failures.
function Fuzz:run(dir)
  local o = self.opts
  self.failures, self.stats = {}, {ok = 0, errors = 0, files = 0, by = {}}
  local last = o.from + o.count - 1
  for start = o.from, last, o.batch do
    local cases = {}
    for i = start, math.min(last, start + o.batch - 1) do
      local name, bytes = self:case(i, dir)
      local path = string.format("%s/c%d.%s", dir, i, FORMATS[name].ext)
      write_file(path, bytes)
      cases[#cases + 1] = {i = i, name = name, path = path, bytes = bytes}
    end
    local k = 1
    while k <= #cases do k = self:run_child(cases, k, dir) end
    for _, c in ipairs(cases) do os.remove(c.path) end
    self.stats.files = self.stats.files + #cases
  end
  return self.failures
end

local M = {new = new, formats = FORMATS, child = child, rng = rng}

-- Run as a script (not required as a module): parse options and go.
if arg and arg[0] and SCRIPT and arg[0]:find("file_fuzz%.lua$") then
  if arg[1] == "--child" then
    child(arg[2], arg[3])
    os.exit(0, true)   -- closing the state frees every tensor: LeakSanitizer then sees real leaks only
  end
  local o = {seed = 1, count = 1000, from = 1, batch = 200, slow = false, mem = 2048}
  local i = 1
  while i <= #arg do
    local a, v = arg[i], arg[i + 1]
    local key = a:match("^%-%-([%w_]+)$")
    if key == "formats" or key == "out" then o[key] = v
    elseif key and o[key] ~= nil or key == "only" or key == "slow" or key == "batch_seconds" then
      o[key] = tonumber(v)
    else io.stderr:write("file_fuzz: unknown option ", a, "\n"); os.exit(2) end
    i = i + 2
  end
  o.out = o.out or string.format("/tmp/dle-file-fuzz-%d", o.seed)
  o.slow = o.slow or nil
  local dir = H.tmpdir()
  local fz = new(o)
  if o.only then
    local name, bytes = fz:case(o.only, dir)
    local path = dir .. "/only." .. FORMATS[name].ext
    write_file(path, bytes)
    print(string.format("# case %d: %s, %d bytes, saved as %s", o.only, name, #bytes, path))
    local res = table.pack(pcall(FORMATS[name].load, path))
    print(table.unpack(res, 1, res.n))
    if res[1] then touch(res[2], 0); touch(res[3], 0) end
    os.exit(0, true)
  end
  local t0 = os.time()
  print(string.format("# file_fuzz: seed %d, cases %d..%d, formats %s%s", o.seed, o.from, o.from + o.count - 1,
    table.concat(fz.formats, ","), under_asan() and ", ASan" or ""))
  local failures = fz:run(dir)
  os.execute("rm -rf " .. q(dir))
  print(string.format("# %d files: %d loaded, %d raised named errors, %d failures (%d s)", fz.stats.files,
    fz.stats.ok, fz.stats.errors, #failures, os.time() - t0))
  for _, name in ipairs(fz.formats) do
    local per = fz.stats.by[name] or {ok = 0, errors = 0}
    print(string.format("#   %-12s %6d loaded, %6d named errors", name, per.ok, per.errors))
  end
  for _, f in ipairs(failures) do
    print(string.format("FAIL case %d (%s): %s\n    reproducer: %s", f.i, f.name, f.reason:sub(1, 600), f.file))
  end
  os.exit(#failures == 0 and 0 or 1)
end

return M
