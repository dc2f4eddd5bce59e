/* cpu_vec_quant.c — AVX2 dot products of a quantized row (cpu_quant.h's layouts) with float32
 * activations: each block's integers are widened to 8-lane floats in registers and multiplied
 * into the activations, with the block's scale applied once per block (never a whole expanded
 * row in memory). The decode path of kernels/cpu/quant.c. */
#include "cpu_quant.h"
#include "cpu_vecmath.h"

#ifdef CPU_VEC_X86
#include "cpu_vec_avx2.h"

#define QVEC_TARGET __attribute__((target("avx2,fma,f16c")))
#define QVEC_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* The low 8 signed bytes of v as 8 floats. */
QVEC_INLINE __m256 i8x8_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

/* The float16 at p (F16C). */
QVEC_INLINE float half_at(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

/* sum over i < 32 of q[i] x[i], the q as 4 vectors of 8 floats, added as a tree (two independent
 * chains, so that blocks overlap: a single chain of 4 dependent FMAs made the loop latency-bound) */
QVEC_INLINE __m256 dot32(__m256 q0, __m256 q1, __m256 q2, __m256 q3, const float *x) {
  __m256 a = _mm256_mul_ps(q0, _mm256_loadu_ps(x)), b = _mm256_mul_ps(q1, _mm256_loadu_ps(x + 8));
  a = _mm256_fmadd_ps(q2, _mm256_loadu_ps(x + 16), a);
  b = _mm256_fmadd_ps(q3, _mm256_loadu_ps(x + 24), b);
  return _mm256_add_ps(a, b);
}

/* 32 signed bytes, lo holding values 0..15 and hi 16..31 */
QVEC_INLINE __m256 dot32_i8(__m128i lo, __m128i hi, const float *x) {
  return dot32(i8x8_ps(lo), i8x8_ps(_mm_unpackhi_epi64(lo, lo)), i8x8_ps(hi),
               i8x8_ps(_mm_unpackhi_epi64(hi, hi)), x);
}

/* acc + the block's scale times its dot product with x (one FMA) */
QVEC_INLINE __m256 block_q8_0(const uint8_t *w, const float *x, __m256 acc) {
  const uint8_t *q = w + 2;
  __m256 s = dot32(i8x8_ps(_mm_loadl_epi64((const __m128i *)q)),
                   i8x8_ps(_mm_loadl_epi64((const __m128i *)(q + 8))),
                   i8x8_ps(_mm_loadl_epi64((const __m128i *)(q + 16))),
                   i8x8_ps(_mm_loadl_epi64((const __m128i *)(q + 24))), x);
  return _mm256_fmadd_ps(_mm256_set1_ps(half_at(w)), s, acc);
}

QVEC_INLINE __m256 block_q4_0(const uint8_t *w, const float *x, __m256 acc) {
  const __m128i mask = _mm_set1_epi8(0xF), eight = _mm_set1_epi8(8);
  __m128i qs = _mm_loadu_si128((const __m128i *)(w + 2));
  __m128i lo = _mm_sub_epi8(_mm_and_si128(qs, mask), eight);
  __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), mask), eight);
  return _mm256_fmadd_ps(_mm256_set1_ps(half_at(w)), dot32_i8(lo, hi, x), acc);
}

/* How far ahead of the block being read the weights are prefetched, in bytes. The dot products do
 * enough arithmetic per byte that the hardware prefetcher alone lets a row from memory stall them
 * (the 350M decode entries of bench/RESULTS.md, before and after). */
#define QDOT_PREFETCH 2048
/* Blocks of `bytes` bytes and 32 values, two accumulators (alternate blocks) */
#define DOT_BLOCKS(name, BLOCK_FN, BYTES)                                       \
  QVEC_TARGET static float name(const uint8_t *w, const float *x, int64_t nb) { \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;                             \
    int64_t b = 0;                                                              \
    for (; b + 2 <= nb; b += 2, w += 2 * (BYTES), x += 64) {                    \
      _mm_prefetch((const char *)w + QDOT_PREFETCH, _MM_HINT_T0);               \
      acc0 = BLOCK_FN(w, x, acc0);                                              \
      acc1 = BLOCK_FN(w + (BYTES), x + 32, acc1);                               \
    }                                                                           \
    if (b < nb) acc0 = BLOCK_FN(w, x, acc0);                                    \
    return vhsum(_mm256_add_ps(acc0, acc1));                                    \
  }
