/* quant.c — the CPU's weight-only quantization kernels (dle_backend.quant): the reference
 * quantizers of GGUF's Q8_0, Q4_0 and Q4_K formats (round to nearest as ggml's *_ref quantizers,
 * Q4_K with ggml's weighted search for each sub-block's scale and min), their expansion, and the
 * products with a quantized matrix on OpenMP threads. A product never expands the whole matrix:
 * a row (or a range of blocks of a row) at a time, or, for one activation row with AVX2, each block
 * inside the dot product itself (cpu_vec_quant.c). */
#include <math.h>

#include "backend.h"
#include "cpu_quant.h"
#include "cpu_spin_pool.h"
#include "cpu_vecmath.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define QMIN(a, b) ((a) < (b) ? (a) : (b))
#define QMAX(a, b) ((a) > (b) ? (a) : (b))

/* Round to nearest, ties to even (ggml's nearest_int for the K-quants). */
static inline int nearest_int(float v) { return (int)lrintf(v); }

static inline void put_half(uint8_t *p, float v) {
  uint16_t h = dle_float_to_half(v);
  memcpy(p, &h, 2);
}

/* ---------------------------------------------------------------- quantizers */

static void quantize_q8_0(const float *x, uint8_t *b) {
  float amax = 0;
  for (int i = 0; i < QK8_0; i++) amax = QMAX(amax, fabsf(x[i]));
  float d = amax / 127, id = d ? 1.0f / d : 0.0f;
  put_half(b, d);
  for (int i = 0; i < QK8_0; i++) b[2 + i] = (uint8_t)(int8_t)roundf(x[i] * id);
}

/* d = -max/8 with max the value of largest magnitude, so that value maps to -8 exactly. */
static void quantize_q4_0(const float *x, uint8_t *b) {
  float amax = 0, max = 0;
  for (int i = 0; i < QK4_0; i++)
    if (amax < fabsf(x[i])) {
      amax = fabsf(x[i]);
      max = x[i];
    }
  float d = max / -8, id = d ? 1.0f / d : 0.0f;
  put_half(b, d);
  for (int i = 0; i < QK4_0 / 2; i++) {
    uint8_t lo = (uint8_t)QMIN(15, (int8_t)(x[i] * id + 8.5f));
    uint8_t hi = (uint8_t)QMIN(15, (int8_t)(x[i + QK4_0 / 2] * id + 8.5f));
    b[2 + i] = (uint8_t)(lo | (hi << 4));
  }
}

/* The scale and min (returned as -min >= 0 in *the_min) of n values x to levels L in 0..nmax that
 * minimise the weighted squared error: a first fit from the range, then nstep + 1 rescaled grids
 * each refitted by weighted least squares (ggml's make_qkx2_quants search). */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *the_min, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0], sum_w = w[0], sum_x = w[0] * x[0];
  for (int i = 1; i < n; i++) { /* ties keep the first (a -0.0 min stays -0.0, as in ggml) */
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    memset(L, 0, (size_t)n);
    *the_min = -min;
    return 0;
  }
  float iscale = nmax / (max - min), scale = 1 / iscale, best = 0;
  for (int i = 0; i < n; i++) {
    L[i] = (uint8_t)QMAX(0, QMIN(nmax, nearest_int(iscale * (x[i] - min))));
    float diff = scale * L[i] + min - x[i];
    best += w[i] * diff * diff;
  }
  uint8_t aux[32];
  for (int is = 0; is <= nstep; is++) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; i++) {
      int l = QMAX(0, QMIN(nmax, nearest_int(iscale * (x[i] - min))));
      aux[i] = (uint8_t)l;
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D <= 0) continue;
    float s = (sum_w * sum_xl - sum_x * sum_l) / D, mn = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (mn > 0) {
      mn = 0;
      s = sum_xl / sum_l2;
    }
    float err = 0;
    for (int i = 0; i < n; i++) {
      float diff = s * aux[i] + mn - x[i];
      err += w[i] * diff * diff;
    }
    if (err < best) {
      memcpy(L, aux, (size_t)n);
      best = err;
      scale = s;
      min = mn;
    }
  }
  *the_min = -min;
  return scale;
}

