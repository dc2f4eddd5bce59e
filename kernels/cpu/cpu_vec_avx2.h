/* cpu_vec_avx2.h — float32 math on 8 lanes (AVX2 + FMA): exp, log, tanh, sigmoid, silu, erf,
 * erfc and gelu, plus masked loads for loop tails. Internal to the cpu_vec*.c files: every
 * function is compiled for avx2/fma by attribute, and only called after cpu_vec_init() found
 * that the CPU has both (the rest of the module stays plain x86-64).
 *
 * Accuracy (checked by tests/c/test_vecmath.c against double-precision libm over the whole float
 * range, errors counted in units of 2^-149 in the denormal range): exp, log, tanh within 2 ulp,
 * sigmoid, silu, erf within 3, erfc within 5, gelu within 6 (its worst cases are denormal
 * results of x < -13). NaN in gives NaN out; infinities and signed zeros follow C99 Annex F.
 * Polynomials are the float ones of Cephes (S. Moshier), evaluated with FMA, except exp's, a
 * minimax fit of one degree less (cpu_exp.h). */
#ifndef DLE_CPU_VEC_AVX2_H
#define DLE_CPU_VEC_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#include "cpu_exp.h"

#define VEC_TARGET __attribute__((target("avx2,fma")))
#define VEC_INLINE static inline __attribute__((always_inline, target("avx2,fma")))
#define V8(c)      _mm256_set1_ps(c)

/* Lanes [0, n) of x (n < 8) with `fill` in the others; and the store of lanes [0, n). */
VEC_INLINE __m256i vmask_first(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
VEC_INLINE __m256 vload_part(const float *x, int64_t n, float fill) {
  __m256i m = vmask_first(n);
  return _mm256_blendv_ps(V8(fill), _mm256_maskload_ps(x, m), _mm256_castsi256_ps(m));
}
VEC_INLINE void vstore_part(float *o, int64_t n, __m256 v) {
  _mm256_maskstore_ps(o, vmask_first(n), v);
}
/* Elements [0, n) of x as a vector, n <= 8 (a plain load when n is 8). */
VEC_INLINE __m256 vload_n(const float *x, int64_t n, float fill) {
  return n >= 8 ? _mm256_loadu_ps(x) : vload_part(x, n, fill);
}

/* Writes y[0, n) from GET(i, len), the vector of elements [i, i + len) with len <= 8 (below 8 only
 * at the ends). With `stream` true, the whole vectors from y's first 32-byte boundary on go out
 * with streaming stores (cpu_stream.h; the caller fences); the part before it is one masked store. */
#define VEC_WRITE_ROW(y, n, stream, GET)                                                         \
  do {                                                                                           \
    float *y_ = (y);                                                                             \
    int64_t n_ = (n), i_ = 0;                                                                    \
    if (stream) {                                                                                \
      int64_t h_ = (int64_t)((-(uintptr_t)y_ / sizeof(float)) & 7); /* floats to the boundary */ \
      if (h_ > n_) h_ = n_;                                                                      \
      if (h_) vstore_part(y_, h_, GET(0, h_));                                                   \
      for (i_ = h_; i_ + 8 <= n_; i_ += 8) _mm256_stream_ps(y_ + i_, GET(i_, 8));                \
    } else {                                                                                     \
      for (; i_ + 8 <= n_; i_ += 8) _mm256_storeu_ps(y_ + i_, GET(i_, 8));                       \
    }                                                                                            \
    if (i_ < n_) vstore_part(y_ + i_, n_ - i_, GET(i_, n_ - i_));                                \
  } while (0)

VEC_INLINE __m256 vpoly(__m256 x, const float *c, int n) { /* c[0] x^(n-1) + ... + c[n-1] */
  __m256 p = V8(c[0]);
  for (int i = 1; i < n; i++) p = _mm256_fmadd_ps(p, x, V8(c[i]));
  return p;
}
VEC_INLINE __m256 vabs(__m256 x) { return _mm256_andnot_ps(V8(-0.0f), x); }
VEC_INLINE __m256 vsign(__m256 x) { return _mm256_and_ps(V8(-0.0f), x); }
VEC_INLINE __m256 visnan(__m256 x) { return _mm256_cmp_ps(x, x, _CMP_UNORD_Q); }

/* exp(x) 2^k: x = n ln2 + r, |r| <= ln2/2, exp(r) by cpu_exp_P (cpu_exp.h); 2^(n+k) built in the
 * exponent bits as two factors so that n + k from -173 to 128 stays exact (results that round
 * into the denormals do so once, in the last product). 0 <= k <= 24. */
VEC_INLINE __m256 vexp_scaled(__m256 x, int k) {
  /* clamped (beyond: 0 / inf); min/max return their second operand for NaN, which then flows
   * through the arithmetic to the result */
  __m256 xc = _mm256_min_ps(V8(89.0f), _mm256_max_ps(V8(-120.0f), x));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, V8(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, V8(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, V8(-2.12194440e-4f), r);
  __m256 p = vpoly(r, cpu_exp_P, 5);
  p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), V8(1.0f));
  __m256i ni = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(k));
  __m256i h = _mm256_srai_epi32(ni, 1), h2 = _mm256_sub_epi32(ni, h);
  __m256 s1 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, _mm256_set1_epi32(127)), 23));
  __m256 s2 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h2, _mm256_set1_epi32(127)), 23));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  if (k)
    y = _mm256_andnot_ps(_mm256_cmp_ps(x, V8(-120.0f), _CMP_LT_OQ),
                         y); /* exp(-120) 2^24 < 2^-149 */
  return y;
}
VEC_INLINE __m256 vexp(__m256 x) { return vexp_scaled(x, 0); }

