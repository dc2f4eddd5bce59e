/* elementwise_math.h — the scalar functions of elementwise ops that libm does not have (erfinv,
 * PyTorch's floor division and remainder, logaddexp), shared by the CPU kernels
 * (kernels/cpu/elementwise.c) and the CUDA ones (kernels/cuda/elementwise.cu) so both compute the
 * same thing. Floats go through double; integers through int64, with a zero divisor giving 0 (as
 * NumPy; C's division by zero would raise SIGFPE) and INT64_MIN / -1 wrapping as in PyTorch. */
#ifndef DLE_ELEMENTWISE_MATH_H
#define DLE_ELEMENTWISE_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "device_inline.h"

/* nan_to_num's third value (neginf) rides in attrs.ints[0] as the bits of a double: dle_attrs
 * has two doubles, and the other two values (nan, posinf) fill them. */
static inline DLE_HD int64_t ew_bits_of_double(double v) {
  int64_t b;
  memcpy(&b, &v, sizeof b);
  return b;
}
static inline DLE_HD double ew_double_of_bits(int64_t b) {
  double v;
  memcpy(&v, &b, sizeof v);
  return v;
}

/* erfinv: Giles' single-precision approximation ("Approximating the erfinv function", GPU
 * Computing Gems, 2011), then two Newton steps. Newton runs on erfc for |y| > 1/2, where
 * 1 - |y| is exact and erf(x) - |y| would cancel. */
static inline DLE_HD double ew_erfinv(double y) {
  double a = fabs(y);
  if (!(a < 1)) return a == 1 ? copysign(INFINITY, y) : NAN;
  double w = -log((1 - a) * (1 + a)), p;
  if (w < 5) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * a;
  for (int i = 0; i < 2; i++) {
    double d = 1.12837916709551257390 * exp(-x * x); /* erf'(x) */
    x -= a <= 0.5 ? (erf(x) - a) / d : ((1 - a) - erfc(x)) / d;
  }
  return copysign(x, y);
}

/* floor(a / b) computed from fmod so that it is exact (PyTorch's div_floor for floats). */
static inline DLE_HD double ew_div_floor(double a, double b) {
  if (b == 0) return a / b;
  double mod = fmod(a, b), div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return copysign(0.0, a / b);
  double f = floor(div);
  return div - f > 0.5 ? f + 1 : f;
}

/* a - b floor(a / b): the remainder with the sign of b (Python's %). */
static inline DLE_HD double ew_remainder(double a, double b) {
  double r = fmod(a, b);
  return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

/* log(exp(a) + exp(b)) without overflow; equal infinities give themselves. */
static inline DLE_HD double ew_logaddexp(double a, double b) {
  if (isinf(a) && a == b) return a;
  double m = a > b ? a : b;
  return m + log1p(exp(-fabs(a - b)));
}

static inline DLE_HD int64_t ew_fmod_i64(int64_t a, int64_t b) {
  return b == 0 || b == -1 ? 0 : a % b;
}

static inline DLE_HD int64_t ew_remainder_i64(int64_t a, int64_t b) {
  int64_t r = ew_fmod_i64(a, b);
  return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

static inline DLE_HD int64_t ew_div_floor_i64(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0u - (uint64_t)a); /* INT64_MIN / -1 wraps */
  int64_t q = a / b;
  return a % b != 0 && (a < 0) != (b < 0) ? q - 1 : q;
}

#endif
