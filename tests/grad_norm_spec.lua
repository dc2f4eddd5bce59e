-- covers: layer_norm layer_norm_grad_input layer_norm_grad_affine
-- covers: batch_norm batch_norm_grad_input batch_norm_grad_affine
-- grad_norm_spec.lua — gradient rules of the fused normalization ops: reverse and forward mode
-- against central finite differences in float64 (dle.gradcheck with forward = true) for
-- layer_norm and batch_norm (affine or not, several shapes, train and eval, the stats output
-- too), the backward ops on their own (stats as an independent input: their rules give partial
-- derivatives for it), and double and triple backward (create_graph) against finite differences
-- of the gradient.
local dle = require("dle")
local H = require("helpers")

local F64 = {dtype = "float64"}

local function randn(shape, seed, lo, hi)
  return dle.tensor(H.values(shape, {seed = seed, lo = lo or -1, hi = hi or 1}), F64)
end

local check, gradients_of = H.gradcheck, H.gradients_of

local function ln(shape, w, b) return function(x) return (dle.layer_norm(x, shape, w, b)) end end

describe("layer_norm gradients", function()
  it("gradcheck of x, weight and bias over the last dim (odd sizes)", function()
    local x, w, b = randn({3, 5}, 1), randn({5}, 2), randn({5}, 3)
    check(function(x_, w_, b_) return (dle.layer_norm(x_, 5, w_, b_)) end, {x, w, b})
  end)

  it("gradcheck over two trailing dims, with only a weight, only a bias, or neither", function()
    local x = randn({2, 3, 4}, 4)
    local w, b = randn({3, 4}, 5), randn({3, 4}, 6)
    check(function(x_, w_) return (dle.layer_norm(x_, {3, 4}, w_, nil)) end, {x, w})
    check(function(x_, b_) return (dle.layer_norm(x_, {3, 4}, nil, b_)) end, {x, b})
    check(ln({3, 4}), {x})
  end)

  it("gradcheck of the stats output (mean, variance) in both modes", function()
    local x, w = randn({4, 3}, 7), randn({3}, 8)
    check(function(x_, w_) return dle.layer_norm(x_, 3, w_, nil) end, {x, w})
  end)

  it("gradcheck of layer_norm_grad_input and layer_norm_grad_affine with stats as an independent input", function()
    local x, w, gy = randn({3, 4}, 9), randn({4}, 10), randn({3, 4}, 11)
    local _, stats = dle.layer_norm(x, 4)
    stats = stats:detach()
    check(function(gy_, x_, s_, w_) return gy_:layer_norm_grad_input(x_, s_, w_, 4) end, {gy, x, stats, w})
    check(function(gy_, x_, s_) return gy_:layer_norm_grad_input(x_, s_, nil, 4) end, {gy, x, stats})
    check(function(gy_, x_, s_) return gy_:layer_norm_grad_affine(x_, s_, 4) end, {gy, x, stats})
  end)

  it("double backward: gradcheck of the gradients (create_graph) of x, weight and bias", function()
    local x, w, b, mix = randn({3, 4}, 12), randn({4}, 13), randn({4}, 14), randn({3, 4}, 15)
    local f = function(x_, w_, b_) return ((dle.layer_norm(x_, 4, w_, b_)) * mix):sum() end
    check(gradients_of(f), {x, w, b}, {forward = false})
    local x2 = randn({2, 2, 3}, 16)
    check(gradients_of(function(x_) return ((dle.layer_norm(x_, {2, 3})) ^ 3):sum() end), {x2}, {forward = false})
  end)

  it("triple backward: gradcheck of the gradient of a function of the gradients", function()
    local x, w, mix = randn({2, 4}, 17), randn({4}, 18), randn({2, 4}, 19)
    local g = gradients_of(function(x_, w_) return ((dle.layer_norm(x_, 4, w_, nil)) * mix):sum() end)
    local h = function(x_, w_)
      local gx, gw = g(x_, w_)
      return (gx * gx):sum() + (gw * gw * gw):sum()
    end
    check(gradients_of(h), {x, w}, {forward = false})
  end)

  it("does not keep y for backward: writing y in place afterwards leaves the gradient right", function()
    local x, w = randn({2, 3}, 24), randn({3}, 25)
    local xr = x:detach():requires_grad_(true)
    local want = dle.grad(((dle.layer_norm(xr, 3, w)) * w):sum(), {xr})[1]
    local y = dle.layer_norm(xr, 3, w)
    y:add_(1)
    y = y * w
    local got = dle.grad(y:sum(), {xr})[1]
    H.assert_close(got, want:totable(), {rtol = 1e-12, atol = 1e-12})
  end)

  it("forward-mode tangents of layer_norm agree with the reverse-mode gradient (<jvp(t), u> = <t, vjp(u)>)", function()
    local x, w, t, u = randn({3, 5}, 20), randn({5}, 21), randn({3, 5}, 22), randn({3, 5}, 23)
    local _, ty = dle.jvp(function(x_) return (dle.layer_norm(x_, 5, w)) end, {x}, {t})
    local xr = x:detach():requires_grad_(true)
    local gx = dle.grad((dle.layer_norm(xr, 5, w)), {xr}, {grad_outputs = u})[1]
    assert.is_true(math.abs((ty * u):sum():item() - (t * gx):sum():item()) < 1e-12)
  end)
end)

