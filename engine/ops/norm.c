/* norm.c — shape and dtype rules and public wrappers of the normalization layers (kind NORM in
 * ops.def): layer_norm, batch_norm, group_norm and their backward ops. Gradient rules: ops/norm_grad.c.
 *
 * x, gy, weight and bias compute in their promoted float dtype (integers in float32); the
 * statistics (stats, running_mean, running_var) in float32, or float64 for float64. The kernels
 * get contiguous inputs in those dtypes and fresh contiguous outputs; a caller's output is filled
 * by a copy afterwards. */
#include "../internal.h"

#include "../kernel/norm_geom.h"

/* What each input of a NORM op is (NULL: absent). */
typedef struct {
  dle_tensor *x, *gy, *stats, *w, *b, *rmean, *rvar;
} norm_args;

static dle_status read_args(dle_op op, dle_tensor *const *ins, int nin, const dle_attrs *a,
                            norm_args *r) {
  const char *fn = dle_op_get_info(op)->name;
  *r = (norm_args){0};
  if (op == DLE_OP_LAYER_NORM || op == DLE_OP_BATCH_NORM || op == DLE_OP_GROUP_NORM) {
    bool eval = op == DLE_OP_BATCH_NORM && !a->ints[0];
    int want = 1 + (a->ints[1] != 0) + (a->ints[2] != 0) + (eval ? 2 : 0), i = 1;
    if (nin != want)
      return dle_error("%s: expected %d tensor inputs (x%s%s%s), got %d", fn, want,
                       a->ints[1] ? ", weight" : "", a->ints[2] ? ", bias" : "",
                       eval ? ", running_mean, running_var" : "", nin);
    r->x = ins[0];
    if (a->ints[1]) r->w = ins[i++];
    if (a->ints[2]) r->b = ins[i++];
    if (eval) r->rmean = ins[i++], r->rvar = ins[i++];
    return DLE_OK;
  }
  bool gin = op == DLE_OP_LAYER_NORM_GRAD_INPUT || op == DLE_OP_BATCH_NORM_GRAD_INPUT ||
             op == DLE_OP_GROUP_NORM_GRAD_INPUT;
  if (nin < 3 || nin > (gin ? 4 : 3))
    return dle_error("%s: expected %s tensor inputs (grad_output, x, stats%s), got %d", fn,
                     gin ? "3 or 4" : "3", gin ? "[, weight]" : "", nin);
  r->gy = ins[0], r->x = ins[1], r->stats = ins[2];
  if (nin > 3) r->w = ins[3];
  return DLE_OK;
}

/* t must have exactly the shape {sizes[0..n)}; `what` names it and `why` says where it comes from. */
static dle_status need_shape(const char *fn, const char *what, const dle_tensor *t, int n,
                             const int64_t *sizes, const char *why, const dle_tensor *x) {
  if (!t || dle_shape_equal(t->ndim, t->sizes, n, sizes)) return DLE_OK;
  char buf[128];
  return dle_error("%s: %s has shape %s, expected %s (%s of input %s)", fn, what, SHAPE(t),
                   dle_shape_str(buf, sizeof buf, n, sizes), why, SHAPE(x));
}

/* Checks every input's shape; gives the shape of the affine parameters ({C} or x's normalized
 * dims) in *pn / psizes and the number of statistics in *q. */
