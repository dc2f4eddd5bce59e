/* cpu_loop_tiles.c — the tiled traversal of cpu_loop.h for elementwise kernels over transposed
 * layouts (cpu_iter_run_elementwise), and the transposing copy (cpu_iter_copy_transposed).
 *
 * Runs along the last dim read a transposed operand with a large stride: one cache line per
 * element, and with power-of-two strides all those lines fall into the same cache set, so none
 * survives until the next run could use it. Instead, the last two dims (P, L) go in tiles of
 * TILE_P x TILE_L: a transposed input is first copied into a buffer along its own contiguous
 * direction, fn then runs over contiguous buffer rows, and a transposed output is written back
 * from its buffer the same way.
 *
 * Tiles go in bands along L: a band is TILE_P rows of P, whose tiles read each operand in runs of
 * TILE_L (contiguous along L) or TILE_P (transposed) elements, 256 bytes of floats. Such short runs
 * are what memory serves worst: a 4096 x 4096 float matrix read this way came at about half the
 * rate of runs of 1 KiB. When every input is transposed and the output is large, a band is
 * therefore BAND_TALL rows, the tiles of one column of the band back to back, so each transposed
 * input column is read in a 1 KiB run (exp(a:t()) and a:t():contiguous() got faster). A
 * contiguous input keeps the short bands: its rows would be read in 256-byte runs then (a:t() + b
 * got much slower when all bands were tall). Figures in bench/RESULTS.md. */
#include "cpu_loop.h"
#include "cpu_stream.h"
#include "cpu_vecmath.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define TILE_P     64
#define TILE_L     64
#define TILE_GROUP 8 /* buffer rows per fn call when every operand is buffered */
#define BAND_TALL  256

static inline int64_t iabs(int64_t v) { return v < 0 ? -v : v; }

/* Which operands are transposed (bit k); 0 when tiling does not apply. */
static unsigned transposed_ops(const cpu_iter *it) {
  int L = it->ndim - 1, P = L - 1;
  unsigned bits = 0;
  if (it->nops < 2 || it->ndim < 2 || it->sizes[L] < 8 || it->sizes[P] < 8) return 0;
  for (int k = 0; k < it->nops; k++) {
    int64_t sp = iabs(it->strides[k][P]), sl = iabs(it->strides[k][L]);
    if (sp && sl && sp < sl && it->esize[k] <= 8) bits |= 1u << k;
  }
  return bits;
}

/* buf[r][c] <-> base + r sp + c sl for r < np, c < nl, walking r (the memory-contiguous way). */
#define TILE_MOVE(T, TO_BUF)                                                \
  for (int64_t c = 0; c < nl; c++)                                          \
    for (int64_t r = 0; r < np; r++) {                                      \
      T *m = (T *)(base + r * sp + c * sl), *b = (T *)buf + r * TILE_L + c; \
      if (TO_BUF)                                                           \
        *b = *m;                                                            \
      else                                                                  \
        *m = *b;                                                            \
    }
static void tile_move(char *buf, char *base, int64_t sp, int64_t sl, int64_t np, int64_t nl,
                      int64_t es, bool to_buf) {
  if (es == 4 && sp == 4 && sl % 4 == 0 && cpu_vec) { /* 8 x 8 blocks in AVX registers */
    if (to_buf)
      cpu_vec->transpose32(buf, TILE_L, base, sl / 4, np, nl);
    else
      cpu_vec->transpose32(base, sl / 4, buf, TILE_L, nl, np);
    return;
  }
  switch (es) {
    case 1: TILE_MOVE(uint8_t, to_buf) break;
    case 2: TILE_MOVE(uint16_t, to_buf) break;
    case 4: TILE_MOVE(uint32_t, to_buf) break;
    default: TILE_MOVE(uint64_t, to_buf) break;
  }
}

/* Tells the cache about the tile after this one (at `next`), a piece per call: row r of a plain
 * operand (its nl elements along L, rows sp bytes apart), or when transposed its column r (the np
 * elements along P, columns sl bytes apart). */
static inline void prefetch_next(const char *next, bool transposed, int64_t r, int64_t sp,
                                 int64_t sl, int64_t np, int64_t nl, int64_t es) {
  const char *at = transposed ? next + r * sl : next + r * sp;
  int64_t bytes = (transposed ? np : nl) * es;
  if (transposed && r >= nl) return;
  /* into L2 only (the T1 hint): the tile is read once, from there, by tile_move or fn. With the
   * default T0 hint (into L1) the prefetches stalled, waiting for L1 miss slots, and a:t() * b
   * ran clearly slower (1 thread, 4096 x 4096, alternating builds). */
  for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(at + o, 0, 2);
}

