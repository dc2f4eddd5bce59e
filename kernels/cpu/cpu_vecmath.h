/* cpu_vecmath.h — float32 kernels vectorised by hand for AVX2 + FMA, chosen once at load time.
 *
 * cpu_vec points at the table of AVX2 kernels when the CPU has AVX2 and FMA (and the environment
 * does not set DLE_SIMD=0), else it is NULL and callers keep their portable X-macro loops. The
 * functions take contiguous float arrays; o may equal x. */
#ifndef DLE_CPU_VECMATH_H
#define DLE_CPU_VECMATH_H

#include "cpu_types.h"

typedef void (*cpu_vec_map_fn)(float *o, const float *x, int64_t n);
typedef void (*cpu_vec_map2_fn)(float *o, const float *x, const float *g, int64_t n);

typedef struct {
  cpu_vec_map_fn unary
      [DLE_NUM_OPS]; /* by op: exp, log, tanh, sigmoid, gelu(_grad), silu, erf(c); others NULL */
  /* the same, writing o with streaming stores (then a fence); o must not be x */
  cpu_vec_map_fn unary_stream[DLE_NUM_OPS];
  /* by op: binary ops with a vector kernel (gelu_backward, atan2); o may equal x or g (not when streamed) */
  cpu_vec_map2_fn binary[DLE_NUM_OPS], binary_stream[DLE_NUM_OPS];
  cpu_vec_map_fn erf, erfc; /* not ops (yet): for gelu's tests and future use */
  /* One softmax (lg false) or log_softmax (lg true) row of n elements; y may be x. stream: write y
   * with streaming stores (cpu_stream.h; the caller fences). */
  void (*softmax_row)(float *y, const float *x, int64_t n, bool lg, bool stream);
  /* log(sum(exp(x))) of a row; -inf for an empty row, the max itself when it is not finite. */
  float (*logsumexp_row)(const float *x, int64_t n);
  /* The sum of a run in double; and acc[j] += x[r][j] over nrows rows rs bytes apart. */
  double (*sum)(const float *x, int64_t n);
  void (*sum_rows)(double *acc, const char *x, int64_t rs, int64_t nrows, int64_t n);
  /* dst[i ds + j] = src[j ss + i] for i < ni, j < nj: a block transpose of 4-byte elements
   * (strides in elements), 8 x 8 in registers. */
  void (*transpose32)(void *dst, int64_t ds, const void *src, int64_t ss, int64_t ni, int64_t nj);
  /* c {m, n} = a {m, k} . b {k, n} (with add: c += a . b), row-major with leading dims
   * (cpu_vec_gemm.c: for small operands already in cache) */
  void (*sgemm_nn)(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                   int64_t ldb, float *c, int64_t ldc, bool add);
  /* c {m, n} += a {m, k} . b {n, k}^T (cpu_vec_gemm.c: few rows of a and b, long k) */
  void (*sgemm_nt_add)(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                       int64_t ldb, float *c, int64_t ldc);
  /* Winograd's input row pass (cpu_vec_winograd.c): h0..h3[tx] for tx < tw from row[2 tx ..
   * 2 tx + 3]; row must be readable up to 2 * (tw rounded up to 8) + 2, and h0..h3 are written
   * up to tw rounded up to 8 */
  void (*wino_rows)(const float *row, int64_t tw, float *h0, float *h1, float *h2, float *h3);
} cpu_vec_kernels;

extern const cpu_vec_kernels *cpu_vec;

/* The AVX2 code is compiled on x86-64 only; elsewhere cpu_vec stays NULL. */
#if defined(__x86_64__) && defined(__GNUC__)
#define CPU_VEC_X86 1
#endif

/* The AVX2 implementations (call them through cpu_vec, which checks the CPU). */
void cpu_vec_softmax_row_avx2(float *y, const float *x, int64_t n, bool lg, bool stream);
float cpu_vec_logsumexp_row_avx2(const float *x, int64_t n);
double cpu_vec_sum_f32_avx2(const float *x, int64_t n);
void cpu_vec_sgemm_nn_avx2(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                           const float *b, int64_t ldb, float *c, int64_t ldc, bool add);
void cpu_vec_sgemm_nt_add_avx2(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                               const float *b, int64_t ldb, float *c, int64_t ldc);
void cpu_vec_wino_rows_avx2(const float *row, int64_t tw, float *h0, float *h1, float *h2,
                            float *h3);
void cpu_vec_sum_rows_f32_avx2(double *acc, const char *x, int64_t rs, int64_t nrows, int64_t n);

#endif
