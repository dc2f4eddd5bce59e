/* conv.c — CPU kernels of 2-D convolution over {N, C, H, W} and its two gradients.
 *
 * The front door (engine/ops/conv.c) hands over contiguous inputs in one float dtype and
 * contiguous outputs of the right shape; attrs.ints hold the geometry (see ops.def).
 *
 * conv2d        y[n, o] = sum_c w[o, c] * x[n, c] (+ bias): im2col of a chunk of samples into
 *               col {C*kh*kw, B*L} (L = Ho*Wo, B samples side by side), then per group one gemm
 *               W_g {Og, K} . col_g {K, B*L}, scattered into y with the bias.
 * grad_input    col_g = W_g^T . gy_g, then col2im adds each column into its place of gx (float32,
 *               float64) or of a compute-type buffer stored into gx afterwards (16-bit floats).
 * grad_weight   gw_g = gy_g . col_g^T, accumulated over the chunks (gemm with beta = 1) in one
 *               buffer per span of chunks (see job_init), summed at the end.
 * The chunk size B is chosen by chunk_of (see there; a large sample is done in parts of output
 * rows); a chunk of one sample in float32/float64 needs no gather or scatter: its gemms read gy and
 * write y in place (the bias written first, then accumulated onto).
 * Threads: each OpenMP thread takes whole chunks on its own buffers (cpu_conv_job.c).
 * 3x3 kernels at stride 1 with enough channels go to Winograd instead (cpu_conv_winograd.c);
 * conv2d of one-row inputs and kernels at stride 1 (conv1d) and of 1x1 kernels at stride 1
 * without padding goes by taps, one gemm per kernel tap on the input itself (by_taps), except
 * float32 conv1d on a CPU with AVX-512, computed directly (cpu_conv1d_direct.c).
 * im2col and col2im work on runs of valid output columns computed once per kernel tap (tap_of),
 * so their inner loops are branch-free copies/adds (contiguous for stride 1; one shifted run per
 * tap when stride 1 keeps the width, as with "same" padding).
 *
 * Every kernel body is written once and instantiated per float dtype with the X-macros of
 * cpu_types.h; the compute type CT (float for float16/bfloat16, float32 and float64 otherwise)
 * selects sgemm or dgemm. */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>

#include "backend.h"
#include "cpu_conv1d_direct.h"
#include "cpu_conv_job.h"
#include "cpu_conv_winograd.h"
#include "cpu_exp.h" /* CPU_CLONES */
#include "cpu_gemm.h"
#include "cpu_loop.h"
#include "cpu_vecmath.h"

/* Samples per chunk: the column buffer of a chunk stays under CONV_COL_BYTES (at least one
 * sample), so im2col writes it into the L2 cache the gemm then reads it from (of 256 KiB,
 * 2 MiB and 8 MiB chunks, 256 KiB was the fastest for Fashion-MNIST's conv2, forward + both
 * gradients, measured when it still went through im2col) -- but a chunk has at least
 * CONV_MIN_COLS columns when that fits CONV_CHUNK_BYTES: on small maps (resnet18's 7x7 and 14x14
 * layers, L = 49 or 196 per sample, K up to 4608) one sample's columns pass the budget, and
 * gemms of L columns each ran well below OpenBLAS's rate on the batch's wider gemm.
 * A sample whose columns alone exceed CONV_PART_BYTES is cut into parts of whole output rows
 * (part_rows): im2col of one part, its gemms, then the next, so the buffer stays bounded on large
 * images and a part's columns are still in the cache when its gemm reads them (resnet18's first
 * layer, 7x7 stride 2 on 224x224 at batch 1: faster with parts of 1 MiB than of 4 MiB, 7 MiB
 * uncut). Parts too keep at least CONV_MIN_COLS columns (conv2 cut into two 128 KiB parts per
 * sample was slower than uncut, and 256 KiB parts made gemms of 7 columns on resnet18's 7x7
 * layers at batch 1, too thin). Each thread has its own buffers: the budget is per thread, and
 * a chunk holds at most a 1/threads share of the batch so that a small batch is still split
 * between the threads. */
