/* cpu_quant.h — GGUF's quantized blocks on the CPU (kernels/cpu/quant.c): their byte layouts, the
 * scalar expansion of one block, and the AVX2 dot products (cpu_vec_quant.c). Byte layouts, as
 * ggml's block_q8_0, block_q4_0 and block_q4_K (little-endian float16 scales first):
 *   Q8_0: d, int8 q[32]                   value i = q[i] * d
 *   Q4_0: d, uint8 qs[16]                 value i < 16 = ((qs[i] & 15) - 8) * d,
 *                                         value i + 16 = ((qs[i] >> 4) - 8) * d
 *   Q4_K: d, dmin, scales[12], qs[128]    8 sub-blocks of 32 with 6-bit scale sc and min m
 *                                         (packed as ggml's get_scale_min_k4); in each 64 values
 *                                         the low nibbles of 32 bytes are sub-block 2j and the high
 *                                         nibbles 2j + 1; value = d sc q - dmin m. */
#ifndef DLE_CPU_QUANT_H
#define DLE_CPU_QUANT_H

#include <stdint.h>
#include <string.h>

#include "../../engine/kernel/half.h"
#include "cpu_types.h"

#define QK8_0      32
#define QK4_0      32
#define QK_K       256
#define Q8_0_BYTES 34
#define Q4_0_BYTES 18
#define Q4_K_BYTES 144

static inline float q_half(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return dle_half_to_float(h);
}

/* The 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes s. */
static inline void q4k_scale_min(int j, const uint8_t *s, uint8_t *sc, uint8_t *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

/* Row dot products of a quantized row of k values with float x (AVX2 + FMA; call only when
 * cpu_vec is set). */
float cpu_vec_qdot_avx2(dle_qtype q, const uint8_t *w, const float *x, int64_t k);
/* sum x[i] y[i] over n floats, AVX2 + FMA. */
float cpu_vec_dot_f32_avx2(const float *x, const float *y, int64_t n);

#endif
