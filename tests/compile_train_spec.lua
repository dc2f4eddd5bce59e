-- compile_train_spec: dle.compile of whole training steps (forward, backward into .grad,
-- zero_grad, clip_grad_norm_, optimizer step: dle.graph.train) against the same steps run eagerly
-- from the same initial state: MLP, small CNN (BatchNorm, train/eval) and a tiny char-GPT, with
-- SGD (momentum), Adam and AdamW, a scheduler changing lr between steps, gradient accumulation,
-- and the fallbacks to eager.
local dle = require("dle")
local H = require("helpers")
local nn = dle.nn

local GPT = dofile("examples/char_gpt/model.lua")

-- Each model: make() -> module, batches(n) -> list of {x, y}, loss(module, x, y).
local models = {
  mlp = {
    make = function() return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5)) end,
    batch = function() return dle.randn(8, 12), dle.randint(1, 6, {8}, {dtype = "int64"}) end,
    loss = function(m, x, y) return nn.functional.cross_entropy(m(x), y) end,
  },
  cnn = {
    make = function()
      return nn.Sequential(nn.Conv2d(1, 4, 3, {padding = 1}), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(4 * 4 * 4, 5))
    end,
    batch = function() return dle.randn(4, 1, 8, 8), dle.randint(1, 6, {4}, {dtype = "int64"}) end,
    loss = function(m, x, y) return nn.functional.cross_entropy(m(x), y) end,
  },
  gpt = {
    make = function() return GPT({vocab = 11, context = 8, d = 16, heads = 2, layers = 1}) end,
    batch = function()
      return dle.randint(1, 12, {2, 8}, {dtype = "int64"}), dle.randint(1, 12, {16}, {dtype = "int64"})
    end,
    loss = function(m, x, y) return nn.functional.cross_entropy(m(x):view(16, 11), y) end,
  },
}

local optimizers = {
  SGD = {lr = 0.05, momentum = 0.9},
  Adam = {lr = 1e-2},
  AdamW = {lr = 1e-2, weight_decay = 0.1},
}

-- A model, its optimizer and a step-decay scheduler, from seed 7 (so two calls give equal ones).
local function setup(kind, optname)
  dle.manual_seed(7)
  local m = models[kind].make()
  local opt = dle.optim[optname](m:parameters(), optimizers[optname])
  return m, opt, dle.optim.lr.step(opt, {step_size = 1, gamma = 0.7})
end

local function batches(kind, n)
  dle.manual_seed(11)
  local list = {}
  for i = 1, n do list[i] = {models[kind].batch()} end
  return list
end

local function max_param_diff(m1, m2)
  local d = 0
  local p2 = m2:parameters()
  for i, p in ipairs(m1:parameters()) do d = math.max(d, H.max_diff(p, p2[i])) end
  return d
end

-- The same MLP and optimizer twice over n batches: data, loss, then the eager model, optimizer and
-- function make(m, opt, loss), then the same compiled.
local function mlp_pair(optname, n, make)
  local data, loss = batches("mlp", n), models.mlp.loss
  local m1, o1 = setup("mlp", optname)
  local m2, o2 = setup("mlp", optname)
  return data, loss, m1, o1, make(m1, o1, loss), m2, o2, dle.compile(make(m2, o2, loss))
end

-- The step functions compared: fn(m, opt, loss) -> function(x, y) ... end
local function plain_step(clip, zero_fill)
  return function(m, opt, loss)
    return function(x, y)
      if zero_fill then m:zero_grad({set_to_none = false}) else opt:zero_grad() end
      local l = loss(m, x, y)
      l:backward()
      if clip then nn.utils.clip_grad_norm_(m:parameters(), clip) end
      opt:step()
      return l
    end
  end
end

-- One MLP batch, a model, its optimizer and its step compiled.
local function compiled_mlp(optname)
  local m, opt = setup("mlp", optname)
  return batches("mlp", 1), m, opt, dle.compile(plain_step()(m, opt, models.mlp.loss))
end

-- The same ops in the same order give the same bits: the differences asserted are 0.
-- Runs n steps of make_step eagerly and compiled from the same state; mode(i) -> "train"/"eval"
-- for step i. Returns the largest loss and parameter differences and the compiled function.
local function differential(kind, optname, make_step, n, mode)
  local data = batches(kind, n)
  local loss = models[kind].loss
  local m1, o1, s1 = setup(kind, optname)
  local m2, o2, s2 = setup(kind, optname)
  local eager = make_step(m1, o1, loss)
  local compiled = dle.compile(make_step(m2, o2, loss))
  local dl = 0
  for i = 1, n do
    local md = mode and mode(i) or "train"
    m1:train(md == "train"); m2:train(md == "train")
    local le = eager(data[i][1], data[i][2])
    local lc = compiled(data[i][1], data[i][2])
    dl = math.max(dl, math.abs(le:item() - lc:item()))
    s1:step(); s2:step()
  end
  return dl, max_param_diff(m1, m2), compiled
end

