/* cpu_vecmath.c — the AVX2 array versions of the transcendental unary ops and the run-time choice
 * of cpu_vec (see cpu_vecmath.h). */
#include "cpu_vecmath.h"

#include <stdlib.h>

const cpu_vec_kernels *cpu_vec;

#ifdef CPU_VEC_X86
#include "cpu_vec_avx2.h"

/* o[i] = F(x[i]): two independent vectors per step (more in flight), then one masked vector for
 * the tail; map_NAME_stream writes o with streaming stores and fences (cpu_stream.h). */
#define VEC_MAP_LOOP(o, x, n, F, STORE)                                      \
  int64_t i = 0;                                                             \
  for (; i + 16 <= n; i += 16) {                                             \
    __m256 a = F(_mm256_loadu_ps(x + i)), b = F(_mm256_loadu_ps(x + i + 8)); \
    STORE(o + i, a);                                                         \
    STORE(o + i + 8, b);                                                     \
  }                                                                          \
  for (; i + 8 <= n; i += 8) STORE(o + i, F(_mm256_loadu_ps(x + i)));        \
  if (i < n) vstore_part(o + i, n - i, F(vload_part(x + i, n - i, 0.0f)));
#define VEC_MAP(NAME, F)                                                                          \
  VEC_TARGET static void map_##NAME(                                                              \
      float *o, const float *x, int64_t n){VEC_MAP_LOOP(o, x, n, F, _mm256_storeu_ps)} VEC_TARGET \
      __attribute__((unused)) static void map_##NAME##_stream(float *o, const float *x,           \
                                                              int64_t n) {                        \
    int64_t h = (int64_t)((-(uintptr_t)o / sizeof(float)) & 7); /* to a 32-byte boundary */       \
    if (h > n) h = n;                                                                             \
    if (h) map_##NAME(o, x, h);                                                                   \
    o += h, x += h, n -= h;                                                                       \
    VEC_MAP_LOOP(o, x, n, F, _mm256_stream_ps)                                                    \
    _mm_sfence();                                                                                 \
  }
VEC_MAP(exp, vexp_fast) /* the cheaper route of vexp when a vector is within +-87 */
VEC_MAP(log, vlog)
VEC_MAP(tanh, vtanh)
VEC_MAP(sigmoid, vsigmoid)
VEC_MAP(silu, vsilu)
VEC_MAP(gelu, vgelu)
VEC_MAP(gelu_grad, vgelu_grad)
VEC_MAP(erf, verf)
VEC_MAP(erfc, verfc)

/* o[i] = G(x[i], g[i]), the binary counterpart of VEC_MAP (same steps, same streaming variant). */
#define VEC_MAP2_LOOP(o, x, g, n, G, STORE)                                                   \
  int64_t i = 0;                                                                              \
  for (; i + 16 <= n; i += 16) {                                                              \
    __m256 a = G(_mm256_loadu_ps(x + i), _mm256_loadu_ps(g + i));                             \
    __m256 b = G(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(g + i + 8));                     \
    STORE(o + i, a);                                                                          \
    STORE(o + i + 8, b);                                                                      \
  }                                                                                           \
  for (; i + 8 <= n; i += 8) STORE(o + i, G(_mm256_loadu_ps(x + i), _mm256_loadu_ps(g + i))); \
  if (i < n)                                                                                  \
    vstore_part(o + i, n - i, G(vload_part(x + i, n - i, 0.0f), vload_part(g + i, n - i, 0.0f)));
#define VEC_MAP2(NAME, G)                                                                         \
  VEC_TARGET static void map2_##NAME(float *o, const float *x, const float *g,                    \
                                     int64_t n){VEC_MAP2_LOOP(                                    \
      o, x, g, n, G,                                                                              \
      _mm256_storeu_ps)} VEC_TARGET static void map2_##NAME##_stream(float *o, const float *x,    \
                                                                     const float *g, int64_t n) { \
    int64_t h = (int64_t)((-(uintptr_t)o / sizeof(float)) & 7); /* to a 32-byte boundary */       \
    if (h > n) h = n;                                                                             \
    if (h) map2_##NAME(o, x, g, h);                                                               \
    o += h, x += h, g += h, n -= h;                                                               \
    VEC_MAP2_LOOP(o, x, g, n, G, _mm256_stream_ps)                                                \
    _mm_sfence();                                                                                 \
  }
VEC_INLINE __m256 vgelu_backward(__m256 x, __m256 g) { return _mm256_mul_ps(g, vgelu_grad(x)); }
VEC_MAP2(gelu_backward, vgelu_backward)
VEC_MAP2(atan2, vatan2)

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

VEC_TARGET static void transpose32(void *dstp, int64_t ds, const void *srcp, int64_t ss, int64_t ni,
                                   int64_t nj) {
  float *dst = dstp;
  const float *src = srcp;
  int64_t i8 = ni & ~(int64_t)7, j8 = nj & ~(int64_t)7;
  for (int64_t j = 0; j < j8; j += 8)
    for (int64_t i = 0; i < i8; i += 8) transpose8(dst + i * ds + j, ds, src + j * ss + i, ss);
  for (int64_t i = 0; i < ni; i++) /* the edges */
    for (int64_t j = i < i8 ? j8 : 0; j < nj; j++) dst[i * ds + j] = src[j * ss + i];
}

static const cpu_vec_kernels avx2 = {
    // clang-format off
    .unary = {[DLE_OP_EXP] = map_exp, [DLE_OP_LOG] = map_log, [DLE_OP_TANH] = map_tanh,
              [DLE_OP_SIGMOID] = map_sigmoid, [DLE_OP_SILU] = map_silu, [DLE_OP_GELU] = map_gelu,
              [DLE_OP_GELU_GRAD] = map_gelu_grad, [DLE_OP_ERF] = map_erf, [DLE_OP_ERFC] = map_erfc},
    .unary_stream = {[DLE_OP_EXP] = map_exp_stream, [DLE_OP_LOG] = map_log_stream,
                     [DLE_OP_TANH] = map_tanh_stream, [DLE_OP_SIGMOID] = map_sigmoid_stream,
                     [DLE_OP_SILU] = map_silu_stream, [DLE_OP_GELU] = map_gelu_stream,
                     [DLE_OP_GELU_GRAD] = map_gelu_grad_stream, [DLE_OP_ERF] = map_erf_stream,
                     [DLE_OP_ERFC] = map_erfc_stream},
    // clang-format on
    .binary = {[DLE_OP_GELU_BACKWARD] = map2_gelu_backward, [DLE_OP_ATAN2] = map2_atan2},
    .binary_stream =
        {[DLE_OP_GELU_BACKWARD] = map2_gelu_backward_stream, [DLE_OP_ATAN2] = map2_atan2_stream},
    .erf = map_erf,
    .erfc = map_erfc,
    .softmax_row = cpu_vec_softmax_row_avx2,
    .logsumexp_row = cpu_vec_logsumexp_row_avx2,
    .sum = cpu_vec_sum_f32_avx2,
    .sum_rows = cpu_vec_sum_rows_f32_avx2,
    .transpose32 = transpose32,
    .sgemm_nn = cpu_vec_sgemm_nn_avx2,
    .sgemm_nt_add = cpu_vec_sgemm_nt_add_avx2,
    .wino_rows = cpu_vec_wino_rows_avx2,
};

/* Runs when the module loads, before any kernel. */
__attribute__((constructor)) static void cpu_vec_init(void) {
  const char *env = getenv("DLE_SIMD");
  if (env && strcmp(env, "0") == 0) return;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) cpu_vec = &avx2;
}

#endif /* CPU_VEC_X86 */
