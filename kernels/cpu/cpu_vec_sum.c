/* cpu_vec_sum.c — AVX2 float32 sums with float64 accumulators (as the portable reductions keep):
 * a contiguous run into one total, and rows of a matrix into per-column totals. */
#include "cpu_vecmath.h"

#ifdef CPU_VEC_X86
#include "cpu_vec_avx2.h"

/* 8 floats -> two vectors of 4 doubles, added to a and b. */
#define ADD8(a, b, v)                                                    \
  do {                                                                   \
    __m256 v_ = (v);                                                     \
    a = _mm256_add_pd(a, _mm256_cvtps_pd(_mm256_castps256_ps128(v_)));   \
    b = _mm256_add_pd(b, _mm256_cvtps_pd(_mm256_extractf128_ps(v_, 1))); \
  } while (0)

/* Blocks of 128 floats are summed in float (4 chains of 4 additions each, exact for small
 * integers and within 2^-22 relative of the block otherwise), the block totals in double. */
VEC_TARGET double cpu_vec_sum_f32_avx2(const float *x, int64_t n) {
  __m256d a0 = _mm256_setzero_pd(), a1 = a0;
  int64_t i = 0;
  for (; i + 128 <= n; i += 128) {
    __m256 s[4];
    for (int k = 0; k < 4; k++) s[k] = _mm256_loadu_ps(x + i + 8 * k);
    for (int j = 32; j < 128; j += 32)
      for (int k = 0; k < 4; k++) s[k] = _mm256_add_ps(s[k], _mm256_loadu_ps(x + i + j + 8 * k));
    ADD8(a0, a1, _mm256_add_ps(_mm256_add_ps(s[0], s[1]), _mm256_add_ps(s[2], s[3])));
  }
  for (; i + 8 <= n; i += 8) ADD8(a0, a1, _mm256_loadu_ps(x + i));
  if (i < n) ADD8(a0, a1, vload_part(x + i, n - i, 0.0f));
  __m256d t = _mm256_add_pd(a0, a1);
  __m128d h = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
  return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

/* acc[j] += x[r][j] for r < nrows, j < n (row r at p + r * rs bytes). Eight rows are summed in
 * float (as the blocks of a contiguous sum, within 2^-22 relative of their total) and then added
 * to the double accumulators, which are so read and written an eighth as often: a 4096-wide acc is
 * 32 KiB, the whole L1 cache, and updating it per row or four left the loads of x waiting. */
VEC_TARGET void cpu_vec_sum_rows_f32_avx2(double *acc, const char *p, int64_t rs, int64_t nrows,
                                          int64_t n) {
  int64_t r = 0;
  for (; r + 8 <= nrows; r += 8) {
    const float *x[8];
    for (int k = 0; k < 8; k++) x[k] = (const float *)(p + (r + k) * rs);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      __m256 s0 = _mm256_add_ps(_mm256_loadu_ps(x[0] + j), _mm256_loadu_ps(x[1] + j));
      __m256 s1 = _mm256_add_ps(_mm256_loadu_ps(x[2] + j), _mm256_loadu_ps(x[3] + j));
      s0 = _mm256_add_ps(s0, _mm256_add_ps(_mm256_loadu_ps(x[4] + j), _mm256_loadu_ps(x[5] + j)));
      s1 = _mm256_add_ps(s1, _mm256_add_ps(_mm256_loadu_ps(x[6] + j), _mm256_loadu_ps(x[7] + j)));
      __m256d lo = _mm256_loadu_pd(acc + j), hi = _mm256_loadu_pd(acc + j + 4);
      ADD8(lo, hi, _mm256_add_ps(s0, s1));
      _mm256_storeu_pd(acc + j, lo);
      _mm256_storeu_pd(acc + j + 4, hi);
    }
    for (; j < n; j++) {
      float t =
          ((x[0][j] + x[1][j]) + (x[2][j] + x[3][j])) + ((x[4][j] + x[5][j]) + (x[6][j] + x[7][j]));
      acc[j] += t;
    }
  }
  for (; r < nrows; r++) {
    const float *x = (const float *)(p + r * rs);
    for (int64_t j = 0; j < n; j++) acc[j] += x[j];
  }
}

#endif /* CPU_VEC_X86 */
