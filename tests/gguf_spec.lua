--- GGUF v3 (lua/dle/io/gguf.lua, lua/dle/models/gguf.lua): the byte layout of a small file,
-- write -> read round trips of every tensor type and every metadata value type, alignment,
-- clean errors on bad files and bad arguments, and GPT-2 / Llama models written by dle reading
-- back through dle.models.from_gguf with the float (and quantized) model's logits; llama.cpp's q/k
-- row permutation checked row by row. A cross-check with Python's gguf module runs when
-- /usr/bin/python3 has it (Debian 12 does not package it).
local dle = require("dle")
local H = require("helpers")

local DIR = H.tmpdir()
teardown(function() os.execute("rm -rf '" .. DIR .. "'") end)

local function path(name) return DIR .. "/" .. name end

local function bytes_of(t) return string.char(table.unpack(t:contiguous():view(-1):totable())) end

describe("dle.save_gguf / dle.load_gguf", function()
  it("writes GGUF v3's layout: header, typed metadata, tensor infos with reversed dims, aligned data", function()
    local t = dle.arange(6, {dtype = "float32"}):view(2, 3)
    dle.save_gguf(path("one.gguf"), {w = t}, {["general.name"] = "x", n = 7}, {types = {n = "uint16"}})
    local s = H.read_file(path("one.gguf"))
    local want = "GGUF" .. string.pack("<I4I8I8", 3, 1, 2)
      .. string.pack("<I8", 12) .. "general.name" .. string.pack("<I4I8", 8, 1) .. "x"
      .. string.pack("<I8", 1) .. "n" .. string.pack("<I4I2", 2, 7)
      .. string.pack("<I8", 1) .. "w" .. string.pack("<I4I8I8I4I8", 2, 3, 2, 0, 0)
    assert.are.equal(want, s:sub(1, #want))
    local data_at = (#want + 31) // 32 * 32
    assert.are.equal(string.rep("\0", data_at - #want), s:sub(#want + 1, data_at))
    assert.are.equal(string.pack("<ffffff", 0, 1, 2, 3, 4, 5), s:sub(data_at + 1))
  end)

  it("round-trips float32, float16, bfloat16, Q8_0, Q4_0 and Q4_K tensors of several shapes", function()
    local g = dle.Generator(3)
    local tensors = {
      a = dle.randn(3, 5, {generator = g}), b = dle.randn(7, {generator = g}):half(),
      c = dle.randn(2, 3, 4, {generator = g}):bfloat16(), d = dle.randn(2, 3, {generator = g}):t(),
      s = dle.tensor(2.5), e = dle.zeros(0, 4),
      q8 = dle.quantize(dle.randn(5, 64, {generator = g}), "q8_0"),
      q4 = dle.quantize(dle.randn(2, 3, 32, {generator = g}), "q4_0"),
      qk = dle.quantize(dle.randn(3, 512, {generator = g}), "q4_k"),
    }
    dle.save_gguf(path("all.gguf"), tensors)
    local back, meta, types = dle.load_gguf(path("all.gguf"))
    assert.are.same({}, meta)
    assert.are.same({}, types)
    for name, t in pairs(tensors) do
      local u = back[name]
      assert.is_not_nil(u, name)
      assert.are.equal(t:dtype(), u:dtype(), name)
      assert.are.same(t:shape(), u:shape(), name)
      if dle.is_quantized(t) then
        assert.are.equal(bytes_of(t:blocks()), bytes_of(u:blocks()), name)
      elseif t:numel() > 0 then
        assert.are.equal(0, H.max_diff(t, u), name)
      end
    end
  end)

  it("round-trips every metadata value type, arrays (nested, empty) and general.alignment", function()
    local meta = {u8 = 255, i8 = -128, u16 = 65535, i16 = -32768, u32 = 4294967295, i32 = -2147483648,
      u64 = -1, i64 = math.mininteger, f32 = 0.25, f64 = 1 / 3, yes = true, no = false,
      str = "h\0llo \xe2\x9c\x93", empty = "", arr = {1, 2, 3}, strs = {"a", "", "ccc"},
      nested = {{1.5}, {}, {2.5, 3.5}},
      none = {}, bools = {true, false}, ["general.alignment"] = 64}
    local types = {u8 = "uint8", i8 = "int8", u16 = "uint16", i16 = "int16", u32 = "uint32", i32 = "int32",
      u64 = "uint64", i64 = "int64", f32 = "float32", f64 = "float64", yes = "bool", no = "bool", str = "string",
      empty = "string", arr = "array<uint16>", strs = "array<string>", nested = "array<array<float64>>",
      none = "array<int8>", bools = "array<bool>", ["general.alignment"] = "uint32"}
    local q = dle.quantize(dle.randn(1, 32), "q4_0")
    dle.save_gguf(path("meta.gguf"), {x = dle.ones(3), q = q}, meta, {types = types})
    local t, m, ty = dle.load_gguf(path("meta.gguf"))
    assert.are.same(types, ty)
    for k, v in pairs(meta) do
      if k ~= "nested" then assert.are.same(v, m[k], k) end
    end
    assert.are.same({{1.5}, {}, {2.5, 3.5}}, m.nested)
    assert.are.equal(math.type(m.u32), "integer")
    -- data offsets follow the alignment: q (18 bytes of Q4_0) at 0 of the data section, x at 64,
    -- the data section itself at a multiple of 64
    local size = #H.read_file(path("meta.gguf"))
    assert.are.equal(0, (size - 12 - 64) % 64)
    assert.are.equal(bytes_of(q:blocks()), bytes_of(t.q:blocks()))
    -- writing back what load returned gives the same file
    dle.save_gguf(path("meta2.gguf"), t, m, {types = ty})
    assert.are.equal(H.read_file(path("meta.gguf")), H.read_file(path("meta2.gguf")))
  end)

  it("types plain Lua metadata as gguf-py does: int32 (int64 when larger), float32, bool, string, arrays", function()
    dle.save_gguf(path("plain.gguf"), {}, {a = 5, b = 1 << 40, c = 0.5, d = true, e = "s", f = {1, 2}, g = {"x"}})
    local _, m, ty = dle.load_gguf(path("plain.gguf"))
    assert.are.same({a = "int32", b = "int64", c = "float32", d = "bool", e = "string", f = "array<int32>",
      g = "array<string>"}, ty)
    assert.are.same({a = 5, b = 1 << 40, c = 0.5, d = true, e = "s", f = {1, 2}, g = {"x"}}, m)
  end)

  it("maps float tensors into memory (copy-on-write: writes leave the file as it was)", function()
    dle.save_gguf(path("mm.gguf"), {w = dle.ones(4, 8)})
    local before = H.read_file(path("mm.gguf"))
    local t = dle.load_gguf(path("mm.gguf"))
    t.w:fill_(3)
    assert.are.equal(3, t.w:sum():item() / 32)
    assert.are.equal(before, H.read_file(path("mm.gguf")))
  end)

  it("rejects bad arguments naming dle.save_gguf, and leaves the old file when a save fails", function()
    dle.save_gguf(path("keep.gguf"), {w = dle.ones(2)})
    local before = H.read_file(path("keep.gguf"))
    H.assert_error(function() dle.save_gguf(path("keep.gguf"), {w = dle.ones(2, {dtype = "int64"})}) end,
      "dle.save_gguf: tensor \"w\" is int64; GGUF tensors here are float32, float16, bfloat16 or quantized")
    H.assert_error(function() dle.save_gguf(path("keep.gguf"), {}, {n = 300}, {types = {n = "uint8"}}) end,
      "dle.save_gguf: metadata \"n\": 300 does not fit a uint8")
    H.assert_error(function() dle.save_gguf(path("keep.gguf"), {}, {n = 3}, {types = {n = "uint7"}}) end,
      "dle.save_gguf: metadata \"n\": unknown type uint7")
    H.assert_error(function() dle.save_gguf(path("keep.gguf"), {}, {n = "x"}, {types = {n = "array<string>"}}) end,
      "dle.save_gguf: metadata \"n\": type array<string> needs a list, got string")
    H.assert_error(function() dle.save_gguf(path("keep.gguf"), {}, {["general.alignment"] = 24}) end,
      "dle.save_gguf: general.alignment must be a uint32 power of two, got 24")
    H.assert_error(function() dle.save_gguf(path("keep.gguf"), {w = dle.quantize(dle.ones(2, 32), "q8_0"):t()}) end,
      "dle.save_gguf: tensor \"w\" is a transposed view of a quantized tensor")
    H.assert_error(function() dle.save_gguf(path("keep.gguf"), {}, nil, {alignment = 8}) end,
      "dle.save_gguf: unknown option alignment")
    assert.are.equal(before, H.read_file(path("keep.gguf")))
    local leftovers = io.popen("ls '" .. DIR .. "' | grep -c tmp- || true"):read("a")
    assert.are.equal("0", leftovers:match("%d+"))
  end)

  it("rejects bad files with errors naming the file and the offset, never crashing", function()
    dle.save_gguf(path("good.gguf"), {w = dle.ones(2, 32)}, {k = "v"})
    local good = H.read_file(path("good.gguf"))
    local function load_bytes(name, bytes)
      H.write_file(path(name), bytes)
      return function() return dle.load_gguf(path(name)) end
    end
    H.assert_error(load_bytes("magic.gguf", "GGUX" .. good:sub(5)), "dle.load_gguf: ", "magic.gguf: not a GGUF file")
    H.assert_error(load_bytes("v2.gguf", "GGUF" .. string.pack("<I4", 2) .. good:sub(9)),
      "v2.gguf: GGUF version 2 is not supported (3 is)")
    H.assert_error(load_bytes("short.gguf", good:sub(1, 70)), "short.gguf: truncated dimension of w at offset 67")
    H.assert_error(load_bytes("count.gguf", good:sub(1, 16) .. string.pack("<I8", 1 << 50) .. good:sub(25)),
      "count.gguf: bad metadata count 1125899906842624 at offset 16")
    H.assert_error(load_bytes("data.gguf", good:sub(1, #good - 1)), "data.gguf: truncated data: tensor \"w\"")
    -- the metadata value type (after "GGUF", version, 2 counts, the key "k") set to 99
    local at = 4 + 4 + 16 + 8 + 1
    H.assert_error(load_bytes("vtype.gguf", good:sub(1, at) .. string.pack("<I4", 99) .. good:sub(at + 5)),
      "vtype.gguf: bad metadata value type 99 for metadata \"k\" at offset 33")
    -- the key's length made huge
    H.assert_error(load_bytes("klen.gguf", good:sub(1, 24) .. string.pack("<I8", 1 << 40) .. good:sub(33)),
      "klen.gguf: bad length 1099511627776 of metadata key at offset 24")
    -- the tensor's ggml type: q6_k (14), which dle does not read
    local ti = at + 4 + 8 + 1 + 8 + 1 + 4 + 16
    H.assert_error(load_bytes("gtype.gguf", good:sub(1, ti) .. string.pack("<I4", 14) .. good:sub(ti + 5)),
      "gtype.gguf: tensor \"w\" has ggml type 14 (q6_k), which dle does not read")
    -- the tensor's offset: not a multiple of the alignment
    H.assert_error(load_bytes("off.gguf", good:sub(1, ti + 4) .. string.pack("<I8", 4) .. good:sub(ti + 13)),
      "off.gguf: tensor \"w\" has offset 4, not a multiple of the alignment 32")
    H.assert_error(function() dle.load_gguf(path("missing.gguf")) end, "dle.load_gguf: cannot open")
  end)

  local PY = "env -u LD_PRELOAD /usr/bin/python3"
  local HAVE_GGUF = os.execute(PY .. " -c 'import gguf' 2>/dev/null") == true
  local cross = HAVE_GGUF and it or function(name) pending(name .. " (needs /usr/bin/python3 with the gguf module)") end
  cross("reads back through Python's gguf module with the same names, types, shapes and metadata", function()
    local q = dle.quantize(dle.randn(2, 64), "q8_0")
    dle.save_gguf(path("py.gguf"), {a = dle.randn(3, 4), q = q}, {s = "v", n = 3}, {types = {n = "uint32"}})
    local p = io.popen(PY .. [[ -c '
import sys, gguf
r = gguf.GGUFReader(sys.argv[1])
for t in sorted(r.tensors, key=lambda t: t.name):
    print(t.name, t.tensor_type.name, ",".join(str(int(d)) for d in t.shape))
print(r.fields["s"].parts[-1].tobytes().decode(), int(r.fields["n"].parts[-1][0]))
' ]] .. path("py.gguf"))
    local out = p:read("a")
    p:close()
    assert.are.equal("a F32 4,3\nq Q8_0 64,2\nv 3\n", out)
  end)
end)

describe("dle.models.from_gguf", function()
  local g = dle.Generator(21)
  local ids = dle.tensor({{1, 5, 7, 30, 2, 9}}, {dtype = "int64"})

  local function llama(cfg)
    local c = {vocab_size = 48, hidden_size = 64, intermediate_size = 96, num_hidden_layers = 2,
      num_attention_heads = 4, num_key_value_heads = 2, max_position_embeddings = 64}
    for k, v in pairs(cfg or {}) do c[k] = v end
    return dle.models.llama.Llama(c, {generator = g}):eval()
  end

  it("reads a Llama (grouped-query, tied and untied, q/k/v biases) written by dle with equal logits", function()
    for k, cfg in ipairs({{}, {tie_word_embeddings = true, num_key_value_heads = 4}, {model_type = "qwen2"},
        {num_key_value_heads = 1, rope_theta = 500000}}) do
      local m = llama(cfg)
      m:save_gguf(path("l" .. k .. ".gguf"))
      local m2 = dle.models.from_gguf(path("l" .. k .. ".gguf"))
      assert.are.same({}, m2.unused_weights)
      assert.is_true(H.max_diff(m2(ids), m(ids)) <= 1e-5 * m(ids):abs():max():item(), "case " .. k)
      assert.are.same(m:generate(ids, {max_new_tokens = 6, temperature = 0}):totable(),
        m2:generate(ids, {max_new_tokens = 6, temperature = 0}):totable())
    end
  end)

  it("reads a GPT-2 written by dle with equal logits (weights {out, in} under llama.cpp's names)", function()
    local m = dle.models.gpt2.GPT2({vocab_size = 48, n_positions = 32, n_embd = 64, n_layer = 2, n_head = 4},
      {generator = g}):eval()
    m:save_gguf(path("g.gguf"))
    local t, meta = dle.load_gguf(path("g.gguf"))
    assert.are.equal("gpt2", meta["general.architecture"])
    assert.are.same({192, 64}, t["blk.0.attn_qkv.weight"]:shape())
    assert.is_nil(t["output.weight"])   -- tied: the head is token_embd
    assert.are.equal(0, H.max_diff(t["blk.1.ffn_up.weight"], m.transformer.h[2].mlp.c_fc.weight))
    local m2 = dle.models.from_gguf(path("g.gguf"))
    assert.is_true(H.max_diff(m2(ids), m(ids)) <= 1e-5 * m(ids):abs():max():item())
  end)

  it("stores q and k rows in llama.cpp's order (each head's rotary halves interleaved)", function()
    local m = llama({num_key_value_heads = 2})
    m:save_gguf(path("perm.gguf"))
    local t = dle.load_gguf(path("perm.gguf"))
    for _, which in ipairs({{"attn_q", "q_proj", 4}, {"attn_k", "k_proj", 2}}) do
      local file = t["blk.0." .. which[1] .. ".weight"]
      local hf = m.model.layers[1].self_attn[which[2]].weight
      local D = 16
      for h = 0, which[3] - 1 do
        for i = 0, D / 2 - 1 do
          for j = 0, 1 do
            -- llama.cpp's row h*D + 2i + j is Hugging Face's row h*D + j*D/2 + i
            assert.are.equal(0, H.max_diff(file[h * D + 2 * i + j + 1], hf[h * D + j * D // 2 + i + 1]))
          end
        end
      end
      assert.is_false(H.max_diff(file, hf) == 0)
    end
  end)

  it("keeps quantized weights quantized and gives the quantized model's logits", function()
    for _, kind in ipairs({"q8_0", "q4_0"}) do
      local m = llama()
      dle.nn.utils.quantize_(m, kind)
      m:save_gguf(path("lq.gguf"))
      local t = dle.load_gguf(path("lq.gguf"))
      assert.are.equal(kind, t["blk.0.attn_q.weight"]:dtype())
      assert.are.equal("float32", t["token_embd.weight"]:dtype())
      local m2 = dle.models.from_gguf(path("lq.gguf"))
      assert.is_true(dle.is_quantized(m2.model.layers[1].self_attn.q_proj.weight))
      assert.is_true(H.max_diff(m2(ids), m(ids)) <= 1e-5 * m(ids):abs():max():item(), kind)
    end
  end)

  it("rejects other architectures and missing metadata with errors naming the file", function()
    dle.save_gguf(path("arch.gguf"), {}, {["general.architecture"] = "mamba"})
    H.assert_error(function() dle.models.from_gguf(path("arch.gguf")) end,
      "dle.models.from_gguf: ", "arch.gguf: general.architecture is \"mamba\"; dle reads llama and gpt2")
    dle.save_gguf(path("nometa.gguf"), {["token_embd.weight"] = dle.ones(4, 8)}, {["general.architecture"] = "llama"})
    H.assert_error(function() dle.models.from_gguf(path("nometa.gguf")) end,
      "nometa.gguf: metadata llama.attention.head_count must be a positive integer, got nil")
    H.write_file(path("junk.gguf"), "junk")
    H.assert_error(function() dle.models.from_gguf(path("junk.gguf")) end,
      "dle.models.from_gguf: dle.load_gguf: ", "junk.gguf: not a GGUF file")
  end)
end)
