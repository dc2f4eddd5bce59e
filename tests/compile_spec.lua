-- compile_spec: dle.compile against eager: results and gradients of an MLP training step, retrace
-- on new guards, the guard cache, eager fallback on item()-dependent control flow, options.
local dle = require("dle")
local H = require("helpers")
local nn = dle.nn

local max_diff = H.max_diff

describe("dle.compile", function()
  it("gives the same losses and gradients as eager over MLP training steps", function()
    dle.manual_seed(1)
    local net = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))
    local loss_of = function(x, y) return nn.functional.cross_entropy(net(x) * 1 + 0, y) end
    local step = dle.compile(loss_of)
    local opt = dle.optim.SGD(net:parameters(), {lr = 0.1})
    for _ = 1, 4 do
      local x, y = dle.randn(8, 6), dle.randint(1, 4, {8})
      opt:zero_grad()
      local l = step(x, y)
      l:backward()
      local grads = {}
      for i, p in ipairs(net:parameters()) do grads[i] = p.grad:clone() end
      opt:zero_grad()
      local le = loss_of(x, y)
      le:backward()
      assert.is_true(math.abs(l:item() - le:item()) < 1e-6)
      for i, p in ipairs(net:parameters()) do assert.is_true(max_diff(grads[i], p.grad) < 1e-6) end
      opt:step()
    end
    H.assert_compile_info(step, {traces = 1, replays = 3})
  end)

  it("retraces when input shapes or dtypes change and keeps several guards", function()
    local f = dle.compile(function(x) return (x * 2):relu():sum(1) end)
    local a = dle.randn(3, 4)
    H.assert_close(f(a), ((a * 2):relu():sum(1)):totable())
    f(dle.randn(3, 4))
    assert.equal(1, dle.compile_info(f).traces)
    local b = dle.randn(5, 4)
    H.assert_close(f(b), ((b * 2):relu():sum(1)):totable())
    assert.equal(2, dle.compile_info(f).traces)
    f(dle.randn(3, 4, {dtype = "float64"}))
    assert.equal(3, dle.compile_info(f).traces)
    f(dle.randn(5, 4)); f(dle.randn(3, 4))
    H.assert_compile_info(f, {traces = 3, guards = 3, replays = 3})
  end)

  it("evicts the least recently used guard beyond cache_size", function()
    local f = dle.compile(function(x) return x + 1 end, {cache_size = 2})
    f(dle.zeros(1)); f(dle.zeros(2)); f(dle.zeros(3))
    assert.equal(2, dle.compile_info(f).guards)
    f(dle.zeros(1))
    assert.equal(4, dle.compile_info(f).traces)
  end)

  it("bakes plain arguments into the guard", function()
    local f = dle.compile(function(x, s) return x * s end)
    H.assert_close(f(dle.ones(2), 2), {2, 2})
    H.assert_close(f(dle.ones(2), 3), {3, 3})
    assert.equal(2, dle.compile_info(f).traces)
  end)

  it("falls back to eager for item()-dependent control flow, and stays eager for that guard", function()
    local f = dle.compile(function(x) if x:sum():item() > 0 then return x * 2 end return x * 3 end)
    H.assert_close(f(dle.ones(2)), {2, 2})
    H.assert_close(f(-dle.ones(2)), {-3, -3})
    H.assert_close(f(dle.ones(2)), {2, 2})
    H.assert_compile_info(f, {traces = 1, eager = 2, replays = 0})
  end)

  it("falls back to eager for unsupported arguments, and replays optimizer steps inside fn", function()
    local f = dle.compile(function(t) return t[1] + 1 end)
    H.assert_close(f({dle.ones(2)}), {2, 2})
    assert.equal(1, dle.compile_info(f).eager)
    local p = dle.zeros(2, {requires_grad = true})
    local opt = dle.optim.SGD({p}, {lr = 1})
    local train = dle.compile(function(x)
      opt:zero_grad()
      local l = (p * x):sum()
      l:backward()
      opt:step()
      return l
    end)
    train(dle.ones(2)); train(dle.ones(2))
    H.assert_close(p, {-2, -2})
    assert.equal(1, dle.compile_info(train).replays)   -- a captured training step (compile_train_spec)
  end)

  it("retraces for a module's train/eval switch", function()
    local net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    local f = dle.compile(net)
    local x = dle.ones(3, 4)
    f(x)
    net:eval()
    local y = f(x)
    assert.equal(2, dle.compile_info(f).traces)
    assert.is_true(max_diff(y, net(x)) < 1e-6)
  end)

  it("applies the given rules, and none with rules = {}", function()
    local seen
    local r = dle.rewrite.rule{name = "see", pattern = dle.rewrite.pattern.exp(dle.rewrite.pattern.any "x"),
                               replace = function() seen = true; return nil end}
    local f = dle.compile(function(x) return x:exp() end, {rules = {r}})
    f(dle.ones(2))
    assert.is_true(seen)
    local g = dle.compile(function(x) return (x * 1):exp():exp() end, {rules = {}})
    H.assert_close(g(dle.zeros(1)), {math.exp(1)})
    H.assert_error(function() dle.compile(3) end, "compile")
    H.assert_error(function() dle.compile(function() end, {cache_size = 0}) end, "compile", "cache_size")
  end)
end)
