/* norm_grad.c — reverse (vjp) and forward (jvp) rules of the normalization ops (kind NORM).
 *
 * Notation, per statistic (a row of layer_norm, a channel of batch_norm) of n elements:
 *   m, v = stats (mean, biased variance), r = 1/sqrt(v + eps), xhat = (x - m) r,
 *   y = xhat * w + b, g = gy * w, S u = r (u - mean(u) - xhat mean(u xhat)).
 * S is symmetric and is the Jacobian of xhat(x) when m, v are x's own statistics, so
 *   forward op:    gx = S g = grad_input(gy, x, stats, w),  y' = w S x' + w' xhat + b'
 *                  gw, gb = grad_affine(gy, x, stats) = sum gy xhat, sum gy.
 * The gradient ops take stats as an input of their own, and their rules give partial
 * derivatives with respect to it (m and v held apart from x); the forward op's rules pass a
 * gradient arriving at its stats output on to x (dm/dx = 1/n, dv/dx = 2 (x - m)/n). Chained by
 * autograd this gives exact higher derivatives. With L = <u, grad_input(gy, x, stats, w)>,
 * a = mean(g), c = mean(g xhat):
 *   dL/dgy = w S u          dL/dw = sum gy S u
 *   dL/dx  = -r^2 (c u + mean(u xhat) g)      dL/dm = -sum dL/dx
 *   dL/dv  = -r^3/2 * n (mean(u g) - a mean(u) - 3 c mean(u xhat))
 * Everything is written with dle ops (the gradient ops included), so it is differentiable again.
 * batch_norm in eval mode is the affine map y = (x - m) r w + b with constant m, v.
 * group_norm is the same with x seen as {N, G, C / G, HW}, statistics {N, G, 1, 1} and the weight
 * {1, G, C / G, 1}. */
#include "../autograd.h"
#include "../internal.h"
#include "../kernel/norm_geom.h"

/* ---- a scope for the temporaries of a formula: every result is kept until ex_finish; an
 * operand that is NULL after a failure makes the rest a no-op, and ex_finish reports it ---- */
#define EX_MAX 96
typedef struct {
  dle_tensor *t[EX_MAX];
  int n;
  bool failed;
} ex;

/* Keeps *t, the result of a call that returned st (a pointer: C does not order the evaluation
 * of the call and of a plain *t argument). */
static dle_tensor *ex_keep(ex *E, dle_status st, dle_tensor *const *tp) {
  dle_tensor *t = *tp;
  if (st != DLE_OK) {
    E->failed = true;
    return NULL;
  }
  if (E->n == EX_MAX) {
    dle_tensor_release(t);
    dle_error("normalization gradient: too many temporaries");
    E->failed = true;
    return NULL;
  }
  return E->t[E->n++] = t;
}

static bool ex_go(ex *E, dle_tensor *a, dle_tensor *b) {
  if (!E->failed && (!a || !b)) {
    dle_error("normalization gradient: internal error (missing operand)");
    E->failed = true;
  }
  return !E->failed;
}

static dle_tensor *ex_bin(ex *E, dle_op op, dle_tensor *a, dle_tensor *b) {
  dle_tensor *r = NULL;
  if (!ex_go(E, a, b)) return NULL;
  return ex_keep(E, dle_binary(op, &r, a, b), &r);
}

static dle_tensor *ex_scalar(ex *E, dle_op op, dle_tensor *a, double s) {
  dle_tensor *r = NULL;
  if (!ex_go(E, a, a)) return NULL;
  return ex_keep(E, dle_binary_scalar(op, &r, a, s, false), &r);
}

static dle_tensor *ex_unary(ex *E, dle_op op, dle_tensor *a) {
  dle_tensor *r = NULL;
  if (!ex_go(E, a, a)) return NULL;
  return ex_keep(E, dle_unary(op, &r, a), &r);
}

