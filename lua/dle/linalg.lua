--- dle.linalg: PyTorch's torch.linalg for float32 and float64 tensors, batched over the leading
-- dims (the matrices are the last two). solve, inv, det, slogdet, cholesky, qr, svd and eigh are ops
-- of the op table with LAPACK kernels and their own gradient rules (engine/ops/linalg*.c); the rest
-- are compositions of ops, differentiated through their parts. Keyword arguments of PyTorch go in a
-- trailing options table; dims are 1-based. Errors name the function as PyTorch does
-- ("linalg.inv: ..."), and a singular, non-positive-definite or non-square input is an error
-- naming the batch element (1-based) and the shape.
-- @module linalg

local check = require("dle.check")
local dle = require("dle")
local core = dle.core

local M = {}
local linalg = {}

local function fail(fmt, ...) check.error(string.format(fmt, ...)) end
local shape_str = check.shape_str

local function matrix_arg(A, fn, what)
  check.tensor(A, fn, what or "A")
  if A:dim() < 2 then
    fail("%s: %s must have at least 2 dims (a matrix or a batch of them), got shape %s", fn, what or "A",
      shape_str(A))
  end
  return A
end

-- A with its last two dims swapped.
local function mT(A) return A:transpose(-2, -1) end

-- The sizes of t's leading dims (all but the last `keep`).
local function batch_of(t, keep)
  local s, b = t:shape(), {}
  for i = 1, #s - keep do b[i] = s[i] end
  return b
end

