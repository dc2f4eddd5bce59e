/* cpu_gemm.h — row-major gemm in float or double through OpenBLAS, picked from the compute type
 * by GEMM(CT) so one kernel body serves both (conv, attention). Sizes must fit in int (callers
 * check). */
#ifndef DLE_CPU_GEMM_H
#define DLE_CPU_GEMM_H

#include <cblas.h>
#include <stdbool.h>
#include <stdint.h>

/* C = op(A) op(B) (+ C when beta = 1), row-major, in float or double. */
static inline void gemm_float(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                              int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                              int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m,
              (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}
static inline void gemm_double(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a,
                               int64_t lda, const double *b, int64_t ldb, double beta, double *c,
                               int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m,
              (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}
#define GEMM(CT) _Generic((CT)0, float : gemm_float, double : gemm_double)

#endif
