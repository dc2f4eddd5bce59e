/* cpu_conv1d_direct.c — conv1d's forward in float32 computed directly with AVX-512 (see
 * cpu_conv1d_direct.h), as oneDNN does for PyTorch, instead of gemms on the input rows:
 *
 *   y[n, o, l] = bias[o] + sum_t sum_c w[o, c, t] * x[n, c, l + t*d - p]   (c, o within a group)
 *
 * The work is split into tiles of lt output columns of one (sample, group); a tile's input rows,
 * with the padding as zeros and its halo of (kw-1)*d columns, are first copied into a per-thread
 * staging buffer (a few hundred KB, so it stays in the L2 cache), which leaves the inner loop with
 * no bounds to check and rows whose stride is not a multiple of 4 KB (input rows of 1024 floats
 * all fall into the same L1 sets). Then each block of MR output channels x NR columns is summed in
 * MR*NV 16-lane registers over the whole K = C/G * kw: per step NV loads of staged input, MR
 * broadcasts of the weight (packed per block as {kw, C/G, MR}), MR*NV FMAs, and the block is
 * stored once, the bias being its starting value. Through OpenBLAS the same conv was kw gemms of
 * K = C/G (OpenBLAS repacking the shifted input for each) adding onto y after a bias pass, which
 * reads and writes y kw + 1 times (the figures are in bench/RESULTS.md).
 * Threads take whole tiles (samples, or parts of the row when the batch is smaller than the
 * threads' share), each on its own staging buffer; the sums are the same at any thread count. */
#include "cpu_conv1d_direct.h"

#include <string.h>

#include "../../engine/internal.h"
#include "cpu_vecmath.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* register block: MR output channels x NV vectors of 16 columns (24 accumulators of 32 zmm) */
#define MR 6
#define NV 4
#define NR (16 * NV)
/* the staging buffer of one thread: up to STAGE_BYTES per tile (the tile narrowed to fit), and a
 * geometry whose narrowest tile (NR columns plus the halo) needs more than STAGE_MAX_BYTES stays
 * on the gemm path */
#define STAGE_BYTES     ((int64_t)512 << 10)
#define STAGE_MAX_BYTES ((int64_t)8 << 20)
/* A tile's blocks go over the output channels in chunks whose weights take at most this much (a
 * chunk does all its column blocks before the next chunk starts), so the weights a block
 * broadcasts stay in the L1 cache when there are many output channels: {2,80,3000} -> 384 went
 * faster with chunks of 48 KB than with all 368 KB of its weights per block, and the 48 KB of
 * {32,64,1024} -> 64 stay one chunk. */
#define WEIGHT_CHUNK_BYTES ((int64_t)48 << 10)

static int64_t round_up(int64_t a, int64_t m) { return (a + m - 1) / m * m; }

/* The staging row length: the tile's columns rounded up to whole blocks, plus the halo, in whole
 * 64-byte lines, and not a multiple of 256 floats (which would map every row's element j to the
 * same few L1 sets). */
static int64_t stage_ld(int64_t lt, int64_t halo) {
  int64_t ld = round_up(round_up(lt, NR) + halo, 16);
  return ld % 256 == 0 ? ld + 16 : ld;
}

#ifdef CPU_VEC_X86
#include <immintrin.h>

#define AVX512_INLINE static inline __attribute__((always_inline, target("avx512f")))

static bool has_avx512;
__attribute__((constructor)) static void conv1d_direct_init(void) {
  __builtin_cpu_init();
  has_avx512 = __builtin_cpu_supports("avx512f");
}

/* y[i, 0..n) for i < mr (ldy apart) = bias[i] (0 without) + sum_t sum_c wp[(t*cg + c)*mr + i] *
 * xs[c*ldx + t*d + j]; nv = ceil(n / 16) vectors, the last stored masked. Inlined with constant
 * mr and nv so the accumulators stay in registers. */