/* exp(x) for |x| <= 87 (not NaN) in ~14 operations instead of ~25: n = round(x / ln2) comes from
 * adding 1.5 * 2^23, whose low mantissa bits then are n, and times 2^n (a normal result for
 * |x| <= 87) is an integer add of n to the exponent bits, no multiply. Same polynomial and 2 ulp
 * bound as vexp; n can round the other way in a tie, so bits may differ from vexp. Used through
 * the two checks below, which send NaN to vexp (the integer add would not keep it NaN). */
VEC_INLINE __m256 vexp_short(__m256 x) {
  __m256 t = _mm256_fmadd_ps(x, V8(1.44269504088896341f), V8(12582912.0f));
  __m256 n = _mm256_sub_ps(t, V8(12582912.0f));
  __m256 r = _mm256_fnmadd_ps(n, V8(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, V8(-2.12194440e-4f), r);
  __m256 p = vpoly(r, cpu_exp_P, 5);
  p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), V8(1.0f));
  __m256i n23 =
      _mm256_slli_epi32(_mm256_castps_si256(t), 23); /* n << 23: t's higher bits shift out */
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), n23));
}
/* exp(x) for x <= 0, as softmax needs it (x - max): a vector with a lane below -87 (a denormal or
 * zero result, -inf) goes through vexp. */
VEC_INLINE __m256 vexp_nonpos(__m256 x) {
  if (_mm256_movemask_ps(_mm256_cmp_ps(x, V8(-87.0f), _CMP_NGE_UQ))) return vexp(x); /* or NaN */
  return vexp_short(x);
}
/* exp(x) for any x: vexp_short unless a lane is beyond +-87 (overflow, denormals, infinities) or NaN. */
VEC_INLINE __m256 vexp_fast(__m256 x) {
  if (_mm256_movemask_ps(_mm256_cmp_ps(vabs(x), V8(87.0f), _CMP_NLE_UQ))) return vexp(x);
  return vexp_short(x);
}

/* log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) = f - f^2/2 + f^3 P(f), f = m - 1.
 * Denormal inputs are scaled by 2^23 first; x < 0 and NaN give NaN, 0 gives -inf, inf gives inf. */
