/* pool.c — CPU kernels of 2-D max and average pooling over {N, C, H, W} (and the adjoint of
 * average pooling). ints: kernel h, w, stride h, w, padding h, w (avg: ints[6] count_include_pad).
 *
 * The front door (engine/ops/pool.c) hands over one contiguous input in one float dtype and
 * contiguous outputs. Every kernel runs over the N*C planes with OpenMP (no BLAS here), each body
 * written once and instantiated per float dtype with the X-macros of cpu_types.h.
 * max_pool has a fast path for the common 2x2 window with stride 2 and no padding, and for other
 * windows scans the taps over blocks of a row (see MAX_BLOCK): the general loop recomputes the
 * clipped window of every output, which made it many times slower than a ReLU over the same
 * input. */
#include "backend.h"
#include "cpu_exp.h" /* CPU_CLONES */
#include "cpu_loop.h"
#include "../../engine/kernel/conv_geom.h" /* pool_geom, pool_window */

static bool is_2x2_stride_2(const pool_geom *p) {
  return p->kh == 2 && p->kw == 2 && p->sh == 2 && p->sw == 2 && p->ph == 0 && p->pw == 0;
}

/* One step of the max scan, in window order: a larger value or any NaN takes over (so the first
 * maximum wins and NaN propagates, as in PyTorch). */
#define MAX_STEP(v, i) \
  if ((v) > best || isnan(v)) best = (v), bi = (i)

/* MAX_STEP as selects on the window position k, which the compiler turns into vector blends
 * (the branches mispredict half the time on real activations). */
#define MAX_SELECT(v, pos)                   \
  do {                                       \
    bool take = ((v) > best) | ((v) != (v)); \
    best = take ? (v) : best;                \
    k = take ? (pos) : k;                    \
  } while (0)

/* Runs the block after p for every output (pl, oh, ow) of every plane, threads splitting the
 * planes: with its window [h0, h1) x [w0, w1) and divisor div from pool_window, and o its index
 * in the output. (The block is variadic so that its commas pass through.) */
#define POOL_EACH_WINDOW(p, ...)                                                                \
  _Pragma("omp parallel for schedule(static) if (cpu_parallel((p)->planes * (p)->h * (p)->w))") \
  for (int64_t pl = 0; pl < (p)->planes; pl++)                                                  \
    for (int64_t oh = 0; oh < (p)->ho; oh++)                                                    \
      for (int64_t ow = 0; ow < (p)->wo; ow++) {                                                \
        int64_t h0, h1, w0, w1;                                                                 \
        int64_t div = pool_window(p, oh, ow, &h0, &h1, &w0, &w1);                               \
        int64_t o = (pl * (p)->ho + oh) * (p)->wo + ow;                                         \
        (void)div;                                                                              \
        __VA_ARGS__                                                                             \
      }

/* Max pooling other than 2x2, one output row of one plane at a time: the outputs whose window
 * lies inside the input horizontally (interior columns) in blocks of MAX_BLOCK, each tap of the
 * window in order scanned over the whole block (loops the compiler vectorizes: a running max and
 * the winner's offset per output, as selects); the few outputs whose window is clipped at the
 * left or right edge, window by window. */
#define MAX_BLOCK 256

/* The outputs ow whose window [ow*sw - pw, ow*sw - pw + kw) lies inside [0, w): [*lo, *hi). */
static void interior_columns(const pool_geom *p, int64_t *lo, int64_t *hi) {
  int64_t a = (p->pw + p->sw - 1) / p->sw, last = p->w + p->pw - p->kw; /* the last start */
  int64_t b = last < 0 ? 0 : last / p->sw + 1;
  if (b > p->wo) b = p->wo;
  if (a > b) a = b;
  *lo = a, *hi = b;
}

/* Outputs [0, n) of a row, all interior columns, with SW for the horizontal stride: each tap
 * (rows 0..nh-1 of the window, columns 0..kw-1, in window order) scanned over the block,
 * src[ow * SW] against the running max mx and the winner's offset kb from the window's first
 * cell. SW is a constant for the common strides, so that the compiler vectorizes the strided
 * loads. */
