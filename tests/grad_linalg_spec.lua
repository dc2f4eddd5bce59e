-- covers: linalg_solve linalg_inv linalg_det linalg_slogdet linalg_cholesky linalg_qr linalg_svd linalg_eigh
-- grad_linalg_spec.lua — gradient rules (reverse and forward mode) of dle.linalg: float64
-- dle.gradcheck of the eight LAPACK ops and of the compositions (norms, matrix_power, pinv, lstsq,
-- cross) on well-conditioned random inputs, batched and non-contiguous (transposed) inputs;
-- symmetric inputs built as functions of the free input for cholesky and eigh (they read one
-- triangle); second derivatives; the documented limits (full QR / SVD, singular det) as errors;
-- PyTorch's gradients when python3-torch is there.
local dle = require("dle")
local H = require("helpers")
local L = dle.linalg

local F64 = {dtype = "float64"}

local function vals(shape, seed, lo, hi)
  return dle.tensor(H.values(shape, {seed = seed, lo = lo or -1, hi = hi or 1}), F64)
end
-- well-conditioned square matrices: random plus a multiple of the identity
local function wellcond(shape, seed)
  local n = shape[#shape]
  return vals(shape, seed) + dle.eye(n, F64) * n
end
local function mT(x) return x:transpose(-2, -1) end
-- a symmetric positive-definite matrix made from x (so the gradient reaches all of x)
local function spd(x) return x:matmul(mT(x)) + dle.eye(x:size(-1), F64) * x:size(-1) end
local function sym(x) return x + mT(x) end

local check = H.gradcheck

describe("gradients of dle.linalg", function()
  local cases = {
    {"solve with a matrix right-hand side", function(a, b) return L.solve(a, b) end,
      function() return {wellcond({3, 3}, 1), vals({3, 2}, 2)} end},
    {"solve with a batch of vector right-hand sides", function(a, b) return L.solve(a, b) end,
      function() return {wellcond({2, 3, 3}, 3), vals({2, 3}, 4)} end},
    {"solve with A broadcast over B's batch", function(a, b) return L.solve(a, b) end,
      function() return {wellcond({3, 3}, 33), vals({2, 3, 2}, 34)} end},
    {"solve with left = false", function(a, b) return L.solve(a, b, {left = false}) end,
      function() return {wellcond({3, 3}, 5), vals({2, 3}, 6)} end},
    {"inv of a batch", function(a) return L.inv(a) end, function() return {wellcond({2, 3, 3}, 7)} end},
    {"inv of a transposed (non-contiguous) input", function(a) return L.inv(mT(a)) end,
      function() return {wellcond({3, 3}, 8)} end},
    {"det of a batch", function(a) return L.det(a) end, function() return {wellcond({2, 3, 3}, 9)} end},
    {"det with a negative determinant", function(a) return L.det(a:index_select(1, dle.tensor({2, 1, 3},
      {dtype = "int64"}))) end, function() return {wellcond({3, 3}, 10)} end},
    {"slogdet's logabsdet", function(a) local _, l = L.slogdet(a); return l end,
      function() return {vals({2, 3, 3}, 11, -2, 2)} end},
    {"cholesky of a symmetric positive-definite batch", function(x) return L.cholesky(spd(x)) end,
      function() return {vals({2, 3, 3}, 12)} end},
    {"cholesky upper", function(x) return L.cholesky(spd(x), {upper = true}) end,
      function() return {vals({3, 3}, 13)} end},
    {"qr (reduced) of a tall matrix: Q and R", function(a) return L.qr(a) end,
      function() return {vals({4, 3}, 14)} end},
    {"qr of a square batch", function(a) return L.qr(a) end, function() return {vals({2, 3, 3}, 15)} end},
    {"qr of a transposed input", function(a) return L.qr(mT(a)) end, function() return {vals({2, 4}, 16)} end},
    {"svd (reduced) of a tall matrix: U, S and Vh", function(a) return L.svd(a, {full_matrices = false}) end,
      function() return {vals({4, 3}, 17)} end},
    {"svd (reduced) of a wide batch", function(a) return L.svd(a, {full_matrices = false}) end,
      function() return {vals({2, 2, 4}, 18)} end},
    {"svd of a square matrix with full_matrices", function(a) return L.svd(a) end,
      function() return {vals({3, 3}, 19)} end},
    {"svdvals", function(a) return L.svdvals(a) end, function() return {vals({3, 5}, 20)} end},
    {"eigh: eigenvalues and eigenvectors of a symmetric batch", function(x) return L.eigh(sym(x)) end,
      function() return {vals({2, 3, 3}, 21)} end},
    {"eigh with UPLO = 'U'", function(x) return L.eigh(sym(x), {UPLO = "U"}) end,
      function() return {vals({3, 3}, 22)} end},
    {"eigvalsh", function(x) return L.eigvalsh(sym(x)) end, function() return {vals({4, 4}, 23)} end},
    {"vector_norm ord 2, 3 and inf", function(x) return L.vector_norm(x), L.vector_norm(x, 3, 2),
      L.vector_norm(x, math.huge, 1) end, function() return {vals({3, 4}, 24)} end},
    {"matrix_norm fro, nuc, 2, 1 and inf", function(x) return L.matrix_norm(x), L.matrix_norm(x, "nuc"),
      L.matrix_norm(x, 2), L.matrix_norm(x, 1), L.matrix_norm(x, math.huge) end,
      function() return {vals({2, 3, 4}, 25)} end},
    {"norm", function(x) return L.norm(x), L.norm(x, "fro"), L.norm(x, 1, 2) end,
      function() return {vals({3, 4}, 26)} end},
    {"matrix_power 3, 0 and -2", function(a) return L.matrix_power(a, 3), L.matrix_power(a, -2) end,
      function() return {wellcond({2, 3, 3}, 27)} end},
    {"pinv of a tall matrix", function(a) return L.pinv(a) end, function() return {vals({4, 3}, 28)} end},
    {"lstsq of an overdetermined system", function(a, b) return (L.lstsq(a, b)) end,
      function() return {vals({5, 3}, 29), vals({5, 2}, 30)} end},
    {"cross", function(a, b) return L.cross(a, b) end, function() return {vals({2, 3}, 31), vals({2, 3}, 32)} end},
  }
  for _, c in ipairs(cases) do
    it(c[1] .. ": reverse and forward mode match finite differences", function()
      check(c[2], c[3]())
    end)
  end

  it("det's gradient is det(A) A^-T (closed form)", function()
    local a = wellcond({3, 3}, 40):requires_grad_()
    local g = dle.grad(L.det(a), {a})[1]
    local want = mT(L.inv(a:detach())) * L.det(a:detach())
    assert.is_true((g - want):abs():max():item() < 1e-12)
  end)

  it("eigh's gradient of the eigenvalues is Q diag(g) Q^T, symmetric", function()
    local a = sym(vals({4, 4}, 41)):requires_grad_()
    local w = vals({4}, 42)
    local g = dle.grad((L.eigvalsh(a) * w):sum(), {a})[1]
    local _, q = L.eigh(a:detach())
    local want = (q * w:unsqueeze(1)):matmul(mT(q))
    assert.is_true((g - want):abs():max():item() < 1e-12)
    assert.is_true((g - mT(g)):abs():max():item() < 1e-12)
  end)

  it("has second derivatives of inv, det, cholesky, qr, svd and eigh matching finite differences", function()
    local f = H.gradients_of(function(a)
      local _, r = L.qr(a)
      return L.inv(a):sum() + L.det(a) + L.cholesky(spd(a)):sum() + (r ^ 2):sum() +
        L.svdvals(a):sum() + (L.eigvalsh(sym(a)) ^ 2):sum()
    end)
    check(f, {wellcond({3, 3}, 43)}, {forward = false})
  end)

  it("refuses the derivatives it does not implement: complete qr of a tall matrix, full svd of a non-square one",
    function()
    local a = vals({4, 3}, 44):requires_grad_()
    local q = L.qr(a, "complete")
    local ok, err = pcall(function() q:sum():backward() end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("linalg.qr: the derivative is implemented only for mode 'reduced' with at " ..
      "least as many rows as columns (A has shape {4,3})", 1, true))
    local u = L.svd(a)
    ok, err = pcall(function() u:sum():backward() end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("linalg.svd: the derivative is implemented only for full_matrices = false", 1,
      true))
  end)

  it("the gradient of det at a singular matrix is inv's error", function()
    local a = dle.tensor({{1, 2}, {2, 4}}, F64):requires_grad_()
    local ok, err = pcall(function() L.det(a):backward() end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("linalg.inv: ", 1, true))
    assert.truthy(tostring(err):find("singular", 1, true))
  end)

  it("matches PyTorch's gradients of solve, inv, det, slogdet, cholesky, qr, svd and eigh in float64", function()
    if H.without_torch(pending) then return end
    local a, b, w = wellcond({3, 3}, 50), vals({3, 2}, 51), vals({3, 3}, 52)
    local out = H.run_python({
      "import torch",
      "a = " .. H.torch_literal(a) .. ".requires_grad_()",
      "b = " .. H.torch_literal(b),
      "w = " .. H.torch_literal(w),
      "L = torch.linalg",
      "s = a @ a.mT + 3 * torch.eye(3, dtype=torch.float64)",
      "y = (L.solve(a, b) * w[:, :2]).sum() + (L.inv(a) * w).sum() + L.det(a) + L.slogdet(a)[1]",
      "y = y + (L.cholesky(s) * w).sum() + (L.qr(a)[1] * w).sum() + (L.svd(a)[1] * w[0]).sum()",
      "y = y + (L.eigh(a + a.mT)[0] * w[1]).sum() + L.matrix_norm(a, 'nuc') + (L.pinv(a) * w).sum()",
      "y.backward()",
      "print(' '.join(repr(float(v)) for v in a.grad.reshape(-1)))",
    })
    local x = a:clone():requires_grad_()
    local s = x:matmul(mT(x)) + dle.eye(3, F64) * 3
    local _, r = L.qr(x)
    local _, sv = L.svd(x)
    local _, l = L.slogdet(x)
    local y = (L.solve(x, b) * w:narrow(2, 1, 2)):sum() + (L.inv(x) * w):sum() + L.det(x) + l +
      (L.cholesky(s) * w):sum() + (r * w):sum() + (sv * w[1]):sum() + (L.eigvalsh(sym(x)) * w[2]):sum() +
      L.matrix_norm(x, "nuc") + (L.pinv(x) * w):sum()
    H.assert_torch_numbers(dle.grad(y, {x})[1]:reshape(-1):totable(), out[1], 1e-9, "gradient element")
  end)
end)
