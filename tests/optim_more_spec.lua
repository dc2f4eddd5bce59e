-- optim_more_spec.lua — dle.optim.Adamax, NAdam, RAdam (and their dle.optim.functional steps),
-- SGD's dampening and dle.optim.LBFGS: trajectories against scalar Lua references of PyTorch's
-- formulas in float64, both RAdam branches, float32 / float16 params, state_dict round trips,
-- LBFGS solving quadratics and Rosenbrock (with and without the strong-Wolfe line search),
-- errors naming the optimizer, and optionally PyTorch's trajectories over 10 steps.
local dle = require("dle")
local H = require("helpers")

local optim = dle.optim
local F64 = {dtype = "float64"}

local P0 = {0.5, -1.25, 2.0}
-- the gradient fed at step s (fixed, so the references need no autograd)
local function grad_at(s) return {0.3 * math.sin(s), -0.4 + 0.1 * s, 0.8 * math.cos(2 * s)} end

-- Runs `steps` steps of cls with opts on P0 (dtype); returns the param and the optimizer.
local function run(cls, opts, steps, dtype, opt_in, p_in)
  local p = p_in or dle.tensor(P0, {dtype = dtype or "float64", requires_grad = true})
  local opt = opt_in or cls({p}, opts)
  local first = opt.state[1] and opt.state[1].step or 0
  for s = first + 1, first + steps do
    p.grad = dle.tensor(grad_at(s), {dtype = dtype or "float64"})
    opt:step()
  end
  return p, opt
end

-- Scalar references (PyTorch's single-tensor loops, one element at a time): update(st, p, g, s)
-- takes one element's state table st (empty at first), its value p and gradient g (weight decay
-- added) at step s, and returns the new value.
local function trajectory(steps, h, update)
  local out = {}
  for i, p in ipairs(P0) do
    local st = {}
    for s = 1, steps do p = update(st, p, grad_at(s)[i] + h.wd * p, s) end
    out[i] = p
  end
  return out
end
local ref = {}
function ref.adamax(steps, h)
  return trajectory(steps, h, function(st, p, g, s)
    st.m = h.b1 * (st.m or 0) + (1 - h.b1) * g
    st.u = math.max(h.b2 * (st.u or 0), math.abs(g) + h.eps)
    return p - h.lr / (1 - h.b1 ^ s) * st.m / st.u
  end)
end
function ref.nadam(steps, h)
  return trajectory(steps, h, function(st, p, g, s)
    local mu = h.b1 * (1 - 0.5 * 0.96 ^ (s * h.md))
    local mu_next = h.b1 * (1 - 0.5 * 0.96 ^ ((s + 1) * h.md))
    st.mu_prod = (st.mu_prod or 1) * mu
    st.m = h.b1 * (st.m or 0) + (1 - h.b1) * g
    st.v = h.b2 * (st.v or 0) + (1 - h.b2) * g * g
    local denom = math.sqrt(st.v / (1 - h.b2 ^ s)) + h.eps
    return p - h.lr * (1 - mu) / (1 - st.mu_prod) * g / denom
      - h.lr * mu_next / (1 - st.mu_prod * mu_next) * st.m / denom
  end)
end
function ref.radam(steps, h)
  return trajectory(steps, h, function(st, p, g, s)
    st.m = h.b1 * (st.m or 0) + (1 - h.b1) * g
    st.v = h.b2 * (st.v or 0) + (1 - h.b2) * g * g
    local bc1, bc2 = 1 - h.b1 ^ s, 1 - h.b2 ^ s
    local rho_inf = 2 / (1 - h.b2) - 1
    local rho = rho_inf - 2 * s * h.b2 ^ s / bc2
    if rho > 5 then
      local rect = math.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
      return p - st.m / bc1 * h.lr * math.sqrt(bc2) / (math.sqrt(st.v) + h.eps) * rect
    end
    return p - st.m / bc1 * h.lr
  end)
end
function ref.sgd(steps, h)
  return trajectory(steps, h, function(st, p, g)
    st.buf = st.buf and h.momentum * st.buf + (1 - h.dampening) * g or g
    return p - h.lr * st.buf
  end)
end

