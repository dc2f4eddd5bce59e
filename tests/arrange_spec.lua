--- arrange_spec.lua — flip, roll and F.pad (the ops of the arrange family, engine/ops/arrange.c)
-- and fliplr, flipud, repeat, tile, repeat_interleave, meshgrid, diagonal, diag, trace, tensordot,
-- kron, rot90, baddbmm, addbmm, addmv, addr (compositions, lua/dle/arrange.lua): values against
-- PyTorch in float64 (skipped without it) and against hand-worked cases, float64 gradchecks in both
-- modes, the kernel on every dtype, strided, empty, 0-dim and large odd-sized inputs (against an
-- index_select reference), bad arguments.
local dle = require("dle")
local H = require("helpers")
local F = dle.nn.functional

local r = H.randn64()

-- {name, dle function of the inputs, PyTorch expression of a, b, c, inputs}
local x34, x234, v3, v4 = r(3, 4), r(2, 3, 4), r(3), r(4)
local CASES = {
  {"flip two dims", function(a) return a:flip({1, -1}) end, "torch.flip(a, [0, -1])", {x234}},
  {"fliplr", function(a) return dle.fliplr(a) end, "torch.fliplr(a)", {x34}},
  {"flipud of a transposed view", function(a) return dle.flipud(a:t()) end, "torch.flipud(a.t())", {x34}},
  {"roll along dims", function(a) return a:roll({1, -2}, {1, 3}) end, "torch.roll(a, (1, -2), (0, 2))", {x234}},
  {"roll flattened", function(a) return a:roll(5) end, "torch.roll(a, 5)", {x34}},
  {"repeat", function(a) return dle["repeat"](a, 2, 1, 3) end, "a.repeat(2, 1, 3)", {x34}},
  {"tile with fewer dims", function(a) return a:tile(2) end, "torch.tile(a, (2,))", {x234}},
  {"repeat_interleave", function(a) return a:repeat_interleave(2, 2) end, "a.repeat_interleave(2, 1)", {x34}},
  {"repeat_interleave counts",
   function(a) return a:repeat_interleave(dle.tensor({1, 0, 2}, {dtype = "int64"}), 1) end,
   "a.repeat_interleave(torch.tensor([1, 0, 2]), 0)", {x34}},
  {"diagonal offset 1 of dims 3, 2", function(a) return a:diagonal(1, 3, 2) end, "torch.diagonal(a, 1, 2, 1)", {x234}},
  {"diagonal of a transposed view", function(a) return a:t():diagonal(-1) end, "torch.diagonal(a.t(), -1)", {x34}},
  {"diag_embed offset -1", function(a) return dle.diag_embed(a, -1) end, "torch.diag_embed(a, -1)", {x34}},
  {"diag_embed offset 2, dims 1, 3", function(a) return dle.diag_embed(a, 2, 1, 3) end,
   "torch.diag_embed(a, 2, 0, 2)", {x234}},
  {"diag of a matrix, offset -1", function(a) return a:diag(-1) end, "torch.diag(a, -1)", {x34}},
  {"diag of a vector, offset 2", function(a) return dle.diag(a, 2) end, "torch.diag(a, 2)", {v3}},
  {"trace", function(a) return a:trace() end, "torch.trace(a)", {x34}},
  {"tensordot 1", function(a, b) return dle.tensordot(a, b, 1) end, "torch.tensordot(a, b, 1)", {x234, x34:t()}},
  {"tensordot dim lists", function(a, b) return dle.tensordot(a, b, {{2, 3}, {1, 2}}) end,
   "torch.tensordot(a, b, ([1, 2], [0, 1]))", {x234, x34}},
  {"kron", function(a, b) return dle.kron(a, b) end, "torch.kron(a, b)", {x34, r(2, 3)}},
  {"rot90 k=1", function(a) return a:rot90() end, "torch.rot90(a)", {x34}},
  {"rot90 k=3 dims 2, 3", function(a) return a:rot90(3, {2, 3}) end, "torch.rot90(a, 3, (1, 2))", {x234}},
  {"baddbmm", function(a, b, c) return dle.baddbmm(a, b, c, {beta = 0.5, alpha = 2}) end,
   "torch.baddbmm(a, b, c, beta=0.5, alpha=2)", {r(2, 3, 5), r(2, 3, 4), r(2, 4, 5)}},
  {"addbmm", function(a, b, c) return dle.addbmm(a, b, c) end, "torch.addbmm(a, b, c)",
   {r(3, 5), r(2, 3, 4), r(2, 4, 5)}},
  {"addmv", function(a, b, c) return dle.addmv(a, b, c, {alpha = -1}) end, "torch.addmv(a, b, c, alpha=-1)",
   {v3, x34, v4}},
  {"addr", function(a, b, c) return dle.addr(a, b, c, {beta = 2}) end, "torch.addr(a, b, c, beta=2)", {x34, v3, v4}},
  {"pad constant, negative crop", function(a) return F.pad(a, {2, -1, 1, 1}, {value = 3}) end,
   "torch.nn.functional.pad(a, (2, -1, 1, 1), value=3)", {x34}},
  {"pad reflect", function(a) return F.pad(a, {3, 2, 1, 2}, {mode = "reflect"}) end,
   "torch.nn.functional.pad(a, (3, 2, 1, 2), mode='reflect')", {x234}},
  {"pad replicate", function(a) return F.pad(a, {1, 5, 2, 0}, {mode = "replicate"}) end,
   "torch.nn.functional.pad(a, (1, 5, 2, 0), mode='replicate')", {x234}},
  {"pad circular", function(a) return F.pad(a, {4, 3}, {mode = "circular"}) end,
   "torch.nn.functional.pad(a, (4, 3), mode='circular')", {x234}},
  {"pad circular of two dims", function(a) return F.pad(a, {4, 3, 1, 2}, {mode = "circular"}) end,
   "torch.nn.functional.pad(a, (4, 3, 1, 2), mode='circular')", {r(1, 2, 3, 4)}},
}