AVX512_INLINE void block(int mr, int nv, int64_t n, const float *xs, int64_t ldx, const float *wp,
                         int64_t cg, int64_t kw, int64_t d, const float *bias, float *y,
                         int64_t ldy) {
  __m512 acc[MR][NV];
  for (int i = 0; i < mr; i++)
    for (int v = 0; v < nv; v++) acc[i][v] = bias ? _mm512_set1_ps(bias[i]) : _mm512_setzero_ps();
  for (int64_t t = 0; t < kw; t++) {
    const float *xt = xs + t * d, *wt = wp + t * cg * mr;
    for (int64_t c = 0; c < cg; c++) {
      __m512 xv[NV];
      for (int v = 0; v < nv; v++) xv[v] = _mm512_loadu_ps(xt + c * ldx + 16 * v);
      for (int i = 0; i < mr; i++) {
        __m512 wv = _mm512_set1_ps(wt[c * mr + i]);
        for (int v = 0; v < nv; v++) acc[i][v] = _mm512_fmadd_ps(wv, xv[v], acc[i][v]);
      }
    }
  }
  for (int i = 0; i < mr; i++)
    for (int v = 0; v < nv; v++) {
      int64_t left = n - 16 * v;
      if (left >= 16)
        _mm512_storeu_ps(y + i * ldy + 16 * v, acc[i][v]);
      else
        _mm512_mask_storeu_ps(y + i * ldy + 16 * v, (__mmask16)((1u << left) - 1), acc[i][v]);
    }
}

/* block() for mr <= MR rows and n <= NR columns, picked among its constant instances */
__attribute__((target("avx512f"))) static void block_any(int64_t mr, int64_t n, const float *xs,
                                                         int64_t ldx, const float *wp, int64_t cg,
                                                         int64_t kw, int64_t d, const float *bias,
                                                         float *y, int64_t ldy) {
  const int nv = (int)((n + 15) / 16);
#define BLOCK_NV(m)                                                         \
  switch (nv) {                                                             \
    case 1: block(m, 1, n, xs, ldx, wp, cg, kw, d, bias, y, ldy); return;   \
    case 2: block(m, 2, n, xs, ldx, wp, cg, kw, d, bias, y, ldy); return;   \
    case 3: block(m, 3, n, xs, ldx, wp, cg, kw, d, bias, y, ldy); return;   \
    default: block(m, NV, n, xs, ldx, wp, cg, kw, d, bias, y, ldy); return; \
  }
  switch (mr) {
    case 1: BLOCK_NV(1)
    case 2: BLOCK_NV(2)
    case 3: BLOCK_NV(3)
    case 4: BLOCK_NV(4)
    case 5: BLOCK_NV(5)
    default: BLOCK_NV(MR)
  }
#undef BLOCK_NV
}
#endif /* CPU_VEC_X86 */

bool cpu_conv1d_direct_applies(const conv_geom *q, dle_dtype dt) {
#ifdef CPU_VEC_X86
  if (dt != DLE_F32 || !cpu_vec || !has_avx512) return false;
  if (q->h != 1 || q->kh != 1 || q->ph != 0 || q->ho != 1 || q->sw != 1) return false;
  if (dle_tuning_get(DLE_TUNE_CONV1D_DIRECT) == 0) return false;
  return q->cg * stage_ld(NR, (q->kw - 1) * q->dw) * (int64_t)sizeof(float) <= STAGE_MAX_BYTES;
#else
  (void)q, (void)dt;
  return false;
#endif
}

#ifdef CPU_VEC_X86
/* One call's plan: tiles of lt columns, tiles per (sample, group) row, staging rows ldx long. */
typedef struct {
  conv_geom q;
  const float *x, *wp, *bias;
  float *y;
  int64_t halo, lt, tiles, ldx;
} plan;

/* Tile `item` (sample, group, column tile, in that order of significance): its sample b, group g,
 * first output column l0 and nl columns; the staging buffer's column j (j < span) holds input
 * column s0 + j, which lies inside the row for j in [lo, hi). */
typedef struct {
  int64_t b, g, l0, nl, span, s0, lo, hi;
} tile_at;