static dle_tensor *ex_reshape(ex *E, dle_tensor *a, int nd, const int64_t *sizes) {
  dle_tensor *r = NULL;
  if (!ex_go(E, a, a)) return NULL;
  return ex_keep(E, dle_reshape(&r, a, nd, sizes), &r);
}

static dle_tensor *ex_sum_to(ex *E, dle_tensor *a, int nd, const int64_t *sizes) {
  dle_tensor *r = NULL;
  if (!ex_go(E, a, a)) return NULL;
  return ex_keep(E, dle_sum_to(&r, a, nd, sizes), &r);
}

/* sum + t where NULL is zero (not a failure: failures are in E->failed) */
static dle_tensor *ex_acc(ex *E, dle_tensor *sum, dle_tensor *t) {
  if (!sum) return t;
  if (!t) return sum;
  return ex_bin(E, DLE_OP_ADD, sum, t);
}

/* Hands each value (retained) to its destination (NULL destinations skipped) and frees the
 * scope; on failure no destination is touched. */
static dle_status ex_finish(ex *E, int n, dle_tensor **const *dst, dle_tensor *const *val) {
  if (!E->failed)
    for (int i = 0; i < n; i++)
      if (dst[i] && val[i]) {
        dle_tensor_retain(val[i]);
        *dst[i] = val[i];
      }
  for (int i = 0; i < E->n; i++) dle_tensor_release(E->t[i]);
  return E->failed ? DLE_ERR : DLE_OK;
}

#define ADD(a, b)  ex_bin(E, DLE_OP_ADD, a, b)
#define SUB(a, b)  ex_bin(E, DLE_OP_SUB, a, b)
#define MUL(a, b)  ex_bin(E, DLE_OP_MUL, a, b)
#define MULS(a, s) ex_scalar(E, DLE_OP_MUL, a, s)
#define NEG(a)     ex_unary(E, DLE_OP_NEG, a)

/* ---- the views of one call (norm_geom.h): x as {Q, S} (layer) or {P, Q, S} (batch); a
 * statistic as {Q, 1} / {1, Q, 1}; a weight as {1, S} / {1, Q, 1} ---- */
typedef struct {
  bool layer;
  int k;          /* layer_norm: normalized dims */
  int64_t groups; /* group_norm: 0 for the others */
  int nd;         /* 2, 3 or 4 */
  int64_t xv[4], sv[4], wv[4], q;
  double n, eps;
  int xnd, pnd;
  int64_t xs[DLE_MAX_DIMS], ps[DLE_MAX_DIMS]; /* x's and the weight's own shapes */
} views;

static views views_of(dle_op op, int xnd, const int64_t *xs, const dle_attrs *a) {
  dle_tensor hdr = {0};
  hdr.ndim = xnd;
  memcpy(hdr.sizes, xs, sizeof(int64_t) * (size_t)xnd);
  dle_norm_geom g = dle_norm_geom_of(op, &hdr, a);
  views v = {0};
  v.layer = dle_norm_is_layer(op);
  v.xnd = xnd;
  memcpy(v.xs, xs, sizeof(int64_t) * (size_t)xnd);
  if (v.layer) {
    v.k = (int)a->ints[0];
    v.nd = 2;
    v.xv[0] = g.q, v.xv[1] = g.s, v.sv[0] = g.q, v.sv[1] = 1, v.wv[0] = 1, v.wv[1] = g.s;
    v.pnd = v.k;
    memcpy(v.ps, xs + xnd - v.k, sizeof(int64_t) * (size_t)v.k);
  } else if (g.groups) {
    int64_t G = g.groups, cg = g.hw ? g.s / g.hw : 0;
    v.groups = G;
    v.nd = 4;
    v.xv[0] = xs[0], v.xv[1] = G, v.xv[2] = cg, v.xv[3] = g.hw;
    v.sv[0] = xs[0], v.sv[1] = G, v.sv[2] = 1, v.sv[3] = 1;
    v.wv[0] = 1, v.wv[1] = G, v.wv[2] = cg, v.wv[3] = 1;
    v.pnd = 1, v.ps[0] = xs[1];
  } else {
    v.nd = 3;
    v.xv[0] = g.p, v.xv[1] = g.q, v.xv[2] = g.s;
    v.sv[0] = 1, v.sv[1] = g.q, v.sv[2] = 1;
    v.wv[0] = 1, v.wv[1] = g.q, v.wv[2] = 1;
    v.pnd = 1, v.ps[0] = g.q;
  }
  v.q = g.q;
  v.n = (double)(g.p * g.s);
  v.eps = a->f[0];
  return v;
}

