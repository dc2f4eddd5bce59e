-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- Matrix products (implemented in C, bindings/lua_matmul.c; BLAS for float32/float64).
-- Each is `dle.NAME(a, b)` and `a:NAME(b)`; all but addmm take an options table
-- `{out = t}` that writes the result into t (and returns t). Operands are promoted as the
-- elementwise ops promote them (int64 with float32 gives float32); shapes that do not fit are an
-- error naming the function and both shapes. All are differentiable. `dle.einsum` is in einsum.
-- @module tensor.linalg

--- Returns the matrix product of a and b, with PyTorch's rules for 1-D, 2-D and batched operands.
-- 1-D x 1-D: the dot product (0-dim); 2-D x 1-D: matrix-vector; 1-D x 2-D: vector-matrix;
-- 2-D x 2-D: the matrix product; more dims: a batch of matrix products over the leading dims,
-- which broadcast (`{5, 2, 3} x {3, 4}` is `{5, 2, 4}`). Also `a:matmul(b)`.
-- @function dle.matmul
-- @tparam dle.Tensor a
-- @tparam dle.Tensor b
-- @param[opt] opts `{out = tensor}`
-- @treturn dle.Tensor
-- @usage local y = x:matmul(w:t())
-- dle.matmul(dle.ones(2, 3), dle.ones(4, 5))
-- --> error: matmul: shapes {2,3} and {4,5} are not aligned (3 vs 4)

--- Returns the product of two 2-D matrices {n, k} x {k, m} = {n, m} (no broadcasting).
-- Also `a:mm(b)`. Other ranks are an error naming `mm`; `matmul` takes them.
-- @function dle.mm
-- @tparam dle.Tensor a 2-D
-- @tparam dle.Tensor b 2-D
-- @param[opt] opts `{out = tensor}`
-- @treturn dle.Tensor 2-D

--- Returns the batched matrix product {B, n, k} x {B, k, m} = {B, n, m} of 3-D tensors.
-- Also `a:bmm(b)`. Other ranks are an error naming `bmm`.
-- @function dle.bmm
-- @tparam dle.Tensor a 3-D
-- @tparam dle.Tensor b 3-D
-- @param[opt] opts `{out = tensor}`
-- @treturn dle.Tensor 3-D

--- Returns the matrix-vector product {n, k} x {k} = {n}. Also `a:mv(v)`.
-- @function dle.mv
-- @tparam dle.Tensor a 2-D
-- @tparam dle.Tensor v 1-D
-- @param[opt] opts `{out = tensor}`
-- @treturn dle.Tensor 1-D

--- Returns the dot product of two 1-D tensors of the same length, as a 0-dim tensor.
-- Also `a:dot(b)`.
-- @function dle.dot
-- @tparam dle.Tensor a 1-D
-- @tparam dle.Tensor b 1-D
-- @param[opt] opts `{out = tensor}`
-- @treturn dle.Tensor 0-dim

--- Returns the outer product of two 1-D tensors: r[i][j] = a[i] * b[j].
-- Computed as a broadcast multiply (exact, no sum). Also `a:outer(b)`, and `ger` (its old name).
-- @function dle.outer
-- @tparam dle.Tensor a 1-D {n}
-- @tparam dle.Tensor b 1-D {m}
-- @param[opt] opts `{out = tensor}`
-- @treturn dle.Tensor {n, m}

--- Returns matmul(a, b) + c, with c broadcast to the product's shape, in one product.
-- For float32/float64 the product accumulates into c inside gemm (no separate add); any shapes
-- matmul takes work. `dle.nn.Linear` runs on it (bias, x, weight^T). Method form: `c:addmm(a, b)`.
-- @function dle.addmm
-- @tparam dle.Tensor c the addend
-- @tparam dle.Tensor a
-- @tparam dle.Tensor b
-- @treturn dle.Tensor
-- @usage local y = dle.addmm(bias, x, w:t())   -- x w^T + bias
