-- covers: group_norm group_norm_grad_input group_norm_grad_affine
-- grad_group_norm_spec.lua — gradient rules of group_norm: float64 gradchecks in reverse and forward
-- mode of x, weight and bias (odd sizes, 1 to 3 spatial dims, groups of one and of all channels,
-- a non-contiguous input, the stats output too), of the two backward ops on their own (stats an
-- independent input), and second derivatives (create_graph) against finite differences.
local dle = require("dle")
local H = require("helpers")

local F64 = {dtype = "float64"}
local function r(shape, seed) return dle.tensor(H.values(shape, {seed = seed, lo = -1, hi = 1}), F64) end

describe("group_norm gradients", function()
  it("gradcheck of x, weight and bias, 2 groups of 3 channels, odd spatial size", function()
    H.gradcheck(function(x, w, b) return (dle.group_norm(x, 2, w, b)) end, {r({2, 6, 5}, 1), r({6}, 2), r({6}, 3)})
  end)

  it("gradcheck with one channel per group (instance norm) and with one group, no affine", function()
    H.gradcheck(function(x) return (dle.group_norm(x, 3)) end, {r({2, 3, 2, 3}, 4)})
    H.gradcheck(function(x, w) return (dle.group_norm(x, 1, w)) end, {r({3, 4, 3}, 5), r({4}, 6)})
  end)

  it("gradcheck of a 3-D spatial input and of a transposed input", function()
    H.gradcheck(function(x, b) return (dle.group_norm(x, 2, nil, b)) end, {r({1, 4, 2, 2, 3}, 7), r({4}, 8)})
    H.gradcheck(function(x, w) return (dle.group_norm(x:transpose(2, 3), 2, w)) end, {r({2, 5, 4}, 9), r({4}, 10)})
  end)

  it("gradcheck of the stats output (mean and variance per sample and group)", function()
    H.gradcheck(function(x, w) return dle.group_norm(x, 2, w) end, {r({2, 4, 3}, 11), r({4}, 12)})
  end)

  it("gradcheck of group_norm_grad_input and group_norm_grad_affine with stats as an independent input", function()
    local x, w, gy = r({2, 6, 3}, 13), r({6}, 14), r({2, 6, 3}, 15)
    local _, stats = dle.group_norm(x, 3)
    stats = stats:detach()
    H.gradcheck(function(g, x_, s, w_) return g:group_norm_grad_input(x_, s, w_, 3) end, {gy, x, stats, w})
    H.gradcheck(function(g, x_, s) return g:group_norm_grad_affine(x_, s, 3) end, {gy, x, stats})
  end)

  it("double backward: gradcheck of the gradients (create_graph) of x, weight and bias", function()
    local u = r({2, 4, 3}, 16)
    H.gradcheck(H.gradients_of(function(x, w, b) return ((dle.group_norm(x, 2, w, b)) * u):sum() end),
      {r({2, 4, 3}, 17), r({4}, 18), r({4}, 19)}, {forward = false})
  end)
end)