#define XV(t)   ex_reshape(E, t, v->nd, v->xv) /* x-shaped -> view */
#define WV(t)   ex_reshape(E, t, v->nd, v->wv) /* weight-shaped -> view */
#define TO_X(t) ex_reshape(E, t, v->xnd, v->xs)
#define TO_P(t) ex_reshape(E, t, v->pnd, v->ps)
/* per-statistic mean, kept dims */
#define MEAN_S(t) MULS(ex_sum_to(E, t, v->nd, v->sv), 1.0 / v->n)

/* A view-shaped tangent or gradient that may still broadcast (e.g. {1, S}) as x's own shape. */
static dle_tensor *full_x(ex *E, const views *v, dle_tensor *t) {
  dle_tensor *e = NULL;
  if (!t || E->failed) return NULL;
  if (!dle_shape_equal(t->ndim, t->sizes, v->nd, v->xv)) {
    if (!ex_keep(E, dle_expand(&e, t, v->nd, v->xv), &e)) return NULL;
    t = e;
  }
  return TO_X(t);
}

/* Column `col` (0: mean, 1: variance) of stats {Q, 2}, as a statistic view. */
static dle_tensor *stat_col(ex *E, const views *v, dle_tensor *stats, int col) {
  dle_tensor *c = NULL;
  if (!ex_go(E, stats, stats) || !ex_keep(E, dle_narrow(&c, stats, 1, col, 1), &c)) return NULL;
  return ex_reshape(E, c, v->nd, v->sv);
}

/* Gradients (or tangents) of the mean and variance, as statistic views (NULL: zero), packed into
 * the {Q, 2} layout of stats; NULL when both are zero. */
static dle_tensor *pack_stats(ex *E, const views *v, dle_tensor *dm, dle_tensor *dv) {
  if (E->failed || (!dm && !dv)) return NULL;
  int64_t col[2] = {v->q, 1};
  dle_tensor *c[2] = {dm, dv}, *z = NULL, *r = NULL;
  for (int i = 0; i < 2; i++) {
    if (!c[i] &&
        !ex_keep(E, dle_full_on(&z, 2, col, 0, c[1 - i]->dtype, dle_tensor_device(c[1 - i])), &z))
      return NULL;
    c[i] = c[i] ? ex_reshape(E, c[i], 2, col) : z;
  }
  if (!ex_go(E, c[0], c[1])) return NULL;
  return ex_keep(E, dle_cat(&r, c, 2, 1), &r);
}

/* x, m, v, r, x - m and xhat in views. */
typedef struct {
  dle_tensor *X, *M, *V, *R, *XC, *XH;
} xstats;

static xstats xstats_of(ex *E, const views *v, dle_tensor *x, dle_tensor *stats) {
  xstats s;
  s.X = XV(x);
  s.M = stat_col(E, v, stats, 0);
  s.V = stat_col(E, v, stats, 1);
  s.R = ex_unary(E, DLE_OP_RSQRT, ex_scalar(E, DLE_OP_ADD, s.V, v->eps));
  s.XC = SUB(s.X, s.M);
  s.XH = MUL(s.XC, s.R);
  return s;
}

