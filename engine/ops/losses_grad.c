/* losses_grad.c — reverse (vjp) and forward (jvp) rules of the losses (engine/ops/losses.c).
 *
 * The losses' gradients in their main input are the fused backward ops; every other gradient,
 * and the rules of the backward ops, are composites of dle ops (grad_scope.h), so gradients of
 * gradients work to any order. R below is the reduction: none (elementwise / per row), sum, or
 * mean (sum times c = 1/numel, 1/N rows, or 1/count of targets not ignored).
 *
 *   mse_loss      L = R(d^2), d = x - y.  B = backward(gy) = 2 c gy d: bilinear in gy and d.
 *   nll_loss      linear in logp; nll_loss_backward is its adjoint (and nll_loss the backward's),
 *                 so each is the other's reverse rule and its own forward rule.
 *   bce           l = (1 - y) x + lw sp with lw = 1 + (w - 1) y, sp = softplus(-x), s = sigmoid(-x):
 *                 dl/dx = (1 - y) - lw s,  dl/dy = -x + (w - 1) sp,  dl/dw = y sp;
 *                 the backward B = c gy dl/dx has dB/dx = c gy lw s (1 - s), dB/dy = -c gy (1 + (w - 1) s),
 *                 dB/dw = -c gy y s.
 *   cross_entropy loss_i = w_i (lse_i - q_i . x_i) with q_i the smoothed one-hot of t_i and
 *                 w_i = [t_i not ignored] (/ count for the mean); lse_i = log sum exp x_i.
 *                 d loss / d x_i = w_i (p_i - q_i), d lse_i / d x_i = p_i = exp(x_i - lse_i).
 *                 Its backward G = w (gy) (p - q): linear in gy; d p = p (dx - d lse).
 *   soft CE       loss_i = -sum_c q (x - lse_i), q = (1 - eps) t + eps/C, S_i = sum_c q;
 *                 d/dx = S p - q (p = exp(x - lse)), d/dt = -(1 - eps)(x - lse).
 *                 The backward G = w (p S - q), w = c gy, with lse an input as for cross_entropy:
 *                 dp = p (dx - dlse), dS = (1 - eps) sum dt, dq = (1 - eps) dt. */
#include "../internal.h"
#include "grad_scope.h"

static bool is_none(const dle_attrs *a) { return a->ints[0] == DLE_REDUCTION_NONE; }

/* R(e) for elementwise (or per-row, rows = true) terms e already scaled by c */
static dle_tensor *reduce_terms(scope *s, const dle_attrs *a, dle_tensor *e, bool rows) {
  if (!e) return NULL;
  if (is_none(a)) return rows ? rowsum(s, e, false) : e;
  return sumall(s, e);
}

/* c: the mean's 1 / count, else 1 */
static double mean_scale(const dle_attrs *a, int64_t count) {
  return a->ints[0] == DLE_REDUCTION_MEAN ? 1.0 / (double)count : 1.0;
}

static dle_tensor *ones_like(scope *s, dle_tensor *t) {
  dle_tensor *r = NULL;
  return ok(s)
             ? keep(s, dle_full_on(&r, t->ndim, t->sizes, 1.0, t->dtype, dle_tensor_device(t)), &r)
             : NULL;
}

/* a - b where either may be NULL (zero) */
static dle_tensor *sub_opt(scope *s, dle_tensor *a, dle_tensor *b) {
  if (!b) return a;
  return a ? bin(s, DLE_OP_SUB, a, b) : unary(s, DLE_OP_NEG, b);
}

/* a * b where b may be NULL (one) */
static dle_tensor *mul_opt(scope *s, dle_tensor *a, dle_tensor *b) {
  return b ? bin(s, DLE_OP_MUL, a, b) : a;
}

/* ---- mse ---- */

static dle_status vjp_mse(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || (!dle_node_needs_grad(n, 0) && !dle_node_needs_grad(n, 1))) return DLE_OK;
  scope s = {.n = 0};
  dle_tensor *x = dle_node_input(n, 0), *y = dle_node_input(n, 1);
  dle_tensor *g =
      call(&s, DLE_OP_MSE_LOSS_BACKWARD, (dle_tensor *[]){gout[0], x, y}, 3, dle_node_attrs(n));
  if (dle_node_needs_grad(n, 0)) gin[0] = give(&s, g);
  if (dle_node_needs_grad(n, 1)) gin[1] = give(&s, unary(&s, DLE_OP_NEG, g));
  return scope_end(&s, gin, 2);
}