static tile_at tile_of(const plan *p, int64_t item) {
  const conv_geom *q = &p->q;
  tile_at t;
  const int64_t tile = item % p->tiles;
  t.g = item / p->tiles % q->g, t.b = item / p->tiles / q->g;
  t.l0 = tile * p->lt, t.nl = q->wo - t.l0 < p->lt ? q->wo - t.l0 : p->lt;
  t.span = round_up(t.nl, NR) + p->halo; /* what the blocks read */
  t.s0 = t.l0 - q->pw;
  t.lo = t.s0 < 0 ? -t.s0 : 0, t.hi = q->w - t.s0 < t.span ? q->w - t.s0 : t.span;
  if (t.hi < t.lo) t.hi = t.lo;
  return t;
}

/* x's row c of tile t (its first element at the buffer's column 0) */
static const float *tile_row(const plan *p, const tile_at *t, int64_t c) {
  return p->x + (t->b * p->q.c + t->g * p->q.cg + c) * p->q.w + t->s0;
}

/* buf[c*ldx + j] = x[b, g*cg + c, s0 + j] for c < cg, j < span (0 outside the row) */
static void stage(const plan *p, const tile_at *t, float *buf) {
  for (int64_t c = 0; c < p->q.cg; c++) {
    const float *row = tile_row(p, t, c);
    float *d = buf + c * p->ldx;
    memset(d, 0, (size_t)t->lo * sizeof(float));
    memcpy(d + t->lo, row + t->lo, (size_t)(t->hi - t->lo) * sizeof(float));
    memset(d + t->hi, 0, (size_t)(t->span - t->hi) * sizeof(float));
  }
}

/* Asks for rows [c0, c1) of tile t's input in the L2 cache: while one tile computes, the next
 * one's input comes from memory (its copy into the buffer otherwise waited for it). */
static void prefetch_rows(const plan *p, const tile_at *t, int64_t c0, int64_t c1) {
  for (int64_t c = c0; c < c1; c++) {
    const float *row = tile_row(p, t, c);
    for (int64_t j = t->lo; j < t->hi; j += 16) __builtin_prefetch(row + j, 0, 2);
  }
}

/* Tile `item` on buffer buf, prefetching tile `next`'s input (none when next < 0). */
static void run_tile(const plan *p, int64_t item, int64_t next, float *buf) {
  const conv_geom *q = &p->q;
  const tile_at t = tile_of(p, item), tn = tile_of(p, next < 0 ? item : next);
  const int64_t kk = q->cg * q->kw, nb = (t.nl + NR - 1) / NR; /* weights per output, blocks */
  int64_t rows = WEIGHT_CHUNK_BYTES / (kk * (int64_t)sizeof(float)) / MR * MR;
  if (rows < MR) rows = MR;
  const int64_t steps = nb * ((q->og + rows - 1) / rows);
  stage(p, &t, buf);
  int64_t step = 0;
  for (int64_t o1 = 0; o1 < q->og; o1 += rows) /* a chunk of output channels over all blocks */
    for (int64_t k = 0; k < nb; k++, step++) {
      const int64_t lb = k * NR, n = t.nl - lb < NR ? t.nl - lb : NR;
      if (next >= 0) prefetch_rows(p, &tn, step * q->cg / steps, (step + 1) * q->cg / steps);
      for (int64_t o0 = o1; o0 < q->og && o0 < o1 + rows; o0 += MR) {
        const int64_t o = t.g * q->og + o0, mr = q->og - o0 < MR ? q->og - o0 : MR;
        block_any(mr, n, buf + lb, p->ldx, p->wp + o * kk, q->cg, q->kw, q->dw,
                  p->bias ? p->bias + o : NULL, p->y + (t.b * q->o + o) * q->wo + t.l0 + lb, q->wo);
      }
    }
}

/* The tiles of span s of n (consecutive tiles, so each knows its successor) on buffer buf. */
static void run_span(const plan *p, int64_t items, int64_t spans, int64_t s, float *buf) {
  const int64_t i0 = s * items / spans, i1 = (s + 1) * items / spans;
  for (int64_t i = i0; i < i1; i++) run_tile(p, i, i + 1 < i1 ? i + 1 : -1, buf);
}

