/* scan_geom.h — how the scan ops (cumsum, cumprod, cummax, cummin, logcumsumexp) see their input:
 * a block {outer, n, inner} with one element stride each, n the scanned dim. The front door
 * (engine/ops/scan.c) makes the input contiguous only when its dims before or after the scanned
 * one do not merge into one stride; the kernels (kernels/cpu/scan.c, kernels/cuda/scan.cu) read
 * it through these strides and write a contiguous {outer, n, inner} output. */
#ifndef DLE_SCAN_GEOM_H
#define DLE_SCAN_GEOM_H

#include "../dle.h"

typedef struct {
  int64_t outer, n, inner; /* sizes */
  int64_t so, sn, si;      /* the input's element strides over them */
} dle_scan_geom;

/* Merges dims [lo, hi) of t into one (size *size, stride *stride); false when their strides do
 * not allow it. Size-1 dims never matter. */
static inline bool dle_scan_merge(const dle_tensor *t, int lo, int hi, int64_t *size,
                                  int64_t *stride) {
  int64_t n = 1, s = 0;
  bool seen = false;
  for (int d = hi - 1; d >= lo; d--) {
    if (t->sizes[d] == 1) continue;
    if (seen && t->strides[d] != s * n) return false;
    if (!seen) s = t->strides[d], seen = true;
    n *= t->sizes[d];
  }
  for (int d = lo; d < hi; d++)
    if (t->sizes[d] == 0) n = 0;
  *size = n, *stride = seen ? s : 1;
  return true;
}

/* The block of t scanned along dim d (a 0-dim t is one element); false when t needs a copy. */
static inline bool dle_scan_geom_of(const dle_tensor *t, int d, dle_scan_geom *g) {
  if (t->ndim == 0) {
    *g = (dle_scan_geom){1, 1, 1, 1, 1, 1};
    return true;
  }
  g->n = t->sizes[d], g->sn = t->strides[d];
  return dle_scan_merge(t, 0, d, &g->outer, &g->so) &&
         dle_scan_merge(t, d + 1, t->ndim, &g->inner, &g->si);
}

#endif