#define MAX_ROW(ID, T, CT, SW)                                                                     \
  do {                                                                                             \
    for (int64_t ow = 0; ow < n; ow++) mx[ow] = LD_##ID(x0[ow * (SW)]), kb[ow] = 0;                \
    for (int64_t t = 1; t < nh * kw; t++) {                                                        \
      const int32_t off = (int32_t)((t / kw) * w + t % kw);                                        \
      const T *restrict src = x0 + off;                                                            \
      for (int64_t ow = 0; ow < n; ow++) {                                                         \
        CT v = LD_##ID(src[ow * (SW)]), best = mx[ow];                                             \
        int32_t k = kb[ow];                                                                        \
        MAX_SELECT(v, off);                                                                        \
        mx[ow] = best, kb[ow] = k;                                                                 \
      }                                                                                            \
    }                                                                                              \
    for (int64_t ow = 0; ow < n; ow++) y[ow] = ST_##ID(mx[ow]), idx[ow] = i0 + ow * (SW) + kb[ow]; \
  } while (0)

/* GCC's unroll-and-jam fuses pairs of taps into one scalar loop over the block, which then
 * runs instead of the vectorized one. */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_JAM __attribute__((optimize("no-loop-unroll-and-jam")))
#else
#define NO_JAM
#endif

