/* spatial.h — what convolution (conv.c, conv_grad.c) and pooling (pool.c, pool_grad.c) over
 * {N, C, H, W} share: shape checks, the bounds of the geometry, the dispatch of a checked call and
 * the attrs-copying call the gradient rules make. */
#ifndef DLE_OPS_SPATIAL_H
#define DLE_OPS_SPATIAL_H

#include "../internal.h"

#include <string.h>

static inline dle_status need_4d(const char *fn, const char *what, const dle_tensor *t) {
  if (t->ndim == 4) return DLE_OK;
  return dle_error("%s: %s must be 4-D {%s}, got shape %s", fn, what,
                   what[0] == 'w' ? "O, C/groups, kh, kw" : "N, C, H, W", SHAPE(t));
}

/* Bounds of the geometry (kernel, stride, padding, dilation, groups; the sizes the grad ops are
 * given): far beyond any real network, and small enough that the shape arithmetic cannot
 * overflow int64 with tensor sizes (at most 2^59 elements). */
#define GEOM_MAX      ((int64_t)1 << 31)
#define SIZE_MAX_GEOM ((int64_t)1 << 40)

/* The attrs of a conv or pooling call: three {h, w} pairs, then one more int (conv: stride,
 * padding, dilation, groups; pooling: kernel, stride, padding, count_include_pad). */
static inline dle_attrs spatial_attrs(const int64_t *p0, const int64_t *p1, const int64_t *p2,
                                      int64_t last) {
  dle_attrs a = {0};
  a.ints[0] = p0[0], a.ints[1] = p0[1];
  a.ints[2] = p1[0], a.ints[3] = p1[1];
  a.ints[4] = p2[0], a.ints[5] = p2[1];
  a.ints[6] = last;
  a.nints = 7;
  return a;
}

/* An {h, w} pair of the geometry, v[0] and v[1], must be at least lo (1: "positive", 0:
 * "non-negative"). */
static inline dle_status check_pair_at_least(const char *fn, const char *what, const int64_t *v,
                                             int64_t lo) {
  if (v[0] >= lo && v[1] >= lo) return DLE_OK;
  return dle_error("%s: %s must be %s, got {%lld, %lld}", fn, what,
                   lo > 0 ? "positive" : "non-negative", (long long)v[0], (long long)v[1]);
}

/* attrs.ints[first + i] named names[i / 2] (h and w pairs; groups alone) must be at most max. */
static inline dle_status check_bounded(const char *fn, const dle_attrs *a, int first, int count,
                                       int64_t max, const char *const *names) {
  for (int i = 0; i < count; i++)
    if (a->ints[first + i] > max)
      return dle_error("%s: %s %lld is larger than the supported %lld", fn, names[i / 2],
                       (long long)a->ints[first + i], (long long)max);
  return DLE_OK;
}

/* Runs a checked call whose first result is {sizes} (a second one, max_pool2d's argmax, int64 of
 * the same shape): inputs promoted to one float dtype (integers compute in the default float). */
static inline dle_status dle_spatial_dispatch(dle_op op, dle_tensor **outs, dle_tensor *const *ins,
                                              int nin, const dle_attrs *a, const int64_t *sizes) {
  dle_dtype dt = ins[0]->dtype;
  for (int i = 1; i < nin; i++) dt = dle_promote(dt, ins[i]->dtype);
  if (!dle_dtype_is_float(dt)) dt = DLE_DEFAULT_FLOAT;
  dle_result_spec res[2] = {{.ndim = 4, .dtype = dt},
                            {.ndim = 4, .dtype = DLE_I64}}; /* values, indices */
  memcpy(res[0].sizes, sizes, 4 * sizeof *sizes);
  memcpy(res[1].sizes, sizes, 4 * sizeof *sizes);
  dle_dtype in_dt[3] = {dt, dt, dt};
  return dle_dispatch_contiguous(op, outs, res, ins, nin, in_dt, a);
}

/* A gradient rule's call of op on a0 (and a1) with a copy of the node's attrs, changing only
 * ints[7..8] (the spatial size a gradient op produces), so strides, padding, dilation and groups
 * carry over. */
static inline dle_status dle_spatial_call(dle_op op, dle_tensor **out, dle_tensor *a0,
                                          dle_tensor *a1, const dle_attrs *base, int64_t s7,
                                          int64_t s8) {
  dle_attrs a = *base;
  a.ints[7] = s7, a.ints[8] = s8;
  a.nints = op == DLE_OP_CONV2D || op == DLE_OP_AVG_POOL2D || op == DLE_OP_MAX_POOL2D ? 7 : 9;
  dle_tensor *ins[2] = {a0, a1};
  *out = NULL;
  return dle_op_call(op, out, ins, a1 ? 2 : 1, &a);
}

#endif
