/* cpu_conv.c — CPU kernels of 2-D convolution and pooling over {N, C, H, W}.
 *
 * The front door (engine/ops/conv.c) hands over contiguous inputs in one float dtype and
 * contiguous outputs of the right shape; attrs.ints hold the geometry (see ops.def).
 *
 * conv2d        y[n, o] = sum_c w[o, c] * x[n, c] (+ bias): im2col of a chunk of samples into
 *               col {C*kh*kw, B*L} (L = Ho*Wo, B samples side by side), then per group one gemm
 *               W_g {Og, K} . col_g {K, B*L}, scattered into y with the bias.
 * grad_input    col_g = W_g^T . gy_g, then col2im: each {H, W} plane accumulates its columns in
 *               a compute-type plane buffer, then is stored.
 * grad_weight   gw_g += gy_g . col_g^T over the chunks (gemm with beta = 1).
 * Pools         direct loops over the N*C planes.
 *
 * Every kernel body is written once and instantiated per float dtype with the X-macros of
 * cpu_types.h; the compute type CT (float for float16/bfloat16, float32 and float64 otherwise)
 * selects sgemm or dgemm. No BLAS call is ever made inside an OpenMP region. The conv loops
 * around the gemms (im2col, scatter, col2im) run serially (CONV_GRAIN): measured on the 2-core
 * machine, OpenMP regions right after an OpenBLAS call compete with OpenBLAS's spinning threads and
 * made conv2d 2x slower (104 ms vs 47 ms forward for 128x32x14x14 -> 64). The pools (no BLAS)
 * run over the N*C planes with OpenMP. */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>

#include "cpu_backend.h"
#include "cpu_gemm.h"
#include "cpu_loop.h"

/* Work size from which the conv loops around BLAS would use OpenMP: never (see above); build
 * with -DCONV_GRAIN=CPU_PARALLEL_GRAIN to measure again. Pools use CPU_PARALLEL_GRAIN. */
#ifndef CONV_GRAIN
#define CONV_GRAIN INT64_MAX
#endif

/* Geometry of one conv call, read from attrs and the tensors. */
typedef struct {
  int64_t n, c, h, w;      /* input */
  int64_t o, kh, kw;       /* weight {O, C/G, kh, kw} */
  int64_t ho, wo;          /* output */
  int64_t sh, sw, ph, pw, dh, dw, g;
  int64_t cg, og, k, l;    /* C/G, O/G, K = C/G*kh*kw, L = Ho*Wo */
} conv_geom;

static conv_geom make_geom(const int64_t *xs, const int64_t *ws, const int64_t *ys, const dle_attrs *a) {
  conv_geom q;
  q.n = xs[0], q.c = xs[1], q.h = xs[2], q.w = xs[3];
  q.o = ws[0], q.kh = ws[2], q.kw = ws[3];
  q.ho = ys[2], q.wo = ys[3];
  q.sh = a->ints[0], q.sw = a->ints[1], q.ph = a->ints[2], q.pw = a->ints[3];
  q.dh = a->ints[4], q.dw = a->ints[5], q.g = a->ints[6];
  q.cg = q.c / q.g, q.og = q.o / q.g;
  q.k = q.cg * q.kh * q.kw, q.l = q.ho * q.wo;
  return q;
}

/* Samples per chunk: the column buffer stays under ~8 MiB (at least one sample), which keeps it
 * near the caches while still giving gemm thousands of columns for MNIST-sized layers. */
#define CONV_COL_BYTES ((int64_t)8 << 20)
static int64_t chunk_of(const conv_geom *q, size_t es) {
  int64_t per = q->c * q->kh * q->kw * q->l * (int64_t)es;
  int64_t b = per > 0 ? CONV_COL_BYTES / per : q->n;
  if (b < 1) b = 1;
  if (b > q->n) b = q->n;
  while (b > 1 && b * q->l > INT_MAX / 2) b /= 2;
  return b;
}

