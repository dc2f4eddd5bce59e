--- resample_spec.lua — F.interpolate (the upsample op) and nn.Upsample, UpsamplingNearest2d,
-- UpsamplingBilinear2d: values and gradients against PyTorch in float64 for every mode on odd sizes,
-- up and down, with align_corners, scale_factor with and without recompute_scale_factor, and
-- non-contiguous inputs (skipped without torch); hand-worked values; float32, float16 and
-- bfloat16 against float64; integer nearest; bad arguments.
local dle = require("dle")
local H = require("helpers")
local F = dle.nn.functional
local nn = dle.nn
local F64 = {dtype = "float64"}

local r = H.randn64()
local x3, x4, x5 = r(2, 3, 7), r(2, 3, 5, 7), r(1, 2, 3, 4, 5)
local x4t = r(2, 7, 5, 3):permute({1, 4, 3, 2}) -- {2, 3, 5, 7}, not contiguous

local I = function(o) return function(a) return F.interpolate(a, o) end end
local TF = "torch.nn.functional.interpolate"
local CASES = {
  {"nearest 1-D up", I({size = 11}), TF .. "(a, size=11)", {x3}},
  {"nearest 1-D down", I({size = 4}), TF .. "(a, size=4)", {x3}},
  {"nearest 2-D scale_factor 1.7", I({scale_factor = 1.7}), TF .. "(a, scale_factor=1.7)", {x4}},
  {"nearest 2-D double", I({scale_factor = 2}), TF .. "(a, scale_factor=2)", {x4}},
  {"nearest 3-D mixed", I({size = {5, 3, 8}}), TF .. "(a, size=(5, 3, 8))", {x5}},
  {"nearest-exact 2-D", I({size = {9, 4}, mode = "nearest-exact"}),
   TF .. "(a, size=(9, 4), mode='nearest-exact')", {x4}},
  {"nearest-exact 1-D scale 0.6", I({scale_factor = 0.6, mode = "nearest-exact"}),
   TF .. "(a, scale_factor=0.6, mode='nearest-exact')", {x3}},
  {"linear 1-D", I({size = 12, mode = "linear"}), TF .. "(a, size=12, mode='linear')", {x3}},
  {"linear 1-D align_corners down", I({size = 4, mode = "linear", align_corners = true}),
   TF .. "(a, size=4, mode='linear', align_corners=True)", {x3}},
  {"bilinear up", I({size = {9, 11}, mode = "bilinear"}), TF .. "(a, size=(9, 11), mode='bilinear')", {x4}},
  {"bilinear down", I({size = {3, 4}, mode = "bilinear"}), TF .. "(a, size=(3, 4), mode='bilinear')", {x4}},
  {"bilinear align_corners", I({size = {8, 10}, mode = "bilinear", align_corners = true}),
   TF .. "(a, size=(8, 10), mode='bilinear', align_corners=True)", {x4}},
  {"bilinear scale_factor 1.5 (given scale)", I({scale_factor = {1.5, 1.3}, mode = "bilinear"}),
   TF .. "(a, scale_factor=(1.5, 1.3), mode='bilinear')", {x4}},
  {"bilinear recompute_scale_factor", I({scale_factor = 1.5, mode = "bilinear", recompute_scale_factor = true}),
   TF .. "(a, scale_factor=1.5, mode='bilinear', recompute_scale_factor=True)", {x4}},
  {"bilinear of a permuted input", I({size = {6, 9}, mode = "bilinear"}),
   TF .. "(a, size=(6, 9), mode='bilinear')", {x4t}},
  {"bicubic up", I({size = {9, 11}, mode = "bicubic"}), TF .. "(a, size=(9, 11), mode='bicubic')", {x4}},
  {"bicubic down align_corners", I({size = {3, 5}, mode = "bicubic", align_corners = true}),
   TF .. "(a, size=(3, 5), mode='bicubic', align_corners=True)", {x4}},
  {"bicubic scale_factor 2.5", I({scale_factor = 2.5, mode = "bicubic"}),
   TF .. "(a, scale_factor=2.5, mode='bicubic')", {x4}},
  {"trilinear", I({size = {4, 7, 6}, mode = "trilinear"}), TF .. "(a, size=(4, 7, 6), mode='trilinear')", {x5}},
  {"trilinear align_corners down", I({size = {2, 3, 3}, mode = "trilinear", align_corners = true}),
   TF .. "(a, size=(2, 3, 3), mode='trilinear', align_corners=True)", {x5}},
  {"Upsample module, bilinear x2", function(a) return nn.Upsample({scale_factor = 2, mode = "bilinear"})(a) end,
   "torch.nn.Upsample(scale_factor=2, mode='bilinear')(a)", {x4}},
  {"UpsamplingBilinear2d", function(a) return nn.UpsamplingBilinear2d({size = {7, 8}})(a) end,
   "torch.nn.UpsamplingBilinear2d(size=(7, 8))(a)", {x4}},
  {"UpsamplingNearest2d", function(a) return nn.UpsamplingNearest2d({scale_factor = 3})(a) end,
   "torch.nn.UpsamplingNearest2d(scale_factor=3)(a)", {x4}},
}