static void quantize_q4_k(const float *x, uint8_t *b) {
  uint8_t L[QK_K];
  float w[32], mins[8], scales[8], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; j++) {
    const float *xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
    float av_x = sqrtf(sum_x2 / 32);
    for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
    scales[j] = fit_scale_min(32, 15, xs, w, L + 32 * j, &mins[j], -1.f, 0.1f, 20);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j]; /* a min of -0.0 leaves max_min +0.0 */
  }
  uint8_t *s = b + 4, *qs = b + 16;
  memset(s, 0, 12);
  float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; j++) {
    uint8_t ls = (uint8_t)QMIN(63, nearest_int(inv_scale * scales[j]));
    uint8_t lm = (uint8_t)QMIN(63, nearest_int(inv_min * mins[j]));
    if (j < 4) {
      s[j] = ls;
      s[j + 4] = lm;
    } else {
      s[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
      s[j - 4] |= (uint8_t)((ls >> 4) << 6);
      s[j] |= (uint8_t)((lm >> 4) << 6);
    }
  }
  put_half(b, max_scale / 63.f);
  put_half(b + 2, max_min / 63.f);
  /* the levels again, against the scales as stored (6 bits, float16) */
  float d = q_half(b), dmin = q_half(b + 2);
  for (int j = 0; j < 8; j++) {
    uint8_t sc, m;
    q4k_scale_min(j, s, &sc, &m);
    float dj = d * sc;
    if (!dj) continue;
    float dm = dmin * m;
    for (int i = 0; i < 32; i++)
      L[32 * j + i] = (uint8_t)QMAX(0, QMIN(15, nearest_int((x[32 * j + i] + dm) / dj)));
  }
  for (int j = 0; j < QK_K; j += 64)
    for (int l = 0; l < 32; l++) qs[j / 2 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
}

/* ---------------------------------------------------------------- expansion */

static void expand_q8_0(const uint8_t *b, float *y) {
  float d = q_half(b);
  for (int i = 0; i < QK8_0; i++) y[i] = (float)(int8_t)b[2 + i] * d;
}

static void expand_q4_0(const uint8_t *b, float *y) {
  float d = q_half(b);
  for (int i = 0; i < QK4_0 / 2; i++) {
    y[i] = (float)((b[2 + i] & 0xF) - 8) * d;
    y[i + QK4_0 / 2] = (float)((b[2 + i] >> 4) - 8) * d;
  }
}

static void expand_q4_k(const uint8_t *b, float *y) {
  float d = q_half(b), dmin = q_half(b + 2);
  const uint8_t *s = b + 4, *q = b + 16;
  for (int j = 0; j < 8; j += 2, q += 32) {
    uint8_t sc, m;
    q4k_scale_min(j, s, &sc, &m);
    float d1 = d * sc, m1 = dmin * m;
    q4k_scale_min(j + 1, s, &sc, &m);
    float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; l++) y[32 * j + l] = d1 * (q[l] & 0xF) - m1;
    for (int l = 0; l < 32; l++) y[32 * j + 32 + l] = d2 * (q[l] >> 4) - m2;
  }
}

typedef struct {
  int64_t block, bytes;
  void (*quantize)(const float *x, uint8_t *b);
  void (*expand)(const uint8_t *b, float *y);
} format;

static const format formats[DLE_NUM_QTYPES] = {
    [DLE_Q8_0] = {QK8_0, Q8_0_BYTES, quantize_q8_0, expand_q8_0},
    [DLE_Q4_0] = {QK4_0, Q4_0_BYTES, quantize_q4_0, expand_q4_0},
    [DLE_Q4_K] = {QK_K, Q4_K_BYTES, quantize_q4_k, expand_q4_k},
};

/* Blocks b0..b1-1 of a row, expanded into y. */
static void expand_blocks(const format *f, const uint8_t *row, int64_t b0, int64_t b1, float *y) {
  for (int64_t b = b0; b < b1; b++) f->expand(row + b * f->bytes, y + (b - b0) * f->block);
}

/* Whether the AVX2 kernels of cpu_vec_quant.c may run: cpu_vec is set (AVX2 + FMA, DLE_SIMD not 0)
 * and the CPU converts float16 (F16C). */
static bool simd(void) {
#ifdef CPU_VEC_X86
  static int have = -1;
  if (have < 0) have = cpu_vec && __builtin_cpu_supports("f16c");
  return have;
#else
  return false;
#endif
}

static float dot_f32(const float *x, const float *y, int64_t n) {
#ifdef CPU_VEC_X86
  if (simd()) return cpu_vec_dot_f32_avx2(x, y, n);
#endif
  float s = 0;
  for (int64_t i = 0; i < n; i++) s += x[i] * y[i];
  return s;
}

/* ---------------------------------------------------------------- drivers */

/* Threads for work of `units` (values touched): one below a size where starting threads costs
 * more than it saves. */
static int threads_for(int64_t units) {
  int nt = dle_get_num_threads();
  return units < (1 << 15) ? 1 : nt;
}