/* The tile at (p0, l0) of np x nl elements of the operands at b (their element (0, 0) at the
 * current index of the dims before P). The inputs of the tile at (p0, l1), nl1 elements wide (0:
 * none), are prefetched while this one is computed.
 * stream: the output is contiguous along L and large; it is computed into its buffer and copied
 * out with streaming stores, row by row (cpu_stream.h). */
static void run_tile(const cpu_iter *it, cpu_loop_fn fn, const void *ctx, unsigned tr, bool stream,
                     char (*bufs)[TILE_P * TILE_L * 8], char *const *b, int64_t p0, int64_t np,
                     int64_t l0, int64_t nl, int64_t l1, int64_t nl1) {
  int L = it->ndim - 1, P = L - 1;
  unsigned staged = tr | (stream ? 1u : 0u); /* operands that go through their buffer */
  char *p[CPU_MAX_OPERANDS];
  int64_t inner[CPU_MAX_OPERANDS], row[CPU_MAX_OPERANDS];
  for (int k = 0; k < it->nops; k++) {
    bool t = staged >> k & 1;
    char *at = b[k] + p0 * it->strides[k][P] + l0 * it->strides[k][L];
    inner[k] = t ? it->esize[k] : it->strides[k][L];
    row[k] = t ? TILE_L * it->esize[k] : it->strides[k][P];
    if (!t)
      p[k] = at;
    else {
      p[k] = bufs[k];
      if (k > 0)
        tile_move(bufs[k], at, it->strides[k][P], it->strides[k][L], np, nl, it->esize[k], true);
    }
  }
  /* rows that are whole buffer rows in every operand are back to back: fn takes TILE_GROUP at once */
  bool all_staged = staged == (1u << it->nops) - 1 && nl == TILE_L;
  int64_t g = all_staged ? TILE_GROUP : 1;
  char *q[CPU_MAX_OPERANDS], *out = b[0] + p0 * it->strides[0][P] + l0 * it->strides[0][L];
  for (int64_t r = 0; r < np; r += g) {
    int64_t rows = np - r < g ? np - r : g;
    for (int k = 0; k < it->nops; k++) q[k] = p[k] + r * row[k];
    fn(q, inner, rows * nl, ctx);
    for (int64_t j = r; j < r + rows; j++) {
      if (stream &&
          !(tr & 1)) /* out right away: the streaming stores overlap the next rows' loads */
        cpu_stream_copy(out + j * it->strides[0][P], bufs[0] + j * row[0],
                        (size_t)(nl * it->esize[0]));
      for (int k = 1; k < it->nops && nl1 > 0;
           k++) /* the inputs of the next tile, spread over this one */
        prefetch_next(b[k] + p0 * it->strides[k][P] + l1 * it->strides[k][L], tr >> k & 1, j,
                      it->strides[k][P], it->strides[k][L], np, nl1, it->esize[k]);
    }
  }
  if (tr & 1)
    tile_move(bufs[0], out, it->strides[0][P], it->strides[0][L], np, nl, it->esize[0], false);
}

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Unit u: rows [pb, pb + band) of dim P at one index of the dims before it, tile by tile: the
 * tiles of a column of the band, then the next column. */
static void run_band(const cpu_iter *it, cpu_loop_fn fn, const void *ctx, unsigned tr, int64_t u,
                     int64_t band, bool stream) {
  int L = it->ndim - 1, P = L - 1;
  _Alignas(64) char bufs[CPU_MAX_OPERANDS][TILE_P * TILE_L * 8];
  int64_t nb = (it->sizes[P] + band - 1) / band, outer = u / nb;
  int64_t pb = u % nb * band, pe = min64(pb + band, it->sizes[P]), SL = it->sizes[L];
  char *b[CPU_MAX_OPERANDS];
  for (int k = 0; k < it->nops; k++) b[k] = it->base[k];
  for (int d = P - 1; d >= 0; d--) {
    int64_t i = outer % it->sizes[d];
    outer /= it->sizes[d];
    for (int k = 0; k < it->nops; k++) b[k] += i * it->strides[k][d];
  }
  for (int64_t l0 = 0; l0 < SL; l0 += TILE_L) {
    int64_t nl = min64(SL - l0, TILE_L), l1 = l0 + TILE_L,
            nl1 = l1 < SL ? min64(SL - l1, TILE_L) : 0;
    for (int64_t p0 = pb; p0 < pe; p0 += TILE_P)
      run_tile(it, fn, ctx, tr, stream, bufs, b, p0, min64(pe - p0, TILE_P), l0, nl, l1, nl1);
  }
}

