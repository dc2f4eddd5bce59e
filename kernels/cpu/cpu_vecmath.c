/* cpu_vecmath.c — the AVX2 array versions of the transcendental unary ops and the run-time choice
 * of cpu_vec (see cpu_vecmath.h). */
#include "cpu_vecmath.h"

#include "cpu_vec_avx2.h"

#include <stdlib.h>

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
VEC_MAP(erf, verf)
VEC_MAP(erfc, verfc)

static const cpu_vec_kernels avx2 = {
    .unary = {[DLE_OP_EXP] = map_exp, [DLE_OP_LOG] = map_log, [DLE_OP_TANH] = map_tanh,
              [DLE_OP_SIGMOID] = map_sigmoid, [DLE_OP_SILU] = map_silu, [DLE_OP_GELU] = map_gelu},
    .erf = map_erf,
    .erfc = map_erfc,
    .softmax_row = cpu_vec_softmax_row_avx2,
    .logsumexp_row = cpu_vec_logsumexp_row_avx2,
};

const cpu_vec_kernels *cpu_vec;

/* Runs when the module loads, before any kernel. */
__attribute__((constructor)) static void cpu_vec_init(void) {
  const char *env = getenv("DLE_SIMD");
  if (env && strcmp(env, "0") == 0) return;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) cpu_vec = &avx2;
}