static dle_status check_blas(const char *fn, const conv_geom *q, int64_t b) {
  if (q->k > INT_MAX || q->og > INT_MAX || b * q->l > INT_MAX)
    return dle_error("%s: sizes exceed BLAS's 32-bit limits (K = %lld, L = %lld)", fn,
                     (long long)q->k, (long long)(b * q->l));
  return DLE_OK;
}


static void *alloc_or_null(size_t n) { return dle_cpu_alloc(n ? n : 1); }

/* ---- conv kernels, one body per dtype ---- */
#define CONV_KERNELS(ID, T, CT)                                                                   \
  /* col[(c*kh*kw + i*kw + j) * ld + b*L + l] = x[b0 + b, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw] */ \
  static void im2col_##ID(const T *x, int64_t b0, int64_t nb, const conv_geom *q, CT *col) {      \
    int64_t ld = nb * q->l, total = nb * q->c;                                                    \
    _Pragma("omp parallel for schedule(static) if (total * q->k * q->l >= CONV_GRAIN)")   \
    for (int64_t bc = 0; bc < total; bc++) {                                                      \
      int64_t b = bc / q->c, c = bc % q->c;                                                       \
      const T *plane = x + ((b0 + b) * q->c + c) * q->h * q->w;                                   \
      for (int64_t i = 0; i < q->kh; i++)                                                         \
        for (int64_t j = 0; j < q->kw; j++) {                                                     \
          CT *row = col + ((c * q->kh + i) * q->kw + j) * ld + b * q->l;                          \
          for (int64_t oh = 0; oh < q->ho; oh++) {                                                \
            int64_t ih = oh * q->sh - q->ph + i * q->dh;                                          \
            CT *r = row + oh * q->wo;                                                             \
            if (ih < 0 || ih >= q->h) {                                                           \
              for (int64_t ow = 0; ow < q->wo; ow++) r[ow] = 0;                                   \
              continue;                                                                           \
            }                                                                                     \
            const T *src = plane + ih * q->w;                                                     \
            for (int64_t ow = 0; ow < q->wo; ow++) {                                              \
              int64_t iw = ow * q->sw - q->pw + j * q->dw;                                        \
              r[ow] = (iw >= 0 && iw < q->w) ? (CT)LD_##ID(src[iw]) : (CT)0;                      \
            }                                                                                     \
          }                                                                                       \
        }                                                                                         \
    }                                                                                             \
  }                                                                                               \
  /* dst {O, nb*L} (CT) <- gy[b0.., o, l] */                                                      \
  static void gather_gy_##ID(const T *gy, int64_t b0, int64_t nb, const conv_geom *q, CT *dst) {  \
    int64_t ld = nb * q->l, total = nb * q->o;                                                    \
    _Pragma("omp parallel for schedule(static) if (total * q->l >= CONV_GRAIN)")          \
    for (int64_t bo = 0; bo < total; bo++) {                                                      \
      int64_t b = bo / q->o, o = bo % q->o;                                                       \
      const T *s = gy + ((b0 + b) * q->o + o) * q->l;                                             \
      CT *d = dst + o * ld + b * q->l;                                                            \
      for (int64_t l = 0; l < q->l; l++) d[l] = LD_##ID(s[l]);                                    \
    }                                                                                             \
  }                                                                                               \
  static void load_##ID(const T *src, CT *dst, int64_t n) {                                       \
    for (int64_t i = 0; i < n; i++) dst[i] = LD_##ID(src[i]);                                     \
  }                                                                                               \
  static dle_status conv_fwd_##ID(dle_tensor *y, dle_tensor *const *ins, int nin,                 \
                                  const dle_attrs *a) {                                           \
    const dle_tensor *xt = ins[0], *wt = ins[1];                                                  \
    conv_geom q = make_geom(xt->sizes, wt->sizes, y->sizes, a);                                   \
    const T *x = dle_tensor_data(xt), *bias = nin > 2 ? dle_tensor_data(ins[2]) : NULL;           \
    T *yp = dle_tensor_data(y);                                                                   \
    int64_t B = chunk_of(&q, sizeof(CT));                                                         \
    DLE_TRY(check_blas("conv2d", &q, B));                                                         \
    CT *w = alloc_or_null(sizeof(CT) * (size_t)(q.o * q.k));                                      \
    CT *col = alloc_or_null(sizeof(CT) * (size_t)(q.c * q.kh * q.kw * B * q.l));                  \
    CT *tmp = alloc_or_null(sizeof(CT) * (size_t)(q.o * B * q.l));                                \
    if (!w || !col || !tmp) {                                                                     \
      dle_cpu_free(w, sizeof(CT) * (size_t)(q.o * q.k));                                          \
      dle_cpu_free(col, sizeof(CT) * (size_t)(q.c * q.kh * q.kw * B * q.l));                      \
      dle_cpu_free(tmp, sizeof(CT) * (size_t)(q.o * B * q.l));                                    \
      return dle_error("conv2d: out of memory for the column buffers");                           \
    }                                                                                             \
    load_##ID((const T *)dle_tensor_data(wt), w, q.o * q.k);                                      \
    for (int64_t b0 = 0; b0 < q.n; b0 += B) {                                                     \
      int64_t nb = q.n - b0 < B ? q.n - b0 : B, ld = nb * q.l;                                    \
      im2col_##ID(x, b0, nb, &q, col);                                                            \
      for (int64_t g = 0; g < q.g; g++)                                                           \
        GEMM(CT)(false, false, q.og, ld, q.k, w + g * q.og * q.k, q.k, col + g * q.k * ld, ld,    \
                 (CT)0, tmp + g * q.og * ld, ld);                                                 \
      int64_t total = nb * q.o;                                                                   \
      _Pragma("omp parallel for schedule(static) if (total * q.l >= CONV_GRAIN)")         \
      for (int64_t bo = 0; bo < total; bo++) {                                                    \
        int64_t b = bo / q.o, o = bo % q.o;                                                       \
        CT add = bias ? (CT)LD_##ID(bias[o]) : (CT)0;                                             \
        const CT *s = tmp + o * ld + b * q.l;                                                     \
        T *d = yp + ((b0 + b) * q.o + o) * q.l;                                                   \
        for (int64_t l = 0; l < q.l; l++) d[l] = ST_##ID(s[l] + add);                             \
      }                                                                                           \
    }                                                                                             \
    dle_cpu_free(w, sizeof(CT) * (size_t)(q.o * q.k));                                            \
    dle_cpu_free(col, sizeof(CT) * (size_t)(q.c * q.kh * q.kw * B * q.l));                        \
    dle_cpu_free(tmp, sizeof(CT) * (size_t)(q.o * B * q.l));                                      \
    return DLE_OK;                                                                                \
  }                                                                                               \
  /* gx {N, C, H, W} from gy {N, O, Ho, Wo} and w {O, C/G, kh, kw} */                              \
  static dle_status conv_gin_##ID(dle_tensor *gx, dle_tensor *const *ins, const dle_attrs *a) {   \
    const dle_tensor *gyt = ins[0], *wt = ins[1];                                                 \
    conv_geom q = make_geom(gx->sizes, wt->sizes, gyt->sizes, a);                                 \
    const T *gy = dle_tensor_data(gyt);                                                           \
    T *gxp = dle_tensor_data(gx);                                                                 \
    int64_t B = chunk_of(&q, sizeof(CT));                                                         \
    DLE_TRY(check_blas("conv2d_grad_input", &q, B));                                              \
    size_t nw = (size_t)(q.o * q.k), ncol = (size_t)(q.c * q.kh * q.kw * B * q.l),                \
           ngy = (size_t)(q.o * B * q.l), nacc = (size_t)(q.h * q.w);                             \
    CT *w = alloc_or_null(sizeof(CT) * nw), *col = alloc_or_null(sizeof(CT) * ncol),              \
       *gyc = alloc_or_null(sizeof(CT) * ngy), *acc = alloc_or_null(sizeof(CT) * nacc);           \
    if (!w || !col || !gyc || !acc) {                                                             \
      dle_cpu_free(acc, sizeof(CT) * nacc);                                                       \
      dle_cpu_free(w, sizeof(CT) * nw);                                                           \
      dle_cpu_free(col, sizeof(CT) * ncol);                                                       \
      dle_cpu_free(gyc, sizeof(CT) * ngy);                                                        \
      return dle_error("conv2d_grad_input: out of memory for the column buffers");                \
    }                                                                                             \
    load_##ID((const T *)dle_tensor_data(wt), w, q.o * q.k);                                      \
    for (int64_t b0 = 0; b0 < q.n; b0 += B) {                                                     \
      int64_t nb = q.n - b0 < B ? q.n - b0 : B, ld = nb * q.l;                                    \
      gather_gy_##ID(gy, b0, nb, &q, gyc);                                                        \
      for (int64_t g = 0; g < q.g; g++)                                                           \
        GEMM(CT)(true, false, q.k, ld, q.og, w + g * q.og * q.k, q.k, gyc + g * q.og * ld, ld,    \
                 (CT)0, col + g * q.k * ld, ld);                                                  \
      /* col2im: each (sample, channel) plane accumulates its columns in the CT plane acc */    \
      for (int64_t b = 0; b < nb; b++)                                                            \
        for (int64_t c = 0; c < q.c; c++) {                                                       \
          for (int64_t i = 0; i < q.h * q.w; i++) acc[i] = 0;                                     \
          for (int64_t i = 0; i < q.kh; i++)                                                      \
            for (int64_t j = 0; j < q.kw; j++) {                                                  \
              const CT *row = col + ((c * q.kh + i) * q.kw + j) * ld + b * q.l;                   \
              for (int64_t oh = 0; oh < q.ho; oh++) {                                             \
                int64_t ih = oh * q.sh - q.ph + i * q.dh;                                         \
                if (ih < 0 || ih >= q.h) continue;                                                \
                CT *dst = acc + ih * q.w;                                                         \
                const CT *r = row + oh * q.wo;                                                    \
                for (int64_t ow = 0; ow < q.wo; ow++) {                                           \
                  int64_t iw = ow * q.sw - q.pw + j * q.dw;                                       \
                  if (iw >= 0 && iw < q.w) dst[iw] += r[ow];                                      \
                }                                                                                 \
              }                                                                                   \
            }                                                                                     \
          T *plane = gxp + ((b0 + b) * q.c + c) * q.h * q.w;                                      \
          for (int64_t i = 0; i < q.h * q.w; i++) plane[i] = ST_##ID(acc[i]);                     \
        }                                                                                         \
    }                                                                                             \
    dle_cpu_free(acc, sizeof(CT) * nacc);                                                         \
    dle_cpu_free(w, sizeof(CT) * nw);                                                             \
    dle_cpu_free(col, sizeof(CT) * ncol);                                                         \
    dle_cpu_free(gyc, sizeof(CT) * ngy);                                                          \
    return DLE_OK;                                                                                \
  }                                                                                               \
  /* gw {O, C/G, kh, kw} from gy {N, O, Ho, Wo} and x {N, C, H, W} */                              \
  static dle_status conv_gw_##ID(dle_tensor *gw, dle_tensor *const *ins, const dle_attrs *a) {    \
    const dle_tensor *gyt = ins[0], *xt = ins[1];                                                 \
    conv_geom q = make_geom(xt->sizes, gw->sizes, gyt->sizes, a);                                 \
    const T *gy = dle_tensor_data(gyt), *x = dle_tensor_data(xt);                                 \
    T *gwp = dle_tensor_data(gw);                                                                 \
    int64_t B = chunk_of(&q, sizeof(CT));                                                         \
    DLE_TRY(check_blas("conv2d_grad_weight", &q, B));                                             \
    size_t nw = (size_t)(q.o * q.k), ncol = (size_t)(q.c * q.kh * q.kw * B * q.l),                \
           ngy = (size_t)(q.o * B * q.l);                                                         \
    CT *acc = alloc_or_null(sizeof(CT) * nw), *col = alloc_or_null(sizeof(CT) * ncol),            \
       *gyc = alloc_or_null(sizeof(CT) * ngy);                                                    \
    if (!acc || !col || !gyc) {                                                                   \
      dle_cpu_free(acc, sizeof(CT) * nw);                                                         \
      dle_cpu_free(col, sizeof(CT) * ncol);                                                       \
      dle_cpu_free(gyc, sizeof(CT) * ngy);                                                        \
      return dle_error("conv2d_grad_weight: out of memory for the column buffers");               \
    }                                                                                             \
    for (size_t i = 0; i < nw; i++) acc[i] = 0;                                                   \
    for (int64_t b0 = 0; b0 < q.n; b0 += B) {                                                     \
      int64_t nb = q.n - b0 < B ? q.n - b0 : B, ld = nb * q.l;                                    \
      im2col_##ID(x, b0, nb, &q, col);                                                            \
      gather_gy_##ID(gy, b0, nb, &q, gyc);                                                        \
      for (int64_t g = 0; g < q.g; g++)                                                           \
        GEMM(CT)(false, true, q.og, q.k, ld, gyc + g * q.og * ld, ld, col + g * q.k * ld, ld,     \
                 (CT)1, acc + g * q.og * q.k, q.k);                                               \
    }                                                                                             \
    for (size_t i = 0; i < nw; i++) gwp[i] = ST_##ID(acc[i]);                                     \
    dle_cpu_free(acc, sizeof(CT) * nw);                                                           \
    dle_cpu_free(col, sizeof(CT) * ncol);                                                         \
    dle_cpu_free(gyc, sizeof(CT) * ngy);                                                          \
    return DLE_OK;                                                                                \
  }
