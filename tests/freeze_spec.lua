--- freeze_spec.lua — dle.freeze: an inference graph of a module where conv2d/linear + batch norm
-- fold (checked against PyTorch's fuse_conv_bn_eval formula by the outputs), dropout disappears and
-- constants fold; outputs equal to eval-mode eager within 1e-5; the module is left as it was.
local dle = require("dle")
local nn = dle.nn

local function count(g, op)
  local n = 0
  for _, node in ipairs(g:nodes()) do if node.op == op then n = n + 1 end end
  return n
end

-- a CNN with batch norms after a conv and a linear, dropout, and statistics that are not 0 and 1
local function trained_cnn()
  dle.manual_seed(3)
  local net = nn.Sequential(nn.Conv2d(3, 8, 3, {padding = 1}), nn.BatchNorm2d(8), nn.ReLU(), nn.Dropout(0.3),
    nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 4 * 4, 10), nn.BatchNorm1d(10), nn.Dropout(0.5), nn.Linear(10, 4))
  net:train()
  local opt = dle.optim.SGD(net:parameters(), {lr = 0.1})
  for _ = 1, 5 do
    local loss = net(dle.randn(16, 3, 8, 8) * 2 + 1):pow(2):mean()
    opt:zero_grad(); loss:backward(); opt:step()
  end
  return net
end

describe("dle.freeze", function()
  it("folds batch norm into conv2d and linear, drops dropout, equals eval-mode eager within 1e-5", function()
    local net = trained_cnn()
    local x = dle.randn(5, 3, 8, 8)
    local g = dle.freeze(net, x)
    assert.equal(0, count(g, "batch_norm"))
    assert.equal(0, count(g, "dropout"))
    assert.equal(0, count(g, "param"))
    assert.equal(1, count(g, "conv2d"))
    net:eval()
    local want = net(x)
    local got = g:run(x)
    assert.is_true((got - want):abs():max():item() < 1e-5, "max difference " .. (got - want):abs():max():item())
  end)

  it("leaves the module as it was: train mode, parameters requiring grad; the graph keeps freeze-time weights",
     function()
    local net = trained_cnn()
    local x = dle.randn(2, 3, 8, 8)
    local g = dle.freeze(net, x)
    assert.is_true(net.training)
    for _, m in ipairs(net:modules()) do assert.is_true(m.training) end
    for _, p in ipairs(net:parameters()) do assert.is_true(p.requires_grad) end
    local before = g:run(x)
    dle.no_grad(function() for _, p in ipairs(net:parameters()) do p:add_(1) end end)
    assert.are.same(before:totable(), g:run(x):totable())
  end)

  it("folds constant subexpressions and fuses elementwise chains of a plain function", function()
    local c = dle.randn(4)
    local g = dle.freeze(function(x) return ((x + (c * 2):exp()) * 3):tanh():relu() end, dle.randn(3, 4))
    assert.equal(0, count(g, "exp"))
    assert.equal(1, count(g, "fused"))
    local x = dle.randn(3, 4)
    assert.is_true((g:run(x) - ((x + (c * 2):exp()) * 3):tanh():relu()):abs():max():item() < 1e-6)
  end)

  it("bad arguments are errors naming freeze", function()
    assert.matches("freeze: .*module", select(2, pcall(dle.freeze, 42)))
    assert.matches("freeze: unknown option", select(2, pcall(dle.freeze, nn.Linear(2, 2), dle.randn(1, 2), {foo = 1})))
    assert.matches("cannot be captured",
      select(2, pcall(dle.freeze, function(x) return x * x:sum():item() end, dle.randn(2))))
  end)
end)