DLE_JVP_RULE(jvp_mse) {
  dle_tensor *td = NULL;
  scope s = {.n = 0};
  td = sub_opt(&s, tin[0], tin[1]);
  if (!td) return DLE_OK;
  dle_tensor *g1 = call(&s, DLE_OP_MSE_LOSS_BACKWARD,
                        (dle_tensor *[]){ones_like(&s, outs[0]), ins[0], ins[1]}, 3, a);
  tout[0] = give(&s, reduce_terms(&s, a, bin(&s, DLE_OP_MUL, g1, td), false));
  return scope_end(&s, tout, 1);
}

/* B = k gy (x - y), k = 2 c */
static dle_status vjp_mse_backward(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  dle_tensor *g = gout[0];
  if (!g) return DLE_OK;
  scope s = {.n = 0};
  dle_tensor *gy = dle_node_input(n, 0), *x = dle_node_input(n, 1), *y = dle_node_input(n, 2);
  double k = 2 * mean_scale(dle_node_attrs(n), dle_tensor_numel(x));
  if (dle_node_needs_grad(n, 0))
    gin[0] = give(&s, sum_to(&s, muls(&s, bin(&s, DLE_OP_MUL, bin(&s, DLE_OP_SUB, x, y), g), k),
                             gy->ndim, gy->sizes));
  if (dle_node_needs_grad(n, 1) || dle_node_needs_grad(n, 2)) {
    dle_tensor *dx = muls(&s, bin(&s, DLE_OP_MUL, gy, g), k);
    if (dle_node_needs_grad(n, 1)) gin[1] = give(&s, dx);
    if (dle_node_needs_grad(n, 2)) gin[2] = give(&s, unary(&s, DLE_OP_NEG, dx));
  }
  return scope_end(&s, gin, 3);
}

DLE_JVP_RULE(jvp_mse_backward) {
  scope s = {.n = 0};
  dle_tensor *gy = ins[0], *x = ins[1], *y = ins[2], *acc = NULL;
  double k = 2 * mean_scale(a, dle_tensor_numel(x));
  if (tin[0]) acc = bin(&s, DLE_OP_MUL, tin[0], bin(&s, DLE_OP_SUB, x, y));
  dle_tensor *td = sub_opt(&s, tin[1], tin[2]);
  if (td) acc = add_opt(&s, acc, bin(&s, DLE_OP_MUL, gy, td));
  if (acc) tout[0] = give(&s, muls(&s, acc, k));
  return scope_end(&s, tout, 1);
}

/* ---- nll: nll_loss and nll_loss_backward are adjoint linear maps ---- */

static dle_status nll_call(dle_op op, dle_tensor **out, dle_tensor *src, dle_tensor *t,
                           const dle_attrs *base, int64_t c) {
  dle_attrs a = *base;
  a.ints[3] = c, a.nints = 4;
  *out = NULL;
  return dle_op_call(op, out, (dle_tensor *[]){src, t}, 2, &a);
}

static dle_status vjp_nll(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  return nll_call(DLE_OP_NLL_LOSS_BACKWARD, &gin[0], gout[0], dle_node_input(n, 1),
                  dle_node_attrs(n), dle_node_input_sizes(n, 0)[1]);
}

DLE_JVP_RULE(jvp_nll) {
  if (!tin[0]) return DLE_OK;
  return nll_call(DLE_OP_NLL_LOSS, &tout[0], tin[0], ins[1], a, a->ints[3]);
}

static dle_status vjp_nll_backward(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  const dle_attrs *a = dle_node_attrs(n);
  return nll_call(DLE_OP_NLL_LOSS, &gin[0], gout[0], dle_node_input(n, 1), a, a->ints[3]);
}

DLE_JVP_RULE(jvp_nll_backward) {
  if (!tin[0]) return DLE_OK;
  return nll_call(DLE_OP_NLL_LOSS_BACKWARD, &tout[0], tin[0], ins[1], a, a->ints[3]);
}

/* ---- binary cross-entropy with logits ---- */

typedef struct {
  dle_tensor *x, *y, *w; /* w NULL: no pos_weight */
  const dle_attrs *a;
} bce_in;