VEC_INLINE __m256 vlog(__m256 x) {
  static const float P[] = {7.0376836292e-2f,  -1.1514610310e-1f, 1.1676998740e-1f,
                            -1.2420140846e-1f, 1.4249322787e-1f,  -1.6668057665e-1f,
                            2.0000714765e-1f,  -2.4999993993e-1f, 3.3333331174e-1f};
  __m256 den = _mm256_cmp_ps(x, V8(1.17549435e-38f), _CMP_LT_OQ);
  __m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, V8(8388608.0f)), den);
  __m256i bits = _mm256_castps_si256(xs);
  __m256 e =
      _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(126)));
  e = _mm256_sub_ps(e, _mm256_and_ps(den, V8(23.0f)));
  __m256 m =
      _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)),
                                          _mm256_set1_epi32(0x3f000000))); /* [0.5, 1) */
  __m256 small = _mm256_cmp_ps(m, V8(0.707106781186547524f), _CMP_LT_OQ);
  __m256 f =
      _mm256_add_ps(_mm256_sub_ps(m, V8(1.0f)), _mm256_and_ps(small, m)); /* m - 1 or 2m - 1 */
  e = _mm256_sub_ps(e, _mm256_and_ps(small, V8(1.0f)));
  __m256 z = _mm256_mul_ps(f, f);
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(vpoly(f, P, 9), f), z);
  y = _mm256_fmadd_ps(e, V8(-2.12194440e-4f), y);
  y = _mm256_fnmadd_ps(V8(0.5f), z, y);
  __m256 r = _mm256_fmadd_ps(e, V8(0.693359375f), _mm256_add_ps(f, y));
  r = _mm256_blendv_ps(r, V8(-INFINITY), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ));
  r = _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, V8(INFINITY), _CMP_EQ_OQ));
  return _mm256_blendv_ps(r, V8(NAN),
                          _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NGE_UQ)); /* x < 0, NaN */
}

/* tanh: x + x^3 P(x^2) below |x| = 0.625, else sign(x) (1 - 2 / (exp(2|x|) + 1)). */
VEC_INLINE __m256 vtanh(__m256 x) {
  static const float P[] = {-5.70498872745e-3f, 2.06390887954e-2f, -5.37397155531e-2f,
                            1.33314422036e-1f, -3.33332819422e-1f};
  __m256 ax = vabs(x), z = _mm256_mul_ps(x, x);
  __m256 ys = _mm256_or_ps(_mm256_fmadd_ps(_mm256_mul_ps(vpoly(z, P, 5), z), x, x),
                           vsign(x)); /* keeps -0 */
  __m256 e = vexp(_mm256_add_ps(ax, ax));
  __m256 yl = _mm256_sub_ps(V8(1.0f), _mm256_div_ps(V8(2.0f), _mm256_add_ps(e, V8(1.0f))));
  yl = _mm256_or_ps(yl, vsign(x));
  return _mm256_blendv_ps(yl, ys, _mm256_cmp_ps(ax, V8(0.625f), _CMP_LT_OQ));
}

