-- index_spec.lua — joining and indexing ops (cat, stack, split, chunk, gather, scatter_add,
-- index_select, index_add, masked_fill, tril, triu, one_hot) against pure-Lua references, on
-- contiguous, transposed, strided, narrowed, broadcast and odd-sized inputs, every dim, several dtypes.
local dle = require("dle")
local H = require("helpers")

-- ---------------------------------------------------------------- nested-table helpers

local build = H.build   -- nested table of `shape` whose element at multi-index idx is f(idx)

local function get(tbl, idx, n)
  local v = tbl
  for d = 1, n or #idx do v = v[idx[d]] end
  return v
end

local function set(tbl, idx, n, value)
  local v = tbl
  for d = 1, n - 1 do v = v[idx[d]] end
  v[idx[n]] = value
end

local function copy_list(t)
  local c = {}
  for i, v in ipairs(t) do c[i] = v end
  return c
end

local function deep_copy(t)
  if type(t) ~= "table" then return t end
  local c = {}
  for i, v in ipairs(t) do c[i] = deep_copy(v) end
  return c
end

-- Calls f(idx) for every multi-index of shape.
local function each(shape, f)
  build(shape, function(idx) f(idx) return 0 end)
end

-- Random values that every dtype holds exactly (quarters for floats), so results compare with ==.
local function random_values(shape, dtype)
  return build(shape, function()
    if dtype == "bool" then return math.random() < 0.5 end
    if dtype == "int64" then return math.random(-50, 50) end
    return math.random(-200, 200) / 4
  end)
end

local function junk(dtype)
  if dtype == "bool" then return true end
  return 99
end

local function T(tbl, dtype) return dle.tensor(tbl, {dtype = dtype}) end

-- The same logical values in several memory layouts: contiguous, transposed (all dims
-- reversed, then permuted back), strided (every other element of a wider last dim) and
-- narrowed (an offset view of a taller tensor).
local function layouts(tbl, shape, dtype)
  local n = #shape
  local out = {contiguous = T(tbl, dtype)}
  if n >= 2 then
    local rshape, perm = {}, {}
    for k = 1, n do rshape[k], perm[k] = shape[n + 1 - k], n + 1 - k end
    local rev = build(rshape, function(idx)
      local j = {}
      for k = 1, n do j[k] = idx[n + 1 - k] end
      return get(tbl, j)
    end)
    out.transposed = T(rev, dtype):permute(perm)
  end
  local wide = copy_list(shape)
  wide[n + 1] = 2
  out.strided = T(build(wide, function(idx)
    if idx[n + 1] == 1 then return junk(dtype) end
    return get(tbl, idx, n)
  end), dtype):select(n + 1, 2)
  local tall = copy_list(shape)
  tall[1] = shape[1] + 2
  out.narrowed = T(build(tall, function(idx)
    if idx[1] == 1 or idx[1] == tall[1] then return junk(dtype) end
    local j = copy_list(idx)
    j[1] = j[1] - 1
    return get(tbl, j)
  end), dtype):narrow(1, 2, shape[1])
  return out
end

local function layout_names(n)
  if n >= 2 then return {"contiguous", "transposed", "strided", "narrowed"} end
  return {"contiguous", "strided", "narrowed"}
end

local function random_index(shape, hi)
  return build(shape, function() return math.random(1, hi) end)
end

-- Asserts that f() raises an error containing every string of `parts`.
local function assert_error(f, parts)
  local ok, msg = pcall(f)
  assert.is_false(ok)
  msg = tostring(msg)
  for _, p in ipairs(parts) do
    assert(msg:find(p, 1, true), string.format("error %q does not mention %q", msg, p))
  end
end

local MOVE_TYPES = {"float32", "float64", "int64", "bool"}
local NUMERIC_TYPES = {"float32", "float64", "int64"}

-- check(dtype, values, views, case) for every dtype of types and every case of cases, on a random
-- {7, 13} input (values: its nested table; views: it in every layout).
local SHAPE = {7, 13}
local DIMS = {1, 2}
local function for_inputs(types, cases, check)
  for _, dtype in ipairs(types) do
    local values = random_values(SHAPE, dtype)
    local views = layouts(values, SHAPE, dtype)
    for _, case in ipairs(cases) do check(dtype, values, views, case) end
  end
end