describe("rearranging and product functions", function()
  H.torch_and_gradcheck(it, pending, CASES, 1e-10)

  it("hand-worked values: flip, roll, meshgrid (ij, xy), repeat_interleave without dim, diag, diagonal writes through",
     function()
    local x = dle.tensor({{1, 2, 3}, {4, 5, 6}})
    assert.are.same({{3, 2, 1}, {6, 5, 4}}, x:flip(2):totable())
    assert.are.same({{3, 1, 2}, {6, 4, 5}}, x:roll(1, 2):totable())
    local gx, gy = dle.meshgrid(dle.tensor({1, 2, 3}), dle.tensor({7, 8}))
    assert.are.same({3, 2}, gx:shape())
    assert.are.same({{7, 8}, {7, 8}, {7, 8}}, gy:totable())
    local hx = dle.meshgrid(dle.tensor({1, 2, 3}), dle.tensor({7, 8}), {indexing = "xy"})
    assert.are.same({{1, 2, 3}, {1, 2, 3}}, hx:totable())
    assert.are.same({1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6}, x:repeat_interleave(2):totable())
    assert.are.same({{0, 1, 0}, {0, 0, 2}, {0, 0, 0}}, dle.diag(dle.tensor({1, 2}), 1):totable())
    assert.are.same(x:totable(), x:flip(2):flip(2):totable())
    local m = dle.zeros(3, 4)
    m:diagonal(1):fill_(5)
    assert.are.same({{0, 5, 0, 0}, {0, 0, 5, 0}, {0, 0, 0, 5}}, m:totable(), "diagonal is a view")
    -- offsets past the matrix, down to the most negative integer, give empty diagonals (as PyTorch)
    for _, off in ipairs({4, 5, math.maxinteger, -3, -4, math.mininteger}) do
      assert.are.same({0}, m:diagonal(off):shape(), "diagonal offset " .. off)
    end
    assert.are.same({1}, m:diagonal(3):shape())
    assert.are.same({1}, m:diagonal(-2):shape())
    x:flip(1):fill_(99)
    x:flip({}):fill_(99)
    assert.are.same({{1, 2, 3}, {4, 5, 6}}, x:totable(), "flip returns a copy")
  end)

  it("bad arguments are errors naming the function and the shapes or dims", function()
    local x = dle.randn(2, 3)
    local function err(f) local ok, msg = pcall(f); assert.is_false(ok); return msg end
    assert.matches("flip: dim 3 out of range for a 2%-dim tensor", err(function() return x:flip(3) end))
    assert.matches("roll: 2 shifts for 1 dims %(one each%)", err(function() return x:roll({1, 2}, 1) end))
    assert.matches("repeat: 1 repeats for a 2%-dim tensor", err(function() return dle["repeat"](x, 2) end))
    assert.matches("trace: input must be 2%-D", err(function() return dle.randn(3):trace() end))
    for _, off in ipairs({math.mininteger, math.maxinteger, 1 << 40}) do
      local msg = err(function() return dle.diag_embed(dle.randn(3), off) end)
      assert.truthy(msg:find("diag_embed: offset " .. off .. " makes 3 + |offset| rows, too many", 1, true), msg)
    end
    assert.matches("tensordot: dim 2 of a %(3%) and dim 1 of b %(2%) differ",
      err(function() return dle.tensordot(x, x, {{2}, {1}}) end))
    assert.matches("pad: reflect pads 3, 0 of dim 2 must be less than its size 3 %(shape {2,3}%)",
      err(function() return F.pad(x, {3, 0}, {mode = "reflect"}) end))
    assert.matches("pad: mode must be", err(function() return F.pad(x, {1, 1}, {mode = "mirror"}) end))
    assert.matches("pad: unknown option", err(function() return F.pad(x, {1, 1}, {bogus = 1}) end))
    assert.matches("meshgrid: input 1 must be a 0%-dim or 1%-D tensor", err(function() return dle.meshgrid(x) end))
    assert.matches("repeat_interleave: 2 repeats for 3 elements",
      err(function() return x:repeat_interleave(dle.tensor({1, 2}, {dtype = "int64"}), 2) end))
  end)
end)