CPU_FLOAT_TYPES(CONV_KERNELS)

/* ---- pools: ints kernel h, w, stride h, w, padding h, w (avg: ints[6] count_include_pad) ---- */
typedef struct {
  int64_t planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw;
  bool include_pad;
} pool_geom;

static pool_geom make_pool(const int64_t *xs, const int64_t *ys, const dle_attrs *a) {
  pool_geom p = {xs[0] * xs[1], xs[2], xs[3], ys[2], ys[3], a->ints[0], a->ints[1], a->ints[2],
                 a->ints[3], a->ints[4], a->ints[5], a->ints[6] != 0};
  return p;
}

/* The window of output (oh, ow) clipped to the input: [h0, h1) x [w0, w1), and the divisor of the
 * average (PyTorch's: the window clipped to the padded input, or only the valid cells). */
static int64_t pool_window(const pool_geom *p, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1,
                           int64_t *w0, int64_t *w1) {
  int64_t hs = oh * p->sh - p->ph, ws = ow * p->sw - p->pw;
  int64_t he = hs + p->kh < p->h + p->ph ? hs + p->kh : p->h + p->ph;
  int64_t we = ws + p->kw < p->w + p->pw ? ws + p->kw : p->w + p->pw;
  int64_t padded = (he - hs) * (we - ws);
  *h0 = hs > 0 ? hs : 0, *w0 = ws > 0 ? ws : 0;
  *h1 = he < p->h ? he : p->h, *w1 = we < p->w ? we : p->w;
  return p->include_pad ? padded : (*h1 - *h0) * (*w1 - *w0);
}

