--- File formats: dle.save/dle.load (round trips of every dtype and of nested Lua values, the
-- byte layout, atomic writes, clear errors on corrupt and truncated files), NumPy .npy (round
-- trips, hand-written headers, cross-checks with /usr/bin/python3 + numpy when present) and
-- safetensors (round trips, the header byte by byte, bad JSON).
local dle = require("dle")

local DIR = os.tmpname()
os.remove(DIR)
assert(os.execute("mkdir -p " .. DIR))

local function path(name) return DIR .. "/" .. name end

teardown(function() os.execute("rm -rf '" .. DIR .. "'") end)

local H = require("helpers")
local read_bytes, write_bytes = H.read_file, H.write_file

local function exists(p)
  local f = io.open(p, "rb")
  if f then f:close() end
  return f ~= nil
end

local function listdir()
  local out = {}
  local pipe = io.popen("ls -a " .. DIR)
  for line in pipe:lines() do
    if line ~= "." and line ~= ".." then out[#out + 1] = line end
  end
  pipe:close()
  return out
end

-- The error message of fn(...), which must fail.
local function err_of(fn, ...)
  local ok, msg = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(msg)
end

-- One tensor per dtype, with values that each dtype holds exactly.
local function sample(dtype)
  if dtype == "bool" then return dle.tensor({{true, false, true}, {false, false, true}}) end
  local vals = {{1, -2, 3}, {0, 5, -7}}
  if dtype == "uint8" then vals = {{1, 2, 255}, {0, 5, 7}} end
  if dtype:match("^float") or dtype == "bfloat16" then vals = {{1.5, -2.25, 3}, {0, 0.5, -7}} end
  return dle.tensor(vals, {dtype = dtype})
end

local DTYPES = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"}

local function same(a, b)
  assert.are.equal(a:dtype(), b:dtype())
  assert.are.same(a:shape(), b:shape())
  assert.are.same(a:totable(), b:totable())
end

local function have_numpy()
  return os.execute("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == true
end

describe("dle.save / dle.load", function()
  it("round-trips a tensor of every dtype with its values, dtype and shape", function()
    for _, dt in ipairs(DTYPES) do
      local t = sample(dt)
      dle.save(path("t.dle"), t)
      same(dle.load(path("t.dle")), t)
    end
  end)

  it("round-trips 0-dim, empty and transposed (non-contiguous, strides kept) tensors", function()
    local t = dle.arange(6):view(2, 3):t()
    assert.is_false(t:is_contiguous())
    local v = {s = dle.tensor(4.5), e = dle.zeros(0, 3), big = dle.zeros(2, 0, 4, {dtype = "int64"}), t = t}
    dle.save(path("v.dle"), v)
    local r = dle.load(path("v.dle"))
    assert.are.same({}, r.s:shape())
    assert.are.equal(4.5, r.s:item())
    assert.are.same({0, 3}, r.e:shape())
    assert.are.same({2, 0, 4}, r.big:shape())
    assert.are.equal("int64", r.big:dtype())
    assert.is_false(r.t:is_contiguous())
    assert.are.same({1, 3}, r.t:stride())
    assert.are.same({{0, 3}, {1, 4}, {2, 5}}, r.t:totable())
  end)

  it("round-trips nested tables of mixed values, keeping integers and floats apart", function()
    local v = {
      step = 10, lr = 0.5, whole = 3.0, big = math.maxinteger, small = math.mininteger,
      inf = math.huge, neg = -1e-300, name = "a\0b\0", empty = "", yes = true, no = false,
      list = {1, 2.5, "x", {dle.ones(2)}}, [7] = "seven", [2.5] = "float key", [true] = "bool key",
      rng = {seed = 67280421310721, offset = 12},
    }
    dle.save(path("n.dle"), v)
    local r = dle.load(path("n.dle"))
    assert.are.equal("integer", math.type(r.step))
    assert.are.equal(10, r.step)
    assert.are.equal("float", math.type(r.whole))
    assert.are.equal(3.0, r.whole)
    assert.are.equal(0.5, r.lr)
    assert.are.equal(math.maxinteger, r.big)
    assert.are.equal(math.mininteger, r.small)
    assert.are.equal(math.huge, r.inf)
    assert.are.equal(-1e-300, r.neg)
    assert.are.equal("a\0b\0", r.name)
    assert.are.equal(4, #r.name)
    assert.are.equal("", r.empty)
    assert.is_true(r.yes)
    assert.is_false(r.no)
    assert.are.equal(1, r.list[1])
    assert.are.equal(2.5, r.list[2])
    assert.are.equal("x", r.list[3])
    assert.are.same({1, 1}, r.list[4][1]:totable())
    assert.are.equal("seven", r[7])
    assert.are.equal("float key", r[2.5])
    assert.are.equal("bool key", r[true])
    assert.are.same({seed = 67280421310721, offset = 12}, r.rng)
  end)

  it("stores a plain number, string or boolean as the whole value", function()
    for _, v in ipairs({42, 0.25, "hello", true, false}) do
      dle.save(path("p.dle"), v)
      local r = dle.load(path("p.dle"))
      assert.are.equal(v, r)
      assert.are.equal(math.type(v), math.type(r))
    end
  end)

  it("keeps requires_grad and restores a generator state that continues the same stream", function()
    local w = dle.randn(3, 2):requires_grad_(true)
    local g = dle.Generator(123)
    g:set_state(g:get_state())
    dle.rand(5, {generator = g})
    dle.save(path("ck.dle"), {w = w, rng = g:get_state()})
    local expect = dle.rand(4, {generator = g}):totable()
    local r = dle.load(path("ck.dle"))
    assert.is_true(r.w.requires_grad)
    assert.are.same(w:detach():totable(), r.w:detach():totable())
    local g2 = dle.Generator(1)
    g2:set_state(r.rng)
    assert.are.same(expect, dle.rand(4, {generator = g2}):totable())
  end)

  it("writes the documented layout: magic, version 2, storage and tensor lists, 64-byte aligned data", function()
    dle.save(path("lay.dle"), dle.tensor({1, 2}, {dtype = "int32"}))
    local s = read_bytes(path("lay.dle"))
    assert.are.equal("DLE\0", s:sub(1, 4))
    local _, version, dlen, data_start, data_len = string.unpack("<c4I4i8i8i8", s)
    assert.are.equal(2, version)
    assert.are.equal(0, data_start % 64)
    assert.is_true(data_start >= 32 + dlen)
    assert.are.equal(8, data_len)
    assert.are.equal(data_start + 8, #s)
    assert.are.equal("\1\0\0\0\2\0\0\0", s:sub(data_start + 1, data_start + 8))
    -- the description: 1 storage (dtype, data offset, elements), 1 tensor (storage, rank, size,
    -- stride, offset, flags), then the value: tensor 1
    assert.are.equal(string.pack("<i8s1i8i8", 1, "int32", 0, 2) ..
      string.pack("<i8i8Bi8i8i8B", 1, 1, 1, 2, 1, 0, 0) .. "R" .. string.pack("<i8", 1),
      s:sub(33, 32 + dlen))
  end)

  it("is deterministic: the same value gives the same bytes", function()
    local v = {b = 1, a = 2, c = {z = dle.ones(3), y = "s"}, [1] = true}
    dle.save(path("d1.dle"), v)
    dle.save(path("d2.dle"), v)
    assert.are.equal(read_bytes(path("d1.dle")), read_bytes(path("d2.dle")))
  end)

  it("loads a tensor reached twice as one tensor, a table reached twice as two copies", function()
    local t = dle.ones(2)
    local shared = {x = 1}
    dle.save(path("s.dle"), {t, t, shared, shared})
    local r = dle.load(path("s.dle"))
    assert.is_true(rawequal(r[1], r[2]))
    assert.are.same({1, 1}, r[2]:totable())
    assert.are.same({x = 1}, r[4])
    assert.are.same({x = 1}, r[3])
    assert.is_false(rawequal(r[3], r[4]))
  end)

  it("rejects values it cannot store, naming where they are", function()
    local function rejects(value, expect)
      local msg = err_of(dle.save, path("f.dle"), value)
      assert.truthy(msg:find(expect, 1, true), msg)
      assert.is_false(exists(path("f.dle")))
    end
    rejects({model = {fwd = print}}, "dle.save: value.model.fwd is a function")
    rejects({co = coroutine.create(print)}, "dle.save: value.co is a coroutine")
    rejects({list = {1, io.stdout}}, "dle.save: value.list[2] is a userdata (not a tensor)")
    rejects({opt = setmetatable({}, {})}, "dle.save: value.opt is a table with a metatable")
    rejects({["a b"] = {f = print}}, 'dle.save: value["a b"].f is a function')
    rejects({[{}] = 1}, "dle.save: value has a key of type table")
    local c = {a = {}}
    c.a.back = c
    rejects(c, "dle.save: value.a.back is a cycle: it is the table at value, which contains it")
    local msg = err_of(dle.save, path("f.dle"), nil)
    assert.truthy(msg:find("nothing to save", 1, true), msg)
  end)

  it("writes atomically: replaces an existing file and leaves no temp file", function()
    local p = path("atomic.dle")
    write_bytes(p, "old contents")
    dle.save(p, {x = 1})
    assert.are.same({x = 1}, dle.load(p))
    for _, name in ipairs(listdir()) do assert.is_nil(name:find(".tmp-", 1, true)) end
    -- a failed save keeps the old file and removes its temp file
    pcall(dle.save, p, {x = print})
    assert.are.same({x = 1}, dle.load(p))
    for _, name in ipairs(listdir()) do assert.is_nil(name:find(".tmp-", 1, true)) end
  end)

  it("reports a missing file, bad magic and an unsupported version with the path", function()
    local msg = err_of(dle.load, path("nope.dle"))
    assert.truthy(msg:find("nope.dle", 1, true))
    write_bytes(path("bad.dle"), "NOTADLEFILE-----------------------------------")
    msg = err_of(dle.load, path("bad.dle"))
    assert.truthy(msg:find("bad magic", 1, true))
    assert.truthy(msg:find(path("bad.dle"), 1, true))
    dle.save(path("ver.dle"), dle.ones(3))
    local s = read_bytes(path("ver.dle"))
    write_bytes(path("ver.dle"), s:sub(1, 4) .. string.pack("<I4", 7) .. s:sub(9))
    msg = err_of(dle.load, path("ver.dle"))
    assert.truthy(msg:find("unsupported version 7", 1, true))
  end)

  it("reports a truncated file, cut anywhere, as truncated (never a crash)", function()
    dle.save(path("full.dle"), {a = dle.arange(10), b = "text", c = {1, 2, dle.ones(2, 2)}})
    local s = read_bytes(path("full.dle"))
    for cut = 0, #s - 1, 7 do
      write_bytes(path("cut.dle"), s:sub(1, cut))
      local msg = err_of(dle.load, path("cut.dle"))
      assert.truthy(msg:find(path("cut.dle"), 1, true), msg)
      if cut < 4 then
        assert.truthy(msg:find("bad magic", 1, true), msg)
      else
        assert.truthy(msg:find("truncated", 1, true), msg)
      end
    end
  end)

  it("reports a bad dtype name and garbage in the description", function()
    dle.save(path("dt.dle"), dle.ones(2))
    local s = read_bytes(path("dt.dle"))
    write_bytes(path("dt.dle"), (s:gsub("float32", "float99", 1)))
    local msg = err_of(dle.load, path("dt.dle"))
    assert.truthy(msg:find('bad dtype "float99"', 1, true), msg)
    write_bytes(path("dt.dle"), s:sub(1, 32) .. "Q" .. s:sub(34))
    msg = err_of(dle.load, path("dt.dle"))
    assert.truthy(msg:find("corrupt description", 1, true), msg)
    -- a value tag that does not exist
    write_bytes(path("dt.dle"), (s:gsub("R\1\0", "Q\1\0", 1)))
    msg = err_of(dle.load, path("dt.dle"))
    assert.truthy(msg:find('unknown tag "Q"', 1, true), msg)
    -- a storage record pointing past the data section
    local rec = string.pack("<s1i8i8", "float32", 0, 2)
    assert.truthy(s:find(rec, 1, true))
    local bad = s:gsub(rec, string.pack("<s1i8i8", "float32", 64, 2), 1)
    write_bytes(path("dt.dle"), bad)
    msg = err_of(dle.load, path("dt.dle"))
    assert.truthy(msg:find("truncated data", 1, true), msg)
  end)
end)

-- The length of the data section a dle file announces (header bytes 25..32).
local function data_len_of(p)
  return (select(5, string.unpack("<c4I4i8i8i8", read_bytes(p))))
end

-- {n = 5, w = int32 {{1, 2, 3}}, g = float32 {1.5} requiring grad} as format version 1 wrote it
-- (tag "X": a contiguous tensor with its own data), built byte by byte.
local function v1_file()
  local function str(s) return string.pack("<c1s8", "s", s) end
  local desc = string.pack("<c1i8", "T", 3)
    .. str("g") .. string.pack("<c1s1B", "X", "float32", 1) .. string.pack("<i8i8i8B", 1, 0, 4, 1)
    .. str("n") .. string.pack("<c1i8", "i", 5)
    .. str("w") .. string.pack("<c1s1B", "X", "int32", 2) .. string.pack("<i8i8i8i8B", 1, 3, 64, 12, 0)
  local data_start = (32 + #desc + 63) // 64 * 64
  local data = string.pack("<f", 1.5) .. string.rep("\0", 60) .. string.pack("<i4i4i4", 1, 2, 3)
  return string.pack("<c4I4i8i8i8", "DLE\0", 1, #desc, data_start, #data) .. desc ..
    string.rep("\0", data_start - 32 - #desc) .. data
end

describe("dle.save / dle.load keep aliasing (format version 2)", function()
  it("tied weights: one tensor under two names is stored once and loads as one tensor", function()
    local w = dle.randn(4, 4)
    dle.save(path("tied.dle"), {emb = w, head = w})
    assert.are.equal(64, data_len_of(path("tied.dle")))
    local r = dle.load(path("tied.dle"))
    assert.is_true(rawequal(r.emb, r.head))
    assert.are.same(w:totable(), r.emb:totable())
  end)

  it("views (narrow, transpose, select, expand with stride 0, offset > 0) load sharing one storage", function()
    local base = dle.arange(24):view(4, 6)
    local v = {
      base = base, nar = base:narrow(2, 2, 3), tr = base:t(), row = base:select(1, 3),
      ex = base:select(1, 2):view(1, 6):expand(3, 6), low = base:narrow(1, 3, 2),
    }
    dle.save(path("views.dle"), v)
    assert.are.equal(24 * 4, data_len_of(path("views.dle")))
    local r = dle.load(path("views.dle"))
    for k, t in pairs(v) do
      assert.is_true(dle.same_storage(r[k], r.base), k)
      assert.are.same(t:shape(), r[k]:shape(), k)
      assert.are.same(t:stride(), r[k]:stride(), k)
      assert.are.equal(t:storage_offset(), r[k]:storage_offset(), k)
      assert.are.same(t:totable(), r[k]:totable(), k)
    end
    assert.are.same({0, 1}, r.ex:stride())
    assert.are.equal(12, r.low:storage_offset())
    -- writes through one view are seen in the others
    r.row:fill_(-1)
    assert.are.same({-1, -1, -1, -1, -1, -1}, r.base:select(1, 3):totable())
    assert.are.equal(-1, r.tr:totable()[4][3])
    r.base:fill_(7)
    assert.are.same({{7, 7, 7}, {7, 7, 7}, {7, 7, 7}, {7, 7, 7}}, r.nar:totable())
    assert.are.equal(7, r.ex:totable()[3][6])
  end)

  it("views in different subtables share after loading", function()
    local base = dle.randn(3, 4)
    dle.save(path("sub.dle"), {enc = {w = base:narrow(1, 2, 2)}, dec = {w = base:t()}, top = {{base}}})
    local r = dle.load(path("sub.dle"))
    assert.is_true(dle.same_storage(r.enc.w, r.dec.w))
    assert.is_true(dle.same_storage(r.enc.w, r.top[1][1]))
    r.top[1][1]:zero_()
    assert.are.same({{0, 0, 0, 0}, {0, 0, 0, 0}}, r.enc.w:totable())
    assert.are.same({0, 0, 0}, r.dec.w:select(1, 4):totable())
  end)

  it("a view saved without its base stores only the span its views cover", function()
    local base = dle.arange(1000)
    dle.save(path("span.dle"), {v = base:narrow(1, 101, 10)})
    assert.are.equal(10 * 4, data_len_of(path("span.dle")))
    local r = dle.load(path("span.dle"))
    assert.are.equal(0, r.v:storage_offset())
    assert.are.same(base:narrow(1, 101, 10):totable(), r.v:totable())
    -- two overlapping views: the union of their ranges, offsets counted from its start
    dle.save(path("span2.dle"), {a = base:narrow(1, 101, 10), b = base:narrow(1, 106, 10)})
    assert.are.equal(15 * 4, data_len_of(path("span2.dle")))
    r = dle.load(path("span2.dle"))
    assert.are.equal(0, r.a:storage_offset())
    assert.are.equal(5, r.b:storage_offset())
    assert.is_true(dle.same_storage(r.a, r.b))
    r.b:fill_(0)
    assert.are.same({100, 101, 102, 103, 104, 0, 0, 0, 0, 0}, r.a:totable())
  end)

  it("keeps aliasing for float16, bfloat16, int64 and bool tensors", function()
    for _, dt in ipairs({"float16", "bfloat16", "int64", "bool"}) do
      local base = sample(dt)
      dle.save(path("dt2.dle"), {b = base, v = base:t(), s = base:select(2, 3)})
      local r = dle.load(path("dt2.dle"))
      assert.are.equal(dt, r.v:dtype())
      assert.is_true(dle.same_storage(r.b, r.v), dt)
      assert.is_true(dle.same_storage(r.b, r.s), dt)
      assert.are.same(base:t():totable(), r.v:totable(), dt)
      assert.are.same(base:select(2, 3):totable(), r.s:totable(), dt)
      assert.are.same({1, 3}, r.v:stride(), dt)
    end
  end)

  it("keeps requires_grad per tensor, also for tensors sharing a storage", function()
    local w = dle.randn(3, 2):requires_grad_(true)
    dle.save(path("rg.dle"), {w = w, again = w, frozen = w:detach():t()})
    local r = dle.load(path("rg.dle"))
    assert.is_true(r.w.requires_grad)
    assert.is_true(rawequal(r.w, r.again))
    assert.is_false(r.frozen.requires_grad)
    assert.is_true(dle.same_storage(r.w, r.frozen))
    assert.are.same(w:detach():t():totable(), r.frozen:totable())
  end)

  it("still loads version 1 files (each tensor contiguous with its own data)", function()
    write_bytes(path("v1.dle"), v1_file())
    local r = dle.load(path("v1.dle"))
    assert.are.equal(5, r.n)
    assert.are.equal("int32", r.w:dtype())
    assert.are.same({{1, 2, 3}}, r.w:totable())
    assert.are.same({1.5}, r.g:detach():totable())
    assert.is_true(r.g.requires_grad)
    -- the tags of one version are not accepted in the other
    local s = v1_file()
    write_bytes(path("v1.dle"), s:sub(1, 4) .. string.pack("<I4", 2) .. s:sub(9))
    assert.truthy(err_of(dle.load, path("v1.dle")):find("dle.load: ", 1, true))
  end)

  it("rejects tensor records that reach outside their storage or name missing ones", function()
    dle.save(path("geo.dle"), {a = dle.arange(6):view(2, 3)})
    local s = read_bytes(path("geo.dle"))
    local rec = string.pack("<i8B", 1, 2) .. string.pack("<i8i8i8i8", 2, 3, 3, 1)
    assert.truthy(s:find(rec, 1, true))
    local function with(new)
      write_bytes(path("geo.dle"), (s:gsub(rec:gsub("%p", "%%%0"), (new:gsub("%%", "%%%%")), 1)))
      return err_of(dle.load, path("geo.dle"))
    end
    local msg = with(string.pack("<i8B", 1, 2) .. string.pack("<i8i8i8i8", 2, 3, 4, 1))
    assert.truthy(msg:find("dle.load: " .. path("geo.dle") .. ": tensor 1: a view reaches", 1, true), msg)
    msg = with(string.pack("<i8B", 1, 2) .. string.pack("<i8i8i8i8", 1 << 40, 3, 1 << 40, 1))
    assert.truthy(msg:find("dle.load: " .. path("geo.dle") .. ": tensor 1: view geometry overflows", 1, true), msg)
    -- an empty view addresses nothing, but its offset must lie in the storage (it is scaled to a
    -- data pointer)
    local with_off = rec .. string.pack("<i8", 0)
    assert.truthy(s:find(with_off, 1, true))
    write_bytes(path("geo.dle"), (s:gsub(with_off:gsub("%p", "%%%0"), ((string.pack("<i8B", 1, 2)
      .. string.pack("<i8i8i8i8i8", 0, 3, 3, 1, 1 << 62)):gsub("%%", "%%%%")), 1)))
    msg = err_of(dle.load, path("geo.dle"))
    assert.truthy(msg:find("tensor 1: view offset 4611686018427387904 past a storage of 6 elements", 1, true), msg)
    -- a stride of a size-1 dim addresses nothing, but must stay in range (kernels scale it)
    msg = with(string.pack("<i8B", 1, 2) .. string.pack("<i8i8i8i8", 1, 6, 1 << 60, 1))
    assert.truthy(msg:find("tensor 1: view stride 1152921504606846976 out of range", 1, true), msg)
    write_bytes(path("geo.dle"), (s:gsub(rec:gsub("%p", "%%%0"),
      (string.pack("<i8B", 1, 2) .. string.pack("<i8i8i8i8", 1, 6, 1 << 50, 1)):gsub("%%", "%%%%"), 1)))
    assert.are.same({{0, 1, 2, 3, 4, 5}}, dle.load(path("geo.dle")).a:totable())
    msg = with(string.pack("<i8B", 2, 2) .. string.pack("<i8i8i8i8", 2, 3, 3, 1))
    assert.truthy(msg:find("names storage 2 of 1", 1, true), msg)
  end)
end)

describe("dle.save, dle.save_npy, dle.save_safetensors write crash-safely", function()
  local core = require("dle.core")

  local function temps()
    local out = {}
    for _, name in ipairs(listdir()) do
      if name:find(".tmp-", 1, true) then out[#out + 1] = name end
    end
    return out
  end

  it("remove their temp file and keep the old file when writing fails midway", function()
    local savers = {
      {dle.save, dle.load, {x = dle.ones(3)}},
      {dle.save_npy, dle.load_npy, dle.ones(3)},
      {dle.save_safetensors, dle.load_safetensors, {x = dle.ones(3)}},
    }
    local real = core._io_write
    for i, s in ipairs(savers) do
      local p = path("mid" .. i)
      s[1](p, s[3])
      local before = read_bytes(p)
      -- the data write fails after some bytes reached the temp file
      core._io_write = function(f) f:write("partial"); error("disk on fire", 0) end
      local ok, msg = pcall(s[1], p, s[3])
      core._io_write = real
      assert.is_false(ok)
      assert.truthy(tostring(msg):find("disk on fire", 1, true))
      assert.are.same({}, temps())
      assert.are.equal(before, read_bytes(p))
      assert.is_truthy(s[2](p))
    end
  end)

  it("remove temp files of dead processes on the next save to the same path, keep the others", function()
    -- a pid that surely is dead: a shell that has exited
    local pipe = io.popen("sh -c 'echo $$'")
    local dead = pipe:read("n")
    pipe:close()
    local p = path("stale.dle")
    write_bytes(p .. ".tmp-" .. dead, "litter")
    write_bytes(p .. ".tmp-1", "a live process (init) is still writing")
    write_bytes(path("other.dle.tmp-" .. dead), "another file's temp")
    write_bytes(p .. ".tmp-x" .. dead, "not a temp name")
    dle.save(p, {x = 1})
    assert.is_false(exists(p .. ".tmp-" .. dead))
    assert.is_true(exists(p .. ".tmp-1"))
    assert.is_true(exists(path("other.dle.tmp-" .. dead)))
    assert.is_true(exists(p .. ".tmp-x" .. dead))
    for _, name in ipairs({p .. ".tmp-1", path("other.dle.tmp-" .. dead), p .. ".tmp-x" .. dead}) do
      os.remove(name)
    end
    -- the same for the other formats
    write_bytes(path("stale.npy.tmp-" .. dead), "litter")
    dle.save_npy(path("stale.npy"), dle.ones(2))
    write_bytes(path("stale.st.tmp-" .. dead), "litter")
    dle.save_safetensors(path("stale.st"), {a = dle.ones(2)})
    assert.are.same({}, temps())
  end)

  it("fsync the directory after the rename (the binding opens it O_DIRECTORY)", function()
    core._io_sync_dir(DIR, "test")
    local msg = err_of(core._io_sync_dir, path("no-such-dir"), "dle.save: x")
    assert.truthy(msg:find("dle.save: x: cannot open the directory " .. path("no-such-dir"), 1, true), msg)
    write_bytes(path("plain"), "not a directory")
    msg = err_of(core._io_sync_dir, path("plain"), "dle.save: x")
    assert.truthy(msg:find("Not a directory", 1, true), msg)
  end)

  it("write into the target's directory and report a missing directory", function()
    local msg = err_of(dle.save, path("no/such/dir/x.dle"), 1)
    assert.truthy(msg:find("dle.save: cannot create the temporary file", 1, true), msg)
    assert.truthy(msg:find(path("no/such/dir/x.dle.tmp-"), 1, true), msg)
  end)
end)

describe("dle.save_npy / dle.load_npy", function()
  it("round-trips every NumPy dtype, 0-dim, empty and transposed tensors", function()
    for _, dt in ipairs(DTYPES) do
      if dt ~= "bfloat16" then
        local t = sample(dt)
        dle.save_npy(path("t.npy"), t)
        same(dle.load_npy(path("t.npy")), t)
      end
    end
    for _, t in ipairs({dle.tensor(2.5), dle.zeros(0), dle.zeros(3, 0), dle.arange(6):view(2, 3):t()}) do
      dle.save_npy(path("t.npy"), t)
      same(dle.load_npy(path("t.npy")), t)
    end
  end)

  it("saves bfloat16 as <f4 (float32, exact)", function()
    dle.save_npy(path("bf.npy"), sample("bfloat16"))
    assert.truthy(read_bytes(path("bf.npy")):find("'descr': '<f4'", 1, true))
    local r = dle.load_npy(path("bf.npy"))
    assert.are.equal("float32", r:dtype())
    assert.are.same({{1.5, -2.25, 3}, {0, 0.5, -7}}, r:totable())
  end)

  it("writes a v1.0 header padded to a multiple of 64 bytes, byte for byte", function()
    dle.save_npy(path("h.npy"), dle.tensor({{1, 2, 3}, {4, 5, 6}}, {dtype = "int32"}))
    local s = read_bytes(path("h.npy"))
    local dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }"
    assert.are.equal(59, #dict) -- 10 + 59 + "\n" > 64: the header grows to 128 bytes
    local header = dict .. string.rep(" ", 128 - 10 - #dict - 1) .. "\n"
    local data = string.pack("<i4i4i4i4i4i4", 1, 2, 3, 4, 5, 6)
    assert.are.equal("\x93NUMPY\1\0" .. string.pack("<I2", 118) .. header .. data, s)
    dle.save_npy(path("h1.npy"), dle.tensor({7}, {dtype = "uint8"}))
    assert.truthy(read_bytes(path("h1.npy")):find("{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }", 1, true))
  end)

  it("reads hand-written files: v1.0, v2.0, fortran order, big-endian, bool", function()
    local function npy(major, dict, data)
      local lenfmt = major == 1 and "<I2" or "<I4"
      local pre = 6 + 2 + string.packsize(lenfmt)
      local h = dict .. string.rep(" ", (64 - (pre + #dict + 1) % 64) % 64) .. "\n"
      return "\x93NUMPY" .. string.char(major, 0) .. string.pack(lenfmt, #h) .. h .. data
    end
    write_bytes(path("a.npy"), npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }",
      string.pack("<i8i8i8", -1, 0, 1 << 40)))
    local t = dle.load_npy(path("a.npy"))
    assert.are.equal("int64", t:dtype())
    assert.are.same({-1, 0, 1 << 40}, t:totable())
    write_bytes(path("b.npy"), npy(2, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }",
      string.pack("<dddddd", 1, 4, 2, 5, 3, 6)))
    t = dle.load_npy(path("b.npy"))
    assert.are.same({{1, 2, 3}, {4, 5, 6}}, t:totable())
    assert.is_true(t:is_contiguous())
    write_bytes(path("c.npy"), npy(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
      string.pack(">ff", 1.5, -3)))
    assert.are.same({1.5, -3}, dle.load_npy(path("c.npy")):totable())
    write_bytes(path("d.npy"), npy(3, "{'descr': '|b1', 'fortran_order': False, 'shape': (), }", "\1"))
    t = dle.load_npy(path("d.npy"))
    assert.are.equal("bool", t:dtype())
    assert.is_true(t:item())
  end)

  it("reports bad magic, unsupported dtypes, bad headers and truncated data", function()
    write_bytes(path("x.npy"), "PK\3\4 not numpy")
    assert.truthy(err_of(dle.load_npy, path("x.npy")):find("bad magic", 1, true))
    local good = "{'descr': '<c32', 'fortran_order': False, 'shape': (2,), }"
    write_bytes(path("x.npy"), "\x93NUMPY\1\0" .. string.pack("<I2", #good) .. good .. string.rep("\0", 16))
    assert.truthy(err_of(dle.load_npy, path("x.npy")):find("unsupported dtype \"<c32\"", 1, true))
    write_bytes(path("x.npy"), "\x93NUMPY\1\0" .. string.pack("<I2", 5) .. "{oops")
    assert.truthy(err_of(dle.load_npy, path("x.npy")):find("bad header", 1, true))
    write_bytes(path("x.npy"), "\x93NUMPY\9\0" .. string.pack("<I2", 5) .. "{oops")
    assert.truthy(err_of(dle.load_npy, path("x.npy")):find("unsupported .npy version 9.0", 1, true))
    dle.save_npy(path("y.npy"), dle.ones(4, 4))
    local s = read_bytes(path("y.npy"))
    for _, cut in ipairs({#s - 1, #s - 40, 70, 20, 9}) do
      write_bytes(path("y.npy"), s:sub(1, cut))
      local msg = err_of(dle.load_npy, path("y.npy"))
      assert.truthy(msg:find("truncated", 1, true), msg)
      assert.truthy(msg:find(path("y.npy"), 1, true), msg)
    end
  end)

  local numpy = have_numpy()
  local it_np = numpy and it or pending
  it_np("numpy reads dle's .npy files and dle reads numpy's (needs /usr/bin/python3 + numpy)", function()
    local t = dle.tensor({{1.5, -2}, {3, 4.25}, {0, 8}}, {dtype = "float64"})
    dle.save_npy(path("to_np.npy"), t)
    local script = path("check.py")
    write_bytes(script, table.concat({
      "import numpy as np, sys",
      "a = np.load(sys.argv[1])",
      "assert a.dtype == np.float64 and a.shape == (3, 2), (a.dtype, a.shape)",
      "assert a.tolist() == [[1.5, -2.0], [3.0, 4.25], [0.0, 8.0]], a.tolist()",
      "np.save(sys.argv[2], np.arange(12, dtype=np.int32).reshape(3, 4))",
      "np.save(sys.argv[3], np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))",
      "np.save(sys.argv[4], np.array([True, False]))",
      "np.save(sys.argv[5], np.arange(3, dtype=np.float16))",
    }, "\n"))
    local ok = os.execute(string.format("/usr/bin/python3 %s %s %s %s %s %s", script, path("to_np.npy"),
      path("i.npy"), path("f.npy"), path("b.npy"), path("h.npy")))
    assert.is_true(ok)
    local i = dle.load_npy(path("i.npy"))
    assert.are.equal("int32", i:dtype())
    assert.are.same({{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}}, i:totable())
    assert.are.same({{0, 1, 2}, {3, 4, 5}}, dle.load_npy(path("f.npy")):totable())
    assert.are.same({true, false}, dle.load_npy(path("b.npy")):totable())
    local h = dle.load_npy(path("h.npy"))
    assert.are.equal("float16", h:dtype())
    assert.are.same({0, 1, 2}, h:totable())
  end)
end)

describe("dle.save_safetensors / dle.load_safetensors", function()
  -- The error of loading a file with this JSON header and data.
  local function st(json, data)
    write_bytes(path("bad.safetensors"), string.pack("<I8", #json) .. json .. (data or ""))
    return err_of(dle.load_safetensors, path("bad.safetensors"))
  end

  it("round-trips every dtype, 0-dim, empty and transposed tensors, and the metadata", function()
    local ts = {}
    for _, dt in ipairs(DTYPES) do ts["t_" .. dt] = sample(dt) end
    ts.scalar = dle.tensor(3.25)
    ts.empty = dle.zeros(0, 2)
    ts.tr = dle.arange(6):view(2, 3):t()
    dle.save_safetensors(path("a.safetensors"), ts, {format = "pt", note = "q\"uote\n"})
    local r, meta = dle.load_safetensors(path("a.safetensors"))
    for name, t in pairs(ts) do same(r[name], t) end
    local n = 0
    for _ in pairs(r) do n = n + 1 end
    assert.are.equal(11, n)
    assert.are.same({format = "pt", note = "q\"uote\n"}, meta)
  end)

  it("writes the header byte by byte: length, sorted names, offsets, space padding", function()
    dle.save_safetensors(path("tiny.safetensors"),
      {b = dle.tensor({1, 2}, {dtype = "int32"}), a = dle.tensor(1.5)}, {k = "v"})
    local s = read_bytes(path("tiny.safetensors"))
    local json = '{"__metadata__":{"k":"v"},' ..
      '"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},' ..
      '"b":{"dtype":"I32","shape":[2],"data_offsets":[4,12]}}'
    local padded = json .. string.rep(" ", (8 - #json % 8) % 8)
    assert.are.equal(0, #padded % 8)
    local expect = string.pack("<I8", #padded) .. padded .. string.pack("<f", 1.5) ..
      string.pack("<i4i4", 1, 2)
    assert.are.equal(expect, s)
    -- no metadata: no __metadata__ key, empty metadata table back
    dle.save_safetensors(path("nometa.safetensors"), {x = dle.tensor({1}, {dtype = "uint8"})})
    local body = read_bytes(path("nometa.safetensors"))
    assert.is_nil(body:find("__metadata__", 1, true))
    local r, meta = dle.load_safetensors(path("nometa.safetensors"))
    assert.are.same({1}, r.x:totable())
    assert.are.same({}, meta)
  end)

  it("reads a hand-written file with spaces, escapes and unordered keys", function()
    local json = '{ "w\\u00e9" : { "shape" : [ 2 ] , "data_offsets" : [ 0 , 4 ], "dtype":"BF16" },' ..
      ' "__metadata__" : { "a\\/b" : "c\\td" } }'
    write_bytes(path("h.safetensors"), string.pack("<I8", #json) .. json ..
      string.pack("<I2I2", 0x3F80, 0xC000)) -- bfloat16 1 and -2
    local r, meta = dle.load_safetensors(path("h.safetensors"))
    local w = r["w\u{e9}"]
    assert.are.equal("bfloat16", w:dtype())
    assert.are.same({1, -2}, w:totable())
    assert.are.same({["a/b"] = "c\td"}, meta)
  end)

  it("reports wrong JSON, bad dtypes, bad offsets and truncated files clearly", function()
    assert.truthy(st('{"a": {"dtype": "F32",}'):find("invalid JSON", 1, true))
    assert.truthy(st('{"a": [1, 2'):find("invalid JSON", 1, true))
    assert.truthy(st('{"a": "\\q"}'):find("invalid JSON", 1, true))
    assert.truthy(st('[1, 2]'):find("is an array, not a JSON object", 1, true))
    assert.truthy(st('{"a": {"dtype": "F8", "shape": [1], "data_offsets": [0, 1]}}', "\0")
      :find('bad dtype "F8"', 1, true))
    assert.truthy(st('{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}', "\0\0\0\0")
      :find("need 8", 1, true))
    assert.truthy(st('{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}', "\0\0")
      :find("truncated data", 1, true))
    write_bytes(path("bad.safetensors"), string.pack("<I8", 1000) .. "{}")
    assert.truthy(err_of(dle.load_safetensors, path("bad.safetensors")):find("truncated header", 1, true))
    write_bytes(path("bad.safetensors"), "abc")
    local msg = err_of(dle.load_safetensors, path("bad.safetensors"))
    assert.truthy(msg:find("truncated", 1, true))
    assert.truthy(msg:find(path("bad.safetensors"), 1, true))
  end)

  it("rejects non-tensor values, non-string names and non-string metadata", function()
    assert.truthy(err_of(dle.save_safetensors, path("n.st"), {a = 1}):find("not a tensor", 1, true))
    assert.truthy(err_of(dle.save_safetensors, path("n.st"), {dle.ones(1)}):find("names must be strings", 1, true))
    assert.truthy(err_of(dle.save_safetensors, path("n.st"), {a = dle.ones(1)}, {v = 1})
      :find("strings to strings", 1, true))
    assert.is_false(exists(path("n.st")))
  end)

  it("refuses tensors sharing memory, naming both, unless copy_shared = true writes copies", function()
    local w = dle.randn(4, 4)
    local msg = err_of(dle.save_safetensors, path("sh.st"), {emb = w, head = w})
    assert.truthy(msg:find('dle.save_safetensors: tensors "emb" and "head" share memory', 1, true), msg)
    assert.truthy(msg:find("copy_shared", 1, true), msg)
    msg = err_of(dle.save_safetensors, path("sh.st"), {a = w, b = w:t(), c = dle.ones(1)})
    assert.truthy(msg:find('tensors "a" and "b" share memory', 1, true), msg)
    msg = err_of(dle.save_safetensors, path("sh.st"), {x = w:narrow(1, 1, 3), y = w:narrow(1, 3, 2)})
    assert.truthy(msg:find('tensors "x" and "y" share memory', 1, true), msg)
    assert.is_false(exists(path("sh.st")))
    -- disjoint parts of one storage do not overlap: allowed, written as two tensors
    dle.save_safetensors(path("sh.st"), {top = w:narrow(1, 1, 2), bottom = w:narrow(1, 3, 2)})
    local r = dle.load_safetensors(path("sh.st"))
    assert.are.same(w:narrow(1, 3, 2):totable(), r.bottom:totable())
    -- the option: copies, contiguous (the transpose too), untied after loading
    dle.save_safetensors(path("sh.st"), {emb = w, head = w, t = w:t()}, nil, {copy_shared = true})
    r = dle.load_safetensors(path("sh.st"))
    assert.are.same(w:totable(), r.emb:totable())
    assert.are.same(w:t():totable(), r.t:totable())
    assert.are.same({4, 1}, r.t:stride())
    assert.is_false(dle.same_storage(r.emb, r.head))
    msg = err_of(dle.save_safetensors, path("sh.st"), {a = w}, nil, 5)
    assert.truthy(msg:find("options must be a table", 1, true), msg)
  end)

  it("checks the header: exact integer offsets, overlapping ranges, arrays, metadata strings", function()
    local four = string.rep("\0", 16)
    local function e(dtype, shape, offs) return string.format('{"dtype":"%s","shape":%s,"data_offsets":%s}', dtype,
                                                              shape, offs) end
    assert.truthy(st('{"a":' .. e("F32", "[1]", "[0.5,4.5]") .. '}', four):find('bad data_offsets for "a"', 1, true))
    assert.truthy(st('{"a":' .. e("F32", "[1]", "[0,9007199254740993]") .. '}', four):find("bad data_offsets", 1, true))
    assert.truthy(st('{"a":' .. e("F32", "[1]", "[null,4]") .. '}', four):find("bad data_offsets", 1, true))
    assert.truthy(st('{"a":' .. e("F32", "[1]", "[0,4,8]") .. '}', four):find("bad data_offsets", 1, true))
    assert.truthy(st('{"a":' .. e("F32", '{"0":1}', "[0,4]") .. '}', four):find('bad shape for "a"', 1, true))
    assert.truthy(st('{"a":' .. e("F32", "[1.5]", "[0,4]") .. '}', four):find("size 1 is 1.5", 1, true))
    assert.truthy(st('{"a":' .. e("F32", "[2]", "[0,8]") .. ',"b":' .. e("F32", "[1]", "[4,8]") .. '}', four)
      :find('"b" (bytes 4..8) overlaps "a" (bytes 0..8)', 1, true))
    assert.truthy(st('{"a":' .. e("F32", "[4]", "[0,16]") .. ',"b":' .. e("F32", "[0]", "[4,4]") ..
      ',"c":' .. e("F32", "[1]", "[8,12]") .. '}', four):find('"c" (bytes 8..12) overlaps "a"', 1, true))
    assert.truthy(st('{"__metadata__":{"k":1}}'):find("__metadata__ value of \"k\" is 1, not a string", 1, true))
    assert.truthy(st('{"__metadata__":[1]}'):find("__metadata__ is an array", 1, true))
    assert.truthy(st('{"a":[1]}'):find('entry "a" is an array, not an object', 1, true))
    assert.truthy(st('{"a":' .. e("F32", "[1]", "[0,4]") .. '} '):find("truncated data", 1, true))
    -- a 0x7F byte and other control bytes inside JSON strings are legal: they load, promptly
    write_bytes(path("del.safetensors"), (function()
      local json = '{"a\127\1":' .. e("F32", "[1]", "[0,4]") .. ',"__metadata__":{"k\127":"v\127"}}'
      return string.pack("<I8", #json) .. json .. string.pack("<f", 2.5)
    end)())
    local r, meta = dle.load_safetensors(path("del.safetensors"))
    assert.are.same({2.5}, r["a\127\1"]:totable())
    assert.are.same({["k\127"] = "v\127"}, meta)
    -- names with any bytes round-trip through the writer's JSON
    local names = {["a\127"] = dle.ones(1), ["\0\31\"/\\"] = dle.zeros(2), ["\xff\xfe"] = dle.ones(3)}
    dle.save_safetensors(path("names.safetensors"), names, {["\127"] = "\0"})
    r, meta = dle.load_safetensors(path("names.safetensors"))
    for k, t in pairs(names) do assert.are.same(t:totable(), r[k]:totable()) end
    assert.are.same({["\127"] = "\0"}, meta)
  end)

  it("parses JSON values: numbers, nested arrays, literals, unicode escapes", function()
    local v = dle.io.json_decode('{"n": -12, "f": 2.5e3, "a": [[], [true, false, null, 1]], "u": "\\ud83d\\ude00x"}')
    assert.are.equal(-12, v.n)
    assert.are.equal("integer", math.type(v.n))
    assert.are.equal(2500.0, v.f)
    assert.are.same({}, v.a[1])
    assert.are.equal(true, v.a[2][1])
    assert.are.equal(false, v.a[2][2])
    assert.are.equal(1, v.a[2][4])
    assert.are.equal("\u{1F600}x", v.u)
    assert.are.equal('"a\\"b\\\\c\\n\\u007f"', dle.io.json_string('a"b\\c\n\127'))
  end)
end)
