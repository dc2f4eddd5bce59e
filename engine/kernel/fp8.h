/* fp8.h — float8_e4m3fn and float8_e5m2 <-> float32 conversions, inline for the kernels.
 *
 *   float8_e4m3fn: sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities, S.1111.111 is
 *                  NaN; largest finite 448, smallest subnormal 2^-9.
 *   float8_e5m2:   sign, 5 exponent bits (bias 15), 2 mantissa bits (the top byte of a float16):
 *                  infinities and NaNs as IEEE; largest finite 57344, smallest subnormal 2^-16.
 *
 * Decoding is exact. Encoding rounds to nearest, ties to even, and SATURATES: a finite value beyond
 * the largest finite one, and an infinity, become +-448 / +-57344 (PyTorch's .to() maps e4m3fn
 * overflow to NaN and e5m2 overflow to inf instead); NaN stays NaN. */
#ifndef DLE_FP8_H
#define DLE_FP8_H

#include "half.h"

#include <math.h>
#include <stdint.h>

#define DLE_F8E4M3_MAX 448.0f
#define DLE_F8E5M2_MAX 57344.0f

/* One format: mantissa bits M, exponent bias, the code of the largest finite magnitude. */
static inline uint8_t dle_float_to_fp8(float f, int M, int bias, uint32_t maxcode) {
  uint32_t u = dle_f32_bits(f);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80);
  uint32_t a = u & 0x7fffffffu, code;
  if (a > 0x7f800000u) return sign | 0x7f; /* NaN in both formats */
  float x = dle_bits_f32(a);
  if (x < ldexpf(1.0f, 1 - bias)) { /* subnormal: a multiple of 2^(1-bias-M), scaled exactly */
    code = (uint32_t)nearbyintf(ldexpf(x, bias - 1 + M));
  } else { /* drop 23-M mantissa bits, ties to even, then rebias the exponent */
    a += (1u << (22 - M)) - 1 + ((a >> (23 - M)) & 1);
    code = (a >> (23 - M)) - ((uint32_t)(127 - bias) << M);
  }
  return sign | (uint8_t)(code > maxcode ? maxcode : code);
}

static inline uint8_t dle_float_to_f8e4m3(float f) { return dle_float_to_fp8(f, 3, 7, 0x7e); }
static inline uint8_t dle_float_to_f8e5m2(float f) { return dle_float_to_fp8(f, 2, 15, 0x7b); }

static inline float dle_f8e4m3_to_float(uint8_t c) {
  uint32_t sign = (uint32_t)(c & 0x80) << 24, e = (c >> 3) & 0xf, m = c & 7;
  if ((c & 0x7f) == 0x7f) return dle_bits_f32(sign | 0x7fc00000u);
  if (e == 0) { /* zero or subnormal: m * 2^-9 */
    float v = (float)m * 0.001953125f;
    return sign ? -v : v;
  }
  return dle_bits_f32(sign | ((e + 120) << 23) | (m << 20));
}

static inline float dle_f8e5m2_to_float(uint8_t c) { return dle_half_to_float((uint16_t)(c << 8)); }

#endif