/* The gradient ops on x-shaped gy, x (w: weight-shaped or NULL). */
static dle_tensor *grad_input(ex *E, const views *v, dle_tensor *gy, dle_tensor *x,
                              dle_tensor *stats, dle_tensor *w) {
  dle_tensor *r = NULL;
  if (!ex_go(E, gy, x) || !ex_go(E, stats, stats)) return NULL;
  dle_status st = v->layer    ? dle_layer_norm_grad_input(&r, gy, x, stats, w, v->k, v->eps)
                  : v->groups ? dle_group_norm_grad_input(&r, gy, x, stats, w, v->groups, v->eps)
                              : dle_batch_norm_grad_input(&r, gy, x, stats, w, v->eps);
  return ex_keep(E, st, &r);
}

static void grad_affine(ex *E, const views *v, dle_tensor *gy, dle_tensor *x, dle_tensor *stats,
                        dle_tensor **gw, dle_tensor **gb) {
  dle_tensor *rw = NULL, *rb = NULL;
  *gw = *gb = NULL;
  if (!ex_go(E, gy, x) || !ex_go(E, stats, stats)) return;
  dle_status st = v->layer ? dle_layer_norm_grad_affine(&rw, &rb, gy, x, stats, v->k, v->eps)
                  : v->groups
                      ? dle_group_norm_grad_affine(&rw, &rb, gy, x, stats, v->groups, v->eps)
                      : dle_batch_norm_grad_affine(&rw, &rb, gy, x, stats, v->eps);
  *gw = ex_keep(E, st, &rw);
  *gb = ex_keep(E, st, &rb);
}

/* Positions of the optional weight and bias among a forward op's inputs (-1: absent). */
static void affine_inputs(const dle_attrs *a, int *wi, int *bi) {
  *wi = a->ints[1] ? 1 : -1;
  *bi = a->ints[2] ? (a->ints[1] ? 2 : 1) : -1;
}

static bool is_eval(dle_op op, const dle_attrs *a) {
  return op == DLE_OP_BATCH_NORM && !a->ints[0];
}

/* ---- layer_norm, batch_norm ---- */

static dle_status vjp_norm(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  dle_op op = dle_node_op(n);
  const dle_attrs *a = dle_node_attrs(n);
  views vs = views_of(op, dle_node_input_ndim(n, 0), dle_node_input_sizes(n, 0), a), *v = &vs;
  int wi, bi;
  affine_inputs(a, &wi, &bi);
  bool eval = is_eval(op, a);
  dle_tensor *x = dle_node_input(n, 0), *w = wi > 0 ? dle_node_input(n, wi) : NULL;
  dle_tensor *stats = dle_node_output(n, 1), *gy = gout[0], *gs = eval ? NULL : gout[1];
  ex ctx = {0}, *E = &ctx;
  dle_tensor *gx = NULL, *gw = NULL, *gb = NULL;
  if (gy && ((wi > 0 && dle_node_needs_grad(n, wi)) || (bi > 0 && dle_node_needs_grad(n, bi))))
    grad_affine(E, v, gy, x, stats, &gw, &gb);
  if (dle_node_needs_grad(n, 0)) {
    if (gy && !eval) {
      gx = grad_input(E, v, gy, x, stats, w);
    } else if (gy) { /* eval: y = x (r w) + const */
      xstats s = xstats_of(E, v, x, stats);
      dle_tensor *scale = w ? MUL(s.R, WV(w)) : s.R;
      gx = TO_X(MUL(XV(gy), scale));
    }
    if (gs) { /* the statistics' own gradient: dm/dx = 1/n, dv/dx = 2 (x - m) / n */
      xstats s = xstats_of(E, v, x, stats);
      dle_tensor *gm = stat_col(E, v, gs, 0), *gv = stat_col(E, v, gs, 1);
      dle_tensor *t = MULS(ADD(gm, MUL(MULS(gv, 2.0), s.XC)), 1.0 / v->n);
      gx = ex_acc(E, gx, TO_X(t));
    }
  }
  return ex_finish(
      E, 3, (dle_tensor * *const[]){&gin[0], wi > 0 ? &gin[wi] : NULL, bi > 0 ? &gin[bi] : NULL},
      (dle_tensor *const[]){gx, gw, gb});
}

