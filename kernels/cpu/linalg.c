/* linalg.c — CPU kernels of the linalg family (engine/ops/linalg.c), calling LAPACK through
 * LAPACKE (OpenBLAS provides LAPACK) in row-major layout, float32 and float64.
 *
 * Inputs are contiguous and outputs fresh and contiguous (the front door's
 * dle_dispatch_contiguous). Each matrix of the batch is copied into the output (or a scratch
 * copy) that LAPACK overwrites; the matrices of a batch run in parallel, OpenBLAS then on one
 * thread each. A matrix LAPACK rejects (singular in solve/inv, not positive-definite in
 * cholesky, no convergence in svd/eigh) fails the call with an error naming the function, the
 * first such batch element (1-based) and the input's shape, as PyTorch does. */
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

/* The first failure of a batch: the element (0-based) and LAPACK's info for it. */
typedef struct {
  int64_t batch;
  lapack_int info;
  bool oom;
} lin_fail;

static void note_failure(lin_fail *f, int64_t b, lapack_int info, bool oom) {
  _Pragma("omp critical(dle_linalg_fail)")
  {
    if (f->batch < 0 || b < f->batch) f->batch = b, f->info = info, f->oom = oom;
  }
}

/* The error of a failed batch element, worded per op. */
static dle_status failure(dle_op op, const dle_tensor *x, int64_t nbatch, const lin_fail *f) {
  char fn[32], shape[128], where[64] = "";
  snprintf(fn, sizeof fn, "linalg.%s", dle_op_get_info(op)->name + 7);
  dle_tensor_shape_str(shape, sizeof shape, x);
  if (nbatch > 1 || x->ndim > 2)
    snprintf(where, sizeof where, " (batch element %lld)", (long long)f->batch + 1);
  if (f->oom) return dle_error("%s%s: out of memory for a matrix of shape %s", fn, where, shape);
  if (f->info < 0)
    /* LAPACKE's own check: the only argument it can reject from us is a matrix holding NaN */
    return dle_error("%s%s: the input contains NaN (LAPACK rejected argument %d; input shape %s)",
                     fn, where, (int)-f->info, shape);
  switch (op) {
    case DLE_OP_LINALG_SOLVE:
    case DLE_OP_LINALG_INV:
      return dle_error(
          "%s%s: the diagonal element %d of U in the LU factorization is zero: the "
          "input matrix is singular (A has shape %s)",
          fn, where, (int)f->info, shape);
    case DLE_OP_LINALG_CHOLESKY:
      return dle_error(
          "%s%s: the factorization could not be completed because the input is not "
          "positive-definite (the leading minor of order %d is not positive-definite; "
          "A has shape %s)",
          fn, where, (int)f->info, shape);
    default:
      return dle_error(
          "%s%s: the algorithm failed to converge (%d off-diagonal elements did not "
          "converge to zero; A has shape %s)",
          fn, where, (int)f->info, shape);
  }
}

/* One matrix of each op, per dtype T with LAPACK prefix P; returns LAPACK's info (or
 * LAPACK_WORK_MEMORY_ERROR when a buffer could not be had). x points at the input matrix, o[] at
 * this matrix's part of each output. */
