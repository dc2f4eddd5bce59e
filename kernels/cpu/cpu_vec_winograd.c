/* cpu_vec_winograd.c — the row pass of Winograd's input transform (cpu_conv_winograd.c) in AVX2:
 * for each tile tx of a padded row, d = row[2 tx .. 2 tx + 3] times B gives
 *   h0 = d0 - d2,  h1 = d1 + d2,  h2 = d2 - d1,  h3 = d1 - d3.
 * Rows are short (7 tiles for a 14-wide image), too short for the compiler's vector loop, whose
 * stride-2 loads then run as scalar epilogues; here 8 tiles take two de-interleaved loads of 16
 * floats (at 2 tx and 2 tx + 2) and whole-vector stores (masked stores are slow on AMD's cores:
 * the outputs get up to 7 elements of slack past tw instead). */
#include "cpu_vecmath.h"

#ifdef CPU_VEC_X86
#include "cpu_vec_avx2.h"

/* the even and the odd elements of p[0, 16) */
VEC_INLINE void deinterleave16(const float *p, __m256 *even, __m256 *odd) {
  __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
  /* per 128-bit lane [a0 a2 b0 b2 | a4 a6 b4 b6], then the 64-bit pairs reordered 0 2 1 3 */
  __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
         o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
  *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
  *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
}

VEC_TARGET void cpu_vec_wino_rows_avx2(const float *row, int64_t tw, float *h0, float *h1,
                                       float *h2, float *h3) {
  for (int64_t tx = 0; tx < tw; tx += 8) {
    __m256 e, o, e2, o2;
    deinterleave16(row + 2 * tx, &e, &o);       /* d0, d1 of tiles tx .. tx + 7 */
    deinterleave16(row + 2 * tx + 2, &e2, &o2); /* d2, d3 */
    __m256 r0 = _mm256_sub_ps(e, e2), r1 = _mm256_add_ps(o, e2);
    __m256 r2 = _mm256_sub_ps(e2, o), r3 = _mm256_sub_ps(o, o2);
    _mm256_storeu_ps(h0 + tx, r0), _mm256_storeu_ps(h1 + tx, r1);
    _mm256_storeu_ps(h2 + tx, r2), _mm256_storeu_ps(h3 + tx, r3);
  }
}

#endif /* CPU_VEC_X86 */
