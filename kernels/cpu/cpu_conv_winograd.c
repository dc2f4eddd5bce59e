/* cpu_conv_winograd.c — 3x3 convolution at stride 1 by Winograd's F(2x2, 3x3) (Lavin and Gray,
 * "Fast Algorithms for Convolutional Neural Networks", 2015): each 2x2 block of outputs (a tile)
 * is A^T [(G k G^T) . (B^T d B)] A, d the 4x4 input patch under it, so a channel pair costs 16
 * multiplications per tile instead of 36. Over channels the 16 products are 16 gemms, which
 * leaves 2.25x fewer flops than im2col + gemm (conv2 of the Fashion-MNIST CNN spent most of its
 * time in gemm there, most of the rest in im2col/col2im and OpenBLAS's copies).
 *
 * conv2d        V[xi][c][t] = (B^T d B)[xi] of x's tiles, U[xi][o][c] = (G w G^T)[xi],
 *               M[xi] = U[xi] . V[xi] (per group), y's tile = A^T M A (+ bias).
 * grad_input    the same on gy with the kernel flipped and its channel roles swapped
 *               (w'[c][o] = w[o][c] rotated by 180 degrees) and padding 2 - p.
 * grad_weight   the adjoint of the forward in w: gw = G^T [sum_t (A gy_t A^T) . V_t] G, the sum
 *               over tiles by gemms Gy[xi] . V[xi]^T accumulated per span of chunks (cpu_conv_job.c)
 *               in the transformed domain, summed in span order and transformed once at the end.
 * Tiles at the bottom/right edge of an odd-sized output read zeros past the input and drop (or,
 * for grad_weight, take zero gradient for) the outputs past the edge. Chunks are whole samples,
 * V and M of a chunk in the per-thread scratch (a sample whose scratch would pass
 * WINO_SAMPLE_BYTES stays on im2col); each plane's transforms run as passes over all its tiles
 * with contiguous inner loops, reading zero-padded copies of the input rows, so no bounds checks.
 * In float with AVX2 + FMA, the 16 products and the input rows' pass are cpu_vec kernels
 * (cpu_vec_gemm.c, cpu_vec_winograd.c); grad_weight's products, dot products over the tiles, stay
 * with BLAS (a hand kernel of that shape reached half of OpenBLAS's rate, packing included).
 * The transform constants are 0, +-1, +-1/2: the results agree with im2col's to a few ulps of the
 * sums (checked by tests/conv_spec.lua). Conv2 of the CNN at one thread: each of forward,
 * grad_input and grad_weight faster than by im2col, about half of it in the products.
 * Every body is instantiated per float dtype by the X-macros of cpu_types.h (CT: compute type). */
#include "cpu_conv_winograd.h"

#include <limits.h>
#include <string.h>
#include <strings.h> /* strcasecmp */

#include "cpu_gemm.h"
#include "cpu_types.h"
#include "cpu_vecmath.h"

/* Used from this many channels per group on both sides (fewer make gemms too thin to beat
 * im2col: the CNN's first layer, 1 input channel, stays there; forward + both gradients at one
 * thread, Winograd against im2col: faster at 8 and 64 channels on 28x28, about even at 8
 * channels on 14x14; figures in bench/RESULTS.md), and while one sample's scratch stays under
 * WINO_SAMPLE_BYTES (chunks are whole samples). */
#define WINO_MIN_CHANNELS 8
/* ... and from this many tiles in the whole batch (the default of the tuning knob
 * DLE_TUNE_WINOGRAD_MIN_TILES, engine/backend.c): the 16 transformed weight matrices are made and
 * packed on every call, so on small maps at small batches making them cost more than the cheaper
 * products saved. resnet18 at one thread: its 7x7 layers (512 channels) at batch 8, 128 tiles,
 * ran faster by im2col; its 28x28 ones (128 channels) at batch 1, 196 tiles, by Winograd. */
