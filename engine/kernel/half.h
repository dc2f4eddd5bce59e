/* half.h — float16 and bfloat16 <-> float32 conversions, inline so kernels can vectorise them.
 * Both directions round to nearest even and keep NaN, infinities and subnormals. */
#ifndef DLE_HALF_H
#define DLE_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t dle_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float dle_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline float dle_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return dle_bits_f32(sign | 0x7f800000u | (man << 13)); /* inf / nan */
  if (exp == 0) { /* zero or subnormal: man * 2^-24 */
    float v = (float)man * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return dle_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t dle_float_to_half(float f) {
  uint32_t u = dle_f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0); /* inf / nan */
  if (a >= 0x477ff000u) return sign | 0x7c00; /* rounds to >= 65520: overflow to inf */
  if (a < 0x38800000u) {                      /* below 2^-14: subnormal half or zero */
    /* Adding 0.5 (2^-1) aligns the half subnormal grid (2^-24) to the float's last bits, so the
     * float adder does the round-to-nearest-even for us. */
    float v = dle_bits_f32(a) + 0.5f;
    return sign | (uint16_t)(dle_f32_bits(v) - 0x3f000000u);
  }
  uint32_t odd = (a >> 13) & 1; /* round to nearest, ties to even */
  a += 0xc8000fffu + odd;       /* rebias exponent (-112 << 23) + rounding */
  return sign | (uint16_t)(a >> 13);
}

static inline float dle_bfloat_to_float(uint16_t b) { return dle_bits_f32((uint32_t)b << 16); }

static inline uint16_t dle_float_to_bfloat(float f) {
  uint32_t u = dle_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet nan */
  u += 0x7fffu + ((u >> 16) & 1); /* round to nearest, ties to even */
  return (uint16_t)(u >> 16);
}

#endif
