-- rnn_spec.lua — dle.nn.RNN, LSTM, GRU and RNNCell, LSTMCell, GRUCell: PyTorch's parameter
-- names, shapes and init bounds, the fused cell ops against their formulas written in dle ops
-- (every float dtype, non-contiguous inputs), outputs and states of each configuration
-- (layers, bidirectional, batch_first, proj_size, unbatched, given initial states), bad input
-- errors naming the module and shapes, and, when python3 has torch, outputs and the gradients of
-- the input, the initial states and every parameter against PyTorch in float64 with the same
-- state dict.
local dle = require("dle")
local H = require("helpers")

local nn = dle.nn
local F64 = {dtype = "float64"}

local function names_of(m)
  local r = {}
  for _, e in ipairs(m:named_parameters()) do r[#r + 1] = e[1] .. " " .. table.concat(e[2]:shape(), "x") end
  return r
end

describe("recurrent layers: parameters", function()
  it("LSTM has PyTorch's parameter names, order and shapes (2 layers, bidirectional, proj_size)", function()
    local m = nn.LSTM(3, 5, {num_layers = 2, bidirectional = true, proj_size = 2})
    assert.are.same({
      "weight_ih_l0 20x3", "weight_hh_l0 20x2", "bias_ih_l0 20", "bias_hh_l0 20", "weight_hr_l0 2x5",
      "weight_ih_l0_reverse 20x3", "weight_hh_l0_reverse 20x2", "bias_ih_l0_reverse 20",
      "bias_hh_l0_reverse 20", "weight_hr_l0_reverse 2x5",
      "weight_ih_l1 20x4", "weight_hh_l1 20x2", "bias_ih_l1 20", "bias_hh_l1 20", "weight_hr_l1 2x5",
      "weight_ih_l1_reverse 20x4", "weight_hh_l1_reverse 20x2", "bias_ih_l1_reverse 20",
      "bias_hh_l1_reverse 20", "weight_hr_l1_reverse 2x5",
    }, names_of(m))
  end)

  it("GRU, RNN and the cells: gate widths 3H, H, 4H; bias = false drops the biases", function()
    assert.are.same({"weight_ih_l0 12x3", "weight_hh_l0 12x4"}, names_of(nn.GRU(3, 4, {bias = false})))
    assert.are.same({"weight_ih_l0 4x3", "weight_hh_l0 4x4", "bias_ih_l0 4", "bias_hh_l0 4"}, names_of(nn.RNN(3, 4)))
    assert.are.same({"weight_ih 16x3", "weight_hh 16x4", "bias_ih 16", "bias_hh 16"}, names_of(nn.LSTMCell(3, 4)))
    assert.are.same({"weight_ih 12x3", "weight_hh 12x4"}, names_of(nn.GRUCell(3, 4, {bias = false})))
    assert.are.same({"weight_ih 4x3", "weight_hh 4x4", "bias_ih 4", "bias_hh 4"},
                    names_of(nn.RNNCell(3, 4, {nonlinearity = "relu"})))
  end)

  it("initializes every parameter in U(-1/sqrt(H), 1/sqrt(H)) and fills the range", function()
    local m = nn.LSTM(8, 16, {num_layers = 2})
    for _, p in ipairs(m:parameters()) do
      assert.is_true(p:abs():max():item() <= 0.25)
    end
    assert.is_true(m.weight_hh_l1:abs():max():item() > 0.24)
  end)
end)

-- cell formulas in plain dle ops
local function sig(t) return t:sigmoid() end
local function blocks(t, n, h)
  local r = {}
  for k = 1, n do r[k] = t:narrow(2, (k - 1) * h + 1, h) end
  return r
end

describe("fused cell ops", function()
  for _, dt in ipairs({"float64", "float32", "float16", "bfloat16"}) do
    it("lstm_cell_fused and gru_cell_fused equal their formulas in " .. dt .. " on transposed inputs", function()
      local o = {dtype = dt}
      local N, Hd = 3, 5
      local xg = dle.randn(4 * Hd, N, o):t()         -- non-contiguous
      local hg, c = dle.randn(N, 4 * Hd, o), dle.randn(Hd, N, o):t()
      local h2, c2, act = dle.lstm_cell_fused(xg, hg, c)
      local g = blocks((xg + hg):double(), 4, Hd)
      local cr = sig(g[2]) * c:double() + sig(g[1]) * g[3]:tanh()
      local hr = sig(g[4]) * cr:tanh()
      local tol = dt == "float64" and 1e-12 or dt == "float32" and 1e-5 or 0.05
      assert.is_true(H.max_diff(c2, cr) < tol and H.max_diff(h2, hr) < tol)
      assert.is_true(H.max_diff(act:narrow(2, 2 * Hd + 1, Hd), g[3]:tanh()) < tol)
      assert.are.equal(dt, h2:dtype())

      local xg3, hg3, hp = dle.randn(N, 3 * Hd, o), dle.randn(3 * Hd, N, o):t(), dle.randn(N, Hd, o)
      local hn = dle.gru_cell_fused(xg3, hg3, hp)
      local a, b = blocks(xg3:double(), 3, Hd), blocks(hg3:double(), 3, Hd)
      local r, z = sig(a[1] + b[1]), sig(a[2] + b[2])
      local n = (a[3] + r * b[3]):tanh()
      assert.is_true(H.max_diff(hn, (1 - z) * n + z * hp:double()) < tol)
    end)
  end

  it("an empty batch gives empty results", function()
    local h, c, act = dle.lstm_cell_fused(dle.zeros(0, 8), dle.zeros(0, 8), dle.zeros(0, 2))
    assert.are.same({0, 2}, h:shape())
    assert.are.same({0, 8}, act:shape())
    assert.are.same({0, 2}, c:shape())
  end)

  it("bad shapes and dtypes are errors naming the op and the shapes", function()
    local ok, err = pcall(dle.lstm_cell_fused, dle.zeros(2, 8), dle.zeros(2, 7), dle.zeros(2, 2))
    assert.is_false(ok)
    assert.matches("lstm_cell_fused: input 2 has shape {2,7}, expected {2,8}", err)
    ok, err = pcall(dle.gru_cell_fused, dle.zeros(2, 6), dle.zeros(2, 6), dle.zeros(2, 2, {dtype = "float64"}))
    assert.is_false(ok)
    assert.matches("gru_cell_fused: inputs must share one float dtype", err)
    ok, err = pcall(dle.gru_cell_fused, dle.zeros(6), dle.zeros(2, 6), dle.zeros(2, 2))
    assert.is_false(ok)
    assert.matches("gru_cell_fused: input 1 must be 2%-D", err)
    ok, err = pcall(dle.lstm_cell_fused, dle.zeros(2, 8, {dtype = "int64"}), dle.zeros(2, 8, {dtype = "int64"}),
                    dle.zeros(2, 2, {dtype = "int64"}))
    assert.is_false(ok)
    assert.matches("lstm_cell_fused: inputs must share one float dtype, got int64", err)
  end)
end)

describe("recurrent layers: forward", function()
  it("LSTM returns output {L, N, D H}, h_n and c_n {D layers, N, H}; h_n is the output's last step", function()
    local m = nn.LSTM(3, 4, {num_layers = 2, bidirectional = true, dtype = "float64"})
    local out, hn, cn = m(dle.randn(5, 2, 3, F64))
    assert.are.same({5, 2, 8}, out:shape())
    assert.are.same({4, 2, 4}, hn:shape())
    assert.are.same({4, 2, 4}, cn:shape())
    -- last layer: forward direction ends at step L, the reverse one at step 1
    assert.is_true(H.max_diff(hn[3], out[5]:narrow(2, 1, 4)) == 0)
    assert.is_true(H.max_diff(hn[4], out[1]:narrow(2, 5, 4)) == 0)
  end)

  it("batch_first and unbatched inputs give the same numbers as the time-major batched call", function()
    for _, cls in ipairs({"LSTM", "GRU", "RNN"}) do
      local m = nn[cls](3, 4, {num_layers = 2, dtype = "float64"})
      local x = dle.randn(5, 2, 3, F64)
      local out, hn = m(x)
      m.batch_first = true
      local outb, hnb = m(x:transpose(1, 2))
      assert.is_true(H.max_diff(outb:transpose(1, 2), out) < 1e-14, cls)
      assert.is_true(H.max_diff(hnb, hn) < 1e-14, cls)
      m.batch_first = false
      local out1, hn1 = m(x:select(2, 2))
      assert.are.same({5, 4}, out1:shape())
      assert.is_true(H.max_diff(out1, out:select(2, 2)) < 1e-14, cls)
      assert.is_true(H.max_diff(hn1, hn:select(2, 2)) < 1e-14, cls)
    end
  end)

  it("LSTM takes its initial state as {h0, c0} or h0, c0, and chaining two halves equals one call", function()
    local m = nn.LSTM(3, 4, {dtype = "float64"})
    local x = dle.randn(6, 2, 3, F64)
    local out, hn, cn = m(x)
    local o1, h1, c1 = m(x:narrow(1, 1, 3))
    local o2, h2, c2 = m(x:narrow(1, 4, 3), {h1, c1})
    local o3 = m(x:narrow(1, 4, 3), h1, c1)
    assert.is_true(H.max_diff(dle.cat({o1, o2}, 1), out) < 1e-14)
    assert.is_true(H.max_diff(o3, o2) == 0)
    assert.is_true(H.max_diff(h2, hn) < 1e-14 and H.max_diff(c2, cn) < 1e-14)
  end)

  it("the cells equal one step of the layer with the same weights", function()
    for _, cls in ipairs({"LSTM", "GRU", "RNN"}) do
      local layer, cell = nn[cls](3, 4, {dtype = "float64"}), nn[cls .. "Cell"](3, 4, {dtype = "float64"})
      for _, w in ipairs({"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) do
        layer[w .. "_l0"] = cell[w]
      end
      local x, h = dle.randn(2, 3, F64), dle.randn(2, 4, F64)
      local c = dle.randn(2, 4, F64)
      local out = layer(x:unsqueeze(1), h:unsqueeze(1), cls == "LSTM" and c:unsqueeze(1) or nil)
      local h1 = cell(x, h, cls == "LSTM" and c or nil)
      assert.is_true(H.max_diff(h1, out[1]) < 1e-14, cls)
      local hu = cell(x[1], h[1], cls == "LSTM" and c[1] or nil)
      assert.is_true(H.max_diff(hu, h1[1]) < 1e-14, cls)
    end
  end)

  it("dropout between layers only in training; eval is deterministic", function()
    local m = nn.GRU(3, 6, {num_layers = 2, dropout = 0.5, dtype = "float64"})
    local x = dle.randn(4, 2, 3, F64)
    m:eval()
    assert.is_true(H.max_diff(m(x), m(x)) == 0)
    m:train()
    assert.is_true(H.max_diff(m(x), m(x)) > 0)
  end)

  it("runs under no_grad without recording and gives the same output", function()
    local m = nn.LSTM(3, 4)
    local x = dle.randn(5, 2, 3)
    local a = m(x)
    local b = dle.no_grad(function() return m(x) end)
    assert.is_false(b.requires_grad)
    assert.is_true(H.max_diff(a, b) == 0)
  end)
end)

describe("recurrent layers: bad input", function()
  local function fails(pattern, f, ...)
    local ok, err = pcall(f, ...)
    assert.is_false(ok)
    assert.matches(pattern, err)
  end

  it("names the module and the shapes", function()
    local lstm = nn.LSTM(10, 20)
    fails("LSTM: input has 7 features %(shape {5,3,7}%), expected input_size 10", lstm, dle.zeros(5, 3, 7))
    fails("LSTM: expected a 3%-D input {L, N, In}", lstm, dle.zeros(7))
    fails("LSTM: h0 has shape {1,2,20}, expected {1,3,20}", lstm, dle.zeros(5, 3, 10), dle.zeros(1, 2, 20),
          dle.zeros(1, 2, 20))
    fails("LSTM: give both h0 and c0", lstm, dle.zeros(5, 3, 10), dle.zeros(1, 3, 20))
    fails("LSTM: input is float64 %(shape {5,3,10}%) but the parameters are float32", lstm,
          dle.zeros(5, 3, 10, F64))
    fails("LSTM: the input sequence is empty", lstm, dle.zeros(0, 3, 10))
    fails("GRU: takes %(input, h0%)", nn.GRU(2, 3), dle.zeros(1, 1, 2), dle.zeros(1, 1, 3), dle.zeros(1, 1, 3))
    fails("GRUCell: expected an input {N, 2}", nn.GRUCell(2, 3), dle.zeros(4, 5))
    fails("LSTMCell: hx has shape {4,2}, expected {4,3}", nn.LSTMCell(2, 3), dle.zeros(4, 2), dle.zeros(4, 2),
          dle.zeros(4, 3))
  end)

  it("checks the constructor's options", function()
    fails("LSTM: unknown option", nn.LSTM, 2, 3, {num_layer = 2})
    fails("LSTM: proj_size %(3%) must be smaller than hidden_size %(3%)", nn.LSTM, 2, 3, {proj_size = 3})
    fails("RNN: nonlinearity must be", nn.RNN, 2, 3, {nonlinearity = "sigmoid"})
    fails("GRU", nn.GRU, 2, 0)
    fails("GRU", nn.GRU, 2, 3, {dropout = 2})
    fails("GRU: unknown option", nn.GRU, 2, 3, {proj_size = 1})
  end)
end)

-- ---------------------------------------------------------------- PyTorch, float64

-- Runs m on x (and states), loss = sum of each result times fixed random weights, backward; the
-- same in torch with m's state dict; compares outputs and all gradients.
local function compare_with_torch(cls, torch_ctor, m, x, states)
  local xs = x:clone():requires_grad_()
  local st = {}
  for i, s in ipairs(states) do st[i] = s:clone():requires_grad_() end
  local res = {m(xs, table.unpack(st))}
  local tensors = {x = x}
  local lines = {"m = " .. torch_ctor .. ".double()", "sd = {}"}
  for _, e in ipairs(m:named_parameters()) do
    local key = "p_" .. e[1]
    tensors[key] = e[2]:detach()
    lines[#lines + 1] = "sd['" .. e[1] .. "'] = " .. key
  end
  lines[#lines + 1] = "m.load_state_dict(sd)"
  lines[#lines + 1] = "xs = x.clone().requires_grad_()"
  local targs = {"xs"}
  for i, s in ipairs(states) do
    tensors["s" .. i] = s
    lines[#lines + 1] = string.format("st%d = s%d.clone().requires_grad_()", i, i)
    targs[#targs + 1] = "st" .. i
  end
  local call = #states == 0 and "m(xs)" or #states == 1 and "m(xs, st1)" or "m(xs, (st1, st2))"
  lines[#lines + 1] = "r = " .. call
  lines[#lines + 1] = "r = list(r) if isinstance(r, tuple) else [r]"
  lines[#lines + 1] = "r = [r[0]] + (list(r[1]) if len(r) > 1 and isinstance(r[1], tuple) else r[1:])"
  local loss = 0
  for k, t in ipairs(res) do
    local w = dle.randn(t:shape(), F64)
    tensors["w" .. k] = w
    loss = loss + (t * w):sum()
    lines[#lines + 1] = string.format("p(r[%d])", k - 1)
  end
  local ws = {}
  for k = 1, #res do ws[k] = "w" .. k end
  lines[#lines + 1] = "loss = sum((r[k] * w).sum() for k, w in enumerate([" .. table.concat(ws, ",") .. "]))"
  lines[#lines + 1] = "loss.backward()"
  for _, a in ipairs(targs) do lines[#lines + 1] = "p(" .. a .. ".grad)" end
  for _, e in ipairs(m:named_parameters()) do
    lines[#lines + 1] = "p(dict(m.named_parameters())['" .. e[1] .. "'].grad)"
  end
  loss:backward()
  local out = H.run_torch(tensors, lines)
  local i = 0
  local function next_line(what)
    i = i + 1
    assert(out[i], "torch printed too few lines at " .. what)
    return out[i]
  end
  for k, t in ipairs(res) do
    H.assert_torch_numbers(H.flat(t:totable()), next_line("result " .. k), 1e-10, cls .. " result " .. k)
  end
  H.assert_torch_numbers(H.flat(xs.grad:totable()), next_line("x grad"), 1e-10, cls .. " input grad")
  for k, s in ipairs(st) do
    H.assert_torch_numbers(H.flat(s.grad:totable()), next_line("state grad"), 1e-10, cls .. " state " .. k .. " grad")
  end
  for _, e in ipairs(m:named_parameters()) do
    H.assert_torch_numbers(H.flat(e[2].grad:totable()), next_line(e[1]), 1e-10, cls .. " " .. e[1] .. " grad")
  end
  assert.is_nil(out[i + 1])
end

describe("recurrent layers against PyTorch (float64)", function()
  local cases = {
    {"LSTM 2 layers bidirectional", "LSTM", {num_layers = 2, bidirectional = true},
     "torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True)", {5, 2, 3}, 2},
    {"LSTM batch_first with proj_size and initial states", "LSTM", {batch_first = true, proj_size = 2},
     "torch.nn.LSTM(3, 4, batch_first=True, proj_size=2)", {2, 5, 3}, 2, {{1, 2, 2}, {1, 2, 4}}},
    {"LSTM without bias, unbatched", "LSTM", {bias = false}, "torch.nn.LSTM(3, 4, bias=False)", {6, 3}, 2},
    {"GRU 2 layers bidirectional with h0", "GRU", {num_layers = 2, bidirectional = true},
     "torch.nn.GRU(3, 4, num_layers=2, bidirectional=True)", {5, 2, 3}, 2, {{4, 2, 4}}},
    {"RNN tanh 2 layers", "RNN", {num_layers = 2}, "torch.nn.RNN(3, 4, num_layers=2)", {5, 2, 3}, 2},
    {"RNN relu bidirectional", "RNN", {nonlinearity = "relu", bidirectional = true},
     "torch.nn.RNN(3, 4, nonlinearity='relu', bidirectional=True)", {5, 2, 3}, 2},
    {"LSTMCell with state", "LSTMCell", {}, "torch.nn.LSTMCell(3, 4)", {2, 3}, 2, {{2, 4}, {2, 4}}},
    {"GRUCell with state", "GRUCell", {}, "torch.nn.GRUCell(3, 4)", {2, 3}, 1, {{2, 4}}},
    {"RNNCell relu", "RNNCell", {nonlinearity = "relu"}, "torch.nn.RNNCell(3, 4, nonlinearity='relu')", {2, 3}, 1},
  }
  for _, c in ipairs(cases) do
    it(c[1] .. ": outputs, states and the gradients of input, states and parameters", function()
      if H.without_torch(pending) then return end
      local o = {dtype = "float64"}
      for k, v in pairs(c[3]) do o[k] = v end
      local m = nn[c[2]](3, 4, o)
      local states = {}
      for i, s in ipairs(c[7] or {}) do states[i] = dle.randn(s, F64) end
      compare_with_torch(c[2], c[4], m, dle.randn(c[5], F64), states)
    end)
  end
end)