local cases = {
  {"Adamax", "adamax", {lr = 0.05, weight_decay = 0.1, betas = {0.8, 0.95}}, {lr = 0.05, wd = 0.1, b1 = 0.8, b2 = 0.95,
    eps = 1e-8}},
  {"Adamax defaults", "adamax", nil, {lr = 2e-3, wd = 0, b1 = 0.9, b2 = 0.999, eps = 1e-8}},
  {"NAdam", "nadam", {lr = 0.05, weight_decay = 0.1, momentum_decay = 0.01}, {lr = 0.05, wd = 0.1, b1 = 0.9,
    b2 = 0.999, eps = 1e-8, md = 0.01}},
  {"NAdam defaults", "nadam", nil, {lr = 2e-3, wd = 0, b1 = 0.9, b2 = 0.999, eps = 1e-8, md = 4e-3}},
  -- beta2 = 0.8: rho_t passes 5 at step 7, so 8 steps take both branches
  {"RAdam", "radam", {lr = 0.05, weight_decay = 0.1, betas = {0.9, 0.8}}, {lr = 0.05, wd = 0.1, b1 = 0.9, b2 = 0.8,
    eps = 1e-8}},
  {"RAdam defaults", "radam", nil, {lr = 1e-3, wd = 0, b1 = 0.9, b2 = 0.999, eps = 1e-8}},
  {"SGD", "sgd", {lr = 0.1, momentum = 0.9, dampening = 0.3, weight_decay = 0.05}, {lr = 0.1, momentum = 0.9,
    dampening = 0.3, wd = 0.05}},
}
local classes = {adamax = "Adamax", nadam = "NAdam", radam = "RAdam", sgd = "SGD"}

describe("Adamax, NAdam, RAdam, SGD dampening: trajectories", function()
  for _, c in ipairs(cases) do
    it(c[1] .. " follows PyTorch's update formula over 8 steps (float64)", function()
      local p = run(optim[classes[c[2]]], c[3], 8)
      H.assert_close(p, ref[c[2]](8, c[4]), {rtol = 1e-13, atol = 1e-15})
    end)
  end

  it("the functional steps equal the classes, with the state in the caller's table", function()
    for _, c in ipairs(cases) do
      if c[2] ~= "sgd" then
        local p = dle.tensor(P0, F64)
        local state = {}
        for s = 1, 8 do optim.functional[c[2]]({p}, {dle.tensor(grad_at(s), F64)}, state, c[3]) end
        H.assert_close(p, ref[c[2]](8, c[4]), {rtol = 1e-13, atol = 1e-15, msg = c[1]})
        assert.are.equal(8, state[1].step)
      end
    end
  end)

  it("float32 and float16 params keep their dtype and follow the float64 trajectory closely", function()
    for _, c in ipairs(cases) do
      local want = ref[c[2]](8, c[4])
      local p32 = run(optim[classes[c[2]]], c[3], 8, "float32")
      assert.are.equal("float32", p32:dtype())
      H.assert_close(p32, want, {rtol = 1e-5, atol = 1e-5, msg = c[1]})
      if c[2] ~= "sgd" then
        local p16, opt = run(optim[classes[c[2]]], c[3], 8, "float16")
        assert.are.equal("float16", p16:dtype())
        assert.are.equal("float32", opt.state[1].exp_avg:dtype())
        H.assert_close(p16, want, {rtol = 2e-3, atol = 2e-3, msg = c[1]})
      end
    end
  end)

  it("state_dict / load_state_dict resumes exactly (5 + 3 steps = 8 steps)", function()
    for _, c in ipairs(cases) do
      local cls = optim[classes[c[2]]]
      local p, opt = run(cls, c[3], 5)
      local sd = opt:state_dict()
      local q = p:detach():clone():requires_grad_()
      local opt2 = cls({q}, c[3])
      opt2:load_state_dict(sd)
      run(cls, nil, 3, nil, opt2, q)
      H.assert_close(q, ref[c[2]](8, c[4]), {rtol = 1e-13, atol = 1e-15, msg = c[1]})
    end
  end)

  it("NAdam resumes exactly from a state holding only step and tensors (as ZeRO consolidates it)", function()
    local c = cases[3]
    local p, opt = run(optim.NAdam, c[3], 5)
    local sd = opt:state_dict()
    assert.is_number(sd.state[1].mu_product)
    sd.state[1].mu_product = nil
    local q = p:detach():clone():requires_grad_()
    local opt2 = optim.NAdam({q}, c[3])
    opt2:load_state_dict(sd)
    run(optim.NAdam, nil, 3, nil, opt2, q)
    H.assert_close(q, ref.nadam(8, c[4]), {rtol = 1e-13, atol = 1e-15})
  end)

  it("bad hyperparameters are errors naming the optimizer", function()
    local p = {dle.zeros(2):requires_grad_()}
    H.assert_error(function() optim.Adamax(p, {betas = {1, 0.9}}) end,
      "Adamax: betas must be {b1, b2} with both in [0, 1)")
    H.assert_error(function() optim.NAdam(p, {momentum_decay = -1}) end, "NAdam: invalid momentum_decay -1")
    H.assert_error(function() optim.RAdam(p, {lr = -1}) end, "RAdam: invalid lr -1")
    H.assert_error(function() optim.functional.radam(p, {dle.ones(3)}, {}) end,
      "optim.functional.radam: the gradient of param 1 has shape {3}, the param {2}")
  end)
end)

