-- covers: upsample upsample_backward
-- grad_resample_spec.lua — gradient rules of the resample family: float64 gradchecks in reverse and
-- forward mode of upsample for every mode and 1 to 3 spatial dims (odd sizes, up and down,
-- align_corners, non-contiguous input), of upsample_backward on its own, and second derivatives.
local dle = require("dle")
local H = require("helpers")
local F = dle.nn.functional

local F64 = {dtype = "float64"}
local function r(shape, seed) return dle.tensor(H.values(shape, {seed = seed, lo = -1, hi = 1}), F64) end

describe("gradients of upsample", function()
  local cases = {
    {"nearest 1-D", {2, 2, 5}, {size = 7}},
    {"nearest-exact 2-D down", {1, 2, 5, 4}, {size = {3, 3}, mode = "nearest-exact"}},
    {"linear 1-D", {1, 2, 5}, {size = 8, mode = "linear"}},
    {"bilinear up, scale_factor", {1, 2, 3, 4}, {scale_factor = 1.6, mode = "bilinear"}},
    {"bilinear down, align_corners", {1, 1, 5, 6}, {size = {3, 4}, mode = "bilinear", align_corners = true}},
    {"bicubic", {1, 1, 4, 3}, {size = {6, 5}, mode = "bicubic"}},
    {"trilinear", {1, 1, 3, 2, 3}, {size = {4, 3, 5}, mode = "trilinear"}},
  }
  for i, c in ipairs(cases) do
    it(c[1] .. ": reverse and forward mode match finite differences", function()
      H.gradcheck(function(x) return F.interpolate(x, c[3]) end, {r(c[2], i)})
    end)
  end

  it("bilinear of a transposed input: gradcheck", function()
    H.gradcheck(function(x) return F.interpolate(x:transpose(3, 4), {size = {5, 4}, mode = "bilinear"}) end,
      {r({1, 2, 3, 4}, 11)})
  end)

  it("upsample_backward on its own (the adjoint): gradcheck in both modes", function()
    H.gradcheck(function(g) return g:upsample_backward({3, 4}, {mode = "cubic"}) end, {r({1, 2, 5, 7}, 12)})
    H.gradcheck(function(g) return g:upsample_backward({4}, {mode = "nearest"}) end, {r({2, 1, 9}, 13)})
  end)

  it("is the adjoint of upsample: <A x, g> = <x, A^T g>", function()
    local x, g = r({1, 2, 4, 5}, 14), r({1, 2, 7, 3}, 15)
    local o = {mode = "cubic", align_corners = true}
    local lhs = (dle.upsample(x, {7, 3}, o) * g):sum():item()
    local rhs = (x * g:upsample_backward({4, 5}, o)):sum():item()
    assert.is_true(math.abs(lhs - rhs) < 1e-12, lhs .. " vs " .. rhs)
  end)

  it("second derivatives through the gradient (create_graph): gradcheck", function()
    local w = r({1, 1, 5, 6}, 16)
    H.gradcheck(H.gradients_of(function(x)
      local y = F.interpolate(x, {size = {5, 6}, mode = "bilinear"})
      return (y * y * w):sum()
    end), {r({1, 1, 3, 4}, 17)}, {forward = false})
  end)
end)