-- The index of gather and scatter_add along dim: random, of shape {5, 6} but 9 long along dim
-- (longer than the input along dim, so indices repeat); returns it and its shape.
local function repeating_index(dim)
  local ishape = {5, 6}
  ishape[dim] = 9
  return random_index(ishape, SHAPE[dim]), ishape
end

-- f(name, other, other1) for each 2-D layout name: other is another 2-D layout, other1 a 1-D one.
local function layout_pairs(f)
  local names, names1 = layout_names(2), layout_names(1)
  for k, name in ipairs(names) do f(name, names[(k % 4) + 1], names1[(k % 3) + 1]) end
end

-- ---------------------------------------------------------------- references

local function ref_cat(tbls, shapes, dim)
  local out_shape = copy_list(shapes[1])
  out_shape[dim] = 0
  for _, s in ipairs(shapes) do out_shape[dim] = out_shape[dim] + s[dim] end
  return build(out_shape, function(idx)
    local j = copy_list(idx)
    for k, s in ipairs(shapes) do
      if j[dim] <= s[dim] then return get(tbls[k], j) end
      j[dim] = j[dim] - s[dim]
    end
  end), out_shape
end

-- The picks along dim: a table of shape whose element idx is src at idx with its dim coordinate
-- replaced by at(idx).
local function ref_pick(src, dim, shape, at)
  return build(shape, function(idx)
    local j = copy_list(idx)
    j[dim] = at(idx)
    return get(src, j)
  end)
end

local function ref_gather(src, dim, index, index_shape)
  return ref_pick(src, dim, index_shape, function(idx) return get(index, idx) end)
end

local function ref_index_select(src, src_shape, dim, index)
  local shape = copy_list(src_shape)
  shape[dim] = #index
  return ref_pick(src, dim, shape, function(idx) return index[idx[dim]] end)
end