-- f(x) = sum_i (a_i x_i - b_i)^2 + 0.5 * (x_1 - x_2)^2: a convex quadratic with a unique minimum
local function quadratic(p)
  local a = dle.tensor({1, 2, 3, 0.5}, F64)
  local b = dle.tensor({1, -1, 2, 0.25}, F64)
  return ((p * a - b) ^ 2):sum() + 0.5 * (p:narrow(1, 1, 1) - p:narrow(1, 2, 1)):pow(2):sum()
end
local function rosenbrock(p)
  local x, y = p:narrow(1, 1, 1), p:narrow(1, 2, 1)
  return ((1 - x) ^ 2 + 100 * (y - x ^ 2) ^ 2):sum()
end

local function lbfgs_run(f, x0, opts, steps)
  local p = dle.tensor(x0, F64):requires_grad_()
  local opt = optim.LBFGS({p}, opts)
  local losses = {}
  for s = 1, steps do
    losses[s] = opt:step(function()
      opt:zero_grad()
      local l = f(p)
      l:backward()
      return l
    end):item()
  end
  return p, opt, losses
end

describe("LBFGS", function()
  it("minimizes a convex quadratic to its minimum (gradient below tolerance_grad), with and without line search",
     function()
    for _, ls in ipairs({false, "strong_wolfe"}) do
      local p = lbfgs_run(quadratic, {3, 3, 3, 3}, {line_search_fn = ls, tolerance_change = 1e-20}, 3)
      -- the minimum solves the normal equations; its gradient is zero
      local z = p:detach():requires_grad_()
      quadratic(z):backward()
      assert.is_true(z.grad:abs():max():item() < 1e-7, tostring(ls) .. ": gradient " .. tostring(z.grad))
    end
  end)

  it("with strong_wolfe solves Rosenbrock from (-1.5, 2) to (1, 1) in few steps", function()
    local p, opt = lbfgs_run(rosenbrock, {-1.5, 2}, {line_search_fn = "strong_wolfe", max_iter = 50,
      tolerance_change = 1e-20, tolerance_grad = 1e-10}, 4)
    H.assert_close(p, {1, 1}, {rtol = 0, atol = 1e-8})
    assert.is_true(opt.state[1].func_evals > 4)
  end)

  it("returns the first loss of each step and stops once the gradient is below tolerance_grad", function()
    local p, opt, losses = lbfgs_run(quadratic, {3, 3, 3, 3}, {max_iter = 100}, 3)
    assert.are.equal(quadratic(dle.tensor({3, 3, 3, 3}, F64)):item(), losses[1])
    assert.is_true(losses[3] < 1e-12 + quadratic(p:detach()):item() + 1e-9)
    local evals = opt.state[1].func_evals
    opt:step(function() opt:zero_grad(); local l = quadratic(p); l:backward(); return l end)
    assert.are.equal(evals + 1, opt.state[1].func_evals)   -- converged: one evaluation, no iteration
  end)

  it("max_iter and max_eval bound the evaluations of one step", function()
    local _, opt = lbfgs_run(rosenbrock, {-1.5, 2}, {max_iter = 3}, 1)
    assert.are.equal(3, opt.state[1].func_evals)   -- the first evaluation, then one per iteration but the last
    _, opt = lbfgs_run(rosenbrock, {-1.5, 2}, {max_iter = 50, max_eval = 5}, 1)
    assert.are.equal(5, opt.state[1].func_evals)
  end)

  it("state_dict / load_state_dict resume the history exactly", function()
    local x0 = {-1.5, 2}
    local opts = {max_iter = 4, history_size = 3}
    local full = lbfgs_run(rosenbrock, x0, opts, 4)
    local p, opt = lbfgs_run(rosenbrock, x0, opts, 2)
    local sd = opt:state_dict()
    local q = p:detach():clone():requires_grad_()
    local opt2 = optim.LBFGS({q}, opts)
    opt2:load_state_dict(sd)
    for _ = 1, 2 do
      opt2:step(function() opt2:zero_grad(); local l = rosenbrock(q); l:backward(); return l end)
    end
    H.assert_close(q, full:totable(), {rtol = 0, atol = 0})
  end)

  it("errors name LBFGS: no closure, a closure returning nothing, bad options, param groups", function()
    local p = dle.zeros(2):requires_grad_()
    local opt = optim.LBFGS({p})
    H.assert_error(function() opt:step() end, "LBFGS:step: closure must be a function, got nil")
    H.assert_error(function() opt:step(function() end) end, "LBFGS:step: the closure must return the loss")
    H.assert_error(function() optim.LBFGS({p}, {line_search_fn = "armijo"}) end,
      "LBFGS: line_search_fn must be \"strong_wolfe\" or false, got armijo")
    H.assert_error(function() optim.LBFGS({p}, {history_size = 0}) end, "LBFGS: history_size must be an integer >= 1")
    H.assert_error(function() optim.LBFGS({{params = {p}}, {params = {dle.zeros(1):requires_grad_()}}}) end,
      "LBFGS: takes one param group, got 2")
  end)
end)

