/* losses.c — shape rules and public wrappers of the losses (kind LOSS in ops.def): cross_entropy,
 * mse_loss, nll_loss, binary_cross_entropy_with_logits and soft_cross_entropy, each with its
 * backward op. Gradient rules are in losses_grad.c.
 *
 * As for the other nn ops (nn_front.h), kernels get contiguous inputs in the compute dtype
 * (float64 stays, others compute in float32), int64 class targets, and fresh contiguous outputs.
 * attrs.ints[0] is the reduction everywhere. */
#include "../internal.h"
#include "nn_front.h"

static dle_status check_reduction(const char *fn, const dle_attrs *a) {
  if (a->ints[0] >= DLE_REDUCTION_NONE && a->ints[0] <= DLE_REDUCTION_SUM) return DLE_OK;
  return dle_error("%s: reduction must be none, mean or sum (0..2), got %lld", fn,
                   (long long)a->ints[0]);
}

static bool reduced(const dle_attrs *a) { return a->ints[0] != DLE_REDUCTION_NONE; }

/* The loss has shape {ndim, sizes} (reduction none) or is a scalar. */
static void set_loss_shape(out_shapes *o, int k, const dle_attrs *a, int ndim,
                           const int64_t *sizes) {
  set_shape(o, k, reduced(a) ? 0 : ndim, sizes);
}

/* gy must have the loss's shape: {ndim, sizes} for reduction none, else a scalar. */
static dle_status check_grad_output(const char *fn, const dle_attrs *a, const dle_tensor *gy,
                                    int ndim, const int64_t *sizes) {
  DLE_TRY(need_numeric(fn, "grad_output", gy));
  bool none = !reduced(a);
  if (none ? dle_shape_equal(gy->ndim, gy->sizes, ndim, sizes) : gy->ndim == 0) return DLE_OK;
  char buf[128];
  return dle_error("%s: grad_output must have shape %s (the loss's), got %s", fn,
                   none ? dle_shape_str(buf, sizeof buf, ndim, sizes) : "{} (a scalar)", SHAPE(gy));
}

/* input and target: numeric, of one shape. */
static dle_status check_pair(const char *fn, const dle_tensor *x, const dle_tensor *y) {
  DLE_TRY(need_numeric(fn, "input", x));
  DLE_TRY(need_numeric(fn, "target", y));
  if (dle_shape_equal(x->ndim, x->sizes, y->ndim, y->sizes)) return DLE_OK;
  return dle_error("%s: input has shape %s but target has shape %s", fn, SHAPE(x), SHAPE(y));
}

/* The float dtype the results have, from the float inputs ins[first..n). */
static dle_dtype result_of(dle_tensor *const *ins, int first, int n) {
  dle_dtype dt = ins[first]->dtype;
  for (int i = first + 1; i < n; i++) dt = dle_promote(dt, ins[i]->dtype);
  return result_dtype(dt);
}

/* ---- mse ---- */

/* mse_loss(x, y) or mse_loss_backward(gy, x, y) */
static dle_status forward_mse(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                              const dle_attrs *a) {
  const char *fn = op_name(op);
  int k = nin - 2; /* where x is */
  dle_tensor *x = ins[k], *y = ins[k + 1];
  DLE_TRY(check_reduction(fn, a));
  DLE_TRY(check_pair(fn, x, y));
  out_shapes o = {.nout = 1};
  if (op == DLE_OP_MSE_LOSS) {
    set_loss_shape(&o, 0, a, x->ndim, x->sizes);
  } else {
    DLE_TRY(check_grad_output(fn, a, ins[0], x->ndim, x->sizes));
    set_shape(&o, 0, x->ndim, x->sizes);
  }
  dle_dtype rdt = result_of(ins, 0, nin), cdt = compute_dtype(rdt);
  dle_tensor *cin[3];
  for (int i = 0; i < nin; i++) prepare(&cin[i], ins[i], cdt);
  return run(op, outs, &o, cin, nin, a, cdt, rdt, dle_tensor_device(x));
}

/* ---- nll ---- */