#define LINALG_TYPE(ID, T, P)                                                                     \
  static lapack_int lu_##P(T *a, lapack_int n, lapack_int *ipiv) {                                \
    return n ? LAPACKE_##P##getrf(LAPACK_ROW_MAJOR, n, n, a, n, ipiv) : 0;                        \
  }                                                                                               \
  /* det and slogdet from the LU factors: sign and log|det| (and det itself). */                  \
  static void det_##P(const T *lu, const lapack_int *ipiv, lapack_int n, T *sign, T *logabs,      \
                      T *det) {                                                                   \
    T s = 1, l = 0, d = 1;                                                                        \
    for (lapack_int i = 0; i < n; i++) {                                                          \
      T u = lu[(int64_t)i * n + i];                                                               \
      if (ipiv[i] != i + 1) s = -s, d = -d;                                                       \
      d *= u;                                                                                     \
      s = u > 0 ? s : u < 0 ? -s : 0;                                                             \
      l += (T)log(fabs((double)u));                                                               \
    }                                                                                             \
    *sign = s, *logabs = l, *det = d;                                                             \
  }                                                                                               \
  static lapack_int one_##P(dle_op op, const dle_attrs *at, T *const *o, const T *x, const T *b,  \
                            lapack_int m, lapack_int n, lapack_int k) {                           \
    size_t mn = (size_t)m * (size_t)n;                                                            \
    lapack_int mn_min = m < n ? m : n, info = 0;                                                  \
    T *a = malloc(sizeof(T) * (mn ? mn : 1) + sizeof(lapack_int) * (size_t)(n + 1) +              \
                  sizeof(T) * (size_t)(mn_min + 1));                                              \
    if (!a) return LAPACK_WORK_MEMORY_ERROR;                                                      \
    lapack_int *ipiv = (lapack_int *)(a + (mn ? mn : 1));                                         \
    T *tau = (T *)(ipiv + n + 1);                                                                 \
    switch (op) {                                                                                 \
      case DLE_OP_LINALG_SOLVE:                                                                   \
        memcpy(a, x, sizeof(T) * mn);                                                             \
        memcpy(o[0], b, sizeof(T) * (size_t)n * (size_t)k);                                       \
        if (n && k) info = LAPACKE_##P##gesv(LAPACK_ROW_MAJOR, n, k, a, n, ipiv, o[0], k);        \
        break;                                                                                    \
      case DLE_OP_LINALG_INV:                                                                     \
        memcpy(o[0], x, sizeof(T) * mn);                                                          \
        info = lu_##P(o[0], n, ipiv);                                                             \
        if (info == 0 && n) info = LAPACKE_##P##getri(LAPACK_ROW_MAJOR, n, o[0], n, ipiv);        \
        break;                                                                                    \
      case DLE_OP_LINALG_DET:                                                                     \
      case DLE_OP_LINALG_SLOGDET: {                                                               \
        memcpy(a, x, sizeof(T) * mn);                                                             \
        info = lu_##P(a, n, ipiv);                                                                \
        if (info > 0) info = 0; /* an exact zero pivot: det 0, still a result */                  \
        T sign, logabs, det;                                                                      \
        det_##P(a, ipiv, n, &sign, &logabs, &det);                                                \
        if (op == DLE_OP_LINALG_DET)                                                              \
          o[0][0] = det;                                                                          \
        else                                                                                      \
          o[0][0] = sign, o[1][0] = logabs;                                                       \
        break;                                                                                    \
      }                                                                                           \
      case DLE_OP_LINALG_CHOLESKY:                                                                \
        memcpy(o[0], x, sizeof(T) * mn);                                                          \
        if (n) info = LAPACKE_##P##potrf(LAPACK_ROW_MAJOR, 'L', n, o[0], n);                      \
        for (lapack_int i = 0; i < n; i++)                                                        \
          for (lapack_int j = i + 1; j < n; j++) o[0][(int64_t)i * n + j] = 0;                    \
        break;                                                                                    \
      case DLE_OP_LINALG_QR: {                                                                    \
        lapack_int qc = at->ints[0] ? m : mn_min; /* Q's columns, R's rows */                     \
        memcpy(a, x, sizeof(T) * mn);                                                             \
        if (mn) info = LAPACKE_##P##geqrf(LAPACK_ROW_MAJOR, m, n, a, n, tau);                     \
        for (lapack_int i = 0; i < m; i++)                                                        \
          for (lapack_int j = 0; j < qc; j++)                                                     \
            o[0][(int64_t)i * qc + j] = j < mn_min ? a[(int64_t)i * n + j] : 0;                   \
        for (lapack_int i = 0; i < qc; i++)                                                       \
          for (lapack_int j = 0; j < n; j++)                                                      \
            o[1][(int64_t)i * n + j] = j >= i ? a[(int64_t)i * n + j] : 0;                        \
        if (info == 0 && m && qc)                                                                 \
          info = LAPACKE_##P##orgqr(LAPACK_ROW_MAJOR, m, qc, mn_min, o[0], qc, tau);              \
        break;                                                                                    \
      }                                                                                           \
      case DLE_OP_LINALG_SVD: {                                                                   \
        bool full = at->ints[0];                                                                  \
        lapack_int uc = full ? m : mn_min, vr = full ? n : mn_min;                                \
        memcpy(a, x, sizeof(T) * mn);                                                             \
        if (mn_min)                                                                               \
          info = LAPACKE_##P##gesdd(LAPACK_ROW_MAJOR, full ? 'A' : 'S', m, n, a, n, o[1], o[0],   \
                                    uc, o[2], n);                                                 \
        else { /* no singular values: U and Vh are identities (full) or empty */                  \
          for (lapack_int i = 0; i < m; i++)                                                      \
            for (lapack_int j = 0; j < uc; j++) o[0][(int64_t)i * uc + j] = i == j;               \
          for (lapack_int i = 0; i < vr; i++)                                                     \
            for (lapack_int j = 0; j < n; j++) o[2][(int64_t)i * n + j] = i == j;                 \
        }                                                                                         \
        break;                                                                                    \
      }                                                                                           \
      case DLE_OP_LINALG_EIGH:                                                                    \
        memcpy(o[1], x, sizeof(T) * mn);                                                          \
        if (n)                                                                                    \
          info = LAPACKE_##P##syevd(LAPACK_ROW_MAJOR, 'V', at->ints[0] ? 'U' : 'L', n, o[1], n,   \
                                    o[0]);                                                        \
        break;                                                                                    \
      default: break;                                                                             \
    }                                                                                             \
    free(a);                                                                                      \
    return info;                                                                                  \
  }                                                                                               \
  static dle_status run_##P(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins,           \
                            const dle_attrs *at) {                                                \
    const dle_tensor *x = ins[0];                                                                 \
    lapack_int m = (lapack_int)x->sizes[x->ndim - 2], n = (lapack_int)x->sizes[x->ndim - 1];      \
    lapack_int k = op == DLE_OP_LINALG_SOLVE ? (lapack_int)ins[1]->sizes[ins[1]->ndim - 1] : 0;   \
    int64_t nbatch = 1;                                                                           \
    for (int i = 0; i < x->ndim - 2; i++) nbatch *= x->sizes[i];                                  \
    int nout = dle_op_get_info(op)->nout;                                                         \
    int64_t out_step[3] = {0, 0, 0};                                                              \
    for (int j = 0; j < nout; j++) out_step[j] = nbatch ? dle_tensor_numel(outs[j]) / nbatch : 0; \
    const T *xd = dle_tensor_data(ins[0]);                                                        \
    const T *bd = op == DLE_OP_LINALG_SOLVE ? (const T *)dle_tensor_data(ins[1]) : NULL;          \
    lin_fail fail = {-1, 0, false};                                                               \
    int nt = dle_get_num_threads();                                                               \
    if (nbatch < 2 || nt < 2) nt = 1;                                                             \
    if (nt > 1) openblas_set_num_threads(1);                                                      \
    _Pragma("omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)")                  \
    for (int64_t bi = 0; bi < nbatch; bi++) {                                                     \
      T *o[3] = {NULL, NULL, NULL};                                                               \
      for (int j = 0; j < nout; j++) o[j] = (T *)dle_tensor_data(outs[j]) + bi * out_step[j];     \
      lapack_int info = one_##P(op, at, o, xd + bi * (int64_t)m * n,                              \
                                bd ? bd + bi * (int64_t)n * k : NULL, m, n, k);                   \
      if (info != 0) note_failure(&fail, bi, info, info == LAPACK_WORK_MEMORY_ERROR);             \
    }                                                                                             \
    if (nt > 1) openblas_set_num_threads(dle_get_num_threads());                                  \
    return fail.batch >= 0 ? failure(op, x, nbatch, &fail) : DLE_OK;                              \
  }
