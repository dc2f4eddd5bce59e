-- dle.checkpoint (activation checkpointing: fn's activations recomputed in the backward instead
-- of stored) and dle.backward (several outputs in one pass), which it uses.
local dle = require("dle")
local nn = dle.nn
local H = require("helpers")

-- live native bytes once garbage is collected
local function live()
  collectgarbage()
  collectgarbage()
  return dle.memory_stats().allocated
end

describe("dle.backward", function()
  it("sums the gradients of several outputs into the leaves' .grad in one pass", function()
    local a = dle.tensor({1, 2, 3}, {dtype = "float64"}):requires_grad_()
    dle.backward({a * 2, (a * a):sum()}, {dle.ones(3, {dtype = "float64"}), dle.tensor(1, {dtype = "float64"})})
    assert.are.same({4, 6, 8}, a.grad:totable())   -- 2 + 2a
  end)

  it("implies ones for one-element outputs and takes a single tensor", function()
    local a = dle.tensor({3}, {dtype = "float64"}):requires_grad_()
    dle.backward(a * a)
    assert.are.same({6}, a.grad:totable())
  end)

  it("refuses an empty list, mismatched grad_outputs and non-tensors", function()
    local a = dle.ones(2):requires_grad_()
    H.assert_error(function() dle.backward({}) end, "backward", "empty")
    H.assert_error(function() dle.backward({a * 2, a * 3}, {dle.ones(2)}) end, "backward",
                   "1 grad_outputs for 2 outputs")
    H.assert_error(function() dle.backward({a * 2, 5}) end, "backward", "outputs[2] is not a tensor")
  end)
end)

describe("dle.checkpoint", function()
  -- a block with parameters, a nonlinearity and dropout (random numbers to replay)
  local function make_block(d, hidden)
    local l1, l2 = nn.Linear(d, hidden), nn.Linear(hidden, d)
    local function block(x) return l2(nn.functional.dropout(l1(x):tanh(), 0.25, true)) + x end
    return block, {l1.weight, l1.bias, l2.weight, l2.bias}
  end

  local function grads_of(params)
    local out = {}
    for i, p in ipairs(params) do out[i] = p.grad:clone(); p.grad = nil end
    return out
  end

  it("gives the same results and the same gradients (parameters and input) as running fn plainly", function()
    dle.manual_seed(0)
    local block, params = make_block(6, 16)
    local x0 = dle.randn(5, 6)
    local function run(wrap)
      local x = x0:clone():requires_grad_()
      dle.manual_seed(42)   -- dropout's mask: replayed by the recomputation
      local y = wrap(block, x)
      local after = dle.rand(1):item()   -- the generator continues where the forward left it
      ;(y * y):sum():backward()
      return y:detach(), grads_of(params), x.grad, after
    end
    local y, g, gx, r = run(function(f, x) return f(x) end)
    local yc, gc, gxc, rc = run(dle.checkpoint)
    assert.is_true(yc:equal(y))
    for i = 1, #g do assert.is_true(gc[i]:equal(g[i]), "parameter " .. i) end
    assert.is_true(gxc:equal(gx))
    assert.are.equal(r, rc)
  end)

  it("reaches parameters even when no argument requires grad (the input is data)", function()
    local block, params = make_block(4, 8)
    local x = dle.randn(3, 4)
    local y = dle.checkpoint(block, x)
    assert.is_true(y.requires_grad)
    y:sum():backward()
    for i, p in ipairs(params) do assert.truthy(p.grad, "parameter " .. i .. " has a gradient") end
    assert.is_nil(x.grad)
  end)

  it("keeps only its arguments for the backward, not fn's activations", function()
    local n, d = 256, 512
    local w1 = (dle.randn(d, d) * 0.05):requires_grad_()
    local w2 = (dle.randn(d, d) * 0.05):requires_grad_()
    local function block(x) return x:matmul(w1):tanh():matmul(w2):tanh() end
    local x = dle.randn(n, d):requires_grad_()
    local base = live()
    local y = block(x) -- luacheck: ignore 311 (held while live() measures it)
    local plain = live() - base          -- y plus the activations saved for the backward
    y = nil -- luacheck: ignore 311 (dropped for the collection)
    collectgarbage()
    base = live()
    y = dle.checkpoint(block, x)
    local checkpointed = live() - base   -- y alone
    local act = n * d * 4
    assert.is_true(checkpointed <= act + act // 2, "checkpointed forward keeps " .. checkpointed .. " bytes")
    -- plainly: y and the first tanh's output, which the second matmul and the tanh backward need
    assert.is_true(plain >= 2 * act, "plain forward keeps " .. plain .. " bytes")
    y:sum():backward()
    assert.are.same({d, d}, w1.grad:shape())
  end)

  it("nests, passes non-tensor arguments and results through, and returns two tensors", function()
    local w = dle.randn(3, 3, {dtype = "float64"}):requires_grad_()
    local function inner(x) return (x:matmul(w)):sin() end
    local function outer(x, scale, tag)
      local h = dle.checkpoint(inner, x) * scale
      return h, h:cos(), tag .. "!"
    end
    local x = dle.randn(2, 3, {dtype = "float64"}):requires_grad_()
    local a, b, tag = dle.checkpoint(outer, x, 2, "ok")
    assert.are.equal("ok!", tag)
    ;(a:sum() + b:sum()):backward()
    local gw, gx = w.grad:clone(), x.grad:clone()
    w.grad, x.grad = nil, nil
    local a2, b2 = outer(x, 2, "ok")
    ;(a2:sum() + b2:sum()):backward()
    assert.is_true(gw:allclose(w.grad, 1e-12, 1e-12))
    assert.is_true(gx:allclose(x.grad, 1e-12, 1e-12))
  end)

  it("takes a module as fn, in the forward and in the recomputation", function()
    dle.manual_seed(3)
    local lin = nn.Linear(3, 2)
    local x = dle.randn(4, 3)
    dle.checkpoint(lin, x):sum():backward()
    local g = lin.weight.grad:clone()
    lin.weight.grad = nil
    lin(x):sum():backward()
    assert.is_true(g:allclose(lin.weight.grad, 0, 0))
  end)

  it("only runs fn when grad mode is off", function()
    local w = dle.randn(2, 2):requires_grad_()
    local y = dle.no_grad(function() return dle.checkpoint(function(x) return x:matmul(w) end, dle.ones(1, 2)) end)
    assert.is_false(y.requires_grad)
  end)

  it("refuses dle.grad, create_graph, a modified argument and a non-function", function()
    local w = dle.randn(2, 2, {dtype = "float64"}):requires_grad_()
    local function f(x) return x:matmul(w):exp() end
    local x = dle.randn(2, 2, {dtype = "float64"}):requires_grad_()
    H.assert_error(function() dle.grad(dle.checkpoint(f, x):sum(), {x}) end, "checkpoint", "dle.grad")
    H.assert_error(function() dle.checkpoint(f, x):sum():backward({create_graph = true}) end, "checkpoint",
                   "create_graph")
    local x2 = dle.randn(2, 2, {dtype = "float64"}):requires_grad_()
    local arg = x2 * 1
    local y = dle.checkpoint(f, arg)
    dle.no_grad(function() arg:add_(1) end)
    H.assert_error(function() y:sum():backward() end, "checkpoint", "modified by an in-place operation")
    H.assert_error(function() dle.checkpoint(42, x) end, "checkpoint: fn must be a function")
  end)
end)
