/* scan_grad.c — reverse (vjp) and forward (jvp) rules of the scan ops (engine/ops/scan.c),
 * registered by dle_grad_register_scan (engine/ops/families.def). Written with dle ops, so they
 * differentiate again. A scan taken from the end of the dim (attrs.ints[1]) has the same rules
 * with every scan direction turned round. */
#include "../autograd.h"
#include "../internal.h"

static int dim_of(const dle_attrs *a) { return (int)a->ints[0]; }
static bool rev_of(const dle_attrs *a) { return a->nints > 1 && a->ints[1]; }

/* op along the node's dim, in its direction (rev false) or the other way round (rev true). */
static dle_status scan_along(dle_op op, dle_tensor **out, dle_tensor *x, const dle_attrs *a,
                             bool turn) {
  *out = NULL;
  return dle_scan(op, out, NULL, x, dim_of(a), rev_of(a) != turn, 0);
}

/* d cumsum: the gradient summed from the other end; forward: the cumsum of the tangent */
static dle_status vjp_cumsum(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  return scan_along(DLE_OP_CUMSUM, &gin[0], gout[0], dle_node_attrs(n), true);
}

DLE_JVP_RULE(jvp_cumsum) {
  if (!tin[0]) return DLE_OK;
  return scan_along(DLE_OP_CUMSUM, &tout[0], tin[0], a, false);
}

/* Where x's zeros are along the scan: *first marks the first zero of each line, *after every
 * element from it on (bool tensors); *safe is x with the elements from the first zero on set to 1
 * (a divisor that is never 0). */
typedef struct {
  dle_tensor *first, *after, *safe;
} zeros_info;

static dle_status find_zeros(zeros_info *z, dle_tensor *x, const dle_attrs *a) {
  *z = (zeros_info){0};
  dle_tensor *is0 = NULL, *e = NULL, *c = NULL, *ce = NULL;
  dle_status st = dle_binary_scalar(DLE_OP_EQ, &is0, x, 0, false);
  if (st == DLE_OK) st = dle_to_dtype(&e, is0, DLE_I64);
  if (st == DLE_OK) st = scan_along(DLE_OP_CUMSUM, &c, e, a, false); /* zeros so far */
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, &ce, c, e);
  if (st == DLE_OK) st = dle_binary_scalar(DLE_OP_EQ, &z->first, ce, 1, false);
  if (st == DLE_OK) st = dle_binary_scalar(DLE_OP_NE, &z->after, c, 0, false);
  if (st == DLE_OK) st = dle_masked_fill(&z->safe, x, z->after, 1);
  dle_release_all((dle_tensor *[]){is0, e, c, ce}, 4);
  if (st != DLE_OK) dle_release_all((dle_tensor *[]){z->first, z->after, z->safe}, 3);
  return st;
}

static void zeros_release(zeros_info *z) {
  dle_release_all((dle_tensor *[]){z->first, z->after, z->safe}, 3);
}

/* d cumprod, zeros included (y = cumprod x; the first zero of a line at z):
 *   before z:  gx_k = sum_{j>=k} g_j y_j / x_k
 *   at z:      gx_z = sum_{j>=z} g_j prod_{i<=j, i!=z} x_i, the cumsum from the end of g times
 *              the cumprod of x with x_z replaced by 1
 *   after z:   0 (every product through x_k also holds x_z = 0). */
static dle_status vjp_cumprod(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  const dle_attrs *a = dle_node_attrs(n);
  dle_tensor *x = dle_node_input(n, 0), *y = dle_node_output(n, 0), *g = gout[0];
  zeros_info z;
  DLE_TRY(find_zeros(&z, x, a));
  dle_tensor *gy = NULL, *s = NULL, *q = NULL, *qa = NULL, *x1 = NULL, *y1 = NULL, *gy1 = NULL,
             *s1 = NULL, *at = NULL, *nf = NULL;
  dle_status st = dle_binary(DLE_OP_MUL, &gy, g, y);
  if (st == DLE_OK) st = scan_along(DLE_OP_CUMSUM, &s, gy, a, true);
  if (st == DLE_OK) st = dle_binary(DLE_OP_DIV, &q, s, z.safe);
  if (st == DLE_OK) st = dle_masked_fill(&qa, q, z.after, 0);
  if (st == DLE_OK) st = dle_masked_fill(&x1, x, z.first, 1);
  if (st == DLE_OK) st = scan_along(DLE_OP_CUMPROD, &y1, x1, a, false);
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, &gy1, g, y1);
  if (st == DLE_OK) st = scan_along(DLE_OP_CUMSUM, &s1, gy1, a, true);
  if (st == DLE_OK) st = dle_unary(DLE_OP_LOGICAL_NOT, &nf, z.first);
  if (st == DLE_OK) st = dle_masked_fill(&at, s1, nf, 0);
  if (st == DLE_OK) st = dle_binary(DLE_OP_ADD, &gin[0], qa, at);
  dle_release_all((dle_tensor *[]){gy, s, q, qa, x1, y1, gy1, s1, at, nf}, 10);
  zeros_release(&z);
  return st;
}

/* d cumprod forward: y cumsum(t / x) before the first zero; from it on, only the first zero's
 * tangent counts: the cumprod of x with x_z replaced by t_z (PyTorch's formula). */