/* s = sigmoid(-x) */
static dle_tensor *bce_sig_neg(scope *s, const bce_in *b) {
  return unary(s, DLE_OP_SIGMOID, unary(s, DLE_OP_NEG, b->x));
}

/* w - 1, NULL without pos_weight */
static dle_tensor *bce_wm1(scope *s, const bce_in *b) { return b->w ? adds(s, b->w, -1) : NULL; }

/* lw = 1 + (w - 1) y, NULL (one) without pos_weight */
static dle_tensor *bce_lw(scope *s, const bce_in *b) {
  return b->w ? adds(s, bin(s, DLE_OP_MUL, bce_wm1(s, b), b->y), 1) : NULL;
}

/* softplus(-x) = log1p(exp(-|x|)) + relu(-x) */
static dle_tensor *bce_softplus_neg(scope *s, const bce_in *b) {
  dle_tensor *e = unary(s, DLE_OP_EXP, unary(s, DLE_OP_NEG, unary(s, DLE_OP_ABS, b->x)));
  return bin(s, DLE_OP_ADD, unary(s, DLE_OP_LOG1P, e),
             unary(s, DLE_OP_RELU, unary(s, DLE_OP_NEG, b->x)));
}

/* dl/dx elementwise (unscaled): the fused backward with gy = 1 and reduction sum */
static dle_tensor *bce_dx(scope *s, const bce_in *b) {
  dle_tensor *one = NULL;
  if (!ok(s)) return NULL;
  one = keep(s, dle_full_on(&one, 0, NULL, 1.0, b->x->dtype, dle_tensor_device(b->x)), &one);
  dle_attrs a = *b->a;
  a.ints[0] = DLE_REDUCTION_SUM;
  dle_tensor *ins[4] = {one, b->x, b->y, b->w};
  return call(s, DLE_OP_BCE_WITH_LOGITS_BACKWARD, ins, b->w ? 4 : 3, &a);
}

/* dl/dy = -x + (w - 1) sp */
static dle_tensor *bce_dy(scope *s, const bce_in *b) {
  dle_tensor *nx = unary(s, DLE_OP_NEG, b->x);
  return b->w ? bin(s, DLE_OP_ADD, nx, bin(s, DLE_OP_MUL, bce_wm1(s, b), bce_softplus_neg(s, b)))
              : nx;
}

/* c gy as a tensor that broadcasts to x: gy itself (none) or the scalar gy c */
static dle_tensor *bce_scaled_gy(scope *s, const bce_in *b, dle_tensor *gy) {
  return is_none(b->a) ? gy : muls(s, gy, mean_scale(b->a, dle_tensor_numel(b->x)));
}

/* inputs x, y[, w] (ins + k); i = index of x among the node's inputs */
static bce_in bce_of(dle_tensor *const *ins, int nin, int k, const dle_attrs *a) {
  return (bce_in){ins[k], ins[k + 1], nin > k + 2 ? ins[k + 2] : NULL, a};
}

static dle_status vjp_bce(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  int nin = dle_node_num_inputs(n);
  dle_tensor *ins[3] = {dle_node_input(n, 0), dle_node_input(n, 1),
                        nin > 2 ? dle_node_input(n, 2) : NULL};
  bce_in b = bce_of(ins, nin, 0, dle_node_attrs(n));
  scope s = {.n = 0};
  if (dle_node_needs_grad(n, 0)) {
    dle_tensor *cin[4] = {gout[0], b.x, b.y, b.w};
    gin[0] = give(&s, call(&s, DLE_OP_BCE_WITH_LOGITS_BACKWARD, cin, nin + 1, b.a));
  }
  dle_tensor *gyc = bce_scaled_gy(&s, &b, gout[0]);
  if (dle_node_needs_grad(n, 1)) gin[1] = give(&s, bin(&s, DLE_OP_MUL, gyc, bce_dy(&s, &b)));
  if (b.w && dle_node_needs_grad(n, 2)) {
    dle_tensor *dw = bin(&s, DLE_OP_MUL, gyc, bin(&s, DLE_OP_MUL, b.y, bce_softplus_neg(&s, &b)));
    gin[2] = give(&s, sum_to(&s, dw, b.w->ndim, b.w->sizes));
  }
  return scope_end(&s, gin, nin);
}