-- The input index (1-based) that output index i (1-based) of a dim of size n reads: nil for fill.
local SRC = {
  flip = function(i, n) return n + 1 - i end,
  roll = function(i, n, s) return (i - 1 - s) % n + 1 end,
  constant = function(i, n, lo) local j = i - lo; return (j >= 1 and j <= n) and j or nil end,
  reflect = function(i, n, lo) local j = i - 1 - lo; return (j < 0 and -j or j >= n and 2 * (n - 1) - j or j) + 1 end,
  replicate = function(i, n, lo) return math.max(1, math.min(n, i - lo)) end,
  circular = function(i, n, lo) return (i - 1 - lo) % n + 1 end,
}
-- x rearranged along dim d to out elements by SRC[how] (an index_select; fill where it gives nil)
local function reference(x, d, how, out, arg, fill)
  local idx, keep = {}, {}
  for i = 1, out do
    local j = SRC[how](i, x:size(d), arg)
    idx[i], keep[i] = j or 1, j and 1 or 0
  end
  local y = x:index_select(d, dle.tensor(idx, {dtype = "int64"}))
  if how ~= "constant" then return y end
  local shape = {}
  for k = 1, x:dim() do shape[k] = k == d and out or 1 end
  local m = dle.tensor(keep, {dtype = "bool"}):reshape(shape):expand(y:shape())
  return dle.where(m, y, dle.full(y:shape(), fill, {dtype = y:dtype()}))
end

