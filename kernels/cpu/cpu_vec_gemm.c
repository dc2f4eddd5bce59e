/* cpu_vec_gemm.c — a small float32 gemm C = A . B or C += A . B (row-major) for operands that
 * are already in cache and laid out for it: Winograd's 16 products per chunk (cpu_conv_winograd.c),
 * {O, C} . {C, tiles} with C = 32 or 64, and attention's per-head products (attention.c). OpenBLAS spends as long as its kernel on such a call in
 * zeroing C for beta = 0 and packing both operands; this reads A and B in place and keeps a 4 x 24
 * block of C in 12 registers over the whole k loop (3 loads + 4 broadcasts per 12 FMAs). */
#include "cpu_vecmath.h"

#ifdef CPU_VEC_X86
#include "cpu_vec_avx2.h"

/* C's block of mr rows (1 or 4) and nv vectors of 8 columns, the last one masked by `mask` when
 * `masked` (the right edge); inlined with constant mr, nv, masked so acc stays in registers.
 * With `add` the block starts from C's values (C += A B). */
VEC_INLINE void gemm_block(int mr, int nv, bool masked, __m256i mask, int64_t k, const float *a,
                           int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                           bool add) {
  __m256 acc[4][3];
  for (int i = 0; i < mr; i++)
    for (int v = 0; v < nv; v++) {
      const float *cp = c + i * ldc + 8 * v;
      acc[i][v] = !add                    ? _mm256_setzero_ps()
                  : masked && v == nv - 1 ? _mm256_maskload_ps(cp, mask)
                                          : _mm256_loadu_ps(cp);
    }
  for (int64_t p = 0; p < k; p++) {
    const float *bp = b + p * ldb;
    __m256 bv[3];
    for (int v = 0; v < nv; v++)
      bv[v] = masked && v == nv - 1 ? _mm256_maskload_ps(bp + 8 * v, mask)
                                    : _mm256_loadu_ps(bp + 8 * v);
    for (int i = 0; i < mr; i++) {
      __m256 av = _mm256_broadcast_ss(a + i * lda + p);
      for (int v = 0; v < nv; v++) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < mr; i++)
    for (int v = 0; v < nv; v++) {
      float *cp = c + i * ldc + 8 * v;
      if (masked && v == nv - 1)
        _mm256_maskstore_ps(cp, mask, acc[i][v]);
      else
        _mm256_storeu_ps(cp, acc[i][v]);
    }
}

/* The rows of one column block: 4 at a time, then one by one. */
VEC_INLINE void gemm_rows(int nv, bool masked, __m256i mask, int64_t m, int64_t k, const float *a,
                          int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                          bool add) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4)
    gemm_block(4, nv, masked, mask, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, add);
  for (; i < m; i++)
    gemm_block(1, nv, masked, mask, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, add);
}

VEC_TARGET void cpu_vec_sgemm_nn_avx2(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                                      const float *b, int64_t ldb, float *c, int64_t ldc,
                                      bool add) {
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

/* c {m, n} += a {m, k} . b {n, k}^T: dot products of rows, for few rows and long ones (a
 * convolution's weight gradient with few input channels: {O, L} . {C kh kw, L}^T). Blocks of 4
 * rows of a by 3 rows of b keep 12 vector sums over the whole k loop (7 loads per 12 FMAs); the
 * sums are reduced across lanes once at the end. */
VEC_INLINE void nt_block(int mr, int nr, int64_t k, const float *a, int64_t lda, const float *b,
                         int64_t ldb, float *c, int64_t ldc) {
  __m256 acc[4][3];
  for (int i = 0; i < mr; i++)
    for (int r = 0; r < nr; r++) acc[i][r] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    __m256 bv[3];
    for (int r = 0; r < nr; r++) bv[r] = _mm256_loadu_ps(b + r * ldb + p);
    for (int i = 0; i < mr; i++) {
      __m256 av = _mm256_loadu_ps(a + i * lda + p);
      for (int r = 0; r < nr; r++) acc[i][r] = _mm256_fmadd_ps(av, bv[r], acc[i][r]);
    }
  }
  if (p < k) { /* the tail: missing lanes load as 0 */
    __m256 bv[3];
    for (int r = 0; r < nr; r++) bv[r] = vload_part(b + r * ldb + p, k - p, 0.0f);
    for (int i = 0; i < mr; i++) {
      __m256 av = vload_part(a + i * lda + p, k - p, 0.0f);
      for (int r = 0; r < nr; r++) acc[i][r] = _mm256_fmadd_ps(av, bv[r], acc[i][r]);
    }
  }
  for (int i = 0; i < mr; i++)
    for (int r = 0; r < nr; r++) c[i * ldc + r] += vhsum(acc[i][r]);
}

VEC_TARGET void cpu_vec_sgemm_nt_add_avx2(int64_t m, int64_t n, int64_t k, const float *a,
                                          int64_t lda, const float *b, int64_t ldb, float *c,
                                          int64_t ldc) {
  for (int64_t i = 0; i < m; i += 4) {
    int mr = m - i >= 4 ? 4 : (int)(m - i);
    for (int64_t j = 0; j < n; j += 3) {
      int nr = n - j >= 3 ? 3 : (int)(n - j);
      const float *ai = a + i * lda, *bj = b + j * ldb;
      float *cij = c + i * ldc + j;
      /* constant block shapes, so the accumulators stay in registers */
      if (mr == 4 && nr == 3)
        nt_block(4, 3, k, ai, lda, bj, ldb, cij, ldc);
      else if (mr == 4 && nr == 2)
        nt_block(4, 2, k, ai, lda, bj, ldb, cij, ldc);
      else if (mr == 4)
        nt_block(4, 1, k, ai, lda, bj, ldb, cij, ldc);
      else
        for (int ii = 0; ii < mr; ii++)
          for (int jj = 0; jj < nr; jj++)
            nt_block(1, 1, k, ai + ii * lda, lda, bj + jj * ldb, ldb, cij + ii * ldc + jj, ldc);
    }
  }
}

#endif /* CPU_VEC_X86 */
