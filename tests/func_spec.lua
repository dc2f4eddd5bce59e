-- func_spec.lua — dle.func (torch.func-style transforms): jacobian in reverse and forward mode
-- against central finite differences in float64 and each other, several inputs and outputs, hessian
-- against finite differences of the gradient, grad / vjp / jvp, vmap against an explicit loop
-- (in_dims per argument, out_dims), option errors, and PyTorch's jacobian and hessian when torch
-- is installed.
local dle = require("dle")
local H = require("helpers")

local fn = dle.func
local x = H.seeded({3}, 1, -1, 1)
local A = H.seeded({2, 3}, 2, -1, 1)
local function f(v) return (A:matmul(v)):tanh() * v:sum() end

-- central differences of g at v: {out..., in...}
local function numeric_jacobian(g, v)
  local cols, eps = {}, 1e-6
  for k = 1, v:numel() do
    local d = dle.zeros(v:numel(), {dtype = "float64"})
    d[k] = eps
    d = d:reshape(v:shape())
    cols[k] = ((g(v + d) - g(v - d)) / (2 * eps)):reshape(-1)
  end
  return dle.stack(cols, 2)
end

describe("dle.func", function()
  it("jacobian: reverse and forward mode equal finite differences, shaped {out..., in...}", function()
    local num = numeric_jacobian(f, x)
    local jr = fn.jacobian(f, x)
    local jf = fn.jacobian(f, x, {strategy = "forward-mode", vectorize = true})
    assert.are.same({2, 3}, jr:shape())
    assert.is_true(H.max_diff(jr, num) < 1e-8)
    assert.is_true(H.max_diff(jf, jr) < 1e-14)
  end)

  it("jacobian of two inputs and two outputs gives J[i][j]", function()
    local J = fn.jacobian(function(a, b) return a * b, (a * a):sum() + b:sum() end, {x, x * 2})
    assert.are.same({3, 3}, J[1][2]:shape())
    assert.are.same({3}, J[2][1]:shape())
    assert.is_true(H.max_diff(J[1][1], dle.diag(x * 2)) < 1e-14)
    assert.is_true(H.max_diff(J[2][1], x * 2) < 1e-14)
  end)

  it("hessian equals finite differences of the gradient", function()
    local g = function(v) return ((v * v):sum() * v:sin()):sum() end
    local h = fn.hessian(g, x)
    local num = numeric_jacobian(fn.grad(g), x)
    assert.is_true(H.max_diff(h, num) < 1e-7)
  end)

  it("grad, vjp and jvp", function()
    local g = fn.grad(function(a, b) return (a * b):sum() end, {argnums = 2})
    assert.is_true(H.max_diff(g(x, x * 3), x) == 0)
    local out, vjp_fn = fn.vjp(f, x)
    assert.is_true(H.max_diff(out, f(x)) == 0)
    local w = H.seeded({2}, 3)
    assert.is_true(H.max_diff(vjp_fn(w), w:matmul(fn.jacobian(f, x))) < 1e-14)
    local _, t = fn.jvp(f, {x}, {w:matmul(A)})
    assert.is_true(H.max_diff(t, fn.jacobian(f, x):matmul(w:matmul(A))) < 1e-14)
  end)

  it("vmap maps over in_dims (nil: not mapped) and stacks along out_dims, as a loop does", function()
    local a, b = H.seeded({4, 2, 3}, 4), H.seeded({3, 5}, 5)
    local got = fn.vmap(function(u, v) return u:matmul(v) end, {in_dims = {1, nil}})(a, b)
    for i = 1, 4 do assert.is_true(H.max_diff(got[i], a[i]:matmul(b)) == 0) end
    local t = fn.vmap(function(u) return u:sum(1) end, {in_dims = 2, out_dims = 2})(a)
    assert.are.same({3, 2}, t:shape())
    assert.is_true(H.max_diff(t:select(2, 1), a:select(2, 1):sum(1)) == 0)
  end)

  it("options are checked", function()
    local ok, err = pcall(fn.jacobian, f, x, {strategy = "sideways"})
    assert.is_false(ok)
    assert.matches("func.jacobian: strategy must be", err)
    err = select(2, pcall(fn.jacobian, f, x, {bogus = 1}))
    assert.matches("unknown option", err)
    err = select(2, pcall(fn.vmap(function(u, v) return u + v end), dle.zeros(2, 3), dle.zeros(3, 3)))
    assert.matches("func.vmap: argument 2 has size 3", err)
  end)

  it("jacobian and hessian equal PyTorch's in float64", function()
    if H.without_torch(pending) then return end
    local out = H.run_torch({x = x, A = A}, {
      "from torch.autograd.functional import jacobian, hessian",
      "f = lambda v: (A @ v).tanh() * v.sum()",
      "p(jacobian(f, x))",
      "p(hessian(lambda v: ((v * v).sum() * v.sin()).sum(), x))"})
    H.assert_torch_numbers(H.flat(fn.jacobian(f, x):totable()), out[1], 1e-12, "jacobian")
    local h = fn.hessian(function(v) return ((v * v):sum() * v:sin()):sum() end, x)
    H.assert_torch_numbers(H.flat(h:totable()), out[2], 1e-12, "hessian")
  end)
end)
