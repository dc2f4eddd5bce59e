/* norm.c — CPU kernels of layer_norm, batch_norm, group_norm and their backward ops (kind NORM).
 *
 * The front door (engine/ops/norm.c) hands over contiguous inputs (x, gy, weight, bias in one
 * float dtype T; statistics in the compute type CT) and contiguous outputs. x is seen as a block
 * {P, Q, S} (engine/kernel/norm_geom.h): one statistic per q over its P runs of S contiguous
 * elements, so one loop nest serves layer_norm (P = 1, a run is a row) and batch_norm (a
 * channel's runs are its {H, W} planes across the batch). Work is split over q with OpenMP.
 *
 * group_norm   is layer_norm-like rows (one per sample and group) with a weight per channel run.
 * forward      per q: mean (pass 1), then the centred sum of squares (pass 2: exact two-pass
 *              variance, not E[x^2] - E[x]^2), then y (pass 3). A layer_norm row is read from
 *              memory once: passes 2 and 3 find it in the cache. Rows go to threads 16 at a time
 *              (dynamic): on a shared machine a thread that loses its core leaves its rows to the
 *              others instead of holding up the whole op.
 * grad_input   per q: sums of g = gy * w and of g * xhat (pass 1), then
 *              gx = rstd * (g - mean(g) - xhat * mean(g * xhat)) (pass 2).
 * grad_affine  gw = sum gy * xhat, gb = sum gy over everything but the weight's index: per q for
 *              batch_norm; for layer_norm per column, in a fixed number of row chunks with double
 *              partial sums joined in a fixed order (results do not depend on the thread count).
 * Sums run in blocks of NORM_BLOCK elements in CT (vector accumulators), blocks joined in double.
 * The layer_norm row loops prefetch the next row while writing the current one (a row is one
 * 4 KiB page at D = 1024, where the hardware prefetcher stops), and large float32 outputs are
 * written with streaming stores. On 4096 x 1024 float32 at 1 thread, vector accumulators and
 * prefetching made the forward about twice as fast, and 32-byte vectors in an x86-64-v3 clone
 * (CPU_CLONES) faster again (scripts/bench --filter layer_norm; figures in bench/RESULTS.md). */
#include <stdlib.h>

#include "../../engine/kernel/norm_geom.h"
#include "backend.h"
#include "cpu_exp.h"
#include "cpu_loop.h"
#include "cpu_stream.h"

#define NORM_BLOCK 512
/* Row chunks of layer_norm's grad_affine: each has its own partial sums {2, S}. */
#define NORM_CHUNKS 16
/* Rows a layer_norm grad_affine chunk sums in the compute type before adding them in double. */
#define NORM_GROUP 32

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
/* Elements of T per 64-byte cache line. */
#define NORM_LINE(T) ((int64_t)(64 / sizeof(T)))
/* A row's S elements by cache lines: the statements after pa and pb run (vectorised) for each s of
 * a line, after the same line of the next rows (pa, pb: those rows' starts) is prefetched. */
#define NORM_LINES(T, S, pa, pb, ...)                  \
  for (int64_t s0 = 0; s0 < (S); s0 += NORM_LINE(T)) { \
    int64_t e = min64((S), s0 + NORM_LINE(T));         \
    __builtin_prefetch((pa) + s0);                     \
    __builtin_prefetch((pb) + s0);                     \
    _Pragma("omp simd")                                \
    for (int64_t s = s0; s < e; s++) { __VA_ARGS__ }   \
  }

/* Block sums in the compute type, written with vector extensions: four independent vector
 * accumulators per sum, so that the adds do not wait on each other (one accumulator made the
 * statistics pass compute-bound at 1 float per cycle). VSUMS(CT, NAME) defines
 *   NAME_sums(x, n, m, s1, s2):           s1 += sum (x - m),  s2 += sum (x - m)^2 (s2 NULL: skipped)
 *   NAME_gsums(gy, x, w, n, m, A, B):     A += sum g,  B += sum g (x - m),  g = gy w (w NULL: 1)
 * over n <= NORM_BLOCK contiguous values of CT. */