LINALG_TYPE(F32, float, s)
LINALG_TYPE(F64, double, d)

static DLE_KERNEL(cpu_linalg) {
  if (dle_tensor_numel(ins[0]) == 0 && op != DLE_OP_LINALG_SVD && op != DLE_OP_LINALG_QR) {
    /* empty batch or 0 x 0 matrices: det 1 (sign 1, log 0), the rest is empty */
    if (op != DLE_OP_LINALG_DET && op != DLE_OP_LINALG_SLOGDET) return DLE_OK;
    bool f32 = ins[0]->dtype == DLE_F32;
    for (int64_t i = 0; i < dle_tensor_numel(outs[0]); i++) {
      if (f32)
        ((float *)dle_tensor_data(outs[0]))[i] = 1;
      else
        ((double *)dle_tensor_data(outs[0]))[i] = 1;
    }
    if (op == DLE_OP_LINALG_SLOGDET)
      memset(dle_tensor_data(outs[1]), 0,
             (size_t)dle_tensor_numel(outs[1]) * dle_dtype_size(outs[1]->dtype));
    return DLE_OK;
  }
  if (ins[0]->dtype == DLE_F32) return run_s(op, outs, ins, a);
  if (ins[0]->dtype == DLE_F64) return run_d(op, outs, ins, a);
  return dle_error("linalg.%s: no CPU kernel for %s", dle_op_get_info(op)->name + 7,
                   dle_dtype_name(ins[0]->dtype));
}

void cpu_register_linalg(dle_backend *b) {
  CPU_REGISTER(b, cpu_linalg, DLE_OP_LINALG_SOLVE, DLE_OP_LINALG_INV, DLE_OP_LINALG_DET,
               DLE_OP_LINALG_SLOGDET, DLE_OP_LINALG_CHOLESKY, DLE_OP_LINALG_QR, DLE_OP_LINALG_SVD,
               DLE_OP_LINALG_EIGH);
}
