/* reduce_grad.c — reverse (vjp) and forward (jvp) rules of the reduce ops (engine/ops/reduce.c),
 * registered by dle_grad_register_reduce (engine/ops/families.def). */
#include "../autograd.h"
#include "../internal.h"

#include <stdlib.h>

/* ---- gradients: reverse (vjp) and forward (jvp) rules, written with dle ops ---- */

/* The reduced dims of a node's attrs, as a mask over the input's dims (a 0-dim input has none). */
static void reduced_mask(const dle_attrs *a, int ndim, bool *mask) {
  for (int d = 0; d < ndim; d++) mask[d] = a->nints == 0;
  for (int j = 0; j < a->nints && ndim > 0; j++) {
    int d = (int)a->ints[j];
    mask[d < 0 ? d + ndim : d] = true;
  }
}

/* How many input elements each output element reduces (N). */
static double reduced_count(const dle_attrs *a, int ndim, const int64_t *sizes) {
  bool mask[DLE_MAX_DIMS];
  reduced_mask(a, ndim, mask);
  double count = 1;
  for (int d = 0; d < ndim; d++)
    if (mask[d]) count *= (double)sizes[d];
  return count;
}

/* g (the shape of a reduction's output) viewed with the reduced dims kept as size 1, so it
 * broadcasts against the input. */
static dle_status unsqueeze_reduced(dle_tensor **out, dle_tensor *g, const dle_attrs *a, int ndim,
                                    const int64_t *sizes) {
  bool mask[DLE_MAX_DIMS];
  int64_t kept[DLE_MAX_DIMS];
  reduced_mask(a, ndim, mask);
  for (int d = 0; d < ndim; d++) kept[d] = mask[d] ? 1 : sizes[d];
  *out = NULL;
  return dle_reshape(out, g, ndim, kept);
}

/* *gin = w * g, g (a reduction node's output gradient) unsqueezed over the node's reduced dims so
 * that it broadcasts against w of the input's shape. */
static dle_status times_output_grad(dle_tensor **gin, dle_tensor *w, const dle_node *n,
                                    dle_tensor *g) {
  dle_tensor *u = NULL;
  dle_status st = unsqueeze_reduced(&u, g, dle_node_attrs(n), dle_node_input_ndim(n, 0),
                                    dle_node_input_sizes(n, 0));
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, gin, w, u);
  dle_tensor_release(u);
  return st;
}

/* g broadcast back over the reduced elements (the input's shape). */
static dle_status spread(dle_tensor **out, dle_tensor *g, const dle_attrs *a, int ndim,
                         const int64_t *sizes) {
  *out = NULL;
  /* a full reduction's 0-dim g, or a keepdim g, broadcasts as it is: no reshape first */
  if (g->ndim == 0 || g->ndim == ndim) return dle_expand(out, g, ndim, sizes);
  dle_tensor *u = NULL;
  DLE_TRY(unsqueeze_reduced(&u, g, a, ndim, sizes));
  dle_status st = dle_expand(out, u, ndim, sizes);
  dle_tensor_release(u);
  return st;
}

/* op over the attrs' dims (as the caller gave them), with the given keepdim. */
static dle_status reduce_like(dle_op op, dle_tensor **out, dle_tensor *x, const dle_attrs *a,
                              bool keepdim) {
  int dims[DLE_MAX_ATTR_INTS];
  for (int j = 0; j < a->nints; j++) dims[j] = (int)a->ints[j];
  *out = NULL;
  return dle_reduce(op, out, x, a->nints, dims, keepdim, a->f[0]);
}

/* sum(x * w) over the attrs' dims, shaped like the op's output: the jvp of a reduction whose
 * derivative is the weight w. */