DLE_JVP_RULE(jvp_norm) {
  views vs = views_of(op, ins[0]->ndim, ins[0]->sizes, a), *v = &vs;
  int wi, bi;
  affine_inputs(a, &wi, &bi);
  bool eval = is_eval(op, a);
  dle_tensor *x = ins[0], *w = wi > 0 ? ins[wi] : NULL, *stats = outs[1];
  dle_tensor *tx = tin[0], *tw = wi > 0 ? tin[wi] : NULL, *tb = bi > 0 ? tin[bi] : NULL;
  ex ctx = {0}, *E = &ctx;
  xstats s = xstats_of(E, v, x, stats);
  dle_tensor *ty = NULL, *ts = NULL;
  if (tx && !eval) {
    dle_tensor *t = XV(grad_input(E, v, tx, x, stats, NULL)); /* S tx */
    ty = w ? MUL(t, WV(w)) : t;
    dle_tensor *TX = XV(tx);
    ts = pack_stats(E, v, MEAN_S(TX), MULS(MEAN_S(MUL(s.XC, TX)), 2.0));
  } else if (tx) {
    ty = MUL(XV(tx), w ? MUL(s.R, WV(w)) : s.R);
  }
  if (tw) ty = ex_acc(E, ty, MUL(WV(tw), s.XH));
  if (tb) ty = ex_acc(E, ty, WV(tb));
  return ex_finish(E, 2, (dle_tensor * *const[]){&tout[0], &tout[1]},
                   (dle_tensor *const[]){full_x(E, v, ty), ts});
}

/* ---- *_grad_input: inputs gy, x, stats[, w] ---- */

static dle_status vjp_grad_input(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  dle_tensor *u = gout[0];
  if (!u) return DLE_OK;
  dle_op op = dle_node_op(n);
  const dle_attrs *a = dle_node_attrs(n);
  views vs = views_of(op, dle_node_input_ndim(n, 1), dle_node_input_sizes(n, 1), a), *v = &vs;
  bool has_w = dle_node_num_inputs(n) > 3;
  dle_tensor *gy = dle_node_input(n, 0), *x = dle_node_input(n, 1), *stats = dle_node_input(n, 2);
  dle_tensor *w = has_w ? dle_node_input(n, 3) : NULL;
  ex ctx = {0}, *E = &ctx;
  dle_tensor *ggy = NULL, *gx = NULL, *gst = NULL, *gw = NULL;
  dle_tensor *W = w ? WV(w) : NULL, *GY = XV(gy);
  if (dle_node_needs_grad(n, 0) || (has_w && dle_node_needs_grad(n, 3))) {
    dle_tensor *SU = XV(grad_input(E, v, u, x, stats, NULL));
    if (dle_node_needs_grad(n, 0)) ggy = TO_X(W ? MUL(SU, W) : SU);
    if (has_w && dle_node_needs_grad(n, 3)) gw = TO_P(ex_sum_to(E, MUL(GY, SU), v->nd, v->wv));
  }
  if (dle_node_needs_grad(n, 1) || dle_node_needs_grad(n, 2)) {
    xstats s = xstats_of(E, v, x, stats);
    dle_tensor *G = W ? MUL(GY, W) : GY, *U = XV(u);
    dle_tensor *am = MEAN_S(G), *c = MEAN_S(MUL(G, s.XH));
    dle_tensor *um = MEAN_S(U), *uxh = MEAN_S(MUL(U, s.XH)), *R2 = MUL(s.R, s.R);
    dle_tensor *dx = NEG(MUL(R2, ADD(MUL(c, U), MUL(uxh, G))));
    if (dle_node_needs_grad(n, 1)) gx = TO_X(dx);
    if (dle_node_needs_grad(n, 2)) {
      dle_tensor *dm = NEG(ex_sum_to(E, dx, v->nd, v->sv));
      dle_tensor *dldr =
          MULS(SUB(SUB(MEAN_S(MUL(U, G)), MUL(am, um)), MULS(MUL(c, uxh), 3.0)), v->n);
      dle_tensor *dv = MUL(dldr, MULS(MUL(R2, s.R), -0.5));
      gst = pack_stats(E, v, dm, dv);
    }
  }
  return ex_finish(E, 4, (dle_tensor * *const[]){&gin[0], &gin[1], &gin[2], has_w ? &gin[3] : NULL},
                   (dle_tensor *const[]){ggy, gx, gst, gw});
}