DLE_JVP_RULE(jvp_bce) {
  bce_in b = bce_of(ins, nin, 0, a);
  scope s = {.n = 0};
  dle_tensor *acc = NULL;
  if (tin[0]) acc = bin(&s, DLE_OP_MUL, bce_dx(&s, &b), tin[0]);
  if (tin[1]) acc = add_opt(&s, acc, bin(&s, DLE_OP_MUL, bce_dy(&s, &b), tin[1]));
  if (nin > 2 && tin[2])
    acc = add_opt(&s, acc,
                  bin(&s, DLE_OP_MUL, bin(&s, DLE_OP_MUL, b.y, bce_softplus_neg(&s, &b)), tin[2]));
  if (acc) {
    acc = muls(&s, acc, mean_scale(a, dle_tensor_numel(b.x)));
    tout[0] = give(&s, reduce_terms(&s, a, acc, false));
  }
  return scope_end(&s, tout, 1);
}

/* The partial derivatives of B = gyc dl/dx in x, y, w, each times v (NULL when not wanted). */
static void bce_backward_partials(scope *s, const bce_in *b, dle_tensor *gyc, dle_tensor *v,
                                  dle_tensor **dx, dle_tensor **dy, dle_tensor **dw) {
  dle_tensor *sn = bce_sig_neg(s, b), *gv = bin(s, DLE_OP_MUL, gyc, v);
  if (dx) /* lw s (1 - s) */
    *dx = bin(s, DLE_OP_MUL,
              mul_opt(s, bin(s, DLE_OP_MUL, sn, adds(s, muls(s, sn, -1), 1)), bce_lw(s, b)), gv);
  if (dy) { /* -(1 + (w - 1) s) */
    dle_tensor *f = b->w ? adds(s, bin(s, DLE_OP_MUL, bce_wm1(s, b), sn), 1) : NULL;
    *dy = unary(s, DLE_OP_NEG, mul_opt(s, gv, f));
  }
  if (dw) *dw = unary(s, DLE_OP_NEG, bin(s, DLE_OP_MUL, bin(s, DLE_OP_MUL, b->y, sn), gv));
}

/* inputs gy, x, y[, w] */
static dle_status vjp_bce_backward(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  dle_tensor *g = gout[0];
  if (!g) return DLE_OK;
  int nin = dle_node_num_inputs(n);
  dle_tensor *ins[4] = {dle_node_input(n, 0), dle_node_input(n, 1), dle_node_input(n, 2),
                        nin > 3 ? dle_node_input(n, 3) : NULL};
  bce_in b = bce_of(ins, nin, 1, dle_node_attrs(n));
  scope s = {.n = 0};
  dle_tensor *gy = ins[0], *d[4] = {NULL, NULL, NULL, NULL};
  if (dle_node_needs_grad(n, 0)) {
    dle_tensor *e =
        muls(&s, bin(&s, DLE_OP_MUL, bce_dx(&s, &b), g), mean_scale(b.a, dle_tensor_numel(b.x)));
    d[0] = sum_to(&s, e, gy->ndim, gy->sizes);
  }
  bool want_w = b.w && dle_node_needs_grad(n, 3);
  if (dle_node_needs_grad(n, 1) || dle_node_needs_grad(n, 2) || want_w)
    bce_backward_partials(&s, &b, bce_scaled_gy(&s, &b, gy), g,
                          dle_node_needs_grad(n, 1) ? &d[1] : NULL,
                          dle_node_needs_grad(n, 2) ? &d[2] : NULL, want_w ? &d[3] : NULL);
  if (d[3]) d[3] = sum_to(&s, d[3], b.w->ndim, b.w->sizes);
  for (int i = 0; i < nin; i++) gin[i] = give(&s, d[i]);
  return scope_end(&s, gin, nin);
}

DLE_JVP_RULE(jvp_bce_backward) {
  bce_in b = bce_of(ins, nin, 1, a);
  scope s = {.n = 0};
  dle_tensor *acc = NULL, *gyc = bce_scaled_gy(&s, &b, ins[0]);
  if (tin[0]) acc = bin(&s, DLE_OP_MUL, bce_scaled_gy(&s, &b, tin[0]), bce_dx(&s, &b));
  for (int i = 1; i < nin; i++) {
    if (!tin[i]) continue;
    dle_tensor *p = NULL;
    bce_backward_partials(&s, &b, gyc, tin[i], i == 1 ? &p : NULL, i == 2 ? &p : NULL,
                          i == 3 ? &p : NULL);
    acc = add_opt(&s, acc, p);
  }
  tout[0] = give(&s, acc);
  return scope_end(&s, tout, 1);
}