static dle_status weighted_sum(dle_tensor **out, dle_tensor *t, dle_tensor *w, const dle_attrs *a) {
  dle_tensor *p = NULL;
  DLE_TRY(dle_binary(DLE_OP_MUL, &p, t, w));
  dle_status st = reduce_like(DLE_OP_SUM, out, p, a, a->keepdim);
  dle_tensor_release(p);
  return st;
}

/* A float (dtype dt) 0/1 mask of x op y (y a tensor, or the scalar s when y is NULL). */
static dle_status float_mask(dle_tensor **out, dle_op op, dle_tensor *x, dle_tensor *y, double s,
                             dle_dtype dt) {
  dle_tensor *b = NULL;
  DLE_TRY(y ? dle_binary(op, &b, x, y) : dle_binary_scalar(op, &b, x, s, false));
  *out = NULL;
  dle_status st = dle_to_dtype(out, b, dt);
  dle_tensor_release(b);
  return st;
}

/* d sum = g, spread over the reduced elements */
static dle_status vjp_sum(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  return spread(&gin[0], gout[0], dle_node_attrs(n), dle_node_input_ndim(n, 0),
                dle_node_input_sizes(n, 0));
}

/* sum, mean: the same reduction of the tangent */
DLE_JVP_RULE(jvp_sum) {
  if (!tin[0]) return DLE_OK;
  return reduce_like(op, &tout[0], tin[0], a, a->keepdim);
}

/* d mean = g / N, spread over the reduced elements */
static dle_status vjp_mean(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  int nd = dle_node_input_ndim(n, 0);
  const int64_t *sizes = dle_node_input_sizes(n, 0);
  const dle_attrs *a = dle_node_attrs(n);
  dle_tensor *s = NULL;
  DLE_TRY(dle_binary_scalar(DLE_OP_MUL, &s, gout[0], 1.0 / reduced_count(a, nd, sizes), false));
  dle_status st = spread(&gin[0], s, a, nd, sizes);
  dle_tensor_release(s);
  return st;
}

/* d prod / dx_i = product of the other elements, exact with zeros: with xn = x where x != 0
 * and 1 where x == 0, pn = prod(xn) and z = the number of zeros in the slice,
 * d prod / dx_i = pn / xn_i when z = 0, pn at the zero when z = 1, 0 otherwise. */
static dle_status prod_factor(dle_tensor **out, dle_tensor *x, const dle_attrs *a) {
  enum { ZF, XN, CNT, PN, C0, C1, B, Q, Q2, NT };
  dle_tensor *t[NT] = {0};
  dle_dtype dt = x->dtype;
  dle_status st = float_mask(&t[ZF], DLE_OP_EQ, x, NULL, 0, dt);
  if (st == DLE_OK) st = dle_binary(DLE_OP_ADD, &t[XN], x, t[ZF]);
  if (st == DLE_OK) st = reduce_like(DLE_OP_SUM, &t[CNT], t[ZF], a, true);
  if (st == DLE_OK) st = reduce_like(DLE_OP_PROD, &t[PN], t[XN], a, true);
  if (st == DLE_OK) st = float_mask(&t[C0], DLE_OP_EQ, t[CNT], NULL, 0, dt);
  if (st == DLE_OK) st = float_mask(&t[C1], DLE_OP_EQ, t[CNT], NULL, 1, dt);
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, &t[B], t[ZF], t[C1]);
  if (st == DLE_OK) st = dle_binary(DLE_OP_DIV, &t[Q], t[C0], t[XN]);
  if (st == DLE_OK) st = dle_binary(DLE_OP_ADD, &t[Q2], t[Q], t[B]);
  *out = NULL;
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, out, t[PN], t[Q2]);
  dle_release_all(t, NT);
  return st;
}

/* x - mean(x) over the reduced dims (kept). */
static dle_status centered(dle_tensor **out, dle_tensor *x, const dle_attrs *a) {
  dle_tensor *m = NULL;
  DLE_TRY(reduce_like(DLE_OP_MEAN, &m, x, a, true));
  *out = NULL;
  dle_status st = dle_binary(DLE_OP_SUB, out, x, m);
  dle_tensor_release(m);
  return st;
}