static dle_status check_shapes(dle_op op, const norm_args *r, const dle_attrs *a, int *pn,
                               int64_t *psizes, int64_t *q) {
  const char *fn = dle_op_get_info(op)->name;
  dle_tensor *x = r->x;
  if (dle_norm_is_layer(op)) {
    int k = (int)a->ints[0];
    if (k < 1 || k > x->ndim)
      return dle_error(
          "%s: the normalized shape must cover 1 to %d trailing dims of input %s, got %d dims", fn,
          x->ndim, SHAPE(x), k);
    *pn = k;
    memcpy(psizes, x->sizes + x->ndim - k, sizeof(int64_t) * (size_t)k);
    DLE_TRY(need_shape(fn, "weight", r->w, k, psizes, "the normalized dims", x));
    DLE_TRY(need_shape(fn, "bias", r->b, k, psizes, "the normalized dims", x));
  } else {
    if (x->ndim < 2)
      return dle_error("%s: expected an input of at least 2 dims {N, C, ...}, got %s", fn,
                       SHAPE(x));
    int64_t G = a->ints[0];
    if (dle_norm_is_group(op) && (G < 1 || x->sizes[1] % G != 0))
      return dle_error(
          "%s: num_groups %lld must be positive and divide the %lld channels of input %s", fn,
          (long long)G, (long long)x->sizes[1], SHAPE(x));
    *pn = 1;
    psizes[0] = x->sizes[1];
    DLE_TRY(need_shape(fn, "weight", r->w, 1, psizes, "one per channel", x));
    DLE_TRY(need_shape(fn, "bias", r->b, 1, psizes, "one per channel", x));
    DLE_TRY(need_shape(fn, "running_mean", r->rmean, 1, psizes, "one per channel", x));
    DLE_TRY(need_shape(fn, "running_var", r->rvar, 1, psizes, "one per channel", x));
    if (op == DLE_OP_BATCH_NORM && a->ints[0] &&
        dle_tensor_numel(x) / (x->sizes[1] ? x->sizes[1] : 1) <= 1)
      return dle_error("%s: expected more than 1 value per channel when training, got input %s", fn,
                       SHAPE(x));
  }
  if ((r->rmean && r->rmean->requires_grad) || (r->rvar && r->rvar->requires_grad))
    return dle_error(
        "%s: running_mean and running_var are constants here and must not require grad", fn);
  dle_norm_geom g = dle_norm_geom_of(op, x, a);
  *q = g.q;
  DLE_TRY(need_shape(fn, "grad_output", r->gy, x->ndim, x->sizes, "the shape", x));
  int64_t ss[2] = {g.q, 2};
  DLE_TRY(need_shape(fn, "stats", r->stats, 2, ss, "mean and variance per statistic", x));
  for (dle_tensor *const *t = (dle_tensor *const[]){r->stats, r->rmean, r->rvar}, *const *e = t + 3;
       t < e; t++)
    if (*t && !dle_dtype_is_float((*t)->dtype))
      return dle_error("%s: statistics must be a float tensor, got %s", fn,
                       dle_dtype_name((*t)->dtype));
  if (!(a->f[0] >= 0))
    return dle_error("%s: eps must be a non-negative number, got %g", fn, a->f[0]);
  return DLE_OK;
}

DLE_FORWARD_RULE(norm) {
  norm_args r;
  int pn = 0;
  int64_t psizes[DLE_MAX_DIMS], q = 0;
  DLE_TRY(read_args(op, ins, nin, a, &r));
  DLE_TRY(check_shapes(op, &r, a, &pn, psizes, &q));

  dle_dtype dt = r.x->dtype;
  for (dle_tensor *const *t = (dle_tensor *const[]){r.gy, r.w, r.b}, *const *e = t + 3; t < e; t++)
    if (*t) dt = dle_promote(dt, (*t)->dtype);
  if (!dle_dtype_is_float(dt)) dt = DLE_DEFAULT_FLOAT;
  dle_dtype sdt = dle_norm_stats_dtype(dt);

  /* results: y and stats, or gx, or gw and gb of the parameters' shape */
  dle_result_spec res[2] = {{.dtype = dt}, {.dtype = dt}};
  if (op == DLE_OP_LAYER_NORM_GRAD_AFFINE || op == DLE_OP_BATCH_NORM_GRAD_AFFINE ||
      op == DLE_OP_GROUP_NORM_GRAD_AFFINE) {
    for (int k = 0; k < 2; k++)
      res[k].ndim = pn, memcpy(res[k].sizes, psizes, sizeof(int64_t) * (size_t)pn);
  } else {
    res[0].ndim = r.x->ndim, memcpy(res[0].sizes, r.x->sizes, sizeof(int64_t) * (size_t)r.x->ndim);
    res[1] = (dle_result_spec){.ndim = 2, .sizes = {q, 2}, .dtype = sdt};
  }
  /* the kernels read statistics (stats, running_mean, running_var) in sdt, the rest in dt */
  dle_dtype in_dt[5];
  for (int i = 0; i < nin; i++) in_dt[i] = (r.stats ? i == 2 : r.rmean && i >= nin - 2) ? sdt : dt;
  return dle_dispatch_contiguous(op, outs, res, ins, nin, in_dt, a);
}