/* Vectors of the vector extension are loaded and summed by macros, not functions: a 32-byte vector
 * passed to or returned from a function of the baseline (SSE2) build would change the ABI. */
#define VLOAD(VT, p)             \
  __extension__({                \
    VT v_;                       \
    memcpy(&v_, (p), sizeof v_); \
    v_;                          \
  })
#define VHSUM(CT, W, v)                            \
  __extension__({                                  \
    __typeof__(v) h_ = (v);                        \
    CT t_ = 0;                                     \
    for (int k_ = 0; k_ < (W); k_++) t_ += h_[k_]; \
    t_;                                            \
  })
#define VSUMS(CT, NAME)                                                                        \
  typedef CT NAME##_vec __attribute__((vector_size(32)));                                      \
  enum { NAME##_W = (int)(32 / sizeof(CT)) };                                                  \
  static CPU_CLONES void NAME##_sums(const CT *x, int64_t n, CT m, double *s1, double *s2) {   \
    NAME##_vec a[4] = {{0}}, b[4] = {{0}}, mv = (NAME##_vec){0} + m;                           \
    int64_t i = 0;                                                                             \
    if (!s2) { /* the plain sum (the mean's pass) */                                           \
      for (; i + 4 * NAME##_W <= n; i += 4 * NAME##_W)                                         \
        for (int k = 0; k < 4; k++) a[k] += VLOAD(NAME##_vec, x + i + k * NAME##_W) - mv;      \
    } else {                                                                                   \
      for (; i + 4 * NAME##_W <= n; i += 4 * NAME##_W)                                         \
        for (int k = 0; k < 4; k++) {                                                          \
          NAME##_vec d = VLOAD(NAME##_vec, x + i + k * NAME##_W) - mv;                         \
          a[k] += d, b[k] += d * d;                                                            \
        }                                                                                      \
    }                                                                                          \
    CT t1 = VHSUM(CT, NAME##_W, a[0] + a[1] + a[2] + a[3]),                                    \
       t2 = VHSUM(CT, NAME##_W, b[0] + b[1] + b[2] + b[3]);                                    \
    for (; i < n; i++) t1 += x[i] - m, t2 += (x[i] - m) * (x[i] - m);                          \
    *s1 += t1;                                                                                 \
    if (s2) *s2 += t2;                                                                         \
  }                                                                                            \
  static CPU_CLONES void NAME##_gsums(const CT *gy, const CT *x, const CT *w, int64_t n, CT m, \
                                      double *A, double *B) {                                  \
    NAME##_vec a[4] = {{0}}, b[4] = {{0}}, mv = (NAME##_vec){0} + m;                           \
    int64_t i = 0;                                                                             \
    for (; i + 4 * NAME##_W <= n; i += 4 * NAME##_W)                                           \
      for (int k = 0; k < 4; k++) {                                                            \
        int64_t o = i + k * NAME##_W;                                                          \
        NAME##_vec g = VLOAD(NAME##_vec, gy + o);                                              \
        if (w) g *= VLOAD(NAME##_vec, w + o);                                                  \
        a[k] += g, b[k] += g * (VLOAD(NAME##_vec, x + o) - mv);                                \
      }                                                                                        \
    CT ta = VHSUM(CT, NAME##_W, a[0] + a[1] + a[2] + a[3]),                                    \
       tb = VHSUM(CT, NAME##_W, b[0] + b[1] + b[2] + b[3]);                                    \
    for (; i < n; i++) {                                                                       \
      CT g = gy[i] * (w ? w[i] : 1);                                                           \
      ta += g, tb += g * (x[i] - m);                                                           \
    }                                                                                          \
    *A += ta, *B += tb;                                                                        \
  }
VSUMS(float, vf)
VSUMS(double, vd)
#undef VSUMS
#define VSUM_OF(CT, f) _Generic((CT)0, float : vf_##f, double : vd_##f)

/* Large float32 layer_norm outputs are written with streaming stores (cpu_stream.h), which do
 * not first read the destination's cache lines: a third less memory traffic for an output far
 * larger than the caches. */
#ifdef __SSE2__
#define NORM_CAN_STREAM(T) _Generic((T *)0, float * : true, default : false)
/* y = (x - m) r w + b over a row of n floats, y 16-byte aligned; prefetches the next row nx.
 * 8-wide vectors (one AVX register in the x86-64-v3 clone), stored as two streamed halves. No FMA
 * contraction: the rows written with cached stores (the baseline build) round the same way. */
typedef float norm_v8 __attribute__((vector_size(32)));
static CPU_CLONES __attribute__((optimize("fp-contract=off"))) void norm_row_stream(
    float *y, const float *x, const float *nx, int64_t n, float m, float r, const float *w,
    const float *b) {
  int64_t s = 0;
  for (; s + 8 <= n; s += 8) {
    if (s % 16 == 0) __builtin_prefetch(nx + s);
    norm_v8 v = (VLOAD(norm_v8, x + s) - m) * r * VLOAD(norm_v8, w + s) + VLOAD(norm_v8, b + s);
    __m128 lo, hi;
    memcpy(&lo, &v, sizeof lo), memcpy(&hi, (char *)&v + 16, sizeof hi);
    _mm_stream_ps(y + s, lo);
    _mm_stream_ps(y + s + 4, hi);
  }
  for (; s < n; s++) y[s] = (x[s] - m) * r * w[s] + b[s];
  cpu_stream_fence(); /* visible before the row is reported done */
}
#else
#define NORM_CAN_STREAM(T) false
static void norm_row_stream(float *y, const float *x, const float *nx, int64_t n, float m, float r,
                            const float *w, const float *b) {
  (void)nx;
  for (int64_t s = 0; s < n; s++) y[s] = (x[s] - m) * r * w[s] + b[s];
}
#endif

/* batch_norm and group_norm scale each channel's run of a row by the channel's own weight. */
#define PER_CHANNEL(g) ((g)->weight_on_q || (g)->groups)
/* The runs of statistic q's row that share a weight, for PER_CHANNEL geometries: their count,
 * *run elements each, weights c0, c0 + 1, ... (batch_norm: one run of S with weight q). */
static int64_t channel_runs(const dle_norm_geom *g, int64_t q, int64_t *run, int64_t *c0) {
  if (!g->groups) {
    *run = g->s, *c0 = q;
    return 1;
  }
  *run = g->hw;
  int64_t n = g->hw ? g->s / g->hw : 0;
  *c0 = (q % g->groups) * n;
  return n;
}

#define NORM_KERNELS(ID, T, CT)                                                                        \
  /* n <= NORM_BLOCK values of T as CT: the values themselves when T is CT, else converted into buf */ \
  static const CT *block_##ID(const T *x, int64_t n, CT *buf) {                                        \
    if (sizeof(T) == sizeof(CT)) return (const CT *)(const void *)x;                                   \
    for (int64_t i = 0; i < n; i++) buf[i] = (CT)LD_##ID(x[i]);                                        \
    return buf;                                                                                        \
  }                                                                                                    \
  static void sums_##ID(const T *x, int64_t n, CT m, double *s1, double *s2) {                         \
    CT buf[NORM_BLOCK];                                                                                \
    for (int64_t i0 = 0; i0 < n; i0 += NORM_BLOCK) {                                                   \
      int64_t len = min64(NORM_BLOCK, n - i0);                                                         \
      VSUM_OF(CT, sums)(block_##ID(x + i0, len, buf), len, m, s1, s2);                                 \
    }                                                                                                  \
  }                                                                                                    \
  /* w: the weight of each element (NULL: 1) */                                                        \
  static void gsums_##ID(const T *gy, const T *x, const CT *w, int64_t n, CT m, double *A,             \
                         double *B) {                                                                  \
    CT gbuf[NORM_BLOCK], xbuf[NORM_BLOCK];                                                             \
    for (int64_t i0 = 0; i0 < n; i0 += NORM_BLOCK) {                                                   \
      int64_t len = min64(NORM_BLOCK, n - i0);                                                         \
      VSUM_OF(CT, gsums)                                                                               \
      (block_##ID(gy + i0, len, gbuf), block_##ID(x + i0, len, xbuf), w ? w + i0 : NULL, len, m,       \
       A, B);                                                                                          \
    }                                                                                                  \
  }                                                                                                    \
  static void forward_##ID(const dle_norm_geom *g, T *y, CT *stats, const T *x, const CT *w,           \
                           const CT *b, const CT *rmean, const CT *rvar, double eps) {                 \
    int64_t P = g->p, Q = g->q, S = g->s, n = P * S;                                                   \
    bool stream = NORM_CAN_STREAM(T) && cpu_stream_output(P * Q * S * (int64_t)sizeof(T));             \
    _Pragma("omp parallel for schedule(dynamic, 16) if (Q > 1 && cpu_parallel(P * Q * S))")            \
    for (int64_t q = 0; q < Q; q++) {                                                                  \
      double mean, var;                                                                                \
      if (rmean) {                                                                                     \
        mean = rmean[q], var = rvar[q];                                                                \
      } else {                                                                                         \
        double s1 = 0, c1 = 0, c2 = 0;                                                                 \
        for (int64_t p = 0; p < P; p++) sums_##ID(x + (p * Q + q) * S, S, 0, &s1, NULL);               \
        mean = s1 / (double)n;                                                                         \
        for (int64_t p = 0; p < P; p++) sums_##ID(x + (p * Q + q) * S, S, (CT)mean, &c1, &c2);         \
        /* c1 corrects for mean having been rounded to CT */                                           \
        var = (c2 - c1 * c1 / (double)n) / (double)n;                                                  \
        mean += c1 / (double)n;                                                                        \
        if (n == 0) mean = var = NAN;                                                                  \
      }                                                                                                \
      stats[2 * q] = (CT)mean, stats[2 * q + 1] = (CT)var;                                             \
      CT m = (CT)mean, r = (CT)(1.0 / sqrt(var + eps));                                                \
      for (int64_t p = 0; p < P; p++) {                                                                \
        const T *xr = x + (p * Q + q) * S;                                                             \
        T *yr = y + (p * Q + q) * S;                                                                   \
        if (PER_CHANNEL(g)) {                                                                          \
          int64_t run, c0, nrun = channel_runs(g, q, &run, &c0);                                       \
          for (int64_t j = 0; j < nrun; j++) {                                                         \
            CT sc = r * w[c0 + j], sh = b[c0 + j] - m * sc;                                            \
            const T *xj = xr + j * run;                                                                \
            T *yj = yr + j * run;                                                                      \
            _Pragma("omp simd")                                                                        \
            for (int64_t s = 0; s < run; s++) yj[s] = ST_##ID((CT)LD_##ID(xj[s]) * sc + sh);           \
          }                                                                                            \
        } else if (stream && (uintptr_t)yr % 16 == 0) { /* large float32 layer_norm */                 \
          norm_row_stream((float *)(void *)yr, (const float *)(const void *)xr,                        \
                          (const float *)(const void *)(q + 1 < Q ? xr + S : xr), S, (float)m,         \
                          (float)r, (const float *)(const void *)w,                                    \
                          (const float *)(const void *)b);                                             \
        } else { /* layer_norm: also fetches the next row while this one is written */                 \
          const T *nx = q + 1 < Q ? xr + S : xr;                                                       \
          NORM_LINES(T, S, nx, nx, yr[s] = ST_##ID(((CT)LD_##ID(xr[s]) - m) * r * w[s] + b[s]);)       \
        }                                                                                              \
      }                                                                                                \
    }                                                                                                  \
  }                                                                                                    \
  static void grad_input_##ID(const dle_norm_geom *g, T *gx, const T *gy, const T *x,                  \
                              const CT *stats, const CT *w, double eps) {                              \
    int64_t P = g->p, Q = g->q, S = g->s, n = P * S;                                                   \
    _Pragma("omp parallel for schedule(static) if (Q > 1 && cpu_parallel(P * Q * S))")                 \
    for (int64_t q = 0; q < Q; q++) {                                                                  \
      CT m = stats[2 * q], r = (CT)(1.0 / sqrt((double)stats[2 * q + 1] + eps));                       \
      int64_t run = S, c0 = 0, nrun = PER_CHANNEL(g) ? channel_runs(g, q, &run, &c0) : 0;              \
      double A = 0, B = 0;                                                                             \
      for (int64_t p = 0; p < P; p++) {                                                                \
        int64_t o = (p * Q + q) * S;                                                                   \
        if (!PER_CHANNEL(g)) gsums_##ID(gy + o, x + o, w, S, m, &A, &B);                               \
        for (int64_t j = 0; j < nrun; j++) { /* sums of g = gy w(channel) run by run */                \
          double a1 = 0, b1 = 0;                                                                       \
          gsums_##ID(gy + o + j * run, x + o + j * run, NULL, run, m, &a1, &b1);                       \
          A += w[c0 + j] * a1, B += w[c0 + j] * b1;                                                    \
        }                                                                                              \
      }                                                                                                \
      /* mean(g) and r * mean(g * xhat) / ... folded: gx = r g - r a - (x - m) r^3 mean(g (x - m)) */  \
      CT ra = (CT)(r * A / (double)n), k3 = (CT)((double)r * r * r * B / (double)n);                   \
      for (int64_t p = 0; p < P; p++) {                                                                \
        int64_t o = (p * Q + q) * S;                                                                   \
        const T *gr = gy + o, *xr = x + o;                                                             \
        T *dr = gx + o;                                                                                \
        if (PER_CHANNEL(g)) {                                                                          \
          for (int64_t j = 0; j < nrun; j++) {                                                         \
            CT rw = r * w[c0 + j];                                                                     \
            const T *gj = gr + j * run, *xj = xr + j * run;                                            \
            T *dj = dr + j * run;                                                                      \
            _Pragma("omp simd")                                                                        \
            for (int64_t s = 0; s < run; s++)                                                          \
              dj[s] = ST_##ID(rw * (CT)LD_##ID(gj[s]) - ra - ((CT)LD_##ID(xj[s]) - m) * k3);           \
          }                                                                                            \
        } else { /* layer_norm: fetches the next rows of gy and x meanwhile */                         \
          int64_t nxt = q + 1 < Q ? S : 0;                                                             \
          NORM_LINES(T, S, gr + nxt, xr + nxt,                                                         \
                     dr[s] = ST_##ID(r * (CT)LD_##ID(gr[s]) * w[s] - ra -                              \
                                     ((CT)LD_##ID(xr[s]) - m) * k3);)                                  \
        }                                                                                              \
      }                                                                                                \
    }                                                                                                  \
  }                                                                                                    \
  static dle_status grad_affine_##ID(const dle_norm_geom *g, T *gw, T *gb, const T *gy,                \
                                     const T *x, const CT *stats, double eps) {                        \
    int64_t P = g->p, Q = g->q, S = g->s;                                                              \
    if (g->weight_on_q) {                                                                              \
      _Pragma("omp parallel for schedule(static) if (Q > 1 && cpu_parallel(P * Q * S))")               \
      for (int64_t q = 0; q < Q; q++) {                                                                \
        CT m = stats[2 * q];                                                                           \
        double r = 1.0 / sqrt((double)stats[2 * q + 1] + eps), A = 0, B = 0;                           \
        for (int64_t p = 0; p < P; p++) {                                                              \
          int64_t o = (p * Q + q) * S;                                                                 \
          gsums_##ID(gy + o, x + o, NULL, S, m, &A, &B);                                               \
        }                                                                                              \
        gw[q] = ST_##ID(r * B), gb[q] = ST_##ID(A);                                                    \
      }                                                                                                \
      return DLE_OK;                                                                                   \
    }                                                                                                  \
    if (g->groups) { /* group_norm: channel c's runs, one per sample, each with its own r */           \
      int64_t G = g->groups, hw = g->hw, cg = hw ? S / hw : 0, N = Q / G;                              \
      _Pragma("omp parallel for schedule(static) if (cpu_parallel(Q * S))")                            \
      for (int64_t c = 0; c < G * cg; c++) {                                                           \
        double A = 0, B = 0;                                                                           \
        for (int64_t i = 0; i < N; i++) {                                                              \
          int64_t q = i * G + c / cg, o = q * S + (c % cg) * hw;                                       \
          double b1 = 0;                                                                               \
          gsums_##ID(gy + o, x + o, NULL, hw, stats[2 * q], &A, &b1);                                  \
          B += b1 / sqrt((double)stats[2 * q + 1] + eps);                                              \
        }                                                                                              \
        gw[c] = ST_##ID(B), gb[c] = ST_##ID(A);                                                        \
      }                                                                                                \
      return DLE_OK;                                                                                   \
    }                                                                                                  \
    /* layer_norm: P == 1; column sums over the Q rows in chunks, each summing groups of \
     * NORM_GROUP rows in CT (vectorised along the row) and the groups in double */             \
    int64_t nc = cpu_parallel(Q * S) ? min64(Q, NORM_CHUNKS) : 1,                                      \
            per = nc ? (Q + nc - 1) / nc : 0;                                                          \
    size_t ns = (size_t)(nc > 0 ? nc : 1) * 2 * (size_t)(S > 0 ? S : 1);                               \
    double *part = calloc(ns, sizeof(double));                                                         \
    CT *grp = malloc(ns * sizeof(CT));                                                                 \
    if (!part || !grp) {                                                                               \
      free(part), free(grp);                                                                           \
      return dle_error("layer_norm_grad_affine: out of memory");                                       \
    }                                                                                                  \
    _Pragma("omp parallel for schedule(static) if (nc > 1)")                                           \
    for (int64_t c = 0; c < nc; c++) {                                                                 \
      double *pw = part + 2 * c * S, *pb = pw + S;                                                     \
      CT *aw = grp + 2 * c * S, *ab = aw + S;                                                          \
      int64_t q1 = min64(Q, (c + 1) * per);                                                            \
      for (int64_t g0 = c * per; g0 < q1; g0 += NORM_GROUP) {                                          \
        for (int64_t s = 0; s < S; s++) aw[s] = ab[s] = 0;                                             \
        for (int64_t q = g0; q < min64(q1, g0 + NORM_GROUP); q++) {                                    \
          CT m = stats[2 * q], r = (CT)(1.0 / sqrt((double)stats[2 * q + 1] + eps));                   \
          const T *gr = gy + q * S, *xr = x + q * S;                                                   \
          int64_t nxt = q + 1 < q1 ? S : 0;                                                            \
          NORM_LINES(T, S, gr + nxt, xr + nxt, CT gv = (CT)LD_##ID(gr[s]);                             \
                     aw[s] += gv * (((CT)LD_##ID(xr[s]) - m) * r); ab[s] += gv;)                       \
        }                                                                                              \
        for (int64_t s = 0; s < S; s++) pw[s] += aw[s], pb[s] += ab[s];                                \
      }                                                                                                \
    }                                                                                                  \
    for (int64_t s = 0; s < S; s++) {                                                                  \
      double sw = 0, sb = 0;                                                                           \
      for (int64_t c = 0; c < nc; c++) sw += part[2 * c * S + s], sb += part[(2 * c + 1) * S + s];     \
      gw[s] = ST_##ID(sw), gb[s] = ST_##ID(sb);                                                        \
    }                                                                                                  \
    free(part), free(grp);                                                                             \
    return DLE_OK;                                                                                     \
  }                                                                                                    \
  /* the weight (ones when absent) or bias (zeros) as n values of CT */                                \
  static void load_param_##ID(CT *dst, const dle_tensor *t, int64_t n, CT def) {                       \
    const T *src = t ? dle_tensor_data(t) : NULL;                                                      \
    for (int64_t i = 0; i < n; i++) dst[i] = src ? (CT)LD_##ID(src[i]) : def;                          \
  }

CPU_FLOAT_TYPES(NORM_KERNELS)
#undef NORM_KERNELS

static DLE_KERNEL(cpu_norm) {
  const char *fn = dle_op_get_info(op)->name;
  bool fwd = op == DLE_OP_LAYER_NORM || op == DLE_OP_BATCH_NORM || op == DLE_OP_GROUP_NORM;
  int nout = dle_op_get_info(op)->nout;
  for (int i = 0; i < nin; i++)
    if (!dle_tensor_is_contiguous(ins[i]))
      return dle_error("%s: the CPU kernel expects contiguous inputs", fn);
  for (int k = 0; k < nout; k++)
    if (!dle_tensor_is_contiguous(outs[k]))
      return dle_error("%s: the CPU kernel expects contiguous outputs", fn);
  const dle_tensor *x = fwd ? ins[0] : ins[1];
  dle_norm_geom g = dle_norm_geom_of(op, x, a);
  dle_tensor *w, *b, *rmean, *rvar;
  dle_norm_param_inputs(op, ins, nin, a, &w, &b, &rmean, &rvar);
  int64_t np = g.weight_on_q ? g.q : g.groups ? g.groups * (g.hw ? g.s / g.hw : 0) : g.s;
  double eps = a->f[0];
  dle_status st = DLE_OK;
#define CASE(ID, T, CT)                                                                        \
  case DLE_##ID: {                                                                             \
    size_t nb = sizeof(CT) * (size_t)(np > 0 ? np : 1);                                        \
    CT *wc = dle_cpu_alloc(nb), *bc = dle_cpu_alloc(nb);                                       \
    if (!wc || !bc) {                                                                          \
      st = dle_error("%s: out of memory", fn);                                                 \
    } else {                                                                                   \
      load_param_##ID(wc, w, np, 1);                                                           \
      load_param_##ID(bc, b, np, 0);                                                           \
      switch (op) {                                                                            \
        case DLE_OP_LAYER_NORM:                                                                \
        case DLE_OP_BATCH_NORM:                                                                \
        case DLE_OP_GROUP_NORM:                                                                \
          forward_##ID(&g, dle_tensor_data(outs[0]), dle_tensor_data(outs[1]),                 \
                       dle_tensor_data(ins[0]), wc, bc, rmean ? dle_tensor_data(rmean) : NULL, \
                       rvar ? dle_tensor_data(rvar) : NULL, eps);                              \
          break;                                                                               \
        case DLE_OP_LAYER_NORM_GRAD_INPUT:                                                     \
        case DLE_OP_BATCH_NORM_GRAD_INPUT:                                                     \
        case DLE_OP_GROUP_NORM_GRAD_INPUT:                                                     \
          grad_input_##ID(&g, dle_tensor_data(outs[0]), dle_tensor_data(ins[0]),               \
                          dle_tensor_data(ins[1]), dle_tensor_data(ins[2]), wc, eps);          \
          break;                                                                               \
        default:                                                                               \
          st = grad_affine_##ID(&g, dle_tensor_data(outs[0]), dle_tensor_data(outs[1]),        \
                                dle_tensor_data(ins[0]), dle_tensor_data(ins[1]),              \
                                dle_tensor_data(ins[2]), eps);                                 \
      }                                                                                        \
    }                                                                                          \
    dle_cpu_free(wc, nb);                                                                      \
    dle_cpu_free(bc, nb);                                                                      \
    return st;                                                                                 \
  }
  CPU_DTYPE_SWITCH(fn, outs[0]->dtype, CPU_FLOAT_TYPES, CASE);
#undef CASE
}

void cpu_register_norm(dle_backend *b) {
  CPU_REGISTER(b, cpu_norm, DLE_OP_LAYER_NORM, DLE_OP_LAYER_NORM_GRAD_INPUT,
               DLE_OP_LAYER_NORM_GRAD_AFFINE, DLE_OP_BATCH_NORM, DLE_OP_BATCH_NORM_GRAD_INPUT,
               DLE_OP_BATCH_NORM_GRAD_AFFINE, DLE_OP_GROUP_NORM, DLE_OP_GROUP_NORM_GRAD_INPUT,
               DLE_OP_GROUP_NORM_GRAD_AFFINE);
}
