-- covers: view fft
-- grad_complex_spec.lua — autograd through complex tensors (PyTorch's convention: a complex .grad
-- is dL/d(re) + i dL/d(im) of a real loss L): complex leaves, .grad and the backward() rules; a
-- complex128 dle.gradcheck (each real and imaginary part perturbed alone, each part of a complex
-- output checked alone), reverse and forward mode, of every op that takes complex (add sub mul
-- div neg conj real imag view_as_real view_as_complex complex abs angle exp log sum mean matmul
-- where cat stack, the views, clone, casts), on transposed and narrowed inputs and odd sizes;
-- the convention on closed forms; second derivatives; PyTorch's gradients in complex128 when
-- python3-torch is there. The op fft in each kind and norm here; every dle.fft function with n/s,
-- dims and norms in tests/fft_spec.lua ("gradients").
local dle = require("dle")
local H = require("helpers")

local function r64(shape, seed, lo, hi) return H.seeded(shape, seed, lo or -1, hi or 1) end
local c128 = H.seeded_complex

-- The ops and how they are called: inputs made by spec {kind = "c" (complex128) or "r" (float64),
-- shape, seed, lo, hi}, the dle function and the same in PyTorch (a, b, c the inputs).
local C = function(shape, seed, lo, hi) return {kind = "c", shape = shape, seed = seed, lo = lo, hi = hi} end
local R = function(shape, seed, lo, hi) return {kind = "r", shape = shape, seed = seed, lo = lo, hi = hi} end

local cases = {
  {"add (broadcast)", {C({2, 3}, 1), C({3}, 2)}, function(a, b) return a + b end, "a + b"},
  {"sub, transposed", {C({3, 2}, 3), C({2, 3}, 4)}, function(a, b) return a:t() - b end, "a.t() - b"},
  {"mul", {C({2, 3}, 5), C({2, 3}, 6)}, function(a, b) return a * b end, "a * b"},
  {"mul by a real tensor (its gradient real)", {C({2, 3}, 7), R({2, 3}, 8)}, function(a, b) return a * b end, "a * b"},
  {"mul by a Lua number", {C({5}, 9)}, function(a) return a * 2.5 end, "a * 2.5"},
  {"div", {C({2, 3}, 10), C({2, 3}, 11, 0.5, 1.5)}, function(a, b) return a / b end, "a / b"},
  {"div of a real by a complex", {R({3}, 12), C({3}, 13, 0.5, 1.5)}, function(a, b) return a / b end, "a / b"},
  {"neg", {C({3}, 14)}, function(a) return -a end, "-a"},
  {"conj", {C({2, 3}, 15)}, function(a) return a:conj() * a end, "a.conj() * a"},
  {"real", {C({2, 3}, 16)}, function(a) return a:real() * 3 end, "a.real * 3"},
  {"imag", {C({2, 3}, 17)}, function(a) return a:imag() * 3 end, "a.imag * 3"},
  {"view_as_real", {C({3, 2}, 18)}, function(a) return dle.view_as_real(a:t()) end, "torch.view_as_real(a.t())"},
  {"view_as_complex", {R({3, 2}, 19)}, function(a) return dle.view_as_complex(a) * dle.view_as_complex(a) end,
    "torch.view_as_complex(a) * torch.view_as_complex(a)"},
  {"complex(re, im), broadcast", {R({2, 3}, 20), R({3}, 21)}, function(a, b) return dle.complex(a, b) end,
    "torch.complex(a, b.expand(2, 3))"},
  {"abs", {C({2, 3}, 22)}, function(a) return dle.abs(a) end, "a.abs()"},
  {"angle", {C({5}, 23)}, function(a) return dle.angle(a) end, "a.angle()"},
  {"exp", {C({2, 3}, 24)}, function(a) return dle.exp(a) end, "a.exp()"},
  {"log (right half-plane)", {C({2, 3}, 25, 0.3, 1.5)}, function(a) return dle.log(a) end, "a.log()"},
  {"sum over a dim", {C({2, 3}, 26)}, function(a) return a:sum(2) end, "a.sum(1)"},
  {"sum of all", {C({3, 1}, 27)}, function(a) return a:sum() end, "a.sum()"},
  {"mean with keepdim", {C({2, 3}, 28)}, function(a) return a:mean(1, true) end, "a.mean(0, keepdim=True)"},
  {"matmul", {C({2, 3}, 29), C({3, 2}, 30)}, function(a, b) return a:matmul(b) end, "a @ b"},
  {"matmul, transposed operand", {C({2, 3}, 31), C({2, 3}, 32)}, function(a, b) return a:matmul(b:t()) end,
    "a @ b.t()"},
  {"matmul, batched and broadcast", {C({2, 2, 3}, 33), C({3, 2}, 34)}, function(a, b) return a:matmul(b) end,
    "a @ b"},
  {"matmul of a vector", {C({3}, 35), C({3, 2}, 36)}, function(a, b) return a:matmul(b) end, "a @ b"},
  {"matmul of a real by a complex", {R({2, 3}, 37), C({3, 2}, 38)}, function(a, b) return a:matmul(b) end,
    "a.to(torch.complex128) @ b"},
  {"where", {C({2, 3}, 39), C({2, 3}, 40)},
    function(a, b) return dle.where(dle.tensor({{true, false, true}, {false, false, true}}), a, b) end,
    "torch.where(torch.tensor([[True, False, True], [False, False, True]]), a, b)"},
  {"cat", {C({2, 3}, 41), C({1, 3}, 42)}, function(a, b) return dle.cat({a, b}, 1) end, "torch.cat([a, b], 0)"},
  {"stack", {C({3}, 43), C({3}, 44)}, function(a, b) return dle.stack({a, b}, 2) end, "torch.stack([a, b], 1)"},
  {"to complex128 from float64", {R({2, 3}, 45)}, function(a) return a:to("complex128") * a:to("complex128") end,
    "a.to(torch.complex128) * a.to(torch.complex128)"},
  {"views: reshape, permute, narrow, select, expand", {C({2, 3}, 46)},
    function(a) return a:reshape(3, 2):t():narrow(2, 2, 2):select(1, 2):expand(2, 2) end,
    "a.reshape(3, 2).t().narrow(1, 1, 2).select(0, 1).expand(2, 2)"},
  {"diagonal", {C({3, 3}, 47)}, function(a) return a:diagonal(1) end, "a.diagonal(1)"},
  {"clone and contiguous", {C({2, 3}, 48)}, function(a) return a:t():contiguous() * a:clone():t() end,
    "a.t().contiguous() * a.clone().t()"},
}