#define POOL_KERNELS(ID, T, CT)                                                                     \
  /* window (oh, ow) of plane xp, clipped: the max and its index h*W + w (+ base) */                \
  static void max_window_##ID(const T *xp, const pool_geom *p, int64_t oh, int64_t ow, T *y,        \
                              int64_t *idx, int64_t base) {                                         \
    int64_t h0, h1, w0, w1;                                                                         \
    pool_window(p, oh, ow, &h0, &h1, &w0, &w1);                                                     \
    CT best = (CT)-INFINITY;                                                                        \
    int64_t bi = h0 * p->w + w0;                                                                    \
    for (int64_t h = h0; h < h1; h++)                                                               \
      for (int64_t w = w0; w < w1; w++) {                                                           \
        CT v = LD_##ID(xp[h * p->w + w]);                                                           \
        MAX_STEP(v, h * p->w + w);                                                                  \
      }                                                                                             \
    *y = ST_##ID(best);                                                                             \
    *idx = bi + base;                                                                               \
  }                                                                                                 \
  /* outputs [o0, o0 + n) of a row, all interior columns (n <= MAX_BLOCK), whose windows cover    \
   * rows [h0, h1) of plane xp */ \
  NO_JAM CPU_CLONES static void max_block_##ID(                                                     \
      const T *restrict xp, const pool_geom *p, int64_t h0, int64_t h1, int64_t o0, int64_t n,      \
      T *restrict y, int64_t *restrict idx, int64_t base) {                                         \
    const int64_t sw = p->sw, kw = p->kw, w = p->w, nh = h1 - h0;                                   \
    const T *restrict x0 = xp + h0 * w + o0 * sw - p->pw;                                           \
    const int64_t i0 = base + h0 * w + o0 * sw - p->pw;                                             \
    CT mx[MAX_BLOCK];                                                                               \
    int32_t kb[MAX_BLOCK];                                                                          \
    if (sw == 1)                                                                                    \
      MAX_ROW(ID, T, CT, 1);                                                                        \
    else if (sw == 2)                                                                               \
      MAX_ROW(ID, T, CT, 2);                                                                        \
    else                                                                                            \
      MAX_ROW(ID, T, CT, sw);                                                                       \
  }                                                                                                 \
  /* 2x2 windows at stride 2 without padding (every window lies inside the input), a row of up  \
   * to 256 outputs at a time: values and the winners' positions 0..3 in a loop the compiler     \
   * vectorizes (int32 positions), then the int64 indices. */   \
  static void max_pool_2x2_##ID(T *restrict y, int64_t *restrict idx, const T *restrict x,          \
                                const pool_geom *p, int64_t base) {                                 \
    const int64_t planes = p->planes, h = p->h, w = p->w, ho = p->ho, wo = p->wo;                   \
    _Pragma("omp parallel for schedule(static) if (cpu_parallel(planes * h * w))")                  \
    for (int64_t pl = 0; pl < planes; pl++) {                                                       \
      int32_t kb[256];                                                                              \
      for (int64_t oh = 0; oh < ho; oh++)                                                           \
        for (int64_t o0 = 0; o0 < wo; o0 += 256) {                                                  \
          int64_t n = wo - o0 < 256 ? wo - o0 : 256, i0 = 2 * oh * w + 2 * o0;                      \
          const T *restrict r0 = x + pl * h * w + i0, *restrict r1 = r0 + w;                        \
          T *restrict yr = y + (pl * ho + oh) * wo + o0;                                            \
          for (int64_t ow = 0; ow < n; ow++) {                                                      \
            CT best = LD_##ID(r0[2 * ow]), v1 = LD_##ID(r0[2 * ow + 1]), v2 = LD_##ID(r1[2 * ow]),  \
               v3 = LD_##ID(r1[2 * ow + 1]);                                                        \
            int32_t k = 0;                                                                          \
            MAX_SELECT(v1, 1);                                                                      \
            MAX_SELECT(v2, 2);                                                                      \
            MAX_SELECT(v3, 3);                                                                      \
            yr[ow] = ST_##ID(best);                                                                 \
            kb[ow] = k;                                                                             \
          }                                                                                         \
          int64_t *restrict ir = idx + (pl * ho + oh) * wo + o0;                                    \
          for (int64_t ow = 0; ow < n; ow++)                                                        \
            ir[ow] = base + i0 + 2 * ow + (kb[ow] & 1) + (kb[ow] >> 1) * w;                         \
        }                                                                                           \
    }                                                                                               \
  }                                                                                                 \
  static void max_pool_##ID(dle_tensor *yt, dle_tensor *it, const dle_tensor *xt,                   \
                            const pool_geom *p, int64_t base) {                                     \
    const T *x = dle_tensor_data(xt);                                                               \
    T *y = dle_tensor_data(yt);                                                                     \
    int64_t *idx = dle_tensor_data(it), lo, hi;                                                     \
    if (is_2x2_stride_2(p)) {                                                                       \
      max_pool_2x2_##ID(y, idx, x, p, base);                                                        \
      return;                                                                                       \
    }                                                                                               \
    interior_columns(p, &lo, &hi);                                                                  \
    if (p->kh * p->w > INT32_MAX) lo = hi = p->wo; /* offsets past int32: window by window */       \
    _Pragma("omp parallel for schedule(static) if (cpu_parallel(p->planes * p->h * p->w))")         \
    for (int64_t pl = 0; pl < p->planes; pl++) {                                                    \
      const T *xp = x + pl * p->h * p->w;                                                           \
      for (int64_t oh = 0; oh < p->ho; oh++) {                                                      \
        const int64_t o = (pl * p->ho + oh) * p->wo;                                                \
        int64_t h0 = oh * p->sh - p->ph, h1 = h0 + p->kh;                                           \
        h0 = h0 > 0 ? h0 : 0, h1 = h1 < p->h ? h1 : p->h;                                           \
        for (int64_t ow = 0; ow < p->wo; ow++) {                                                    \
          if (ow == lo && h0 < h1) { /* the interior, then the right edge */                        \
            for (; ow < hi; ow += MAX_BLOCK) {                                                      \
              int64_t n = hi - ow < MAX_BLOCK ? hi - ow : MAX_BLOCK;                                \
              max_block_##ID(xp, p, h0, h1, ow, n, y + o + ow, idx + o + ow, base);                 \
            }                                                                                       \
            ow = hi;                                                                                \
            if (ow == p->wo) break;                                                                 \
          }                                                                                         \
          max_window_##ID(xp, p, oh, ow, y + o + ow, idx + o + ow, base);                           \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
  }                                                                                                 \
  static void avg_pool_##ID(dle_tensor *yt, const dle_tensor *xt, const pool_geom *p) {             \
    const T *x = dle_tensor_data(xt);                                                               \
    T *y = dle_tensor_data(yt);                                                                     \
    POOL_EACH_WINDOW(p, {                                                                           \
      const T *xp = x + pl * p->h * p->w;                                                           \
      CT s = 0;                                                                                     \
      for (int64_t h = h0; h < h1; h++)                                                             \
        for (int64_t w = w0; w < w1; w++) s += LD_##ID(xp[h * p->w + w]);                           \
      y[o] = ST_##ID(div > 0 ? s / (CT)div : (CT)0);                                                \
    })                                                                                              \
  }                                                                                                 \
  /* the adjoint of avg_pool, as a gather: input (h, w) sums gy/div over the windows holding it */  \
  static void avg_pool_grad_##ID(dle_tensor *gxt, const dle_tensor *gyt, const pool_geom *p) {      \
    const T *gy = dle_tensor_data(gyt);                                                             \
    T *gx = dle_tensor_data(gxt);                                                                   \
    _Pragma("omp parallel for schedule(static) if (cpu_parallel(p->planes * p->h * p->w))")         \
    for (int64_t pl = 0; pl < p->planes; pl++) {                                                    \
      const T *gp = gy + pl * p->ho * p->wo;                                                        \
      for (int64_t h = 0; h < p->h; h++)                                                            \
        for (int64_t w = 0; w < p->w; w++) {                                                        \
          /* outputs oh with oh*sh - ph <= h < oh*sh - ph + kh */                                   \
          int64_t lo_h = h + p->ph - p->kh + 1, lo_w = w + p->pw - p->kw + 1;                       \
          int64_t oh0 = lo_h <= 0 ? 0 : (lo_h + p->sh - 1) / p->sh;                                 \
          int64_t ow0 = lo_w <= 0 ? 0 : (lo_w + p->sw - 1) / p->sw;                                 \
          int64_t oh1 = (h + p->ph) / p->sh, ow1 = (w + p->pw) / p->sw;                             \
          if (oh1 >= p->ho) oh1 = p->ho - 1;                                                        \
          if (ow1 >= p->wo) ow1 = p->wo - 1;                                                        \
          CT s = 0;                                                                                 \
          for (int64_t oh = oh0; oh <= oh1; oh++)                                                   \
            for (int64_t ow = ow0; ow <= ow1; ow++) {                                               \
              int64_t h0, h1, w0, w1;                                                               \
              int64_t div = pool_window(p, oh, ow, &h0, &h1, &w0, &w1);                             \
              if (div > 0) s += LD_##ID(gp[oh * p->wo + ow]) / (CT)div;                             \
            }                                                                                       \
          gx[(pl * p->h + h) * p->w + w] = ST_##ID(s);                                              \
        }                                                                                           \
    }                                                                                               \
  }
CPU_FLOAT_TYPES(POOL_KERNELS)

static DLE_KERNEL(cpu_pool) {
  dle_tensor *o = outs[0];
  const char *fn = dle_op_get_info(op)->name;
  if (nin != 1 || ins[0]->dtype != o->dtype || !dle_tensor_is_contiguous(ins[0]))
    return dle_error("%s: the CPU kernel expects one contiguous %s input", fn,
                     dle_dtype_name(o->dtype));
  if (!dle_tensor_is_contiguous(o))
    return dle_error("%s: the CPU kernel expects a contiguous output", fn);
  if (dle_tensor_numel(o) == 0) return DLE_OK;
  pool_geom p = op == DLE_OP_AVG_POOL2D_GRAD ? pool_make_geom(o->sizes, ins[0]->sizes, a)
                                             : pool_make_geom(ins[0]->sizes, o->sizes, a);
#define CASE(ID, T, CT)                                                                            \
  case DLE_##ID:                                                                                   \
    switch (op) {                                                                                  \
      case DLE_OP_MAX_POOL2D: max_pool_##ID(o, outs[1], ins[0], &p, a->index_base); return DLE_OK; \
      case DLE_OP_AVG_POOL2D: avg_pool_##ID(o, ins[0], &p); return DLE_OK;                         \
      case DLE_OP_AVG_POOL2D_GRAD: avg_pool_grad_##ID(o, ins[0], &p); return DLE_OK;               \
      default: return dle_error("%s: not a pool kernel", fn);                                      \
    }
  CPU_DTYPE_SWITCH(fn, o->dtype, CPU_FLOAT_TYPES, CASE);
#undef CASE
}

void cpu_register_pool(dle_backend *b) {
  CPU_REGISTER(b, cpu_pool, DLE_OP_MAX_POOL2D, DLE_OP_AVG_POOL2D, DLE_OP_AVG_POOL2D_GRAD);
}