/* FLOPs per input element of one straightforward pass. */
enum {
  PER_NORM = 8,             /* mean 1, variance 3, normalize 2, affine 2 */
  PER_NORM_GRAD_INPUT = 10, /* x-hat 2, two row sums 2, the combination 6 */
  PER_NORM_GRAD_AFFINE = 5  /* x-hat 2, gw += gy x-hat 2, gb += gy 1 */
};

dle_flops_rule dle_flops_norm(dle_op op) {
  switch (op) {
    case DLE_OP_LAYER_NORM:
    case DLE_OP_BATCH_NORM:
    case DLE_OP_GROUP_NORM: return dle_flops_per_in(PER_NORM);
    case DLE_OP_LAYER_NORM_GRAD_INPUT:
    case DLE_OP_BATCH_NORM_GRAD_INPUT:
    case DLE_OP_GROUP_NORM_GRAD_INPUT: return dle_flops_per_in(PER_NORM_GRAD_INPUT);
    case DLE_OP_LAYER_NORM_GRAD_AFFINE:
    case DLE_OP_BATCH_NORM_GRAD_AFFINE:
    case DLE_OP_GROUP_NORM_GRAD_AFFINE: return dle_flops_per_in(PER_NORM_GRAD_AFFINE);
    default: return dle_flops_none();
  }
}

/* ---- public wrappers ---- */

static dle_attrs norm_attrs(int64_t i0, bool has_w, bool has_b, double eps) {
  dle_attrs a = {0};
  a.ints[0] = i0, a.ints[1] = has_w, a.ints[2] = has_b, a.nints = 3;
  a.f[0] = eps;
  return a;
}

/* Calls op with the non-NULL tensors of ins in order; its two outputs go to o0 and o1 (o1 may be
 * NULL for one-output ops). */
static dle_status call_norm(dle_op op, dle_tensor **o0, dle_tensor **o1, dle_tensor *const *ins,
                            int n, const dle_attrs *a) {
  dle_tensor *given[5];
  int nin = 0;
  for (int i = 0; i < n; i++)
    if (ins[i]) given[nin++] = ins[i];
  dle_tensor *outs[2] = {*o0, o1 ? *o1 : NULL};
  DLE_TRY(dle_op_call(op, outs, given, nin, a));
  *o0 = outs[0];
  if (o1)
    *o1 = outs[1];
  else
    dle_tensor_release(outs[1]); /* NULL for one-output ops */
  return DLE_OK;
}

/* The forward of layer and group norm: y and stats from (x[, w][, b]); i0 is k or groups. */
static dle_status norm_forward(dle_op op, dle_tensor **y, dle_tensor **stats, dle_tensor *x,
                               int64_t i0, dle_tensor *w, dle_tensor *b, double eps) {
  dle_attrs a = norm_attrs(i0, w != NULL, b != NULL, eps);
  return call_norm(op, y, stats, (dle_tensor *[]){x, w, b}, 3, &a);
}

/* The two backward halves of each norm: gx from (gy, x, stats[, w]), and (gw, gb) from
 * (gy, x, stats); i0 is the op's first int attr (k, 1 or groups). */
static dle_status norm_grad_input(dle_op op, dle_tensor **gx, dle_tensor *gy, dle_tensor *x,
                                  dle_tensor *stats, dle_tensor *w, int64_t i0, double eps) {
  dle_attrs a = norm_attrs(i0, w != NULL, false, eps);
  if (!gy || !x || !stats)
    return dle_error("%s: grad_output, x and stats are required", dle_op_get_info(op)->name);
  return call_norm(op, gx, NULL, (dle_tensor *[]){gy, x, stats, w}, 4, &a);
}

