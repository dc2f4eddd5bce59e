-- covers: cumsum cumprod logcumsumexp cummax cummin
-- grad_scan_spec.lua — gradient rules of the scan ops: reverse and forward mode against central
-- finite differences in float64 (dle.gradcheck with forward = true) along every dim, on transposed
-- inputs, cumprod with zeros (one and several per line, the forward rule too), logcumsumexp with
-- large values (the stable form), cummax/cummin (the gradient goes to the selected elements),
-- double backward, and the gradients of PyTorch in float64 when it is installed.
local dle = require("dle")
local H = require("helpers")

local F64 = {dtype = "float64"}

local randn, check, gradients_of = H.seeded, H.gradcheck, H.gradients_of

local function along(name, d) return function(x) return (x[name](x, d)) end end

describe("scan gradients", function()
  for _, name in ipairs({"cumsum", "cumprod", "logcumsumexp"}) do
    it(name .. ": gradcheck (reverse and forward) along each dim of a {3, 4, 5} input and a transposed one", function()
      local x = randn({3, 4, 5}, 1, 0.5, 1.5)
      for _, d in ipairs({1, 2, 3, -1}) do check(along(name, d), {x}) end
      local xt = randn({5, 3}, 2, -1.5, 1.5):t()
      check(along(name, 1), {xt})
      check(along(name, 2), {xt})
    end)
  end

  it("cumsum and logcumsumexp of a 0-dim tensor and of a single element have gradient 1", function()
    for _, name in ipairs({"cumsum", "cumprod", "logcumsumexp", "cummax"}) do
      check(along(name, 1), {dle.tensor(0.7, F64)})
      check(along(name, 1), {randn({1}, 3)})
    end
  end)

  it("cumprod with zeros: one zero, two zeros, a leading and a trailing zero per line", function()
    local x = dle.tensor({
      {0.5, 0, 1.5, -2, 0.75},
      {1.25, -0.5, 0, 0, 2},
      {0, 1.5, 2, -1, 0.5},
      {1.5, 2, -0.5, 0.75, 0},
    }, F64)
    check(along("cumprod", 2), {x})
    check(along("cumprod", 1), {x})
  end)

  it("cumprod with zeros: the gradient is PyTorch's (only the first zero of a line gets one past it)", function()
    local x = dle.tensor({2, 0, 3, 0, 5}, F64):requires_grad_()
    x:cumprod(1):sum():backward()
    -- y = {2, 0, 0, 0, 0}: dy/dx1 = 1 (only y1 moves), dy/dx2 = 2 + 2*3 (y2, y3; y4, y5 hold x4 = 0)
    assert.are.same({1, 8, 0, 0, 0}, x.grad:totable())
  end)

  it("logcumsumexp of large values (exp overflows float64) has finite, correct gradients", function()
    local x = dle.tensor({800, 801, 799, 802}, F64)
    check(along("logcumsumexp", 1), {x})
    local g = dle.tensor({1, -2, 0.5, 0}, F64)
    local xr = x:clone():requires_grad_()
    xr:logcumsumexp(1):backward(g)
    for _, v in ipairs(xr.grad:totable()) do assert.is_true(v == v and math.abs(v) < 10) end
  end)

  for _, name in ipairs({"cummax", "cummin"}) do
    it(name .. ": gradcheck of the values along each dim; each gradient lands on its index", function()
      local x = randn({4, 5}, 4, -3, 3)
      check(along(name, 1), {x})
      check(along(name, 2), {x})
      check(along(name, 1), {randn({5, 4}, 5):t()})
      local xr = dle.tensor({1, 3, 2, 5, 4}, F64):requires_grad_()
      local g = dle.tensor({1, 2, 3, 4, 5}, F64)
      xr[name](xr, 1):backward(g)
      local want = name == "cummax" and {1, 5, 0, 9, 0} or {15, 0, 0, 0, 0}
      assert.are.same(want, xr.grad:totable())
    end)
  end

  it("double backward: gradcheck of the gradients (create_graph) of each op", function()
    local mix = randn({3, 4}, 6)
    for _, name in ipairs({"cumsum", "cumprod", "logcumsumexp", "cummax", "cummin"}) do
      local x = randn({3, 4}, 7, 0.5, 1.5)
      local f = function(x_) return ((x_[name](x_, 2)) * mix * x_):sum() end
      check(gradients_of(f), {x}, {forward = false})
    end
  end)
end)

describe("scan gradients: PyTorch agreement (optional)", function()
  it("reverse gradients of all five ops (cumprod with zeros) match torch in float64", function()
    if H.without_torch(pending) then return end
    local x = randn({4, 5}, 8, -2, 2)
    x[2][3] = 0
    x[3][1] = 0
    x[3][4] = 0
    local g = randn({4, 5}, 9)
    local out = H.run_torch({x = x, g = g}, {
      "x.requires_grad_()",
      "for f in (torch.cumsum, torch.cumprod, torch.logcumsumexp, lambda x, d: torch.cummax(x, d)[0],",
      "          lambda x, d: torch.cummin(x, d)[0]):",
      "  for d in (0, 1):",
      "    x.grad = None; f(x, d).backward(g); p(x.grad)",
    })
    local line = 0
    for _, name in ipairs({"cumsum", "cumprod", "logcumsumexp", "cummax", "cummin"}) do
      for d = 1, 2 do
        line = line + 1
        local xr = x:clone():requires_grad_()
        xr[name](xr, d):backward(g)
        H.assert_close(xr.grad:reshape(-1), H.torch_line(out[line]),
          {rtol = 1e-10, atol = 1e-12, msg = name .. " dim " .. d})
      end
    end
  end)
end)
