/* reduce_plan.h — what the reduction kernels (reduce.c) and softmax (softmax.c) share: the max/min
 * flavor macros and the plan that splits an input's dims into kept dims (one per output) and
 * reduced dims, each group merged where memory allows, and cuts the outputs into chunks. */
#ifndef DLE_CPU_REDUCE_PLAN_H
#define DLE_CPU_REDUCE_PLAN_H

#include "cpu_loop.h"

#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

static inline int red_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

#define RED_LOWEST(CT)                        \
  _Generic((CT)0, float                       \
           : -INFINITY, double                \
           : -INFINITY, int32_t               \
           : INT32_MIN, uint64_t : 0, default \
           : INT64_MIN)
#define RED_HIGHEST(CT)          \
  _Generic((CT)0, float          \
           : INFINITY, double    \
           : INFINITY, int32_t   \
           : INT32_MAX, uint64_t \
           : UINT64_MAX, default \
           : INT64_MAX)

#define ACC_MAX(ID, CT)       CT
#define INIT_MAX(CT)          RED_LOWEST(CT)
#define STEP_MAX(CT, a, x, m) ((((x) > (a)) | ((x) != (x))) ? (x) : (a))
#define MERGE_MAX(a, b)       STEP_MAX(, a, b, 0)
#define OUT_MAX(ID, T)        T
#define STORE_MAX(ID, v)      ST_##ID(v)

#define ACC_MIN(ID, CT)       CT
#define INIT_MIN(CT)          RED_HIGHEST(CT)
#define STEP_MIN(CT, a, x, m) ((((x) < (a)) | ((x) != (x))) ? (x) : (a))
#define MERGE_MIN(a, b)       STEP_MIN(, a, b, 0)
#define OUT_MIN(ID, T)        T
#define STORE_MIN(ID, v)      ST_##ID(v)

/* Max/min of a contiguous run: a plain max (what the vector max instruction computes) while
 * z += v * 0 stays 0; z turns NaN when the run holds a NaN (or an infinity), and then the
 * NaN-aware loop decides. */
#define SIMPLE_MAX(b, v) ((v) > (b) ? (v) : (b))
#define SIMPLE_MIN(b, v) ((v) < (b) ? (v) : (b))
#define SIMD_MAX         _Pragma("omp simd reduction(max : b) reduction(+ : z)")
#define SIMD_MIN         _Pragma("omp simd reduction(min : b) reduction(+ : z)")
#define RED_EXTREME_FAST(FL, ID, T, CT, x, n, b, z) \
  CT b = INIT_##FL(CT), z = 0;                      \
  SIMD_##FL for (int64_t i_ = 0; i_ < (n); i_++) {  \
    CT v_ = LD_##ID((x)[i_]);                       \
    b = SIMPLE_##FL(b, v_);                         \
    z += v_ * 0;                                    \
  }

/* ================================================================ the plan */

typedef struct {
  int nk, nr;
  int64_t ks[DLE_MAX_DIMS], kx[DLE_MAX_DIMS],
      ko[DLE_MAX_DIMS]; /* kept: sizes, input byte strides, output element strides */
  int64_t rs[DLE_MAX_DIMS], rx[DLE_MAX_DIMS],
      ro[DLE_MAX_DIMS]; /* reduced: sizes, input byte strides, output element strides */
  int64_t nout, nred;
  const char *x;
  bool stream; /* the fastest input dim is kept: stream rows of outputs along kept dim k0 */
  int k0;
  int64_t blk;  /* outputs per chunk: a run of consecutive outputs, or (streaming) of dim k0 */
  int64_t nblk; /* streaming: chunks per row of dim k0 */
  int64_t nchunks;
} red_plan;

typedef struct {
  int64_t first;   /* kept flat index of the chunk's first output */
  int64_t n;       /* outputs in the chunk */
  int64_t in_off;  /* byte offset of the first output's input */
  int64_t out_off; /* element offset of the first output */
  int64_t os;      /* element stride between the chunk's outputs (streaming) */
} red_chunk;

static inline int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

/* Appends dim (size, input stride, output stride) to a group, merging it into the previous dim
 * when that one steps exactly over it in input and output. */
static inline void group_push(int *n, int64_t *s, int64_t *x, int64_t *o, int64_t size, int64_t xs,
                              int64_t os) {
  int k = *n;
  if (k > 0 && x[k - 1] == xs * size && o[k - 1] == os * size) {
    s[k - 1] *= size, x[k - 1] = xs, o[k - 1] = os;
    return;
  }
  s[k] = size, x[k] = xs, o[k] = os;
  *n = k + 1;
}

/* Splits x's dims into kept and reduced groups. ostr: output element stride per dim of x.
 * logical: the reduced dims keep their order (arg ops count positions in it); otherwise they are
 * reordered by decreasing stride so the innermost run is the densest. */