static dle_status forward_nll(dle_op op, dle_tensor **outs, dle_tensor *const *ins,
                              const dle_attrs *a) {
  const char *fn = op_name(op);
  dle_tensor *x = ins[0], *t = ins[1];
  DLE_TRY(check_ce_attrs(fn, a));
  DLE_TRY(check_rows_targets(fn, "input", x, t));
  out_shapes o = {.nout = 1};
  set_loss_shape(&o, 0, a, 1, x->sizes);
  return run_with_index(op, outs, &o, x, t, a);
}

/* gy, targets -> {N, C} with C = ints[3] */
static dle_status forward_nll_backward(dle_op op, dle_tensor **outs, dle_tensor *const *ins,
                                       const dle_attrs *a) {
  const char *fn = op_name(op);
  dle_tensor *gy = ins[0], *t = ins[1];
  DLE_TRY(check_ce_attrs(fn, a));
  DLE_TRY(need_indices(fn, "targets", t));
  if (t->ndim != 1) return dle_error("%s: targets must be 1-D {N}, got shape %s", fn, SHAPE(t));
  if (a->ints[3] < 1)
    return dle_error("%s: the number of classes must be >= 1, got %lld", fn, (long long)a->ints[3]);
  DLE_TRY(check_grad_output(fn, a, gy, 1, t->sizes));
  out_shapes o = {.nout = 1};
  int64_t s[2] = {t->sizes[0], a->ints[3]};
  set_shape(&o, 0, 2, s);
  return run_with_index(op, outs, &o, gy, t, a);
}

/* ---- binary cross-entropy with logits ---- */

/* pos_weight w for x: it must broadcast to x's shape. The kernel reads it cyclically (element i
 * of x uses w[i % numel(w)]), which is right when w without its leading 1s is x's trailing dims
 * (a weight per class: {C} for x {..., C}); any other broadcast is expanded here. */
static dle_status prepare_pos_weight(const char *fn, dle_tensor **out, dle_tensor *w,
                                     const dle_tensor *x, dle_dtype dt) {
  *out = NULL;
  DLE_TRY(need_numeric(fn, "pos_weight", w));
  int nb;
  int64_t bs[DLE_MAX_DIMS];
  if (dle_broadcast_shapes(fn, w->ndim, w->sizes, x->ndim, x->sizes, &nb, bs) != DLE_OK ||
      !dle_shape_equal(nb, bs, x->ndim, x->sizes))
    return dle_error("%s: pos_weight of shape %s does not broadcast to the input's shape %s", fn,
                     SHAPE(w), SHAPE(x));
  int lead = 0;
  while (lead < w->ndim && w->sizes[lead] == 1) lead++;
  int rest = w->ndim - lead;
  if (dle_shape_equal(rest, w->sizes + lead, rest, x->sizes + x->ndim - rest))
    return prepare(out, w, dt);
  dle_tensor *e = NULL;
  DLE_TRY(dle_expand(&e, w, x->ndim, x->sizes));
  dle_status st = prepare(out, e, dt);
  dle_tensor_release(e);
  return st;
}

/* bce(x, y[, w]) or bce_backward(gy, x, y[, w]) */
static dle_status forward_bce(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                              const dle_attrs *a) {
  const char *fn = op_name(op);
  int k = op == DLE_OP_BCE_WITH_LOGITS ? 0 : 1; /* where x is */
  if (nin < k + 2 || nin > k + 3)
    return dle_error("%s: expected %d or %d tensor inputs (%sinput, target[, pos_weight]), got %d",
                     fn, k + 2, k + 3, k ? "grad_output, " : "", nin);
  dle_tensor *x = ins[k], *y = ins[k + 1];
  DLE_TRY(check_reduction(fn, a));
  DLE_TRY(check_pair(fn, x, y));
  out_shapes o = {.nout = 1};
  if (k == 0) {
    set_loss_shape(&o, 0, a, x->ndim, x->sizes);
  } else {
    DLE_TRY(check_grad_output(fn, a, ins[0], x->ndim, x->sizes));
    set_shape(&o, 0, x->ndim, x->sizes);
  }
  dle_dtype rdt = result_of(ins, 0, nin), cdt = compute_dtype(rdt);
  dle_tensor *cin[4] = {NULL, NULL, NULL, NULL};
  for (int i = 0; i < k + 2; i++) prepare(&cin[i], ins[i], cdt);
  dle_status st = nin > k + 2 ? prepare_pos_weight(fn, &cin[k + 2], ins[k + 2], x, cdt) : DLE_OK;
  if (st != DLE_OK) {
    for (int i = 0; i < nin; i++) dle_tensor_release(cin[i]);
    return st;
  }
  return run(op, outs, &o, cin, nin, a, cdt, rdt, dle_tensor_device(x));
}