#define POOL_KERNELS(ID, T, CT)                                                                   \
  static void max_pool_##ID(dle_tensor *yt, dle_tensor *it, const dle_tensor *xt, const pool_geom *p, \
                            int64_t base) {                                                       \
    const T *x = dle_tensor_data(xt);                                                             \
    T *y = dle_tensor_data(yt);                                                                   \
    int64_t *idx = dle_tensor_data(it);                                                           \
    _Pragma("omp parallel for schedule(static) if (p->planes * p->h * p->w >= CPU_PARALLEL_GRAIN)") \
    for (int64_t pl = 0; pl < p->planes; pl++) {                                                  \
      const T *xp = x + pl * p->h * p->w;                                                         \
      for (int64_t oh = 0; oh < p->ho; oh++)                                                      \
        for (int64_t ow = 0; ow < p->wo; ow++) {                                                  \
          int64_t h0, h1, w0, w1;                                                                 \
          pool_window(p, oh, ow, &h0, &h1, &w0, &w1);                                             \
          CT best = (CT)-INFINITY;                                                                \
          int64_t bi = h0 * p->w + w0;                                                            \
          for (int64_t h = h0; h < h1; h++)                                                       \
            for (int64_t w = w0; w < w1; w++) {                                                   \
              CT v = LD_##ID(xp[h * p->w + w]);                                                   \
              if (v > best || isnan(v)) best = v, bi = h * p->w + w;                              \
            }                                                                                     \
          int64_t o = (pl * p->ho + oh) * p->wo + ow;                                             \
          y[o] = ST_##ID(best);                                                                   \
          idx[o] = bi + base;                                                                     \
        }                                                                                         \
    }                                                                                             \
  }                                                                                               \
  static void avg_pool_##ID(dle_tensor *yt, const dle_tensor *xt, const pool_geom *p) {           \
    const T *x = dle_tensor_data(xt);                                                             \
    T *y = dle_tensor_data(yt);                                                                   \
    _Pragma("omp parallel for schedule(static) if (p->planes * p->h * p->w >= CPU_PARALLEL_GRAIN)") \
    for (int64_t pl = 0; pl < p->planes; pl++) {                                                  \
      const T *xp = x + pl * p->h * p->w;                                                         \
      for (int64_t oh = 0; oh < p->ho; oh++)                                                      \
        for (int64_t ow = 0; ow < p->wo; ow++) {                                                  \
          int64_t h0, h1, w0, w1;                                                                 \
          int64_t div = pool_window(p, oh, ow, &h0, &h1, &w0, &w1);                               \
          CT s = 0;                                                                               \
          for (int64_t h = h0; h < h1; h++)                                                       \
            for (int64_t w = w0; w < w1; w++) s += LD_##ID(xp[h * p->w + w]);                     \
          y[(pl * p->ho + oh) * p->wo + ow] = ST_##ID(div > 0 ? s / (CT)div : (CT)0);             \
        }                                                                                         \
    }                                                                                             \
  }                                                                                               \
  /* the adjoint of avg_pool, as a gather: input (h, w) sums gy/div over the windows holding it */ \
  static void avg_pool_grad_##ID(dle_tensor *gxt, const dle_tensor *gyt, const pool_geom *p) {    \
    const T *gy = dle_tensor_data(gyt);                                                           \
    T *gx = dle_tensor_data(gxt);                                                                 \
    _Pragma("omp parallel for schedule(static) if (p->planes * p->h * p->w >= CPU_PARALLEL_GRAIN)") \
    for (int64_t pl = 0; pl < p->planes; pl++) {                                                  \
      const T *gp = gy + pl * p->ho * p->wo;                                                      \
      for (int64_t h = 0; h < p->h; h++)                                                          \
        for (int64_t w = 0; w < p->w; w++) {                                                      \
          /* outputs oh with oh*sh - ph <= h < oh*sh - ph + kh */                                 \
          int64_t lo_h = h + p->ph - p->kh + 1, lo_w = w + p->pw - p->kw + 1;                     \
          int64_t oh0 = lo_h <= 0 ? 0 : (lo_h + p->sh - 1) / p->sh;                               \
          int64_t ow0 = lo_w <= 0 ? 0 : (lo_w + p->sw - 1) / p->sw;                               \
          int64_t oh1 = (h + p->ph) / p->sh, ow1 = (w + p->pw) / p->sw;                           \
          if (oh1 >= p->ho) oh1 = p->ho - 1;                                                      \
          if (ow1 >= p->wo) ow1 = p->wo - 1;                                                      \
          CT s = 0;                                                                               \
          for (int64_t oh = oh0; oh <= oh1; oh++)                                                 \
            for (int64_t ow = ow0; ow <= ow1; ow++) {                                             \
              int64_t h0, h1, w0, w1;                                                             \
              int64_t div = pool_window(p, oh, ow, &h0, &h1, &w0, &w1);                           \
              if (div > 0) s += LD_##ID(gp[oh * p->wo + ow]) / (CT)div;                           \
            }                                                                                     \
          gx[(pl * p->h + h) * p->w + w] = ST_##ID(s);                                            \
        }                                                                                         \
    }                                                                                             \
  }