/* N - correction, the divisor of var/std (never negative, as in PyTorch). */
static double var_divisor(const dle_attrs *a, int ndim, const int64_t *sizes) {
  double d = reduced_count(a, ndim, sizes) - a->f[0];
  return d > 0 ? d : 0;
}

/* g / ((N - c) std), and 0 where std == 0 (as PyTorch: a constant slice has no direction). */
static dle_status std_scale(dle_tensor **out, dle_tensor *g, dle_tensor *sd, double divisor) {
  enum { ZF, NZ, DEN, Q, Q2, NT };
  dle_tensor *t[NT] = {0};
  dle_status st = float_mask(&t[ZF], DLE_OP_EQ, sd, NULL, 0, sd->dtype);
  if (st == DLE_OK) st = float_mask(&t[NZ], DLE_OP_NE, sd, NULL, 0, sd->dtype);
  if (st == DLE_OK) st = dle_binary(DLE_OP_ADD, &t[DEN], sd, t[ZF]);
  if (st == DLE_OK) st = dle_binary(DLE_OP_DIV, &t[Q], g, t[DEN]);
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, &t[Q2], t[Q], t[NZ]);
  *out = NULL;
  if (st == DLE_OK) st = dle_binary_scalar(DLE_OP_MUL, out, t[Q2], 1.0 / divisor, false);
  dle_release_all(t, NT);
  return st;
}

/* g times var's or std's local factor: var 2 / (N - c); std 1 / ((N - c) std), from its value sd
 * (unused for var). */
static dle_status var_std_scale(dle_op op, dle_tensor **out, dle_tensor *g, dle_tensor *sd,
                                double divisor) {
  if (op == DLE_OP_VAR) return dle_binary_scalar(DLE_OP_MUL, out, g, 2.0 / divisor, false);
  return std_scale(out, g, sd, divisor);
}

/* d var = 2 (x - mean) / (N - c) g; d std = (x - mean) / ((N - c) std) g, from the saved std */
static dle_status vjp_var_std(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  dle_op op = dle_node_op(n);
  int nd = dle_node_input_ndim(n, 0);
  const int64_t *sizes = dle_node_input_sizes(n, 0);
  const dle_attrs *a = dle_node_attrs(n);
  dle_tensor *d = NULL, *u = NULL, *su = NULL, *w = NULL;
  dle_status st = centered(&d, dle_node_input(n, 0), a);
  if (st == DLE_OK) st = unsqueeze_reduced(&u, gout[0], a, nd, sizes);
  if (st == DLE_OK && op == DLE_OP_STD)
    st = unsqueeze_reduced(&su, dle_node_output(n, 0), a, nd, sizes);
  if (st == DLE_OK) st = var_std_scale(op, &w, u, su, var_divisor(a, nd, sizes));
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, &gin[0], d, w);
  dle_release_all((dle_tensor *[]){d, u, su, w}, 4);
  return st;
}

/* d var = 2 / (N - c) sum((x - mean) t); d std = sum((x - mean) t) / ((N - c) std) */
DLE_JVP_RULE(jvp_var_std) {
  if (!tin[0]) return DLE_OK;
  dle_tensor *d = NULL, *s = NULL;
  dle_status st = centered(&d, ins[0], a);
  if (st == DLE_OK) st = weighted_sum(&s, tin[0], d, a);
  if (st == DLE_OK)
    st = var_std_scale(op, &tout[0], s, outs[0], var_divisor(a, ins[0]->ndim, ins[0]->sizes));
  dle_tensor_release(d);
  dle_tensor_release(s);
  return st;
}

