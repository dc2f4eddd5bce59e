-- lr_chained_spec.lua — dle.optim.lr.chained (PyTorch's ChainedScheduler): the factors of the
-- chained schedulers multiply at every step (step x exponential, linear warm-up x exponential),
-- equal to PyTorch's lrs when torch is installed, and its errors.
local dle = require("dle")
local H = require("helpers")

local lr = dle.optim.lr

local function opt() return dle.optim.SGD({dle.zeros(2):requires_grad_()}, {lr = 1}) end

local function lrs(o, s, n)
  local r = {o.param_groups[1].lr}
  for _ = 1, n do s:step(); r[#r + 1] = o.param_groups[1].lr end
  return r
end

describe("lr.chained", function()
  it("multiplies the factors: step (gamma 0.1 every 2) times exponential (0.9)", function()
    local o = opt()
    local s = lr.chained(o, {schedulers = {lr.step(o, {step_size = 2, gamma = 0.1}), lr.exponential(o, {gamma = 0.9})}})
    local got = lrs(o, s, 5)
    for t = 0, 5 do
      assert.is_true(math.abs(got[t + 1] - 0.1 ^ (t // 2) * 0.9 ^ t) < 1e-15, "step " .. t)
    end
  end)

  it("equals PyTorch's ChainedScheduler for linear warm-up and exponential decay", function()
    if H.without_torch(pending) then return end
    local o = opt()
    local s = lr.chained(o, {schedulers = {lr.linear(o, {start_factor = 0.25, total_iters = 3}),
                                           lr.exponential(o, {gamma = 0.8})}})
    local got = lrs(o, s, 6)
    local out = H.run_python({"import torch",
      "o = torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=1)",
      "s = torch.optim.lr_scheduler.ChainedScheduler([torch.optim.lr_scheduler.LinearLR(o, start_factor=0.25, "
        .. "total_iters=3), torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.8)])",
      "r = [o.param_groups[0]['lr']]",
      "for _ in range(6):\n    o.step(); s.step(); r.append(o.param_groups[0]['lr'])",
      "print(' '.join(repr(v) for v in r))"})
    H.assert_torch_numbers(got, out[1], 1e-12, "lr")
  end)

  it("refuses an empty list and a scheduler of another optimizer", function()
    local o = opt()
    local ok, err = pcall(lr.chained, o, {schedulers = {}})
    assert.is_false(ok)
    assert.matches("lr.chained: schedulers must be a non%-empty list", err)
    err = select(2, pcall(lr.chained, o, {schedulers = {lr.exponential(opt(), {gamma = 0.5})}}))
    assert.matches("lr.chained: scheduler 1 is not a scheduler of this optimizer", err)
  end)
end)