#define CONV_COL_BYTES   ((int64_t)256 << 10)
#define CONV_PART_BYTES  ((int64_t)1 << 20)
#define CONV_CHUNK_BYTES ((int64_t)4 << 20)
#define CONV_MIN_COLS    1024
static int64_t chunk_of(const conv_geom *q, size_t es, int threads) {
  int64_t per = q->c * q->kh * q->kw * q->l * (int64_t)es;
  int64_t b = per > 0 ? CONV_COL_BYTES / per : q->n;
  if (per > 0 && q->l > 0 && b * q->l < CONV_MIN_COLS) { /* widen, within CONV_CHUNK_BYTES */
    int64_t want = (CONV_MIN_COLS + q->l - 1) / q->l, most = CONV_CHUNK_BYTES / per;
    b = want < most ? want : most;
  }
  int64_t share = (q->n + threads - 1) / threads; /* every thread gets a chunk when it can */
  if (b > share) b = share;
  if (b < 1) b = 1;
  if (b > q->n) b = q->n;
  while (b > 1 && b * q->l > INT_MAX / 2) b /= 2;
  return b;
}

/* Output rows per part for chunks of b samples: all of them for several samples, else the fewest
 * even parts whose columns fit the budget, each of at least CONV_MIN_COLS columns. */
static int64_t part_rows(const conv_geom *q, int64_t b, size_t es) {
  int64_t per_row = q->c * q->kh * q->kw * q->wo * (int64_t)es;
  if (b > 1 || q->ho < 2 || per_row * q->ho <= CONV_PART_BYTES) return q->ho;
  int64_t r = per_row > 0 ? CONV_PART_BYTES / per_row : q->ho;
  int64_t least = q->wo > 0 ? (CONV_MIN_COLS + q->wo - 1) / q->wo : 1;
  if (r < least) r = least;
  if (r < 1) r = 1;
  int64_t parts = (q->ho + r - 1) / r, most = least > 0 ? q->ho / least : q->ho;
  if (parts > most) parts = most; /* even parts of at least `least` rows */
  if (parts <= 1) return q->ho;
  return (q->ho + parts - 1) / parts;
}

/* ---- the chunk loop and its buffers ---- */

static dle_status check_blas(const char *fn, const conv_geom *q, int64_t b) {
  if (q->k > INT_MAX || q->og > INT_MAX || b * q->l > INT_MAX)
    return dle_error("%s: sizes exceed BLAS's 32-bit limits (K = %lld, L = %lld)", fn,
                     (long long)q->k, (long long)(b * q->l));
  return DLE_OK;
}

/* Sets up j for im2col chunks of q in a compute type of es bytes (nw: a compute-type weight
 * copy, 0 for none; nacc: accumulator elements per sample of a chunk for grad_input's per-thread
 * ones, or in all for grad_weight's per-span ones when per_span). */
static dle_status job_init(conv_job *j, const char *fn, conv_geom q, size_t es, int64_t nw,
                           int64_t nacc, bool per_span) {
  memset(j, 0, sizeof *j);
  int64_t b = chunk_of(&q, es, conv_threads()), rows = part_rows(&q, b, es);
  DLE_TRY(check_blas(fn, &q, b));
  DLE_TRY(conv_job_init(j, fn, q, es, b, nw, q.c * q.kh * q.kw * b * rows * q.wo, q.o * b * q.l,
                        per_span ? nacc : nacc * b, per_span));
  j->rows = rows;
  return DLE_OK;
}

/* Whether grad_weight's products go to the dot-product kernel (cpu_vec_gemm.c) instead of gemm:
 * float32 with few weights per output channel (K = C/G kh kw), as in a first layer's 1 x 3 x 3,
 * where gemm's narrow N = K and the gather of gy into {O, B L} cost most of the time (conv 1->32
 * at 1 thread, a 13 MB problem, ran well below memory speed). */
#define CONV_DOTS_MAX_K 16
static bool gw_by_dots(const conv_geom *q, bool f32) {
  return f32 && cpu_vec && q->k <= CONV_DOTS_MAX_K;
}

/* Whether conv2d's forward goes by taps (taps_chunk) instead of im2col: one-row inputs and
 * kernels at stride 1 (conv1d's lowering, {N, C, 1, W} with a {1, kw} kernel), and 1x1 kernels at
 * stride 1 without padding (their planes are one row of H W). Each tap of the kernel is then one
 * gemm straight on the input rows, shifted, so there are no columns to build: conv1d
 * {32,64,1024} -> 64, k = 3, spent a quarter of its time building and packing them. */
static bool by_taps(const conv_geom *q) {
  bool one_row = q->h == 1 && q->kh == 1 && q->sw == 1 && q->ph == 0;
  bool pointwise = q->kh == 1 && q->kw == 1 && q->sh == 1 && q->sw == 1 && q->ph == 0 && q->pw == 0;
  return one_row || pointwise;
}

