/* arrange_geom.h — how flip, roll and pad (kind ARRANGE, engine/ops/arrange.c) map each element of
 * their output to one of their input, dim by dim: along dim d, output index i reads input index
 * dle_arrange_src(g, d, i), or nothing (-1: pad's constant fill). The front door sizes the output
 * with it; the kernels (kernels/cpu/arrange.c, kernels/cuda/arrange.cu) read the input through its
 * strides with it, so every op is one copy of any dtype (elements are moved as bytes).
 *
 * attrs: flip: ints[0] a bit mask of the flipped dims (0-based); roll: ints[d] the shift of dim d,
 * one per dim, in [0, size); pad: ints[0] the mode (dle_pad_mode), ints[1..2k] the pads of the last
 * k dims in PyTorch's order (last dim first: left, right, then the dim before...), f[0] the value. */
#ifndef DLE_ARRANGE_GEOM_H
#define DLE_ARRANGE_GEOM_H

#include "../dle.h"
#include "device_inline.h"

enum { DLE_ARRANGE_KEEP, DLE_ARRANGE_FLIP, DLE_ARRANGE_ROLL, DLE_ARRANGE_PAD };
#define DLE_PAD_MAX_DIMS 4 /* trailing dims one pad call pads (ints: mode + 2 per dim) */

typedef struct {
  int ndim, mode;                  /* mode: pad's dle_pad_mode */
  int64_t in[DLE_MAX_DIMS];        /* input sizes */
  int64_t out[DLE_MAX_DIMS];       /* output sizes */
  int64_t shift[DLE_MAX_DIMS];     /* roll: the shift; pad: the left pad (negative crops) */
  unsigned char how[DLE_MAX_DIMS]; /* DLE_ARRANGE_* */
} dle_arrange_geom;

/* The geometry of op on an input of ndim dims and the given sizes (attrs already checked by the
 * front door). */
static inline void dle_arrange_geom_of(dle_arrange_geom *g, dle_op op, const dle_attrs *a, int ndim,
                                       const int64_t *sizes) {
  g->ndim = ndim;
  g->mode = op == DLE_OP_PAD ? (int)a->ints[0] : 0;
  for (int d = 0; d < ndim; d++) {
    g->in[d] = g->out[d] = sizes[d];
    g->shift[d] = 0;
    g->how[d] = DLE_ARRANGE_KEEP;
    if (op == DLE_OP_FLIP && (a->ints[0] >> d & 1)) g->how[d] = DLE_ARRANGE_FLIP;
    if (op == DLE_OP_ROLL && a->ints[d] != 0)
      g->how[d] = DLE_ARRANGE_ROLL, g->shift[d] = a->ints[d];
  }
  if (op != DLE_OP_PAD) return;
  for (int k = 0; 2 * k + 2 < a->nints + 1 && k < ndim; k++) {
    int d = ndim - 1 - k;
    int64_t lo = a->ints[1 + 2 * k], hi = a->ints[2 + 2 * k];
    if (lo == 0 && hi == 0) continue;
    g->how[d] = DLE_ARRANGE_PAD;
    g->shift[d] = lo;
    g->out[d] = sizes[d] + lo + hi;
  }
}

/* The input index that output index i along dim d reads; -1 for pad's constant fill. */
static inline DLE_HD int64_t dle_arrange_src(const dle_arrange_geom *g, int d, int64_t i) {
  int64_t n = g->in[d], j;
  switch (g->how[d]) {
    case DLE_ARRANGE_FLIP: return n - 1 - i;
    case DLE_ARRANGE_ROLL: j = i - g->shift[d]; return j < 0 ? j + n : j;
    case DLE_ARRANGE_PAD:
      j = i - g->shift[d];
      if (j >= 0 && j < n) return j;
      switch (g->mode) {
        case DLE_PAD_REFLECT: return j < 0 ? -j : 2 * (n - 1) - j;
        case DLE_PAD_REPLICATE: return j < 0 ? 0 : n - 1;
        case DLE_PAD_CIRCULAR: return j < 0 ? j + n : j - n;
        default: return -1;
      }
    default: return i;
  }
}

#endif
