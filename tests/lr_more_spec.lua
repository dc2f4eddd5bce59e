-- lr_more_spec.lua — the schedulers of dle.optim.lr added for issue 17: lambda, multiplicative,
-- exponential, linear, cosine_warm_restarts, one_cycle (with momentum / beta1 cycling),
-- sequential and reduce_lr_on_plateau: lr sequences against their formulas, per-group values,
-- get_lr(t) and state_dict round trips, errors naming the scheduler, and optionally PyTorch's lr
-- (and momentum) sequences.
local dle = require("dle")
local H = require("helpers")

local lr = dle.optim.lr

local function sgd(lrs, extra)
  local groups = {}
  for i, v in ipairs(lrs) do groups[i] = {params = {dle.zeros(2):requires_grad_()}, lr = v} end
  return dle.optim.SGD(groups, extra or {momentum = 0.9})
end

-- What read(opt) returns (one or more values) over steps 0..n of sched: one list per value.
local function trace(opt, sched, n, read, metrics)
  local lists = {}
  local function add()
    for k, v in ipairs({read(opt)}) do
      lists[k] = lists[k] or {}
      lists[k][#lists[k] + 1] = v
    end
  end
  add()
  for i = 1, n do
    sched:step(metrics and metrics[i])
    add()
  end
  return table.unpack(lists)
end

-- The lrs of group g over steps 0..n.
local function sequence(opt, sched, n, g, metrics)
  return trace(opt, sched, n, function(o) return o.param_groups[g or 1].lr end, metrics)
end

local function formula(n, f)
  local out = {}
  for t = 0, n do out[t + 1] = f(t) end
  return out
end

local TOL = {rtol = 1e-14, atol = 1e-16}

describe("closed-form schedulers", function()
  it("lambda: base * lr_lambda(t), one function per group when given a list", function()
    local opt = sgd({0.1, 1})
    local s = lr.lambda(opt, {lr_lambda = {function(t) return 1 / (t + 1) end, function(t) return 0.5 ^ t end}})
    local g1 = formula(6, function(t) return 0.1 / (t + 1) end)
    local g2 = formula(6, function(t) return 0.5 ^ t end)
    local got1, got2 = trace(opt, s, 6, function(o) return o.param_groups[1].lr, o.param_groups[2].lr end)
    H.assert_close(got1, g1, TOL)
    H.assert_close(got2, g2, TOL)
    H.assert_close(s:get_lr(3), 0.1 / 4, TOL)
  end)

  it("multiplicative: base * lr_lambda(1) * ... * lr_lambda(t), calling lr_lambda once per step", function()
    local opt = sgd({0.1})
    local calls = 0
    local s = lr.multiplicative(opt, {lr_lambda = function(t) calls = calls + 1; return 0.9 - 0.01 * t end})
    local want = formula(8, function(t)
      local v = 0.1
      for k = 1, t do v = v * (0.9 - 0.01 * k) end
      return v
    end)
    H.assert_close(sequence(opt, s, 8), want, TOL)
    assert.are.equal(8, calls)
  end)

  it("exponential: base * gamma ^ t", function()
    local opt = sgd({0.1})
    H.assert_close(sequence(opt, lr.exponential(opt, {gamma = 0.8}), 6),
      formula(6, function(t) return 0.1 * 0.8 ^ t end), TOL)
  end)

  it("linear: from start_factor to end_factor over total_iters, then constant (defaults 1/3, 1, 5)", function()
    local opt = sgd({0.1})
    H.assert_close(sequence(opt, lr.linear(opt, {start_factor = 0.25, end_factor = 0.75, total_iters = 4}), 7),
      formula(7, function(t) return 0.1 * (0.25 + 0.5 * math.min(t, 4) / 4) end), TOL)
    opt = sgd({0.3})
    H.assert_close(sequence(opt, lr.linear(opt), 7),
      formula(7, function(t) return 0.3 * (1 / 3 + 2 / 3 * math.min(t, 5) / 5) end), TOL)
  end)

  it("cosine_warm_restarts: cosine over periods T_0, T_0 * T_mult, ... restarting at base", function()
    local opt = sgd({0.1})
    local starts = {[0] = {0, 3}, {3, 6}, {9, 12}, {21, 24}}   -- period starts and lengths for T_0 = 3, T_mult = 2
    local want = formula(25, function(t)
      local k = 0
      while t >= starts[k][1] + starts[k][2] do k = k + 1 end
      return 0.01 + 0.09 * (1 + math.cos(math.pi * (t - starts[k][1]) / starts[k][2])) / 2
    end)
    H.assert_close(sequence(opt, lr.cosine_warm_restarts(opt, {T_0 = 3, T_mult = 2, eta_min = 0.01}), 25), want, TOL)
    opt = sgd({0.1})
    H.assert_close(sequence(opt, lr.cosine_warm_restarts(opt, {T_0 = 4}), 9),
      formula(9, function(t) return 0.1 * (1 + math.cos(math.pi * (t % 4) / 4)) / 2 end), TOL)
  end)

  it("one_cycle: warm up to max_lr over pct_start, anneal to max_lr / div / final_div; momentum inverse", function()
    local opt = sgd({0.1})
    local s = lr.one_cycle(opt, {max_lr = 1, total_steps = 10})
    local function cos_anneal(a, b, p) return b + (a - b) / 2 * (math.cos(math.pi * p) + 1) end
    local want_lr = formula(10, function(t)
      if t <= 2 then return cos_anneal(1 / 25, 1, t / 2) end
      return cos_anneal(1, 1 / 25 / 1e4, (t - 2) / 7)
    end)
    local want_m = formula(10, function(t)
      if t <= 2 then return cos_anneal(0.95, 0.85, t / 2) end
      return cos_anneal(0.85, 0.95, (t - 2) / 7)
    end)
    local lrs, ms = trace(opt, s, 10, function(o) return o.param_groups[1].lr, o.param_groups[1].momentum end)
    H.assert_close(lrs, want_lr, TOL)
    H.assert_close(ms, want_m, TOL)
    H.assert_error(function() s:step() end, "lr.one_cycle: tried to step 11 times; total_steps is 10")
  end)

  it("one_cycle cycles Adam's beta1 and keeps beta2; linear and three-phase schedules", function()
    local opt = dle.optim.Adam({dle.zeros(2):requires_grad_()}, {betas = {0.9, 0.99}})
    local s = lr.one_cycle(opt, {max_lr = 0.5, epochs = 2, steps_per_epoch = 5, anneal_strategy = "linear",
      three_phase = true})
    assert.are.same({0.95, 0.99}, opt.param_groups[1].betas)
    local want = formula(10, function(t)   -- phase ends 2, 4, 9
      if t <= 2 then return 0.02 + (0.5 - 0.02) * t / 2 end
      if t <= 4 then return 0.5 + (0.02 - 0.5) * (t - 2) / 2 end
      return 0.02 + (0.02 / 1e4 - 0.02) * (t - 4) / 5
    end)
    H.assert_close(sequence(opt, s, 10), want, {rtol = 1e-12, atol = 1e-15})
    assert.are.equal(0.99, opt.param_groups[1].betas[2])
  end)

  it("sequential: each scheduler from its own step 0 at its milestone, all from the optimizer's first lrs", function()
    local opt = sgd({0.1})
    local warm = lr.linear(opt, {start_factor = 0.5, total_iters = 2})
    local decay = lr.exponential(opt, {gamma = 0.5})
    local s = lr.sequential(opt, {schedulers = {warm, decay}, milestones = {3}})
    H.assert_close(sequence(opt, s, 6), {0.05, 0.075, 0.1, 0.1, 0.05, 0.025, 0.0125}, TOL)
  end)

  it("state_dict / load_state_dict resume every closed-form scheduler at the same lr", function()
    local makers = {
      function(o) return lr.lambda(o, {lr_lambda = function(t) return 1 / (t + 1) end}) end,
      function(o) return lr.multiplicative(o, {lr_lambda = function() return 0.9 end}) end,
      function(o) return lr.exponential(o, {gamma = 0.9}) end,
      function(o) return lr.linear(o) end,
      function(o) return lr.cosine_warm_restarts(o, {T_0 = 3}) end,
      function(o) return lr.one_cycle(o, {max_lr = 1, total_steps = 20}) end,
    }
    for i, mk in ipairs(makers) do
      local o1 = sgd({0.1})
      local s1 = mk(o1)
      for _ = 1, 7 do s1:step() end
      local o2 = sgd({0.1})
      local s2 = mk(o2)
      s2:load_state_dict(s1:state_dict())
      assert.are.equal(o1.param_groups[1].lr, o2.param_groups[1].lr, "scheduler " .. i)
      s1:step(); s2:step()
      assert.are.equal(o1.param_groups[1].lr, o2.param_groups[1].lr, "scheduler " .. i)
    end
  end)
end)

describe("reduce_lr_on_plateau", function()
  it("reduces by factor after more than patience bad steps, then waits cooldown steps", function()
    local opt = sgd({0.1})
    local s = lr.reduce_lr_on_plateau(opt, {patience = 1, cooldown = 1})
    H.assert_close(sequence(opt, s, 8, 1, {5, 4, 4, 4, 4, 3, 3, 3}),
      {0.1, 0.1, 0.1, 0.1, 0.1 * 0.1, 0.1 * 0.1, 0.1 * 0.1, 0.1 * 0.1, 0.1 * 0.1 * 0.1}, TOL)
  end)

  it("mode max, absolute threshold, min_lr per group, metrics as one-element tensors", function()
    local opt = sgd({1, 0.5})
    local s = lr.reduce_lr_on_plateau(opt, {mode = "max", threshold_mode = "abs", threshold = 0.5, patience = 0,
      factor = 0.5, min_lr = {0.3, 0}})
    for _, m in ipairs({1, 2, 2.4, 3}) do s:step(dle.tensor(m)) end   -- 2.4 is not better than 2 + 0.5
    assert.are.equal(0.5, opt.param_groups[1].lr)
    assert.are.equal(0.25, opt.param_groups[2].lr)
    s:step(0); s:step(0)
    assert.are.equal(0.3, opt.param_groups[1].lr)   -- clamped at min_lr
    assert.are.equal(0.0625, opt.param_groups[2].lr)
  end)

  it("state_dict / load_state_dict keep best and the counters", function()
    local o1, o2 = sgd({0.1}), sgd({0.1})
    local s1 = lr.reduce_lr_on_plateau(o1, {patience = 2})
    for _, m in ipairs({3, 2, 2}) do s1:step(m) end
    local s2 = lr.reduce_lr_on_plateau(o2, {patience = 2})
    s2:load_state_dict(s1:state_dict())
    assert.are.same(s1:state_dict(), s2:state_dict())
    s1:step(2); s2:step(2); s1:step(2); s2:step(2)
    assert.are.equal(o1.param_groups[1].lr, o2.param_groups[1].lr)
    assert.is_true(o2.param_groups[1].lr < 0.1)
  end)
end)

describe("scheduler errors", function()
  it("name the scheduler and the bad option", function()
    local opt = sgd({0.1})
    H.assert_error(function() lr.exponential(opt, {}) end, "lr.exponential: gamma is required")
    H.assert_error(function() lr.lambda(opt, {lr_lambda = 3}) end, "lr.lambda: lr_lambda must be a function")
    H.assert_error(function() lr.lambda(sgd({1, 2}), {lr_lambda = {function() return 1 end}}) end,
      "lr.lambda: lr_lambda has 1 entries but the optimizer has 2 param groups")
    H.assert_error(function() lr.lambda(opt, {lr_lambda = function() return "x" end}) end,
      "lr.lambda: lr_lambda(0) returned a string, expected a number")
    H.assert_error(function() lr.linear(opt, {start_factor = 0}) end,
      "lr.linear: start_factor must be a number in (0, 1]")
    H.assert_error(function() lr.cosine_warm_restarts(opt, {T_0 = 0}) end, "lr.cosine_warm_restarts: T_0 must be >= 1")
    H.assert_error(function() lr.one_cycle(opt, {max_lr = 1}) end,
      "lr.one_cycle: give total_steps, or epochs and steps_per_epoch")
    H.assert_error(function() lr.one_cycle(opt, {max_lr = 1, total_steps = 5, anneal_strategy = "exp"}) end,
      "lr.one_cycle: anneal_strategy must be \"cos\" or \"linear\"")
    H.assert_error(function() lr.one_cycle(dle.optim.Adagrad({dle.zeros(1):requires_grad_()}), {max_lr = 1,
      total_steps = 5}) end, "lr.one_cycle: cycle_momentum needs an optimizer with momentum or betas")
    H.assert_error(function() lr.sequential(opt, {schedulers = {lr.linear(opt)}, milestones = {2}}) end,
      "lr.sequential: expected 0 milestones (one fewer than schedulers), got 1")
    H.assert_error(function() lr.sequential(opt, {schedulers = {lr.linear(sgd({1}))}, milestones = {}}) end,
      "lr.sequential: scheduler 1 is not a scheduler of this optimizer")
    H.assert_error(function() lr.reduce_lr_on_plateau(opt, {mode = "up"}) end,
      "lr.reduce_lr_on_plateau: mode must be \"min\" or \"max\", got up")
    H.assert_error(function() lr.reduce_lr_on_plateau(opt, {factor = 1}) end,
      "lr.reduce_lr_on_plateau: factor must be a number in [0, 1)")
    H.assert_error(function() lr.reduce_lr_on_plateau(opt):step("x") end,
      "lr.reduce_lr_on_plateau: step expects the metric (a number or a one-element tensor), got string")
    H.assert_error(function() lr.exponential(3, {gamma = 1}) end, "lr.exponential: expected an optimizer")
  end)
end)

-- Optional: PyTorch's sequences (skipped when /usr/bin/python3 cannot import torch).
describe("schedulers against PyTorch (optional)", function()
  it("lr (and one_cycle's momentum) sequences match torch's schedulers", function()
    if H.without_torch(pending) then return end
    local got = {}
    local function record(mk, n, metrics, adam)
      local opt = adam and dle.optim.Adam({dle.zeros(2):requires_grad_()}, {lr = 0.1})
        or dle.optim.SGD({dle.zeros(2):requires_grad_()}, {lr = 0.1, momentum = 0.9})
      local lrs, ms = trace(opt, mk(opt), n, function(o)
        local g = o.param_groups[1]
        return g.lr, adam and g.betas[1] or g.momentum
      end, metrics)
      for i = 1, #lrs do
        got[#got + 1] = lrs[i]
        got[#got + 1] = ms[i]
      end
    end
    record(function(o) return lr.lambda(o, {lr_lambda = function(t) return 1 / (t + 1) end}) end, 6)
    record(function(o) return lr.multiplicative(o, {lr_lambda = function(t) return 0.9 - 0.01 * t end}) end, 6)
    record(function(o) return lr.exponential(o, {gamma = 0.8}) end, 6)
    record(function(o) return lr.linear(o, {start_factor = 0.25, total_iters = 4}) end, 6)
    record(function(o) return lr.cosine_warm_restarts(o, {T_0 = 3, T_mult = 2, eta_min = 0.01}) end, 25)
    record(function(o) return lr.one_cycle(o, {max_lr = 1, total_steps = 17}) end, 17)
    record(function(o) return lr.one_cycle(o, {max_lr = 1, total_steps = 13, three_phase = true,
      anneal_strategy = "linear", pct_start = 0.4}) end, 13, nil, true)
    local metrics = {5, 4, 4, 4, 4, 3, 3, 3, 2.9999, 3, 3, 3}
    record(function(o) return lr.reduce_lr_on_plateau(o, {patience = 1, cooldown = 1}) end, 12, metrics)
    record(function(o) return lr.reduce_lr_on_plateau(o, {mode = "max", threshold_mode = "abs", threshold = 0.5,
      patience = 0}) end, 12, metrics)
    record(function(o)
      local a, b = lr.linear(o, {start_factor = 0.5, total_iters = 2}), lr.exponential(o, {gamma = 0.5})
      return lr.sequential(o, {schedulers = {a, b}, milestones = {3}})
    end, 6)
    local py = {
      "import torch, warnings", "warnings.filterwarnings('ignore')", "from torch.optim import lr_scheduler as L",
      "out = []",
      "def record(mk, n, metrics=None, adam=False):",
      "  p = [torch.zeros(2, requires_grad=True)]",
      "  o = torch.optim.Adam(p, lr=0.1) if adam else torch.optim.SGD(p, lr=0.1, momentum=0.9)",
      "  s = mk(o)",
      "  def add():",
      "    g = o.param_groups[0]; out.extend([g['lr'], g['betas'][0] if adam else g['momentum']])",
      "  add()",
      "  for i in range(n):",
      "    o.step(); s.step(metrics[i]) if metrics else s.step(); add()",
      "record(lambda o: L.LambdaLR(o, lambda t: 1 / (t + 1)), 6)",
      "record(lambda o: L.MultiplicativeLR(o, lambda t: 0.9 - 0.01 * t), 6)",
      "record(lambda o: L.ExponentialLR(o, 0.8), 6)",
      "record(lambda o: L.LinearLR(o, start_factor=0.25, total_iters=4), 6)",
      "record(lambda o: L.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01), 25)",
      "record(lambda o: L.OneCycleLR(o, max_lr=1, total_steps=17), 17)",
      "record(lambda o: L.OneCycleLR(o, max_lr=1, total_steps=13, three_phase=True, anneal_strategy='linear', "
        .. "pct_start=0.4), 13, None, True)",
      "m = [5, 4, 4, 4, 4, 3, 3, 3, 2.9999, 3, 3, 3]",
      "record(lambda o: L.ReduceLROnPlateau(o, patience=1, cooldown=1), 12, m)",
      "record(lambda o: L.ReduceLROnPlateau(o, mode='max', threshold_mode='abs', threshold=0.5, patience=0), 12, m)",
      "record(lambda o: L.SequentialLR(o, [L.LinearLR(o, start_factor=0.5, total_iters=2), L.ExponentialLR(o, 0.5)], "
        .. "milestones=[3]), 6)",
      "print(' '.join(repr(v) for v in out))",
    }
    H.assert_torch_numbers(got, H.run_python(py)[1], 1e-12, "value")
  end)
end)