#define WINO_MIN_TILES    160
#define WINO_SAMPLE_BYTES ((int64_t)8 << 20)
/* Weight pairs (o, c) transformed per block (see wino_conv). */
#define WINO_TF_BLOCK 64
/* Scratch per thread (V and M of a chunk): several samples per chunk make the gemms wider; and
 * chunks of fewer than WINO_MIN_CHUNK_TILES tiles may be widened up to WINO_WIDE_BYTES (see
 * wino_chunk): each chunk's 16 products pack the transformed weights again, which on small maps
 * with many channels (resnet18's 14x14 and 7x7 layers, 49 or 16 tiles per sample) cost as much
 * as the products. */
#define WINO_CHUNK_BYTES     ((int64_t)1 << 20)
#define WINO_MIN_CHUNK_TILES 512
#define WINO_WIDE_BYTES      ((int64_t)8 << 20)

/* Tiles of an output ho x wo and the scratch of one sample with ci input and co output
 * channels (V, M and the padded planes), in elements. */
static int64_t tiles(int64_t ho, int64_t wo) { return ((ho + 1) / 2) * ((wo + 1) / 2); }
static int64_t sample_elems(int64_t ci, int64_t co, int64_t ho, int64_t wo) {
  return 16 * (ci + co) * tiles(ho, wo);
}

bool cpu_conv_winograd_applies(const conv_geom *q, size_t es) {
  if (q->kh != 3 || q->kw != 3 || q->sh != 1 || q->sw != 1 || q->dh != 1 || q->dw != 1)
    return false;
  if (q->cg < WINO_MIN_CHANNELS || q->og < WINO_MIN_CHANNELS) return false;
  if (q->n * tiles(q->ho, q->wo) < dle_tuning_get(DLE_TUNE_WINOGRAD_MIN_TILES)) return false;
  /* the gradient ops transform the larger of the input and the output, padded to even sizes */
  int64_t h = q->h > q->ho ? q->h : q->ho, w = q->w > q->wo ? q->w : q->wo;
  return sample_elems(q->c, q->o, h, w) * (int64_t)es <= WINO_SAMPLE_BYTES;
}

/* Samples per chunk for per-sample scratch of `per` bytes: within WINO_CHUNK_BYTES, but when
 * the transformed weights (ubytes, packed again by every chunk's products) outweigh such a chunk,
 * at least WINO_MIN_CHUNK_TILES tiles as long as that fits WINO_WIDE_BYTES; at least one sample,
 * at most a 1/threads share of the batch, and few enough tiles for BLAS's int sizes. (The CNN's
 * conv2, 32 -> 64 channels on 14x14, 131 KB of weights: widened chunks, larger than the L2
 * cache, made it slower. grad_weight passes ubytes 0: its products pack no weights, and its
 * sums over the chunks would then be split differently at each thread count.) */
static int64_t wino_chunk(int64_t n, int64_t per, int64_t tps, int64_t ubytes) {
  if (per < 1) per = 1;
  int64_t b = WINO_CHUNK_BYTES / per;
  if (ubytes > (b > 1 ? b : 1) * per && tps > 0 && b * tps < WINO_MIN_CHUNK_TILES) {
    int64_t want = (WINO_MIN_CHUNK_TILES + tps - 1) / tps, most = WINO_WIDE_BYTES / per;
    b = want < most ? want : most;
  }
  int threads = conv_threads();
  int64_t share = (n + threads - 1) / threads;
  if (b > share) b = share;
  if (b < 1) b = 1;
  while (b > 1 && b * tps > INT_MAX / 2) b /= 2;
  return b;
}

/* The transforms are element-wise over a plane's tiles: compiled for AVX2 too where the compiler
 * can pick at load time. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define WINO_SIMD __attribute__((target_clones("avx2", "default")))
#else
#define WINO_SIMD
#endif

/* Whether OpenBLAS runs 512-bit (AVX-512) kernels: then its sgemm, packing included, beat cpu_vec's
 * 256-bit kernel on the Winograd products (the CNN's conv2 and resnet18's 3x3 layers, batch 1 and
 * 8, on a Sapphire Rapids core). */
static bool blas_is_wide(void) {
  static int wide = -1; /* computed once; a race only computes it twice */
  if (wide < 0) {
    const char *core = openblas_get_corename();
    wide = core && (!strcasecmp(core, "skylakex") || !strcasecmp(core, "cooperlake") ||
                    !strcasecmp(core, "sapphirerapids"));
  }
  return wide;
}