describe("arrange kernels (flip, roll, pad)", function()
  local DTYPES = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"}
  local function cases(x)
    return {
      {"flip", x:flip({1, 3})}, {"roll", x:roll({2, -1}, {2, 3})},
      {"pad constant", F.pad(x, {2, -1, 1, 0}, {value = 1})},
      {"pad reflect", F.pad(x, {3, 1, 2, 1}, {mode = "reflect"})},
      {"pad replicate", F.pad(x, {4, 2, 0, 3, 1, 1}, {mode = "replicate"})},
      {"pad circular", F.pad(x, {4, 2, 3, 1}, {mode = "circular"})},
    }
  end

  it("every dtype gives the float64 result's values (small integers, exact in each dtype)", function()
    local base = dle.randint(0, 3, {3, 4, 5}, {dtype = "float64"})
    local want = cases(base)
    for _, dt in ipairs(DTYPES) do
      local got = cases(base:to(dt))
      for k, c in ipairs(got) do
        assert.are.equal(dt, c[2]:dtype(), c[1])
        assert.are.same(want[k][2]:to(dt):totable(), c[2]:totable(), dt .. " " .. c[1])
      end
    end
  end)

  it("transposed, stepped, expanded and sliced inputs give the contiguous input's result", function()
    local t = dle.randn(5, 4, 3):permute({3, 2, 1})                  -- {3, 4, 5}, transposed
    local stepped = dle.randn(3, 8, 10):narrow(2, 2, 4):narrow(3, 2, 5) -- gaps between rows
    local expanded = dle.randn(3, 1, 5):expand({3, 4, 5})
    for _, x in ipairs({t, dle.randn(3, 4, 9):narrow(3, 3, 5), expanded, stepped}) do
      local want = cases(x:contiguous())
      for k, c in ipairs(cases(x)) do
        assert.are.same(want[k][2]:totable(), c[2]:totable(), c[1])
        assert.is_true(c[2]:is_contiguous(), c[1] .. " gives a contiguous tensor")
      end
    end
  end)

  it("large odd-sized inputs (threads, rows cut into pieces) match an index_select reference", function()
    local x = dle.randn(3, 70001)
    assert.are.equal(0, H.max_diff(x:flip(2), reference(x, 2, "flip", 70001)))
    assert.are.equal(0, H.max_diff(x:roll(-12345, 2), reference(x, 2, "roll", 70001, -12345)))
    for _, mode in ipairs({"constant", "reflect", "replicate", "circular"}) do
      local got = F.pad(x, {7, 70000}, {mode = mode, value = mode == "constant" and -2 or nil})
      assert.are.equal(0, H.max_diff(got, reference(x, 2, mode, 140008, 7, -2)), mode)
    end
    local y = dle.randn(2001, 3, 67)
    assert.are.equal(0, H.max_diff(y:flip(1), reference(y, 1, "flip", 2001)))
    local got = F.pad(y, {0, 0, 2, 1}, {mode = "reflect"})
    assert.are.equal(0, H.max_diff(got, reference(y, 2, "reflect", 6, 2)))
  end)

  it("empty and 0-dim inputs: shapes kept or padded, constant pads of an empty dim", function()
    local e = dle.randn(0, 3)
    assert.are.same({0, 3}, e:flip(1):shape())
    assert.are.same({0, 3}, e:roll(2, 1):shape())
    assert.are.same({0, 3}, e:roll(4):shape())
    assert.are.same({0, 6}, F.pad(e, {1, 2}, {mode = "reflect"}):shape())
    assert.are.same({{7, 7}, {7, 7}}, F.pad(dle.randn(0, 2), {0, 0, 1, 1}, {value = 7}):totable())
    local z = dle.tensor(2.5)
    assert.are.equal(2.5, z:flip({}):item())
    assert.are.equal(2.5, z:roll(3):item())
    assert.are.same({}, F.pad(z, {}):shape())
  end)

  it("bad arguments: pads of each mode beyond its limits, 0-dim flip dims, options, types", function()
    local x = dle.randn(2, 3)
    local function err(f) local ok, msg = pcall(f); assert.is_false(ok); return msg end
    assert.matches("pad: circular pads 4, 0 of dim 2 must be at most its size 3 %(shape {2,3}%)",
      err(function() return F.pad(x, {4, 0}, {mode = "circular"}) end))
    assert.matches("pad: negative pads %(%-1, 0 of dim 2, shape {2,3}%) are for mode \"constant\" only",
      err(function() return F.pad(x, {-1, 0}, {mode = "replicate"}) end))
    assert.matches("pad: mode \"replicate\" cannot pad dim 2 of size 0 %(shape {2,0}%)",
      err(function() return F.pad(dle.randn(2, 0), {1, 0}, {mode = "replicate"}) end))
    assert.matches("pad: pads %-2, %-2 of dim 2 %(size 3%) of shape {2,3} leave a negative size",
      err(function() return F.pad(x, {-2, -2}) end))
    assert.matches("pad: 6 pads for a 2%-dim tensor %(shape {2,3}%)",
      err(function() return F.pad(x, {1, 1, 1, 1, 1, 1}) end))
    assert.matches("pad: value is for mode \"constant\" only",
      err(function() return F.pad(x, {1, 1}, {mode = "reflect", value = 1}) end))
    assert.matches("pad: pads must be an integer, got 1.5", err(function() return F.pad(x, {1.5, 1}) end))
    assert.matches("flip: dim 1 out of range for a 0%-dim tensor", err(function() return dle.tensor(1):flip(1) end))
    assert.matches("flip: dim 2 appears twice", err(function() return x:flip({2, -1}) end))
    assert.matches("flip: dim 0 is invalid", err(function() return x:flip(0) end))
    assert.matches("roll: without dims, shifts must be one integer", err(function() return x:roll({1, 2}) end))
    assert.matches("roll: shifts must be an integer or a list", err(function() return x:roll("a", 1) end))
  end)
end)