static dle_status norm_grad_affine(dle_op op, dle_tensor **gw, dle_tensor **gb, dle_tensor *gy,
                                   dle_tensor *x, dle_tensor *stats, int64_t i0, double eps) {
  dle_attrs a = norm_attrs(i0, false, false, eps);
  if (!gy || !x || !stats)
    return dle_error("%s: grad_output, x and stats are required", dle_op_get_info(op)->name);
  return call_norm(op, gw, gb, (dle_tensor *[]){gy, x, stats}, 3, &a);
}

dle_status dle_layer_norm(dle_tensor **y, dle_tensor **stats, dle_tensor *x, int k, dle_tensor *w,
                          dle_tensor *b, double eps) {
  return norm_forward(DLE_OP_LAYER_NORM, y, stats, x, k, w, b, eps);
}

dle_status dle_layer_norm_grad_input(dle_tensor **gx, dle_tensor *gy, dle_tensor *x,
                                     dle_tensor *stats, dle_tensor *w, int k, double eps) {
  return norm_grad_input(DLE_OP_LAYER_NORM_GRAD_INPUT, gx, gy, x, stats, w, k, eps);
}

dle_status dle_layer_norm_grad_affine(dle_tensor **gw, dle_tensor **gb, dle_tensor *gy,
                                      dle_tensor *x, dle_tensor *stats, int k, double eps) {
  return norm_grad_affine(DLE_OP_LAYER_NORM_GRAD_AFFINE, gw, gb, gy, x, stats, k, eps);
}

dle_status dle_batch_norm(dle_tensor **y, dle_tensor **stats, dle_tensor *x, dle_tensor *w,
                          dle_tensor *b, dle_tensor *running_mean, dle_tensor *running_var,
                          bool training, double eps) {
  if (!training && (!running_mean || !running_var))
    return dle_error("batch_norm: running_mean and running_var are required when not training");
  dle_attrs a = norm_attrs(training, w != NULL, b != NULL, eps);
  dle_tensor *ins[5] = {x, w, b, training ? NULL : running_mean, training ? NULL : running_var};
  return call_norm(DLE_OP_BATCH_NORM, y, stats, ins, 5, &a);
}

dle_status dle_batch_norm_grad_input(dle_tensor **gx, dle_tensor *gy, dle_tensor *x,
                                     dle_tensor *stats, dle_tensor *w, double eps) {
  return norm_grad_input(DLE_OP_BATCH_NORM_GRAD_INPUT, gx, gy, x, stats, w, 1, eps);
}

dle_status dle_batch_norm_grad_affine(dle_tensor **gw, dle_tensor **gb, dle_tensor *gy,
                                      dle_tensor *x, dle_tensor *stats, double eps) {
  return norm_grad_affine(DLE_OP_BATCH_NORM_GRAD_AFFINE, gw, gb, gy, x, stats, 1, eps);
}

dle_status dle_group_norm(dle_tensor **y, dle_tensor **stats, dle_tensor *x, int64_t groups,
                          dle_tensor *w, dle_tensor *b, double eps) {
  return norm_forward(DLE_OP_GROUP_NORM, y, stats, x, groups, w, b, eps);
}

dle_status dle_group_norm_grad_input(dle_tensor **gx, dle_tensor *gy, dle_tensor *x,
                                     dle_tensor *stats, dle_tensor *w, int64_t groups, double eps) {
  return norm_grad_input(DLE_OP_GROUP_NORM_GRAD_INPUT, gx, gy, x, stats, w, groups, eps);
}

dle_status dle_group_norm_grad_affine(dle_tensor **gw, dle_tensor **gb, dle_tensor *gy,
                                      dle_tensor *x, dle_tensor *stats, int64_t groups,
                                      double eps) {
  return norm_grad_affine(DLE_OP_GROUP_NORM_GRAD_AFFINE, gw, gb, gy, x, stats, groups, eps);
}
