-- data_spec.lua — dle.data: IDX files (raw and gzip, every element type, corrupt inputs),
-- Fashion-MNIST, memory maps, the DataLoader and byte-level text corpora. Files are generated
-- into a temporary directory; the Debian data sets are used only when installed.
local dle = require("dle")
local H = require("helpers")

local tmpdir
local function tmp(name) return tmpdir .. "/" .. name end

local function write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function gzip(path)
  assert(os.execute("gzip -nkf '" .. path .. "'"))
  return path .. ".gz"
end

-- An IDX file: magic 00 00 code ndim, big-endian uint32 sizes, big-endian values of `fmt`.
local function idx_bytes(code, fmt, sizes, values)
  local parts = {string.pack("BBBB", 0, 0, code, #sizes)}
  for _, s in ipairs(sizes) do parts[#parts + 1] = string.pack(">I4", s) end
  for _, v in ipairs(values) do parts[#parts + 1] = string.pack(">" .. fmt, v) end
  return table.concat(parts)
end

local function sorted(list)
  local c = {table.unpack(list)}
  table.sort(c)
  return c
end

local function range(n)
  local r = {}
  for i = 1, n do r[i] = i end
  return r
end

setup(function()
  local p = assert(io.popen("mktemp -d"))
  tmpdir = p:read("l")
  p:close()
  assert(tmpdir and #tmpdir > 0)
end)

teardown(function()
  if tmpdir then os.execute("rm -rf '" .. tmpdir .. "'") end
end)

describe("dle.data.idx", function()
  -- code, pack format, expected dtype, values (fit every type, including negatives where signed)
  local cases = {
    {0x08, "B", "uint8", {0, 1, 127, 128, 200, 255}},
    {0x09, "b", "int8", {-128, -1, 0, 1, 100, 127}},
    {0x0B, "h", "int16", {-32768, -300, -1, 0, 258, 32767}},
    {0x0C, "i4", "int32", {-2147483648, -70000, -1, 0, 65536, 2147483647}},
    {0x0D, "f", "float32", {-1.5, 0, 0.25, 3, 1e6, -2.75}},
    {0x0E, "d", "float64", {-1.5, 0.1, 1 / 3, 3, 1e300, -2.75}},
  }
  for _, c in ipairs(cases) do
    local code, fmt, dtype, values = c[1], c[2], c[3], c[4]
    local expected = {{values[1], values[2], values[3]}, {values[4], values[5], values[6]}}
    if code == 0x0D then expected = H.map(expected, H.f32) end

    it(string.format("reads a raw 2x3 IDX file of type 0x%02X into %s with exact values", code, dtype),
      function()
        local path = tmp(string.format("t%02x.idx", code))
        write(path, idx_bytes(code, fmt, {2, 3}, values))
        local t = dle.data.idx(path)
        H.assert_close(t, expected, {dtype = dtype, rtol = 0, atol = 0})
      end)

    it(string.format("reads the gzip-compressed 2x3 IDX file of type 0x%02X with the same values", code),
      function()
        local path = tmp(string.format("g%02x.idx", code))
        write(path, idx_bytes(code, fmt, {2, 3}, values))
        local gz = gzip(path)
        assert.are.equal("\31\139", read(gz):sub(1, 2))
        local t = dle.data.idx(gz)
        H.assert_close(t, expected, {dtype = dtype, rtol = 0, atol = 0})
      end)
  end

  it("reads 1-D and 4-D IDX files with their shapes (row-major order)", function()
    write(tmp("one.idx"), idx_bytes(0x08, "B", {5}, {5, 4, 3, 2, 1}))
    H.assert_close(dle.data.idx(tmp("one.idx")), {5, 4, 3, 2, 1}, {dtype = "uint8"})
    write(tmp("four.idx"), idx_bytes(0x0C, "i4", {2, 1, 2, 1}, {1, 2, 3, 4}))
    H.assert_close(dle.data.idx(tmp("four.idx")), {{{{1}, {2}}}, {{{3}, {4}}}}, {dtype = "int32"})
  end)

  it("reads an IDX file with a zero size as an empty tensor", function()
    write(tmp("empty.idx"), idx_bytes(0x0D, "f", {0, 4}, {}))
    local t = dle.data.idx(tmp("empty.idx"))
    assert.are.same({0, 4}, t:shape())
    assert.are.equal("float32", t:dtype())
  end)

  it("reports a missing file with its path", function()
    H.assert_error(function() dle.data.idx(tmp("nope.idx")) end, "idx:", tmp("nope.idx"),
      "No such file")
  end)

  it("rejects a bad magic number, naming the path and the bytes", function()
    write(tmp("magic.idx"), "\1\0\8\1" .. string.pack(">I4", 1) .. "\0")
    H.assert_error(function() dle.data.idx(tmp("magic.idx")) end, tmp("magic.idx"), "bad magic",
      "01 00 08 01")
    write(tmp("code.idx"), "\0\0\7\1" .. string.pack(">I4", 1) .. "\0")
    H.assert_error(function() dle.data.idx(tmp("code.idx")) end, "bad magic", "00 00 07 01")
  end)

  it("rejects more dimensions than a tensor can have", function()
    write(tmp("dims.idx"), "\0\0\8\9" .. string.rep(string.pack(">I4", 1), 9) .. "\0")
    H.assert_error(function() dle.data.idx(tmp("dims.idx")) end, tmp("dims.idx"), "9 dimensions")
  end)

  it("rejects a truncated header (raw and gzip)", function()
    write(tmp("short.idx"), "\0\0")
    H.assert_error(function() dle.data.idx(tmp("short.idx")) end, tmp("short.idx"),
      "truncated header")
    write(tmp("shortsizes.idx"), "\0\0\8\3" .. string.pack(">I4", 2))
    local gz = gzip(tmp("shortsizes.idx"))
    H.assert_error(function() dle.data.idx(gz) end, gz, "truncated header")
  end)

  it("rejects truncated data with the expected and actual byte counts (raw and gzip)", function()
    local full = idx_bytes(0x0C, "i4", {2, 3}, {1, 2, 3, 4, 5, 6})
    write(tmp("trunc.idx"), full:sub(1, #full - 3))
    H.assert_error(function() dle.data.idx(tmp("trunc.idx")) end, tmp("trunc.idx"),
      "truncated data", "{2,3}", "needs 24 bytes", "has 21")
    local gz = gzip(tmp("trunc.idx"))
    H.assert_error(function() dle.data.idx(gz) end, gz, "truncated data", "has 21")
  end)

  it("rejects a raw file whose header announces more data than it holds before allocating it", function()
    -- 3 x 111 x 2^31 int32 elements announced (2.6 TB), 6 bytes of data; also the gzip of it,
    -- whose size is unknown until read: its allocation error names idx and the path
    write(tmp("huge.idx"), string.pack(">BBBBI4I4I4", 0, 0, 0x0C, 3, 3, 111, 1 << 31) .. "\1\2\3\4\5\6")
    H.assert_error(function() dle.data.idx(tmp("huge.idx")) end, "idx: " .. tmp("huge.idx"),
      "truncated data", "{3,111,2147483648}", "has 6")
    local gz = gzip(tmp("huge.idx"))
    local ok, msg = pcall(dle.data.idx, gz)
    assert.is_false(ok)
    assert.truthy(msg:find("idx: " .. gz, 1, true), msg)
  end)

  it("rejects a file with more data than its header says (size mismatch)", function()
    write(tmp("long.idx"), idx_bytes(0x08, "B", {2}, {1, 2, 3}))
    H.assert_error(function() dle.data.idx(tmp("long.idx")) end, tmp("long.idx"), "size mismatch")
  end)

  it("rejects corrupt gzip data instead of returning garbage", function()
    local path = tmp("corrupt.idx")
    write(path, idx_bytes(0x08, "B", {64}, range(64)))
    local gz = read(gzip(path))
    -- Flip bytes in the middle of the deflate stream (after the 10-byte gzip header).
    local bad = gz:sub(1, 12) .. string.rep("\255", 8) .. gz:sub(21)
    write(tmp("corrupt.idx.gz"), bad)
    H.assert_error(function() dle.data.idx(tmp("corrupt.idx.gz")) end, tmp("corrupt.idx.gz"),
      "corrupt gzip data")
    -- A gzip stream cut short inside the compressed data.
    write(tmp("cut.idx.gz"), gz:sub(1, #gz - 12))
    H.assert_error(function() dle.data.idx(tmp("cut.idx.gz")) end, tmp("cut.idx.gz"), "truncated")
    -- Intact data with a wrong CRC in the trailer.
    write(tmp("crc.idx.gz"), gz:sub(1, #gz - 8) .. string.rep("\0", 8))
    H.assert_error(function() dle.data.idx(tmp("crc.idx.gz")) end, tmp("crc.idx.gz"),
      "corrupt gzip data", "incorrect data check")
  end)

  it("reports errors at the caller's line, not inside dle.data", function()
    write(tmp("short2.idx"), "\0")
    local err = H.assert_error(function() dle.data.idx(tmp("short2.idx")) end, "truncated header")
    assert.is_nil(err:find("dle/data", 1, true), err)
  end)
end)

describe("dle.data.fashion_mnist", function()
  it("builds float images in [0,1] and 1-based int64 labels from IDX files in opts.path", function()
    local dir = tmp("fm")
    os.execute("mkdir -p '" .. dir .. "'")
    -- 2 images of 28x28: pixel k (0-based, row-major) of image i is (k + 100 * i) % 256.
    local pix = {}
    for i = 0, 1 do for k = 0, 28 * 28 - 1 do pix[#pix + 1] = (k + 100 * i) % 256 end end
    write(dir .. "/t10k-images-idx3-ubyte", idx_bytes(0x08, "B", {2, 28, 28}, pix))
    write(dir .. "/t10k-labels-idx1-ubyte", idx_bytes(0x08, "B", {2}, {9, 0}))
    gzip(dir .. "/t10k-images-idx3-ubyte")
    local x, y = dle.data.fashion_mnist("test", {path = dir})
    assert.are.same({2, 1, 28, 28}, x:shape())
    assert.are.equal("float32", x:dtype())
    H.assert_close(y, {10, 1}, {dtype = "int64"})
    H.assert_close(x[1][1][1]:narrow(1, 1, 3), {0, 1 / 255, 2 / 255})
    H.assert_close(x[2][1][1][1], 100 / 255)
    H.assert_close(x[1][1][10][10], (9 * 28 + 9) % 256 / 255)   -- 0-based k = 261 -> 5
    H.assert_close(x:max(), 1)
    local x64 = dle.data.fashion_mnist("test", {path = dir, dtype = "float64"})
    assert.are.equal("float64", x64:dtype())
  end)

  it("rejects an unknown split and names the package and the paths tried when files are missing",
    function()
      H.assert_error(function() dle.data.fashion_mnist("valid") end, "fashion_mnist", '"train" or "test"',
        "valid")
      H.assert_error(function() dle.data.fashion_mnist("train", {path = tmp("nothing")}) end,
        "dataset-fashion-mnist", tmp("nothing") .. "/train-images-idx3-ubyte.gz",
        tmp("nothing") .. "/train-images-idx3-ubyte")
    end)

  it("rejects mismatched image and label counts", function()
    local dir = tmp("fm2")
    os.execute("mkdir -p '" .. dir .. "'")
    write(dir .. "/train-images-idx3-ubyte", idx_bytes(0x08, "B", {1, 2, 2}, {1, 2, 3, 4}))
    write(dir .. "/train-labels-idx1-ubyte", idx_bytes(0x08, "B", {2}, {1, 2}))
    H.assert_error(function() dle.data.fashion_mnist("train", {path = dir}) end, "2 labels for 1 images")
  end)

  local have = io.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz", "rb")
  if have then
    have:close()
    it("loads the Debian package's test split: shapes, dtypes, ranges and the first labels", function()
      local x, y = dle.data.fashion_mnist("test")
      assert.are.same({10000, 1, 28, 28}, x:shape())
      assert.are.equal("float32", x:dtype())
      assert.are.same({10000}, y:shape())
      assert.are.equal("int64", y:dtype())
      assert.is_true(x:min():item() >= 0 and x:max():item() <= 1)
      assert.are.equal(1, x:max():item())
      assert.are.equal(1, y:min():item())
      assert.are.equal(10, y:max():item())
      -- Fashion-MNIST t10k's first labels (0-based: 9 2 1 1 6 1 4 6 5 7), 1-based here.
      H.assert_close(y:narrow(1, 1, 10), {10, 3, 2, 2, 7, 2, 5, 7, 6, 8})
      -- Every class holds exactly 1000 test images.
      for c = 1, 10 do assert.are.equal(1000, y:eq(c):sum():item()) end
    end)
  else
    pending("Fashion-MNIST files absent (Debian package dataset-fashion-mnist): test split skipped")
  end
end)

describe("dle.data.memmap", function()
  local path
  local values = {}
  for i = 1, 12 do values[i] = i * 0.5 - 2 end
  before_each(function()
    path = tmp("mm.bin")
    -- 8 header bytes, then 12 little-endian float32 values.
    local parts = {"HEADER!!"}
    for _, v in ipairs(values) do parts[#parts + 1] = string.pack("<f", v) end
    write(path, table.concat(parts))
  end)

  it("maps a file as a tensor with the right values at an offset", function()
    local t = dle.data.memmap(path, "float32", {3, 4}, {offset = 8})
    assert.are.equal("float32", t:dtype())
    H.assert_close(t, H.unflat(values, {3, 4}), {rtol = 0, atol = 0})
    local part = dle.data.memmap(path, "float32", {2}, {offset = 8 + 4 * 10})
    H.assert_close(part, {values[11], values[12]})
    local bytes = dle.data.memmap(path, "uint8", {8})
    H.assert_close(bytes, {72, 69, 65, 68, 69, 82, 33, 33}, {dtype = "uint8"})  -- "HEADER!!"
  end)

  it("does not read the file eagerly: dle's allocated memory does not grow", function()
    collectgarbage()
    local before = dle.memory_allocated()
    local t = dle.data.memmap(path, "float32", {12}, {offset = 8})
    assert.are.equal(before, dle.memory_allocated())
    assert.are.equal(values[1], t[1])
  end)

  it("maps the whole file as 1-D when the shape is nil", function()
    local t = dle.data.memmap(path, "float32", nil, {offset = 8})
    assert.are.same({12}, t:shape())
    assert.are.equal(values[12], t[12])
  end)

  it("errors on a file too short for the shape, naming the path and the sizes", function()
    H.assert_error(function() dle.data.memmap(path, "float32", {13}, {offset = 8}) end, "memmap",
      path, "too short", "needs 60 bytes", "has 56")
    H.assert_error(function() dle.data.memmap(path, "float64", {6}, {offset = 16}) end, "too short")
  end)

  it("errors on a missing file, a misaligned offset and a bad mode", function()
    H.assert_error(function() dle.data.memmap(tmp("none.bin"), "float32", {1}) end, "memmap",
      tmp("none.bin"))
    H.assert_error(function() dle.data.memmap(path, "float32", {1}, {offset = 2}) end, "offset 2",
      "element size")
    H.assert_error(function() dle.data.memmap(path, "float32", {1}, {mode = "w"}) end, "mode")
    H.assert_error(function() dle.data.memmap(path, "float33", {1}) end, "float33")
  end)

  it("mode r: writes into the tensor stay private and never reach the file", function()
    local t = dle.data.memmap(path, "float32", {12}, {offset = 8})
    t:fill_(7)
    assert.are.equal(7, t[5])
    local fresh = dle.data.memmap(path, "float32", {12}, {offset = 8})
    assert.are.equal(values[5], fresh[5])
    assert.are.equal(string.pack("<f", values[1]), read(path):sub(9, 12))
  end)

  it("mode r+: writes through the tensor reach the file", function()
    local t = dle.data.memmap(path, "float32", {12}, {offset = 8, mode = "r+"})
    t[2] = 42
    t = nil -- luacheck: ignore 311 (dropped for the collection)
    collectgarbage()
    assert.are.equal(string.pack("<f", 42), read(path):sub(13, 16))
  end)

  it("keeps the mapping alive while a view of it lives", function()
    local t = dle.data.memmap(path, "float32", {3, 4}, {offset = 8})
    local row = t:select(1, 3)
    t = nil -- luacheck: ignore 311 (dropped for the collection)
    collectgarbage()
    collectgarbage()
    H.assert_close(row, {values[9], values[10], values[11], values[12]})
    assert.are.equal(values[12], (row * 1)[4])
  end)
end)

describe("dle.data.DataLoader", function()
  -- x[i] = {i, 10 i}, y[i] = 100 + i, for i = 1..n
  local function make(n)
    local xs, ys = {}, {}
    for i = 1, n do xs[i] = {i, 10 * i}; ys[i] = 100 + i end
    return dle.tensor(xs), dle.tensor(ys, {dtype = "int64"})
  end

  it("yields batches of batch_size with a short last batch, in order when not shuffled", function()
    local x, y = make(10)
    local loader = dle.data.DataLoader({x, y}, {batch_size = 4})
    assert.are.equal(3, #loader)
    local shapes, firsts = {}, {}
    for xb, yb in loader do
      shapes[#shapes + 1] = xb:size(1)
      assert.are.same({xb:size(1), 2}, xb:shape())
      assert.are.same({xb:size(1)}, yb:shape())
      firsts[#firsts + 1] = yb[1]
    end
    assert.are.same({4, 4, 2}, shapes)
    assert.are.same({101, 105, 109}, firsts)
  end)

  it("returns views (no copy) of the tensors when not shuffled", function()
    local x, y = make(6)
    local loader = dle.data.DataLoader({x, y}, {batch_size = 3})
    local xb = loader(nil, nil)
    assert.is_true(dle.same_storage(x, xb))
    H.assert_close(xb, {{1, 10}, {2, 20}, {3, 30}})
  end)

  it("drop_last drops the short last batch and #loader counts only full batches", function()
    local x, y = make(10)
    local loader = dle.data.DataLoader({x, y}, {batch_size = 4, drop_last = true})
    assert.are.equal(2, #loader)
    local count = 0
    for xb in loader do
      count = count + 1
      assert.are.equal(4, xb:size(1))
    end
    assert.are.equal(2, count)
  end)

  it("visits every sample exactly once per shuffled epoch, keeping x and y rows together", function()
    local x, y = make(23)
    local loader = dle.data.DataLoader({x, y}, {batch_size = 5, shuffle = true,
      generator = dle.Generator(1)})
    for _ = 1, 3 do   -- each `for` is a new epoch
      local seen, batches = {}, 0
      for xb, yb in loader do
        batches = batches + 1
        for i = 1, xb:size(1) do
          assert.are.equal(xb[i][1] + 100, yb[i])
          assert.are.equal(10 * xb[i][1], xb[i][2])
          seen[#seen + 1] = yb[i] - 100
        end
      end
      assert.are.equal(5, batches)
      assert.are.same(range(23), sorted(seen))
    end
  end)

  local function epoch_order(seed, epochs)
    local x, y = make(20)
    local loader = dle.data.DataLoader({x, y}, {batch_size = 6, shuffle = true,
      generator = dle.Generator(seed)})
    local orders = {}
    for e = 1, epochs do
      local order = {}
      for _, yb in loader do
        for _, v in ipairs(yb:totable()) do order[#order + 1] = v end
      end
      orders[e] = order
    end
    return orders
  end

  it("gives the same batches for the same seed and a different order for another seed", function()
    local a, b, c = epoch_order(5, 2), epoch_order(5, 2), epoch_order(6, 2)
    assert.are.same(a, b)
    assert.are_not.same(a[1], c[1])
    assert.are_not.same(a[1], a[2])  -- each epoch draws a new permutation
    assert.are_not.same(range(20), H.map(a[1], function(v) return v - 100 end))
  end)

  it("starts a new epoch in every `for`, even after a loop that stopped early", function()
    local x, y = make(10)
    local loader = dle.data.DataLoader({x, y}, {batch_size = 3})
    for _, yb in loader do -- luacheck: ignore 512 (stops early on purpose)
      assert.are.equal(101, yb[1])
      break
    end
    local firsts = {}
    for _, yb in loader do firsts[#firsts + 1] = yb[1] end
    assert.are.same({101, 104, 107, 110}, firsts)
    local n = 0
    for _ in loader:iter() do n = n + 1 end
    assert.are.equal(4, n)
  end)

  it("accepts a single tensor and a dataset object with :len() and :get(i), stacking samples", function()
    local xs = dle.data.DataLoader(dle.arange(0, 7), {batch_size = 4})
    local got = {}
    for xb in xs do got[#got + 1] = xb:totable() end
    assert.are.same({{0, 1, 2, 3}, {4, 5, 6}}, got)

    local ds = {}
    function ds.len() return 5 end
    function ds.get(_, i) return dle.full({2}, i), i * 2, i / 4 end
    local loader = dle.data.DataLoader(ds, {batch_size = 2})
    assert.are.equal(3, #loader)
    local a, b, c = loader(nil, nil)
    H.assert_close(a, {{1, 1}, {2, 2}})
    H.assert_close(b, {2, 4}, {dtype = "int64"})
    H.assert_close(c, {0.25, 0.5}, {dtype = "float32"})
  end)

  it("shuffles dataset objects with __len, reproducibly under a seed", function()
    local ds = setmetatable({}, {__len = function() return 9 end})
    function ds.get(_, i) return dle.tensor({i}) end
    local function order(seed)
      local loader = dle.data.DataLoader(ds, {batch_size = 4, shuffle = true,
        generator = dle.Generator(seed)})
      local seen = {}
      for xb in loader do
        assert.are.same({xb:size(1), 1}, xb:shape())
        for _, v in ipairs(xb:reshape(-1):totable()) do seen[#seen + 1] = v end
      end
      return seen
    end
    local a = order(3)
    assert.are.same(range(9), sorted(a))
    assert.are.same(a, order(3))
  end)

  it("wraps TensorDataset rows like the tensor list does", function()
    local x, y = make(5)
    local ds = dle.data.TensorDataset(x, y)
    assert.are.equal(5, ds:len())
    local xb, yb = dle.data.DataLoader(ds, {batch_size = 5})(nil, nil)
    H.assert_close(xb, x:totable())
    H.assert_close(yb, y:totable(), {dtype = "int64"})
  end)

  it("gathers shuffled rows of wide, 3-D and non-contiguous tensors like index_select", function()
    local x = dle.arange(0, 60):view(5, 3, 4)
    local xt = dle.arange(0, 15):view(3, 5):t()          -- non-contiguous 5 x 3
    local loader = dle.data.DataLoader({x, xt}, {batch_size = 5, shuffle = true,
      generator = dle.Generator(9)})
    local a, b = loader(nil, nil)
    local perm = dle.randperm(5, {generator = dle.Generator(9)})
    H.assert_close(a, x:index_select(1, perm):totable())
    H.assert_close(b, xt:index_select(1, perm):totable())
    assert.is_false(dle.same_storage(a, x))
  end)

  it("keeps the autograd graph for tensors that require grad", function()
    local w = dle.ones(4, 2, {requires_grad = true})
    local loader = dle.data.DataLoader({w}, {batch_size = 2, shuffle = true,
      generator = dle.Generator(1)})
    local total
    for wb in loader do
      local s = (wb * 3):sum()
      total = total and total + s or s
    end
    total:backward()
    H.assert_close(w.grad, {{3, 3}, {3, 3}, {3, 3}, {3, 3}})
  end)

  it("rejects tensors of different lengths and a bad batch_size", function()
    local x = make(5)
    H.assert_error(function() dle.data.DataLoader({x, dle.zeros(4)}) end, "DataLoader", "tensor 2",
      "5 rows")
    H.assert_error(function() dle.data.DataLoader({x}, {batch_size = 0}) end, "batch_size")
    H.assert_error(function() dle.data.DataLoader(42) end, "DataLoader")
  end)
end)

describe("dle.data.text_corpus", function()
  local text = "abba cab\nhello\n"

  it("reads a file as bytes with a sorted byte vocabulary and 1-based ids", function()
    write(tmp("c.txt"), text)
    local c = dle.data.text_corpus({path = tmp("c.txt")})
    assert.are.equal(#text, #c)
    assert.are.equal("uint8", c.data:dtype())
    assert.are.equal(string.byte("a"), c.data[1])
    -- distinct bytes in byte order: "\n", " ", a, b, c, e, h, l, o
    assert.are.same({"\n", " ", "a", "b", "c", "e", "h", "l", "o"}, c.vocab)
    assert.are.equal(9, c.vocab_size)
    assert.are.equal("int64", c.ids:dtype())
    H.assert_close(c.ids:narrow(1, 1, 5), {3, 4, 4, 3, 2})
    H.assert_close(c.ids, c:encode(text):totable())
  end)

  it("round-trips strings through encode and decode and rejects unknown bytes and ids", function()
    write(tmp("c2.txt"), text)
    local c = dle.data.text_corpus({path = tmp("c2.txt")})
    local ids = c:encode("hello cab")
    H.assert_close(ids, {7, 6, 8, 8, 9, 2, 5, 3, 4}, {dtype = "int64"})
    assert.are.equal("hello cab", c:decode(ids))
    assert.are.equal("bob", c:decode({4, 9, 4}))
    assert.are.equal(text, c:decode(c.ids))
    assert.are.equal("", c:decode(c:encode("")))
    H.assert_error(function() c:encode("xyz") end, "encode", "not in the vocabulary")
    H.assert_error(function() c:decode({10}) end, "decode", "outside 1..9")
  end)

  it("draws random windows whose targets are the inputs shifted by one", function()
    write(tmp("c3.txt"), text)
    local c = dle.data.text_corpus({path = tmp("c3.txt")})
    local x, y = c:batch(4, 5, {generator = dle.Generator(2)})
    assert.are.same({4, 5}, x:shape())
    assert.are.same({4, 5}, y:shape())
    local ids = c.ids:totable()
    for b = 1, 4 do
      local row = x[b]:totable()
      -- find the window's start in the corpus and check both rows against it
      local found = false
      for s = 1, #ids - 5 do
        local ok = true
        for k = 1, 5 do if ids[s + k - 1] ~= row[k] then ok = false break end end
        if ok then
          found = true
          for k = 1, 5 do if ids[s + k] ~= y[b][k] then found = false end end
          if found then break end
        end
      end
      assert.is_true(found, "window " .. b .. " is not a corpus window with shifted targets")
    end
    local x2 = c:batch(4, 5, {generator = dle.Generator(2)})
    assert.are.same(x:totable(), x2:totable())
  end)

  it("errors clearly on a missing file, an empty file and an unknown name", function()
    H.assert_error(function() dle.data.text_corpus({path = tmp("missing.txt")}) end, "text_corpus",
      "missing.txt")
    write(tmp("empty.txt"), "")
    H.assert_error(function() dle.data.text_corpus({path = tmp("empty.txt")}) end, "empty")
    H.assert_error(function() dle.data.text_corpus("shakespeare") end, "text_corpus", "kjv")
  end)

  local p = io.popen("command -v bible 2>/dev/null")
  local has_bible = p and p:read("a") ~= ""
  if p then p:close() end
  if has_bible then
    it("generates the KJV corpus into the cache once, with verse references stripped", function()
      local cache = tmp("cache")
      local c = dle.data.text_corpus({name = "kjv", cache = cache})
      local body = read(cache .. "/kjv.txt")
      local first = "In the beginning God created the heaven and the earth.\n"
      assert.are.equal(first, body:sub(1, #first))
      local _, lines = body:gsub("\n", "")
      assert.are.equal(31102, lines)
      assert.is_nil(body:find("\n[1-3]?%a+%d+:%d+ "))
      assert.are.equal(#body, #c)
      assert.is_true(c.vocab_size > 50 and c.vocab_size < 80)
      assert.are.equal("In the beginning", c:decode(c.ids:narrow(1, 1, 16)))
      -- Second use reads the cached file (same bytes).
      local c2 = dle.data.text_corpus({name = "kjv", cache = cache})
      assert.are.equal(#c, #c2)
    end)
  else
    pending("`bible` (Debian bible-kjv) not installed: KJV corpus generation skipped")
  end
end)
