/* norm_geom.h — how the normalization ops (kind NORM) see their input x: a contiguous block
 * {P, Q, S}, with one set of statistics per q taken over p and s.
 *   layer_norm  {1, rows, D}: D = the product of the ints[0] trailing dims; weight indexed by s.
 *   batch_norm  {N, C, S}:    S = the product of the dims after the channel; weight indexed by q.
 *   group_norm  {1, N * G, C / G * HW} for G = ints[0] groups, HW the product of the dims after
 *               the channel: weight indexed by channel, (q % G) * C / G + s / HW (g.hw = HW).
 * Shared by the shape rules (ops/norm.c), the gradient rules (ops/norm_grad.c) and the kernels
 * (CPU and CUDA: header-only, it calls no engine function). */
#ifndef DLE_NORM_GEOM_H
#define DLE_NORM_GEOM_H

#include "../dle.h"

typedef struct {
  int64_t p, q, s;
  bool weight_on_q; /* batch_norm: one weight per statistic; layer_norm: one per element of a row */
  int64_t groups, hw; /* group_norm (groups > 0): one weight per run of hw elements of a row */
} dle_norm_geom;

static inline bool dle_norm_is_group(dle_op op) {
  return op == DLE_OP_GROUP_NORM || op == DLE_OP_GROUP_NORM_GRAD_INPUT ||
         op == DLE_OP_GROUP_NORM_GRAD_AFFINE;
}

static inline bool dle_norm_is_layer(dle_op op) {
  return op == DLE_OP_LAYER_NORM || op == DLE_OP_LAYER_NORM_GRAD_INPUT ||
         op == DLE_OP_LAYER_NORM_GRAD_AFFINE;
}

/* The geometry of x for op (attrs.ints[0] = normalized dims for the layer_norm ops); x's shape
 * must have passed the op's shape rule. */
static inline dle_norm_geom dle_norm_geom_of(dle_op op, const dle_tensor *x, const dle_attrs *a) {
  dle_norm_geom g = {1, 1, 1, false, 0, 1};
  if (dle_norm_is_group(op)) {
    g.groups = a->ints[0];
    for (int d = 2; d < x->ndim; d++) g.hw *= x->sizes[d];
    g.q = x->sizes[0] * g.groups;
    g.s = x->sizes[1] / g.groups * g.hw;
  } else if (dle_norm_is_layer(op)) {
    int lead = x->ndim - (int)a->ints[0];
    for (int d = 0; d < x->ndim; d++) *(d < lead ? &g.q : &g.s) *= x->sizes[d];
  } else {
    g.p = x->sizes[0], g.q = x->sizes[1], g.weight_on_q = true;
    for (int d = 2; d < x->ndim; d++) g.s *= x->sizes[d];
  }
  return g;
}

/* Which inputs of a NORM op are its weight, bias and running statistics (NULL: absent), by the
 * layout of ops.def: forward ops x[, w][, b][, rmean, rvar]; gradient ops gy, x, stats[, w]. */
static inline void dle_norm_param_inputs(dle_op op, dle_tensor *const *ins, int nin,
                                         const dle_attrs *a, dle_tensor **w, dle_tensor **b,
                                         dle_tensor **rmean, dle_tensor **rvar) {
  *w = *b = *rmean = *rvar = NULL;
  if (op == DLE_OP_LAYER_NORM || op == DLE_OP_BATCH_NORM || op == DLE_OP_GROUP_NORM) {
    int i = 1;
    if (a->ints[1]) *w = ins[i++];
    if (a->ints[2]) *b = ins[i++];
    if (op == DLE_OP_BATCH_NORM && !a->ints[0]) *rmean = ins[i++], *rvar = ins[i++];
  } else if (nin > 3) {
    *w = ins[3];
  }
}

/* The dtype statistics are kept in for a computation in dt: the kernels' accumulation type. */
static inline dle_dtype dle_norm_stats_dtype(dle_dtype dt) {
  return dt == DLE_F64 ? DLE_F64 : DLE_F32;
}

#endif