describe("dle.compile of a training step", function()
  for _, kind in ipairs {"mlp", "cnn", "gpt"} do
    for optname in pairs(optimizers) do
      it(string.format("replays %s steps with %s and a changing lr as eager runs them", kind, optname), function()
        local dl, dp, c = differential(kind, optname, plain_step(), 5)
        assert.is_true(dl == 0, "loss differs by " .. dl)
        assert.is_true(dp == 0, "params differ by " .. dp)
        -- the GPT fills its cache of positions on its first call, so it traces twice
        local traces = kind == "gpt" and 2 or 1
        H.assert_compile_info(c, {traces = traces, replays = 5 - traces, eager = 0})
      end)
    end
  end

  it("captures clip_grad_norm_ (the char-GPT step) and clips as eager does", function()
    -- max_norm small enough that every step clips
    local dl, dp, c = differential("gpt", "AdamW", plain_step(0.05), 4)
    assert.is_true(dl == 0, "loss differs by " .. dl)
    assert.is_true(dp == 0, "params differ by " .. dp)
    assert.are.equal(2, dle.compile_info(c).replays)
  end)

  it("records a packed attention's gradient as one node (no stack of dq, dk, dv)", function()
    local data = batches("gpt", 1)
    local m, opt = setup("gpt", "Adam")
    local g = dle.graph.trace(plain_step()(m, opt, models.gpt.loss), data[1][1], data[1][2])
    local ops = {}
    for _, n in ipairs(g:nodes()) do ops[n.op] = (ops[n.op] or 0) + 1 end
    assert.are.equal(1, ops.sdpa_qkv_backward)
    assert.is_nil(ops.cat)
  end)

  it("zeroes gradients in place (module:zero_grad{set_to_none = false}) as eager does", function()
    local dl, dp, c = differential("mlp", "SGD", plain_step(nil, true), 4)
    assert.is_true(dl == 0, "loss differs by " .. dl)
    assert.is_true(dp == 0, "params differ by " .. dp)
    assert.are.equal(3, dle.compile_info(c).replays)
  end)

  it("retraces when a module switches between train and eval, and matches eager in both", function()
    local mode = function(i) return (i == 3 or i == 4) and "eval" or "train" end
    local dl, dp, c = differential("cnn", "SGD", plain_step(), 6, mode)
    assert.is_true(dl == 0, "loss differs by " .. dl)
    assert.is_true(dp == 0, "params differ by " .. dp)
    H.assert_compile_info(c, {traces = 2, replays = 4})
  end)

  it("accumulates gradients over two micro-steps inside one compiled step", function()
    local function two_micro(m, opt, loss)
      return function(x, y)
        opt:zero_grad()
        local n = x:size(1) // 2
        local l1 = loss(m, x:narrow(1, 1, n), y:narrow(1, 1, n)) * 0.5
        l1:backward()
        local l2 = loss(m, x:narrow(1, n + 1, n), y:narrow(1, n + 1, n)) * 0.5
        l2:backward()
        opt:step()
        return l1:detach() + l2:detach()
      end
    end
    local dl, dp, c = differential("mlp", "Adam", two_micro, 4)
    assert.is_true(dl == 0, "loss differs by " .. dl)
    assert.is_true(dp == 0, "params differ by " .. dp)
    assert.are.equal(3, dle.compile_info(c).replays)
  end)

  it("accumulates into .grad across calls of a compiled micro-step (set, then add)", function()
    local micro = function(m, _, loss) return function(x, y) local l = loss(m, x, y); l:backward(); return l end end
    local data, _, m1, o1, e, m2, o2, c = mlp_pair("SGD", 6, micro)
    for i = 1, 6, 2 do
      o1:zero_grad(); o2:zero_grad()
      e(data[i][1], data[i][2]); e(data[i + 1][1], data[i + 1][2])
      c(data[i][1], data[i][2]); c(data[i + 1][1], data[i + 1][2])
      local p2 = m2:parameters()
      for k, p in ipairs(m1:parameters()) do assert.is_true(H.max_diff(p.grad, p2[k].grad) == 0) end
      o1:step(); o2:step()
    end
    assert.is_true(max_param_diff(m1, m2) == 0)
    assert.are.equal(5, dle.compile_info(c).replays)
  end)

  it("reads .grad set outside the compiled function at replay, not the traced tensor", function()
    local function clip_and_step(m, opt)
      return function() nn.utils.clip_grad_norm_(m:parameters(), 0.01); opt:step() end
    end
    local data, loss, m1, o1, e, m2, o2, c = mlp_pair("Adam", 3, clip_and_step)
    for i = 1, 3 do
      o1:zero_grad(); o2:zero_grad()
      loss(m1, data[i][1], data[i][2]):backward()
      loss(m2, data[i][1], data[i][2]):backward()
      e(); c()
      assert.is_true(max_param_diff(m1, m2) == 0)
    end
    assert.are.equal(2, dle.compile_info(c).replays)
  end)

  it("uses the lr the optimizer holds at replay, not the traced one", function()
    local data, m, opt, step = compiled_mlp("SGD")
    step(data[1][1], data[1][2])
    opt.lr = 0
    local before = m:parameters()[1]:clone()
    step(data[1][1], data[1][2])
    -- momentum 0.9 carries the first step's velocity, so lr 0 must leave the weights alone
    assert.is_true(H.max_diff(before, m:parameters()[1]) == 0)
    opt.lr = 0.5
    step(data[1][1], data[1][2])
    assert.is_true(H.max_diff(before, m:parameters()[1]) > 0)
    assert.are.equal(2, dle.compile_info(step).replays)
  end)

  it("replays without recording autograd history (the loss it returns is detached)", function()
    local data, _, _, step = compiled_mlp("Adam")
    local l1 = step(data[1][1], data[1][2])
    assert.is_true(l1.requires_grad)
    local l2 = step(data[1][1], data[1][2])
    assert.is_false(l2.requires_grad)
    assert.is_true(dle.is_grad_enabled())
  end)

  -- stderr while fn runs, through compile's debug messages
  local function stderr_of(fn)
    local lines, saved = {}, io.stderr
    io.stderr = {write = function(_, ...) for _, s in ipairs {...} do lines[#lines + 1] = s end end}
    local ok, err = pcall(fn)
    io.stderr = saved
    assert(ok, err)
    return table.concat(lines)
  end

  it("runs an optimizer without a fused step (Adamax, LBFGS) eagerly, with a debug message", function()
    local data = batches("mlp", 3)
    for _, case in ipairs {{"Adamax", "an optimizer without a fused step"}, {"LBFGS", "item"}} do
      dle.manual_seed(7)
      local m = models.mlp.make()
      local opt = dle.optim[case[1]](m:parameters(), {lr = 0.01})
      local loss = models.mlp.loss
      local fn = function(x, y)
        local function closure()
          opt:zero_grad()
          local l = loss(m, x, y)
          l:backward()
          return l
        end
        if case[1] == "LBFGS" then return opt:step(closure) end
        local l = closure()
        opt:step()
        return l
      end
      local step = dle.compile(fn, {debug = true})
      local err = stderr_of(function()
        for i = 1, 3 do step(data[i][1], data[i][2]) end
      end)
      assert.is_truthy(err:find("running eagerly", 1, true), err)
      assert.is_truthy(err:find(case[2], 1, true), err)
      H.assert_compile_info(step, {replays = 0, eager = 2})
    end
  end)

  it("runs a step eagerly while a backward hook is registered (a replay would not call it)", function()
    local data = batches("mlp", 3)
    local m, opt = setup("mlp", "SGD")
    local calls = 0
    local h = dle.autograd.register_backward_hook(function() calls = calls + 1 end)
    local ok, err = pcall(function()
      local step = dle.compile(plain_step()(m, opt, models.mlp.loss))
      for i = 1, 3 do step(data[i][1], data[i][2]) end
      assert.are.equal(0, dle.compile_info(step).replays)
    end)
    h:remove()
    assert(ok, err)
    assert.are.equal(3, calls)
  end)

  it("runs a step through dropout in train mode eagerly (its gradient's mask is drawn per call)", function()
    local data = batches("mlp", 3)
    local function run(compiled)
      dle.manual_seed(7)
      local m = nn.Sequential(nn.Linear(12, 16), nn.Dropout(0.5), nn.Linear(16, 5))
      local opt = dle.optim.SGD(m:parameters(), {lr = 0.1})
      local step = plain_step()(m, opt, models.mlp.loss)
      if compiled then step = dle.compile(step) end
      dle.manual_seed(3)
      for i = 1, 3 do step(data[i][1], data[i][2]) end
      return m, step
    end
    local m1 = run(false)
    local m2, step = run(true)
    assert.are.equal(0, max_param_diff(m1, m2))
    assert.are.equal(0, dle.compile_info(step).replays)
  end)

  it("records backward, zero_grad and the optimizer step as graph nodes", function()
    local data = batches("mlp", 1)
    local m, opt = setup("mlp", "AdamW")
    local g = dle.graph.trace(plain_step(1.0)(m, opt, models.mlp.loss), data[1][1], data[1][2])
    assert.is_nil(g.unsafe)
    local count = {}
    for _, n in ipairs(g:nodes()) do count[n.op] = (count[n.op] or 0) + 1 end
    assert.are.equal(1, count.zero_grad)
    assert.are.equal(4, count.grad_acc)     -- one per parameter
    assert.are.equal(1, count.optim_step)
    assert.is_truthy(g:dump():find("optim_step%(.-%) {optimizer=AdamW}"))
    -- a training graph is not differentiated again nor saved (its nodes are Lua state)
    H.assert_error(function() g:backward_graph() end, "holds its own backward pass")
    H.assert_error(function() dle.graph.save(os.tmpname(), g) end, "zero_grad is not an op")
  end)

  it("raises an error naming the node when a .grad read when traced is nil at replay", function()
    local m = nn.Linear(3, 2)
    local f = dle.compile(function() return m.weight.grad * 2 end)
    m(dle.randn(4, 3)):sum():backward()
    f(); f()
    m:zero_grad()
    H.assert_error(f, "(grad_of)", "read when traced but is nil now")
  end)
end)