DOT_BLOCKS(dot_q8_0, block_q8_0, Q8_0_BYTES)
DOT_BLOCKS(dot_q4_0, block_q4_0, Q4_0_BYTES)

/* Q4_K: per sub-block j, d sc_j sum(q x) - dmin m_j sum(x). */
QVEC_TARGET static float dot_q4_k(const uint8_t *w, const float *x, int64_t nb) {
  const __m128i mask = _mm_set1_epi8(0xF);
  __m256 acc = _mm256_setzero_ps(), accm = acc;
  for (int64_t b = 0; b < nb; b++, w += Q4_K_BYTES, x += QK_K) {
    for (int line = 0; line < Q4_K_BYTES; line += 64)
      _mm_prefetch((const char *)w + QDOT_PREFETCH + line, _MM_HINT_T0);
    float d = half_at(w), dmin = half_at(w + 2);
    const uint8_t *s = w + 4, *q = w + 16;
    for (int j = 0; j < 8; j += 2, q += 32) {
      const float *xa = x + 32 * j, *xb = xa + 32;
      __m128i q0 = _mm_loadu_si128((const __m128i *)q),
              q1 = _mm_loadu_si128((const __m128i *)(q + 16));
      __m256 sa = dot32_i8(_mm_and_si128(q0, mask), _mm_and_si128(q1, mask), xa);
      __m256 sb = dot32_i8(_mm_and_si128(_mm_srli_epi16(q0, 4), mask),
                           _mm_and_si128(_mm_srli_epi16(q1, 4), mask), xb);
      __m256 xsa = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(xa), _mm256_loadu_ps(xa + 8)),
                                 _mm256_add_ps(_mm256_loadu_ps(xa + 16), _mm256_loadu_ps(xa + 24)));
      __m256 xsb = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(xb), _mm256_loadu_ps(xb + 8)),
                                 _mm256_add_ps(_mm256_loadu_ps(xb + 16), _mm256_loadu_ps(xb + 24)));
      uint8_t sc1, m1, sc2, m2;
      q4k_scale_min(j, s, &sc1, &m1);
      q4k_scale_min(j + 1, s, &sc2, &m2);
      acc = _mm256_add_ps(acc, _mm256_fmadd_ps(_mm256_set1_ps(d * sc1), sa,
                                               _mm256_mul_ps(_mm256_set1_ps(d * sc2), sb)));
      accm = _mm256_add_ps(accm, _mm256_fmadd_ps(_mm256_set1_ps(dmin * m1), xsa,
                                                 _mm256_mul_ps(_mm256_set1_ps(dmin * m2), xsb)));
    }
  }
  return vhsum(_mm256_sub_ps(acc, accm));
}

float cpu_vec_qdot_avx2(dle_qtype q, const uint8_t *w, const float *x, int64_t k) {
  switch (q) {
    case DLE_Q8_0: return dot_q8_0(w, x, k / QK8_0);
    case DLE_Q4_0: return dot_q4_0(w, x, k / QK4_0);
    case DLE_Q4_K: return dot_q4_k(w, x, k / QK_K);
    default: return 0;
  }
}

QVEC_TARGET float cpu_vec_dot_f32_avx2(const float *x, const float *y, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
  }
  for (; i < n; i += 8)
    a0 = _mm256_fmadd_ps(vload_n(x + i, n - i, 0), vload_n(y + i, n - i, 0), a0);
  return vhsum(_mm256_add_ps(a0, a1));
}

#endif /* CPU_VEC_X86 */
