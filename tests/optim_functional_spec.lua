-- optim_functional_spec.lua — dle.optim.functional: the Torch7-style steps over explicit state give
-- exactly the classes' updates (the classes are built on them), state saved with dle.save resumes
-- exactly, nil gradients skip their param, and bad arguments are errors naming the function.
local dle = require("dle")
local H = require("helpers")
local F = dle.optim.functional

-- Options exercising each algorithm's state (momentum buffers, amsgrad, centered, ...).
local CASES = {
  {"sgd", "SGD", {lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.01}},
  {"sgd", "SGD", {lr = 0.05, momentum = 0.5, dampening = 0.1}},
  {"adagrad", "Adagrad", {lr = 0.1, lr_decay = 0.01, initial_accumulator_value = 0.2}},
  {"rmsprop", "RMSprop", {lr = 0.01, momentum = 0.9, centered = true, weight_decay = 0.1}},
  {"adam", "Adam", {lr = 0.01, amsgrad = true, weight_decay = 0.1}},
  {"adamw", "AdamW", {lr = 0.01, betas = {0.8, 0.99}}},
}

-- Two params of odd sizes and their gradients at each step, from a fixed seed.
local function problem(dtype)
  local g = dle.Generator(7)
  local params = {dle.randn(5, 3, {dtype = dtype, generator = g}), dle.randn(7, {dtype = dtype, generator = g})}
  local grads = {}
  for s = 1, 4 do
    grads[s] = {dle.randn(5, 3, {dtype = dtype, generator = g}), dle.randn(7, {dtype = dtype, generator = g})}
  end
  return params, grads
end

describe("dle.optim.functional", function()
  for _, case in ipairs(CASES) do
    local key, cls, opts = case[1], case[2], case[3]
    it(key .. " equals dle.optim." .. cls .. " bit for bit over 4 steps (float32 and float64)", function()
      for _, dtype in ipairs({"float32", "float64"}) do
        local pf, grads = problem(dtype)
        local pc = {pf[1]:clone():requires_grad_(true), pf[2]:clone():requires_grad_(true)}
        local opt = dle.optim[cls](pc, opts)
        local state = {}
        for s = 1, 4 do
          F[key](pf, grads[s], state, opts)
          pc[1].grad, pc[2].grad = grads[s][1], grads[s][2]
          opt:step()
        end
        for i = 1, 2 do
          assert.are.equal(0, (pf[i] - pc[i]:detach()):abs():max():item(), key .. " " .. dtype .. " param " .. i)
        end
        assert.are.equal(4, state[1].step)
      end
    end)
  end

  it("resumes exactly from a state saved with dle.save (adam, 2 + 2 steps against 4)", function()
    local p1, grads = problem("float32")
    local p2 = {p1[1]:clone(), p1[2]:clone()}
    local s1, s2 = {}, {}
    for s = 1, 4 do F.adam(p1, grads[s], s1, {lr = 0.01}) end
    for s = 1, 2 do F.adam(p2, grads[s], s2, {lr = 0.01}) end
    local path = os.tmpname()
    dle.save(path, {params = p2, state = s2})
    local back = dle.load(path)
    os.remove(path)
    for s = 3, 4 do F.adam(back.params, grads[s], back.state, {lr = 0.01}) end
    for i = 1, 2 do assert.are.equal(0, (p1[i] - back.params[i]):abs():max():item()) end
  end)

  it("takes a single tensor, skips a nil gradient (grads.n), accepts a transposed gradient", function()
    local p = dle.ones(3, 2)
    F.sgd(p, dle.ones(2, 3):t(), {}, {lr = 0.5})
    assert.are.same({{0.5, 0.5}, {0.5, 0.5}, {0.5, 0.5}}, p:totable())
    local a, b = dle.ones(2), dle.ones(2)
    local state = {}
    F.sgd({a, b}, table.pack(nil, dle.ones(2)), state, {lr = 1})
    assert.are.same({1, 1}, a:totable())
    assert.are.same({0, 0}, b:totable())
    assert.is_nil(state[1])
    assert.are.equal(1, state[2].step)
  end)

  it("does not record for autograd: a param that requires grad stays a leaf", function()
    local p = dle.ones(2, {requires_grad = true})
    F.adam({p}, {dle.ones(2)}, {}, {lr = 0.1})
    assert.is_true(p.requires_grad)
    assert.is_nil(p.grad)
    assert.truthy(math.abs(p:sum():item() - 1.8) < 1e-6)
  end)

  it("names the function in errors: unknown option, bad value, lengths, shapes, dtypes, state", function()
    local p = dle.ones(2)
    H.assert_error(function() F.adam({p}, {p}, {}, {lrr = 1}) end, "optim.functional.adam", "unknown option 'lrr'")
    H.assert_error(function() F.sgd({p}, {p}, {}, {lr = -1}) end, "optim.functional.sgd", "lr")
    H.assert_error(function() F.adamw({p}, {p, p}, {}) end, "optim.functional.adamw", "1 params but 2 grads")
    H.assert_error(function() F.rmsprop({p}, {dle.ones(3)}, {}) end, "optim.functional.rmsprop", "shape {3}")
    H.assert_error(function() F.adagrad({dle.ones(2, {dtype = "int64"})}, {p}, {}) end, "optim.functional.adagrad",
      "float tensor")
    H.assert_error(function() F.adam({p}, {p}, nil) end, "optim.functional.adam", "state must be a table")
    H.assert_error(function() F.adam({p}, {p:clone():requires_grad_(true)}, {}) end, "optim.functional.adam",
      "requires grad")
  end)
end)
