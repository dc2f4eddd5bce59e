-- covers: conv2d conv2d_grad_input conv2d_grad_weight max_pool2d avg_pool2d avg_pool2d_grad
-- grad_conv_spec.lua — gradient rules of convolution and pooling: reverse and forward mode
-- against central finite differences in float64 (dle.gradcheck with forward = true) for each op
-- and attribute variant (stride, padding, dilation, groups, bias, count_include_pad) on small
-- shapes, the gradient ops reached through dle.core, and double backward (create_graph) of
-- conv2d and the pools against finite differences of the gradient.
local dle = require("dle")
local H = require("helpers")

local core = dle.core
local F64 = {dtype = "float64"}

local function randn(shape, seed)
  return dle.tensor(H.values(shape, {seed = seed, lo = -1, hi = 1}), F64)
end

local check, gradients_of = H.gradcheck, H.gradients_of

local conv_variants = {
  {name = "no options", x = {2, 2, 5, 4}, w = {3, 2, 2, 3}, o = {}},
  {name = "stride 2, padding 1, dilation 2", x = {1, 2, 6, 7}, w = {2, 2, 3, 2},
   o = {stride = 2, padding = 1, dilation = 2}},
  {name = "per-dim stride {2, 1}, padding {0, 2}, dilation {1, 2}", x = {1, 1, 5, 5}, w = {2, 1, 2, 2},
   o = {stride = {2, 1}, padding = {0, 2}, dilation = {1, 2}}},
  {name = "groups 3 (C=3, O=6), padding 1", x = {2, 3, 4, 4}, w = {6, 1, 2, 2}, o = {groups = 3, padding = 1}},
  {name = "groups 2, 2 channels per group, stride 2", x = {1, 4, 5, 5}, w = {2, 2, 3, 3},
   o = {groups = 2, stride = 2}},
}