-- Broadcasts two batch shapes (NumPy rules), or nil when they do not broadcast.
local function broadcast(a, b)
  local n, out = math.max(#a, #b), {}
  for i = 1, n do
    local x, y = a[#a - n + i] or 1, b[#b - n + i] or 1
    if x ~= y and x ~= 1 and y ~= 1 then return nil end
    out[i] = x == 1 and y or x
  end
  return out
end

-- t expanded to batch ++ its last `keep` sizes.
local function expand_batch(t, batch, keep)
  local s, sizes = t:shape(), {}
  for i, v in ipairs(batch) do sizes[i] = v end
  for i = #s - keep + 1, #s do sizes[#sizes + 1] = s[i] end
  return t:expand(sizes)
end

-- Runs the LAPACK op core._linalg_<name> on the CPU (there are no CUDA kernels): inputs on another
-- device are copied to the CPU and the results back (differentiable both ways). flag is the op's
-- boolean option.
local function lapack(name, flag, A, B)
  local f = core["_linalg_" .. name]
  local dev = A:device()
  if dev == "cpu" then
    if B then return f(A, B, flag) end
    return f(A, flag)
  end
  local outs
  if B then outs = table.pack(f(A:cpu(), B:cpu(), flag)) else outs = table.pack(f(A:cpu(), flag)) end
  for i = 1, outs.n do outs[i] = outs[i]:to(dev) end
  return table.unpack(outs, 1, outs.n)
end

--- Solves A X = B for X (or X A = B with `left = false`), A square and invertible; B is a batch
-- of matrices {*, n, k} or of vectors {*, n} (when B has one dim fewer than A), the batch dims
-- broadcast. A singular A is an error naming the batch element.
-- @tparam dle.Tensor A {*, n, n}
-- @tparam dle.Tensor B {*, n, k} or {*, n}
-- @param[opt] opts `{left = true}`
-- @treturn dle.Tensor X, B's shape (batch dims broadcast)
-- @usage local x = dle.linalg.solve(A, b)
function linalg.solve(A, B, opts)
  opts = check.options(opts, "linalg.solve", {"left"})
  matrix_arg(A, "linalg.solve")
  check.tensor(B, "linalg.solve", "B")
  if opts.left == false then
    -- X A = B  <=>  A^T X^T = B^T
    return mT(linalg.solve(mT(A), mT(matrix_arg(B, "linalg.solve", "B"))))
  end
  local vector = B:dim() == 1 or B:dim() == A:dim() - 1
  if vector then B = B:unsqueeze(-1) end
  local batch = broadcast(batch_of(A, 2), batch_of(B, 2))
  if not batch or B:dim() < 2 then
    fail("linalg.solve: incompatible shapes of A and B for the equation AX = B (%s and %s)", shape_str(A),
      shape_str(vector and B:squeeze(-1) or B))
  end
  local X = lapack("solve", false, expand_batch(A, batch, 2), expand_batch(B, batch, 2))
  return vector and X:squeeze(-1) or X
end

--- The inverse of each square matrix of A; a singular one is an error naming the batch element.
-- @tparam dle.Tensor A {*, n, n}
-- @treturn dle.Tensor {*, n, n}
function linalg.inv(A) return lapack("inv", false, matrix_arg(A, "linalg.inv")) end

--- The determinant of each square matrix of A (by LU). Its gradient needs A invertible.
-- @tparam dle.Tensor A {*, n, n}
-- @treturn dle.Tensor {*}
function linalg.det(A) return lapack("det", false, matrix_arg(A, "linalg.det")) end

--- The sign and the log of the absolute value of the determinant (sign 0 and logabsdet -inf for
-- a singular matrix). The gradient flows through logabsdet.
-- @tparam dle.Tensor A {*, n, n}
-- @treturn dle.Tensor sign {*}
-- @treturn dle.Tensor logabsdet {*}
function linalg.slogdet(A) return lapack("slogdet", false, matrix_arg(A, "linalg.slogdet")) end

--- The Cholesky factor L (lower triangular, A = L L^T) of each symmetric positive-definite matrix
-- of A, read from its lower triangle; with `upper = true` the upper factor U = L^T (A = U^T U).
-- A matrix that is not positive-definite is an error naming the batch element.
-- @tparam dle.Tensor A {*, n, n}
-- @param[opt] opts `{upper = false}`
-- @treturn dle.Tensor {*, n, n}
function linalg.cholesky(A, opts)
  opts = check.options(opts, "linalg.cholesky", {"upper"})
  local L = lapack("cholesky", false, matrix_arg(A, "linalg.cholesky"))
  return opts.upper and mT(L) or L
end

local QR_MODES = {reduced = true, complete = true, r = true}

--- The QR decomposition A = Q R (Householder, LAPACK geqrf/orgqr). `mode`: "reduced" (Q {*, m, k},
-- R {*, k, n}, k = min(m, n)), "complete" (Q {*, m, m}, R {*, m, n}) or "r" (R only; Q is empty).
-- Differentiable for mode "reduced" with m >= n.
-- @tparam dle.Tensor A {*, m, n}
-- @param[opt] mode a string, or an options table `{mode = "reduced"}`
-- @treturn dle.Tensor Q
-- @treturn dle.Tensor R
function linalg.qr(A, mode)
  if type(mode) == "table" then mode = check.options(mode, "linalg.qr", {"mode"}).mode end
  mode = mode or "reduced"
  if not QR_MODES[mode] then
    fail("linalg.qr: mode must be 'reduced', 'complete' or 'r', got %s", tostring(mode))
  end
  local Q, R = lapack("qr", mode == "complete", matrix_arg(A, "linalg.qr"))
  if mode == "r" then Q = dle.empty({0}, {dtype = A:dtype(), device = A:device()}) end
  return Q, R
end

--- The singular value decomposition A = U diag(S) Vh (LAPACK gesdd), S descending. With
-- `full_matrices = true` (the default, as in PyTorch) U is {*, m, m} and Vh {*, n, n}, otherwise
-- {*, m, k} and {*, k, n}, k = min(m, n). Differentiable with full_matrices = false (or square
-- A) when the singular values are distinct and nonzero; with repeated ones the gradient of U and
-- Vh is not defined (infinite), while that of S alone (svdvals) always is.
-- @tparam dle.Tensor A {*, m, n}
-- @param[opt] opts `{full_matrices = true}`
-- @treturn dle.Tensor U
-- @treturn dle.Tensor S {*, k}
-- @treturn dle.Tensor Vh
function linalg.svd(A, opts)
  opts = check.options(opts, "linalg.svd", {"full_matrices"})
  return lapack("svd", opts.full_matrices ~= false, matrix_arg(A, "linalg.svd"))
end

--- The singular values of A, descending (those of svd with full_matrices = false).
-- @tparam dle.Tensor A {*, m, n}
-- @treturn dle.Tensor {*, min(m, n)}
function linalg.svdvals(A)
  local _, S = lapack("svd", false, matrix_arg(A, "linalg.svdvals"))
  return S
end

local function uplo(opts, fn)
  opts = check.options(opts, fn, {"UPLO"})
  local u = opts.UPLO or "L"
  if u ~= "L" and u ~= "U" then fail("%s: UPLO must be 'L' or 'U', got %s", fn, tostring(u)) end
  return u == "U"
end

--- The eigenvalues (ascending) and orthonormal eigenvectors (columns) of each symmetric matrix of
-- A, read from its lower triangle (or upper with `UPLO = "U"`), by LAPACK syevd. The gradient is
-- that of a symmetric input (as PyTorch's) and needs distinct eigenvalues for the eigenvectors.
-- @tparam dle.Tensor A {*, n, n}
-- @param[opt] opts `{UPLO = "L"}`
-- @treturn dle.Tensor eigenvalues {*, n}
-- @treturn dle.Tensor eigenvectors {*, n, n}
function linalg.eigh(A, opts)
  local upper = uplo(opts, "linalg.eigh")
  return lapack("eigh", upper, matrix_arg(A, "linalg.eigh"))
end

--- The eigenvalues (ascending) of each symmetric matrix of A (eigh's first result).
-- @tparam dle.Tensor A {*, n, n}
-- @param[opt] opts `{UPLO = "L"}`
-- @treturn dle.Tensor {*, n}
function linalg.eigvalsh(A, opts)
  local upper = uplo(opts, "linalg.eigvalsh")
  return (lapack("eigh", upper, matrix_arg(A, "linalg.eigvalsh")))
end

-- dims as a list of 1-based dims (nil: all of t's)
local function dim_list(t, dim)
  if dim == nil then
    local all = {}
    for i = 1, t:dim() do all[i] = i end
    return all
  end
  return type(dim) == "table" and dim or {dim}
end

local INF = math.huge

--- The vector norm of x over dim (a dim, a list of dims, or nil: all elements): ord 2 (default),
-- any real p (sum |x|^p)^(1/p), math.huge (max |x|), -math.huge (min |x|) or 0 (number of
-- nonzeros). Differentiated through its parts: the gradient of the 2-norm of an all-zero vector is
-- NaN (PyTorch gives 0).
-- @tparam dle.Tensor x
-- @param[opt] ord number (default 2)
-- @param[opt] dim dim or list of dims (default: all)
-- @param[opt] opts `{keepdim = false}`
-- @treturn dle.Tensor
function linalg.vector_norm(x, ord, dim, opts)
  opts = check.options(opts, "linalg.vector_norm", {"keepdim"})
  check.tensor(x, "linalg.vector_norm", "x")
  ord = ord == nil and 2 or check.number(ord, "linalg.vector_norm", "ord")
  local dims, keep = dim_list(x, dim), opts.keepdim or false
  local a = x:abs()
  if ord == INF then return a:amax(dims, keep) end
  if ord == -INF then return a:amin(dims, keep) end
  if ord == 0 then return x:ne(0):to(x:dtype()):sum(dims, keep) end
  if ord == 1 then return a:sum(dims, keep) end
  if ord == 2 then return (x * x):sum(dims, keep):sqrt() end
  return (a ^ ord):sum(dims, keep) ^ (1 / ord)
end

-- A with its dims d1, d2 (1-based, may be negative) moved last; and a function putting them back
-- into a reduced result with keepdim.
local function matrix_dims(A, dim, fn)
  local n = A:dim()
  dim = dim or {-2, -1}
  if type(dim) ~= "table" or #dim ~= 2 then fail("%s: dim must be a list of 2 dims", fn) end
  check.integer(dim[1], fn, "dim[1]")
  check.integer(dim[2], fn, "dim[2]")
  local d1, d2 = dim[1] < 0 and dim[1] + n + 1 or dim[1], dim[2] < 0 and dim[2] + n + 1 or dim[2]
  if d1 < 1 or d1 > n or d2 < 1 or d2 > n or d1 == d2 then
    fail("%s: dims {%d,%d} are not two different dims of a tensor of shape %s", fn, dim[1], dim[2],
      shape_str(A))
  end
  local perm = {}
  for i = 1, n do if i ~= d1 and i ~= d2 then perm[#perm + 1] = i end end
  perm[#perm + 1], perm[#perm + 2] = d1, d2
  local function keep(r)
    local lo, hi = math.min(d1, d2), math.max(d1, d2)
    return r:unsqueeze(lo):unsqueeze(hi)
  end
  return A:permute(perm), keep
end

--- The matrix norm of A over the two dims `dim` (default the last two): ord "fro" (default),
-- "nuc" (sum of singular values), 2 / -2 (largest / smallest singular value), 1 / -1 (max / min
-- column sum of |A|), math.huge / -math.huge (max / min row sum of |A|).
-- @tparam dle.Tensor A {*, m, n}
-- @param[opt] ord "fro", "nuc" or a number
-- @param[opt] dim list of 2 dims (default {-2, -1})
-- @param[opt] opts `{keepdim = false}`
-- @treturn dle.Tensor
function linalg.matrix_norm(A, ord, dim, opts)
  local fn = "linalg.matrix_norm"
  opts = check.options(opts, fn, {"keepdim"})
  matrix_arg(A, fn)
  ord = ord == nil and "fro" or ord
  local B, keep = matrix_dims(A, dim, fn)
  local r
  if ord == "fro" then
    r = (B * B):sum({-2, -1}):sqrt()
  elseif ord == "nuc" then
    r = linalg.svdvals(B):sum(-1)
  elseif ord == 2 or ord == -2 then
    local S = linalg.svdvals(B)
    r = ord == 2 and S:amax(-1) or S:amin(-1)
  elseif ord == 1 or ord == -1 then
    local c = B:abs():sum(-2)
    r = ord == 1 and c:amax(-1) or c:amin(-1)
  elseif ord == INF or ord == -INF then
    local c = B:abs():sum(-1)
    r = ord == INF and c:amax(-1) or c:amin(-1)
  else
    fail("%s: ord must be 'fro', 'nuc', 2, -2, 1, -1, math.huge or -math.huge, got %s", fn, tostring(ord))
  end
  return opts.keepdim and keep(r) or r
end

--- PyTorch's linalg.norm: a matrix norm when ord is a string or dim is a list of 2 dims, or when
-- ord is given without dim for a 2-D A; otherwise a vector norm (of all elements when dim is
-- nil and ord is nil).
-- @tparam dle.Tensor A
-- @param[opt] ord
-- @param[opt] dim a dim or list of dims
-- @param[opt] opts `{keepdim = false}`
-- @treturn dle.Tensor
function linalg.norm(A, ord, dim, opts)
  opts = check.options(opts, "linalg.norm", {"keepdim"})
  check.tensor(A, "linalg.norm", "A")
  local matrix = type(ord) == "string" or (type(dim) == "table" and #dim == 2)
  if ord ~= nil and dim == nil then
    if A:dim() ~= 1 and A:dim() ~= 2 then
      fail("linalg.norm: with ord and no dim, A must be 1-D or 2-D, got shape %s", shape_str(A))
    end
    matrix = A:dim() == 2
  end
  if matrix then return linalg.matrix_norm(A, ord, dim, opts) end
  return linalg.vector_norm(A, ord, dim, opts)
end

--- A to the integer power n (matrix products by repeated squaring; n = 0 gives the identity, a
-- negative n the power of the inverse).
-- @tparam dle.Tensor A {*, n, n}
-- @int n
-- @treturn dle.Tensor {*, n, n}
function linalg.matrix_power(A, n)
  local fn = "linalg.matrix_power"
  matrix_arg(A, fn)
  n = check.integer(n, fn, "n")
  local s = A:shape()
  if s[#s] ~= s[#s - 1] then
    fail("%s: A must be batches of square matrices, but they are %d by %d matrices (shape %s)", fn,
      s[#s - 1], s[#s], shape_str(A))
  end
  if n == 0 then return dle.eye(s[#s], {dtype = A:dtype(), device = A:device()}):expand(s):clone() end
  if n < 0 then A, n = linalg.inv(A), -n end
  local result, base = nil, A
  while n > 0 do
    if n % 2 == 1 then result = result and result:matmul(base) or base end
    n = n // 2
    if n > 0 then base = base:matmul(base) end
  end
  return result
end

--- The Moore-Penrose pseudoinverse of A (from its SVD): singular values at most
-- max(atol, rtol * largest) count as zero; rtol defaults to max(m, n) * eps of A's dtype when
-- atol is not given, else 0. Differentiable where svd is (distinct singular values) and the rank
-- does not change.
-- @tparam dle.Tensor A {*, m, n}
-- @param[opt] opts `{rtol = nil, atol = nil, hermitian = false}`
-- @treturn dle.Tensor {*, n, m}
function linalg.pinv(A, opts)
  local fn = "linalg.pinv"
  opts = check.options(opts, fn, {"rtol", "atol", "hermitian"})
  matrix_arg(A, fn)
  local s = A:shape()
  local eps = A:dtype() == "float64" and 2.220446049250313e-16 or 1.1920928955078125e-07
  local atol = opts.atol or 0
  local rtol = opts.rtol or ((opts.atol == nil or opts.atol == 0) and math.max(s[#s], s[#s - 1]) * eps or 0)
  local U, S, Vh = lapack("svd", false, A)
  local cutoff = (S:amax(-1, true) * rtol):clamp(atol, nil)
  local keep = S:gt(cutoff)
  local safe = dle.where(keep, S, dle.ones_like(S))
  local Sinv = dle.where(keep, 1 / safe, dle.zeros_like(S))
  return (mT(Vh) * Sinv:unsqueeze(-2)):matmul(mT(U))
end

--- The least-squares solution X minimizing ||A X - B|| (the smallest such X when A is rank
-- deficient), computed as pinv(A) B (rcond: pinv's rtol). Returns, as PyTorch's gelsd driver:
-- the solution, the squared residual norms per column (when m > n and A has full rank, else an
-- empty tensor), the rank (int64) and the singular values.
-- @tparam dle.Tensor A {*, m, n}
-- @tparam dle.Tensor B {*, m, k} or {*, m}
-- @param[opt] opts `{rcond = nil, driver = nil}`
-- @treturn dle.Tensor solution {*, n, k}
-- @treturn dle.Tensor residuals
-- @treturn dle.Tensor rank
-- @treturn dle.Tensor singular_values
function linalg.lstsq(A, B, opts)
  local fn = "linalg.lstsq"
  opts = check.options(opts, fn, {"rcond", "driver"})
  matrix_arg(A, fn)
  check.tensor(B, fn, "B")
  local vector = B:dim() == A:dim() - 1
  local Bm = vector and B:unsqueeze(-1) or B
  local sa, sb = A:shape(), Bm:shape()
  if Bm:dim() < 2 or sb[#sb - 1] ~= sa[#sa - 1] then
    fail("%s: incompatible shapes of A and B: %s and %s (B must have as many rows as A)", fn, shape_str(A),
      shape_str(B))
  end
  local X = linalg.pinv(A, {rtol = opts.rcond}):matmul(Bm)
  local S = linalg.svdvals(A)
  local m, n = sa[#sa - 1], sa[#sa]
  local eps = A:dtype() == "float64" and 2.220446049250313e-16 or 1.1920928955078125e-07
  local tol = S:amax(-1, true) * (opts.rcond or math.max(m, n) * eps)
  local rank = S:gt(tol):long():sum(-1)
  local residuals = dle.empty({0}, {dtype = A:dtype(), device = A:device()})
  if m > n and rank:numel() > 0 and rank:min():item() == n then
    local R = A:matmul(X) - Bm
    residuals = (R * R):sum(-2)
    if vector then residuals = residuals:squeeze(-1) end
  end
  return vector and X:squeeze(-1) or X, residuals, rank, S
end

--- The cross product of 3-vectors along dim (default -1) of a and b (broadcast).
-- @tparam dle.Tensor a
-- @tparam dle.Tensor b
-- @param[opt] opts `{dim = -1}`
-- @treturn dle.Tensor
function linalg.cross(a, b, opts)
  local fn = "linalg.cross"
  opts = check.options(opts, fn, {"dim"})
  check.tensor(a, fn, "a")
  check.tensor(b, fn, "b")
  local dim = opts.dim or -1
  if a:dim() ~= b:dim() or a:size(dim) ~= 3 or b:size(dim) ~= 3 then
    fail("%s: a and b must have the same number of dims and size 3 in dim %d, got shapes %s and %s", fn, dim,
      shape_str(a), shape_str(b))
  end
  local i1 = dle.tensor({2, 3, 1}, {dtype = "int64", device = a:device()})
  local i2 = dle.tensor({3, 1, 2}, {dtype = "int64", device = a:device()})
  return a:index_select(dim, i1) * b:index_select(dim, i2) - a:index_select(dim, i2) * b:index_select(dim, i1)
end

-- dle.linalg: the functions above, public (errors at the user's line).
function M.install(d)
  d.linalg = check.export(linalg)
end

return M