/* ---- softmax cross-entropy: logits {N, C} against class indices (cross_entropy, int64 targets
 * {N}) or class probabilities (soft_cross_entropy, float targets of the logits' shape) ---- */

static dle_status check_soft_targets(const char *fn, const dle_tensor *x, const dle_tensor *t) {
  DLE_TRY(need_numeric(fn, "logits", x));
  DLE_TRY(need_numeric(fn, "targets", t));
  if (x->ndim != 2) return dle_error("%s: logits must be 2-D {N, C}, got shape %s", fn, SHAPE(x));
  if (!dle_shape_equal(x->ndim, x->sizes, t->ndim, t->sizes))
    return dle_error("%s: probability targets must have the logits' shape %s, got %s", fn, SHAPE(x),
                     SHAPE(t));
  if (x->sizes[1] < 1 && x->sizes[0] > 0)
    return dle_error("%s: logits %s have no classes", fn, SHAPE(x));
  return DLE_OK;
}

static dle_status check_ce_inputs(const char *fn, const dle_attrs *a, const dle_tensor *x,
                                  const dle_tensor *t, bool soft) {
  DLE_TRY(check_ce_attrs(fn, a));
  return soft ? check_soft_targets(fn, x, t) : check_rows_targets(fn, "logits", x, t);
}

/* logits, targets -> loss, lse {N} */
static dle_status forward_ce(dle_op op, dle_tensor **outs, dle_tensor *const *ins,
                             const dle_attrs *a) {
  const char *fn = op_name(op);
  bool soft = op == DLE_OP_SOFT_CROSS_ENTROPY;
  dle_tensor *x = ins[0], *t = ins[1];
  DLE_TRY(check_ce_inputs(fn, a, x, t, soft));
  out_shapes o = {.nout = 2};
  set_loss_shape(&o, 0, a, 1, x->sizes);
  set_shape(&o, 1, 1, x->sizes);
  dle_dtype rdt = result_of(ins, 0, soft ? 2 : 1), cdt = compute_dtype(rdt);
  dle_tensor *cin[2];
  prepare(&cin[0], x, cdt), prepare(&cin[1], t, soft ? cdt : DLE_I64);
  return run(op, outs, &o, cin, 2, a, cdt, rdt, dle_tensor_device(x));
}

/* gy, logits, targets, lse -> {N, C} */
static dle_status forward_ce_backward(dle_op op, dle_tensor **outs, dle_tensor *const *ins,
                                      const dle_attrs *a) {
  const char *fn = op_name(op);
  bool soft = op == DLE_OP_SOFT_CROSS_ENTROPY_BACKWARD;
  dle_tensor *gy = ins[0], *x = ins[1], *t = ins[2], *lse = ins[3];
  DLE_TRY(check_ce_inputs(fn, a, x, t, soft));
  DLE_TRY(check_grad_output(fn, a, gy, 1, x->sizes));
  DLE_TRY(need_numeric(fn, "lse", lse));
  if (lse->ndim != 1 || lse->sizes[0] != x->sizes[0])
    return dle_error("%s: lse must have shape {%lld}, got %s", fn, (long long)x->sizes[0],
                     SHAPE(lse));
  out_shapes o = {.nout = 1};
  set_shape(&o, 0, 2, x->sizes);
  /* the class indices' dtype is not a float to promote with */
  dle_dtype rdt = soft ? result_of(ins, 0, 4) : result_of(ins, 1, 2), cdt = compute_dtype(rdt);
  dle_tensor *cin[4];
  for (int i = 0; i < 4; i++) prepare(&cin[i], ins[i], i == 2 && !soft ? DLE_I64 : cdt);
  return run(op, outs, &o, cin, 4, a, cdt, rdt, dle_tensor_device(x));
}

