-- optim_spec.lua — dle.optim: fused steps vs hand-computed updates (float64), errors, state
-- round trips, lr, schedulers, and convergence on the 2-D Rosenbrock function.
local dle = require("dle")
local H = require("helpers")
local core = dle.core
local optim = dle.optim

local function vec(t) return t:totable() end

local function assert_close(got, want, tol, what)
  assert.are.equal(#want, #got, what)
  for i = 1, #want do
    local err = math.abs(got[i] - want[i])
    if not (err <= tol * math.max(1, math.abs(want[i]))) then -- luacheck: ignore 581 (NaN fails)
      error(string.format("%s: element %d is %.17g, expected %.17g (tol %g)", what or "value", i,
        got[i], want[i], tol), 2)
    end
  end
end

local P0 = {0.5, -1.25, 2.0}
-- gradients fed at steps 1, 2, 3 (fixed, so the references need no autograd)
local GRADS = {{0.1, -0.4, 0.8}, {-0.3, 0.2, 0.5}, {0.6, 0.05, -0.7}}

local function param(dtype)
  return dle.tensor(P0, {dtype = dtype or "float64", requires_grad = true})
end

-- Runs `steps` optimizer steps on a fresh param with GRADS; returns the param.
local function run(cls, opts, steps, dtype)
  local p = param(dtype)
  local opt = cls({p}, opts)
  for s = 1, steps do
    p.grad = dle.tensor(GRADS[s], {dtype = dtype or "float64"})
    opt:step()
  end
  return p, opt
end

-- Reference updates, element by element in float64 (PyTorch's formulas).
local function ref(steps, init, update)
  local p, st = {}, {}
  for i = 1, #P0 do p[i], st[i] = P0[i], init() end
  for s = 1, steps do
    for i = 1, #P0 do p[i] = update(p[i], GRADS[s][i], st[i], s) end
  end
  return p
end

local function sgd_ref(steps, o)
  local mom, damp, wd = o.momentum or 0, o.dampening or 0, o.weight_decay or 0
  return ref(steps, function() return {} end, function(p, g, st, s)
    g = g + wd * p
    if mom ~= 0 then
      st.buf = s == 1 and g or mom * st.buf + (1 - damp) * g
      g = o.nesterov and g + mom * st.buf or st.buf
    end
    return p - o.lr * g
  end)
end

local function adagrad_ref(steps, o)
  local wd, decay, eps = o.weight_decay or 0, o.lr_decay or 0, o.eps or 1e-10
  return ref(steps, function() return {sum = o.initial_accumulator_value or 0} end,
    function(p, g, st, s)
      g = g + wd * p
      st.sum = st.sum + g * g
      return p - o.lr / (1 + (s - 1) * decay) * g / (math.sqrt(st.sum) + eps)
    end)
end

local function rmsprop_ref(steps, o)
  local a, eps, wd, mom = o.alpha or 0.99, o.eps or 1e-8, o.weight_decay or 0, o.momentum or 0
  return ref(steps, function() return {sq = 0, ga = 0, buf = 0} end, function(p, g, st)
    g = g + wd * p
    st.sq = a * st.sq + (1 - a) * g * g
    local avg
    if o.centered then
      st.ga = a * st.ga + (1 - a) * g
      avg = math.sqrt(st.sq - st.ga * st.ga) + eps
    else
      avg = math.sqrt(st.sq) + eps
    end
    if mom > 0 then
      st.buf = mom * st.buf + g / avg
      return p - o.lr * st.buf
    end
    return p - o.lr * g / avg
  end)
end

local function adam_ref(steps, o, decoupled)
  local b1, b2 = 0.9, 0.999
  if o.betas then b1, b2 = o.betas[1], o.betas[2] end
  local eps, wd = o.eps or 1e-8, o.weight_decay or (decoupled and 1e-2 or 0)
  return ref(steps, function() return {m = 0, v = 0, vmax = 0} end, function(p, g, st, s)
    if decoupled then p = p * (1 - o.lr * wd) else g = g + wd * p end
    st.m = b1 * st.m + (1 - b1) * g
    st.v = b2 * st.v + (1 - b2) * g * g
    local v = st.v
    if o.amsgrad then
      st.vmax = math.max(st.vmax, st.v)
      v = st.vmax
    end
    local denom = math.sqrt(v) / math.sqrt(1 - b2 ^ s) + eps
    return p - o.lr / (1 - b1 ^ s) * st.m / denom
  end)
end

local TOL = 1e-13

describe("dle.optim steps match hand-computed float64 updates", function()
  it("SGD without momentum is p - lr * g for 3 steps", function()
    local o = {lr = 0.1}
    assert_close(vec(run(optim.SGD, o, 3)), sgd_ref(3, o), TOL, "SGD")
    assert_close(vec(run(optim.SGD, o, 1)), {0.5 - 0.01, -1.25 + 0.04, 2.0 - 0.08}, TOL, "SGD 1")
  end)
  it("SGD with momentum, dampening and weight decay matches for 3 steps", function()
    local o = {lr = 0.05, momentum = 0.9, weight_decay = 0.1, dampening = 0.2}
    assert_close(vec(run(optim.SGD, o, 3)), sgd_ref(3, o), TOL, "SGD momentum")
  end)
  it("SGD with Nesterov momentum matches for 3 steps", function()
    local o = {lr = 0.05, momentum = 0.8, nesterov = true, weight_decay = 0.01}
    assert_close(vec(run(optim.SGD, o, 3)), sgd_ref(3, o), TOL, "SGD nesterov")
  end)
  it("Adagrad matches for 3 steps, plain and with weight decay, lr_decay, initial value", function()
    local o = {lr = 0.1}
    assert_close(vec(run(optim.Adagrad, o, 3)), adagrad_ref(3, o), TOL, "Adagrad")
    o = {lr = 0.1, weight_decay = 0.2, lr_decay = 0.5, initial_accumulator_value = 0.3}
    assert_close(vec(run(optim.Adagrad, o, 3)), adagrad_ref(3, o), TOL, "Adagrad wd")
  end)
  it("RMSprop matches for 3 steps, plain and with momentum, centered and weight decay", function()
    local o = {lr = 0.01}
    assert_close(vec(run(optim.RMSprop, o, 3)), rmsprop_ref(3, o), TOL, "RMSprop")
    o = {lr = 0.01, alpha = 0.9, momentum = 0.7, centered = true, weight_decay = 0.1}
    assert_close(vec(run(optim.RMSprop, o, 3)), rmsprop_ref(3, o), TOL, "RMSprop centered")
  end)
  it("Adam matches for 3 steps, plain, with weight decay and betas, and with amsgrad", function()
    local o = {lr = 0.01}
    assert_close(vec(run(optim.Adam, o, 3)), adam_ref(3, o), TOL, "Adam")
    o = {lr = 0.01, betas = {0.8, 0.99}, eps = 1e-6, weight_decay = 0.1}
    assert_close(vec(run(optim.Adam, o, 3)), adam_ref(3, o), TOL, "Adam wd")
    o = {lr = 0.01, amsgrad = true}
    assert_close(vec(run(optim.Adam, o, 3)), adam_ref(3, o), TOL, "Adam amsgrad")
  end)
  it("Adam's first step moves each element by about lr (bias correction)", function()
    local p = run(optim.Adam, {lr = 0.01}, 1)
    assert_close(vec(p), {0.49, -1.24, 1.99}, 1e-8, "Adam first step")
  end)
  it("AdamW matches for 3 steps, with its default weight decay 1e-2 and a custom one", function()
    local o = {lr = 0.01}
    assert_close(vec(run(optim.AdamW, o, 3)), adam_ref(3, o, true), TOL, "AdamW")
    o = {lr = 0.01, weight_decay = 0.5, amsgrad = true}
    assert_close(vec(run(optim.AdamW, o, 3)), adam_ref(3, o, true), TOL, "AdamW amsgrad")
  end)
  it("AdamW and Adam without decay differ exactly by the decoupled decay -lr*wd*p", function()
    local lr, wd = 0.01, 0.3
    local pa = vec(run(optim.Adam, {lr = lr}, 1))
    local pw = vec(run(optim.AdamW, {lr = lr, weight_decay = wd}, 1))
    for i = 1, 3 do assert.is_true(math.abs((pw[i] - pa[i]) - (-lr * wd * P0[i])) < 1e-15) end
    -- with the same decay, Adam (L2 in the gradient) does not give AdamW's result
    local pl2 = vec(run(optim.Adam, {lr = lr, weight_decay = wd}, 1))
    assert.is_true(math.abs(pl2[1] - pw[1]) > 1e-6)
  end)
  it("float32 params follow the float64 reference to float32 precision", function()
    local o = {lr = 0.01, weight_decay = 0.1}
    assert_close(vec(run(optim.Adam, o, 3, "float32")), adam_ref(3, o), 1e-6, "Adam f32")
    local s = {lr = 0.05, momentum = 0.9}
    assert_close(vec(run(optim.SGD, s, 3, "float32")), sgd_ref(3, s), 1e-6, "SGD f32")
  end)
  it("float16 and bfloat16 params step with float32 state", function()
    local o = {lr = 0.01}
    for _, dt in ipairs {"float16", "bfloat16"} do
      local p, opt = run(optim.Adam, o, 3, dt)
      assert.are.equal(dt, p:dtype())
      assert.are.equal("float32", opt.state[1].exp_avg:dtype())
      assert_close(vec(p:double()), adam_ref(3, o), 1e-2, "Adam " .. dt)
    end
  end)
  it("the C step works on large tensors (threaded chunks) like on small ones", function()
    local n = 300007 -- above the light-op grain (kernels/cpu/cpu_loop.h), so chunks are threaded
    local p = dle.full({n}, 2.0, {dtype = "float64"})
    local g = dle.full({n}, 0.5, {dtype = "float64"})
    local m, v = dle.zeros({n}, {dtype = "float64"}), dle.zeros({n}, {dtype = "float64"})
    core._adam_step(p, g, m, v, {lr = 0.1, step = 1})
    -- m = 0.05, v = 0.00025, step size lr / (1 - 0.9) = 1, denominator 0.5 + eps
    local want = 2.0 - 0.05 / (math.sqrt(0.00025) / math.sqrt(1 - 0.999) + 1e-8)
    assert.is_true(math.abs(p:sum():item() - want * n) < 1e-9 * n)
    for _, i in ipairs {1, 16384, 16385, 50000, n} do assert.is_true(math.abs(p[i] - want) < 1e-15) end
    assert.is_true(math.abs(m[n] - 0.05) < 1e-15 and math.abs(v[n] - 0.00025) < 1e-18)
  end)
  it("Adam and AdamW give the same bits at 1 and 2 threads, below and above the threading grain", function()
    H.keep_threads(finally)
    for _, n in ipairs {32771, 300007} do -- the MLP example's layer sizes are in between
      for _, cls in ipairs {optim.Adam, optim.AdamW} do
        local results = {}
        for t = 1, 2 do
          dle.set_num_threads(t)
          dle.manual_seed(7)
          local p = dle.randn(n):requires_grad_(true)
          local opt = cls({p}, {lr = 1e-2, weight_decay = 0.01, amsgrad = true})
          for _ = 1, 3 do
            p.grad = dle.randn(n)
            opt:step()
          end
          results[t] = p
        end
        assert.is_true(results[1]:equal(results[2]), string.format("n = %d", n))
      end
    end
  end)
  it("the C steps bump the storage versions of param and state", function()
    local p, g = dle.ones({3}, {dtype = "float64"}), dle.ones({3}, {dtype = "float64"})
    local m, v = dle.zeros({3}, {dtype = "float64"}), dle.zeros({3}, {dtype = "float64"})
    local pv, mv = p:_version(), m:_version()
    core._adam_step(p, g, m, v, {lr = 0.1, step = 1})
    assert.is_true(p:_version() > pv)
    assert.is_true(m:_version() > mv)
  end)
end)

describe("dle.optim errors", function()
  local function f64(...) return dle.zeros({...}, {dtype = "float64"}) end
  it("a non-contiguous param or grad is refused", function()
    local p, g, m, v = f64(2, 3):t(), f64(3, 2), f64(3, 2), f64(3, 2)
    assert.has_error(function() core._adam_step(p, g, m, v, {lr = 0.1, step = 1}) end,
      "adam_step: param of shape {3,2} must be contiguous")
    assert.has_error(function() core._sgd_step(g, f64(2, 3):t(), {lr = 0.1}) end,
      "sgd_step: grad of shape {3,2} must be contiguous")
  end)
  it("mismatched shapes and dtypes are refused with both shapes/dtypes named", function()
    assert.has_error(function() core._adam_step(f64(3), f64(4), f64(3), f64(3), {lr = 1, step = 1}) end,
      "adam_step: grad has shape {4}, param has shape {3}")
    assert.has_error(function()
      core._adam_step(f64(3), f64(3), f64(2), f64(3), {lr = 1, step = 1})
    end, "adam_step: exp_avg has shape {2}, param has shape {3}")
    assert.has_error(function()
      core._adam_step(f64(3), f64(3), dle.zeros({3}), f64(3), {lr = 1, step = 1})
    end, "adam_step: exp_avg is float32, expected float64 for a float64 param")
    assert.has_error(function() core._sgd_step(f64(3), dle.zeros({3}), {lr = 1}) end,
      "sgd_step: grad is float32, param is float64 (they must match)")
    assert.has_error(function() core._adagrad_step(dle.zeros({3}, {dtype = "int64"}),
      dle.zeros({3}, {dtype = "int64"}), f64(3), {lr = 1, step = 1}) end,
      "adagrad_step: param must be float32, float64, float16 or bfloat16, got int64")
  end)
  it("aliasing, missing state and bad options are refused", function()
    local p = f64(3)
    assert.has_error(function() core._sgd_step(p, p, {lr = 1}) end,
      "sgd_step: param and grad share storage")
    assert.has_error(function() core._sgd_step(p, f64(3), {lr = 1, momentum = 0.9}) end,
      "sgd_step: momentum_buffer is missing")
    assert.has_error(function() core._rmsprop_step(p, f64(3), f64(3), {lr = 1, centered = true}) end,
      "rmsprop_step: grad_avg is missing")
    assert.has_error(function() core._adam_step(p, f64(3), f64(3), f64(3), {lr = 1}) end,
      "adam_step: option step is required")
    assert.has_error(function() core._adam_step(p, f64(3), f64(3), f64(3), {lr = 1, step = 1, lrr = 2}) end,
      "adam_step: unknown option 'lrr'")
  end)
  it("constructors check params and options", function()
    assert.has_error(function() optim.SGD({dle.zeros({3}, {dtype = "int64"})}, {lr = 1}) end)
    assert.has_error(function() optim.Adam({param()}, {lr = 1, beta = 2}) end)
    assert.has_error(function() optim.SGD({param()}, {lr = -1}) end)
    assert.has_error(function() optim.SGD({param()}, {lr = 1, nesterov = true}) end)
    assert.has_error(function() optim.Adam({param()}, {betas = {1.0, 0.9}}) end)
    assert.has_error(function() optim.Adam({}, {lr = 1}) end)
    local ok, msg = pcall(optim.Adam, {param()}, {lr = 1, beta = 2})
    assert.is_false(ok)
    assert.is_truthy(msg:find("Adam: unknown option 'beta'", 1, true))
  end)
  it("a gradient that requires grad is refused by step()", function()
    local p = param()
    local opt = optim.SGD({p}, {lr = 0.1})
    p.grad = dle.ones({3}, {dtype = "float64", requires_grad = true})
    assert.has_error(function() opt:step() end)
    assert.are.same(P0, vec(p))
  end)
end)

describe("dle.optim optimizer behaviour", function()
  it("step() skips params whose grad is nil and zero_grad() clears grads", function()
    local a, b = param(), param()
    local opt = optim.SGD({a, b}, {lr = 0.1})
    a.grad = dle.ones({3}, {dtype = "float64"})
    opt:step()
    assert_close(vec(a), {0.4, -1.35, 1.9}, TOL, "a")
    assert.are.same(P0, vec(b))
    assert.is_nil(opt.state[2])
    opt:zero_grad()
    assert.is_nil(a.grad)
  end)
  it("step() works after backward, under no_grad, and leaves the param a leaf", function()
    local p = param()
    local opt = optim.SGD({p}, {lr = 0.5})
    local loss = (p * p):sum()
    loss:backward()
    opt:step()
    assert_close(vec(p), {0, 0, 0}, TOL, "p after one step of p^2 with lr 0.5")
    assert.is_true(p.is_leaf and p.requires_grad)
  end)
  it("opt.lr is readable and writable, and writes apply to every group", function()
    local a, b = param(), param()
    local opt = optim.SGD({{params = {a}}, {params = {b}, lr = 0.2}}, {lr = 0.1})
    assert.are.equal(0.1, opt.lr)
    assert.are.equal(0.2, opt.param_groups[2].lr)
    a.grad, b.grad = dle.ones({3}, {dtype = "float64"}), dle.ones({3}, {dtype = "float64"})
    opt:step()
    assert_close(vec(b), {0.3, -1.45, 1.8}, TOL, "group lr")
    opt.lr = 0.01
    assert.are.equal(0.01, opt.lr)
    assert.are.equal(0.01, opt.param_groups[2].lr)
    opt:step()
    assert_close(vec(a), {0.39, -1.36, 1.89}, TOL, "a after lr change")
    assert.has_error(function() opt.lr = -1 end)
  end)
  it("state_dict/load_state_dict resume exactly, and the state dict is a copy", function()
    for _, c in ipairs {
      {optim.SGD, {lr = 0.05, momentum = 0.9, nesterov = true}},
      {optim.Adagrad, {lr = 0.1, lr_decay = 0.1}},
      {optim.RMSprop, {lr = 0.01, momentum = 0.5, centered = true}},
      {optim.Adam, {lr = 0.01, amsgrad = true}},
      {optim.AdamW, {lr = 0.01}},
    } do
      local cls, o = c[1], c[2]
      local pa = param()
      local a = cls({pa}, o)
      for s = 1, 2 do
        pa.grad = dle.tensor(GRADS[s], {dtype = "float64"})
        a:step()
      end
      local sd = a:state_dict()
      local pb = pa:detach():clone():requires_grad_()
      local b = cls({pb}, {lr = 123})   -- hyperparameters come from the state dict
      b:load_state_dict(sd)
      assert.are.equal(o.lr, b.lr)
      for _, opt in ipairs {a, b} do
        local p = opt.param_groups[1].params[1]
        p.grad = dle.tensor(GRADS[3], {dtype = "float64"})
        opt:step()
      end
      assert.are.same(vec(pa), vec(pb))
      assert.are.equal(2, sd.state[1].step)     -- the saved dict did not move on
      assert.are.equal(3, b.state[1].step)
    end
  end)
  it("a state_dict survives dle.save/dle.load and still resumes exactly", function()
    local pa = param()
    local a = optim.Adam({pa}, {lr = 0.01, betas = {0.8, 0.95}})
    pa.grad = dle.tensor(GRADS[1], {dtype = "float64"})
    a:step()
    local path = os.tmpname()
    dle.save(path, a:state_dict())
    local sd = dle.load(path)
    os.remove(path)
    local pb = pa:detach():clone():requires_grad_()
    local b = optim.Adam({pb})
    b:load_state_dict(sd)
    assert.are.same({0.8, 0.95}, b.param_groups[1].betas)
    for _, opt in ipairs {a, b} do
      opt.param_groups[1].params[1].grad = dle.tensor(GRADS[2], {dtype = "float64"})
      opt:step()
    end
    assert.are.same(vec(pa), vec(pb))
  end)
  it("load_state_dict refuses a state for a different number of params or shapes", function()
    local a = optim.Adam({param()}, {lr = 0.1})
    a.param_groups[1].params[1].grad = dle.ones({3}, {dtype = "float64"})
    a:step()
    local sd = a:state_dict()
    assert.has_error(function() optim.Adam({param(), param()}):load_state_dict(sd) end)
    local q = dle.zeros({4}, {dtype = "float64", requires_grad = true})
    assert.has_error(function() optim.Adam({q}):load_state_dict(sd) end)
  end)
  -- found by the API fuzzer: a number as a param group was indexed ("attempt to index a number")
  it("load_state_dict names itself when a param group is not a table", function()
    local ok, msg = pcall(function() optim.SGD({param()}, {lr = 0.1}):load_state_dict({state = {},
                                                                                       param_groups = {4}}) end)
    assert.is_false(ok)
    assert.is_truthy(msg:find("SGD: load_state_dict: param group 1 is a number", 1, true), msg)
  end)
end)

describe("dle.optim.lr schedulers", function()
  it("cosine warms up linearly from 0, then decays to min_lr at total", function()
    local opt = optim.SGD({param()}, {lr = 1.0})
    local s = optim.lr.cosine(opt, {warmup = 10, total = 110, min_lr = 0.1})
    assert.are.equal(0, opt.lr)
    assert.are.equal(0.5, s:get_lr(5))
    assert.are.equal(1.0, s:get_lr(10))
    assert.is_true(math.abs(s:get_lr(60) - 0.55) < 1e-15)
    assert.is_true(math.abs(s:get_lr(35) - (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4)))) < 1e-15)
    assert.are.equal(0.1, s:get_lr(110))
    assert.are.equal(0.1, s:get_lr(500))
    for _ = 1, 3 do s:step() end
    assert.is_true(math.abs(opt.lr - 0.3) < 1e-15)
    assert.are.equal(opt.lr, s:get_lr())
  end)
  it("step multiplies the lr by gamma every step_size steps", function()
    local opt = optim.Adam({param()}, {lr = 0.8})
    local s = optim.lr.step(opt, {step_size = 3, gamma = 0.5})
    local seen = {opt.lr}
    for _ = 1, 7 do seen[#seen + 1] = s:step() end
    assert.are.same({0.8, 0.8, 0.8, 0.4, 0.4, 0.4, 0.2, 0.2}, seen)
    assert.are.equal(0.2, opt.lr)
  end)
  it("schedulers scale each group's own base lr and resume from a state dict", function()
    local opt = optim.SGD({{params = {param()}, lr = 1}, {params = {param()}, lr = 2}})
    local s = optim.lr.step(opt, {step_size = 1, gamma = 0.5})
    s:step()
    assert.are.equal(0.5, opt.param_groups[1].lr)
    assert.are.equal(1.0, opt.param_groups[2].lr)
    local sd = s:state_dict()
    local opt2 = optim.SGD({param()}, {lr = 1})
    local s2 = optim.lr.step(opt2, {step_size = 1, gamma = 0.5})
    s2:load_state_dict({last_step = 3, base_lrs = {1}})
    assert.are.equal(0.125, opt2.lr)
    assert.are.equal(1, sd.last_step)
  end)
  it("bad scheduler options are errors", function()
    local opt = optim.SGD({param()}, {lr = 1})
    assert.has_error(function() optim.lr.cosine(opt, {warmup = 10, total = 5}) end)
    assert.has_error(function() optim.lr.step(opt, {gamma = 0.5}) end)
  end)
end)

describe("dle.optim converges on the Rosenbrock function from (-1.5, 2)", function()
  local function rosenbrock(cls, opts, steps)
    local p = dle.tensor({-1.5, 2.0}, {dtype = "float64", requires_grad = true})
    local opt = cls({p}, opts)
    for _ = 1, steps do
      opt:zero_grad()
      local x, y = p:select(1, 1), p:select(1, 2)
      local f = (1 - x) ^ 2 + 100 * (y - x * x) ^ 2
      f:backward()
      opt:step()
    end
    return p[1], p[2]
  end
  local cases = {
    {"SGD", {lr = 1e-3, momentum = 0.9}, 3000, 1e-2},
    {"SGD", {lr = 1e-3, momentum = 0.9, nesterov = true}, 3000, 1e-2},
    {"Adam", {lr = 0.02}, 3000, 1e-2},
    {"AdamW", {lr = 0.02, weight_decay = 1e-4}, 3000, 1e-2},
    {"Adagrad", {lr = 1.0}, 5000, 0.1},
    {"RMSprop", {lr = 3e-3}, 4000, 5e-2},
    {"RMSprop", {lr = 1e-3, momentum = 0.9}, 4000, 1e-2},
  }
  for _, c in ipairs(cases) do
    local keys = {}
    for k, v in pairs(c[2]) do keys[#keys + 1] = k .. "=" .. tostring(v) end
    table.sort(keys)
    it(string.format("%s {%s} reaches (1, 1) within %g in %d steps", c[1], table.concat(keys, ", "),
      c[4], c[3]), function()
      local x, y = rosenbrock(optim[c[1]], c[2], c[3])
      assert.is_true(math.abs(x - 1) < c[4] and math.abs(y - 1) < c[4],
        string.format("ended at (%g, %g)", x, y))
    end)
  end
end)