/* p = exp(x - lse): the softmax of logits x {N, C} from their row log-sum-exp lse {N} */
static dle_tensor *lse_probs(scope *s, dle_tensor *x, dle_tensor *lse) {
  return unary(s, DLE_OP_EXP, bin(s, DLE_OP_SUB, x, unsq(s, lse, 1)));
}

/* ---- cross-entropy against class indices ---- */

/* w_i: [target i not ignored], divided by their count for the mean; {N} in dtype dt. */
static dle_tensor *ce_row_weights(scope *s, const dle_attrs *a, dle_tensor *t, dle_dtype dt) {
  dle_tensor *m = NULL;
  if (a->ints[1]) {
    dle_tensor *ne = NULL;
    ne = ok(s) ? keep(s, dle_binary_scalar(DLE_OP_NE, &ne, t, (double)a->ints[2], false), &ne)
               : NULL;
    m = to_dtype(s, ne, dt);
  } else if (ok(s)) {
    m = keep(s, dle_full_on(&m, 1, t->sizes, 1.0, dt, dle_tensor_device(t)), &m);
  }
  if (a->ints[0] == DLE_REDUCTION_MEAN) m = bin(s, DLE_OP_DIV, m, sumall(s, m));
  return m;
}

/* q = (1 - eps) one_hot(t) + eps / C, {N, C}; ignored rows hold some class (their weight is 0). */
static dle_tensor *ce_smoothed(scope *s, const dle_attrs *a, dle_tensor *t, int64_t c,
                               dle_dtype dt) {
  dle_tensor *tc = NULL, *oh = NULL;
  if (!ok(s)) return NULL;
  tc = keep(s, dle_clamp(&tc, t, (double)a->index_base, (double)(a->index_base + c - 1)), &tc);
  if (ok(s)) oh = keep(s, dle_one_hot(&oh, tc, c, a->index_base), &oh);
  dle_tensor *q = to_dtype(s, oh, dt);
  if (a->f[0] > 0) q = adds(s, muls(s, q, 1 - a->f[0]), a->f[0] / (double)c);
  return q;
}

static dle_status vjp_ce(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!dle_node_needs_grad(n, 0) || (!gout[0] && !gout[1])) return DLE_OK;
  scope s = {.n = 0};
  dle_tensor *x = dle_node_input(n, 0), *t = dle_node_input(n, 1), *lse = dle_node_output(n, 1);
  dle_tensor *g = NULL;
  if (gout[0])
    g = call(&s, DLE_OP_CROSS_ENTROPY_BACKWARD, (dle_tensor *[]){gout[0], x, t, lse}, 4,
             dle_node_attrs(n));
  if (gout[1]) g = add_opt(&s, g, bin(&s, DLE_OP_MUL, lse_probs(&s, x, lse), unsq(&s, gout[1], 1)));
  gin[0] = give(&s, g);
  return scope_end(&s, gin, 1);
}

/* d loss = sum_c G[., c] dx[., c] with G the backward at gy = 1; d lse = sum_c p dx */
DLE_JVP_RULE(jvp_ce) {
  if (!tin[0]) return DLE_OK;
  scope s = {.n = 0};
  dle_tensor *ones = NULL;
  ones = keep(&s,
              dle_full_on(&ones, outs[0]->ndim, outs[0]->sizes, 1.0, outs[0]->dtype,
                          dle_tensor_device(outs[0])),
              &ones);
  dle_tensor *g = call(&s, DLE_OP_CROSS_ENTROPY_BACKWARD,
                       (dle_tensor *[]){ones, ins[0], ins[1], outs[1]}, 4, a);
  dle_tensor *gd = bin(&s, DLE_OP_MUL, g, tin[0]);
  tout[0] = give(&s, a->ints[0] == DLE_REDUCTION_NONE ? rowsum(&s, gd, false) : sumall(&s, gd));
  tout[1] =
      give(&s, rowsum(&s, bin(&s, DLE_OP_MUL, lse_probs(&s, ins[0], outs[1]), tin[0]), false));
  return scope_end(&s, tout, 2);
}

