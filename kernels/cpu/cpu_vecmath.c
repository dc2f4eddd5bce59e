/* cpu_vecmath.c — the AVX2 array versions of the transcendental unary ops and the run-time choice
 * of cpu_vec (see cpu_vecmath.h). */
#include "cpu_vecmath.h"

#include <stdlib.h>

const cpu_vec_kernels *cpu_vec;

#ifdef CPU_VEC_X86
#include "cpu_vec_avx2.h"

/* o[i] = F(x[i]): whole vectors, then one masked vector for the tail. */
#define VEC_MAP(NAME, F)                                                                     \
  VEC_TARGET static void map_##NAME(float *o, const float *x, int64_t n) {                   \
    int64_t i = 0;                                                                           \
    for (; i + 16 <= n; i += 16) { /* two independent vectors per step: more in flight */    \
      __m256 a = F(_mm256_loadu_ps(x + i)), b = F(_mm256_loadu_ps(x + i + 8));              \
      _mm256_storeu_ps(o + i, a);                                                            \
      _mm256_storeu_ps(o + i + 8, b);                                                        \
    }                                                                                        \
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, F(_mm256_loadu_ps(x + i)));           \
    if (i < n) vstore_part(o + i, n - i, F(vload_part(x + i, n - i, 0.0f)));                \
  }
VEC_MAP(exp, vexp)
VEC_MAP(log, vlog)
VEC_MAP(tanh, vtanh)
VEC_MAP(sigmoid, vsigmoid)
VEC_MAP(silu, vsilu)
VEC_MAP(gelu, vgelu)
VEC_MAP(gelu_grad, vgelu_grad)
VEC_MAP(erf, verf)
VEC_MAP(erfc, verfc)

/* dst[i ds + j] = src[j ss + i], one 8 x 8 block. */
VEC_INLINE void transpose8(float *dst, int64_t ds, const float *src, int64_t ss) {
  __m256 r[8], t[8], u[8];
  for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(src + j * ss);
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
  }
  for (int j = 0; j < 8; j += 4) {
    u[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44);
    u[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xEE);
    u[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44);
    u[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xEE);
  }
  for (int i = 0; i < 4; i++) {
    _mm256_storeu_ps(dst + i * ds, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ds, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
  }
}

VEC_TARGET static void transpose32(void *dstp, int64_t ds, const void *srcp, int64_t ss, int64_t ni, int64_t nj) {
  float *dst = dstp;
  const float *src = srcp;
  int64_t i8 = ni & ~(int64_t)7, j8 = nj & ~(int64_t)7;
  for (int64_t j = 0; j < j8; j += 8)
    for (int64_t i = 0; i < i8; i += 8) transpose8(dst + i * ds + j, ds, src + j * ss + i, ss);
  for (int64_t i = 0; i < ni; i++) /* the edges */
    for (int64_t j = i < i8 ? j8 : 0; j < nj; j++) dst[i * ds + j] = src[j * ss + i];
}

static const cpu_vec_kernels avx2 = {
    .unary = {[DLE_OP_EXP] = map_exp, [DLE_OP_LOG] = map_log, [DLE_OP_TANH] = map_tanh,
              [DLE_OP_SIGMOID] = map_sigmoid, [DLE_OP_SILU] = map_silu, [DLE_OP_GELU] = map_gelu,
              [DLE_OP_GELU_GRAD] = map_gelu_grad},
    .erf = map_erf,
    .erfc = map_erfc,
    .softmax_row = cpu_vec_softmax_row_avx2,
    .logsumexp_row = cpu_vec_logsumexp_row_avx2,
    .sum = cpu_vec_sum_f32_avx2,
    .sum_rows = cpu_vec_sum_rows_f32_avx2,
    .transpose32 = transpose32,
};

/* Runs when the module loads, before any kernel. */
__attribute__((constructor)) static void cpu_vec_init(void) {
  const char *env = getenv("DLE_SIMD");
  if (env && strcmp(env, "0") == 0) return;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) cpu_vec = &avx2;
}

#endif /* CPU_VEC_X86 */