static void cpu_quantize(dle_qtype q, int64_t rows, int64_t cols, const float *x, uint8_t *w) {
  const format *f = &formats[q];
  int64_t nb = cols / f->block, rb = nb * f->bytes;
  int nt = threads_for(rows * cols * 8);
  (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (int64_t r = 0; r < rows; r++)
    for (int64_t b = 0; b < nb; b++)
      f->quantize(x + r * cols + b * f->block, w + r * rb + b * f->bytes);
}

static void cpu_dequantize(dle_qtype q, int64_t rows, int64_t cols, const uint8_t *w, float *y) {
  const format *f = &formats[q];
  int64_t nb = cols / f->block, rb = nb * f->bytes;
  int nt = threads_for(rows * cols);
  (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (int64_t r = 0; r < rows; r++) expand_blocks(f, w + r * rb, 0, nb, y + r * cols);
}

#ifdef CPU_VEC_X86
/* y {n} = W x for one activation row, a share of W's rows per part: decoding runs these back to
 * back, on the polling pool (cpu_spin_pool.h). */
typedef struct {
  dle_qtype q;
  int64_t n, k, rb;
  const float *x;
  const uint8_t *w;
  float *y;
} matvec_job;

static void matvec_part(void *ctx, int part, int parts) {
  const matvec_job *job = ctx;
  int64_t lo, hi;
  cpu_spin_pool_share(job->n, part, parts, &lo, &hi);
  for (int64_t j = lo; j < hi; j++)
    job->y[j] = cpu_vec_qdot_avx2(job->q, job->w + j * job->rb, job->x, job->k);
}
#endif

/* Values of a row of W a thread expands at once (a multiple of every block size). */
#define CHUNK_VALUES 1024

/* y {m, n} = x {m, k} @ W^T: each thread takes a range of W's rows. One activation row with AVX2:
 * the blocks are expanded inside the dot product; otherwise a row of W is expanded a chunk at a
 * time into the thread's buffer, which is dotted with every activation row. */
static void cpu_matmul_nt(dle_qtype q, int64_t m, int64_t n, int64_t k, const float *x,
                          const uint8_t *w, float *y) {
  const format *f = &formats[q];
  int64_t nb = k / f->block, rb = nb * f->bytes, per = CHUNK_VALUES / f->block;
  int nt = threads_for(n * k * (m < 4 ? m : 4));
  (void)nt;
#ifdef CPU_VEC_X86
  if (m == 1 && simd()) {
    if (nt > 1 && dle_tuning_get(DLE_TUNE_SPIN_POOL_POLL_US) > 0) {
      matvec_job job = {q, n, k, rb, x, w, y};
      cpu_spin_pool_run(nt, matvec_part, &job);
      return;
    }
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int64_t j = 0; j < n; j++) y[j] = cpu_vec_qdot_avx2(q, w + j * rb, x, k);
    return;
  }
#endif
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (int64_t j = 0; j < n; j++) {
    float buf[CHUNK_VALUES];
    for (int64_t i = 0; i < m; i++) y[i * n + j] = 0;
    for (int64_t b0 = 0; b0 < nb; b0 += per) {
      int64_t b1 = QMIN(nb, b0 + per), c0 = b0 * f->block, len = (b1 - b0) * f->block;
      expand_blocks(f, w + j * rb, b0, b1, buf);
      for (int64_t i = 0; i < m; i++) y[i * n + j] += dot_f32(x + i * k + c0, buf, len);
    }
  }
}

/* y {m, k} = x {m, n} @ W: each thread owns a range of column blocks of y, walks W's rows and
 * adds x[i, j] times the expanded part of row j (no two threads write the same element). */
static void cpu_matmul_nn(dle_qtype q, int64_t m, int64_t n, int64_t k, const float *x,
                          const uint8_t *w, float *y) {
  const format *f = &formats[q];
  int64_t nb = k / f->block, rb = nb * f->bytes;
  int64_t per = CHUNK_VALUES / f->block;
  int64_t nchunks = (nb + per - 1) / per;
  int nt = threads_for(n * k * (m < 4 ? m : 4));
  (void)nt;
  memset(y, 0, (size_t)(m * k) * sizeof(float));
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (int64_t c = 0; c < nchunks; c++) {
    float buf[CHUNK_VALUES];
    int64_t b0 = c * per, b1 = QMIN(nb, b0 + per), c0 = b0 * f->block, len = (b1 - b0) * f->block;
    for (int64_t j = 0; j < n; j++) {
      expand_blocks(f, w + j * rb, b0, b1, buf);
      for (int64_t i = 0; i < m; i++) {
        float a = x[i * n + j], *yi = y + i * k + c0;
        for (int64_t l = 0; l < len; l++) yi[l] += a * buf[l];
      }
    }
  }
}

static const dle_quant_kernels cpu_quant = {
    .quantize = cpu_quantize,
    .dequantize = cpu_dequantize,
    .matmul_nt = cpu_matmul_nt,
    .matmul_nn = cpu_matmul_nn,
};

void cpu_register_quant(dle_backend *b) { b->quant = &cpu_quant; }