/* by_taps's geometry with a 1x1 kernel's planes as one row of H W. */
static conv_geom taps_geom(conv_geom q) {
  if (q.h == 1) return q;
  q.w *= q.h, q.wo *= q.ho, q.h = q.ho = 1;
  return q;
}

/* T and CT are the same type (float32, float64; not the 16-bit floats computing in float) */
#define SAME_TYPE(T, CT) (sizeof(T) == sizeof(CT))

/* The outputs o in [0, n) whose input position o*s + off lies in [0, in): [*lo, *hi). Hoisting
 * this out of the loops leaves im2col/col2im with branch-free runs (contiguous when s == 1). */
static void in_range(int64_t n, int64_t s, int64_t off, int64_t in, int64_t *lo, int64_t *hi) {
  int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t b = off >= in ? 0 : (in - 1 - off) / s + 1;
  if (b > n) b = n;
  if (a > b) a = b;
  *lo = a, *hi = b;
}

/* Kernel tap (i, j): input offsets offh/offw of output (0, 0) and the output rows [oh0, oh1) and
 * columns [ow0, ow1) that read inside the input. */
typedef struct {
  int64_t offh, offw, oh0, oh1, ow0, ow1;
} conv_tap;

static conv_tap tap_of(const conv_geom *q, int64_t i, int64_t j) {
  conv_tap t;
  t.offh = i * q->dh - q->ph, t.offw = j * q->dw - q->pw;
  in_range(q->ho, q->sh, t.offh, q->h, &t.oh0, &t.oh1);
  in_range(q->wo, q->sw, t.offw, q->w, &t.ow0, &t.ow1);
  return t;
}

/* The zero runs im2col writes are mostly a few elements long (a padding row or column per tap):
 * inline stores, not calls to memset (which GCC would substitute for the loops; those calls took
 * a visible share of conv2's forward time). */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_MEMSET __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define NO_MEMSET
#endif

/* ---- conv kernels, one body per dtype ----
 * A part is output rows [r0, r1) (lp = (r1 - r0) * Wo columns per sample) of nb samples; its
 * column block has ld = nb * lp columns, sample b's at b * lp. */
