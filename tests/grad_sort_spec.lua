-- covers: sort topk kthvalue
-- grad_sort_spec.lua — gradient rules (reverse and forward mode) of the sort family: float64
-- dle.gradcheck of the values of sort, topk and kthvalue along each dim, on transposed and
-- narrowed inputs and odd sizes; the gradient lands on the picked positions (closed form); the
-- indices carry no gradient; second derivatives; PyTorch's gradient when python3-torch is there.
local dle = require("dle")
local H = require("helpers")

local F64 = {dtype = "float64"}

-- Distinct float64 values (no ties, so finite differences do not reorder them).
local function vals(shape, seed)
  return dle.tensor(H.values(shape, {seed = seed, lo = -2, hi = 2}), F64)
end

local check = H.gradcheck

describe("gradients of the sort family", function()
  local cases = {
    {"sort along the last dim", function(x) return (x:sort()) end},
    {"sort along dim 1, descending", function(x) return (x:sort(1, {descending = true})) end},
    {"sort of a transposed input", function(x) return (x:t():sort(2)) end},
    {"sort of a narrowed input", function(x) return (x:narrow(2, 2, 3):sort(2)) end},
    {"topk along the last dim", function(x) return (x:topk(2)) end},
    {"topk of the smallest along dim 1", function(x) return (x:topk(2, 1, {largest = false})) end},
    {"kthvalue", function(x) return (x:kthvalue(3)) end},
    {"kthvalue with keepdim along dim 1", function(x) return (x:kthvalue(2, 1, true)) end},
  }
  for _, c in ipairs(cases) do
    it(c[1] .. ": reverse and forward mode match finite differences", function()
      check(c[2], {vals({3, 5}, 7)})
    end)
  end

  it("sends each value's gradient to the position it came from", function()
    local x = dle.tensor({{3, 1, 2}, {0, 5, 4}}, F64):requires_grad_()
    local w = dle.tensor({{10, 20}, {30, 40}}, F64)
    local v = x:topk(2)
    local g = dle.grad((v * w):sum(), {x})[1]
    assert.are.same({{10, 0, 20}, {0, 30, 40}}, g:totable())
    local k = x:kthvalue(1, 2)
    g = dle.grad((k * dle.tensor({7, 9}, F64)):sum(), {x})[1]
    assert.are.same({{0, 7, 0}, {9, 0, 0}}, g:totable())
  end)

  it("gives no gradient to the indices", function()
    local x = vals({4}, 3):requires_grad_()
    local v, i = x:sort()
    assert.is_true(v.requires_grad)
    assert.is_false(i.requires_grad)
  end)

  it("has second derivatives (the gradient of a gradient) matching finite differences", function()
    check(H.gradients_of(function(x) return (x:sort(2) ^ 3):sum() end), {vals({2, 4}, 5)},
      {forward = false})
  end)

  it("matches PyTorch's gradient of sort, topk and kthvalue in float64", function()
    if H.without_torch(pending) then return end
    local x, w = vals({4, 6}, 13), vals({4, 6}, 14)
    local out = H.run_torch({x = x, w = w}, {
      "x.requires_grad_()",
      "y = (x.sort(1)[0] * w).sum() + (x.topk(2, 0)[0] * w[:2]).sum() + (x.kthvalue(3, 1)[0] * w[:, 0]).sum()",
      "y.backward(); p(x.grad)",
    })
    local xg = x:clone():requires_grad_()
    local y = (xg:sort(2) * w):sum() + (xg:topk(2, 1) * w:narrow(1, 1, 2)):sum() +
      (xg:kthvalue(3, 2) * w:select(2, 1)):sum()
    local g = dle.grad(y, {xg})[1]:reshape(-1):totable()
    assert.are.equal(24, #g)
    H.assert_torch_numbers(g, out[1], 1e-12, "element")
  end)
end)
