-- covers: flip roll pad diagonal
-- grad_arrange_spec.lua — gradient rules of the arrange ops (flip, roll, pad): reverse and forward
-- mode against central finite differences in float64 (dle.gradcheck with forward = true) on
-- contiguous, transposed and stepped inputs, every pad mode over one, two and three dims with
-- borders as wide as each mode allows (reflect n - 1, circular n), constant crops, and double
-- backward; the diagonal view (engine/ops/view.c) at every offset. PyTorch's values and
-- gradients: tests/arrange_spec.lua.
local dle = require("dle")
local H = require("helpers")
local F = dle.nn.functional

local randn, check, gradients_of = H.seeded, H.gradcheck, H.gradients_of

describe("arrange gradients", function()
  it("flip: gradcheck over one, two and no dims, of a transposed input and a 0-dim one", function()
    local x = randn({3, 4, 5}, 1)
    for _, dims in ipairs({{1}, {-1}, {1, 3}, {}}) do check(function(t) return t:flip(dims) end, {x}) end
    check(function(t) return t:flip({1, 2}) end, {randn({5, 3}, 2):t()})
    check(function(t) return t:flip({}) end, {dle.tensor(0.5, {dtype = "float64"})})
  end)

  it("roll: gradcheck along dims (negative and wrapping shifts), flattened, on a stepped input", function()
    local x = randn({3, 4, 5}, 3)
    check(function(t) return t:roll({1, -7}, {1, 3}) end, {x})
    check(function(t) return t:roll(13) end, {x})
    check(function(t) return t:roll({2, 2}, {2, 2}) end, {x})
    check(function(t) return t:roll(1, 1) end, {randn({8, 3}, 4):narrow(1, 2, 5)})
  end)

  for _, mode in ipairs({"reflect", "replicate", "circular"}) do
    it("pad " .. mode .. ": gradcheck over one, two and three dims, widest borders, transposed input", function()
      local x = randn({2, 3, 4, 5}, 5)
      local wide = mode == "reflect" and {4, 3, 2, 1, 1, 0} or mode == "circular" and {5, 4, 3, 1, 2, 3}
                   or {6, 1, 0, 4, 2, 2}
      for _, pads in ipairs({{1, 2}, {0, 2, 2, 0}, wide}) do
        check(function(t) return F.pad(t, pads, {mode = mode}) end, {x})
      end
      check(function(t) return F.pad(t, {1, 2, 2, 1}, {mode = mode}) end, {randn({5, 4}, 6):t()})
    end)
  end

  it("pad constant: gradcheck with a value, with negative pads (crops) and an all-crop dim", function()
    local x = randn({3, 4, 5}, 7)
    check(function(t) return F.pad(t, {2, 1, 0, 3}, {value = 2.5}) end, {x})
    check(function(t) return F.pad(t, {-2, 1, 1, -3}) end, {x})
    check(function(t) return F.pad(t, {-2, -3}) end, {x})
  end)

  it("diagonal: gradcheck at offsets inside and past the matrix, dims in either order, transposed", function()
    local x = randn({3, 4, 5}, 10)
    for _, c in ipairs({{0, 1, 2}, {2, 2, 3}, {-1, 3, 1}, {-3, 1, 3}, {7, 1, 2}}) do
      check(function(t) return t:diagonal(c[1], c[2], c[3]) end, {x})
    end
    check(function(t) return t:diagonal(1) end, {randn({5, 4}, 11):t()})
  end)

  it("double backward: gradcheck of the gradients (create_graph) of each op", function()
    local mix = randn({4, 7}, 8)
    local ops = {
      function(t) return t:flip(2) end, function(t) return t:roll(3, 2) end,
      function(t) return F.pad(t, {2, 1}, {mode = "reflect"}) end,
      function(t) return F.pad(t, {2, 1}, {mode = "replicate"}) end,
      function(t) return F.pad(t, {2, 1}, {mode = "circular"}) end,
      function(t) return F.pad(t, {2, 1}, {value = 1}) end,
      function(t) return dle.diag_embed(t:diagonal(-1), 1) end,
    }
    for _, op in ipairs(ops) do
      local f = function(t)
        local y = op(t)
        return (y * y * mix:narrow(2, 1, y:size(2))):sum()
      end
      check(gradients_of(f), {randn({4, 4}, 9)}, {forward = false})
    end
  end)
end)