#define CONV_KERNELS(ID, T, CT)                                                                     \
  /* col[(c*kh*kw + i*kw + j) * ld + b*lp + (oh - r0)*Wo + ow]                                    \
   *   = x[b0 + b, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw] (0 in the padding) */ \
  NO_MEMSET CPU_CLONES static void im2col_##ID(const T *x, int64_t b0, int64_t nb, int64_t r0,      \
                                               int64_t r1, const conv_geom *q, CT *col) {           \
    const int64_t wo = q->wo, sw = q->sw, lp = (r1 - r0) * wo, ld = nb * lp;                        \
    /* stride 1 with the output as wide as the input ("same" padding): a tap's valid rows are     \
     * one contiguous run of the plane, shifted */ \
    const bool same_width = q->sh == 1 && sw == 1 && wo == q->w;                                    \
    for (int64_t i = 0; i < q->kh; i++)                                                             \
      for (int64_t j = 0; j < q->kw; j++) {                                                         \
        const conv_tap t = tap_of(q, i, j);                                                         \
        const int64_t offh = t.offh, offw = t.offw, ow0 = t.ow0, ow1 = t.ow1;                       \
        const int64_t oh0 = t.oh0 > r0 ? (t.oh0 < r1 ? t.oh0 : r1) : r0;                            \
        const int64_t oh1 = t.oh1 < r1 ? (t.oh1 > oh0 ? t.oh1 : oh0) : r1;                          \
        for (int64_t bc = 0; bc < nb * q->c; bc++) {                                                \
          const int64_t b = bc / q->c, c = bc % q->c;                                               \
          const T *plane = x + ((b0 + b) * q->c + c) * q->h * q->w;                                 \
          CT *restrict row = col + ((c * q->kh + i) * q->kw + j) * ld + b * lp;                     \
          for (int64_t l = 0; l < (oh0 - r0) * wo; l++) row[l] = 0;                                 \
          for (int64_t l = (oh1 - r0) * wo; l < lp; l++) row[l] = 0;                                \
          if (same_width) { /* one run over the valid rows, then the columns that wrapped */        \
            CT *restrict r = row + (oh0 - r0) * wo;                                                 \
            const T *restrict src = plane + (oh0 + offh) * q->w + offw;                             \
            int64_t n = (oh1 - oh0) * wo, lo = offw < 0 ? -offw : 0,                                \
                    hi = n - (offw > 0 ? offw : 0);                                                 \
            for (int64_t k = lo; k < hi; k++) r[k] = LD_##ID(src[k]);                               \
            for (int64_t oh = 0; oh < oh1 - oh0; oh++) {                                            \
              for (int64_t ow = 0; ow < ow0; ow++) r[oh * wo + ow] = 0;                             \
              for (int64_t ow = ow1; ow < wo; ow++) r[oh * wo + ow] = 0;                            \
            }                                                                                       \
            continue;                                                                               \
          }                                                                                         \
          for (int64_t oh = oh0; oh < oh1; oh++) {                                                  \
            CT *restrict r = row + (oh - r0) * wo;                                                  \
            const T *restrict src = plane + (oh * q->sh + offh) * q->w + offw;                      \
            for (int64_t ow = 0; ow < ow0; ow++) r[ow] = 0;                                         \
            if (sw == 1)                                                                            \
              for (int64_t ow = ow0; ow < ow1; ow++) r[ow] = LD_##ID(src[ow]);                      \
            else if (sw == 2) /* a constant stride, which the compiler vectorizes */                \
              for (int64_t ow = ow0; ow < ow1; ow++) r[ow] = LD_##ID(src[ow * 2]);                  \
            else                                                                                    \
              for (int64_t ow = ow0; ow < ow1; ow++) r[ow] = LD_##ID(src[ow * sw]);                 \
            for (int64_t ow = ow1; ow < wo; ow++) r[ow] = 0;                                        \
          }                                                                                         \
        }                                                                                           \
      }                                                                                             \
  }                                                                                                 \
  /* The adjoint of im2col: acc {nb, C, H, W} (CT) += the columns of the part. With "same"      \
   * width (as in im2col) a tap's rows are added as one shifted run after zeroing, in col, the    \
   * columns that read padding (they would wrap onto the neighbouring row). */   \
  NO_MEMSET static void col2im_##ID(CT *col, int64_t nb, int64_t r0, int64_t r1,                    \
                                    const conv_geom *q, CT *acc) {                                  \
    const int64_t wo = q->wo, sw = q->sw, lp = (r1 - r0) * wo, ld = nb * lp;                        \
    const bool same_width = q->sh == 1 && sw == 1 && wo == q->w;                                    \
    for (int64_t i = 0; i < q->kh; i++)                                                             \
      for (int64_t j = 0; j < q->kw; j++) {                                                         \
        const conv_tap t = tap_of(q, i, j);                                                         \
        const int64_t oh0 = t.oh0 > r0 ? t.oh0 : r0, oh1 = t.oh1 < r1 ? t.oh1 : r1;                 \
        const int64_t ow0 = t.ow0, ow1 = t.ow1, offw = t.offw;                                      \
        for (int64_t bc = 0; bc < nb * q->c && oh0 < oh1; bc++) {                                   \
          const int64_t b = bc / q->c, c = bc % q->c;                                               \
          CT *restrict row = col + ((c * q->kh + i) * q->kw + j) * ld + b * lp;                     \
          CT *restrict plane = acc + bc * q->h * q->w;                                              \
          if (same_width) {                                                                         \
            CT *restrict r = row + (oh0 - r0) * wo;                                                 \
            CT *restrict dst = plane + (oh0 + t.offh) * q->w + offw;                                \
            int64_t n = (oh1 - oh0) * wo, lo = offw < 0 ? -offw : 0,                                \
                    hi = n - (offw > 0 ? offw : 0);                                                 \
            for (int64_t oh = 0; oh < oh1 - oh0; oh++) {                                            \
              for (int64_t ow = 0; ow < ow0; ow++) r[oh * wo + ow] = 0;                             \
              for (int64_t ow = ow1; ow < wo; ow++) r[oh * wo + ow] = 0;                            \
            }                                                                                       \
            for (int64_t k = lo; k < hi; k++) dst[k] += r[k];                                       \
            continue;                                                                               \
          }                                                                                         \
          for (int64_t oh = oh0; oh < oh1; oh++) {                                                  \
            CT *restrict dst = plane + (oh * q->sh + t.offh) * q->w + offw;                         \
            const CT *restrict r = row + (oh - r0) * wo;                                            \
            if (sw == 1)                                                                            \
              for (int64_t ow = ow0; ow < ow1; ow++) dst[ow] += r[ow];                              \
            else                                                                                    \
              for (int64_t ow = ow0; ow < ow1; ow++) dst[ow * sw] += r[ow];                         \
          }                                                                                         \
        }                                                                                           \
      }                                                                                             \
  }                                                                                                 \
  /* gy's part of samples [b0, b0 + nb) as {O, nb*lp} in CT, its leading dim in *ld: gy itself    \
   * for one sample in the compute type, else gathered into dst */ \
  static const CT *gy_part_##ID(const T *gy, int64_t b0, int64_t nb, int64_t r0, int64_t r1,        \
                                const conv_geom *q, CT *dst, int64_t *ld) {                         \
    const int64_t lp = (r1 - r0) * q->wo;                                                           \
    if (nb == 1 && SAME_TYPE(T, CT)) {                                                              \
      *ld = q->l;                                                                                   \
      return (const CT *)(const void *)(gy + b0 * q->o * q->l + r0 * q->wo);                        \
    }                                                                                               \
    *ld = nb * lp;                                                                                  \
    for (int64_t b = 0; b < nb; b++)                                                                \
      for (int64_t o = 0; o < q->o; o++) {                                                          \
        const T *s = gy + ((b0 + b) * q->o + o) * q->l + r0 * q->wo;                                \
        CT *d = dst + o * nb * lp + b * lp;                                                         \
        for (int64_t l = 0; l < lp; l++) d[l] = LD_##ID(s[l]);                                      \
      }                                                                                             \
    return dst;                                                                                     \
  }                                                                                                 \
  /* the weight {O, K} in the compute type: the tensor's own data, or converted into j->wbuf */     \
  static const CT *weight_##ID(const dle_tensor *wt, conv_job *j) {                                 \
    const T *w = dle_tensor_data(wt);                                                               \
    if (SAME_TYPE(T, CT)) return (const CT *)(const void *)w;                                       \
    CT *d = j->wbuf;                                                                                \
    for (int64_t i = 0; i < j->nw; i++) d[i] = LD_##ID(w[i]);                                       \
    return d;                                                                                       \
  }                                                                                                 \
  /* y of samples [b0, b0 + nb) */                                                                  \
  static void fwd_chunk_##ID(const conv_job *j, int64_t b0, int64_t nb, int t, int64_t s) {         \
    const conv_geom *q = &j->q;                                                                     \
    const T *bias = j->bias;                                                                        \
    const CT *w = j->w;                                                                             \
    T *y = j->dst;                                                                                  \
    CT *col = (CT *)j->col + t * j->ncol;                                                           \
    /* one sample in the compute type: the gemms accumulate onto the bias in y's {O, L} block */    \
    const bool direct = nb == 1 && SAME_TYPE(T, CT);                                                \
    CT *out = direct ? (CT *)(void *)(y + b0 * q->o * q->l) : (CT *)j->tmp + t * j->ntmp;           \
    const int64_t ldo = nb * q->l;                                                                  \
    for (int64_t r0 = 0; r0 < q->ho; r0 += j->rows) { /* parts only when nb == 1 */                 \
      const int64_t r1 = r0 + j->rows < q->ho ? r0 + j->rows : q->ho, ld = nb * (r1 - r0) * q->wo;  \
      if (direct && bias) /* the part's outputs, just before its gemm adds onto them */             \
        for (int64_t o = 0; o < q->o; o++)                                                          \
          for (int64_t l = r0 * q->wo; l < r1 * q->wo; l++)                                         \
            out[o * q->l + l] = (CT)LD_##ID(bias[o]);                                               \
      im2col_##ID(j->src, b0, nb, r0, r1, q, col);                                                  \
      for (int64_t g = 0; g < q->g; g++) GEMM(CT)                                                   \
      (false, false, q->og, ld, q->k, w + g * q->og * q->k, q->k, col + g * q->k * ld, ld,          \
       direct && bias ? (CT)1 : (CT)0, out + g * q->og * ldo + r0 * q->wo, ldo);                    \
    }                                                                                               \
    if (direct) return;                                                                             \
    for (int64_t b = 0; b < nb; b++)                                                                \
      for (int64_t o = 0; o < q->o; o++) {                                                          \
        CT add = bias ? (CT)LD_##ID(bias[o]) : (CT)0;                                               \
        const CT *s = out + o * ldo + b * q->l;                                                     \
        T *d = y + ((b0 + b) * q->o + o) * q->l;                                                    \
        for (int64_t l = 0; l < q->l; l++) d[l] = ST_##ID(s[l] + add);                              \
      }                                                                                             \
  }                                                                                                 \
  /* gx of samples [b0, b0 + nb): accumulated in place in float32/float64, else in thread t's acc \
   * and stored */ \
  static void gin_chunk_##ID(const conv_job *j, int64_t b0, int64_t nb, int t, int64_t s) {         \
    const conv_geom *q = &j->q;                                                                     \
    const CT *w = j->w;                                                                             \
    CT *col = (CT *)j->col + t * j->ncol, *tmp = (CT *)j->tmp + t * j->ntmp;                        \
    T *gx = (T *)j->dst + b0 * q->c * q->h * q->w;                                                  \
    const int64_t n = nb * q->c * q->h * q->w;                                                      \
    CT *acc = SAME_TYPE(T, CT) ? (CT *)(void *)gx : (CT *)j->acc + t * j->nacc;                     \
    for (int64_t i = 0; i < n; i++) acc[i] = 0;                                                     \
    for (int64_t r0 = 0; r0 < q->ho; r0 += j->rows) {                                               \
      const int64_t r1 = r0 + j->rows < q->ho ? r0 + j->rows : q->ho, ld = nb * (r1 - r0) * q->wo;  \
      int64_t ldg;                                                                                  \
      const CT *gyb = gy_part_##ID(j->src, b0, nb, r0, r1, q, tmp, &ldg);                           \
      for (int64_t g = 0; g < q->g; g++) GEMM(CT)                                                   \
      (true, false, q->k, ld, q->og, w + g * q->og * q->k, q->k, gyb + g * q->og * ldg, ldg,        \
       (CT)0, col + g * q->k * ld, ld);                                                             \
      col2im_##ID(col, nb, r0, r1, q, acc);                                                         \
    }                                                                                               \
    if (!SAME_TYPE(T, CT))                                                                          \
      for (int64_t i = 0; i < n; i++) gx[i] = ST_##ID(acc[i]);                                      \
  }                                                                                                 \
  /* span s's gw accumulator += the contribution of samples [b0, b0 + nb) */                        \
  static void gw_chunk_##ID(const conv_job *j, int64_t b0, int64_t nb, int t, int64_t s) {          \
    const conv_geom *q = &j->q;                                                                     \
    CT *col = (CT *)j->col + t * j->ncol, *tmp = (CT *)j->tmp + t * j->ntmp;                        \
    CT *acc = (CT *)j->acc + s * j->nacc;                                                           \
    const bool dots = gw_by_dots(q, SAME_TYPE(T, CT) && sizeof(CT) == sizeof(float));               \
    for (int64_t r0 = 0; r0 < q->ho; r0 += j->rows) {                                               \
      const int64_t r1 = r0 + j->rows < q->ho ? r0 + j->rows : q->ho, ld = nb * (r1 - r0) * q->wo;  \
      int64_t ldg;                                                                                  \
      im2col_##ID(j->src, b0, nb, r0, r1, q, col);                                                  \
      if (dots) { /* each sample's gy rows read in place: no gather into {O, nb L} */               \
        const int64_t lp = (r1 - r0) * q->wo;                                                       \
        for (int64_t b = 0; b < nb; b++)                                                            \
          for (int64_t g = 0; g < q->g; g++)                                                        \
            cpu_vec->sgemm_nt_add(                                                                  \
                q->og, q->k, lp,                                                                    \
                (const float *)j->gy + ((b0 + b) * q->o + g * q->og) * q->l + r0 * q->wo, q->l,     \
                (const float *)(const void *)(col + g * q->k * ld + b * lp), ld,                    \
                (float *)(void *)(acc + g * q->og * q->k), q->k);                                   \
        continue;                                                                                   \
      }                                                                                             \
      const CT *gyb = gy_part_##ID(j->gy, b0, nb, r0, r1, q, tmp, &ldg);                            \
      for (int64_t g = 0; g < q->g; g++) GEMM(CT)                                                   \
      (false, true, q->og, q->k, ld, gyb + g * q->og * ldg, ldg, col + g * q->k * ld, ld, (CT)1,    \
       acc + g * q->og * q->k, q->k);                                                               \
    }                                                                                               \
  }                                                                                                 \
  /* y of samples [b0, b0 + nb) by taps (see by_taps): y = bias, then for each tap j one gemm per \
   * group adds W_j {Og, C/G} . x's rows shifted by the tap, over the outputs that read inside   \
   * the row; j->w holds the weight as {kw, O, C/G} */ \
  static void taps_chunk_##ID(const conv_job *j, int64_t b0, int64_t nb, int t, int64_t s) {        \
    const conv_geom *q = &j->q;                                                                     \
    const T *bias = j->bias;                                                                        \
    const CT *wt = j->w;                                                                            \
    for (int64_t b = b0; b < b0 + nb; b++) {                                                        \
      const CT *x = (const CT *)j->src + b * q->c * q->w;                                           \
      CT *y = (CT *)j->dst + b * q->o * q->l;                                                       \
      for (int64_t o = 0; o < q->o; o++)                                                            \
        for (int64_t l = 0; l < q->l; l++) y[o * q->l + l] = bias ? (CT)LD_##ID(bias[o]) : (CT)0;   \
      for (int64_t tap = 0; tap < q->kw; tap++) {                                                   \
        const conv_tap p = tap_of(q, 0, tap);                                                       \
        if (p.ow1 <= p.ow0) continue;                                                               \
        for (int64_t g = 0; g < q->g; g++) GEMM(CT)                                                 \
        (false, false, q->og, p.ow1 - p.ow0, q->cg, wt + (tap * q->o + g * q->og) * q->cg, q->cg,   \
         x + g * q->cg * q->w + p.ow0 + p.offw, q->w, (CT)1, y + g * q->og * q->l + p.ow0, q->l);   \
      }                                                                                             \
    }                                                                                               \
  }                                                                                                 \
  static dle_status conv_taps_##ID(conv_geom q, const T *x, const T *w, const T *bias, T *y) {      \
    conv_job j;                                                                                     \
    dle_status st = check_blas("conv2d", &q, 1);                                                    \
    if (st == DLE_OK)                                                                               \
      st = conv_job_init(&j, "conv2d", q, sizeof(CT), 1, q.o * q.k, 0, 0, 0, false);                \
    else                                                                                            \
      memset(&j, 0, sizeof j);                                                                      \
    if (st == DLE_OK) {                                                                             \
      CT *wt = j.wbuf; /* {O, C/G, 1, kw} -> {kw, O, C/G} */                                        \
      for (int64_t e = 0; e < q.o * q.cg; e++)                                                      \
        for (int64_t tap = 0; tap < q.kw; tap++) wt[tap * q.o * q.cg + e] = w[e * q.kw + tap];      \
      j.src = x, j.dst = y, j.bias = bias, j.w = wt;                                                \
    }                                                                                               \
    return conv_job_run(&j, st, taps_chunk_##ID);                                                   \
  }                                                                                                 \
  static dle_status conv_fwd_##ID(dle_tensor *y, dle_tensor *const *ins, int nin,                   \
                                  const dle_attrs *a) {                                             \
    conv_job j;                                                                                     \
    conv_geom q = conv_make_geom(ins[0]->sizes, ins[1]->sizes, y->sizes, a);                        \
    if (SAME_TYPE(T, CT) && by_taps(&q))                                                            \
      return conv_taps_##ID(taps_geom(q), dle_tensor_data(ins[0]), dle_tensor_data(ins[1]),         \
                            nin > 2 ? dle_tensor_data(ins[2]) : NULL, dle_tensor_data(y));          \
    dle_status st =                                                                                 \
        job_init(&j, "conv2d", q, sizeof(CT), SAME_TYPE(T, CT) ? 0 : q.o * q.k, 0, false);          \
    if (st == DLE_OK) {                                                                             \
      j.src = dle_tensor_data(ins[0]), j.dst = dle_tensor_data(y);                                  \
      j.bias = nin > 2 ? dle_tensor_data(ins[2]) : NULL;                                            \
      j.w = weight_##ID(ins[1], &j);                                                                \
    }                                                                                               \
    return conv_job_run(&j, st, fwd_chunk_##ID);                                                    \
  }                                                                                                 \
  /* gx {N, C, H, W} from gy {N, O, Ho, Wo} and w {O, C/G, kh, kw} */                               \
  static dle_status conv_gin_##ID(dle_tensor *gx, dle_tensor *const *ins, const dle_attrs *a) {     \
    conv_job j;                                                                                     \
    conv_geom q = conv_make_geom(gx->sizes, ins[1]->sizes, ins[0]->sizes, a);                       \
    dle_status st =                                                                                 \
        job_init(&j, "conv2d_grad_input", q, sizeof(CT), SAME_TYPE(T, CT) ? 0 : q.o * q.k,          \
                 SAME_TYPE(T, CT) ? 0 : q.c * q.h * q.w, false);                                    \
    if (st == DLE_OK) {                                                                             \
      j.src = dle_tensor_data(ins[0]), j.dst = dle_tensor_data(gx);                                 \
      j.w = weight_##ID(ins[1], &j);                                                                \
    }                                                                                               \
    return conv_job_run(&j, st, gin_chunk_##ID);                                                    \
  }                                                                                                 \
  /* gw {O, C/G, kh, kw} from gy {N, O, Ho, Wo} and x {N, C, H, W}: the spans' accumulators       \
   * summed in span order */ \
  static dle_status conv_gw_##ID(dle_tensor *gw, dle_tensor *const *ins, const dle_attrs *a) {      \
    conv_job j;                                                                                     \
    conv_geom q = conv_make_geom(ins[1]->sizes, gw->sizes, ins[0]->sizes, a);                       \
    const int64_t nw = q.o * q.k;                                                                   \
    dle_status st = job_init(&j, "conv2d_grad_weight", q, sizeof(CT), 0, nw, true);                 \
    if (st == DLE_OK) {                                                                             \
      j.gy = dle_tensor_data(ins[0]), j.src = dle_tensor_data(ins[1]);                              \
      conv_for_chunks(&j, gw_chunk_##ID);                                                           \
      const CT *acc = j.acc;                                                                        \
      T *d = dle_tensor_data(gw);                                                                   \
      for (int64_t i = 0; i < nw; i++) {                                                            \
        CT s = acc[i];                                                                              \
        for (int64_t k = 1; k < j.spans; k++) s += acc[k * nw + i];                                 \
        d[i] = ST_##ID(s);                                                                          \
      }                                                                                             \
    }                                                                                               \
    conv_job_free(&j);                                                                              \
    return st;                                                                                      \
  }
