--- arrange_spec.lua — flip, fliplr, flipud, roll, repeat, tile, repeat_interleave, meshgrid,
-- diagonal, diag, trace, tensordot, kron, rot90, baddbmm, addbmm, addmv, addr and F.pad (compositions
-- of dle ops, lua/dle/arrange.lua): values against PyTorch in float64 (skipped without it) and
-- against hand-worked cases, float64 gradchecks in both modes, non-contiguous inputs, bad arguments.
local dle = require "dle"
local H = require "helpers"
local F = dle.nn.functional
local F64 = {dtype = "float64"}

local function r(...) return dle.randn({...}, F64) end

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
  it("match PyTorch in float64, values and gradients", function()
    H.compare_with_torch(CASES, 1e-10, pending)
  end)

  for _, c in ipairs(CASES) do
    it(c[1] .. ": gradcheck in reverse and forward mode", function()
      H.gradcheck(c[2], c[4])
    end)
  end

  it("hand-worked values: flip, roll, meshgrid (ij and xy), repeat_interleave without dim, diag of a vector", function()
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
    x:flip(1):fill_(99)
    x:flip({}):fill_(99)
    assert.are.same({{1, 2, 3}, {4, 5, 6}}, x:totable(), "flip returns a copy")
  end)

  it("bad arguments are errors naming the function and the shapes or dims", function()
    local x = dle.randn(2, 3)
    local function err(f) local ok, msg = pcall(f); assert.is_false(ok); return msg end
    assert.matches("flip: dim 3 is out of range for a 2%-dim tensor", err(function() return x:flip(3) end))
    assert.matches("roll: 2 shifts for 1 dims", err(function() return x:roll({1, 2}, 1) end))
    assert.matches("repeat: 1 repeats for a 2%-dim tensor", err(function() return dle["repeat"](x, 2) end))
    assert.matches("trace: input must be 2%-D", err(function() return dle.randn(3):trace() end))
    assert.matches("tensordot: dim 2 of a %(3%) and dim 1 of b %(2%) differ",
      err(function() return dle.tensordot(x, x, {{2}, {1}}) end))
    assert.matches("pad: reflect padding 3, 0 must be less than the dim's size 3",
      err(function() return F.pad(x, {3, 0}, {mode = "reflect"}) end))
    assert.matches("pad: mode must be", err(function() return F.pad(x, {1, 1}, {mode = "mirror"}) end))
    assert.matches("pad: unknown option", err(function() return F.pad(x, {1, 1}, {bogus = 1}) end))
    assert.matches("meshgrid: input 1 must be a 0%-dim or 1%-D tensor", err(function() return dle.meshgrid(x) end))
    assert.matches("repeat_interleave: 2 repeats for 3 elements",
      err(function() return x:repeat_interleave(dle.tensor({1, 2}, {dtype = "int64"}), 2) end))
  end)
end)