describe("F.interpolate", function()
  it("matches PyTorch in float64 for every mode, values and gradients", function()
    H.compare_with_torch(CASES, 1e-10, pending)
  end)

  it("hand-worked: bilinear 1x1x2x2 -> 3x3 with align_corners averages the corners", function()
    local x = dle.tensor({{{{0, 2}, {4, 6}}}}, F64)
    local y = F.interpolate(x, {size = 3, mode = "bilinear", align_corners = true})
    assert.are.same({{{{0, 1, 2}, {2, 3, 4}, {4, 5, 6}}}}, y:totable())
  end)

  it("hand-worked: nearest doubles each element, nearest-exact rounds to the nearest centre", function()
    local x = dle.tensor({{{1, 2, 3}}}, F64)
    assert.are.same({{{1, 1, 2, 2, 3, 3}}}, F.interpolate(x, {scale_factor = 2}):totable())
    assert.are.same({{{1, 2, 2, 3}}}, F.interpolate(x, {size = 4, mode = "nearest-exact"}):totable())
    assert.are.same({{{1, 1, 2, 3}}}, F.interpolate(x, {size = 4}):totable())
  end)

  it("an output the size of the input is the input itself (linear and cubic)", function()
    local x = r(1, 2, 4, 5)
    for _, m in ipairs({"bilinear", "bicubic"}) do
      H.assert_close(F.interpolate(x, {size = {4, 5}, mode = m}), x:totable(), {atol = 1e-12})
    end
  end)

  it("float32, float16 and bfloat16 follow float64 (bilinear and bicubic)", function()
    for _, m in ipairs({"bilinear", "bicubic"}) do
      local ref = F.interpolate(x4, {size = {9, 6}, mode = m})
      for dt, tol in pairs({float32 = 1e-5, float16 = 2e-2, bfloat16 = 1e-1}) do
        local y = F.interpolate(x4:to(dt), {size = {9, 6}, mode = m})
        assert.are.equal(dt, y:dtype())
        H.assert_close(y:to("float64"), ref:totable(), {atol = tol, rtol = tol})
      end
    end
  end)

  it("copies integer and bool tensors with the nearest modes and refuses them for the interpolating ones", function()
    local x = dle.arange(0, 6, {dtype = "int64"}):reshape(1, 1, 2, 3)
    local y = F.interpolate(x, {size = {4, 6}})
    assert.are.equal("int64", y:dtype())
    assert.are.same({0, 0, 1, 1, 2, 2}, y[1][1][1]:totable())
    assert.are.same({3, 3, 4, 4, 5, 5}, y[1][1][4]:totable())
    local ok, err = pcall(F.interpolate, x, {size = {4, 6}, mode = "bilinear"})
    assert.is_false(ok)
    assert.matches("upsample: mode linear needs a float tensor, got int64", err, 1, true)
  end)

  it("the gradient of a half-pixel bilinear x2 gives each input a total weight of 4", function()
    local x = dle.zeros(1, 1, 3, 3, F64):requires_grad_()
    local y = F.interpolate(x, {scale_factor = 2, mode = "bilinear"})
    local g = dle.grad(y:sum(), {x})[1]
    assert.are.equal(36, g:sum():item())
    H.assert_close(g, {{{{4, 4, 4}, {4, 4, 4}, {4, 4, 4}}}})
  end)

  it("rejects bad arguments with errors naming interpolate and the shapes", function()
    local cases = {
      {{size = 3, mode = "bilinear"}, x3, "interpolate: mode bilinear expects a 4-D input, got {2,3,7}"},
      {{size = 3, mode = "linear"}, x4, "interpolate: mode linear expects a 3-D input, got {2,3,5,7}"},
      {{size = 3, scale_factor = 2}, x4, "exactly one of size or scale_factor"},
      {{}, x4, "exactly one of size or scale_factor"},
      {{size = {3, 4, 5}}, x4, "size has 3 values, expected 2"},
      {{size = 0}, x4, "size must hold positive integers"},
      {{size = 3, align_corners = true}, x4, "align_corners can only be set with the interpolating modes"},
      {{size = 3, mode = "area"}, x4, "mode 'area' is not supported"},
      {{scale_factor = 0.1}, x4, "gives an empty output for size 5 of input {2,3,5,7}"},
      {{size = 3, recompute_scale_factor = true}, x4, "recompute_scale_factor is not meaningful"},
      {{size = 3, bogus = 1}, x4, "interpolate: unknown option 'bogus'"},
      {{size = 3}, r(2, 3), "interpolate: mode nearest expects a 3-D to 5-D input, got {2,3}"},
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(F.interpolate, c[2], c[1])
      assert.is_false(ok)
      assert.matches(c[3], err, 1, true)
    end
    local ok, err = pcall(dle.upsample, x4, {3, 0}, {mode = "linear"})
    assert.is_false(ok)
    assert.matches("upsample: input and output sizes must be greater than 0", err, 1, true)
    ok, err = pcall(dle.upsample, x4, {3, 4}, {mode = "bogus"})
    assert.is_false(ok)
    assert.matches("upsample", err, 1, true)
  end)

  it("modules: extra options are errors; UpsamplingBilinear2d fixes align_corners = true", function()
    local ok, err = pcall(nn.Upsample, {size = 2, bogus = true})
    assert.is_false(ok)
    assert.matches("Upsample: unknown option 'bogus'", err, 1, true)
    ok, err = pcall(nn.UpsamplingBilinear2d, {size = 2, mode = "nearest"})
    assert.is_false(ok)
    assert.matches("unknown option 'mode'", err, 1, true)
    local m = nn.UpsamplingBilinear2d({size = 3})
    local x = dle.tensor({{{{0, 2}, {4, 6}}}}, F64)
    assert.are.same({{{{0, 1, 2}, {2, 3, 4}, {4, 5, 6}}}}, m(x):totable())
  end)
end)