/* Per-thread scratch sizes rounded up to 64 bytes of float, so every thread's V and M rows start
 * aligned as the chunk functions lay them out. */
static int64_t line(int64_t n) { return (n + 15) / 16 * 16; }

/* The padded input row of input_tf: 2 tw + 2 elements, then zeros up to what cpu_vec's
 * wino_rows reads (whole blocks of 8 tiles). */
static int64_t rowlen(int64_t tw) { return 2 * ((tw + 7) / 8 * 8) + 2; }
/* input_tf's 8 arrays of row-pass results, th + 1 rows of tw each, plus the 8 elements wino_rows
 * may write past the last row */
static int64_t hlen(int64_t th, int64_t tw) { return (th + 1) * tw + 8; }

/* j->ext of a Winograd job: input rows/cols of output (0, 0) and the tile grid of the output */
enum { E_OFFH, E_OFFW, E_TH, E_TW };

/* ---- transforms and chunk functions, one body per dtype ---- */
#define WINO_KERNELS(ID, T, CT)                                                                       \
  /* G k G^T of the 3x3 kernel k (element (i, j) at k[i * si + j * sj]) into u[xi * su] */            \
  static void kernel_tf_##ID(const T *k, int64_t si, int64_t sj, CT *u, int64_t su) {                 \
    CT a[4][3];                                                                                       \
    for (int j = 0; j < 3; j++) {                                                                     \
      CT k0 = LD_##ID(k[j * sj]), k1 = LD_##ID(k[si + j * sj]), k2 = LD_##ID(k[2 * si + j * sj]);     \
      a[0][j] = k0, a[1][j] = (k0 + k1 + k2) / 2, a[2][j] = (k0 - k1 + k2) / 2, a[3][j] = k2;         \
    }                                                                                                 \
    for (int i = 0; i < 4; i++) {                                                                     \
      CT *r = u + 4 * i * su;                                                                         \
      r[0] = a[i][0], r[su] = (a[i][0] + a[i][1] + a[i][2]) / 2;                                      \
      r[2 * su] = (a[i][0] - a[i][1] + a[i][2]) / 2, r[3 * su] = a[i][2];                             \
    }                                                                                                 \
  }                                                                                                   \
  /* m {mo, n} = u {mo, k} . v {k, n}, rows of v and m ld apart: cpu_vec's AVX2 kernel for float    \
   * when the CPU has it and OpenBLAS's kernels are no wider (then OpenBLAS's zeroing of m and      \
   * packing cost as much as its kernel here), else BLAS */ \
  static void wino_gemm_##ID(int64_t mo, int64_t n, int64_t k, const CT *u, const CT *v, CT *m,       \
                             int64_t ld) {                                                            \
    if (sizeof(CT) == sizeof(float) && cpu_vec && !blas_is_wide())                                    \
      cpu_vec->sgemm_nn(mo, n, k, (const float *)(const void *)u, k,                                  \
                        (const float *)(const void *)v, ld, (float *)(void *)m, ld, false);           \
    else                                                                                              \
      GEMM(CT)(false, false, mo, n, k, u, k, v, ld, (CT)0, m, ld);                                    \
  }                                                                                                   \
  /* v[xi * vs + t] = (B^T d B)[xi] for the tiles t = ty * tw + tx of one plane {h, w}, d the   \
   * 4x4 patch at input (offh + 2 ty, offw + 2 tx), zero outside the plane. Two passes with     \
   * contiguous inner loops: each row r of the padded patch grid (2 th + 2 rows) is combined      \
   * across its columns into hb[(2 j + r % 2) * hs + (r / 2) * tw + tx] (d B, column j of tile   \
   * tx), then rows 2 ty .. 2 ty + 3 of those are combined (B^T .) for all tiles at once. */     \
  WINO_SIMD static void input_tf_##ID(const T *plane, int64_t h, int64_t w, int64_t offh,             \
                                      int64_t offw, int64_t th, int64_t tw, CT *hb, CT *row,          \
                                      CT *v, int64_t vs) {                                            \
    const int64_t pw = 2 * tw + 2, hs = hlen(th, tw), tps = th * tw;                                  \
    int64_t c0 = offw < 0 ? -offw : 0, c1 = w - offw < pw ? w - offw : pw;                            \
    if (c1 < c0) c1 = c0;                                                                             \
    for (int64_t r = 0; r < 2 * th + 2; r++) {                                                        \
      const int64_t sr = r + offh;                                                                    \
      const bool in = sr >= 0 && sr < h;                                                              \
      const T *src = plane + (in ? sr * w + offw : 0);                                                \
      for (int64_t s = 0; s < rowlen(tw); s++) row[s] = 0;                                            \
      for (int64_t s = c0; s < c1 && in; s++) row[s] = LD_##ID(src[s]);                               \
      CT *h0 = hb + (r % 2) * hs + (r / 2) * tw, *h1 = h0 + 2 * hs, *h2 = h1 + 2 * hs;                \
      CT *h3 = h2 + 2 * hs;                                                                           \
      if (sizeof(CT) == sizeof(float) && cpu_vec) {                                                   \
        cpu_vec->wino_rows((const float *)(const void *)row, tw, (float *)(void *)h0,                 \
                           (float *)(void *)h1, (float *)(void *)h2, (float *)(void *)h3);            \
        continue;                                                                                     \
      }                                                                                               \
      _Pragma("GCC ivdep")                                                                            \
      for (int64_t tx = 0; tx < tw; tx++) {                                                           \
        CT d0 = row[2 * tx], d1 = row[2 * tx + 1], d2 = row[2 * tx + 2], d3 = row[2 * tx + 3];        \
        h0[tx] = d0 - d2, h1[tx] = d1 + d2, h2[tx] = d2 - d1, h3[tx] = d1 - d3;                       \
      }                                                                                               \
    }                                                                                                 \
    for (int j = 0; j < 4; j++) {                                                                     \
      const CT *restrict e = hb + 2 * j * hs, *restrict o = e + hs, *restrict e2 = e + tw;            \
      const CT *restrict o2 = o + tw;                                                                 \
      CT *restrict v0 = v + j * vs, *restrict v1 = v0 + 4 * vs, *restrict v2 = v1 + 4 * vs;           \
      CT *restrict v3 = v2 + 4 * vs;                                                                  \
      _Pragma("GCC ivdep")                                                                            \
      for (int64_t t = 0; t < tps; t++) {                                                             \
        v0[t] = e[t] - e2[t], v1[t] = o[t] + e2[t], v2[t] = e2[t] - o[t], v3[t] = o[t] - o2[t];       \
      }                                                                                               \
    }                                                                                                 \
  }                                                                                                   \
  /* One output plane {ho, wo} (+ add) from m[xi * ms + t] (tiles t = ty * tw + tx): A^T m A     \
   * for all tiles in one pass into y4 (4 arrays of th * tw: the tile's four outputs), then       \
   * interleaved into the plane's rows, dropping the outputs past its edge */    \
  WINO_SIMD static void output_tf_##ID(const CT *m, int64_t ms, int64_t th, int64_t tw, CT add,       \
                                       CT *y4, T *dst, int64_t ho, int64_t wo) {                      \
    const int64_t tps = th * tw;                                                                      \
    CT *restrict y00 = y4, *restrict y01 = y4 + tps, *restrict y10 = y01 + tps;                       \
    CT *restrict y11 = y10 + tps;                                                                     \
    const CT *restrict m0 = m;                                                                        \
    /* rows s0 = m[0] + m[1] + m[2] and s1 = m[1] - m[2] - m[3] of the 4x4 (4 * ms apart), then   \
     * their columns combined the same way: one pass over the 16 streams */   \
    _Pragma("GCC ivdep")                                                                              \
    for (int64_t t = 0; t < tps; t++) {                                                               \
      CT s0[4], s1[4];                                                                                \
      for (int j = 0; j < 4; j++) {                                                                   \
        CT r0 = m0[j * ms + t], r1 = m0[(4 + j) * ms + t], r2 = m0[(8 + j) * ms + t];                 \
        CT r3 = m0[(12 + j) * ms + t];                                                                \
        s0[j] = r0 + r1 + r2, s1[j] = r1 - r2 - r3;                                                   \
      }                                                                                               \
      y00[t] = s0[0] + s0[1] + s0[2] + add, y01[t] = s0[1] - s0[2] - s0[3] + add;                     \
      y10[t] = s1[0] + s1[1] + s1[2] + add, y11[t] = s1[1] - s1[2] - s1[3] + add;                     \
    }                                                                                                 \
    const int64_t pairs = wo / 2;                                                                     \
    for (int64_t r = 0; r < ho; r++) {                                                                \
      const CT *restrict a = (r % 2 ? y10 : y00) + (r / 2) * tw;                                      \
      const CT *restrict b = (r % 2 ? y11 : y01) + (r / 2) * tw;                                      \
      T *restrict d = dst + r * wo;                                                                   \
      _Pragma("GCC ivdep")                                                                            \
      for (int64_t tx = 0; tx < pairs; tx++)                                                          \
        d[2 * tx] = ST_##ID(a[tx]), d[2 * tx + 1] = ST_##ID(b[tx]);                                   \
      if (wo % 2) d[wo - 1] = ST_##ID(a[pairs]);                                                      \
    }                                                                                                 \
  }                                                                                                   \
  /* v[xi * vs + t] = (A g A^T)[xi] for the tiles t of one plane {ho, wo} of gy, g the 2x2 block  \
   * at (2 ty, 2 tx), zero past the edge: the blocks' four elements gathered into g4 (4 arrays   \
   * of th * tw), then combined for all tiles at once */   \
  WINO_SIMD static void grad_tf_##ID(const T *plane, int64_t ho, int64_t wo, int64_t th,              \
                                     int64_t tw, CT *g4, CT *v, int64_t vs) {                         \
    const int64_t tps = th * tw, pairs = wo / 2;                                                      \
    CT *restrict g00 = g4, *restrict g01 = g4 + tps, *restrict g10 = g01 + tps;                       \
    CT *restrict g11 = g10 + tps;                                                                     \
    for (int64_t r = 0; r < 2 * th; r++) {                                                            \
      CT *restrict a = (r % 2 ? g10 : g00) + (r / 2) * tw, *restrict b =                              \
                                                               (r % 2 ? g11 : g01) + (r / 2) * tw;    \
      const T *restrict s = plane + r * wo;                                                           \
      if (r >= ho) {                                                                                  \
        for (int64_t tx = 0; tx < tw; tx++) a[tx] = b[tx] = 0;                                        \
        continue;                                                                                     \
      }                                                                                               \
      _Pragma("GCC ivdep")                                                                            \
      for (int64_t tx = 0; tx < pairs; tx++)                                                          \
        a[tx] = LD_##ID(s[2 * tx]), b[tx] = LD_##ID(s[2 * tx + 1]);                                   \
      if (wo % 2) a[pairs] = LD_##ID(s[wo - 1]), b[pairs] = 0;                                        \
    }                                                                                                 \
    for (int i = 0; i < 4; i++) {                                                                     \
      /* row i of A g: c0 g0 + c1 g1 with A's row i = (c0, c1) */                                     \
      const CT c0 = i < 3 ? 1 : 0, c1 = i == 0 ? 0 : i == 1 ? 1 : -1;                                 \
      CT *restrict v0 = v + 4 * i * vs, *restrict v1 = v0 + vs, *restrict v2 = v1 + vs;               \
      CT *restrict v3 = v2 + vs;                                                                      \
      _Pragma("GCC ivdep")                                                                            \
      for (int64_t t = 0; t < tps; t++) {                                                             \
        CT a0 = c0 * g00[t] + c1 * g10[t], a1 = c0 * g01[t] + c1 * g11[t];                            \
        v0[t] = a0, v1[t] = a0 + a1, v2[t] = a0 - a1, v3[t] = -a1;                                    \
      }                                                                                               \
    }                                                                                                 \
  }                                                                                                   \
  /* V of the chunk's samples [b0, b0 + nb) of src {.., ci, h, w} into v ([16][ci][ld]); hb is   \
   * input_tf's scratch */    \
  static void chunk_in_##ID(const conv_job *j, const T *src, int64_t ci, int64_t h, int64_t w,        \
                            int64_t b0, int64_t nb, CT *v, int64_t ld, CT *hb) {                      \
    const int64_t th = j->ext[E_TH], tw = j->ext[E_TW], tps = th * tw;                                \
    CT *row = hb + 8 * hlen(th, tw);                                                                  \
    for (int64_t b = 0; b < nb; b++)                                                                  \
      for (int64_t c = 0; c < ci; c++)                                                                \
        input_tf_##ID(src + ((b0 + b) * ci + c) * h * w, h, w, j->ext[E_OFFH], j->ext[E_OFFW], th,    \
                      tw, hb, row, v + c * ld + b * tps, ci * ld);                                    \
  }                                                                                                   \
  /* conv2d or grad_input of samples [b0, b0 + nb): src {N, ci, h, w} -> dst {N, co, ho, wo}     \
   * with U [16][co][ci/g] in j->w (ci, co, h, w: the roles of the call, see wino_conv) */    \
  static void conv_chunk_##ID(const conv_job *j, int64_t b0, int64_t nb, int t, int64_t s) {          \
    const conv_geom *q = &j->q; /* here: c, h, w the source's, o, ho, wo the destination's */         \
    const int64_t th = j->ext[E_TH], tw = j->ext[E_TW], tps = th * tw, nt = nb * tps;                 \
    const int64_t ld = (nt + 7) / 8 * 8; /* rows of V and M start 32-byte aligned */                  \
    const int64_t ci = q->c, co = q->o, cg = q->cg, og = q->og;                                       \
    CT *v = (CT *)j->col + t * j->ncol, *pad = v + 16 * ci * ld;                                      \
    CT *m = (CT *)j->tmp + t * j->ntmp, *plane = m + 16 * co * ld;                                    \
    const CT *u = j->w;                                                                               \
    const T *bias = j->bias;                                                                          \
    chunk_in_##ID(j, j->src, ci, q->h, q->w, b0, nb, v, ld, pad);                                     \
    for (int xi = 0; xi < 16; xi++)                                                                   \
      for (int64_t g = 0; g < q->g; g++)                                                              \
        wino_gemm_##ID(og, nt, cg, u + (xi * co + g * og) * cg, v + (xi * ci + g * cg) * ld,          \
                       m + (xi * co + g * og) * ld, ld);                                              \
    for (int64_t b = 0; b < nb; b++)                                                                  \
      for (int64_t o = 0; o < co; o++)                                                                \
        output_tf_##ID(m + o * ld + b * tps, co * ld, th, tw, bias ? (CT)LD_##ID(bias[o]) : (CT)0,    \
                       plane, (T *)j->dst + ((b0 + b) * co + o) * q->ho * q->wo, q->ho, q->wo);       \
  }                                                                                                   \
  /* span s's accumulator [16][O][C/G] += the sum over the tiles of samples [b0, b0 + nb) */          \
  static void gw_chunk_##ID(const conv_job *j, int64_t b0, int64_t nb, int t, int64_t s) {            \
    const conv_geom *q = &j->q;                                                                       \
    const int64_t th = j->ext[E_TH], tw = j->ext[E_TW], tps = th * tw, nt = nb * tps;                 \
    const int64_t ld = (nt + 7) / 8 * 8; /* rows of V and M start 32-byte aligned */                  \
    CT *v = (CT *)j->col + t * j->ncol, *pad = v + 16 * q->c * ld;                                    \
    CT *gv = (CT *)j->tmp + t * j->ntmp, *plane = gv + 16 * q->o * ld;                                \
    CT *acc = (CT *)j->acc + s * j->nacc;                                                             \
    const T *gy = j->gy;                                                                              \
    chunk_in_##ID(j, j->src, q->c, q->h, q->w, b0, nb, v, ld, pad);                                   \
    for (int64_t b = 0; b < nb; b++)                                                                  \
      for (int64_t o = 0; o < q->o; o++)                                                              \
        grad_tf_##ID(gy + ((b0 + b) * q->o + o) * q->ho * q->wo, q->ho, q->wo, th, tw, plane,         \
                     gv + o * ld + b * tps, q->o * ld);                                               \
    for (int xi = 0; xi < 16; xi++)                                                                   \
      for (int64_t g = 0; g < q->g; g++) GEMM(CT)                                                     \
    (false, true, q->og, q->cg, nt, gv + (xi * q->o + g * q->og) * ld, ld,                            \
     v + (xi * q->c + g * q->cg) * ld, ld, (CT)1, acc + (xi * q->o + g * q->og) * q->cg, q->cg);      \
  }                                                                                                   \
  /* conv2d (flip false: src x, y = dst) or grad_input (flip true: src gy, dst gx) with weight   \
   * w {O, C/G, 3, 3}; qc is the call's geometry in conv2d's terms */    \
  static dle_status wino_conv_##ID(const char *fn, const conv_geom *qc, bool flip, const T *src,      \
                                   const T *w, const T *bias, T *dst) {                               \
    conv_geom q = *qc; /* the roles of this pass: c, h, w in; o, ho, wo out */                        \
    int64_t offh = -qc->ph, offw = -qc->pw;                                                           \
    if (flip) {                                                                                       \
      q.c = qc->o, q.h = qc->ho, q.w = qc->wo, q.cg = qc->og;                                         \
      q.o = qc->c, q.ho = qc->h, q.wo = qc->w, q.og = qc->cg;                                         \
      offh = qc->ph - 2, offw = qc->pw - 2;                                                           \
    }                                                                                                 \
    const int64_t th = (q.ho + 1) / 2, tw = (q.wo + 1) / 2, tps = th * tw;                            \
    const int64_t per = sample_elems(q.c, q.o, q.ho, q.wo) * (int64_t)sizeof(CT);                     \
    const int64_t ubytes = 16 * q.o * q.cg * (int64_t)sizeof(CT); /* U's */                           \
    const int64_t b = wino_chunk(q.n, per, tps, ubytes);                                              \
    conv_job j;                                                                                       \
    dle_status st = conv_job_init(&j, fn, q, sizeof(CT), b, 16 * q.o * q.cg,                          \
                                  line(16 * q.c * (b * tps + 7) + 8 * hlen(th, tw) + rowlen(tw)),     \
                                  line(16 * q.o * (b * tps + 7) + 4 * tps), 0, false);                \
    if (st == DLE_OK) {                                                                               \
      CT *u = j.wbuf, blk[16 * WINO_TF_BLOCK];                                                        \
      const int64_t oc = q.o * q.cg;                                                                  \
      /* (o, c) pairs e = o cg + c by blocks, each transformed into blk, then copied to U's 16    \
       * planes: storing straight to the 16 planes, oc elements apart, thrashed the cache (the   \
       * same set for all 16 when oc is a multiple of 1024) */   \
      for (int64_t e0 = 0; e0 < oc; e0 += WINO_TF_BLOCK) {                                            \
        const int64_t ne = oc - e0 < WINO_TF_BLOCK ? oc - e0 : WINO_TF_BLOCK;                         \
        for (int64_t e = e0; e < e0 + ne; e++) {                                                      \
          const int64_t o = e / q.cg, c = e % q.cg;                                                   \
          if (!flip)                                                                                  \
            kernel_tf_##ID(w + e * 9, 3, 1, blk + (e - e0), WINO_TF_BLOCK);                           \
          else /* out channel o = group gr's (o % og), in channel gr * cg + c of the pass */          \
            kernel_tf_##ID(w + (((o / q.og) * q.cg + c) * q.og + o % q.og) * 9 + 8, -3, -1,           \
                           blk + (e - e0), WINO_TF_BLOCK);                                            \
        }                                                                                             \
        for (int xi = 0; xi < 16; xi++)                                                               \
          memcpy(u + xi * oc + e0, blk + xi * WINO_TF_BLOCK, (size_t)ne * sizeof(CT));                \
      }                                                                                               \
      j.ext[E_OFFH] = offh, j.ext[E_OFFW] = offw, j.ext[E_TH] = th, j.ext[E_TW] = tw;                 \
      j.src = src, j.dst = dst, j.bias = bias, j.w = u;                                               \
    }                                                                                                 \
    return conv_job_run(&j, st, conv_chunk_##ID);                                                     \
  }                                                                                                   \
  static dle_status wino_gw_##ID(const conv_geom *q, const T *gy, const T *x, T *gw) {                \
    const int64_t th = (q->ho + 1) / 2, tw = (q->wo + 1) / 2, tps = th * tw;                          \
    const int64_t per = sample_elems(q->c, q->o, q->ho, q->wo) * (int64_t)sizeof(CT);                 \
    const int64_t b = wino_chunk(q->n, per, tps, 0), na = 16 * q->o * q->cg;                          \
    conv_job j;                                                                                       \
    dle_status st = conv_job_init(&j, "conv2d_grad_weight", *q, sizeof(CT), b, 0,                     \
                                  line(16 * q->c * (b * tps + 7) + 8 * hlen(th, tw) + rowlen(tw)),    \
                                  line(16 * q->o * (b * tps + 7) + 4 * tps), na, true);               \
    if (st == DLE_OK) {                                                                               \
      j.ext[E_OFFH] = -q->ph, j.ext[E_OFFW] = -q->pw, j.ext[E_TH] = th, j.ext[E_TW] = tw;             \
      j.src = x, j.gy = gy;                                                                           \
      conv_for_chunks(&j, gw_chunk_##ID);                                                             \
      CT *acc = j.acc; /* spans summed in order into span 0, then G^T S G per (o, c) */               \
      for (int64_t k = 1; k < j.spans; k++)                                                           \
        for (int64_t i = 0; i < na; i++) acc[i] += acc[k * na + i];                                   \
      const int64_t oc = q->o * q->cg;                                                                \
      for (int64_t e = 0; e < oc; e++) {                                                              \
        CT r[4][3];                                                                                   \
        for (int i = 0; i < 4; i++) {                                                                 \
          CT s0 = acc[(4 * i) * oc + e], s1 = acc[(4 * i + 1) * oc + e];                              \
          CT s2 = acc[(4 * i + 2) * oc + e], s3 = acc[(4 * i + 3) * oc + e];                          \
          r[i][0] = s0 + (s1 + s2) / 2, r[i][1] = (s1 - s2) / 2, r[i][2] = (s1 + s2) / 2 + s3;        \
        }                                                                                             \
        T *d = gw + e * 9;                                                                            \
        for (int k = 0; k < 3; k++) {                                                                 \
          d[k] = ST_##ID(r[0][k] + (r[1][k] + r[2][k]) / 2);                                          \
          d[3 + k] = ST_##ID((r[1][k] - r[2][k]) / 2);                                                \
          d[6 + k] = ST_##ID((r[1][k] + r[2][k]) / 2 + r[3][k]);                                      \
        }                                                                                             \
      }                                                                                               \
    }                                                                                                 \
    conv_job_free(&j);                                                                                \
    return st;                                                                                        \
  }