local function make(spec)
  if spec.kind == "c" then return c128(spec.shape, spec.seed, spec.lo, spec.hi) end
  return r64(spec.shape, spec.seed, spec.lo, spec.hi)
end

local function inputs_of(case)
  local ins = {}
  for i, spec in ipairs(case[2]) do ins[i] = make(spec) end
  return ins
end

describe("autograd through complex tensors", function()
  it("lets complex leaves require grad; their .grad is complex, backward starts from a real loss", function()
    local z = c128({3}, 1):requires_grad_(true)
    assert.is_true(z.requires_grad)
    local loss = (dle.abs(z) ^ 2):sum()
    assert.are.equal("float64", loss:dtype())
    loss:backward()
    assert.are.equal("complex128", z.grad:dtype())
    -- d |z|^2 = 2 z (dL/dre + i dL/dim)
    assert.is_true(H.max_diff(dle.view_as_real(z.grad), dle.view_as_real(z:detach() * 2)) < 1e-14)
    local z64 = dle.zeros({2}, {dtype = "complex64"}):requires_grad_(true)
    dle.view_as_real(z64 + 1):select(2, 2):sum():backward() -- L = sum(im z): dL/dz = 0 + 1i
    assert.are.equal("complex64", z64.grad:dtype())
    assert.are.same({{0, 1}, {0, 1}}, dle.view_as_real(z64.grad):totable())
    -- a cast between complex dtypes sends the gradient back in the leaf's dtype
    local u = dle.zeros({2}, {dtype = "complex64"}):requires_grad_(true)
    local gu = dle.grad(dle.view_as_real(u:to("complex128") * 3):sum(), {u})[1]
    assert.are.equal("complex64", gu:dtype())
    assert.are.same({{3, 3}, {3, 3}}, dle.view_as_real(gu):totable())
  end)

  it("refuses backward() of a complex output without a gradient, scalar or not (as PyTorch)", function()
    local z = c128({3}, 2):requires_grad_(true)
    H.assert_error(function() (z * z):backward() end, "backward", "complex128", "real")
    H.assert_error(function() (z * z):sum():backward() end, "backward", "complex128", "real")
    local w, y = c128({3}, 3), z * 2
    y:backward(w) -- a given gradient: y = 2 z sends back 2 w (conj(2) w)
    assert.is_true(H.max_diff(dle.view_as_real(z.grad), dle.view_as_real(w * 2)) < 1e-15)
  end)

  it("follows PyTorch's convention: mul sends g conj(b), a real input keeps the real part", function()
    local a, b = c128({4}, 4):requires_grad_(true), c128({4}, 5)
    local g = c128({4}, 6)
    local ga = dle.grad(a * b, {a}, {grad_outputs = g})[1]
    assert.is_true(H.max_diff(dle.view_as_real(ga), dle.view_as_real(g * b:conj())) < 1e-15)
    local x = r64({4}, 7):requires_grad_(true)
    local gx = dle.grad(x * b, {x}, {grad_outputs = g})[1]
    assert.are.equal("float64", gx:dtype())
    assert.is_true(H.max_diff(gx, (g * b:conj()):real()) < 1e-15)
    -- a holomorphic function's tangent is f'(z) t (no conjugate forwards)
    local z, t = c128({3}, 8), c128({3}, 9)
    local _, tout = dle.jvp(function(u) return dle.exp(u) end, {z}, {t})
    assert.is_true(H.max_diff(dle.view_as_real(tout), dle.view_as_real(dle.exp(z) * t)) < 1e-15)
  end)

  it("gives abs and angle PyTorch's gradient at 0: zero, not nan", function()
    local z = dle.complex(dle.tensor({0, 3}, {dtype = "float64"}), dle.tensor({0, 4}, {dtype = "float64"}))
    z:requires_grad_(true)
    local g = dle.grad(dle.abs(z):sum() + dle.angle(z):sum(), {z})[1]
    -- at 3+4i: z/|z| + i z/|z|^2
    local want = {{0, 0}, {0.6 - 0.16, 0.8 + 0.12}}
    local got = dle.view_as_real(g):totable()
    for i = 1, 2 do
      for k = 1, 2 do assert.is_true(math.abs(got[i][k] - want[i][k]) < 1e-15, i .. "," .. k) end
    end
    assert.are.same({0, 0}, {dle.angle(z):totable()[1], dle.abs(z):totable()[1]})
  end)

  for _, case in ipairs(cases) do
    it(case[1] .. ": reverse and forward mode match finite differences (complex128, parts apart)", function()
      H.gradcheck(case[3], inputs_of(case))
    end)
  end

  -- the op fft (one dim per call) in its four kinds: c2c both ways, r2c, c2r
  for _, norm in ipairs({"backward", "ortho", "forward"}) do
    it("the op fft (c2c, inverse, r2c, c2r of odd and even lengths), norm " .. norm
       .. ", matches finite differences", function()
      local o = {norm = norm}
      H.gradcheck(function(z) return dle.fft.fft(z, nil, 2, o) end, {c128({2, 3}, 60)})
      H.gradcheck(function(z) return dle.fft.ifft(z, nil, 1, o) end, {c128({3, 2}, 61)})
      H.gradcheck(function(x) return dle.fft.rfft(x, nil, -1, o) end, {r64({2, 5}, 62)})
      H.gradcheck(function(z) return dle.fft.irfft(z, 5, -1, o) end, {c128({2, 3}, 63)})
      H.gradcheck(function(z) return dle.fft.irfft(z, 4, -1, o) end, {c128({3}, 64)})
    end)
  end

  it("keeps refusing complex inputs to ops without complex kernels when they require grad", function()
    local z = c128({2, 2}, 50):requires_grad_(true)
    H.assert_error(function() return dle.sigmoid(z) end, "sigmoid", "complex128")
    H.assert_error(function() return z:prod() end, "prod", "complex128")
  end)

  it("has second derivatives (the gradient of a gradient) matching finite differences", function()
    local f = function(a, b) return dle.abs(dle.exp(a) * b:conj() + a:matmul(b)):sum() end
    H.gradcheck(H.gradients_of(f), {c128({2, 2}, 51), c128({2, 2}, 52)}, {forward = false})
  end)

  it("gives a custom autograd.Function's complex result a gradient", function()
    local Twice = dle.autograd.Function{
      forward = function(_, z) return z * 2 end,
      backward = function(_, g) return g * 2 end,
    }
    local z = c128({3}, 53):requires_grad_(true)
    local y = Twice(z)
    assert.is_true(y.requires_grad)
    dle.view_as_real(y):sum():backward() -- L = sum(re y + im y): dL/dy = 1 + i
    assert.are.same({{2, 2}, {2, 2}, {2, 2}}, dle.view_as_real(z.grad):totable())
  end)

  it("matches PyTorch's gradients of every op in complex128", function()
    if H.without_torch(pending) then return end
    local list = {}
    for ci, case in ipairs(cases) do list[ci] = {name = case[1], ins = inputs_of(case), f = case[3], py = case[4]} end
    H.assert_torch_grads(list, 1e-12)
  end)
end)
