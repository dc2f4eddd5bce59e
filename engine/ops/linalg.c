/* linalg.c — shape and dtype rules of the linalg family (kind LINALG in ops.def): solve, inv, det,
 * slogdet, cholesky, qr, svd, eigh of the matrices in the last two dims of a float32 or float64
 * tensor, batched over the leading dims. Gradient rules: ops/linalg_grad.c; kernels (LAPACK):
 * kernels/cpu/linalg.c; no CUDA kernels (kernels/cuda/cpu_only.txt).
 *
 * The kernels get contiguous inputs and fresh contiguous outputs (dle_dispatch_contiguous). solve
 * takes B {*,n,k} with exactly A's batch dims: dle.linalg.solve (lua/dle/linalg.lua) broadcasts
 * and handles a vector B. Errors name the function as PyTorch does: "linalg.inv: ...". */
#include "../internal.h"

/* "linalg.inv" for DLE_OP_LINALG_INV (the op's name "linalg_inv" with the dot back). */
static const char *fn_name(dle_op op, char buf[32]) {
  snprintf(buf, 32, "linalg.%s", dle_op_get_info(op)->name + 7);
  return buf;
}

static dle_status float_matrix(const char *fn, const char *what, const dle_tensor *x) {
  if (x->dtype != DLE_F32 && x->dtype != DLE_F64)
    return dle_error("%s: expected %s of dtype float32 or float64, got %s (shape %s)", fn, what,
                     dle_dtype_name(x->dtype), SHAPE(x));
  if (x->ndim < 2)
    return dle_error(
        "%s: expected %s with at least 2 dims (a matrix or a batch of them), got shape %s", fn,
        what, SHAPE(x));
  return DLE_OK;
}

static dle_status square(const char *fn, const char *what, const dle_tensor *x) {
  DLE_TRY(float_matrix(fn, what, x));
  if (x->sizes[x->ndim - 1] != x->sizes[x->ndim - 2])
    return dle_error(
        "%s: %s must be batches of square matrices, but they are %lld by %lld matrices (shape %s)",
        fn, what, (long long)x->sizes[x->ndim - 2], (long long)x->sizes[x->ndim - 1], SHAPE(x));
  return DLE_OK;
}

/* res = x's batch dims followed by the `nd` sizes given. */
static void batch_then(dle_result_spec *res, const dle_tensor *x, int nd, int64_t s0, int64_t s1,
                       dle_dtype dt) {
  res->ndim = x->ndim - 2 + nd;
  for (int i = 0; i < x->ndim - 2; i++) res->sizes[i] = x->sizes[i];
  if (nd > 0) res->sizes[x->ndim - 2] = s0;
  if (nd > 1) res->sizes[x->ndim - 1] = s1;
  res->dtype = dt;
}

