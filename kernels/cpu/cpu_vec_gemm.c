/* cpu_vec_gemm.c — a small float32 gemm C = A . B or C += A . B (row-major) for operands that
 * are already in cache and laid out for it: Winograd's 16 products per chunk (cpu_conv_winograd.c),
 * {O, C} . {C, tiles} with C = 32 or 64, and attention's per-head products (cpu_attention.c). OpenBLAS spends as long as its kernel on such a call in
 * zeroing C for beta = 0 and packing both operands; this reads A and B in place and keeps a 4 x 24
 * block of C in 12 registers over the whole k loop (3 loads + 4 broadcasts per 12 FMAs). */
#include "cpu_vecmath.h"

#ifdef CPU_VEC_X86
#include "cpu_vec_avx2.h"

/* C's block of mr rows (1 or 4) and nv vectors of 8 columns, the last one masked by `mask` when
 * `masked` (the right edge); inlined with constant mr, nv, masked so acc stays in registers.
 * With `add` the block starts from C's values (C += A B). */
VEC_INLINE void gemm_block(int mr, int nv, bool masked, __m256i mask, int64_t k, const float *a,
                           int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc, bool add) {
  __m256 acc[4][3];
  for (int i = 0; i < mr; i++)
    for (int v = 0; v < nv; v++) {
      const float *cp = c + i * ldc + 8 * v;
      acc[i][v] = !add ? _mm256_setzero_ps()
                  : masked && v == nv - 1 ? _mm256_maskload_ps(cp, mask) : _mm256_loadu_ps(cp);
    }
  for (int64_t p = 0; p < k; p++) {
    const float *bp = b + p * ldb;
    __m256 bv[3];
    for (int v = 0; v < nv; v++)
      bv[v] = masked && v == nv - 1 ? _mm256_maskload_ps(bp + 8 * v, mask) : _mm256_loadu_ps(bp + 8 * v);
    for (int i = 0; i < mr; i++) {
      __m256 av = _mm256_broadcast_ss(a + i * lda + p);
      for (int v = 0; v < nv; v++) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < mr; i++)
    for (int v = 0; v < nv; v++) {
      float *cp = c + i * ldc + 8 * v;
      if (masked && v == nv - 1) _mm256_maskstore_ps(cp, mask, acc[i][v]);
      else _mm256_storeu_ps(cp, acc[i][v]);
    }
}

/* The rows of one column block: 4 at a time, then one by one. */
VEC_INLINE void gemm_rows(int nv, bool masked, __m256i mask, int64_t m, int64_t k, const float *a,
                          int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc, bool add) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) gemm_block(4, nv, masked, mask, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, add);
  for (; i < m; i++) gemm_block(1, nv, masked, mask, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, add);
}

VEC_TARGET void cpu_vec_sgemm_nn_avx2(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                                      const float *b, int64_t ldb, float *c, int64_t ldc, bool add) {
  const __m256i all = _mm256_set1_epi32(-1);
  int64_t j = 0;
  for (; j + 24 <= n; j += 24) gemm_rows(3, false, all, m, k, a, lda, b + j, ldb, c + j, ldc, add);
  int64_t rem = n - j;
  if (rem <= 0) return;
  __m256i mask = vmask_first(rem % 8 ? rem % 8 : 8);
  switch ((rem + 7) / 8) {
    case 1: gemm_rows(1, true, mask, m, k, a, lda, b + j, ldb, c + j, ldc, add); break;
    case 2: gemm_rows(2, true, mask, m, k, a, lda, b + j, ldb, c + j, ldc, add); break;
    default: gemm_rows(3, true, mask, m, k, a, lda, b + j, ldb, c + j, ldc, add); break;
  }
}

#endif /* CPU_VEC_X86 */