DLE_JVP_RULE(jvp_grad_input) {
  views vs = views_of(op, ins[1]->ndim, ins[1]->sizes, a), *v = &vs;
  dle_tensor *gy = ins[0], *x = ins[1], *stats = ins[2], *w = nin > 3 ? ins[3] : NULL;
  dle_tensor *tgy = tin[0], *tx = tin[1], *tst = tin[2], *tw = nin > 3 ? tin[3] : NULL;
  ex ctx = {0}, *E = &ctx;
  dle_tensor *t = NULL;
  if (tgy) t = XV(grad_input(E, v, tgy, x, stats, w));              /* linear in gy */
  if (tw) t = ex_acc(E, t, XV(grad_input(E, v, gy, x, stats, tw))); /* and in w */
  if (tx || tst) {
    xstats s = xstats_of(E, v, x, stats);
    dle_tensor *GY = XV(gy), *G = w ? MUL(GY, WV(w)) : GY;
    dle_tensor *am = MEAN_S(G), *c = MEAN_S(MUL(G, s.XH)), *R2 = MUL(s.R, s.R);
    if (tx) { /* -r^2 (c tx + xhat mean(g tx)) */
      dle_tensor *TX = XV(tx);
      t = ex_acc(E, t, NEG(MUL(R2, ADD(MUL(c, TX), MUL(s.XH, MEAN_S(MUL(G, TX)))))));
    }
    if (tst) { /* m: r^2 tm (c + xhat a);  v: ((g - a) - 3 xhat c) dr, dr = -r^3 tv / 2 */
      dle_tensor *TM = stat_col(E, v, tst, 0), *TV = stat_col(E, v, tst, 1);
      t = ex_acc(E, t, MUL(MUL(R2, TM), ADD(c, MUL(s.XH, am))));
      dle_tensor *dr = MULS(MUL(MUL(R2, s.R), TV), -0.5);
      t = ex_acc(E, t, MUL(SUB(SUB(G, am), MULS(MUL(s.XH, c), 3.0)), dr));
    }
  }
  return ex_finish(E, 1, (dle_tensor * *const[]){&tout[0]}, (dle_tensor *const[]){full_x(E, v, t)});
}

/* ---- *_grad_affine: inputs gy, x, stats; outputs gw = sum gy xhat, gb = sum gy ---- */

static dle_status vjp_grad_affine(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  dle_op op = dle_node_op(n);
  const dle_attrs *a = dle_node_attrs(n);
  views vs = views_of(op, dle_node_input_ndim(n, 1), dle_node_input_sizes(n, 1), a), *v = &vs;
  dle_tensor *gy = dle_node_input(n, 0), *x = dle_node_input(n, 1), *stats = dle_node_input(n, 2);
  ex ctx = {0}, *E = &ctx;
  dle_tensor *ggy = NULL, *gx = NULL, *gst = NULL;
  xstats s = xstats_of(E, v, x, stats);
  dle_tensor *UW = gout[0] ? WV(gout[0]) : NULL, *UB = gout[1] ? WV(gout[1]) : NULL;
  if (dle_node_needs_grad(n, 0)) ggy = full_x(E, v, ex_acc(E, UW ? MUL(UW, s.XH) : NULL, UB));
  if (UW && (dle_node_needs_grad(n, 1) || dle_node_needs_grad(n, 2))) {
    dle_tensor *GU = MUL(XV(gy), UW), *T = MUL(GU, s.R);
    if (dle_node_needs_grad(n, 1)) gx = TO_X(T);
    if (dle_node_needs_grad(n, 2)) {
      dle_tensor *dm = NEG(ex_sum_to(E, T, v->nd, v->sv));
      dle_tensor *dv = MULS(MUL(MUL(s.R, s.R), ex_sum_to(E, MUL(GU, s.XH), v->nd, v->sv)), -0.5);
      gst = pack_stats(E, v, dm, dv);
    }
  }
  return ex_finish(E, 3, (dle_tensor * *const[]){&gin[0], &gin[1], &gin[2]},
                   (dle_tensor *const[]){ggy, gx, gst});
}