/* The inputs of both cross-entropies' backward ops (gy, x, targets, lse) and p = softmax(x). */
typedef struct {
  dle_tensor *gy, *x, *t, *lse, *p;
} ce_bw_in;

static ce_bw_in ce_bw_of(scope *s, dle_tensor *const *ins) {
  return (ce_bw_in){ins[0], ins[1], ins[2], ins[3], lse_probs(s, ins[1], ins[3])};
}

/* The same from the node of a backward op, for its VJP. */
static ce_bw_in ce_bw_of_node(scope *s, dle_node *n) {
  dle_tensor *ins[4];
  for (int i = 0; i < 4; i++) ins[i] = dle_node_input(n, i);
  return ce_bw_of(s, ins);
}

/* In the backward ops of both cross-entropies (inputs gy, x, targets, lse) x and lse enter only as
 * x - lse, so lse's gradient is minus the row sums of x's gradient dx: gives both as n needs them. */
static void give_dx_dlse(scope *s, dle_node *n, dle_tensor *dx, dle_tensor **gin) {
  if (dle_node_needs_grad(n, 1)) gin[1] = give(s, dx);
  if (dle_node_needs_grad(n, 3)) gin[3] = give(s, unary(s, DLE_OP_NEG, rowsum(s, dx, false)));
}

/* Z = w (p - q) with w = rw gy (rw the row weights): inputs gy, x, targets, lse */
static dle_status vjp_ce_backward(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  dle_tensor *g = gout[0];
  if (!g) return DLE_OK;
  const dle_attrs *a = dle_node_attrs(n);
  scope s = {.n = 0};
  ce_bw_in b = ce_bw_of_node(&s, n);
  dle_tensor *rw = ce_row_weights(&s, a, b.t, b.x->dtype);
  if (dle_node_needs_grad(n, 0)) {
    dle_tensor *q = ce_smoothed(&s, a, b.t, b.x->sizes[1], b.x->dtype);
    dle_tensor *d = rowsum(&s, bin(&s, DLE_OP_MUL, g, bin(&s, DLE_OP_SUB, b.p, q)), false);
    gin[0] = give(&s, sum_to(&s, bin(&s, DLE_OP_MUL, d, rw), b.gy->ndim, b.gy->sizes));
  }
  if (dle_node_needs_grad(n, 1) || dle_node_needs_grad(n, 3)) {
    dle_tensor *w = unsq(&s, bin(&s, DLE_OP_MUL, rw, b.gy), 1);
    give_dx_dlse(&s, n, bin(&s, DLE_OP_MUL, bin(&s, DLE_OP_MUL, w, b.p), g), gin);
  }
  return scope_end(&s, gin, 4);
}

DLE_JVP_RULE(jvp_ce_backward) {
  if (!tin[0] && !tin[1] && !tin[3]) return DLE_OK;
  scope s = {.n = 0};
  ce_bw_in b = ce_bw_of(&s, ins);
  dle_tensor *rw = ce_row_weights(&s, a, b.t, b.x->dtype), *acc = NULL;
  if (tin[0]) {
    dle_tensor *q = ce_smoothed(&s, a, b.t, b.x->sizes[1], b.x->dtype);
    acc = bin(&s, DLE_OP_MUL, unsq(&s, bin(&s, DLE_OP_MUL, rw, tin[0]), 1),
              bin(&s, DLE_OP_SUB, b.p, q));
  }
  if (tin[1] || tin[3]) {
    dle_tensor *d = sub_opt(&s, tin[1], tin[3] ? unsq(&s, tin[3], 1) : NULL);
    dle_tensor *w = unsq(&s, bin(&s, DLE_OP_MUL, rw, b.gy), 1);
    acc = add_opt(&s, acc, bin(&s, DLE_OP_MUL, bin(&s, DLE_OP_MUL, w, b.p), d));
  }
  tout[0] = give(&s, acc);
  return scope_end(&s, tout, 1);
}

/* ---- cross-entropy against class probabilities ---- */

/* the row weights c gy, broadcastable to {N, C}: {N, 1} (none) or a scalar */
static dle_tensor *soft_row_w(scope *s, const dle_attrs *a, dle_tensor *gy, int64_t rows) {
  return is_none(a) ? unsq(s, gy, 1) : muls(s, gy, mean_scale(a, rows));
}

