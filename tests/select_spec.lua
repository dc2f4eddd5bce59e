-- select_spec.lua — the select family and its compositions: nonzero, masked_select,
-- masked_scatter, boolean-mask and index-tensor keys (t[key], t[key] = v), unique (options, dim,
-- consecutive), bincount, searchsorted, bucketize, count_nonzero, take, take_along_dim,
-- index_put, mode, median, nanmedian, quantile, nanquantile. Values against pure-Lua references
-- in every dtype and layout (transposed, strided, sliced), 0-dim, empty and odd-sized inputs;
-- errors naming the function and shapes; what dle.compile does with result sizes that depend on
-- the data; PyTorch in float64 when python3-torch is there.
local dle = require("dle")
local H = require("helpers")

local I64 = {dtype = "int64"}
local NAN = 0 / 0
local ALL = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"}

-- small integer values (exact in every dtype; bool: nonzero -> true)
local function ints(shape, seed, lo, hi)
  return H.values(shape, {seed = seed, int = true, lo = lo or 0, hi = hi or 3})
end
local function in_dtype(v, dt)
  if dt == "bool" then return H.map(v, function(z) return z ~= 0 end) end
  return v
end
-- {3, 4} small integers (seed), a {3, 4} mask of 0 and 1 (seed + 1) and that mask as a bool tensor
local function masked_input(seed)
  local v, m = ints({3, 4}, seed), ints({3, 4}, seed + 1, 0, 1)
  return v, m, dle.tensor(in_dtype(m, "bool"), {dtype = "bool"})
end
-- f(dt, layout, x) for x holding v (see in_dtype) in every dtype of ALL and every layout
local function each_dtype_layout(v, f)
  for _, dt in ipairs(ALL) do
    H.each_layout(in_dtype(v, dt), dt, function(layout, x) f(dt, layout, x) end)
  end
end
local function num(v) if type(v) == "boolean" then return v and 1 or 0 end return v end
-- the number z as dtype dt holds it (bool: 0 or 1)
local function num_in(z, dt) return num(in_dtype(z, dt)) end