DLE_JVP_RULE(jvp_grad_affine) {
  views vs = views_of(op, ins[1]->ndim, ins[1]->sizes, a), *v = &vs;
  dle_tensor *gy = ins[0], *x = ins[1], *stats = ins[2], *tgy = tin[0], *tx = tin[1], *tst = tin[2];
  ex ctx = {0}, *E = &ctx;
  xstats s = xstats_of(E, v, x, stats);
  dle_tensor *tgw = NULL, *tgb = NULL, *dxh = NULL;
  if (tgy) {
    dle_tensor *TGY = XV(tgy);
    tgw = MUL(TGY, s.XH);
    tgb = TO_P(ex_sum_to(E, TGY, v->nd, v->wv));
  }
  /* d xhat = r (x' - m') - xhat r^2 v' / 2 */
  if (tx) dxh = MUL(XV(tx), s.R);
  if (tst) {
    dxh = ex_acc(E, dxh, NEG(MUL(stat_col(E, v, tst, 0), s.R)));
    dxh = ex_acc(E, dxh, MULS(MUL(s.XH, MUL(MUL(s.R, s.R), stat_col(E, v, tst, 1))), -0.5));
  }
  if (dxh) tgw = ex_acc(E, tgw, MUL(XV(gy), dxh));
  if (tgw) tgw = TO_P(ex_sum_to(E, tgw, v->nd, v->wv));
  return ex_finish(E, 2, (dle_tensor * *const[]){&tout[0], &tout[1]},
                   (dle_tensor *const[]){tgw, tgb});
}

void dle_grad_register_norm(dle_grad_rule *r) {
  /* the forward ops read x, the weight and their stats output, never y (not kept alive) */
  r[DLE_OP_LAYER_NORM] = (dle_grad_rule){vjp_norm, jvp_norm, DLE_SAVE_ALL, DLE_SAVE(1)};
  r[DLE_OP_BATCH_NORM] = (dle_grad_rule){vjp_norm, jvp_norm, DLE_SAVE_ALL, DLE_SAVE(1)};
  r[DLE_OP_LAYER_NORM_GRAD_INPUT] =
      (dle_grad_rule){vjp_grad_input, jvp_grad_input, DLE_SAVE_ALL, false};
  r[DLE_OP_BATCH_NORM_GRAD_INPUT] =
      (dle_grad_rule){vjp_grad_input, jvp_grad_input, DLE_SAVE_ALL, false};
  r[DLE_OP_LAYER_NORM_GRAD_AFFINE] =
      (dle_grad_rule){vjp_grad_affine, jvp_grad_affine, DLE_SAVE_ALL, false};
  r[DLE_OP_BATCH_NORM_GRAD_AFFINE] =
      (dle_grad_rule){vjp_grad_affine, jvp_grad_affine, DLE_SAVE_ALL, false};
  r[DLE_OP_GROUP_NORM] = (dle_grad_rule){vjp_norm, jvp_norm, DLE_SAVE_ALL, DLE_SAVE(1)};
  r[DLE_OP_GROUP_NORM_GRAD_INPUT] =
      (dle_grad_rule){vjp_grad_input, jvp_grad_input, DLE_SAVE_ALL, false};
  r[DLE_OP_GROUP_NORM_GRAD_AFFINE] =
      (dle_grad_rule){vjp_grad_affine, jvp_grad_affine, DLE_SAVE_ALL, false};
}