CPU_FLOAT_TYPES(WINO_KERNELS)

dle_status cpu_conv_winograd(dle_op op, const conv_geom *q, dle_dtype dt, dle_tensor *out,
                             dle_tensor *const *ins, int nin) {
#define CASE(ID, T, CT)                                                                          \
  case DLE_##ID:                                                                                 \
    switch (op) {                                                                                \
      case DLE_OP_CONV2D:                                                                        \
        return wino_conv_##ID("conv2d", q, false, dle_tensor_data(ins[0]),                       \
                              dle_tensor_data(ins[1]), nin > 2 ? dle_tensor_data(ins[2]) : NULL, \
                              dle_tensor_data(out));                                             \
      case DLE_OP_CONV2D_GRAD_INPUT:                                                             \
        return wino_conv_##ID("conv2d_grad_input", q, true, dle_tensor_data(ins[0]),             \
                              dle_tensor_data(ins[1]), NULL, dle_tensor_data(out));              \
      case DLE_OP_CONV2D_GRAD_WEIGHT:                                                            \
        return wino_gw_##ID(q, dle_tensor_data(ins[0]), dle_tensor_data(ins[1]),                 \
                            dle_tensor_data(out));                                               \
      default: break;                                                                            \
    }                                                                                            \
    break;
  switch (dt) {
    CPU_FLOAT_TYPES(CASE)
    default: break;
  }
#undef CASE
  return dle_error("%s: no Winograd kernel for %s", dle_op_get_info(op)->name, dle_dtype_name(dt));
}