/* w {O, C/G, 1, kw} as blocks of MR output channels of a group (fewer in the group's last), each
 * {kw, C/G, mr} */
static void pack_weight(const conv_geom *q, const float *w, float *wp) {
  const int64_t kk = q->cg * q->kw;
  for (int64_t g = 0; g < q->g; g++)
    for (int64_t o0 = 0; o0 < q->og; o0 += MR) {
      const int64_t o = g * q->og + o0, mr = q->og - o0 < MR ? q->og - o0 : MR;
      float *d = wp + o * kk;
      for (int64_t t = 0; t < q->kw; t++)
        for (int64_t c = 0; c < q->cg; c++)
          for (int64_t i = 0; i < mr; i++)
            d[(t * q->cg + c) * mr + i] = w[((o + i) * q->cg + c) * q->kw + t];
    }
}

/* Tile width: what fits STAGE_BYTES (whole blocks, at least one), narrowed so that a batch smaller
 * than two tiles per thread still gives every thread work. */
static int64_t tile_cols(const conv_geom *q, int64_t halo, int threads) {
  int64_t fit = (STAGE_BYTES / ((int64_t)sizeof(float) * q->cg) - halo) / NR * NR;
  int64_t lt = round_up(q->wo, NR), rows = q->n * q->g;
  if (fit < lt) lt = fit;
  if (rows < 2 * threads) {
    int64_t want = (2 * threads + rows - 1) / rows; /* tiles per row */
    int64_t split = round_up((q->wo + want - 1) / want, NR);
    if (split < lt) lt = split;
  }
  return lt < NR ? NR : lt;
}
#endif /* CPU_VEC_X86 */

dle_status cpu_conv1d_direct(const conv_geom *q, const float *x, const float *w, const float *bias,
                             float *y) {
#ifdef CPU_VEC_X86
  plan p = {.q = *q, .x = x, .bias = bias, .y = y, .halo = (q->kw - 1) * q->dw};
  int nt = conv_threads();
  p.lt = tile_cols(q, p.halo, nt);
  p.tiles = (q->wo + p.lt - 1) / p.lt;
  p.ldx = stage_ld(p.lt, p.halo);
  const int64_t items = q->n * q->g * p.tiles, nw = q->o * q->cg * q->kw;
  if (items < nt) nt = (int)items;
  const size_t stage_bytes = (size_t)(p.ldx * q->cg) * sizeof(float);
  float *wp = dle_cpu_alloc((size_t)nw * sizeof(float));
  float *bufs = dle_cpu_alloc((size_t)nt * stage_bytes);
  dle_status st = DLE_OK;
  if (!wp || !bufs) {
    st = dle_error("conv2d: out of memory for the conv1d staging buffers (%lld bytes)",
                   (long long)((size_t)nt * stage_bytes));
  } else {
    pack_weight(q, w, wp);
    p.wp = wp;
    /* a free thread takes the next span of tiles: 4 per thread, better than a fixed share on a
     * busy machine */
    const int64_t spans = nt < 2 ? 1 : items < 4 * nt ? items : 4 * nt;
    if (nt < 2) {
      run_span(&p, items, spans, 0, bufs);
    } else {
#ifdef _OPENMP
      const size_t per = stage_bytes / sizeof(float);
      _Pragma("omp parallel for schedule(dynamic) num_threads(nt)")
      for (int64_t s = 0; s < spans; s++)
        run_span(&p, items, spans, s, bufs + (size_t)omp_get_thread_num() * per);
#endif
    }
  }
  dle_cpu_free(wp, (size_t)nw * sizeof(float));
  dle_cpu_free(bufs, (size_t)nt * stage_bytes);
  return st;
#else
  (void)q, (void)x, (void)w, (void)bias, (void)y;
  return dle_error("conv2d: the direct conv1d kernel needs x86-64");
#endif
}