-- reference: row-major list of {coords} of nonzero elements of nested table v
local function ref_nonzero(v)
  local out = {}
  local function walk(t, prefix)
    if type(t) ~= "table" then
      if num(t) ~= 0 then out[#out + 1] = {table.unpack(prefix)} end
      return
    end
    for i, c in ipairs(t) do
      prefix[#prefix + 1] = i
      walk(c, prefix)
      prefix[#prefix] = nil
    end
  end
  walk(v, {})
  return out
end

describe("nonzero", function()
  it("gives 1-based int64 positions in row-major order for every dtype and layout", function()
    local v = ints({3, 4}, 3, 0, 2)
    each_dtype_layout(v, function(dt, layout, x)
      local r = x:nonzero()
      assert.are.equal("int64", r:dtype())
      assert.are.same(ref_nonzero(v), r:totable(), dt .. " " .. layout)
    end)
  end)

  it("counts NaN as nonzero and -0.0 as zero", function()
    assert.are.same({{1}, {3}}, dle.tensor({NAN, -0.0, 2, 0}):nonzero():totable())
  end)

  it("handles 0-dim, empty, all-zero and 3-D inputs, and as_tuple", function()
    assert.are.same({1, 0}, dle.tensor(5):nonzero():shape())
    assert.are.same({0, 0}, dle.tensor(0):nonzero():shape())
    assert.are.same({0, 2}, dle.zeros(0, 3):nonzero():shape())
    assert.are.same({0, 1}, dle.zeros(7):nonzero():shape())
    local v = ints({2, 3, 5}, 9, 0, 1)
    assert.are.same(ref_nonzero(v), dle.tensor(v):nonzero():totable())
    local cols = dle.nonzero(dle.tensor({{0, 1}, {1, 1}}), {as_tuple = true})
    assert.are.equal(2, #cols)
    assert.are.same({1, 2, 2}, cols[1]:totable())
    assert.are.same({2, 1, 2}, cols[2]:totable())
  end)

  it("is correct on many elements split over threads", function()
    local x = dle.arange(0, 300000):remainder(7):eq(3)
    local r = x:nonzero():reshape(-1)
    assert.are.equal(300000 // 7 + (300000 % 7 > 3 and 1 or 0), r:numel())
    assert.are.equal(4, r[1])
    assert.are.same({7, 7}, {r[2] - r[1], r[r:numel()] - r[r:numel() - 1]})
  end)
end)

describe("masked_select and t[mask]", function()
  it("picks the masked elements in row-major order for every dtype and layout", function()
    local v, m, mask = masked_input(5)
    local want = {}
    for i = 1, 3 do for j = 1, 4 do if m[i][j] ~= 0 then want[#want + 1] = v[i][j] end end end
    each_dtype_layout(v, function(dt, layout, x)
      local r = dle.masked_select(x, mask)
      assert.are.equal(dt, r:dtype())
      assert.are.same(in_dtype(want, dt), r:totable(), dt .. " " .. layout)
      assert.are.same(in_dtype(want, dt), x[mask]:totable(), dt .. " " .. layout .. " t[mask]")
    end)
    H.each_layout(in_dtype(m, "bool"), "bool", function(layout, mk)
      assert.are.same(want, dle.masked_select(dle.tensor(v), mk):totable(), "mask " .. layout)
    end)
  end)

  it("broadcasts the mask and the input together", function()
    local x = dle.tensor({{1, 2, 3}, {4, 5, 6}})
    assert.are.same({1, 3, 4, 6}, x:masked_select(dle.tensor({true, false, true})):totable())
    assert.are.same({1, 2, 3, 1, 2, 3}, dle.tensor({1, 2, 3}):masked_select(dle.ones(2, 1, {dtype = "bool"})):totable())
  end)

  it("t[mask] with a mask over the leading dims picks rows", function()
    local x = dle.arange(0, 12):reshape(3, 2, 2)
    local r = x[dle.tensor({true, false, true})]
    assert.are.same({{{0, 1}, {2, 3}}, {{8, 9}, {10, 11}}}, r:totable())
    assert.are.same({{4, 5}}, x[dle.tensor({{false, false}, {true, false}, {false, false}})]:totable())
  end)

  it("t[index tensor] picks along dim 1 in the index's shape", function()
    local x = dle.tensor({{1, 2}, {3, 4}, {5, 6}})
    assert.are.same({{{5, 6}, {1, 2}}}, x[dle.tensor({{3, 1}}, I64)]:totable())
    assert.are.same({{5, 6}}, x[dle.tensor({-1}, I64)]:totable())
  end)

  it("handles empty results and empty inputs", function()
    assert.are.same({0}, dle.zeros(3):masked_select(dle.zeros(3):bool()):shape())
    assert.are.same({0}, dle.zeros(0):masked_select(dle.zeros(0):bool()):shape())
  end)

  it("rejects a mask that is not bool or does not fit, naming the function and shapes", function()
    H.assert_error(function() return dle.masked_select(dle.zeros(3), dle.zeros(3)) end,
      "masked_select: mask must be bool, got float32", "{3}")
    H.assert_error(function() return dle.masked_select(dle.zeros(3), dle.zeros(4):bool()) end,
      "masked_select", "{3}", "{4}")
    H.assert_error(function() return dle.zeros(3, 2)[dle.zeros(2):bool()] end,
      "index: mask of shape {2} does not match the leading dims of tensor shape {3,2}")
    H.assert_error(function() return dle.zeros(3)[dle.tensor({4}, I64)] end, "index", "4", "size 3")
  end)
end)

describe("masked_scatter and t[mask] = v", function()
  it("fills masked places from source in order, every dtype and layout, in place too", function()
    local v, m, mask = masked_input(11)
    local src, want, k = {}, {}, 0
    for i = 1, 12 do src[i] = (i + 3) % 4 end
    for i = 1, 3 do
      want[i] = {}
      for j = 1, 4 do
        if m[i][j] ~= 0 then k = k + 1; want[i][j] = src[k] else want[i][j] = v[i][j] end
      end
    end
    each_dtype_layout(v, function(dt, layout, x)
      local s = dle.tensor(in_dtype(src, dt), {dtype = dt}):reshape(3, 4):t()
      local r = dle.masked_scatter(x, mask, s:t())
      assert.are.same(in_dtype(want, dt), r:totable(), dt .. " " .. layout)
      local y = x:clone()
      assert.are.equal(y, y:masked_scatter_(mask, s:t()))
      assert.are.same(in_dtype(want, dt), y:totable(), dt .. " " .. layout .. " in place")
    end)
  end)

  it("broadcasts the mask to self", function()
    local r = dle.zeros(2, 3):masked_scatter(dle.tensor({true, false, true}), dle.tensor({1, 2, 3, 4}))
    assert.are.same({{1, 0, 2}, {3, 0, 4}}, r:totable())
  end)

  it("rejects a source with too few elements, naming both shapes", function()
    H.assert_error(function() return dle.zeros(3):masked_scatter(dle.ones(3):bool(), dle.ones(2)) end,
      "masked_scatter: mask (shape {3}) selects 3 elements but source (shape {2}) has only 2")
  end)

  it("t[mask] = number fills, t[mask] = tensor writes in order or broadcasts", function()
    local x = dle.tensor({{1, -2}, {-3, 4}})
    x[x:lt(0)] = 0
    assert.are.same({{1, 0}, {0, 4}}, x:totable())
    x[x:eq(0)] = dle.tensor({7, 8})
    assert.are.same({{1, 7}, {8, 4}}, x:totable())
    x[dle.tensor({false, true})] = dle.tensor({5, 6})
    assert.are.same({{1, 7}, {5, 6}}, x:totable())
    x[dle.tensor({2}, I64)] = 9
    assert.are.same({{1, 7}, {9, 9}}, x:totable())
    local y = dle.zeros(3, 2):t() -- a non-contiguous target
    y[y:eq(0)] = dle.arange(1, 7)
    assert.are.same({{1, 2, 3}, {4, 5, 6}}, y:totable())
  end)
end)

describe("unique", function()
  it("sorts the distinct values, with 1-based inverse indices and counts, every dtype and layout", function()
    local v = ints({3, 4}, 21, 0, 3)
    each_dtype_layout(v, function(dt, layout, x)
      local vals, inv, counts = x:unique({return_inverse = true, return_counts = true})
      local seen, list = {}, {}
      for _, z in ipairs(H.flat(v)) do
        z = num_in(z, dt)
        if not seen[z] then seen[z] = 0; list[#list + 1] = z end
        seen[z] = seen[z] + 1
      end
      table.sort(list)
      local pos, cnt = {}, {}
      for i, z in ipairs(list) do pos[z] = i; cnt[i] = seen[z] end
      local got = {}
      for i, z in ipairs(vals:totable()) do got[i] = num(z) end
      assert.are.same(list, got, dt .. " " .. layout)
      assert.are.same(cnt, counts:totable())
      assert.are.same(H.map(v, function(z) return pos[num_in(z, dt)] end),
        inv:totable())
    end)
  end)

  it("returns only what is asked for, in PyTorch's order", function()
    local x = dle.tensor({2, 1, 2})
    assert.are.equal(1, select("#", x:unique()))
    local v, c = x:unique({return_counts = true})
    assert.are.same({1, 2}, v:totable())
    assert.are.same({1, 2}, c:totable())
  end)

  it("keeps each NaN apart and merges -0.0 with 0.0", function()
    local v = dle.tensor({NAN, 0.0, -0.0, NAN, 1}):unique()
    local t = v:totable()
    assert.are.equal(4, #t)
    assert.are.same({0, 1}, {t[1], t[2]})
    assert.is_true(t[3] ~= t[3] and t[4] ~= t[4])
  end)

  it("finds distinct slices along a dim", function()
    local x = dle.tensor({{1, 3, 1, 0}, {2, 4, 2, 9}})
    local v, inv, c = x:unique({dim = 2, return_inverse = true, return_counts = true})
    assert.are.same({{0, 1, 3}, {9, 2, 4}}, v:totable())
    assert.are.same({2, 3, 2, 1}, inv:totable())
    assert.are.same({1, 2, 1}, c:totable())
    assert.are.same({{1, 3, 1, 0}, {2, 4, 2, 9}}, x:unique({dim = 1}):totable())
  end)

  it("unique_consecutive collapses runs only", function()
    local v, inv, c = dle.unique_consecutive(dle.tensor({1, 1, 2, 2, 3, 1, 1}),
      {return_inverse = true, return_counts = true})
    assert.are.same({1, 2, 3, 1}, v:totable())
    assert.are.same({1, 1, 2, 2, 3, 4, 4}, inv:totable())
    assert.are.same({2, 2, 1, 2}, c:totable())
    local s = dle.unique_consecutive(dle.tensor({{1, 1, 2}, {1, 1, 2}}), {dim = 2})
    assert.are.same({{1, 2}, {1, 2}}, s:totable())
  end)

  it("handles empty and 0-dim inputs", function()
    local v, inv, c = dle.zeros(0):unique({return_inverse = true, return_counts = true})
    assert.are.same({{0}, {0}, {0}}, {v:shape(), inv:shape(), c:shape()})
    local v0, inv0 = dle.tensor(4):unique({return_inverse = true})
    assert.are.same({4}, v0:totable())
    assert.are.same({}, inv0:shape())
  end)

  it("checks its options and dim", function()
    H.assert_error(function() return dle.unique(dle.zeros(2), {bogus = 1}) end, "unique: unknown option 'bogus'")
    H.assert_error(function() return dle.unique(dle.zeros(2), {dim = 3}) end, "unique: dim 3 out of range", "{2}")
  end)
end)

describe("bincount, searchsorted, bucketize, count_nonzero", function()
  it("bincount counts values (entry 1 for 0) and sums weights, minlength pads", function()
    for _, dt in ipairs({"int64", "int32", "uint8"}) do
      H.each_layout({1, 0, 3, 3}, dt, function(layout, x)
        assert.are.same({1, 1, 0, 2}, dle.bincount(x):totable(), dt .. " " .. layout)
      end)
    end
    local w = dle.tensor({0.5, 1, 2, 4})
    local r = dle.bincount(dle.tensor({1, 0, 3, 3}, I64), w, 6)
    assert.are.equal("float32", r:dtype())
    assert.are.same({1, 0.5, 0, 6, 0, 0}, r:totable())
    assert.are.equal("float64", dle.bincount(dle.tensor({0}, I64), {weights = dle.tensor({2}, I64)}):dtype())
    assert.are.same({0, 0}, dle.bincount(dle.zeros(0, I64), nil, 2):totable())
    assert.are.same({}, dle.bincount(dle.zeros(0, I64)):totable())
  end)

  it("bincount rejects negative values, floats and 2-D input", function()
    H.assert_error(function() return dle.bincount(dle.tensor({1, -2}, I64)) end,
      "bincount: x must hold non-negative integers, got -2")
    H.assert_error(function() return dle.bincount(dle.tensor({1.5})) end,
      "bincount: x must be a 1-D tensor of integers, got float32")
    H.assert_error(function() return dle.bincount(dle.zeros(2, 2, I64)) end, "bincount", "{2,2}")
    H.assert_error(function() return dle.bincount(dle.zeros(2, I64), dle.zeros(3)) end,
      "bincount: weights of shape {3}")
  end)

  it("searchsorted finds 1-based insertion points, left and right, 1-D or batched, any layout", function()
    local seq = {1, 3, 3, 5}
    for _, dt in ipairs({"float32", "float64", "float16", "bfloat16", "int32", "int64"}) do
      H.each_layout(seq, dt, function(layout, s)
        local v = dle.tensor({0, 3, 4, 6}, {dtype = dt})
        assert.are.same({1, 2, 4, 5}, dle.searchsorted(s, v):totable(), dt .. " " .. layout)
        assert.are.same({1, 4, 4, 5}, dle.searchsorted(s, v, {right = true}):totable())
        assert.are.same({1, 4, 4, 5}, dle.searchsorted(s, v, {side = "right"}):totable())
      end)
    end
    local batched = dle.tensor({{1, 2, 3}, {10, 20, 30}})
    assert.are.same({{3, 1}, {2, 4}}, dle.searchsorted(batched, dle.tensor({{2.5, 0}, {15, 99}})):totable())
    assert.are.same({}, dle.searchsorted(dle.tensor({1, 2}), 1.5):shape())
    assert.are.equal(2, dle.searchsorted(dle.tensor({1, 2}), 1.5):item())
    assert.are.same({3}, dle.searchsorted(dle.tensor({1, 2}), dle.tensor({NAN})):totable())
  end)

  it("searchsorted rejects mismatched leading dims and contradicting options", function()
    H.assert_error(function() return dle.searchsorted(dle.zeros(2, 3), dle.zeros(3, 1)) end,
      "searchsorted: sorted_sequence of shape {2,3} and values of shape {3,1}")
    H.assert_error(function() return dle.searchsorted(dle.zeros(3), dle.zeros(1), {side = "up"}) end,
      "searchsorted: side must be")
    H.assert_error(function() return dle.searchsorted(dle.zeros(3), dle.zeros(1), {right = false, side = "right"}) end,
      "contradicts")
  end)

  it("bucketize is searchsorted over the boundaries", function()
    local b = dle.tensor({1, 3, 5})
    assert.are.same({1, 2, 3, 4}, dle.bucketize(dle.tensor({0.5, 3, 4, 9}), b):totable())
    assert.are.same({1, 3, 3, 4}, dle.bucketize(dle.tensor({0.5, 3, 4, 9}), b, {right = true}):totable())
    H.assert_error(function() return dle.bucketize(dle.zeros(2), dle.zeros(2, 2)) end,
      "bucketize: boundaries must be 1-D")
  end)

  it("count_nonzero counts over everything or along dims, NaN included", function()
    local x = dle.tensor({{0, 1, NAN}, {2, 0, 0}})
    assert.are.equal(3, dle.count_nonzero(x):item())
    assert.are.same({1, 1, 1}, x:count_nonzero(1):totable())
    assert.are.same({2, 1}, x:t():count_nonzero(1):totable())
    assert.are.equal(3, x:count_nonzero({1, 2}):item())
    assert.are.equal("int64", x:count_nonzero(1):dtype())
  end)
end)

describe("take, take_along_dim, index_put", function()
  it("take reads the row-major flattening at 1-based (or negative) positions, in index's shape", function()
    H.each_layout({{1, 2, 3}, {4, 5, 6}}, "float32", function(layout, x)
      assert.are.same({{1, 6}, {4, 5}}, dle.take(x, dle.tensor({{1, -1}, {4, 5}}, I64)):totable(), layout)
    end)
    H.assert_error(function() return dle.take(dle.zeros(2, 3), dle.tensor({7}, I64)) end,
      "take: index 7 is out of range for a dim of size 6")
  end)

  it("take_along_dim gathers with broadcasting, or over the flattened input", function()
    local x = dle.tensor({{10, 30, 20}, {5, 4, 6}})
    assert.are.same({{10, 20, 30}, {4, 5, 6}}, dle.take_along_dim(x, x:argsort(2), 2):totable())
    assert.are.same({{30}, {4}}, x:take_along_dim(dle.tensor({{2}, {2}}, I64), 2):totable())
    assert.are.same({{10, 4, 20}}, x:take_along_dim(dle.tensor({{1, 2, 1}}, I64), 1):totable())
    assert.are.same({10, 6}, x:take_along_dim(dle.tensor({1, 6}, I64)):totable())
    H.assert_error(function() return x:take_along_dim(dle.ones(2, 2, 2, I64), 1) end,
      "take_along_dim: input of shape {2,3} and indices of shape {2,2,2}")
    H.assert_error(function() return x:take_along_dim(dle.ones(2, 2, I64), 1) end, "do not broadcast in dim 2")
  end)

  it("index_put writes or accumulates at broadcast index tensors and masks", function()
    local x = dle.zeros(3, 2)
    local r = dle.index_put(x, {dle.tensor({1, 3, 1}, I64)}, dle.tensor({1, 2}), {accumulate = true})
    assert.are.same({{2, 4}, {0, 0}, {1, 2}}, r:totable())
    assert.are.same({{0, 0}, {0, 0}, {0, 0}}, x:totable())
    r = dle.index_put(x, {dle.tensor({1, 3}, I64), dle.tensor({2}, I64)}, 5)
    assert.are.same({{0, 5}, {0, 0}, {0, 5}}, r:totable())
    r = x:index_put({dle.tensor({{true, false}, {false, false}, {false, true}})}, dle.tensor({7, 8}))
    assert.are.same({{7, 0}, {0, 0}, {0, 8}}, r:totable())
    local y = dle.zeros(2, 3):t()
    assert.are.equal(y, y:index_put_({dle.tensor({-1}, I64)}, dle.tensor({1, 2})))
    assert.are.same({{0, 0}, {0, 0}, {1, 2}}, y:totable())
    local z = dle.zeros(4)
    z:index_put_({dle.tensor({2, 2, 4}, I64)}, dle.tensor({1, 1, 3}), {accumulate = true})
    assert.are.same({0, 2, 0, 3}, z:totable())
  end)

  it("index_put rejects out-of-range indices, too many indices and bad values", function()
    H.assert_error(function() return dle.index_put(dle.zeros(2, 2), {dle.tensor({3}, I64)}, 1) end,
      "index_put: index 3 is out of range for a dim of size 2")
    H.assert_error(function() return dle.index_put(dle.zeros(2), {dle.ones(1, I64), dle.ones(1, I64)}, 1) end,
      "index_put: 2 index tensors for a tensor of shape {2}")
    H.assert_error(function() return dle.index_put(dle.zeros(2, 2), {dle.ones(2, I64), dle.ones(3, I64)}, 1) end,
      "index_put: index tensors of shapes {2}, {3} do not broadcast")
    H.assert_error(function() return dle.index_put(dle.zeros(2, 2), {dle.ones(1, I64)}, 1, {bogus = 1}) end,
      "index_put: unknown option 'bogus'")
  end)
end)

-- reference mode of a list: smallest most frequent value and its last 1-based position
local function ref_mode(list)
  local count, best = {}, nil
  for _, z in ipairs(list) do count[z] = (count[z] or 0) + 1 end
  for z, c in pairs(count) do
    if not best or c > count[best] or (c == count[best] and z < best) then best = z end
  end
  local last
  for i, z in ipairs(list) do if z == best then last = i end end
  return best, last
end

describe("mode", function()
  it("finds each line's most frequent value (smallest among ties) and its last position", function()
    local v = ints({4, 9}, 31, 0, 3)
    each_dtype_layout(v, function(dt, layout, x)
      local vals, idx = x:mode(2)
      local vv, ii = {}, {}
      for r = 1, 4 do
        local list = {}
        for c = 1, 9 do list[c] = num_in(v[r][c], dt) end
        vv[r], ii[r] = ref_mode(list)
      end
      local got = {}
      for i, z in ipairs(vals:totable()) do got[i] = num(z) end
      assert.are.same(vv, got, dt .. " " .. layout)
      assert.are.same(ii, idx:totable(), dt .. " " .. layout)
    end)
  end)

  it("works along dim 1, with keepdim, and on long lines", function()
    local x = dle.tensor({{1, 2}, {1, 3}, {2, 3}})
    local v, i = x:mode(1, true)
    assert.are.same({{1, 3}}, v:totable())
    assert.are.same({{2, 3}}, i:totable())
    v, i = dle.mode(dle.arange(0, 5000):remainder(7))
    assert.are.same({0, 4999 - 4999 % 7 + 1}, {v:item(), i:item()})
    local k = x:mode({keepdim = true})
    assert.are.same({3, 1}, k:shape())
  end)

  it("rejects 0-dim, empty dims and dims out of range", function()
    H.assert_error(function() return dle.tensor(1):mode() end, "mode: expected a tensor with at least 1 dim", "{}")
    H.assert_error(function() return dle.zeros(2, 0):mode() end, "mode: dim 2 of shape {2,0} is empty")
    H.assert_error(function() return dle.zeros(2, 3):mode(3) end,
      "mode: dim 3 out of range for a tensor of shape {2,3}")
  end)
end)

describe("median, nanmedian, quantile, nanquantile", function()
  it("median takes the lower middle value, globally and along a dim with positions", function()
    for _, dt in ipairs({"float32", "float64", "float16", "bfloat16", "int32", "int64"}) do
      H.each_layout({{4, 1, 3, 2}, {9, 7, 8, 7}}, dt, function(layout, x)
        assert.are.equal(4, x:median():item(), dt .. " " .. layout)
        local v, i = x:median(2)
        assert.are.same({2, 7}, v:totable())
        assert.are.same({4, 4}, i:totable()) -- ties: the stable order's element (kthvalue's)
        v = x:median(1, true)
        assert.are.same({{4, 1, 3, 2}}, v:totable())
      end)
    end
  end)

  it("median gives NaN (at the first NaN) for a line holding one; nanmedian skips NaN", function()
    local x = dle.tensor({{3, NAN, 1, NAN}, {2, 5, 1, 4}, {NAN, NAN, NAN, NAN}})
    local v, i = x:median(2)
    local t = v:totable()
    assert.is_true(t[1] ~= t[1])
    assert.are.same({2, 1}, {i[1], i[2]})
    assert.are.equal(2, t[2])
    v, i = x:nanmedian(2)
    t = v:totable()
    assert.are.same({1, 2}, {t[1], t[2]})
    assert.is_true(t[3] ~= t[3])
    assert.are.same({3, 1}, {i[1], i[2]})
    assert.are.equal(2, dle.tensor({3, NAN, 1, 2}):nanmedian():item())
  end)

  it("quantile interpolates between ranks in every mode, q a number or a tensor", function()
    local x = dle.tensor({{1, 2, 3, 4}, {10, 40, 20, 30}})
    local want = {linear = {1.75, 17.5}, lower = {1, 10}, higher = {2, 20}, midpoint = {1.5, 15}, nearest = {2, 20}}
    for how, w in pairs(want) do
      local r = x:quantile(0.25, 2, false, {interpolation = how})
      assert.are.same(w, r:totable(), how)
    end
    local q = x:quantile(dle.tensor({0, 0.5, 1}), 2, true)
    assert.are.same({3, 2, 1}, q:shape())
    assert.are.same({{{1}, {10}}, {{2.5}, {25}}, {{4}, {40}}}, q:totable())
    assert.are.equal(2.5, dle.tensor({1, 2, 3, 4}):quantile(0.5):item())
    assert.are.same({1, 1}, x:quantile(0.5, nil, true):shape())
    local t = x:t():quantile(0.5, 1):totable()
    assert.are.same({2.5, 25}, t)
    assert.are.same({}, dle.tensor(3):quantile(0.5):shape())
  end)

  it("quantile gives NaN for lines with NaN; nanquantile ignores NaN", function()
    local x = dle.tensor({{1, NAN, 3}, {NAN, NAN, NAN}, {1, 2, 3}})
    local q = x:quantile(0.5, 2):totable()
    assert.is_true(q[1] ~= q[1] and q[2] ~= q[2])
    assert.are.equal(2, q[3])
    local n = x:nanquantile(0.5, 2):totable()
    assert.are.same({2, 2}, {n[1], n[3]})
    assert.is_true(n[2] ~= n[2])
  end)

  it("rejects q out of range, integer inputs, unknown interpolation and empty dims", function()
    H.assert_error(function() return dle.zeros(3):quantile(1.5) end, "quantile: q must lie in [0, 1]")
    H.assert_error(function() return dle.zeros(3, I64):quantile(0.5) end,
      "quantile: input must be a float tensor, got int64")
    H.assert_error(function() return dle.zeros(3):quantile(0.5, 1, false, {interpolation = "cubic"}) end,
      "quantile: interpolation must be")
    H.assert_error(function() return dle.zeros(2, 0):median(2) end, "median: dim 2 of shape {2,0} is empty")
    H.assert_error(function() return dle.tensor(1):median(1) end, "median: expected a tensor with at least 1 dim")
    -- a numeric string is not a dim (Lua would convert "2" and "0x10" to integers)
    H.assert_error(function() return dle.tensor({1, 2}):median("2") end, "median: dim must be an integer, got string")
    H.assert_error(function() return dle.tensor({1, 2}):nanmedian("0x10") end,
      "nanmedian: dim must be an integer, got string")
    H.assert_error(function() return dle.zeros(3):nanquantile(0.5, 2) end, "nanquantile: dim 2 out of range")
  end)
end)

describe("dle.compile with results sized by the data", function()
  it("runs eagerly (never replays a traced size) and says why under debug", function()
    local function eager(x) return (dle.masked_select(x, x:gt(0)) * 2 + 1):exp():sum() + x:nonzero():sum() end
    local f = dle.compile(eager)
    for _, v in ipairs({{1, -1, 2}, {-1, -1, 2}, {3, 4, 5}}) do
      local x = dle.tensor(v, {dtype = "float64"})
      assert.are.equal(eager(x):item(), f(x):item())
    end
    local info = dle.compile_info(f)
    assert.are.equal(0, info.replays)
    assert.is_true(info.eager >= 2)
  end)

  it("marks a traced graph unsafe, naming the op, so it is never replayed", function()
    for name, f in pairs({unique = function(x) return dle.unique(x) end,
                          masked_select = function(x) return x[x:gt(0)] end,
                          nonzero = function(x) return x:nonzero() end,
                          bincount = function(x) return dle.bincount(x:long()) end}) do
      local g = dle.graph.trace(f, dle.ones(3))
      assert.truthy(tostring(g.unsafe):find(name .. ": its result size depends on the data", 1, true),
        tostring(g.unsafe))
      assert.has_error(function() g:run(dle.ones(3)) end)
    end
  end)
end)

describe("PyTorch agreement (float64)", function()
  it("matches nonzero, masked_select, unique, bincount, searchsorted, mode, median, quantile", function()
    if H.without_torch(pending) then return end
    local x = dle.tensor(ints({5, 6}, 41, 0, 4), {dtype = "float64"})
    local out = H.run_torch({x = x}, {
      "p(x.nonzero() + 1)", "p(x.masked_select(x > 2))",
      "v, i, c = x.unique(return_inverse=True, return_counts=True); p(v); p(i + 1); p(c)",
      "p(torch.bincount(x.reshape(-1).long()))",
      "p(torch.searchsorted(torch.tensor([0., 1, 1, 3], dtype=torch.float64), x[0], right=True) + 1)",
      "v, i = x.mode(1); p(v); p(i + 1)",
      "v, i = x.median(1); p(v); p(i + 1); p(x.median().reshape(1))",
      "p(x.quantile(torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64), dim=0, interpolation='linear'))",
      "p(x.quantile(0.3, dim=1, keepdim=True, interpolation='nearest'))",
    })
    local function flat(t) return t:double():reshape(-1):totable() end
    H.assert_torch_numbers(flat(x:nonzero()), out[1], 1e-12, "nonzero")
    H.assert_torch_numbers(flat(x:masked_select(x:gt(2))), out[2], 1e-12, "masked_select")
    local v, i, c = x:unique({return_inverse = true, return_counts = true})
    H.assert_torch_numbers(flat(v), out[3], 1e-12, "unique values")
    H.assert_torch_numbers(flat(i), out[4], 1e-12, "unique inverse")
    H.assert_torch_numbers(flat(c), out[5], 1e-12, "unique counts")
    H.assert_torch_numbers(flat(dle.bincount(x:reshape(-1):long())), out[6], 1e-12, "bincount")
    H.assert_torch_numbers(flat(dle.searchsorted(dle.tensor({0, 1, 1, 3}, {dtype = "float64"}), x[1], {right = true})),
      out[7], 1e-12, "searchsorted")
    local mv, mi = x:mode(2)
    H.assert_torch_numbers(flat(mv), out[8], 1e-12, "mode values")
    H.assert_torch_numbers(flat(mi), out[9], 1e-12, "mode indices")
    local dv, di = x:median(2)
    H.assert_torch_numbers(flat(dv), out[10], 1e-12, "median values")
    H.assert_torch_numbers(flat(di), out[11], 1e-12, "median indices")
    H.assert_torch_numbers({x:median():item()}, out[12], 1e-12, "global median")
    local qs = dle.tensor({0.1, 0.5, 0.9}, {dtype = "float64"})
    H.assert_torch_numbers(flat(x:quantile(qs, 1)), out[13], 1e-12, "quantile")
    H.assert_torch_numbers(flat(x:quantile(0.3, 2, true, {interpolation = "nearest"})), out[14], 1e-12,
      "quantile nearest")
  end)
end)
