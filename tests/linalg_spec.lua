-- linalg_spec.lua — dle.linalg's values and errors: each result checked by the identity that
-- defines it (A X = B, A inv(A) = I, L L^T = A, Q R = A with orthonormal Q, U S Vh = A, A Q = Q L)
-- and by known values, in float32 and float64, on batched, transposed (non-contiguous) and empty
-- inputs; a large batch (run in parallel) against each matrix alone; the norms, matrix_power, pinv,
-- lstsq and cross; errors naming the function, the batch element and the shapes; PyTorch's
-- values when python3-torch is there.
local dle = require("dle")
local H = require("helpers")
local L = dle.linalg

local F64 = {dtype = "float64"}

local function vals(shape, seed, dt)
  return dle.tensor(H.values(shape, {seed = seed, lo = -1, hi = 1}), {dtype = dt or "float64"})
end
local function wellcond(shape, seed, dt)
  local n = shape[#shape]
  return vals(shape, seed, dt) + dle.eye(n, {dtype = dt or "float64"}) * n
end
local function mT(x) return x:transpose(-2, -1) end
local function maxdiff(a, b) return (a - b):abs():max():item() end
local function eye_like(n, t) return dle.eye(n, {dtype = t:dtype()}) end

describe("dle.linalg", function()
  describe("solve", function()
    it("solves A X = B for a matrix B, a vector b, a batch and left = false", function()
      local A, B = wellcond({3, 3}, 1), vals({3, 2}, 2)
      assert.is_true(maxdiff(A:matmul(L.solve(A, B)), B) < 1e-12)
      local b = vals({3}, 3)
      local x = L.solve(A, b)
      assert.are.same({3}, x:shape())
      assert.is_true(maxdiff(A:matmul(x), b) < 1e-12)
      local Ab, Bb = wellcond({4, 3, 3}, 4), vals({4, 3}, 5)
      local xb = L.solve(Ab, Bb)
      assert.are.same({4, 3}, xb:shape())
      assert.is_true(maxdiff(Ab:matmul(xb:unsqueeze(-1)):squeeze(-1), Bb) < 1e-12)
      local Br = vals({2, 3}, 6)
      assert.is_true(maxdiff(L.solve(A, Br, {left = false}):matmul(A), Br) < 1e-12)
    end)

    it("broadcasts the batch dims of A and B, and takes transposed inputs", function()
      local A, B = wellcond({3, 3}, 7), vals({5, 3, 2}, 8)
      local X = L.solve(mT(A), B)
      assert.are.same({5, 3, 2}, X:shape())
      assert.is_true(maxdiff(mT(A):matmul(X), B) < 1e-12)
    end)

    it("works in float32", function()
      local A, B = wellcond({3, 3}, 9, "float32"), vals({3, 1}, 10, "float32")
      local X = L.solve(A, B)
      assert.are.equal("float32", X:dtype())
      assert.is_true(maxdiff(A:matmul(X), B) < 1e-5)
    end)

    it("rejects a singular A naming the batch element and shapes, and mismatched shapes", function()
      local A = wellcond({3, 2, 2}, 11)
      A[2]:copy_(dle.tensor({{1, 2}, {2, 4}}, F64))
      local ok, err = pcall(L.solve, A, vals({3, 2}, 12))
      assert.is_false(ok)
      assert.truthy(tostring(err):find("linalg.solve (batch element 2): the diagonal element 2 of U in the " ..
        "LU factorization is zero: the input matrix is singular (A has shape {3,2,2})", 1, true), err)
      assert.has_error(function() L.solve(wellcond({3, 3}, 1), vals({4, 2}, 1)) end,
        "linalg.solve: incompatible shapes of A and B for the equation AX = B ({3,3} and {4,2})")
      assert.has_error(function() L.solve(wellcond({3, 3}, 1), vals({3, 2}, 1, "float32")) end,
        "linalg.solve: A and B must have the same dtype, got float64 and float32")
    end)
  end)

  describe("inv, det and slogdet", function()
    it("inverts a batch: A inv(A) = I, and a transposed input", function()
      local A = wellcond({4, 3, 3}, 13)
      assert.is_true(maxdiff(A:matmul(L.inv(A)), eye_like(3, A)) < 1e-12)
      local At = mT(A)
      assert.is_false(At:is_contiguous())
      assert.is_true(maxdiff(L.inv(At), mT(L.inv(A))) < 1e-12)
    end)

    it("gives known determinants: 2x2, a permutation's sign, singular 0, empty 1", function()
      assert.are.equal(-2, L.det(dle.tensor({{1, 2}, {3, 4}}, F64)):item())
      assert.are.equal(-1, L.det(dle.tensor({{0, 1}, {1, 0}}, F64)):item())
      assert.are.equal(0, L.det(dle.tensor({{1, 2}, {2, 4}}, F64)):item())
      assert.are.equal(1, L.det(dle.zeros({0, 0}, F64)):item())
      assert.are.same({2, 0}, L.det(dle.zeros({2, 0, 3, 3}, F64)):shape())
      local d = L.det(dle.tensor({{{2, 0}, {0, 3}}, {{1, 1}, {0, -5}}}, F64))
      assert.are.same({6, -5}, d:totable())
    end)

    it("slogdet gives sign and log|det|, and sign 0 with -inf for a singular matrix", function()
      local A = vals({3, 4, 4}, 14)
      local s, l = L.slogdet(A)
      assert.is_true(maxdiff(s * l:exp(), L.det(A)) < 1e-12)
      s, l = L.slogdet(dle.tensor({{1, 2}, {2, 4}}, F64))
      assert.are.equal(0, s:item())
      assert.are.equal(-math.huge, l:item())
    end)

    it("inv rejects a singular matrix, naming linalg.inv and the shape", function()
      assert.has_error(function() L.inv(dle.tensor({{1, 2}, {2, 4}}, F64)) end,
        "linalg.inv: the diagonal element 2 of U in the LU factorization is zero: the input matrix is singular " ..
        "(A has shape {2,2})")
    end)
  end)

  describe("cholesky", function()
    local function spd(shape, seed)
      local x = vals(shape, seed)
      return x:matmul(mT(x)) + eye_like(shape[#shape], x)
    end
    it("returns the lower factor L with L L^T = A (a batch), and U with U^T U = A for upper", function()
      local A = spd({3, 4, 4}, 15)
      local Lf = L.cholesky(A)
      assert.is_true(maxdiff(Lf, Lf:tril()) == 0)
      assert.is_true(maxdiff(Lf:matmul(mT(Lf)), A) < 1e-12)
      local U = L.cholesky(A, {upper = true})
      assert.is_true(maxdiff(U, U:triu()) == 0)
      assert.is_true(maxdiff(mT(U):matmul(U), A) < 1e-12)
    end)

    it("rejects a matrix that is not positive-definite, naming the batch element and the minor", function()
      local A = spd({2, 3, 3}, 16)
      A[2]:copy_(-A[2])
      assert.has_error(function() L.cholesky(A) end,
        "linalg.cholesky (batch element 2): the factorization could not be completed because the input is " ..
        "not positive-definite (the leading minor of order 1 is not positive-definite; A has shape {2,3,3})")
    end)
  end)

  describe("qr", function()
    it("reduced: Q with orthonormal columns, R upper triangular, Q R = A (tall, wide, batched)", function()
      for _, shape in ipairs({{5, 3}, {3, 5}, {2, 4, 4}}) do
        local A = vals(shape, 17)
        local Q, R = L.qr(A)
        local k = math.min(shape[#shape - 1], shape[#shape])
        assert.are.equal(k, Q:size(-1))
        assert.are.equal(k, R:size(-2))
        assert.is_true(maxdiff(mT(Q):matmul(Q), eye_like(k, A)) < 1e-12)
        assert.is_true(maxdiff(R, R:triu()) == 0)
        assert.is_true(maxdiff(Q:matmul(R), A) < 1e-12)
      end
    end)

    it("complete gives a square orthogonal Q; 'r' gives R and an empty Q", function()
      local A = vals({5, 3}, 18)
      local Q, R = L.qr(A, "complete")
      assert.are.same({5, 5}, Q:shape())
      assert.are.same({5, 3}, R:shape())
      assert.is_true(maxdiff(mT(Q):matmul(Q), eye_like(5, A)) < 1e-12)
      assert.is_true(maxdiff(Q:matmul(R), A) < 1e-12)
      local Q0, R0 = L.qr(A, {mode = "r"})
      assert.are.equal(0, Q0:numel())
      assert.is_true(maxdiff(R0:abs(), L.qr(A)[2] and select(2, L.qr(A)):abs()) < 1e-12)
      assert.has_error(function() L.qr(A, "full") end,
        "linalg.qr: mode must be 'reduced', 'complete' or 'r', got full")
    end)
  end)

  describe("svd, svdvals", function()
    it("U diag(S) Vh = A with orthonormal U, Vh and descending S (reduced and full, batched)", function()
      local A = vals({2, 5, 3}, 19)
      local U, S, Vh = L.svd(A, {full_matrices = false})
      assert.are.same({2, 5, 3}, U:shape())
      assert.are.same({2, 3}, S:shape())
      assert.are.same({2, 3, 3}, Vh:shape())
      assert.is_true(maxdiff((U * S:unsqueeze(-2)):matmul(Vh), A) < 1e-12)
      assert.is_true(maxdiff(mT(U):matmul(U), eye_like(3, A)) < 1e-12)
      local s = S:totable()
      for b = 1, 2 do assert.is_true(s[b][1] >= s[b][2] and s[b][2] >= s[b][3]) end
      local Uf, Sf, Vhf = L.svd(A)
      assert.are.same({2, 5, 5}, Uf:shape())
      assert.are.same({2, 3, 3}, Vhf:shape())
      assert.is_true(maxdiff(mT(Uf):matmul(Uf), eye_like(5, A)) < 1e-12)
      assert.is_true(maxdiff(Sf, S) < 1e-12)
      assert.is_true(maxdiff(L.svdvals(A), S) < 1e-12)
    end)

    it("gives the known singular values of a diagonal matrix, and of an empty one", function()
      local S = L.svdvals(dle.tensor({{0, -3}, {2, 0}}, F64))
      assert.are.same({3, 2}, S:totable())
      local U, S0, Vh = L.svd(dle.zeros({3, 0}, F64))
      assert.are.same({3, 3}, U:shape())
      assert.are.equal(0, S0:numel())
      assert.are.same({0, 0}, Vh:shape())
      assert.is_true(maxdiff(U, eye_like(3, U)) == 0)
    end)
  end)

  describe("eigh, eigvalsh", function()
    it("A Q = Q diag(L) with orthonormal Q and ascending L (a batch)", function()
      local x = vals({3, 4, 4}, 20)
      local A = x + mT(x)
      local W, Q = L.eigh(A)
      assert.is_true(maxdiff(A:matmul(Q), Q * W:unsqueeze(-2)) < 1e-12)
      assert.is_true(maxdiff(mT(Q):matmul(Q), eye_like(4, A)) < 1e-12)
      local w = W:totable()
      for b = 1, 3 do for i = 1, 3 do assert.is_true(w[b][i] <= w[b][i + 1]) end end
      assert.is_true(maxdiff(L.eigvalsh(A), W) < 1e-12)
    end)

    it("reads the lower triangle, or the upper one with UPLO = 'U'", function()
      local A = dle.tensor({{2, 100}, {1, 2}}, F64)
      assert.is_true(maxdiff(L.eigvalsh(A), dle.tensor({1, 3}, F64)) < 1e-12)
      assert.is_true(maxdiff(L.eigvalsh(A, {UPLO = "U"}), dle.tensor({-98, 102}, F64)) < 1e-12)
      assert.has_error(function() L.eigh(A, {UPLO = "X"}) end, "linalg.eigh: UPLO must be 'L' or 'U', got X")
    end)
  end)

  it("runs a large batch in parallel with the results of each matrix alone", function()
    H.keep_threads(finally)
    dle.set_num_threads(2)
    local A = wellcond({33, 5, 5}, 21)
    local inv, det = L.inv(A), L.det(A)
    local _, S = L.svd(A)
    local W = L.eigvalsh(A + mT(A))
    for b = 1, 33, 8 do
      assert.is_true(maxdiff(inv[b], L.inv(A[b])) < 1e-13)
      assert.is_true(maxdiff(det[b], L.det(A[b])) < 1e-13)
      assert.is_true(maxdiff(S[b], L.svdvals(A[b])) < 1e-13)
      assert.is_true(maxdiff(W[b], L.eigvalsh(A[b] + mT(A[b]))) < 1e-13)
    end
  end)

  describe("norms", function()
    it("vector_norm: ord 2, 1, inf, -inf, 0, 3, over dims and with keepdim", function()
      local v = dle.tensor({3, -4, 0}, F64)
      assert.are.equal(5, L.vector_norm(v):item())
      assert.are.equal(7, L.vector_norm(v, 1):item())
      assert.are.equal(4, L.vector_norm(v, math.huge):item())
      assert.are.equal(0, L.vector_norm(v, -math.huge):item())
      assert.are.equal(2, L.vector_norm(v, 0):item())
      assert.is_true(math.abs(L.vector_norm(v, 3):item() - (27 + 64) ^ (1 / 3)) < 1e-12)
      local m = dle.tensor({{3, 4}, {6, 8}}, F64)
      assert.are.same({5, 10}, L.vector_norm(m, 2, 2):totable())
      assert.are.same({2, 1}, L.vector_norm(m, 2, 2, {keepdim = true}):shape())
    end)

    it("matrix_norm: fro, nuc, 2, -2, 1, -1, inf, -inf, other dims and keepdim", function()
      local A = dle.tensor({{1, -2}, {3, 4}}, F64)
      local S = L.svdvals(A):totable()
      assert.is_true(math.abs(L.matrix_norm(A):item() - math.sqrt(30)) < 1e-12)
      assert.is_true(math.abs(L.matrix_norm(A, "nuc"):item() - (S[1] + S[2])) < 1e-12)
      assert.is_true(math.abs(L.matrix_norm(A, 2):item() - S[1]) < 1e-12)
      assert.is_true(math.abs(L.matrix_norm(A, -2):item() - S[2]) < 1e-12)
      assert.are.equal(6, L.matrix_norm(A, 1):item())
      assert.are.equal(4, L.matrix_norm(A, -1):item())
      assert.are.equal(7, L.matrix_norm(A, math.huge):item())
      assert.are.equal(3, L.matrix_norm(A, -math.huge):item())
      local B = vals({2, 3, 4}, 22)
      assert.is_true(maxdiff(L.matrix_norm(B, "fro", {1, 3}), L.matrix_norm(B:permute(2, 1, 3))) < 1e-12)
      assert.are.same({1, 3, 1}, L.matrix_norm(B, "fro", {1, 3}, {keepdim = true}):shape())
      assert.has_error(function() L.matrix_norm(A, 3) end,
        "linalg.matrix_norm: ord must be 'fro', 'nuc', 2, -2, 1, -1, math.huge or -math.huge, got 3")
    end)

    it("norm: a vector norm of all elements by default, a matrix norm for a string ord or 2-D input", function()
      local A = dle.tensor({{1, -2}, {3, 4}}, F64)
      assert.is_true(math.abs(L.norm(A):item() - math.sqrt(30)) < 1e-12)
      assert.are.equal(6, L.norm(A, 1):item())
      assert.are.same({4, 6}, L.norm(A, 1, 1):totable())
      assert.are.equal(4, L.norm(dle.tensor({1, -2, 3, 4}, F64), math.huge):item())
      assert.has_error(function() L.norm(vals({2, 2, 2}, 1), 1) end,
        "linalg.norm: with ord and no dim, A must be 1-D or 2-D, got shape {2,2,2}")
    end)
  end)

  it("matrix_power: 0 is the identity (batched), 3 is A A A, -2 is inv(A)^2", function()
    local A = wellcond({2, 3, 3}, 23)
    assert.is_true(maxdiff(L.matrix_power(A, 0), eye_like(3, A):expand(2, 3, 3)) == 0)
    assert.is_true(maxdiff(L.matrix_power(A, 3), A:matmul(A):matmul(A)) < 1e-9)
    local Ai = L.inv(A)
    assert.is_true(maxdiff(L.matrix_power(A, -2), Ai:matmul(Ai)) < 1e-12)
    assert.has_error(function() L.matrix_power(vals({2, 3}, 1), 2) end,
      "linalg.matrix_power: A must be batches of square matrices, but they are 2 by 3 matrices (shape {2,3})")
  end)

  it("pinv: the Moore-Penrose conditions, inv for an invertible matrix, a rank-deficient one", function()
    local A = vals({5, 3}, 24)
    local P = L.pinv(A)
    assert.are.same({3, 5}, P:shape())
    assert.is_true(maxdiff(A:matmul(P):matmul(A), A) < 1e-12)
    assert.is_true(maxdiff(P:matmul(A):matmul(P), P) < 1e-12)
    local B = wellcond({3, 3}, 25)
    assert.is_true(maxdiff(L.pinv(B), L.inv(B)) < 1e-12)
    local R = dle.tensor({{1, 2}, {2, 4}}, F64) -- rank 1: pinv = A^T / ||A||_F^2
    assert.is_true(maxdiff(L.pinv(R), mT(R) / 25) < 1e-12)
  end)

  it("lstsq: the normal equations' solution, residuals and rank of an overdetermined system", function()
    local A, B = vals({6, 3}, 26), vals({6, 2}, 27)
    local X, res, rank, S = L.lstsq(A, B)
    local want = L.solve(mT(A):matmul(A), mT(A):matmul(B))
    assert.is_true(maxdiff(X, want) < 1e-12)
    local r = A:matmul(X) - B
    assert.is_true(maxdiff(res, (r * r):sum(1)) < 1e-12)
    assert.are.equal(3, rank:item())
    assert.is_true(maxdiff(S, L.svdvals(A)) < 1e-12)
    local x = L.lstsq(A, B:select(2, 1))
    assert.is_true(maxdiff(x, X:select(2, 1)) < 1e-12)
  end)

  it("cross: the right-hand rule along the last dim or another, broadcast rows", function()
    local c = L.cross(dle.tensor({{1, 0, 0}, {0, 1, 0}}, F64), dle.tensor({{0, 1, 0}, {0, 0, 1}}, F64))
    assert.are.same({{0, 0, 1}, {1, 0, 0}}, c:totable())
    local a, b = vals({3, 2}, 28), vals({3, 2}, 29)
    assert.is_true(maxdiff(L.cross(a, b, {dim = 1}), mT(L.cross(mT(a), mT(b)))) < 1e-15)
    assert.has_error(function() L.cross(vals({2}, 1), vals({2}, 2)) end,
      "linalg.cross: a and b must have the same number of dims and size 3 in dim -1, got shapes {2} and {2}")
  end)

  it("rejects non-float dtypes, fewer than 2 dims and non-square matrices, naming the function", function()
    assert.has_error(function() L.inv(dle.ones({2, 2}, {dtype = "int64"})) end,
      "linalg.inv: expected A of dtype float32 or float64, got int64 (shape {2,2})")
    assert.has_error(function() L.det(dle.ones({2, 2}, {dtype = "float16"})) end,
      "linalg.det: expected A of dtype float32 or float64, got float16 (shape {2,2})")
    assert.has_error(function() L.svd(dle.ones({3}, F64)) end,
      "linalg.svd: A must have at least 2 dims (a matrix or a batch of them), got shape {3}")
    assert.has_error(function() L.inv(dle.ones({2, 3}, F64)) end,
      "linalg.inv: A must be batches of square matrices, but they are 2 by 3 matrices (shape {2,3})")
    assert.has_error(function() L.cholesky(dle.ones({4, 2, 3}, F64)) end,
      "linalg.cholesky: A must be batches of square matrices, but they are 2 by 3 matrices (shape {4,2,3})")
  end)

  it("rejects a NaN input naming the function, the batch element and the shape (LAPACK refuses NaN)", function()
    local A = wellcond({2, 2, 2}, 31)
    A[2][1][1] = 0 / 0
    for _, f in ipairs({"inv", "det", "cholesky", "svdvals", "eigvalsh"}) do
      local ok, err = pcall(L[f], A)
      assert.is_false(ok, f)
      assert.truthy(tostring(err):find("(batch element 2): the input contains NaN", 1, true), err)
    end
  end)

  it("counts FLOPs per matrix: inv of a {2,4,4} batch is 2 * 2 n^3", function()
    local A = wellcond({2, 4, 4}, 32)
    assert.are.equal(2 * 2 * 4 ^ 3, dle.flops(function() return L.inv(A) end))
    assert.are.equal("per/3 * m*n^2 per matrix", (dle.core._op_flops_rule("linalg_inv")))
  end)

  it("matches PyTorch's values in float64 (determinants, inverses, singular values, eigenvalues, norms)", function()
    if H.without_torch(pending) then return end
    local A = wellcond({2, 3, 3}, 30)
    local out = H.run_torch({a = A}, {
      "L = torch.linalg",
      "vals = [L.det(a), L.inv(a), L.svdvals(a), L.eigvalsh(a + a.mT), L.norm(a), L.matrix_norm(a, 'nuc'),",
      "        L.pinv(a), L.cholesky(a @ a.mT), L.solve(a, a[..., 0])]",
      "print(' '.join(repr(float(v)) for t in vals for v in t.reshape(-1)))",
    })
    local mine = {L.det(A), L.inv(A), L.svdvals(A), L.eigvalsh(A + mT(A)), L.norm(A), L.matrix_norm(A, "nuc"),
                  L.pinv(A), L.cholesky(A:matmul(mT(A))), L.solve(A, A:select(3, 1))}
    local flat = {}
    for _, t in ipairs(mine) do
      for _, v in ipairs(t:reshape(-1):totable()) do flat[#flat + 1] = v end
    end
    H.assert_torch_numbers(flat, out[1], 1e-10, "element")
  end)
end)