/* S = (1 - eps) sum_c t + eps {N, 1};  q = (1 - eps) t + eps/C */
static dle_tensor *soft_sq(scope *s, const dle_attrs *a, dle_tensor *t) {
  return adds(s, muls(s, rowsum(s, t, true), 1 - a->f[0]), a->f[0]);
}
static dle_tensor *soft_q(scope *s, const dle_attrs *a, dle_tensor *t) {
  return adds(s, muls(s, t, 1 - a->f[0]), a->f[0] / (double)t->sizes[1]);
}

static dle_status vjp_soft_ce(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] && !gout[1]) return DLE_OK;
  const dle_attrs *a = dle_node_attrs(n);
  scope s = {.n = 0};
  dle_tensor *x = dle_node_input(n, 0), *t = dle_node_input(n, 1), *lse = dle_node_output(n, 1);
  if (dle_node_needs_grad(n, 0)) {
    dle_tensor *g = NULL;
    if (gout[0])
      g = call(&s, DLE_OP_SOFT_CROSS_ENTROPY_BACKWARD, (dle_tensor *[]){gout[0], x, t, lse}, 4, a);
    if (gout[1])
      g = add_opt(&s, g, bin(&s, DLE_OP_MUL, lse_probs(&s, x, lse), unsq(&s, gout[1], 1)));
    gin[0] = give(&s, g);
  }
  if (dle_node_needs_grad(n, 1) && gout[0]) {
    dle_tensor *w = soft_row_w(&s, a, gout[0], x->sizes[0]);
    gin[1] = give(&s, muls(&s, bin(&s, DLE_OP_MUL, w, bin(&s, DLE_OP_SUB, x, unsq(&s, lse, 1))),
                           -(1 - a->f[0])));
  }
  return scope_end(&s, gin, 2);
}

DLE_JVP_RULE(jvp_soft_ce) {
  if (!tin[0] && !tin[1]) return DLE_OK;
  scope s = {.n = 0};
  dle_tensor *x = ins[0], *t = ins[1], *lse = outs[1], *acc = NULL;
  if (tin[0]) {
    dle_tensor *g1 = call(&s, DLE_OP_SOFT_CROSS_ENTROPY_BACKWARD,
                          (dle_tensor *[]){ones_like(&s, outs[0]), x, t, lse}, 4, a);
    acc = bin(&s, DLE_OP_MUL, g1, tin[0]);
    tout[1] = give(&s, rowsum(&s, bin(&s, DLE_OP_MUL, lse_probs(&s, x, lse), tin[0]), false));
  }
  if (tin[1]) {
    double k = -(1 - a->f[0]) * mean_scale(a, x->sizes[0]);
    acc =
        add_opt(&s, acc,
                muls(&s, bin(&s, DLE_OP_MUL, bin(&s, DLE_OP_SUB, x, unsq(&s, lse, 1)), tin[1]), k));
  }
  tout[0] = give(&s, reduce_terms(&s, a, acc, true));
  return scope_end(&s, tout, 2);
}

/* inputs gy, x, t, lse; G = w (p S - q) */
static dle_status vjp_soft_ce_backward(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  dle_tensor *g = gout[0];
  if (!g) return DLE_OK;
  const dle_attrs *a = dle_node_attrs(n);
  scope s = {.n = 0};
  ce_bw_in b = ce_bw_of_node(&s, n);
  dle_tensor *sq = soft_sq(&s, a, b.t);
  int64_t rows = b.x->sizes[0];
  if (dle_node_needs_grad(n, 0)) {
    dle_tensor *psq = bin(&s, DLE_OP_SUB, bin(&s, DLE_OP_MUL, b.p, sq), soft_q(&s, a, b.t));
    dle_tensor *d = muls(&s, rowsum(&s, bin(&s, DLE_OP_MUL, g, psq), false), mean_scale(a, rows));
    gin[0] = give(&s, sum_to(&s, d, b.gy->ndim, b.gy->sizes));
  }
  dle_tensor *w = soft_row_w(&s, a, b.gy, rows), *wg = bin(&s, DLE_OP_MUL, w, g);
  if (dle_node_needs_grad(n, 1) || dle_node_needs_grad(n, 3)) {
    give_dx_dlse(&s, n, bin(&s, DLE_OP_MUL, bin(&s, DLE_OP_MUL, wg, sq), b.p), gin);
  }
  if (dle_node_needs_grad(n, 2)) { /* w (1 - eps) (sum_c g p - g) */
    dle_tensor *d = bin(&s, DLE_OP_SUB, rowsum(&s, bin(&s, DLE_OP_MUL, g, b.p), true), g);
    gin[2] = give(&s, muls(&s, bin(&s, DLE_OP_MUL, w, d), 1 - a->f[0]));
  }
  return scope_end(&s, gin, 4);
}