CPU_FLOAT_TYPES(CONV_KERNELS)

/* ---- dispatch over dtypes ---- */
static DLE_KERNEL(cpu_conv) {
  dle_tensor *o = outs[0];
  const char *fn = dle_op_get_info(op)->name;
  for (int i = 0; i < nin; i++)
    if (ins[i]->dtype != o->dtype || !dle_tensor_is_contiguous(ins[i]))
      return dle_error("%s: the CPU kernel expects contiguous %s inputs", fn,
                       dle_dtype_name(o->dtype));
  if (!dle_tensor_is_contiguous(o))
    return dle_error("%s: the CPU kernel expects a contiguous output", fn);
  if (dle_tensor_numel(o) == 0) return DLE_OK;
  switch (op) {
    case DLE_OP_CONV2D:
    case DLE_OP_CONV2D_GRAD_INPUT:
    case DLE_OP_CONV2D_GRAD_WEIGHT: {
      bool empty = false;
      for (int i = 0; i < nin; i++) empty = empty || dle_tensor_numel(ins[i]) == 0;
      if (empty) { /* a sum over nothing: zeros, or the bias alone */
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
    default: return dle_error("%s: not a conv kernel", fn);
  }
  conv_geom q = conv_geom_of_call(op, o, ins, a);
  if (cpu_conv_winograd_applies(&q, o->dtype == DLE_F64 ? sizeof(double) : sizeof(float)))
    return cpu_conv_winograd(op, &q, o->dtype, o, ins, nin);
  if (op == DLE_OP_CONV2D && cpu_conv1d_direct_applies(&q, o->dtype))
    return cpu_conv1d_direct(&q, dle_tensor_data(ins[0]), dle_tensor_data(ins[1]),
                             nin > 2 ? dle_tensor_data(ins[2]) : NULL, dle_tensor_data(o));
#define CASE(ID, T, CT)                                               \
  case DLE_##ID:                                                      \
    switch (op) {                                                     \
      case DLE_OP_CONV2D: return conv_fwd_##ID(o, ins, nin, a);       \
      case DLE_OP_CONV2D_GRAD_INPUT: return conv_gin_##ID(o, ins, a); \
      case DLE_OP_CONV2D_GRAD_WEIGHT: return conv_gw_##ID(o, ins, a); \
      default: break;                                                 \
    }                                                                 \
    break;
  CPU_DTYPE_SWITCH(fn, o->dtype, CPU_FLOAT_TYPES, CASE);
#undef CASE
}

void cpu_register_conv(dle_backend *b) {
  CPU_REGISTER(b, cpu_conv, DLE_OP_CONV2D, DLE_OP_CONV2D_GRAD_INPUT, DLE_OP_CONV2D_GRAD_WEIGHT);
}