DLE_FORWARD_RULE(losses) {
  switch (op) {
    case DLE_OP_MSE_LOSS:
    case DLE_OP_MSE_LOSS_BACKWARD: return forward_mse(op, outs, ins, nin, a);
    case DLE_OP_NLL_LOSS: return forward_nll(op, outs, ins, a);
    case DLE_OP_NLL_LOSS_BACKWARD: return forward_nll_backward(op, outs, ins, a);
    case DLE_OP_BCE_WITH_LOGITS:
    case DLE_OP_BCE_WITH_LOGITS_BACKWARD: return forward_bce(op, outs, ins, nin, a);
    case DLE_OP_CROSS_ENTROPY:
    case DLE_OP_SOFT_CROSS_ENTROPY: return forward_ce(op, outs, ins, a);
    case DLE_OP_CROSS_ENTROPY_BACKWARD:
    case DLE_OP_SOFT_CROSS_ENTROPY_BACKWARD: return forward_ce_backward(op, outs, ins, a);
    default: return dle_error("%s: not a loss op", op_name(op));
  }
}

/* FLOPs per element of one straightforward pass: the forward ops per input element, the
 * backward ops per output element. */
enum {
  PER_CROSS_ENTROPY = 5,      /* log-sum-exp as softmax; picking the target is per row */
  PER_CROSS_ENTROPY_GRAD = 4, /* exp(x - lse), minus the smoothed one-hot, times gy */
  PER_SOFT_CROSS_ENTROPY = 8, /* log-sum-exp 5, q = (1 - eps) t + eps/C and q (x - lse) 3 */
  PER_SOFT_CROSS_ENTROPY_GRAD = 8,
  PER_MSE = 3, /* subtract, square, sum (backward: subtract, scale, times gy) */
  PER_NLL = 1, /* the smoothing term sums every logp */
  PER_BCE = 6  /* softplus(-x) = log1p(exp(-x)) 3, the weighted sum 3 */
};

dle_flops_rule dle_flops_losses(dle_op op) {
  switch (op) {
    case DLE_OP_CROSS_ENTROPY: return dle_flops_per_in(PER_CROSS_ENTROPY);
    case DLE_OP_CROSS_ENTROPY_BACKWARD: return dle_flops_per_out(PER_CROSS_ENTROPY_GRAD);
    case DLE_OP_SOFT_CROSS_ENTROPY: return dle_flops_per_in(PER_SOFT_CROSS_ENTROPY);
    case DLE_OP_SOFT_CROSS_ENTROPY_BACKWARD: return dle_flops_per_out(PER_SOFT_CROSS_ENTROPY_GRAD);
    case DLE_OP_MSE_LOSS: return dle_flops_per_in(PER_MSE);
    case DLE_OP_MSE_LOSS_BACKWARD: return dle_flops_per_out(PER_MSE);
    case DLE_OP_NLL_LOSS: return dle_flops_per_in(PER_NLL);
    case DLE_OP_NLL_LOSS_BACKWARD: return dle_flops_per_out(PER_NLL);
    case DLE_OP_BCE_WITH_LOGITS: return dle_flops_per_in(PER_BCE);
    case DLE_OP_BCE_WITH_LOGITS_BACKWARD: return dle_flops_per_out(PER_BCE);
    default: return dle_flops_none();
  }
}

/* ---- public wrappers ---- */

static dle_attrs reduction_attrs(dle_reduction r, double eps) {
  dle_attrs a = {0};
  a.ints[0] = r, a.nints = 1;
  a.f[0] = eps;
  return a;
}

static dle_attrs nll_attrs(const dle_cross_entropy_params *p, int64_t base, int64_t c) {
  static const dle_cross_entropy_params def = {DLE_REDUCTION_MEAN, false, 0, 0.0};
  if (!p) p = &def;
  dle_attrs a = {0};
  a.ints[0] = p->reduction, a.ints[1] = p->has_ignore_index, a.ints[2] = p->ignore_index,
  a.ints[3] = c;
  a.nints = 4;
  a.f[0] = p->label_smoothing;
  a.index_base = base;
  return a;
}

dle_status dle_mse_loss(dle_tensor **loss, dle_tensor *input, dle_tensor *target, dle_reduction r) {
  dle_attrs a = reduction_attrs(r, 0);
  return dle_op_call(DLE_OP_MSE_LOSS, loss, (dle_tensor *[]){input, target}, 2, &a);
}

dle_status dle_mse_loss_backward(dle_tensor **out, dle_tensor *gy, dle_tensor *input,
                                 dle_tensor *target, dle_reduction r) {
  dle_attrs a = reduction_attrs(r, 0);
  return dle_op_call(DLE_OP_MSE_LOSS_BACKWARD, out, (dle_tensor *[]){gy, input, target}, 3, &a);
}

