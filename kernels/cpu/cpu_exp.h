/* cpu_exp.h — a vectorisable exp shared by the kernels that exponentiate rows (softmax,
 * logsumexp, cross-entropy, attention): RED_EXP(v) picks the float polynomial or libm's double exp
 * from v's type. */
#ifndef DLE_CPU_EXP_H
#define DLE_CPU_EXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The build targets baseline x86-64 (SSE2), where this exp polynomial runs several times slower
 * than with AVX2 and FMA (measured on the exp-sums of 4096 rows of 1000 floats). Row
 * functions marked CPU_CLONES get an x86-64-v3 clone besides the baseline one, picked once at load
 * time by the CPU (GCC's target_clones, an ifunc); called per row, the indirection costs nothing.
 * -DDLE_NO_CLONES turns it off. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DLE_NO_CLONES)
#define CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default"), noinline))
#else
#define CPU_CLONES
#endif

/* c ? a : b through bit masks: a float ?: on computed values stops GCC from vectorising a loop
 * (it must keep NaN semantics), an integer blend does not. */
static inline float red_select(int c, float a, float b) {
  int32_t m = -(int32_t)(c != 0), ia, ib, r;
  float f;
  memcpy(&ia, &a, 4), memcpy(&ib, &b, 4);
  r = (ia & m) | (ib & ~m);
  memcpy(&f, &r, 4);
  return f;
}

/* exp(r) = 1 + r + r^2 P(r) for |r| <= ln2/2: P is the degree-4 minimax fit of (exp(r) - 1 - r) / r^2
 * for the relative error of the sum (Remez; 4.3e-9, 0.07 ulp, before rounding). Cephes' P has
 * one degree more, whose extra accuracy (1e-10) float rounding throws away at the cost of an FMA.
 * Shared by red_expf and the AVX2 exps (cpu_vec_avx2.h), highest power first. */
static const float cpu_exp_P[5] = {1.3893402647e-3f, 8.3702625707e-3f, 4.1667088866e-2f,
                                   1.6666506231e-1f, 4.9999997020e-1f};

/* exp in float without a libm call, so softmax and logsumexp loops vectorise: x = n ln2 + r with
 * |r| <= ln2/2, exp(r) by the polynomial above, 2^n assembled in the exponent bits as two factors
 * so n can reach 128. NaN stays NaN, overflow gives inf, and results below float's normal range
 * (x < -87.33) flush to 0. */
static inline float red_expf(float x) {
  float xc = red_select(x < -87.33f, -87.33f, x);
  xc = red_select(xc > 88.72f, 88.72f, xc);
  float t = xc * 1.44269504088896341f + 12582912.0f; /* + 1.5 * 2^23 rounds to an integer */
  float n = t - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = cpu_exp_P[0];
  p = p * r + cpu_exp_P[1];
  p = p * r + cpu_exp_P[2];
  p = p * r + cpu_exp_P[3];
  p = p * r + cpu_exp_P[4];
  p = p * r * r + r + 1.0f;
  uint32_t tb, b1, b2;
  memcpy(&tb, &t, 4);
  int32_t ni = (int32_t)(tb - 0x4B400000u), h = ni / 2; /* n, read from t's mantissa */
  b1 = (uint32_t)(h + 127) << 23, b2 = (uint32_t)(ni - h + 127) << 23; /* unsigned: NaN is no UB */
  float s1, s2;
  memcpy(&s1, &b1, 4), memcpy(&s2, &b2, 4);
  float y = red_select(x < -87.33f, 0.0f, p * s1 * s2);
  return red_select(x > 88.72f, INFINITY, y);
}
static inline double red_expd(double x) { return exp(x); }
#define RED_EXP(v) _Generic((v), float : red_expf, default : red_expd)(v)

#endif