-- The accumulations along dim: self with src[idx] added at idx with its dim coordinate replaced
-- by at(idx), for every idx of shape.
local function ref_accumulate(self, dim, shape, src, at)
  local out = deep_copy(self)
  each(shape, function(idx)
    local j = copy_list(idx)
    j[dim] = at(idx)
    set(out, j, #shape, get(out, j) + get(src, idx))
  end)
  return out
end

local function ref_scatter_add(self, dim, index, index_shape, src)
  return ref_accumulate(self, dim, index_shape, src, function(idx) return get(index, idx) end)
end

local function ref_index_add(self, dim, index, src, src_shape)
  return ref_accumulate(self, dim, src_shape, src, function(idx) return index[idx[dim]] end)
end

-- mask broadcasts to src's shape (right-aligned, size-1 dims repeat)
local function ref_masked_fill(src, shape, mask, mask_shape, value)
  local off = #shape - #mask_shape
  return build(shape, function(idx)
    local j = {}
    for d = 1, #mask_shape do j[d] = mask_shape[d] == 1 and 1 or idx[d + off] end
    if get(mask, j, #mask_shape) then return value end
    return get(src, idx)
  end)
end

local function ref_triangle(src, shape, k, lower, zero)
  local n = #shape
  return build(shape, function(idx)
    local i, j = idx[n - 1], idx[n]
    local keep = lower and (j - i <= k) or (not lower and j - i >= k)
    if keep then return get(src, idx) end
    return zero
  end)
end

-- ---------------------------------------------------------------- specs

describe("dle.cat", function()
  it("joins odd-sized inputs along every dim in every layout and dtype", function()
    local base = {3, 5, 4}
    for _, dtype in ipairs(MOVE_TYPES) do
      for dim = 1, 3 do
        local shapes, tbls, tensors = {}, {}, {}
        for k, extra in ipairs({2, 1, 3}) do
          local s = copy_list(base)
          s[dim] = extra
          shapes[k], tbls[k] = s, random_values(s, dtype)
        end
        local names = layout_names(3)
        for k = 1, 3 do tensors[k] = layouts(tbls[k], shapes[k], dtype)[names[(k + dim) % #names + 1]] end
        local expected, out_shape = ref_cat(tbls, shapes, dim)
        local r = dle.cat(tensors, dim)
        assert.same(out_shape, r:shape())
        assert.equal(dtype, r:dtype())
        assert.same(expected, r:totable())
        assert.same(expected, dle.cat(tensors, dim - 4):totable())  -- negative dim
      end
    end
  end)

  it("defaults to dim 1, has the alias concat and accepts a single tensor", function()
    local a, b = dle.arange(0, 6):view(2, 3), dle.arange(6, 9):view(1, 3)
    assert.same({{0, 1, 2}, {3, 4, 5}, {6, 7, 8}}, dle.cat({a, b}):totable())
    assert.same({{0, 1, 2}, {3, 4, 5}, {6, 7, 8}}, dle.concat({a, b}, 1):totable())
    assert.same(a:totable(), dle.cat({a}):totable())
    assert.is_false(dle.same_storage(a, dle.cat({a})))
  end)

  it("promotes mixed dtypes and skips 1-D empty tensors", function()
    local i = dle.tensor({{1, 2}}, {dtype = "int64"})
    local f = dle.tensor({{0.5, 1.5}}, {dtype = "float64"})
    local r = dle.cat({i, f}, 1)
    assert.equal("float64", r:dtype())
    assert.same({{1, 2}, {0.5, 1.5}}, r:totable())
    local r2 = dle.cat({dle.zeros(0), i, dle.zeros(0)}, 2)
    assert.same({1, 2}, r2:shape())
    assert.same({{1, 2, 1, 2}}, dle.cat({i, r2:narrow(2, 1, 0), i}, 2):totable())
  end)

  it("runs the threaded path on large inputs", function()
    local a = T(random_values({150, 130}, "float32"), "float32")
    local b = T(random_values({150, 120}, "float32"), "float32")
    local expected = ref_cat({a:totable(), b:totable()}, {{150, 130}, {150, 120}}, 2)
    assert.same(expected, dle.cat({a:t():contiguous():t(), b}, 2):totable())
  end)

  it("reports mismatched shapes with the input number and shapes", function()
    local a, b = dle.zeros(2, 3), dle.zeros(2, 4)
    assert_error(function() dle.cat({a, b}, 1) end, {"cat", "input 2", "{2,4}", "{2,3}", "dim 1"})
    assert_error(function() dle.cat({a, dle.zeros(2, 3, 1)}, 1) end, {"cat", "input 2", "{2,3,1}"})
    assert_error(function() dle.cat({a, a}, 3) end, {"cat", "dim 3"})
    assert_error(function() dle.cat({}, 1) end, {"cat", "non-empty"})
    assert_error(function() dle.cat({a, 3}, 1) end, {"cat", "element 2"})
    assert_error(function() dle.cat(a, b) end, {"cat", "list"})
    assert_error(function() dle.cat({dle.tensor(1), dle.tensor(2)}) end, {"cat", "0-dim"})
  end)
end)

describe("dle.stack", function()
  it("stacks along a new dim at every position", function()
    local tbls = {random_values({3, 4}, "float64"), random_values({3, 4}, "float64")}
    local ts = {T(tbls[1], "float64"), layouts(tbls[2], {3, 4}, "float64").transposed}
    local r1 = dle.stack(ts)
    assert.same({2, 3, 4}, r1:shape())
    assert.same(tbls, r1:totable())
    local r3 = dle.stack(ts, -1)
    assert.same({3, 4, 2}, r3:shape())
    assert.same(build({3, 4, 2}, function(idx) return tbls[idx[3]][idx[1]][idx[2]] end), r3:totable())
    local r2 = dle.stack(ts, 2)
    assert.same(build({3, 2, 4}, function(idx) return tbls[idx[2]][idx[1]][idx[3]] end), r2:totable())
  end)

  it("reports unequal shapes", function()
    assert_error(function() dle.stack({dle.zeros(2, 3), dle.zeros(3, 2)}) end,
                 {"stack", "input 2", "{3,2}", "{2,3}"})
  end)
end)

describe("split and chunk", function()
  it("split by size gives views sharing storage, the last one shorter", function()
    local t = dle.arange(0, 7 * 13):view(7, 13)
    local parts = t:split(3)
    assert.equal(3, #parts)
    assert.same({3, 13}, parts[1]:shape())
    assert.same({1, 13}, parts[3]:shape())
    for i, p in ipairs(parts) do
      assert.is_true(dle.same_storage(p, t))
      assert.same(t:narrow(1, (i - 1) * 3 + 1, p:size(1)):totable(), p:totable())
    end
    local cols = dle.split(t, 5, 2)
    assert.equal(3, #cols)
    assert.same({7, 3}, cols[3]:shape())
    assert.same(t:narrow(2, 11, 3):totable(), cols[3]:totable())
    parts[2]:fill_(-1)   -- writes through the view
    assert.equal(-1, t[4][1])
  end)

  it("split by a list of sizes, which must add up", function()
    local t = dle.arange(0, 24):view(2, 12)
    local parts = t:split({2, 7, 3}, -1)
    assert.same({{2, 2}, {2, 7}, {2, 3}}, {parts[1]:shape(), parts[2]:shape(), parts[3]:shape()})
    assert.same(t:narrow(2, 3, 7):totable(), parts[2]:totable())
    assert.is_true(dle.same_storage(parts[3], t))
    assert_error(function() t:split({2, 3}, 2) end, {"split", "5", "dim 2", "{2,12}", "12"})
    assert_error(function() t:split(0, 2) end, {"split", "positive"})
  end)

  it("chunk gives at most n equal views", function()
    local t = dle.arange(0, 13)
    local c = t:chunk(4)
    assert.equal(4, #c)
    assert.same({4, 4, 4, 1}, {c[1]:size(1), c[2]:size(1), c[3]:size(1), c[4]:size(1)})
    assert.equal(3, #dle.chunk(dle.arange(0, 6), 4))     -- sizes 2, 2, 2
    local m = dle.arange(0, 14):view(2, 7)
    local cols = m:chunk(2, 2)
    assert.same({{2, 4}, {2, 3}}, {cols[1]:shape(), cols[2]:shape()})
    assert.is_true(dle.same_storage(cols[2], m))
    assert.same(m:narrow(2, 5, 3):totable(), cols[2]:totable())
    assert_error(function() t:chunk(0) end, {"chunk", "positive"})
  end)

  -- found by the API fuzzer: (size + n - 1) / n overflowed, then divided by zero (SIGFPE)
  it("huge chunk counts and split sizes give whole pieces, not an overflow", function()
    local t = dle.arange(0, 5)
    local c = t:chunk(math.maxinteger)
    assert.equal(5, #c)
    assert.same({1}, c[5]:shape())
    local s = t:split(math.maxinteger)
    assert.equal(1, #s)
    assert.same({5}, s[1]:shape())
    -- an empty dim is one empty piece, whatever the number of chunks asked for
    local e = dle.zeros(0, 3):chunk(math.maxinteger)
    assert.equal(1, #e)
    assert.same({0, 3}, e[1]:shape())
    -- list sizes whose sum overflows int64 are too many, not a wrapped-around match
    local m = math.maxinteger
    assert_error(function() t:split({m, m, m, 5}) end, {"split", "more than", "{5}"})
  end)
end)

describe("gather", function()
  it("matches the reference on every dim, layout and dtype", function()
    for_inputs(MOVE_TYPES, DIMS, function(dtype, src, views, dim)
      local index, ishape = repeating_index(dim)
      local ilay = layouts(index, ishape, "int64")
      local expected = ref_gather(src, dim, index, ishape)
      layout_pairs(function(name, iname)
        local r = views[name]:gather(dim, ilay[iname])
        assert.same(ishape, r:shape())
        assert.equal(dtype, r:dtype())
        assert.same(expected, r:totable(), name .. "/" .. iname .. " dim " .. dim)
      end)
      assert.same(expected, dle.gather(views.contiguous, dim - 3, ilay.contiguous):totable())
    end)
  end)

  it("handles 3-D inputs and a broadcast (expanded) index", function()
    local shape = {3, 5, 4}
    local src = random_values(shape, "float64")
    for dim = 1, 3 do
      local row = random_index({1, 1, 1}, shape[dim])
      local ishape = {3, 5, 4}
      local expected = ref_gather(src, dim, build(ishape, function() return row[1][1][1] end), ishape)
      local idx = dle.tensor(row, {dtype = "int64"}):expand(3, 5, 4)
      assert.same(expected, T(src, "float64"):gather(dim, idx):totable())
    end
  end)

  it("runs the threaded path on large inputs", function()
    local shape = {300, 220}
    local src = random_values(shape, "float32")
    local index = random_index(shape, 300)
    local r = T(src, "float32"):gather(1, T(index, "int64"))
    assert.same(ref_gather(src, 1, index, shape), r:totable())
  end)

  it("reports out-of-range, negative and non-int64 indices", function()
    local src = dle.zeros(3, 5)
    local bad = dle.tensor({{1, 6}}, {dtype = "int64"})
    assert_error(function() src:gather(2, bad) end, {"gather", "index 6", "dim 2", "size 5", "{3,5}", "{1,2}"})
    assert_error(function() src:gather(1, dle.tensor({{0}}, {dtype = "int64"})) end, {"gather", "index 0", "size 3"})
    assert_error(function() src:gather(1, dle.tensor({{-1}}, {dtype = "int64"})) end, {"gather", "index -1"})
    assert_error(function() src:gather(1, dle.tensor({{1}})) end, {"gather", "int64", "float32"})
    assert_error(function() src:gather(1, dle.tensor({1}, {dtype = "int64"})) end, {"gather", "{1}", "{3,5}"})
    assert_error(function() src:gather(1, dle.ones(2, 6, {dtype = "int64"})) end, {"gather", "{2,6}", "{3,5}", "dim 2"})
  end)
end)

describe("index_select", function()
  it("matches the reference on every dim, layout and dtype", function()
    for_inputs(MOVE_TYPES, DIMS, function(dtype, src, views, dim)
      local index = random_index({9}, SHAPE[dim])
      local expected = ref_index_select(src, SHAPE, dim, index)
      local ilay = layouts(index, {9}, "int64")
      layout_pairs(function(name, _, iname)
        local r = views[name]:index_select(dim, ilay[iname])
        assert.equal(dtype, r:dtype())
        assert.same(expected, r:totable(), name .. "/" .. iname .. " dim " .. dim)
      end)
      assert.same(expected, views.transposed:index_select(dim, index):totable())  -- a Lua table
      assert.same(expected, dle.index_select(views.contiguous, dim - 3, index):totable())
    end)
  end)

  it("selects along every dim of a 3-D tensor and accepts empty and 0-dim indices", function()
    local shape = {3, 5, 4}
    local src = random_values(shape, "float64")
    local t = T(src, "float64")
    for dim = 1, 3 do
      local index = random_index({6}, shape[dim])
      assert.same(ref_index_select(src, shape, dim, index), t:index_select(dim, index):totable())
    end
    assert.same({3, 0, 4}, t:index_select(2, {}):shape())
    assert.same({3, 1, 4}, t:index_select(2, dle.tensor(2, {dtype = "int64"})):shape())
  end)

  it("runs the threaded path on large inputs (embedding-style row lookup)", function()
    local src = random_values({50, 64}, "float32")
    local index = random_index({700}, 50)
    local r = T(src, "float32"):index_select(1, index)
    assert.same(ref_index_select(src, {50, 64}, 1, index), r:totable())
  end)

  it("reports bad indices naming the value and the dim size", function()
    local t = dle.zeros(4, 5)
    assert_error(function() t:index_select(2, {1, 6}) end, {"index_select", "index 6", "dim 2", "size 5", "{4,5}"})
    assert_error(function() t:index_select(1, {-1}) end, {"index_select", "index -1", "size 4"})
    assert_error(function() t:index_select(1, {1.5}) end, {"index_select", "integer"})
    assert_error(function() t:index_select(1, dle.ones(2, 2, {dtype = "int64"})) end, {"index_select", "1-D", "{2,2}"})
    assert_error(function() t:index_select(1, dle.ones(2)) end, {"index_select", "int64", "float32"})
  end)
end)

describe("scatter_add", function()
  it("matches the reference on every dim, layout and dtype (with repeated indices)", function()
    for_inputs(NUMERIC_TYPES, DIMS, function(dtype, self, views, dim)
      local index, ishape = repeating_index(dim)
      local sshape = {6, 8}
      sshape[dim] = 10
      local src = random_values(sshape, dtype)
      local expected = ref_scatter_add(self, dim, index, ishape, src)
      local ilay, slay = layouts(index, ishape, "int64"), layouts(src, sshape, dtype)
      layout_pairs(function(name, other)
        local r = views[name]:scatter_add(dim, ilay[other], slay[name])
        assert.equal(dtype, r:dtype())
        assert.same(expected, r:totable(), name .. "/" .. other .. " dim " .. dim)
      end)
      assert.same(self, views.contiguous:totable())   -- self unchanged
    end)
  end)

  it("runs the threaded path when few positions have many steps each", function()
    local self = random_values({3, 400}, "float64")
    local index = random_index({3, 15000}, 400)
    local src = random_values({3, 15000}, "float64")
    local r = T(self, "float64"):scatter_add(2, T(index, "int64"), T(src, "float64"))
    assert.same(ref_scatter_add(self, 2, index, {3, 15000}, src), r:totable())
  end)

  it("scatter_add_ accumulates in place", function()
    local t = dle.zeros(2, 3, {dtype = "float64"})
    local idx = dle.tensor({{1, 1, 3}, {2, 2, 2}}, {dtype = "int64"})
    local r = t:scatter_add_(2, idx, dle.ones(2, 3, {dtype = "float64"}))
    assert.equal(t, r)
    assert.same({{2, 0, 1}, {0, 3, 0}}, t:totable())
  end)

  it("reports bad indices and shapes", function()
    local t = dle.zeros(3, 4)
    assert_error(function() t:scatter_add(1, dle.tensor({{4}}, {dtype = "int64"}), dle.ones(1, 1)) end,
                 {"scatter_add", "index 4", "dim 1", "size 3", "{3,4}"})
    assert_error(function() t:scatter_add(1, dle.ones(2, 2, {dtype = "int64"}), dle.ones(1, 2)) end,
                 {"scatter_add", "{2,2}", "{1,2}"})
    assert_error(function() t:scatter_add(1, dle.ones(2, 2), dle.ones(2, 2)) end, {"scatter_add", "int64"})
  end)
end)

describe("index_add", function()
  it("matches the reference on every dim, layout and dtype (with repeated indices)", function()
    for_inputs(NUMERIC_TYPES, DIMS, function(dtype, self, views, dim)
      local index = random_index({9}, SHAPE[dim])
      local sshape = copy_list(SHAPE)
      sshape[dim] = 9
      local src = random_values(sshape, dtype)
      local expected = ref_index_add(self, dim, index, src, sshape)
      local slay, ilay = layouts(src, sshape, dtype), layouts(index, {9}, "int64")
      layout_pairs(function(name, other, iname)
        local r = views[name]:index_add(dim, ilay[iname], slay[other])
        assert.same(expected, r:totable(), name .. "/" .. other .. " dim " .. dim)
      end)
      assert.same(expected, dle.index_add(views.contiguous, dim - 3, index, slay.contiguous):totable())
    end)
  end)

  it("index_add_ accumulates in place and runs the threaded path on large inputs", function()
    local self = random_values({40, 64}, "float64")
    local index = random_index({900}, 40)
    local src = random_values({900, 64}, "float64")
    local t = T(self, "float64")
    t:index_add_(1, index, T(src, "float64"))
    assert.same(ref_index_add(self, 1, index, src, {900, 64}), t:totable())
  end)

  it("index_add_ reads a src that overlaps self from a snapshot", function()
    local t = dle.tensor({{1, 2}, {10, 20}, {100, 200}}, {dtype = "float64"})
    t:index_add_(1, {2, 1}, t:narrow(1, 1, 2))   -- row 2 += row 1, row 1 += old row 2
    assert.same({{11, 22}, {11, 22}, {100, 200}}, t:totable())
  end)

  it("reports bad indices and shapes", function()
    local t = dle.zeros(3, 4)
    assert_error(function() t:index_add(2, {5}, dle.ones(3, 1)) end, {"index_add", "index 5", "dim 2", "size 4"})
    assert_error(function() t:index_add(2, {1, 2}, dle.ones(3, 3)) end, {"index_add", "{3,3}", "{3,4}"})
  end)
end)

describe("masked_fill", function()
  it("matches the reference with broadcast masks, every layout and dtype", function()
    local values = {float32 = -2.5, float64 = 7.25, int64 = -9, bool = true}
    for_inputs(MOVE_TYPES, {{7, 13}, {13}, {7, 1}, {1, 13}}, function(dtype, src, views, mshape)
      local mask = random_values(mshape, "bool")
      local mlay = layouts(mask, mshape, "bool")
      local expected = ref_masked_fill(src, SHAPE, mask, mshape, values[dtype])
      layout_pairs(function(name, other, other1)
        local mname = #mshape == 2 and other or other1
        local r = views[name]:masked_fill(mlay[mname], values[dtype])
        assert.equal(dtype, r:dtype())
        assert.same(expected, r:totable(), name .. "/" .. mname)
      end)
    end)
  end)

  it("broadcasts src against a larger mask and expands masks", function()
    local src = dle.tensor({1, 2, 3}, {dtype = "float64"})
    local mask = dle.tensor({{true, false, false}, {false, false, true}})
    assert.same({{0, 2, 3}, {1, 2, 0}}, src:masked_fill(mask, 0):totable())
    local col = dle.tensor({{true}, {false}}):expand(2, 3)
    assert.same({{5, 5, 5}, {1, 2, 3}}, dle.masked_fill(src, col, 5):totable())
  end)

  it("masked_fill_ writes into self, also through a view", function()
    local t = dle.zeros(3, 4)
    local r = t:masked_fill_(dle.tensor({true, false, true, false}), 1)
    assert.equal(t, r)
    assert.same({{1, 0, 1, 0}, {1, 0, 1, 0}, {1, 0, 1, 0}}, t:totable())
    local v = t:t():narrow(1, 2, 2)   -- columns 2 and 3 of t
    v:masked_fill_(dle.tensor({false, true, false}), dle.tensor(7))
    assert.same({{1, 0, 1, 0}, {1, 7, 7, 0}, {1, 0, 1, 0}}, t:totable())
  end)

  it("runs the threaded path on large inputs", function()
    local src = random_values({200, 190}, "float32")
    local mask = random_values({200, 190}, "bool")
    local r = T(src, "float32"):masked_fill(T(mask, "bool"), 3)
    assert.same(ref_masked_fill(src, {200, 190}, mask, {200, 190}, 3), r:totable())
  end)

  it("reports a non-bool mask and shapes that do not broadcast", function()
    local t = dle.zeros(2, 3)
    assert_error(function() t:masked_fill(dle.ones(2, 3), 1) end, {"masked_fill", "bool", "float32", "{2,3}"})
    assert_error(function() t:masked_fill(dle.ones(4, {dtype = "bool"}), 1) end, {"masked_fill", "{2,3}", "{4}"})
    assert_error(function() t:masked_fill_(dle.ones(2, 2, 3, {dtype = "bool"}), 1) end,
                 {"masked_fill", "{2,3}", "{2,2,3}"})
    assert_error(function() t:masked_fill(dle.ones(2, 3, {dtype = "bool"}), "x") end, {"masked_fill", "value"})
  end)
end)

describe("tril and triu", function()
  it("match the reference for diagonals above and below, every layout and dtype", function()
    local zero = {float32 = 0, float64 = 0, int64 = 0, bool = false}
    for_inputs(MOVE_TYPES, {0, 1, -2, 5, -7, 20}, function(dtype, src, views, k)
      for _, name in ipairs(layout_names(2)) do
        local where = name .. " " .. k
        assert.same(ref_triangle(src, SHAPE, k, true, zero[dtype]), views[name]:tril(k):totable(), "tril " .. where)
        assert.same(ref_triangle(src, SHAPE, k, false, zero[dtype]), views[name]:triu(k):totable(), "triu " .. where)
      end
    end)
  end)

  it("work on batches and default to the main diagonal", function()
    local shape = {3, 5, 4}
    local src = random_values(shape, "float64")
    for name, t in pairs(layouts(src, shape, "float64")) do
      assert.same(ref_triangle(src, shape, 0, true, 0), t:tril():totable(), name)
      assert.same(ref_triangle(src, shape, 0, false, 0), dle.triu(t):totable(), name)
    end
  end)

  it("tril_ and triu_ work in place, and large batches use the threaded path", function()
    local src = random_values({4, 100, 90}, "float32")
    local t = T(src, "float32")
    assert.equal(t, t:tril_(-3))
    assert.same(ref_triangle(src, {4, 100, 90}, -3, true, 0), t:totable())
    local u = T(src, "float32")
    u:triu_(2)
    assert.same(ref_triangle(src, {4, 100, 90}, 2, false, 0), u:totable())
  end)

  -- found by the API fuzzer: i + k overflowed int64 in the kernel (UBSan) for k = maxinteger
  it("diagonals far outside the matrix keep all or nothing, without overflow", function()
    local t = dle.ones(2, 3)
    local big, small = math.maxinteger, math.mininteger
    assert.same({{1, 1, 1}, {1, 1, 1}}, t:tril(big):totable())
    assert.same({{0, 0, 0}, {0, 0, 0}}, t:triu(big):totable())
    assert.same({{0, 0, 0}, {0, 0, 0}}, t:tril(small):totable())
    assert.same({{1, 1, 1}, {1, 1, 1}}, t:triu(small):totable())
    assert.same({{0, 0, 0}, {0, 0, 0}}, t:clone():triu_(big):totable())
  end)

  it("report inputs with fewer than 2 dims", function()
    assert_error(function() dle.ones(5):tril() end, {"tril", "2 dims", "{5}"})
    assert_error(function() dle.ones(5):triu(1) end, {"triu", "{5}"})
    assert_error(function() dle.ones(2, 2):triu(0.5) end, {"triu", "integer"})
  end)
end)

describe("one_hot", function()
  local function ref_one_hot(classes, shape, n)
    local out_shape = copy_list(shape)
    out_shape[#shape + 1] = n
    return build(out_shape, function(idx)
      return get(classes, idx, #shape) == idx[#shape + 1] and 1 or 0
    end)
  end

  it("encodes 1-based classes of any layout as int64", function()
    local shape = {7, 5}
    local classes = random_index(shape, 6)
    for name, t in pairs(layouts(classes, shape, "int64")) do
      local r = t:one_hot(6)
      assert.equal("int64", r:dtype())
      assert.same({7, 5, 6}, r:shape())
      assert.same(ref_one_hot(classes, shape, 6), r:totable(), name)
    end
  end)

  it("infers the number of classes from the largest class", function()
    local c = dle.tensor({3, 1, 2, 3}, {dtype = "int64"})
    assert.same({{0, 0, 1}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, dle.one_hot(c):totable())
    assert.same({4, 5}, c:one_hot(5):shape())
  end)

  it("reports classes out of range and non-int64 classes", function()
    local c = dle.tensor({1, 4}, {dtype = "int64"})
    assert_error(function() c:one_hot(3) end, {"one_hot", "class 4", "3 classes", "{2}"})
    assert_error(function() dle.tensor({0}, {dtype = "int64"}):one_hot(3) end, {"one_hot", "class 0"})
    assert_error(function() dle.ones(3):one_hot(3) end, {"one_hot", "int64", "float32"})
    assert_error(function() dle.zeros(0, {dtype = "int64"}):one_hot() end, {"one_hot", "empty"})
  end)
end)

describe("other dtypes", function()
  it("float16, bfloat16, int32 and uint8 give the same values as float64", function()
    local shape = {5, 7}
    local vals = build(shape, function() return math.random(0, 40) end)
    local mask = random_values({7}, "bool")
    local index = random_index({4, 7}, 5)
    local rows = random_index({6}, 5)
    local function run_all(dtype)
      local t = T(vals, dtype):t():t()
      return {
        dle.cat({t, t:narrow(1, 2, 2)}, 1):double():totable(),
        t:gather(1, T(index, "int64")):double():totable(),
        t:index_select(1, rows):double():totable(),
        t:index_add(1, {2, 2}, t:narrow(1, 1, 2)):double():totable(),
        t:scatter_add(1, T(index, "int64"):narrow(1, 1, 1), t):double():totable(),
        t:masked_fill(T(mask, "bool"), 3):double():totable(),
        t:tril(1):double():totable(),
        t:triu(-1):double():totable(),
      }
    end
    local expected = run_all("float64")
    for _, dtype in ipairs({"float16", "bfloat16", "int32", "uint8"}) do
      assert.same(expected, run_all(dtype), dtype)
    end
  end)
end)

describe("index_add and scatter_add on integers", function()
  -- found by the API fuzzer: int64 sums in the accumulate kernel were signed overflow (UBSan)
  it("index_add and scatter_add on int64 wrap around like the elementwise add", function()
    local big = math.maxinteger
    local t = dle.tensor({{big, 1}}, {dtype = "int64"})
    local src = dle.tensor({{4, 2}}, {dtype = "int64"})
    local idx = dle.tensor({1}, {dtype = "int64"})
    assert.same({{big + 4, 3}}, t:index_add(1, idx, src):totable())
    assert.same({{big + 4, 3}}, t:scatter_add(2, dle.tensor({{1, 2}}, {dtype = "int64"}), src):totable())
    assert.same((t + src):totable(), t:clone():index_add_(1, idx, src):totable())
  end)
end)