describe("conv2d gradients", function()
  for k, v in ipairs(conv_variants) do
    it("gradcheck of conv2d (x, w, bias) with " .. v.name, function()
      local x, w, b = randn(v.x, 10 * k), randn(v.w, 10 * k + 1), randn({v.w[1]}, 10 * k + 2)
      check(function(x_, w_, b_) return dle.conv2d(x_, w_, b_, v.o) end, {x, w, b})
    end)
  end

  it("gradcheck of conv2d without a bias, and with only one input requiring grad", function()
    local x, w = randn({1, 2, 4, 4}, 61), randn({2, 2, 3, 3}, 62)
    check(function(x_, w_) return dle.conv2d(x_, w_, nil, {padding = 1}) end, {x, w})
    check(function(x_) return dle.conv2d(x_, w, nil, {padding = 1}) end, {x})
    check(function(w_) return dle.conv2d(x, w_, nil, {padding = 1}) end, {w})
  end)

  it("the bias gradient is the sum of the output gradient over N, H and W", function()
    local x = randn({2, 1, 3, 3}, 71):requires_grad_(true)
    local w = randn({2, 1, 2, 2}, 72):requires_grad_(true)
    local b = dle.zeros({2}, F64):requires_grad_(true)
    local y = dle.conv2d(x, w, b)
    local gy = randn(y:shape(), 73)
    y:backward(gy)
    H.assert_close(b.grad, {gy:narrow(2, 1, 1):sum():item(), gy:narrow(2, 2, 1):sum():item()})
  end)

  for k, v in ipairs(conv_variants) do
    it("gradcheck of conv2d_grad_input and conv2d_grad_weight with " .. v.name, function()
      local x = randn(v.x, 100 + k)
      local w = randn(v.w, 110 + k)
      local yshape = dle.conv2d(x, w, nil, v.o):shape()
      local gy = randn(yshape, 120 + k)
      check(function(gy_, w_) return core._conv2d_grad_input(gy_, w_, {v.x[3], v.x[4]}, v.o) end, {gy, w})
      check(function(gy_, x_) return core._conv2d_grad_weight(gy_, x_, {v.w[3], v.w[4]}, v.o) end, {gy, x})
    end)
  end

  it("double backward of conv2d (create_graph) matches finite differences of the gradient", function()
    local o = {stride = 2, padding = 1, groups = 2}
    local x, w, b = randn({1, 2, 5, 4}, 81), randn({2, 1, 2, 3}, 82), randn({2}, 83)
    local f = function(x_, w_, b_) return (dle.conv2d(x_, w_, b_, o) ^ 2):sum() end
    check(gradients_of(f), {x, w, b}, {forward = false})
    -- through tanh, so every second-derivative term is non-zero
    local f2 = function(x_, w_, b_) return dle.conv2d(x_, w_, b_, {padding = 1}):tanh():sum() end
    local x2, w2, b2 = randn({1, 2, 3, 3}, 84), randn({2, 2, 2, 2}, 85), randn({2}, 86)
    check(gradients_of(f2), {x2, w2, b2}, {forward = false})
  end)

  it("gradcheck and double backward on two threads (a batch of 3 in chunks of 2 and 1, one per thread)", function()
    H.keep_threads(finally)
    dle.set_num_threads(2)
    for k, o in ipairs({{padding = 1}, {padding = {1, 0}, stride = {1, 2}, groups = 2}}) do
      local x, w, b = randn({3, 2, 5, 4}, 140 + k), randn({4, 2 // (o.groups or 1), 3, 3}, 150 + k), randn({4}, 160 + k)
      check(function(x_, w_, b_) return dle.conv2d(x_, w_, b_, o) end, {x, w, b})
      local gy = randn(dle.conv2d(x, w, nil, o):shape(), 170 + k)
      check(function(gy_, w_) return core._conv2d_grad_input(gy_, w_, {5, 4}, o) end, {gy, w})
      check(function(gy_, x_) return core._conv2d_grad_weight(gy_, x_, {3, 3}, o) end, {gy, x})
      local f = function(x_, w_, b_) return dle.conv2d(x_, w_, b_, o):tanh():sum() end
      check(gradients_of(f), {x, w, b}, {forward = false})
    end
  end)

  -- 3x3, stride 1, >= 8 channels per group: the Winograd kernels (kernels/cpu/cpu_conv_winograd.c)
  for k, v in ipairs({
    {name = "padding 1, odd sizes", x = {2, 8, 3, 3}, w = {8, 8, 3, 3}, o = {padding = 1}},
    {name = "no padding, groups 2 of 8", x = {1, 16, 3, 4}, w = {16, 8, 3, 3}, o = {groups = 2}},
  }) do
    it("Winograd path (" .. v.name .. "): gradcheck of conv2d and its gradient ops on 1 and 2 threads, double backward",
       function()
      -- these few tiles take Winograd too; busted keeps one finally per test, so it restores both
      local old, threads = dle.core._tuning("winograd_min_tiles", 0), dle.get_num_threads()
      finally(function() dle.core._tuning("winograd_min_tiles", old); dle.set_num_threads(threads) end)
      for _, n in ipairs({1, 2}) do
        dle.set_num_threads(n)
        local x, w, b = randn(v.x, 300 + k), randn(v.w, 310 + k), randn({v.w[1]}, 320 + k)
        check(function(x_, w_, b_) return dle.conv2d(x_, w_, b_, v.o) end, {x, w, b})
        local gy = randn(dle.conv2d(x, w, nil, v.o):shape(), 330 + k)
        check(function(gy_, w_) return core._conv2d_grad_input(gy_, w_, {v.x[3], v.x[4]}, v.o) end, {gy, w})
        check(function(gy_, x_) return core._conv2d_grad_weight(gy_, x_, {3, 3}, v.o) end, {gy, x})
        if n == 1 then
          local f = function(x_, w_, b_) return dle.conv2d(x_, w_, b_, v.o):tanh():sum() end
          check(gradients_of(f), {x, w, b}, {forward = false})
        end
      end
    end)
  end

  it("the second derivative d/dw <dL/dx, u> of L = <conv2d(x, w), c> is conv2d_grad_weight(c, u)", function()
    -- L = <conv(x, w), c> for a constant c: dL/dx = grad_input(c, w), which is linear in w, so
    -- d/dw <dL/dx, u> = grad_weight(c, u) for any u
    local o = {padding = 1}
    local x = randn({1, 2, 4, 4}, 91):requires_grad_(true)
    local w = randn({3, 2, 3, 3}, 92):requires_grad_(true)
    local c, u = randn({1, 3, 4, 4}, 93), randn({1, 2, 4, 4}, 94)
    local gx = dle.grad((dle.conv2d(x, w, nil, o) * c):sum(), {x}, {create_graph = true})[1]
    local gw = dle.grad((gx * u):sum(), {w})[1]
    H.assert_close(gw, core._conv2d_grad_weight(c, u, {3, 3}, o):totable(), {rtol = 1e-10, atol = 1e-12})
  end)
end)

describe("pooling gradients", function()
  it("gradcheck of max_pool2d values (kernel 2; kernel {3, 2}, stride {2, 1}, padding 1)", function()
    local x = randn({2, 2, 5, 6}, 201)
    check(function(x_) return (dle.max_pool2d(x_, 2)) end, {x})
    check(function(x_) return (dle.max_pool2d(x_, {3, 2}, {stride = {2, 1}, padding = 1})) end, {x})
  end)

  it("max_pool2d sends each output gradient to its argmax, summing overlapping windows", function()
    local x = dle.tensor({{{{1, 2, 0}, {0, 9, 0}, {3, 0, 4}}}}, F64):requires_grad_(true)
    local v = dle.max_pool2d(x, 2, {stride = 1})
    v:sum():backward()
    H.assert_close(x.grad, {{{{0, 0, 0}, {0, 4, 0}, {0, 0, 0}}}})
  end)

  it("gradcheck of avg_pool2d with and without count_include_pad", function()
    local x = randn({2, 2, 5, 6}, 211)
    check(function(x_) return dle.avg_pool2d(x_, 2) end, {x})
    for _, inc in ipairs({true, false}) do
      local o = {stride = {2, 1}, padding = 1, count_include_pad = inc}
      check(function(x_) return dle.avg_pool2d(x_, {3, 2}, o) end, {x})
    end
  end)

  it("gradcheck of avg_pool2d_grad with and without count_include_pad", function()
    for _, inc in ipairs({true, false}) do
      local o = {stride = {2, 1}, padding = 1, count_include_pad = inc}
      local gy = randn({2, 2, 3, 7}, 221)
      check(function(g_) return core._avg_pool2d_grad(g_, {5, 6}, {3, 2}, o) end, {gy})
    end
  end)

  it("double backward through max_pool2d and avg_pool2d matches finite differences", function()
    local x = randn({1, 2, 4, 4}, 231)
    check(gradients_of(function(x_) return (dle.max_pool2d(x_, 2) ^ 3):sum() end), {x}, {forward = false})
    check(gradients_of(function(x_)
      return (dle.avg_pool2d(x_, 3, {stride = 1, padding = 1, count_include_pad = false}) ^ 3):sum()
    end), {x}, {forward = false})
  end)

  it("a small CNN (conv, relu, max pool, conv, avg pool) passes gradcheck end to end", function()
    local x, w1, b1 = randn({2, 1, 6, 6}, 241), randn({2, 1, 3, 3}, 242), randn({2}, 243)
    local w2 = randn({3, 2, 2, 2}, 244)
    check(function(x_, w1_, b1_, w2_)
      local h = dle.max_pool2d(dle.conv2d(x_, w1_, b1_, {padding = 1}):tanh(), 2)
      return dle.avg_pool2d(dle.conv2d(h, w2_, nil, {padding = 1}), 2)
    end, {x, w1, b1, w2})
  end)
end)