CPU_FLOAT_TYPES(POOL_KERNELS)

/* ---- dispatch over dtypes ---- */
static dle_status cpu_conv(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                           const dle_attrs *a) {
  dle_tensor *o = outs[0];
  const char *fn = dle_op_get_info(op)->name;
  for (int i = 0; i < nin; i++)
    if (ins[i]->dtype != o->dtype || !dle_tensor_is_contiguous(ins[i]))
      return dle_error("%s: the CPU kernel expects contiguous %s inputs", fn, dle_dtype_name(o->dtype));
  if (!dle_tensor_is_contiguous(o)) return dle_error("%s: the CPU kernel expects a contiguous output", fn);
  if (dle_tensor_numel(o) == 0) return DLE_OK;
  pool_geom p;
  switch (op) {
    case DLE_OP_CONV2D:
    case DLE_OP_CONV2D_GRAD_INPUT:
    case DLE_OP_CONV2D_GRAD_WEIGHT: {
      bool empty = false;
      for (int i = 0; i < nin; i++) empty = empty || dle_tensor_numel(ins[i]) == 0;
      if (empty) {  /* a sum over nothing: zeros, or the bias alone */
        memset(dle_tensor_data(o), 0, (size_t)dle_tensor_numel(o) * dle_dtype_size(o->dtype));
        if (op != DLE_OP_CONV2D || nin < 3) return DLE_OK;
        int64_t idx[4];
        for (idx[0] = 0; idx[0] < o->sizes[0]; idx[0]++)
          for (idx[1] = 0; idx[1] < o->sizes[1]; idx[1]++)
            for (idx[2] = 0; idx[2] < o->sizes[2]; idx[2]++)
              for (idx[3] = 0; idx[3] < o->sizes[3]; idx[3]++)
                dle_tensor_set(o, idx, dle_tensor_get(ins[2], &idx[1]));
        return DLE_OK;
      }
      break;
    }
    case DLE_OP_MAX_POOL2D:
    case DLE_OP_AVG_POOL2D:
      p = make_pool(ins[0]->sizes, o->sizes, a);
      break;
    case DLE_OP_AVG_POOL2D_GRAD:
      p = make_pool(o->sizes, ins[0]->sizes, a);
      break;
    default:
      return dle_error("%s: not a conv kernel", fn);
  }
#define CASE(ID, T, CT)                                                                   \
  case DLE_##ID:                                                                          \
    switch (op) {                                                                         \
      case DLE_OP_CONV2D: return conv_fwd_##ID(o, ins, nin, a);                           \
      case DLE_OP_CONV2D_GRAD_INPUT: return conv_gin_##ID(o, ins, a);                     \
      case DLE_OP_CONV2D_GRAD_WEIGHT: return conv_gw_##ID(o, ins, a);                     \
      case DLE_OP_MAX_POOL2D: max_pool_##ID(o, outs[1], ins[0], &p, a->index_base); return DLE_OK; \
      case DLE_OP_AVG_POOL2D: avg_pool_##ID(o, ins[0], &p); return DLE_OK;                \
      case DLE_OP_AVG_POOL2D_GRAD: avg_pool_grad_##ID(o, ins[0], &p); return DLE_OK;      \
      default: break;                                                                     \
    }                                                                                     \
    break;
  switch (o->dtype) {
    CPU_FLOAT_TYPES(CASE)
    default: break;
  }
#undef CASE
  return dle_error("%s: no CPU kernel for %s", fn, dle_dtype_name(o->dtype));
}

void cpu_register_conv(dle_backend *b) {
  b->kernels[DLE_OP_CONV2D] = cpu_conv;
  b->kernels[DLE_OP_CONV2D_GRAD_INPUT] = cpu_conv;
  b->kernels[DLE_OP_CONV2D_GRAD_WEIGHT] = cpu_conv;
  b->kernels[DLE_OP_MAX_POOL2D] = cpu_conv;
  b->kernels[DLE_OP_AVG_POOL2D] = cpu_conv;
  b->kernels[DLE_OP_AVG_POOL2D_GRAD] = cpu_conv;
}