DLE_FORWARD_RULE(linalg) {
  char buf[32];
  const char *fn = fn_name(op, buf);
  dle_tensor *x = ins[0];
  dle_dtype dt = x->dtype;
  int64_t m = x->ndim >= 2 ? x->sizes[x->ndim - 2] : 0,
          n = x->ndim >= 2 ? x->sizes[x->ndim - 1] : 0;
  int64_t k = m < n ? m : n;
  dle_result_spec res[3];
  dle_dtype in_dt[2] = {dt, dt};
  switch (op) {
    case DLE_OP_LINALG_SOLVE: {
      dle_tensor *b = ins[1];
      DLE_TRY(square(fn, "A", x));
      DLE_TRY(float_matrix(fn, "B", b));
      if (b->dtype != dt)
        return dle_error("%s: A and B must have the same dtype, got %s and %s", fn,
                         dle_dtype_name(dt), dle_dtype_name(b->dtype));
      if (b->ndim != x->ndim || b->sizes[b->ndim - 2] != n ||
          !dle_shape_equal(x->ndim - 2, x->sizes, b->ndim - 2, b->sizes))
        return dle_error("%s: incompatible shapes of A and B for the equation AX = B (%s and %s)",
                         fn, SHAPE(x), SHAPE(b));
      batch_then(&res[0], b, 2, n, b->sizes[b->ndim - 1], dt);
      break;
    }
    case DLE_OP_LINALG_INV:
    case DLE_OP_LINALG_CHOLESKY:
      DLE_TRY(square(fn, "A", x));
      batch_then(&res[0], x, 2, n, n, dt);
      break;
    case DLE_OP_LINALG_DET:
      DLE_TRY(square(fn, "A", x));
      batch_then(&res[0], x, 0, 0, 0, dt);
      break;
    case DLE_OP_LINALG_SLOGDET:
      DLE_TRY(square(fn, "A", x));
      batch_then(&res[0], x, 0, 0, 0, dt);
      batch_then(&res[1], x, 0, 0, 0, dt);
      break;
    case DLE_OP_LINALG_EIGH:
      DLE_TRY(square(fn, "A", x));
      batch_then(&res[0], x, 1, n, 0, dt);
      batch_then(&res[1], x, 2, n, n, dt);
      break;
    case DLE_OP_LINALG_QR: {
      DLE_TRY(float_matrix(fn, "A", x));
      int64_t qc = a->ints[0] ? m : k; /* complete: Q is m x m, R m x n */
      batch_then(&res[0], x, 2, m, qc, dt);
      batch_then(&res[1], x, 2, qc, n, dt);
      break;
    }
    case DLE_OP_LINALG_SVD: {
      DLE_TRY(float_matrix(fn, "A", x));
      bool full = a->ints[0];
      batch_then(&res[0], x, 2, m, full ? m : k, dt);
      batch_then(&res[1], x, 1, k, 0, dt);
      batch_then(&res[2], x, 2, full ? n : k, n, dt);
      break;
    }
    default: return dle_error("%s: not a linalg op", fn);
  }
  for (int i = 0; i < nin; i++) /* LAPACK indexes with 32-bit ints */
    if (ins[i]->sizes[ins[i]->ndim - 1] > INT32_MAX || ins[i]->sizes[ins[i]->ndim - 2] > INT32_MAX)
      return dle_error("%s: matrices of shape %s are too large for LAPACK (32-bit sizes)", fn,
                       SHAPE(ins[i]));
  return dle_dispatch_contiguous(op, outs, res, ins, nin, in_dt, a);
}

/* FLOPs: the leading term of the textbook count of each factorization of an m x n matrix (n the
 * smaller size), as per/3 * m n^2 per matrix: LU 2/3 n^3 (det, slogdet, solve, plus its
 * substitutions' 2 n^2 k), inv 2 n^3, Cholesky 1/3 n^3, Householder QR 2 m n^2, SVD with vectors
 * about 12 m n^2, symmetric eigendecomposition with vectors about 9 n^3 (Golub and Van Loan). */
static int64_t linalg_count(const dle_flops_call *c, int per) {
  const dle_tensor *x = c->ins[0];
  if (x->ndim < 2) return 0;
  int64_t r = x->sizes[x->ndim - 2], s = x->sizes[x->ndim - 1];
  int64_t n = r < s ? r : s, m = r < s ? s : r, batch = n ? dle_tensor_numel(x) / (r * s) : 0;
  int64_t subst = c->nin > 1 ? 2 * n * n * c->ins[1]->sizes[c->ins[1]->ndim - 1] : 0;
  return batch * (per * m * n * n / 3 + subst);
}

dle_flops_rule dle_flops_linalg(dle_op op) {
  int per = op == DLE_OP_LINALG_INV        ? 6
            : op == DLE_OP_LINALG_CHOLESKY ? 1
            : op == DLE_OP_LINALG_QR       ? 6
            : op == DLE_OP_LINALG_SVD      ? 36
            : op == DLE_OP_LINALG_EIGH     ? 27
                                           : 2;
  return (dle_flops_rule){"per/3 * m*n^2 per matrix", linalg_count, per};
}