describe("batch_norm gradients", function()
  local function bn(x, w, b) return (dle.batch_norm(x, w, b, nil, nil, true)) end

  it("gradcheck of x, weight and bias on {N, C}, {N, C, L} and {N, C, H, W}", function()
    check(bn, {randn({4, 3}, 30), randn({3}, 31), randn({3}, 32)})
    check(bn, {randn({2, 2, 3}, 33), randn({2}, 34), randn({2}, 35)})
    check(bn, {randn({2, 3, 2, 3}, 36), randn({3}, 37), randn({3}, 38)})
  end)

  it("gradcheck without affine parameters and of the stats output", function()
    check(function(x) return bn(x) end, {randn({3, 2, 2}, 39)})
    check(function(x, w) return dle.batch_norm(x, w, nil, nil, nil, true) end, {randn({3, 2}, 40), randn({2}, 41)})
  end)

  it("gradcheck in eval mode (running statistics are constants)", function()
    local rm, rv = randn({3}, 42), randn({3}, 43, 0.5, 2)
    check(function(x, w, b) return (dle.batch_norm(x, w, b, rm, rv, false)) end,
      {randn({2, 3, 2}, 44), randn({3}, 45), randn({3}, 46)})
    local mix = randn({2, 3, 2}, 47)
    check(gradients_of(function(x, w, b) return ((dle.batch_norm(x, w, b, rm, rv, false)) * mix):sum() end),
      {randn({2, 3, 2}, 48), randn({3}, 49), randn({3}, 50)}, {forward = false})
  end)

  it("gradcheck of batch_norm_grad_input and batch_norm_grad_affine with stats as an independent input", function()
    local x, w, gy = randn({3, 2, 2}, 51), randn({2}, 52), randn({3, 2, 2}, 53)
    local _, stats = dle.batch_norm(x, nil, nil, nil, nil, true)
    stats = stats:detach()
    check(function(gy_, x_, s_, w_) return gy_:batch_norm_grad_input(x_, s_, w_) end, {gy, x, stats, w})
    check(function(gy_, x_, s_) return gy_:batch_norm_grad_affine(x_, s_) end, {gy, x, stats})
  end)

  it("double backward on {N, C, H, W}: gradcheck of the gradients of x, weight and bias", function()
    local x, w, b, mix = randn({2, 2, 2, 3}, 54), randn({2}, 55), randn({2}, 56), randn({2, 2, 2, 3}, 57)
    check(gradients_of(function(x_, w_, b_) return (bn(x_, w_, b_) * mix):sum() end), {x, w, b}, {forward = false})
  end)

  it("triple backward through the gradient ops", function()
    local x, w, mix = randn({3, 2, 2}, 58), randn({2}, 59), randn({3, 2, 2}, 60)
    local g = gradients_of(function(x_, w_) return (bn(x_, w_) * mix):sum() end)
    check(gradients_of(function(x_, w_)
      local gx, gw = g(x_, w_)
      return (gx * gx * gx):sum() + (gw * gw):sum()
    end), {x, w}, {forward = false})
  end)
end)