/* softmax over the reduced elements: exp(x - logsumexp(x)), stable since x - lse <= 0. */
static dle_status lse_weights(dle_tensor **out, dle_tensor *x, dle_tensor *lse,
                              const dle_attrs *a) {
  dle_tensor *u = NULL, *d = NULL;
  dle_status st = unsqueeze_reduced(&u, lse, a, x->ndim, x->sizes);
  if (st == DLE_OK) st = dle_binary(DLE_OP_SUB, &d, x, u);
  *out = NULL;
  if (st == DLE_OK) st = dle_unary(DLE_OP_EXP, out, d);
  dle_tensor_release(u);
  dle_tensor_release(d);
  return st;
}

/* amax/amin: the 0/1 mask of the elements equal to the result (the ties), and their count per
 * output element (reduced dims kept or not). */
static dle_status tie_mask(dle_tensor **mask, dle_tensor **count, dle_tensor *x, dle_tensor *res,
                           const dle_attrs *a, bool keepdim) {
  dle_tensor *u = NULL;
  *mask = *count = NULL;
  dle_status st = unsqueeze_reduced(&u, res, a, x->ndim, x->sizes);
  if (st == DLE_OK) st = float_mask(mask, DLE_OP_EQ, x, u, 0, x->dtype);
  if (st == DLE_OK) st = reduce_like(DLE_OP_SUM, count, *mask, a, keepdim);
  dle_tensor_release(u);
  if (st != DLE_OK) {
    DLE_RELEASE(*mask);
    DLE_RELEASE(*count);
  }
  return st;
}

/* d amax (amin) = g / (number of ties) at each element equal to the result, 0 elsewhere */
static dle_status vjp_amax(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  dle_tensor *x = dle_node_input(n, 0), *mask = NULL, *count = NULL, *u = NULL, *w = NULL;
  dle_status st = tie_mask(&mask, &count, x, dle_node_output(n, 0), dle_node_attrs(n), true);
  if (st == DLE_OK) st = unsqueeze_reduced(&u, gout[0], dle_node_attrs(n), x->ndim, x->sizes);
  if (st == DLE_OK) st = dle_binary(DLE_OP_DIV, &w, u, count);
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, &gin[0], mask, w);
  dle_release_all((dle_tensor *[]){mask, count, u, w}, 4);
  return st;
}

/* d amax (amin) = mean of t over the ties */
DLE_JVP_RULE(jvp_amax) {
  if (!tin[0]) return DLE_OK;
  dle_tensor *mask = NULL, *count = NULL, *s = NULL;
  dle_status st = tie_mask(&mask, &count, ins[0], outs[0], a, a->keepdim);
  if (st == DLE_OK) st = weighted_sum(&s, tin[0], mask, a);
  if (st == DLE_OK) st = dle_binary(DLE_OP_DIV, &tout[0], s, count);
  dle_release_all((dle_tensor *[]){mask, count, s}, 3);
  return st;
}

/* max/min along one dim: the 0/1 mask (dtype dt, the input's shape) of the selected elements,
 * from the indices (relative to attrs.index_base) compared with a range along the dim. */
static dle_status selected_mask(dle_tensor **out, dle_op op, dle_tensor *idx, const dle_attrs *a,
                                int ndim, const int64_t *sizes, dle_dtype dt) {
  int d = 0;
  if (ndim > 0) DLE_TRY(dle_wrap_dim(dle_op_get_info(op)->name, (int)a->ints[0], ndim, 0, &d));
  int64_t len = ndim > 0 ? sizes[d] : 1, shape[DLE_MAX_DIMS];
  for (int k = 0; k < ndim; k++) shape[k] = k == d ? len : 1;
  dle_tensor *r = NULL, *iota = NULL, *u = NULL;
  dle_status st = dle_arange(&r, (double)a->index_base, (double)(a->index_base + len), 1, DLE_I64);
  if (st == DLE_OK && dle_tensor_device(idx).type != DLE_CPU) { /* beside the indices */
    dle_tensor *moved = NULL;
    st = dle_to_device(&moved, r, dle_tensor_device(idx));
    dle_tensor_release(r);
    r = moved;
  }
  if (st == DLE_OK) st = dle_reshape(&iota, r, ndim, shape);
  if (st == DLE_OK) st = unsqueeze_reduced(&u, idx, a, ndim, sizes);
  if (st == DLE_OK) st = float_mask(out, DLE_OP_EQ, iota, u, 0, dt);
  dle_release_all((dle_tensor *[]){r, iota, u}, 3);
  return st;
}