static void run_tiled(const cpu_iter *it, cpu_loop_fn fn, const void *ctx, unsigned tr) {
  int L = it->ndim - 1, P = L - 1;
  int64_t outer = 1;
  for (int d = 0; d < P; d++) outer *= it->sizes[d];
  /* a large output contiguous along L is streamed (one transposed is written by tile_move) */
  bool stream =
      !(tr & 1) && it->strides[0][L] == it->esize[0] && cpu_stream_output(it->numel * it->esize[0]);
  /* tall bands when every input is transposed and the output large, and there are still bands
   * enough to share out (4 per thread) */
  int64_t band = TILE_P, threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  if (tr == (1u << it->nops) - 2 && stream &&
      (it->sizes[P] + BAND_TALL - 1) / BAND_TALL * outer >= 4 * threads)
    band = BAND_TALL;
  int64_t units = (it->sizes[P] + band - 1) / band * outer;
#ifdef _OPENMP
#pragma omp parallel if (it->numel >= it->grain && units > 1)
#endif
  {
#ifdef _OPENMP
#pragma omp for schedule(dynamic, \
                         1) /* a thread that loses its core leaves its bands to the others */
#endif
    for (int64_t u = 0; u < units; u++) run_band(it, fn, ctx, tr, u, band, stream);
    if (stream) cpu_stream_fence();
  }
}

/* A same-dtype copy of 4-byte elements from a transposed input (contiguous along P) into an
 * output contiguous along L: 8 x 8 register transposes straight into the output, no buffer.
 * Outputs of COPY_DIRECT_MAX_BYTES and more go through run_tiled instead, whose prefetch of the
 * next tile into L2 (and, past the streaming threshold, its streaming stores) wins there (1024 x
 * 1024 and 4096 x 4096 float copies at 1 thread); below it the direct route wins (724 x 724).
 * Figures in bench/RESULTS.md. */
#define COPY_DIRECT_MAX_BYTES ((int64_t)4 << 20)
bool cpu_iter_copy_transposed(const cpu_iter *it) {
  int L = it->ndim - 1, P = L - 1;
  if (!cpu_vec || it->numel * it->esize[0] >= COPY_DIRECT_MAX_BYTES || it->nops != 2 ||
      transposed_ops(it) != 2u || it->esize[0] != 4 || it->esize[1] != 4 ||
      it->strides[0][L] != 4 || it->strides[1][P] != 4 || it->strides[0][P] % 4 ||
      it->strides[1][L] % 4)
    return false;
  int64_t units = (it->sizes[P] + TILE_P - 1) / TILE_P;
  for (int d = 0; d < P; d++) units *= it->sizes[d];
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (it->numel >= it->grain && units > 1)
#endif
  for (int64_t u = 0; u < units; u++) {
    int64_t nb = (it->sizes[P] + TILE_P - 1) / TILE_P, outer = u / nb;
    int64_t p0 = u % nb * TILE_P, np = it->sizes[P] - p0 < TILE_P ? it->sizes[P] - p0 : TILE_P;
    char *o = it->base[0] + p0 * it->strides[0][P], *x = it->base[1] + p0 * 4;
    for (int d = P - 1; d >= 0; d--) {
      int64_t i = outer % it->sizes[d];
      outer /= it->sizes[d];
      o += i * it->strides[0][d], x += i * it->strides[1][d];
    }
    for (int64_t l0 = 0; l0 < it->sizes[L]; l0 += TILE_L) {
      int64_t nl = it->sizes[L] - l0 < TILE_L ? it->sizes[L] - l0 : TILE_L;
      cpu_vec->transpose32(o + l0 * 4, it->strides[0][P] / 4, x + l0 * it->strides[1][L],
                           it->strides[1][L] / 4, np, nl);
    }
  }
  return true;
}

void cpu_iter_run_elementwise(const cpu_iter *it, cpu_loop_fn fn, const void *ctx) {
  unsigned tr = it->numel ? transposed_ops(it) : 0;
  if (tr)
    run_tiled(it, fn, ctx, tr);
  else
    cpu_iter_run(it, fn, ctx);
}
