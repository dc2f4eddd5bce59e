-- sort_spec.lua — the sort family: sort, argsort, msort, topk, kthvalue. Values and 1-based int64
-- indices against a pure-Lua stable sort (NaN largest, -0.0 equal to 0.0, ties in input order) in
-- every dtype, on contiguous, transposed, strided and sliced inputs, along each dim; long lines
-- with many ties (the radix sort, the heap and radix selections of topk and kthvalue); empty and
-- odd-sized inputs; options and their errors; PyTorch in float64 when python3-torch is there.
local dle = require("dle")
local H = require("helpers")

local NAN = 0 / 0
local DTYPES = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"}

-- ---------------------------------------------------------------- reference

-- a before b in the ascending order (NaN largest, NaNs equal; false/true as 0/1)
local function less(a, b)
  if a ~= a then return false end
  if b ~= b then return true end
  return a < b
end

-- The 1-based positions of list in the stable order (descending when desc; ties keep input order).
local function ref_order(list, desc)
  local idx = {}
  for i = 1, #list do idx[i] = i end
  table.sort(idx, function(i, j)
    local a, b = list[i], list[j]
    if desc then a, b = b, a end
    if less(a, b) then return true end
    if less(b, a) then return false end
    return i < j
  end)
  return idx
end

local function num(v)
  if type(v) == "boolean" then return v and 1 or 0 end
  return v
end