DLE_JVP_RULE(jvp_cumprod) {
  if (!tin[0]) return DLE_OK;
  dle_tensor *x = ins[0], *t = tin[0];
  zeros_info z;
  DLE_TRY(find_zeros(&z, x, a));
  dle_tensor *r = NULL, *c = NULL, *gen = NULL, *xt = NULL, *late = NULL;
  dle_status st = dle_binary(DLE_OP_DIV, &r, t, z.safe);
  if (st == DLE_OK) st = scan_along(DLE_OP_CUMSUM, &c, r, a, false);
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, &gen, c, outs[0]);
  if (st == DLE_OK) st = dle_where(&xt, z.first, t, x);
  if (st == DLE_OK) st = scan_along(DLE_OP_CUMPROD, &late, xt, a, false);
  if (st == DLE_OK) st = dle_where(&tout[0], z.after, late, gen);
  dle_release_all((dle_tensor *[]){r, c, gen, xt, late}, 5);
  zeros_release(&z);
  return st;
}

/* sum over the scan of w_k exp(u_k), times exp(v), kept stable in logs by splitting w by sign:
 *   exp(logcumsumexp(log w+ + u) + v) - exp(logcumsumexp(log w- + u) + v)
 * (turn: the logcumsumexp runs the other way round). Both logcumsumexp rules are this form. */
static dle_status signed_lse_sum(dle_tensor **out, dle_tensor *w, dle_tensor *u, dle_tensor *v,
                                 const dle_attrs *a, bool turn) {
  dle_tensor *aw = NULL, *lw = NULL, *part[2] = {NULL, NULL};
  dle_status st = dle_unary(DLE_OP_ABS, &aw, w);
  if (st == DLE_OK) st = dle_unary(DLE_OP_LOG, &lw, aw);
  for (int k = 0; k < 2 && st == DLE_OK; k++) {
    dle_tensor *drop = NULL, *lk = NULL, *s = NULL, *c = NULL, *e = NULL;
    /* part 0 keeps w > 0, part 1 w < 0 */
    st = dle_binary_scalar(k == 0 ? DLE_OP_LE : DLE_OP_GE, &drop, w, 0, false);
    if (st == DLE_OK) st = dle_masked_fill(&lk, lw, drop, -INFINITY);
    if (st == DLE_OK) st = dle_binary(DLE_OP_ADD, &s, lk, u);
    if (st == DLE_OK) st = scan_along(DLE_OP_LOGCUMSUMEXP, &c, s, a, turn);
    if (st == DLE_OK) st = dle_binary(DLE_OP_ADD, &e, c, v);
    if (st == DLE_OK) st = dle_unary(DLE_OP_EXP, &part[k], e);
    dle_release_all((dle_tensor *[]){drop, lk, s, c, e}, 5);
  }
  *out = NULL;
  if (st == DLE_OK) st = dle_binary(DLE_OP_SUB, out, part[0], part[1]);
  dle_release_all((dle_tensor *[]){aw, lw, part[0], part[1]}, 4);
  return st;
}

/* d logcumsumexp: gx_k = sum_{j>=k} g_j exp(x_k - y_j) */
static dle_status vjp_logcumsumexp(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  dle_tensor *ny = NULL;
  DLE_TRY(dle_unary(DLE_OP_NEG, &ny, dle_node_output(n, 0)));
  dle_status st =
      signed_lse_sum(&gin[0], gout[0], ny, dle_node_input(n, 0), dle_node_attrs(n), true);
  dle_tensor_release(ny);
  return st;
}

/* forward: ty_j = sum_{k<=j} t_k exp(x_k - y_j) */
DLE_JVP_RULE(jvp_logcumsumexp) {
  if (!tin[0]) return DLE_OK;
  dle_tensor *ny = NULL;
  DLE_TRY(dle_unary(DLE_OP_NEG, &ny, outs[0]));
  dle_status st = signed_lse_sum(&tout[0], tin[0], ins[0], ny, a, false);
  dle_tensor_release(ny);
  return st;
}

/* d cummax (cummin): each output's gradient goes to the element its index names (the indices
 * carry attrs.index_base); a 0-dim input is its own result. */
static dle_status vjp_cummax(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  if (dle_node_input_ndim(n, 0) == 0) {
    dle_tensor_retain(gout[0]);
    gin[0] = gout[0];
    return DLE_OK;
  }
  const dle_attrs *a = dle_node_attrs(n);
  dle_tensor *z = NULL;
  DLE_TRY(dle_node_zeros_input(&z, n, 0));
  dle_status st =
      dle_scatter_add(&gin[0], z, dim_of(a), dle_node_output(n, 1), gout[0], a->index_base);
  dle_tensor_release(z);
  return st;
}

/* forward: the tangent at the selected elements */
DLE_JVP_RULE(jvp_cummax) {
  if (!tin[0]) return DLE_OK;
  if (ins[0]->ndim == 0) {
    dle_tensor_retain(tin[0]);
    tout[0] = tin[0];
    return DLE_OK;
  }
  return dle_gather(&tout[0], tin[0], dim_of(a), outs[1], a->index_base);
}

void dle_grad_register_scan(dle_grad_rule *r) {
  r[DLE_OP_CUMSUM] = (dle_grad_rule){vjp_cumsum, jvp_cumsum, 0, 0};
  r[DLE_OP_CUMPROD] = (dle_grad_rule){vjp_cumprod, jvp_cumprod, DLE_SAVE(0), DLE_SAVE(0)};
  r[DLE_OP_LOGCUMSUMEXP] =
      (dle_grad_rule){vjp_logcumsumexp, jvp_logcumsumexp, DLE_SAVE(0), DLE_SAVE(0)};
  r[DLE_OP_CUMMAX] = (dle_grad_rule){vjp_cummax, jvp_cummax, 0, DLE_SAVE(1)};
  r[DLE_OP_CUMMIN] = (dle_grad_rule){vjp_cummax, jvp_cummax, 0, DLE_SAVE(1)};
}
