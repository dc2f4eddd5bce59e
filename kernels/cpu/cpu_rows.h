/* cpu_rows.h — loops over one contiguous float32/float64 row, shared by the cross-entropy and
 * attention kernels (losses.c, attention.c). Sums and dot products run over 8 independent
 * accumulators, so they vectorise without reassociation flags; every function has an AVX2 clone
 * (CPU_CLONES, cpu_exp.h). One body per type: ROWS_ID(name, ID) is name_F32 / name_F64. */
#ifndef DLE_CPU_ROWS_H
#define DLE_CPU_ROWS_H

#include "cpu_exp.h"

#define ROW_LANES 8
/* each file that includes this uses some of the functions */
#define CPU_UNUSED __attribute__((unused))

#define CPU_ROW_FUNCTIONS(ID, CT)                                                            \
  /* max of x (-inf for an empty row; NaN elements are skipped) */                           \
  static CPU_UNUSED CPU_CLONES CT row_max_##ID(const CT *x, int64_t n) {                     \
    CT m = -INFINITY; /* omp simd: a max reduction GCC otherwise keeps scalar (NaN rules) */ \
    _Pragma("omp simd reduction(max : m)")                                                   \
    for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;                                 \
    return m;                                                                                \
  }                                                                                          \
  /* sum of exp(x - m) */                                                                    \
  static CPU_UNUSED CPU_CLONES double row_expsum_##ID(const CT *x, int64_t n, CT m) {        \
    CT acc[ROW_LANES] = {0};                                                                 \
    int64_t j = 0;                                                                           \
    for (; j + ROW_LANES <= n; j += ROW_LANES)                                               \
      for (int l = 0; l < ROW_LANES; l++) acc[l] += RED_EXP(x[j + l] - m);                   \
    double s = 0;                                                                            \
    for (; j < n; j++) s += RED_EXP(x[j] - m);                                               \
    for (int l = 0; l < ROW_LANES; l++) s += acc[l];                                         \
    return s;                                                                                \
  }                                                                                          \
  /* x = exp(x - m) in place; returns the sum */                                             \
  static CPU_UNUSED CPU_CLONES CT row_exp_inplace_##ID(CT *x, int64_t n, CT m) {             \
    for (int64_t j = 0; j < n; j++) x[j] = RED_EXP(x[j] - m);                                \
    CT acc[ROW_LANES] = {0}, s = 0;                                                          \
    int64_t j = 0;                                                                           \
    for (; j + ROW_LANES <= n; j += ROW_LANES)                                               \
      for (int l = 0; l < ROW_LANES; l++) acc[l] += x[j + l];                                \
    for (; j < n; j++) s += x[j];                                                            \
    for (int l = 0; l < ROW_LANES; l++) s += acc[l];                                         \
    return s;                                                                                \
  }                                                                                          \
  /* sum of a * b */                                                                         \
  static CPU_UNUSED CPU_CLONES CT row_dot_##ID(const CT *a, const CT *b, int64_t n) {        \
    CT acc[ROW_LANES] = {0}, s = 0;                                                          \
    int64_t j = 0;                                                                           \
    for (; j + ROW_LANES <= n; j += ROW_LANES)                                               \
      for (int l = 0; l < ROW_LANES; l++) acc[l] += a[j + l] * b[j + l];                     \
    for (; j < n; j++) s += a[j] * b[j];                                                     \
    for (int l = 0; l < ROW_LANES; l++) s += acc[l];                                         \
    return s;                                                                                \
  }                                                                                          \
  /* log sum exp of x, in double: max + log(sum exp(x - max)) (-inf for an empty row) */     \
  static CPU_UNUSED double row_lse_##ID(const CT *x, int64_t n) {                            \
    CT m = row_max_##ID(x, n);                                                               \
    return m == -INFINITY ? -INFINITY : (double)m + log(row_expsum_##ID(x, n, m));           \
  }                                                                                          \
  /* sum of x, in double */                                                                  \
  static CPU_UNUSED double row_sum_##ID(const CT *x, int64_t n) {                            \
    double s = 0;                                                                            \
    for (int64_t j = 0; j < n; j++) s += x[j];                                               \
    return s;                                                                                \
  }
CPU_ROW_FUNCTIONS(F32, float)
CPU_ROW_FUNCTIONS(F64, double)

#endif