-- The elements of tensor t along 1-based dim d at the other coordinates of `at` (a table of the
-- remaining indices in order), as numbers, and the line's lists for every line: {coords, list}.
local function lines(t, d)
  local shape, out = t:shape(), {}
  local vals = t:totable()
  local nd = #shape
  local function walk(prefix, dim)
    if dim > nd then
      local list = {}
      for i = 1, shape[d] do
        local idx = {}
        for k = 1, nd do idx[k] = k == d and i or prefix[k] end
        list[i] = num(H.get(vals, idx))
      end
      out[#out + 1] = {coords = {table.unpack(prefix)}, list = list}
      return
    end
    if dim == d then
      prefix[dim] = 1
      walk(prefix, dim + 1)
      return
    end
    for i = 1, shape[dim] do
      prefix[dim] = i
      walk(prefix, dim + 1)
    end
  end
  walk({}, 1)
  return out
end

-- Element of nested table v at coords with position i along dim d.
local function at(v, coords, d, i)
  local idx = {table.unpack(coords)}
  idx[d] = i
  return num(H.get(v, idx))
end

local function same(a, b) return a == b or (a ~= a and b ~= b) end

-- Checks values/indices of x along d (count elements per line, default all, the dim kept) against
-- the reference stable order from rank `first` (default 1).
local function check_against_ref(x, d, desc, vals, idx, first, count)
  first = first or 1
  local v, ix = vals:totable(), idx:totable()
  for _, line in ipairs(lines(x, d)) do
    local order = ref_order(line.list, desc)
    for r = 1, count or #order do
      local want_i = order[first + r - 1]
      local got_i, got_v = at(ix, line.coords, d, r), at(v, line.coords, d, r)
      assert.are.equal(want_i, got_i)
      assert.is_true(same(line.list[want_i], got_v),
        string.format("value %s at rank %d, expected %s", tostring(got_v), r, tostring(line.list[want_i])))
    end
  end
end

-- On every layout of vals (dtype): op(x) gives values and indices along dim 1 of the given shape,
-- ranks first..first+count-1 of the reference order (descending when desc).
local function check_layouts(vals, dtype, op, desc, first, count, shape)
  H.each_layout(vals, dtype, function(layout, x)
    local v, i = op(x)
    check_against_ref(x, 1, desc, v, i, first, count)
    assert.are.same(shape, v:shape(), layout)
  end)
end

-- ---------------------------------------------------------------- sort, argsort, msort

describe("sort", function()
  it("returns the ascending values and their 1-based int64 positions along the last dim", function()
    local v, i = dle.tensor({3, 1, 2}):sort()
    assert.are.same({1, 2, 3}, v:totable())
    assert.are.same({2, 3, 1}, i:totable())
    assert.are.equal("int64", i:dtype())
    assert.are.equal("float32", v:dtype())
  end)

  it("puts NaN last (first when descending), treats -0.0 as 0.0 and keeps ties in input order", function()
    local x = dle.tensor({3, 1, 2, NAN, -0.0, 0.0, 5, 1, NAN})
    local v, i = x:sort()
    assert.are.same({5, 6, 2, 8, 3, 1, 7, 4, 9}, i:totable())
    local vt = v:totable()
    assert.are.equal(-math.huge, 1 / vt[1]) -- -0.0 comes out as it went in
    assert.is_true(vt[9] ~= vt[9])
    local vd, id = x:sort(1, {descending = true})
    assert.are.same({4, 9, 7, 1, 3, 2, 8, 5, 6}, id:totable())
    assert.is_true(vd:totable()[1] ~= vd:totable()[1])
    assert.are.same({4, 9, 7, 1, 3, 2, 8, 5, 6}, x:argsort(1, {descending = true, stable = true}):totable())
  end)

  it("sorts every dtype as a stable sort would", function()
    local list = {3, -1, 0, 2, -1, 7, 0, 1, 3, 2, 1}
    for _, dt in ipairs(DTYPES) do
      local src = list
      if dt == "uint8" then src = H.map(list, function(a) return a + 1 end) end
      if dt == "bool" then src = H.map(list, function(a) return a > 0 end) end
      local x = dle.tensor(src, {dtype = dt})
      for _, desc in ipairs({false, true}) do
        local v, i = x:sort(1, {descending = desc})
        assert.are.equal(dt, v:dtype())
        check_against_ref(x, 1, desc, v, i)
      end
    end
  end)

  it("sorts float16 and bfloat16 NaN, infinities and signed zeros like float32", function()
    for _, dt in ipairs({"float16", "bfloat16"}) do
      local x = dle.tensor({math.huge, NAN, -0.0, 0.5, -math.huge, 0.0}, {dtype = dt})
      local _, i = x:sort()
      assert.are.same({5, 3, 6, 4, 1, 2}, i:totable())
    end
  end)

  it("sorts along each dim of every layout", function()
    local vals = H.values({5, 7}, {seed = 3, int = true, lo = -3, hi = 3})
    for _, dt in ipairs({"float32", "int64"}) do
      H.each_layout(vals, dt, function(layout, x)
        for _, d in ipairs({1, 2, -1}) do
          local v, i = x:sort(d)
          local dd = d < 0 and d + 3 or d
          assert.are.same({5, 7}, v:shape(), layout)
          check_against_ref(x, dd, false, v, i)
        end
      end)
    end
  end)

  it("sorts a 3-D permuted input along its middle dim", function()
    local x = dle.tensor(H.values({4, 3, 6}, {seed = 5, int = true, lo = 0, hi = 4})):permute({3, 1, 2})
    local v, i = x:sort(2, {descending = true})
    check_against_ref(x, 2, true, v, i)
  end)

  it("sorts long lines with many ties (the radix sort) stably, in both directions", function()
    local list = H.values({3000}, {seed = 9, int = true, lo = -40, hi = 40})
    list[17], list[2000] = NAN, NAN
    for _, dt in ipairs({"float32", "float64", "int32", "int64"}) do
      local src = list
      if dt:match("^int") then src = H.map(list, function(a) return a ~= a and 99 or a end) end
      local x = dle.tensor(src, {dtype = dt})
      for _, desc in ipairs({false, true}) do
        local v, i = x:sort(1, {descending = desc})
        check_against_ref(x, 1, desc, v, i)
      end
    end
  end)

  it("sorts many lines in parallel the same as one at a time", function()
    local x = dle.randint(0, 50, {300, 257}):float()
    local v, i = x:sort(2)
    for _, r in ipairs({1, 150, 300}) do
      local vr, ir = x[r]:sort()
      assert.are.same(vr:totable(), v[r]:totable())
      assert.are.same(ir:totable(), i[r]:totable())
    end
  end)

  it("takes the options table in place of the dim, and argsort gives sort's indices", function()
    local x = dle.tensor({{2, 9, 4}, {7, 1, 1}})
    local v = x:sort{descending = true}
    assert.are.same({{9, 4, 2}, {7, 1, 1}}, v:totable())
    local _, i = dle.sort(x, 1)
    assert.are.same(i:totable(), dle.argsort(x, 1):totable())
    assert.are.same({{2, 1, 1}, {1, 2, 2}}, x:argsort(1, {descending = true}):totable())
  end)

  it("msort sorts along dim 1", function()
    local x = dle.tensor({{2, 9}, {1, 3}, {5, 0}})
    assert.are.same({{1, 0}, {2, 3}, {5, 9}}, x:msort():totable())
    assert.are.same(dle.msort(x):totable(), x:sort(1):totable())
  end)

  it("handles empty dims, a dim of size 1 and other empty dims", function()
    local v, i = dle.zeros(0):sort()
    assert.are.same({0}, v:shape())
    assert.are.same({0}, i:shape())
    v, i = dle.zeros(3, 0):sort(2)
    assert.are.same({3, 0}, v:shape())
    assert.are.same({3, 0}, i:shape())
    v, i = dle.zeros(0, 4):sort(2)
    assert.are.same({0, 4}, v:shape())
    assert.are.same({0, 4}, i:shape())
    v, i = dle.tensor({{5}, {4}}):sort(2)
    assert.are.same({{5}, {4}}, v:totable())
    assert.are.same({{1}, {1}}, i:totable())
  end)

  it("refuses a 0-d tensor, a dim out of range, unknown or mistyped options", function()
    H.assert_error(function() dle.tensor(3):sort() end, "sort:", "0-dim", "shape {}")
    H.assert_error(function() dle.zeros(2, 3):sort(3) end, "sort:", "dim 3 out of range", "{2,3}")
    H.assert_error(function() dle.zeros(2, 3):sort(-3) end, "sort:", "dim -3", "{2,3}")
    H.assert_error(function() dle.zeros(2, 3):sort(1, {decending = true}) end, "sort:", "decending")
    H.assert_error(function() dle.zeros(2, 3):sort(1, {descending = 1}) end, "sort:", "descending", "boolean")
    H.assert_error(function() dle.zeros(2):argsort(1, {largest = true}) end, "argsort:", "largest")
    H.assert_error(function() dle.zeros(2):msort(1) end, "msort:")
    H.assert_error(function() dle.sort(nil) end, "sort:")
  end)
end)

-- ---------------------------------------------------------------- topk

describe("topk", function()
  it("returns the k largest, sorted, with their positions; ties go to the lower index", function()
    local x = dle.tensor({1, 5, 3, 5, NAN, 2, 3})
    local v, i = x:topk(4)
    assert.are.same({5, 2, 4, 3}, i:totable())
    assert.is_true(v:totable()[1] ~= v:totable()[1])
    assert.are.same({5, 5, 3}, v:narrow(1, 2, 3):totable())
    local vs, is = x:topk(3, 1, {largest = false})
    assert.are.same({1, 2, 3}, vs:totable())
    assert.are.same({1, 6, 3}, is:totable())
  end)

  it("equals the first k of a stable sort on long lines with ties (heap and radix selection)", function()
    local x = dle.tensor(H.values({4, 2000}, {seed = 11, int = true, lo = -100, hi = 100}))
    for _, k in ipairs({1, 7, 100, 125, 126, 900, 2000}) do
      for _, largest in ipairs({true, false}) do
        local v, i = x:topk(k, 2, {largest = largest})
        local sv, si = x:sort(2, {descending = largest})
        assert.are.same(si:narrow(2, 1, k):totable(), i:totable(), "k = " .. k)
        assert.are.same(sv:narrow(2, 1, k):totable(), v:totable())
      end
    end
  end)

  it("works along dim 1 of a transposed input and in every dtype", function()
    local vals = H.values({6, 5}, {seed = 2, int = true, lo = 0, hi = 9})
    check_layouts(vals, "float64", function(x) return x:topk(3, 1) end, true, 1, 3, {3, 5})
    for _, dt in ipairs(DTYPES) do
      local x = dle.tensor(dt == "bool" and {true, false, true} or {1, 3, 2}, {dtype = dt})
      local _, i = x:topk(2)
      assert.are.same(dt == "bool" and {1, 3} or {2, 3}, i:totable(), dt)
    end
  end)

  it("gives empty results for k = 0 and refuses k out of range or a 0-d input", function()
    local v, i = dle.zeros(3, 4):topk(0)
    assert.are.same({3, 0}, v:shape())
    assert.are.same({3, 0}, i:shape())
    H.assert_error(function() dle.zeros(3, 4):topk(5) end, "topk:", "k = 5", "size 4", "{3,4}")
    H.assert_error(function() dle.zeros(3, 4):topk(-1) end, "topk:", "k = -1")
    H.assert_error(function() dle.zeros(3, 4):topk(4, 1) end, "topk:", "k = 4", "{3,4}")
    H.assert_error(function() dle.tensor(1):topk(1) end, "topk:", "0-dim")
    H.assert_error(function() dle.zeros(3):topk(1, 1, {biggest = true}) end, "topk:", "biggest")
    H.assert_error(function() dle.zeros(3):topk() end, "topk:")
  end)
end)

-- ---------------------------------------------------------------- kthvalue

describe("kthvalue", function()
  it("returns the k-th smallest and its position, the dim dropped unless keepdim", function()
    local x = dle.tensor({{4, 1, 3, 1}, {2, 2, NAN, 0}})
    local v, i = x:kthvalue(2)
    assert.are.same({1, 2}, v:totable())
    assert.are.same({4, 1}, i:totable())
    v, i = x:kthvalue(3, 2, true)
    assert.are.same({{3}, {2}}, v:totable())
    assert.are.same({{3}, {2}}, i:totable())
    v = x:kthvalue(4, 2, {keepdim = true})
    assert.are.same({2, 1}, v:shape())
    assert.is_true(v:totable()[2][1] ~= v:totable()[2][1])
    v, i = dle.kthvalue(x, 1, 1)
    assert.are.same({2, 1, 3, 0}, v:narrow(1, 1, 4):totable())
    assert.are.same({2, 1, 1, 2}, i:totable())
  end)

  it("is the k-th of a stable sort on long lines with ties, for every k", function()
    local x = dle.tensor(H.values({3, 1500}, {seed = 4, int = true, lo = -30, hi = 30}), {dtype = "int32"})
    local sv, si = x:sort(2)
    for _, k in ipairs({1, 2, 50, 93, 94, 750, 1499, 1500}) do
      local v, i = x:kthvalue(k, 2)
      assert.are.same(si:select(2, k):totable(), i:totable(), "k = " .. k)
      assert.are.same(sv:select(2, k):totable(), v:totable())
    end
  end)

  it("works on every layout and dtype", function()
    local vals = H.values({5, 4}, {seed = 8, int = true, lo = 0, hi = 3})
    check_layouts(vals, "float32", function(x) return x:kthvalue(2, 1, true) end, false, 2, 1, {1, 4})
    for _, dt in ipairs(DTYPES) do
      local x = dle.tensor(dt == "bool" and {true, false, true} or {1, 3, 2}, {dtype = dt})
      local _, i = x:kthvalue(2)
      assert.are.equal(dt == "bool" and 1 or 3, i:item(), dt)
    end
  end)

  it("refuses k out of range, an empty dim and a 0-d input", function()
    H.assert_error(function() dle.zeros(2, 3):kthvalue(4) end, "kthvalue:", "k = 4", "size 3", "{2,3}")
    H.assert_error(function() dle.zeros(2, 3):kthvalue(0) end, "kthvalue:", "k = 0", "valid: 1..3")
    H.assert_error(function() dle.zeros(2, 0):kthvalue(1) end, "kthvalue:", "empty", "{2,0}")
    H.assert_error(function() dle.tensor(2):kthvalue(1) end, "kthvalue:", "0-dim")
    H.assert_error(function() dle.zeros(3):kthvalue(1, 1, {keep = true}) end, "kthvalue:", "keep")
  end)
end)

-- ---------------------------------------------------------------- PyTorch

describe("the sort family against PyTorch", function()
  it("agrees with torch.sort (stable), topk and kthvalue in float64, values and indices", function()
    if H.without_torch(pending) then return end
    -- a tenth of the values repeat, so stable order matters; no ties near the top-k boundary
    local x = dle.tensor(H.values({6, 41}, {seed = 21, int = true, lo = -60, hi = 60}), {dtype = "float64"}) / 7
    local out = H.run_torch({x = x}, {
      "v, i = torch.sort(x, dim=1, stable=True); p(v); p(i + 1)",
      "v, i = torch.sort(x, dim=0, descending=True, stable=True); p(v); p(i + 1)",
      "v, i = torch.topk(x, 5, 1); p(v)",
      "v, i = torch.topk(x, 3, 0, largest=False); p(v)",
      "v, i = torch.kthvalue(x, 20, 1); p(v)",
    })
    local nums = H.torch_line
    local function flat(t) return t:double():reshape(-1):totable() end
    local v, i = x:sort(2)
    assert.are.same(nums(out[1]), flat(v))
    assert.are.same(nums(out[2]), flat(i))
    v, i = x:sort(1, {descending = true})
    assert.are.same(nums(out[3]), flat(v))
    assert.are.same(nums(out[4]), flat(i))
    assert.are.same(nums(out[5]), flat(x:topk(5, 2)))
    assert.are.same(nums(out[6]), flat(x:topk(3, 1, {largest = false})))
    assert.are.same(nums(out[7]), flat(x:kthvalue(20, 2)))
  end)
end)