dle_status dle_cross_entropy(dle_tensor **loss, dle_tensor **lse, dle_tensor *logits,
                             dle_tensor *targets, const dle_cross_entropy_params *p,
                             int64_t index_base) {
  dle_attrs a = nll_attrs(p, index_base, 0);
  a.nints = 3;
  dle_tensor *ins[2] = {logits, targets}, *outs[2] = {*loss, lse ? *lse : NULL};
  DLE_TRY(dle_op_call(DLE_OP_CROSS_ENTROPY, outs, ins, 2, &a));
  *loss = outs[0];
  if (lse)
    *lse = outs[1];
  else
    dle_tensor_release(outs[1]);
  return DLE_OK;
}

dle_status dle_cross_entropy_backward(dle_tensor **out, dle_tensor *gy, dle_tensor *logits,
                                      dle_tensor *targets, dle_tensor *lse,
                                      const dle_cross_entropy_params *p, int64_t index_base) {
  dle_attrs a = nll_attrs(p, index_base, 0);
  a.nints = 3;
  dle_tensor *ins[4] = {gy, logits, targets, lse};
  return dle_op_call(DLE_OP_CROSS_ENTROPY_BACKWARD, out, ins, 4, &a);
}

dle_status dle_nll_loss(dle_tensor **loss, dle_tensor *logp, dle_tensor *targets,
                        const dle_cross_entropy_params *p, int64_t index_base) {
  dle_attrs a = nll_attrs(p, index_base, 0);
  return dle_op_call(DLE_OP_NLL_LOSS, loss, (dle_tensor *[]){logp, targets}, 2, &a);
}

dle_status dle_nll_loss_backward(dle_tensor **out, dle_tensor *gy, dle_tensor *targets, int64_t c,
                                 const dle_cross_entropy_params *p, int64_t index_base) {
  dle_attrs a = nll_attrs(p, index_base, c);
  return dle_op_call(DLE_OP_NLL_LOSS_BACKWARD, out, (dle_tensor *[]){gy, targets}, 2, &a);
}

dle_status dle_bce_with_logits(dle_tensor **loss, dle_tensor *x, dle_tensor *y,
                               dle_tensor *pos_weight, dle_reduction r) {
  dle_attrs a = reduction_attrs(r, 0);
  return dle_op_call(DLE_OP_BCE_WITH_LOGITS, loss, (dle_tensor *[]){x, y, pos_weight},
                     pos_weight ? 3 : 2, &a);
}

dle_status dle_bce_with_logits_backward(dle_tensor **out, dle_tensor *gy, dle_tensor *x,
                                        dle_tensor *y, dle_tensor *pos_weight, dle_reduction r) {
  dle_attrs a = reduction_attrs(r, 0);
  return dle_op_call(DLE_OP_BCE_WITH_LOGITS_BACKWARD, out, (dle_tensor *[]){gy, x, y, pos_weight},
                     pos_weight ? 4 : 3, &a);
}

dle_status dle_soft_cross_entropy(dle_tensor **loss, dle_tensor **lse, dle_tensor *logits,
                                  dle_tensor *targets, dle_reduction r, double label_smoothing) {
  dle_attrs a = reduction_attrs(r, label_smoothing);
  dle_tensor *outs[2] = {*loss, lse ? *lse : NULL};
  DLE_TRY(dle_op_call(DLE_OP_SOFT_CROSS_ENTROPY, outs, (dle_tensor *[]){logits, targets}, 2, &a));
  *loss = outs[0];
  if (lse)
    *lse = outs[1];
  else
    dle_tensor_release(outs[1]);
  return DLE_OK;
}

dle_status dle_soft_cross_entropy_backward(dle_tensor **out, dle_tensor *gy, dle_tensor *logits,
                                           dle_tensor *targets, dle_tensor *lse, dle_reduction r,
                                           double label_smoothing) {
  dle_attrs a = reduction_attrs(r, label_smoothing);
  return dle_op_call(DLE_OP_SOFT_CROSS_ENTROPY_BACKWARD, out,
                     (dle_tensor *[]){gy, logits, targets, lse}, 4, &a);
}