/* dG = c dgy (p S - q) + w (S p (dx - dlse) + (1 - eps) (p sum_c dt - dt)) */
DLE_JVP_RULE(jvp_soft_ce_backward) {
  if (!tin[0] && !tin[1] && !tin[2] && !tin[3]) return DLE_OK;
  scope s = {.n = 0};
  ce_bw_in b = ce_bw_of(&s, ins);
  dle_tensor *sq = soft_sq(&s, a, b.t), *acc = NULL, *inner = NULL;
  int64_t rows = b.x->sizes[0];
  if (tin[0]) {
    dle_tensor *psq = bin(&s, DLE_OP_SUB, bin(&s, DLE_OP_MUL, b.p, sq), soft_q(&s, a, b.t));
    acc = bin(&s, DLE_OP_MUL, soft_row_w(&s, a, tin[0], rows), psq);
  }
  dle_tensor *dl = tin[3] ? unsq(&s, tin[3], 1) : NULL, *dxl = sub_opt(&s, tin[1], dl);
  if (dxl) inner = bin(&s, DLE_OP_MUL, bin(&s, DLE_OP_MUL, sq, b.p), dxl);
  if (tin[2]) {
    dle_tensor *dt =
        bin(&s, DLE_OP_SUB, bin(&s, DLE_OP_MUL, b.p, rowsum(&s, tin[2], true)), tin[2]);
    inner = add_opt(&s, inner, muls(&s, dt, 1 - a->f[0]));
  }
  if (inner) acc = add_opt(&s, acc, bin(&s, DLE_OP_MUL, soft_row_w(&s, a, b.gy, rows), inner));
  tout[0] = give(&s, acc);
  return scope_end(&s, tout, 1);
}

void dle_grad_register_losses(dle_grad_rule *r) {
  r[DLE_OP_CROSS_ENTROPY] = (dle_grad_rule){vjp_ce, jvp_ce, DLE_SAVE(0) | DLE_SAVE(1), true};
  r[DLE_OP_CROSS_ENTROPY_BACKWARD] =
      (dle_grad_rule){vjp_ce_backward, jvp_ce_backward, DLE_SAVE_ALL, false};
  r[DLE_OP_MSE_LOSS] = (dle_grad_rule){vjp_mse, jvp_mse, DLE_SAVE(0) | DLE_SAVE(1), 0};
  r[DLE_OP_MSE_LOSS_BACKWARD] =
      (dle_grad_rule){vjp_mse_backward, jvp_mse_backward, DLE_SAVE_ALL, 0};
  r[DLE_OP_NLL_LOSS] = (dle_grad_rule){vjp_nll, jvp_nll, DLE_SAVE(1), 0};
  r[DLE_OP_NLL_LOSS_BACKWARD] = (dle_grad_rule){vjp_nll_backward, jvp_nll_backward, DLE_SAVE(1), 0};
  r[DLE_OP_BCE_WITH_LOGITS] = (dle_grad_rule){vjp_bce, jvp_bce, DLE_SAVE_ALL, 0};
  r[DLE_OP_BCE_WITH_LOGITS_BACKWARD] =
      (dle_grad_rule){vjp_bce_backward, jvp_bce_backward, DLE_SAVE_ALL, 0};
  r[DLE_OP_SOFT_CROSS_ENTROPY] =
      (dle_grad_rule){vjp_soft_ce, jvp_soft_ce, DLE_SAVE(0) | DLE_SAVE(1), DLE_SAVE(1)};
  r[DLE_OP_SOFT_CROSS_ENTROPY_BACKWARD] =
      (dle_grad_rule){vjp_soft_ce_backward, jvp_soft_ce_backward, DLE_SAVE_ALL, 0};
}
