-- covers: lstm_cell_fused gru_cell_fused
-- grad_rnn_spec.lua — gradient rules of the fused recurrent cells and of the layers built on them:
-- reverse and forward mode against central finite differences in float64 (dle.gradcheck with
-- forward = true) for every output (h', c' and the saved gates), on non-contiguous inputs; double
-- backward through the ops (the composite rule) and through the layers (the differentiable reverse
-- loop of create_graph); forward mode (dle.jvp) through a layer; the one-pass backward ops equal
-- the composite rule.
local dle = require("dle")
local H = require("helpers")

local nn = dle.nn
local randn, check, gradients_of = H.seeded, H.gradcheck, H.gradients_of

local N, Hd = 3, 4

describe("fused cell gradients", function()
  it("lstm_cell_fused: gradcheck of h', c' and act (reverse and forward) on transposed inputs", function()
    local xg, hg, c = randn({4 * Hd, N}, 1):t(), randn({N, 4 * Hd}, 2), randn({Hd, N}, 3):t()
    check(function(a, b, cc) return dle.lstm_cell_fused(a, b, cc) end, {xg, hg, c})
    check(function(a, b, cc) local h = dle.lstm_cell_fused(a, b, cc) return h end, {xg, hg, c})
    check(function(a, b, cc) local _, c2 = dle.lstm_cell_fused(a, b, cc) return c2 end, {xg, hg, c})
  end)

  it("gru_cell_fused: gradcheck of h' and act (reverse and forward) on transposed inputs", function()
    local xg, hg, h = randn({N, 3 * Hd}, 4), randn({3 * Hd, N}, 5):t(), randn({N, Hd}, 6)
    check(function(a, b, hh) return dle.gru_cell_fused(a, b, hh) end, {xg, hg, h})
    check(function(a, b, hh) return (dle.gru_cell_fused(a, b, hh)) end, {xg, hg, h})
  end)

  it("double backward through both cells (second derivatives against differences of the gradient)", function()
    local xg, hg, c = randn({2, 8}, 7), randn({2, 8}, 8), randn({2, 2}, 9)
    check(gradients_of(function(a, b, cc)
      local h, c2 = dle.lstm_cell_fused(a, b, cc)
      return (h * h):sum() + (c2 * h):sum()
    end), {xg, hg, c}, {forward = false})
    local xg3, hg3, h = randn({2, 6}, 10), randn({2, 6}, 11), randn({2, 2}, 12)
    check(gradients_of(function(a, b, hh)
      local h2 = dle.gru_cell_fused(a, b, hh)
      return (h2 * h2 * hh):sum()
    end), {xg3, hg3, h}, {forward = false})
  end)

  it("the one-pass backward ops give the composite rule's gradients", function()
    local xg, hg, c = randn({N, 4 * Hd}, 13), randn({N, 4 * Hd}, 14), randn({N, Hd}, 15)
    local gh, gc = randn({N, Hd}, 16), randn({N, Hd}, 17)
    local h2, c2, act = dle.lstm_cell_fused(xg, hg, c)
    local dg, dc = dle.lstm_cell_fused_backward(gh, gc, act, c, c2)
    local ins = {xg:clone():requires_grad_(), hg, c:clone():requires_grad_()}
    -- create_graph takes the composite rule
    local g = dle.enable_grad(function()
      local hh, cc = dle.lstm_cell_fused(ins[1], ins[2], ins[3])
      return dle.grad({(hh * gh):sum() + (cc * gc):sum()}, {ins[1], ins[3]}, {create_graph = true})
    end)
    assert.is_true(H.max_diff(dg, g[1]) < 1e-14 and H.max_diff(dc, g[2]) < 1e-14)
    assert.is_true(H.max_diff(h2, dle.lstm_cell_fused(xg, hg, c)) == 0)

    local x3, h3, hp = randn({N, 3 * Hd}, 18), randn({N, 3 * Hd}, 19), randn({N, Hd}, 20)
    local _, act3 = dle.gru_cell_fused(x3, h3, hp)
    local dx, dhg, dh = dle.gru_cell_fused_backward(gh, act3, hp)
    local gi = {x3:clone():requires_grad_(), h3:clone():requires_grad_(), hp:clone():requires_grad_()}
    local g3 = dle.enable_grad(function()
      return dle.grad({(dle.gru_cell_fused(gi[1], gi[2], gi[3]) * gh):sum()}, gi, {create_graph = true})
    end)
    assert.is_true(H.max_diff(dx, g3[1]) < 1e-14 and H.max_diff(dhg, g3[2]) < 1e-14)
    assert.is_true(H.max_diff(dh, g3[3]) < 1e-14)
  end)
end)

describe("recurrent layer gradients", function()
  -- f(x, h0[, c0]) of a float64 layer: its results as a list
  local function layer_fn(m)
    return function(x, h0, c0)
      if c0 then return m(x, h0, c0) end
      return m(x, h0)
    end
  end

  for _, case in ipairs({
    {"LSTM 2 layers bidirectional", "LSTM", {num_layers = 2, bidirectional = true}, true},
    {"LSTM with proj_size", "LSTM", {proj_size = 2}, true},
    {"GRU bidirectional", "GRU", {bidirectional = true}},
    {"RNN tanh", "RNN", {}},
    {"RNN relu", "RNN", {nonlinearity = "relu"}},
  }) do
    it(case[1] .. ": gradcheck in input and initial states, reverse and forward mode", function()
      local o = {dtype = "float64"}
      for k, v in pairs(case[3]) do o[k] = v end
      local m = nn[case[2]](3, 4, o)
      local D = (case[3].bidirectional and 2 or 1) * (case[3].num_layers or 1)
      local hout = case[3].proj_size or 4
      local x, h0 = randn({4, 2, 3}, 21), randn({D, 2, hout}, 22)
      local ins = {x, h0}
      if case[4] then ins[3] = randn({D, 2, 4}, 23) end
      check(layer_fn(m), ins)
    end)
  end

  it("gradcheck in the parameters (through the fused reverse loop)", function()
    local m = nn.LSTM(2, 3, {dtype = "float64", proj_size = 2})
    local x = randn({3, 2, 2}, 24)
    local names, params = {}, {}
    for _, e in ipairs(m:named_parameters()) do names[#names + 1], params[#params + 1] = e[1], e[2]:detach() end
    check(function(...)
      local ps = {...}
      for i, n in ipairs(names) do m[n] = ps[i] end
      local out, _, cn = m(x)
      return out, cn
    end, params)
  end)

  it("double backward through GRU and LSTM layers (the differentiable reverse loop)", function()
    for _, cls in ipairs({"LSTM", "GRU"}) do
      local m = nn[cls](2, 3, {dtype = "float64"})
      local x = randn({3, 2, 2}, 25)
      check(gradients_of(function(xx)
        local out = m(xx)
        return (out * out):sum()
      end), {x}, {forward = false})
    end
  end)

  it("forward mode through a layer equals the reverse mode's Jacobian column", function()
    local m = nn.LSTM(2, 3, {dtype = "float64"})
    local x, t = randn({3, 2, 2}, 26), randn({3, 2, 2}, 27)
    local _, touts = dle.jvp(function(xx) return m(xx) end, {x}, {t})
    -- <w, J t> by reverse mode: (J^T w) . t
    local w = randn({3, 2, 3}, 28)
    local xr = x:clone():requires_grad_()
    local out = m(xr)
    local g = dle.grad({(out * w):sum()}, {xr})[1]
    assert.is_true(math.abs((touts[1] * w):sum():item() - (g * t):sum():item()) < 1e-12)
  end)
end)
