/* cpu_vec_quant.c — AVX2 dot products of a quantized row (cpu_quant.h's layouts) with float32
 * activations: each block's integers are widened to 8-lane floats in registers and multiplied
 * into the activations, with the block's scale applied once per block (never a whole expanded
 * row in memory). The decode path of kernels/cpu/quant.c. */
#include "cpu_quant.h"
#include "cpu_vecmath.h"

#ifdef CPU_VEC_X86
#include "cpu_vec_avx2.h"

/* 8 signed bytes at p as 8 floats. */
VEC_INLINE __m256 i8x8_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

/* sum over i < 32 of q[i] x[i] for 32 signed bytes lo (values 0..15) and hi (16..31) */
VEC_INLINE __m256 dot32(__m128i lo, __m128i hi, const float *x, __m256 acc) {
  acc = _mm256_fmadd_ps(i8x8_ps(lo), _mm256_loadu_ps(x), acc);
  acc = _mm256_fmadd_ps(i8x8_ps(_mm_unpackhi_epi64(lo, lo)), _mm256_loadu_ps(x + 8), acc);
  acc = _mm256_fmadd_ps(i8x8_ps(hi), _mm256_loadu_ps(x + 16), acc);
  return _mm256_fmadd_ps(i8x8_ps(_mm_unpackhi_epi64(hi, hi)), _mm256_loadu_ps(x + 24), acc);
}

VEC_TARGET static float dot_q8_0(const uint8_t *w, const float *x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++, w += Q8_0_BYTES, x += QK8_0) {
    __m128i lo = _mm_loadu_si128((const __m128i *)(w + 2));
    __m128i hi = _mm_loadu_si128((const __m128i *)(w + 18));
    acc = _mm256_fmadd_ps(V8(q_half(w)), dot32(lo, hi, x, _mm256_setzero_ps()), acc);
  }
  return vhsum(acc);
}

VEC_TARGET static float dot_q4_0(const uint8_t *w, const float *x, int64_t nb) {
  const __m128i mask = _mm_set1_epi8(0xF), eight = _mm_set1_epi8(8);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++, w += Q4_0_BYTES, x += QK4_0) {
    __m128i qs = _mm_loadu_si128((const __m128i *)(w + 2));
    __m128i lo = _mm_sub_epi8(_mm_and_si128(qs, mask), eight);
    __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), mask), eight);
    acc = _mm256_fmadd_ps(V8(q_half(w)), dot32(lo, hi, x, _mm256_setzero_ps()), acc);
  }
  return vhsum(acc);
}

/* Q4_K: per sub-block j, d sc_j sum(q x) - dmin m_j sum(x). */
VEC_TARGET static float dot_q4_k(const uint8_t *w, const float *x, int64_t nb) {
  const __m128i mask = _mm_set1_epi8(0xF);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++, w += Q4_K_BYTES, x += QK_K) {
    float d = q_half(w), dmin = q_half(w + 2);
    const uint8_t *s = w + 4, *q = w + 16;
    for (int j = 0; j < 8; j += 2, q += 32) {
      const float *xa = x + 32 * j, *xb = xa + 32;
      __m128i q0 = _mm_loadu_si128((const __m128i *)q), q1 = _mm_loadu_si128((const __m128i *)(q + 16));
      __m256 sa = dot32(_mm_and_si128(q0, mask), _mm_and_si128(q1, mask), xa, _mm256_setzero_ps());
      __m256 sb = dot32(_mm_and_si128(_mm_srli_epi16(q0, 4), mask),
                        _mm_and_si128(_mm_srli_epi16(q1, 4), mask), xb, _mm256_setzero_ps());
      __m256 xsa = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(xa), _mm256_loadu_ps(xa + 8)),
                                 _mm256_add_ps(_mm256_loadu_ps(xa + 16), _mm256_loadu_ps(xa + 24)));
      __m256 xsb = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(xb), _mm256_loadu_ps(xb + 8)),
                                 _mm256_add_ps(_mm256_loadu_ps(xb + 16), _mm256_loadu_ps(xb + 24)));
      uint8_t sc, m;
      q4k_scale_min(j, s, &sc, &m);
      acc = _mm256_fmadd_ps(V8(d * sc), sa, acc);
      acc = _mm256_fnmadd_ps(V8(dmin * m), xsa, acc);
      q4k_scale_min(j + 1, s, &sc, &m);
      acc = _mm256_fmadd_ps(V8(d * sc), sb, acc);
      acc = _mm256_fnmadd_ps(V8(dmin * m), xsb, acc);
    }
  }
  return vhsum(acc);
}

float cpu_vec_qdot_avx2(dle_qtype q, const uint8_t *w, const float *x, int64_t k) {
  switch (q) {
    case DLE_Q8_0: return dot_q8_0(w, x, k / QK8_0);
    case DLE_Q4_0: return dot_q4_0(w, x, k / QK4_0);
    case DLE_Q4_K: return dot_q4_k(w, x, k / QK_K);
    default: return 0;
  }
}

VEC_TARGET float cpu_vec_dot_f32_avx2(const float *x, const float *y, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
  }
  for (; i < n; i += 8) a0 = _mm256_fmadd_ps(vload_n(x + i, n - i, 0), vload_n(y + i, n - i, 0), a0);
  return vhsum(_mm256_add_ps(a0, a1));
}

#endif /* CPU_VEC_X86 */