-- Optional: PyTorch's trajectories (skipped when /usr/bin/python3 cannot import torch).
describe("optimizers against PyTorch (optional)", function()
  it("Adamax, RAdam, SGD with dampening and LBFGS (both line searches) match torch over 10 steps in float64", function()
    if H.without_torch(pending) then return end
    local got = {}
    local function add(t) for _, v in ipairs(t:reshape(-1):totable()) do got[#got + 1] = v end end
    local W = dle.tensor({{1.0, 0.2}, {0.2, 3.0}}, F64)
    local x0 = dle.tensor({{0.5, -1.2, 2.0}, {1.5, 0.3, -0.7}}, F64)
    local function f(p) return ((W:matmul(p) - 1) ^ 2):sum() + (p ^ 4):sum() * 0.1 end
    local specs = {
      {"Adamax", {lr = 0.05, weight_decay = 0.1}, "lr=0.05, weight_decay=0.1"},
      {"RAdam", {lr = 0.05, weight_decay = 0.1}, "lr=0.05, weight_decay=0.1"},
      {"RAdam", {lr = 0.05, betas = {0.9, 0.8}}, "lr=0.05, betas=(0.9, 0.8)"},
      {"SGD", {lr = 0.01, momentum = 0.9, dampening = 0.3, weight_decay = 0.1},
        "lr=0.01, momentum=0.9, dampening=0.3, weight_decay=0.1"},
    }
    for _, s in ipairs(specs) do
      local p = x0:clone():requires_grad_()
      local o = optim[s[1]]({p}, s[2])
      for _ = 1, 10 do o:zero_grad(); f(p):backward(); o:step() end
      add(p)
    end
    for _, ls in ipairs({false, "strong_wolfe"}) do
      local opts = {lr = 0.8, max_iter = 5, history_size = 3, line_search_fn = ls}
      local p, opt = lbfgs_run(rosenbrock, {-1.5, 2}, opts, 2)
      add(p)
      got[#got + 1] = opt.state[1].func_evals
    end
    local py = {
      "import torch",
      "W = torch.tensor([[1.0, 0.2], [0.2, 3.0]], dtype=torch.float64)",
      "x0 = torch.tensor([[0.5, -1.2, 2.0], [1.5, 0.3, -0.7]], dtype=torch.float64)",
      "f = lambda p: ((W @ p - 1) ** 2).sum() + (p ** 4).sum() * 0.1",
      "out = []",
    }
    for _, s in ipairs(specs) do
      py[#py + 1] = "p = x0.clone().requires_grad_(); o = torch.optim." .. s[1] .. "([p], " .. s[3] .. ")"
      py[#py + 1] = "for i in range(10): o.zero_grad(); f(p).backward(); o.step()"
      py[#py + 1] = "out += p.reshape(-1).tolist()"
    end
    for _, ls in ipairs({"None", "'strong_wolfe'"}) do
      py[#py + 1] = "p = torch.tensor([-1.5, 2], dtype=torch.float64, requires_grad=True)"
      py[#py + 1] = "o = torch.optim.LBFGS([p], lr=0.8, max_iter=5, history_size=3, line_search_fn=" .. ls .. ")"
      py[#py + 1] = "def cl():\n  o.zero_grad(); l = (1 - p[0]) ** 2 + 100 * (p[1] - p[0] ** 2) ** 2\n"
        .. "  l.backward(); return l"
      py[#py + 1] = "for i in range(2): o.step(cl)"
      py[#py + 1] = "out += p.tolist() + [o.state[p]['func_evals']]"
    end
    py[#py + 1] = "print(' '.join(repr(v) for v in out))"
    H.assert_torch_numbers(got, H.run_python(py)[1], 1e-11, "value")
  end)

  it("NAdam matches PyTorch's NAdam with mu_product_next = mu_product * mu_next (torch >= 2.0)", function()
    -- PyTorch 1.13's NAdam multiplies mu into mu_product_next twice (fixed in 2.0); dle follows the
    -- fixed formula, so 1.13 is compared through its update with that line corrected.
    if H.without_torch(pending) then return end
    local p = run(optim.NAdam, {lr = 0.05, weight_decay = 0.1}, 10)
    local py = {
      "import torch",
      "p = torch.tensor([0.5, -1.25, 2.0], dtype=torch.float64)",
      "m = torch.zeros(3, dtype=torch.float64); v = torch.zeros(3, dtype=torch.float64); mp = 1.0",
      "lr, b1, b2, eps, wd, md = 0.05, 0.9, 0.999, 1e-8, 0.1, 4e-3",
      "import math",
      "for s in range(1, 11):",
      "  g = torch.tensor([0.3 * math.sin(s), -0.4 + 0.1 * s, 0.8 * math.cos(2 * s)], dtype=torch.float64) + wd * p",
      "  mu = b1 * (1 - 0.5 * 0.96 ** (s * md)); mu_next = b1 * (1 - 0.5 * 0.96 ** ((s + 1) * md))",
      "  mp *= mu; mp_next = mp * mu_next",
      "  m.mul_(b1).add_(g, alpha=1 - b1); v.mul_(b2).addcmul_(g, g, value=1 - b2)",
      "  denom = v.div(1 - b2 ** s).sqrt().add_(eps)",
      "  p.addcdiv_(g, denom, value=-lr * (1 - mu) / (1 - mp))",
      "  p.addcdiv_(m, denom, value=-lr * mu_next / (1 - mp_next))",
      "if not torch.__version__.startswith('1.'):",
      "  q = torch.tensor([0.5, -1.25, 2.0], dtype=torch.float64, requires_grad=True)",
      "  o = torch.optim.NAdam([q], lr=lr, weight_decay=wd)",
      "  for s in range(1, 11):",
      "    q.grad = torch.tensor([0.3 * math.sin(s), -0.4 + 0.1 * s, 0.8 * math.cos(2 * s)], dtype=torch.float64)",
      "    o.step()",
      "  assert torch.allclose(p, q.detach(), rtol=1e-12, atol=0)",
      "print(' '.join(repr(v) for v in p.tolist()))",
    }
    H.assert_torch_numbers(p:totable(), H.run_python(py)[1], 1e-12, "value")
  end)
end)