static inline void plan_build(red_plan *pl, const dle_tensor *x, const int64_t *ostr,
                              const bool *red, bool logical) {
  int64_t es = cpu_esize(x->dtype);
  int ord[DLE_MAX_DIMS], no = 0;
  memset(pl, 0, sizeof *pl);
  pl->x = dle_tensor_data(x);
  pl->nout = pl->nred = 1;
  for (int d = 0; d < x->ndim; d++) {
    if (red[d])
      pl->nred *= x->sizes[d], ord[no++] = d;
    else
      pl->nout *= x->sizes[d];
    if (x->sizes[d] == 1 || red[d]) continue;
    group_push(&pl->nk, pl->ks, pl->kx, pl->ko, x->sizes[d], x->strides[d] * es, ostr[d]);
  }
  if (!logical) /* insertion sort, stride-0 dims outermost */
    for (int i = 1; i < no; i++)
      for (int j = i; j > 0; j--) {
        int64_t a = x->strides[ord[j - 1]], b = x->strides[ord[j]];
        bool swap = a != 0 && (b == 0 || abs64(b) > abs64(a));
        if (!swap) break;
        int t = ord[j];
        ord[j] = ord[j - 1], ord[j - 1] = t;
      }
  for (int i = 0; i < no; i++) {
    int d = ord[i];
    if (x->sizes[d] == 1) continue;
    group_push(&pl->nr, pl->rs, pl->rx, pl->ro, x->sizes[d], x->strides[d] * es, ostr[d]);
  }
  if (pl->nk == 0) pl->ks[0] = 1, pl->nk = 1;
  if (pl->nr == 0) pl->rs[0] = 1, pl->nr = 1;
  /* stream when some kept dim is denser in memory than every reduced dim */
  int64_t best_k = INT64_MAX, best_r = INT64_MAX;
  for (int d = 0; d < pl->nk; d++)
    if (pl->kx[d] && abs64(pl->kx[d]) < best_k) best_k = abs64(pl->kx[d]), pl->k0 = d;
  for (int d = 0; d < pl->nr; d++)
    if (pl->rx[d] && abs64(pl->rx[d]) < best_r) best_r = abs64(pl->rx[d]);
  pl->stream = best_k < best_r;
}

/* Chunks of at most cap outputs. Streamed rows stay as wide as allowed, so each pass reads long
 * contiguous stretches (threads then split the rows when chunks are few); runs of outputs aim at
 * ~4 chunks per thread. */
static inline void plan_chunks(red_plan *pl, int nthreads, int64_t cap) {
  if (pl->stream) {
    int64_t len = pl->ks[pl->k0];
    pl->blk = len < cap ? len : cap;
    pl->nblk = (len + pl->blk - 1) / pl->blk;
    pl->nchunks = pl->nout / len * pl->nblk;
  } else {
    int64_t want = nthreads > 1 ? 4 * (int64_t)nthreads : 1;
    int64_t blk = (pl->nout + want - 1) / want;
    pl->blk = blk > cap ? cap : blk < 1 ? 1 : blk;
    pl->nchunks = (pl->nout + pl->blk - 1) / pl->blk;
  }
}

/* Input and output offsets of the kept multi-index of flat index q over the kept dims, skipping
 * dim `skip` (-1: none). */
static inline void kept_offsets(const red_plan *pl, int64_t q, int skip, int64_t *in_off,
                                int64_t *out_off) {
  int64_t xi = 0, oi = 0;
  for (int d = pl->nk - 1; d >= 0; d--) {
    if (d == skip) continue;
    int64_t i = q % pl->ks[d];
    q /= pl->ks[d];
    xi += i * pl->kx[d], oi += i * pl->ko[d];
  }
  *in_off = xi, *out_off = oi;
}

static inline void chunk_get(const red_plan *pl, int64_t i, red_chunk *c) {
  if (pl->stream) {
    int64_t q = i / pl->nblk, j0 = (i % pl->nblk) * pl->blk, len = pl->ks[pl->k0];
    kept_offsets(pl, q, pl->k0, &c->in_off, &c->out_off);
    c->in_off += j0 * pl->kx[pl->k0];
    c->out_off += j0 * pl->ko[pl->k0];
    c->os = pl->ko[pl->k0];
    c->n = len - j0 < pl->blk ? len - j0 : pl->blk;
    c->first = -1;
  } else {
    c->first = i * pl->blk;
    c->n = pl->nout - c->first < pl->blk ? pl->nout - c->first : pl->blk;
    kept_offsets(pl, c->first, -1, &c->in_off, &c->out_off);
    c->os = 1;
  }
}

/* Multi-index over a group of dims from a flat index; returns the byte offset. */
static inline int64_t group_seek(int n, const int64_t *s, const int64_t *x, int64_t flat,
                                 int64_t *id) {
  if (flat == 0) { /* the common case: no divisions */
    memset(id, 0, (size_t)n * sizeof *id);
    return 0;
  }
  int64_t off = 0;
  for (int d = n - 1; d >= 0; d--) {
    id[d] = flat % s[d];
    flat /= s[d];
    off += id[d] * x[d];
  }
  return off;
}

/* Steps a multi-index whose last dim just reached its end; returns the offset change. */
static inline int64_t group_carry(int n, const int64_t *s, const int64_t *x, int64_t *id) {
  int64_t delta = 0;
  for (int d = n - 1; d > 0 && id[d] == s[d]; d--) {
    delta += x[d - 1] - id[d] * x[d];
    id[d] = 0;
    id[d - 1]++;
  }
  return delta;
}

#endif