/* sigmoid from e = exp(-|x|) <= 1, which never overflows: 1/(1+e) for x >= 0, e/(1+e) below. */
VEC_INLINE __m256 vsigmoid(__m256 x) {
  __m256 e = vexp(_mm256_or_ps(x, V8(-0.0f))); /* -|x| */
  __m256 num = _mm256_blendv_ps(V8(1.0f), e, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
  return _mm256_div_ps(num, _mm256_add_ps(V8(1.0f), e));
}

/* silu = x sigmoid(x). Below 0 it is x e / (1+e), computed with e scaled by 2^24 and scaled back
 * last, so results in the denormal range (x < -87) are rounded once rather than twice. */
VEC_INLINE __m256 vsilu(__m256 x) {
  __m256 e24 = vexp_scaled(_mm256_or_ps(x, V8(-0.0f)), 24), e = _mm256_mul_ps(e24, V8(0x1p-24f));
  __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  __m256 num = _mm256_blendv_ps(x, _mm256_mul_ps(x, e24), neg);
  __m256 y = _mm256_div_ps(num, _mm256_add_ps(V8(1.0f), e));
  return _mm256_blendv_ps(y, _mm256_mul_ps(y, V8(0x1p-24f)), neg);
}

/* erf for |x| < 1: x T(x^2) = c0 x + x^3 T'(x^2) with T' the higher terms. */
static const float ERF_T[] = {7.853861353153693e-5f, -8.010193625184903e-4f,
                              5.188327685732524e-3f, -2.685381193529856e-2f,
                              1.128358514861418e-1f, -3.761262582423300e-1f};
#define ERF_C0_HI 1.128379225730896f /* c0 = 1.128379165726710 (Cephes' fit) = hi + lo */
#define ERF_C0_LO -6.0004186e-08f
VEC_INLINE __m256 verf_small(__m256 x) {
  return _mm256_mul_ps(x, _mm256_fmadd_ps(vpoly(_mm256_mul_ps(x, x), ERF_T, 6), _mm256_mul_ps(x, x),
                                          V8(1.128379165726710f)));
}
/* 1 - erf(a) for 0 <= a < 1, with c0 a taken exactly (the cancellation against 1 would multiply
 * its rounding error by up to 6). */
VEC_INLINE __m256 verfc_small(__m256 a) {
  __m256 z = _mm256_mul_ps(a, a);
  __m256 r = _mm256_fnmadd_ps(a, V8(ERF_C0_HI), V8(1.0f));
  r = _mm256_fnmadd_ps(a, V8(ERF_C0_LO), r);
  return _mm256_fnmadd_ps(_mm256_mul_ps(a, z), vpoly(z, ERF_T, 6), r);
}

/* erfc(a) for a = ah + al >= 0 (al: a low-order correction, e.g. of a product's rounding):
 * 1 - erf(a) below 1, else exp(-a^2) / a * P(1/a^2), with a^2 kept to double-float precision
 * (its rounding error would be multiplied by a^2 ~ 100 in the exp). */
VEC_INLINE __m256 verfc_pos(__m256 ah, __m256 al) {
  static const float P[] = {2.326819970068386e-2f,  -1.387039388740657e-1f, 3.687424674597105e-1f,
                            -5.824733027278666e-1f, 6.210004621745983e-1f,  -4.944515323274145e-1f,
                            3.404879937665872e-1f,  -2.741127028184656e-1f, 5.638259427386472e-1f};
  static const float R[] = {-1.047766399936249e+1f, 1.297719955372516e+1f,  -7.495518717768503e+0f,
                            2.921019019210786e+0f,  -1.015265279202700e+0f, 4.218463358204948e-1f,
                            -2.820767439740514e-1f, 5.641895067754075e-1f};
  __m256 near = verfc_small(ah);
  __m256 is_near = _mm256_cmp_ps(ah, V8(1.0f), _CMP_LT_OQ);
  if (_mm256_movemask_ps(is_near) == 0xff) return near; /* common for activations: skip the tail */
  __m256 hi = _mm256_mul_ps(ah, ah);
  __m256 lo = _mm256_fmadd_ps(_mm256_add_ps(ah, ah), al, _mm256_fmsub_ps(ah, ah, hi));
  __m256 z = vexp_nonpos(_mm256_sub_ps(_mm256_setzero_ps(), hi));
  z = _mm256_fnmadd_ps(z, lo, z); /* exp(-hi - lo) ~ exp(-hi) (1 - lo) */
  __m256 q = _mm256_div_ps(V8(1.0f), ah), y = _mm256_mul_ps(q, q);
  __m256 far = _mm256_cmp_ps(ah, V8(2.0f), _CMP_GE_OQ);
  int nfar = _mm256_movemask_ps(far); /* one of the two fits when no lane needs the other */
  __m256 big = nfar == 0      ? vpoly(y, P, 9)
               : nfar == 0xff ? vpoly(y, R, 8)
                              : _mm256_blendv_ps(vpoly(y, P, 9), vpoly(y, R, 8), far);
  __m256 tail = _mm256_mul_ps(_mm256_mul_ps(z, q), big);
  tail = _mm256_andnot_ps(_mm256_cmp_ps(ah, V8(10.5f), _CMP_GT_OQ),
                          tail); /* erfc < 2^-150; inf-safe */
  return _mm256_blendv_ps(tail, near, is_near);
}

VEC_INLINE __m256 verf(__m256 x) {
  __m256 ax = vabs(x);
  __m256 big = _mm256_or_ps(_mm256_sub_ps(V8(1.0f), verfc_pos(ax, _mm256_setzero_ps())), vsign(x));
  __m256 y = _mm256_blendv_ps(big, verf_small(x), _mm256_cmp_ps(ax, V8(1.0f), _CMP_LT_OQ));
  return _mm256_blendv_ps(y, x, visnan(x));
}

VEC_INLINE __m256 verfc(__m256 x) {
  __m256 e = verfc_pos(vabs(x), _mm256_setzero_ps());
  __m256 y = _mm256_blendv_ps(e, _mm256_sub_ps(V8(2.0f), e),
                              _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
  return _mm256_blendv_ps(y, x, visnan(x));
}

/* gelu(x) = x/2 (1 + erf(x/sqrt 2)) = x/2 erfc(-x/sqrt 2): the erfc form keeps full relative
 * precision in the negative tail, where 1 + erf cancels to nothing. x/sqrt 2 is carried as a
 * double-float so that tail stays within a few ulp. */
/* 2 Phi(x) = erfc(-x / sqrt 2), Phi the standard normal CDF */
VEC_INLINE __m256 vtwo_phi(__m256 x) {
  const float c_hi = 0.707106769084930419921875f,
              c_lo = 1.21016175e-08f; /* 1/sqrt 2 = c_hi + c_lo */
  __m256 uh = _mm256_mul_ps(x, V8(c_hi));
  __m256 ul = _mm256_fmadd_ps(x, V8(c_lo), _mm256_fmsub_ps(x, V8(c_hi), uh));
  __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  __m256 sgn = _mm256_and_ps(neg, V8(-0.0f)); /* |u| = u * sign: flip both parts when x < 0 */
  __m256 e = verfc_pos(_mm256_xor_ps(uh, sgn), _mm256_xor_ps(ul, sgn));
  return _mm256_blendv_ps(_mm256_sub_ps(V8(2.0f), e), e, neg); /* erfc(-u) */
}
VEC_INLINE __m256 vgelu(__m256 x) { return _mm256_mul_ps(_mm256_mul_ps(V8(0.5f), x), vtwo_phi(x)); }
/* gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi) */
VEC_INLINE __m256 vgelu_grad(__m256 x) {
  __m256 pdf = _mm256_mul_ps(vexp_nonpos(_mm256_mul_ps(V8(-0.5f), _mm256_mul_ps(x, x))),
                             V8(0.398942280401432678f));
  return _mm256_fmadd_ps(x, pdf, _mm256_mul_ps(V8(0.5f), vtwo_phi(x)));
}

/* atan2(y, x): t = min(|x|,|y|) / max(|x|,|y|) in [0, 1]; above tan(pi/8) t becomes
 * (t - 1) / (t + 1) plus pi/4, so the odd polynomial (Cephes' atanf) only sees |t| <= 0.4142;
 * then the octant: pi/2 - r when |y| > |x|, pi - r when x's sign bit is set, y's sign last.
 * 0/0 and inf/inf are the two quotients without a value: they take t = 0 and t = 1, which gives
 * IEEE's atan2(+-0, +-0) and atan2(+-inf, +-inf); NaN inputs give NaN. */
VEC_INLINE __m256 vatan2(__m256 y, __m256 x) {
  static const float c[] = {8.05374449538e-2f, -1.38776856032e-1f, 1.99777106478e-1f,
                            -3.33329491539e-1f};
  __m256 ax = vabs(x), ay = vabs(y);
  __m256 mx = _mm256_max_ps(ax, ay), mn = _mm256_min_ps(ax, ay);
  __m256 t = _mm256_div_ps(mn, mx);
  __m256 both_inf = _mm256_cmp_ps(mn, V8(INFINITY), _CMP_EQ_OQ);
  t = _mm256_blendv_ps(t, V8(0.0f), _mm256_cmp_ps(mx, V8(0.0f), _CMP_EQ_OQ));
  t = _mm256_blendv_ps(t, V8(1.0f), both_inf);
  __m256 big = _mm256_cmp_ps(t, V8(0.41421356237f), _CMP_GT_OQ);
  __m256 u = _mm256_blendv_ps(
      t, _mm256_div_ps(_mm256_sub_ps(t, V8(1.0f)), _mm256_add_ps(t, V8(1.0f))), big);
  __m256 z = _mm256_mul_ps(u, u);
  __m256 r = _mm256_fmadd_ps(_mm256_mul_ps(vpoly(z, c, 4), z), u, u);
  r = _mm256_add_ps(r, _mm256_and_ps(big, V8(0.78539816339744831f)));
  r = _mm256_blendv_ps(r, _mm256_sub_ps(V8(1.57079632679489662f), r),
                       _mm256_cmp_ps(ay, ax, _CMP_GT_OQ));
  r = _mm256_blendv_ps(r, _mm256_sub_ps(V8(3.14159265358979324f), r), x); /* x's sign bit */
  r = _mm256_or_ps(r, vsign(y));
  return _mm256_blendv_ps(r, _mm256_add_ps(x, y), _mm256_or_ps(visnan(x), visnan(y)));
}

/* Sum of the 8 lanes, and their max (NaN-free input). */
VEC_INLINE float vhsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
VEC_INLINE float vhmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

#endif