/* prod, logsumexp, max and min: the derivative is a weight w on x, gin = w g (g broadcast back
 * over the reduced dims) and tout = sum(w t) over them:
 *   prod: the product of the others;  logsumexp: exp(x - out);  max (min) values: 1 at the
 *   selected index, 0 elsewhere (the indices have no gradient).
 * x is NULL where not saved (max, min), ndim/sizes its shape, y the output w reads (the indices
 * for max and min), dt the dtype of w. */
static int weight_output(dle_op op) { return op == DLE_OP_MAX || op == DLE_OP_MIN; }

static dle_status reduce_weight(dle_tensor **w, dle_op op, dle_tensor *x, int ndim,
                                const int64_t *sizes, dle_tensor *y, const dle_attrs *a,
                                dle_dtype dt) {
  switch (op) {
    case DLE_OP_PROD: return prod_factor(w, x, a);
    case DLE_OP_LOGSUMEXP: return lse_weights(w, x, y, a);
    default: return selected_mask(w, op, y, a, ndim, sizes, dt);
  }
}

static dle_status vjp_weighted(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  dle_op op = dle_node_op(n);
  dle_tensor *w = NULL;
  dle_status st = reduce_weight(&w, op, dle_node_input(n, 0), dle_node_input_ndim(n, 0),
                                dle_node_input_sizes(n, 0), dle_node_output(n, weight_output(op)),
                                dle_node_attrs(n), gout[0]->dtype);
  if (st == DLE_OK) st = times_output_grad(&gin[0], w, n, gout[0]);
  dle_tensor_release(w);
  return st;
}

DLE_JVP_RULE(jvp_weighted) {
  if (!tin[0]) return DLE_OK;
  dle_tensor *w = NULL;
  DLE_TRY(reduce_weight(&w, op, ins[0], ins[0]->ndim, ins[0]->sizes, outs[weight_output(op)], a,
                        tin[0]->dtype));
  dle_status st = weighted_sum(&tout[0], tin[0], w, a);
  dle_tensor_release(w);
  return st;
}

void dle_grad_register_reduce(dle_grad_rule *r) {
  r[DLE_OP_SUM] = (dle_grad_rule){vjp_sum, jvp_sum, 0, false};
  r[DLE_OP_MEAN] = (dle_grad_rule){vjp_mean, jvp_sum, 0, false};
  r[DLE_OP_PROD] = (dle_grad_rule){vjp_weighted, jvp_weighted, DLE_SAVE(0), false};
  r[DLE_OP_VAR] = (dle_grad_rule){vjp_var_std, jvp_var_std, DLE_SAVE(0), false};
  r[DLE_OP_STD] = (dle_grad_rule){vjp_var_std, jvp_var_std, DLE_SAVE(0), true};
  r[DLE_OP_LOGSUMEXP] = (dle_grad_rule){vjp_weighted, jvp_weighted, DLE_SAVE(0), true};
  r[DLE_OP_AMAX] = (dle_grad_rule){vjp_amax, jvp_amax, DLE_SAVE(0), true};
  r[DLE_OP_AMIN] = (dle_grad_rule){vjp_amax, jvp_amax, DLE_SAVE(0), true};
  r[DLE_OP_MAX] = (dle_grad_rule){vjp_weighted, jvp_weighted, 0, true};
  r[DLE_OP_MIN] = (dle_grad_rule){vjp_weighted, jvp_weighted, 0, true};
}
