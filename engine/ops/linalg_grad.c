/* linalg_grad.c — reverse (vjp) and forward (jvp) rules of the linalg family (engine/ops/linalg.c),
 * registered by dle_grad_register_linalg (engine/ops/families.def). Real matrices; written with dle
 * ops (the family's own included), so they can be differentiated again.
 *
 * The published rules (Giles 2008 "An extended collection of matrix derivative results"; Murray
 * 2016 for Cholesky; Walter and Lehmann 2018 / Liao et al. 2019 for QR; Townsend 2016 and
 * PyTorch's FunctionsManual for SVD and eigh). With ^T the transpose of the last two dims:
 *   solve  X = A^-1 B:  gB = A^-T gX, gA = -gB X^T;            tX = A^-1 (tB - tA X)
 *   inv    Y = A^-1:    gA = -Y^T gY Y^T;                      tY = -Y tA Y
 *   det    d:           gA = g d A^-T;                         td = d tr(A^-1 tA)
 *   slogdet (s, l):     gA = gl A^-T (s has none);             tl = tr(A^-1 tA)
 *   cholesky A = L L^T: gA = L^-T Phi(L^T gL) L^-1, Phi = tril, strict lower part mirrored up and
 *                       halved (symmetric);                    tL = L tril_half(L^-1 tA L^-T)
 *   qr A = QR (reduced, m >= n): M = R gR^T - gQ^T Q, gA = (gQ + Q copyltu(M)) R^-T;
 *                       W = tA R^-1, X = Q^T W, O = skew from X's strict lower part,
 *                       tR = (X - O) R, tQ = W - Q (X - O)
 *   svd A = U S Vh (reduced): F_jk = 1/(s_k^2 - s_j^2) off the diagonal, 0 on it;
 *                       gA = U [F o (J - J^T) S + S F o (K - K^T) + diag(gS)] Vh
 *                            + (I - UU^T) gU S^-1 Vh + U S^-1 gV^T (I - VV^T),  J = U^T gU, K = V^T gV
 *                       P = U^T tA V: tS = diag(P), tU = U (F o (P S + S P^T)) + (tA V - U P) S^-1,
 *                       tV = V (F o (S P + P^T S)) + (tA^T U - V P^T) S^-1
 *   eigh A = Q diag(L) Q^T: F_ij = 1/(L_j - L_i) off the diagonal;
 *                       gA = Q [F o (Q^T gQ - gQ^T Q)/2 + diag(gL)] Q^T;
 *                       P = Q^T tA Q: tL = diag(P), tQ = Q (F o P)
 * The SVD and eigh rules need distinct singular values / eigenvalues (F is infinite otherwise,
 * as in PyTorch; the gradient of S or L alone is always finite). The det rule needs A
 * invertible (a singular A's gradient fails with inv's error); QR's rules only reduced QR with
 * m >= n, SVD's only the reduced SVD (full_matrices with m != n is an error). */
#include "../autograd.h"
#include "../internal.h"

/* ---- a scope of temporaries: each helper returns a new tensor owned by the scope (NULL after
 * the first error, which the scope keeps); give() hands one out as a new reference ---- */
enum { SCOPE_MAX = 64 };
typedef struct {
  dle_tensor *t[SCOPE_MAX];
  int n;
  dle_status st;
} scope;

/* (takes &o: the call that fills o is another argument, evaluated in no set order) */
static dle_tensor *own(scope *s, dle_status st, dle_tensor **o) {
  dle_tensor *t = *o;
  if (st != DLE_OK || s->st != DLE_OK) {
    s->st = DLE_ERR;
    dle_tensor_release(t);
    return NULL;
  }
  if (s->n == SCOPE_MAX) {
    dle_tensor_release(t);
    s->st = dle_error("linalg gradient: too many temporaries");
    return NULL;
  }
  return s->t[s->n++] = t;
}
#define OK(...) (s->st == DLE_OK && __VA_ARGS__)
static dle_tensor *mT(scope *s, dle_tensor *a) {
  dle_tensor *o = NULL;
  return own(s, OK(a) ? dle_transpose(&o, a, a->ndim - 2, a->ndim - 1) : DLE_ERR, &o);
}
static dle_tensor *mm(scope *s, dle_tensor *a, dle_tensor *b) {
  dle_tensor *o = NULL;
  return own(s, OK(a && b) ? dle_matmul(&o, a, b) : DLE_ERR, &o);
}
static dle_tensor *bin(scope *s, dle_op op, dle_tensor *a, dle_tensor *b) {
  dle_tensor *o = NULL;
  return own(s, OK(a && b) ? dle_binary(op, &o, a, b) : DLE_ERR, &o);
}
#define add(s, a, b) bin(s, DLE_OP_ADD, a, b)
#define sub(s, a, b) bin(s, DLE_OP_SUB, a, b)
#define mul(s, a, b) bin(s, DLE_OP_MUL, a, b)
#define dvd(s, a, b) bin(s, DLE_OP_DIV, a, b)
static dle_tensor *scale(scope *s, dle_tensor *a, double c) {
  dle_tensor *o = NULL;
  return own(s, OK(a) ? dle_binary_scalar(DLE_OP_MUL, &o, a, c, false) : DLE_ERR, &o);
}
static dle_tensor *tri(scope *s, dle_tensor *a, int64_t k, bool lower) {
  dle_tensor *o = NULL;
  return own(s, OK(a) ? (lower ? dle_tril(&o, a, k) : dle_triu(&o, a, k)) : DLE_ERR, &o);
}
/* a with a size-1 dim inserted at d (negative: from the end) */
static dle_tensor *unsq(scope *s, dle_tensor *a, int d) {
  dle_tensor *o = NULL;
  return own(s, OK(a) ? dle_unsqueeze(&o, a, d < 0 ? a->ndim + 1 + d : d) : DLE_ERR, &o);
}
static dle_tensor *linop(scope *s, dle_op op, dle_tensor *a, dle_tensor *b) {
  dle_tensor *o = NULL, *ins[2] = {a, b};
  dle_attrs at = {0};
  return own(s, OK(a) ? dle_op_call(op, &o, ins, b ? 2 : 1, &at) : DLE_ERR, &o);
}
#define inv(s, a)      linop(s, DLE_OP_LINALG_INV, a, NULL)
#define solve(s, a, b) linop(s, DLE_OP_LINALG_SOLVE, a, b)
/* G R^-1 (right division by a square matrix) */
static dle_tensor *rdiv(scope *s, dle_tensor *g, dle_tensor *r) {
  return mT(s, solve(s, mT(s, r), mT(s, g)));
}
/* the n x n identity in like's dtype, and 1 - I */
static dle_tensor *eye(scope *s, int64_t n, dle_tensor *like) {
  dle_tensor *o = NULL;
  return own(s, OK(like) ? dle_eye(&o, n, n, like->dtype) : DLE_ERR, &o);
}
static dle_tensor *off_diag(scope *s, int64_t n, dle_tensor *like) {
  dle_tensor *o = NULL, *i = eye(s, n, like);
  return own(s, OK(i) ? dle_binary_scalar(DLE_OP_SUB, &o, i, 1.0, true) : DLE_ERR, &o);
}
/* the vector v {*,n} as the diagonal of {*,n,n} matrices; the diagonal of a {*,n,n} */
static dle_tensor *diag_embed(scope *s, dle_tensor *v) {
  return OK(v) ? mul(s, unsq(s, v, -1), eye(s, v->sizes[v->ndim - 1], v)) : NULL;
}
static dle_tensor *diagonal(scope *s, dle_tensor *a) {
  dle_tensor *o = NULL, *p = OK(a) ? mul(s, a, eye(s, a->sizes[a->ndim - 1], a)) : NULL;
  return own(s, OK(p) ? dle_reduce(DLE_OP_SUM, &o, p, 1, (int[]){p->ndim - 1}, false, 0) : DLE_ERR,
             &o);
}
/* sum over the last two dims */
static dle_tensor *sum2(scope *s, dle_tensor *a) {
  dle_tensor *o = NULL;
  return own(s,
             OK(a) ? dle_reduce(DLE_OP_SUM, &o, a, 2, (int[]){a->ndim - 2, a->ndim - 1}, false, 0)
                   : DLE_ERR,
             &o);
}
/* F_jk = 1/(w_k - w_j) off the diagonal, 0 on it, for the vector w {*,n} */
static dle_tensor *gap_inverse(scope *s, dle_tensor *w) {
  if (!OK(w)) return NULL;
  int64_t n = w->sizes[w->ndim - 1];
  dle_tensor *e = add(s, sub(s, unsq(s, w, -2), unsq(s, w, -1)), eye(s, n, w));
  return dvd(s, off_diag(s, n, w), e);
}
/* Ends a rule: *out = t (a new reference) when the scope has no error; releases the scope. */
static dle_status give(scope *s, dle_tensor *t, dle_tensor **out) {
  if (s->st == DLE_OK && t) {
    dle_tensor_retain(t);
    *out = t;
  }
  return s->st;
}
static dle_status close_scope(scope *s, dle_status st) {
  dle_release_all(s->t, s->n);
  s->n = 0;
  return st;
}
#define T2(a) ((a)->sizes[(a)->ndim - 2])
#define T1(a) ((a)->sizes[(a)->ndim - 1])

/* ---- solve, inv ---- */
static dle_status vjp_solve(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  scope sc = {.st = DLE_OK}, *s = &sc;
  dle_tensor *gb = solve(s, mT(s, dle_node_input(n, 0)), gout[0]);
  give(s, gb, &gin[1]);
  if (dle_node_needs_grad(n, 0))
    give(s, scale(s, mm(s, gb, mT(s, dle_node_output(n, 0))), -1), &gin[0]);
  return close_scope(s, s->st);
}
DLE_JVP_RULE(jvp_solve) {
  scope sc = {.st = DLE_OK}, *s = &sc;
  dle_tensor *rhs = tin[1];
  if (tin[0]) {
    dle_tensor *ax = mm(s, tin[0], outs[0]);
    rhs = rhs ? sub(s, rhs, ax) : scale(s, ax, -1);
  }
  if (rhs) give(s, solve(s, ins[0], rhs), &tout[0]);
  return close_scope(s, s->st);
}

static dle_status vjp_inv(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  scope sc = {.st = DLE_OK}, *s = &sc;
  dle_tensor *yt = mT(s, dle_node_output(n, 0));
  give(s, scale(s, mm(s, mm(s, yt, gout[0]), yt), -1), &gin[0]);
  return close_scope(s, s->st);
}
DLE_JVP_RULE(jvp_inv) {
  if (!tin[0]) return DLE_OK;
  scope sc = {.st = DLE_OK}, *s = &sc;
  give(s, scale(s, mm(s, mm(s, outs[0], tin[0]), outs[0]), -1), &tout[0]);
  return close_scope(s, s->st);
}

/* ---- det, slogdet: d log|det A| = tr(A^-1 dA) = sum(A^-T o dA) ---- */
static dle_status vjp_det(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  bool det = dle_node_op(n) == DLE_OP_LINALG_DET;
  dle_tensor *g = gout[det ? 0 : 1];
  if (!g) return DLE_OK;
  scope sc = {.st = DLE_OK}, *s = &sc;
  dle_tensor *w = det ? mul(s, g, dle_node_output(n, 0)) : g;
  give(s, mul(s, unsq(s, unsq(s, w, -1), -1), mT(s, inv(s, dle_node_input(n, 0)))), &gin[0]);
  return close_scope(s, s->st);
}
DLE_JVP_RULE(jvp_det) {
  if (!tin[0]) return DLE_OK;
  scope sc = {.st = DLE_OK}, *s = &sc;
  dle_tensor *tr = sum2(s, mul(s, mT(s, inv(s, ins[0])), tin[0]));
  if (op == DLE_OP_LINALG_DET)
    give(s, mul(s, outs[0], tr), &tout[0]);
  else
    give(s, tr, &tout[1]);
  return close_scope(s, s->st);
}

/* ---- cholesky ---- */
static dle_status vjp_cholesky(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  scope sc = {.st = DLE_OK}, *s = &sc;
  dle_tensor *l = dle_node_output(n, 0), *li = inv(s, l);
  dle_tensor *p = tri(s, mm(s, mT(s, l), gout[0]), 0, true);
  p = scale(s, add(s, p, mT(s, tri(s, p, -1, true))), 0.5);
  give(s, mm(s, mm(s, mT(s, li), p), li), &gin[0]);
  return close_scope(s, s->st);
}
DLE_JVP_RULE(jvp_cholesky) {
  if (!tin[0]) return DLE_OK;
  scope sc = {.st = DLE_OK}, *s = &sc;
  dle_tensor *li = inv(s, outs[0]);
  dle_tensor *x = mm(s, mm(s, li, tin[0]), mT(s, li));
  dle_tensor *phi = scale(s, add(s, tri(s, x, 0, true), tri(s, x, -1, true)), 0.5);
  give(s, mm(s, outs[0], phi), &tout[0]);
  return close_scope(s, s->st);
}

/* The check `ok` of whether a rule supports node n's input (its attrs, rows, columns, shape text). */
typedef dle_status (*support_fn)(const dle_attrs *a, int64_t m, int64_t n, const char *shape);
static dle_status node_supported(dle_node *n, support_fn ok) {
  int nd = dle_node_input_ndim(n, 0);
  const int64_t *sz = dle_node_input_sizes(n, 0);
  char shape[128];
  dle_shape_str(shape, sizeof shape, nd, sz);
  return ok(dle_node_attrs(n), sz[nd - 2], sz[nd - 1], shape);
}

/* ---- qr ---- */
static dle_status qr_supported(const dle_attrs *a, int64_t m, int64_t n, const char *shape) {
  if (m < n || (a->ints[0] && m != n))
    return dle_error(
        "linalg.qr: the derivative is implemented only for mode 'reduced' with at "
        "least as many rows as columns (A has shape %s)",
        shape);
  return DLE_OK;
}
static dle_status vjp_qr(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  DLE_TRY(node_supported(n, qr_supported));
  if (!gout[0] && !gout[1]) return DLE_OK;
  scope sc = {.st = DLE_OK}, *s = &sc;
  dle_tensor *q = dle_node_output(n, 0), *r = dle_node_output(n, 1);
  dle_tensor *m = NULL;
  if (gout[1]) m = mm(s, r, mT(s, gout[1]));
  if (gout[0]) {
    dle_tensor *qq = mm(s, mT(s, gout[0]), q);
    m = m ? sub(s, m, qq) : scale(s, qq, -1);
  }
  dle_tensor *c = add(s, tri(s, m, 0, true), mT(s, tri(s, m, -1, true)));
  dle_tensor *g = mm(s, q, c);
  if (gout[0]) g = add(s, g, gout[0]);
  give(s, mT(s, solve(s, r, mT(s, g))), &gin[0]); /* g R^-T */
  return close_scope(s, s->st);
}
DLE_JVP_RULE(jvp_qr) {
  dle_tensor *x = ins[0];
  DLE_TRY(qr_supported(a, T2(x), T1(x), SHAPE(x)));
  if (!tin[0]) return DLE_OK;
  scope sc = {.st = DLE_OK}, *s = &sc;
  dle_tensor *q = outs[0], *r = outs[1];
  dle_tensor *w = rdiv(s, tin[0], r), *xx = mm(s, mT(s, q), w);
  dle_tensor *low = tri(s, xx, -1, true);
  dle_tensor *u = sub(s, xx, sub(s, low, mT(s, low))); /* X - O: upper triangular */
  give(s, sub(s, w, mm(s, q, u)), &tout[0]);
  give(s, mm(s, u, r), &tout[1]);
  return close_scope(s, s->st);
}

/* ---- svd ---- */
static dle_status svd_supported(const dle_attrs *a, int64_t m, int64_t n, const char *shape) {
  if (a->ints[0] && m != n)
    return dle_error(
        "linalg.svd: the derivative is implemented only for full_matrices = false "
        "(or square matrices; A has shape %s)",
        shape);
  return DLE_OK;
}
/* g S^-1 - W (W^T (g S^-1)): the part of g S^-1 orthogonal to W's columns */
static dle_tensor *off_span(scope *s, dle_tensor *g, dle_tensor *sv, dle_tensor *w) {
  dle_tensor *gs = dvd(s, g, unsq(s, sv, -2));
  return sub(s, gs, mm(s, w, mm(s, mT(s, w), gs)));
}
static dle_status vjp_svd(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  DLE_TRY(node_supported(n, svd_supported));
  int nd = dle_node_input_ndim(n, 0);
  const int64_t *sz = dle_node_input_sizes(n, 0);
  if (!gout[0] && !gout[1] && !gout[2]) return DLE_OK;
  int64_t m = sz[nd - 2], ncol = sz[nd - 1], k = m < ncol ? m : ncol;
  scope sc = {.st = DLE_OK}, *s = &sc;
  dle_tensor *u = dle_node_output(n, 0), *sv = dle_node_output(n, 1), *vh = dle_node_output(n, 2);
  dle_tensor *v = mT(s, vh), *gv = gout[2] ? mT(s, gout[2]) : NULL;
  dle_tensor *f = gap_inverse(s, mul(s, sv, sv));
  dle_tensor *inner = gout[1] ? diag_embed(s, gout[1]) : NULL;
  if (gout[0]) {
    dle_tensor *j = mm(s, mT(s, u), gout[0]);
    dle_tensor *t = mul(s, mul(s, f, sub(s, j, mT(s, j))), unsq(s, sv, -2));
    inner = inner ? add(s, inner, t) : t;
  }
  if (gv) {
    dle_tensor *kk = mm(s, mT(s, v), gv);
    dle_tensor *t = mul(s, unsq(s, sv, -1), mul(s, f, sub(s, kk, mT(s, kk))));
    inner = inner ? add(s, inner, t) : t;
  }
  dle_tensor *g = inner ? mm(s, mm(s, u, inner), vh) : NULL;
  if (gout[0] && m > k) {
    dle_tensor *t = mm(s, off_span(s, gout[0], sv, u), vh);
    g = g ? add(s, g, t) : t;
  }
  if (gv && ncol > k) {
    dle_tensor *t = mm(s, u, mT(s, off_span(s, gv, sv, v)));
    g = g ? add(s, g, t) : t;
  }
  if (g) give(s, g, &gin[0]);
  return close_scope(s, s->st);
}
DLE_JVP_RULE(jvp_svd) {
  dle_tensor *x = ins[0];
  DLE_TRY(svd_supported(a, T2(x), T1(x), SHAPE(x)));
  if (!tin[0]) return DLE_OK;
  int64_t m = T2(x), ncol = T1(x), k = m < ncol ? m : ncol;
  scope sc = {.st = DLE_OK}, *s = &sc;
  dle_tensor *u = outs[0], *sv = outs[1], *v = mT(s, outs[2]), *ta = tin[0];
  dle_tensor *f = gap_inverse(s, mul(s, sv, sv));
  dle_tensor *av = mm(s, ta, v), *p = mm(s, mT(s, u), av), *pt = mT(s, p);
  dle_tensor *srow = unsq(s, sv, -2), *scol = unsq(s, sv, -1);
  dle_tensor *du = mm(s, u, mul(s, f, add(s, mul(s, p, srow), mul(s, scol, pt))));
  dle_tensor *dv = mm(s, v, mul(s, f, add(s, mul(s, scol, p), mul(s, pt, srow))));
  if (m > k) du = add(s, du, dvd(s, sub(s, av, mm(s, u, p)), srow));
  if (ncol > k) dv = add(s, dv, dvd(s, sub(s, mm(s, mT(s, ta), u), mm(s, v, pt)), srow));
  give(s, du, &tout[0]);
  give(s, diagonal(s, p), &tout[1]);
  give(s, mT(s, dv), &tout[2]);
  return close_scope(s, s->st);
}

/* ---- eigh ---- */
static dle_status vjp_eigh(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] && !gout[1]) return DLE_OK;
  scope sc = {.st = DLE_OK}, *s = &sc;
  dle_tensor *l = dle_node_output(n, 0), *q = dle_node_output(n, 1);
  dle_tensor *inner = gout[0] ? diag_embed(s, gout[0]) : NULL;
  if (gout[1]) {
    dle_tensor *j = mm(s, mT(s, q), gout[1]);
    dle_tensor *t = mul(s, gap_inverse(s, l), scale(s, sub(s, j, mT(s, j)), 0.5));
    inner = inner ? add(s, inner, t) : t;
  }
  give(s, mm(s, mm(s, q, inner), mT(s, q)), &gin[0]);
  return close_scope(s, s->st);
}
DLE_JVP_RULE(jvp_eigh) {
  if (!tin[0]) return DLE_OK;
  scope sc = {.st = DLE_OK}, *s = &sc;
  dle_tensor *q = outs[1], *p = mm(s, mm(s, mT(s, q), tin[0]), q);
  give(s, diagonal(s, p), &tout[0]);
  give(s, mm(s, q, mul(s, gap_inverse(s, outs[0]), p)), &tout[1]);
  return close_scope(s, s->st);
}

void dle_grad_register_linalg(dle_grad_rule *r) {
  r[DLE_OP_LINALG_SOLVE] = (dle_grad_rule){vjp_solve, jvp_solve, DLE_SAVE(0), DLE_SAVE(0)};
  r[DLE_OP_LINALG_INV] = (dle_grad_rule){vjp_inv, jvp_inv, 0, DLE_SAVE(0)};
  r[DLE_OP_LINALG_DET] = (dle_grad_rule){vjp_det, jvp_det, DLE_SAVE(0), DLE_SAVE(0)};
  r[DLE_OP_LINALG_SLOGDET] = (dle_grad_rule){vjp_det, jvp_det, DLE_SAVE(0), 0};
  r[DLE_OP_LINALG_CHOLESKY] = (dle_grad_rule){vjp_cholesky, jvp_cholesky, 0, DLE_SAVE(0)};
  r[DLE_OP_LINALG_QR] = (dle_grad_rule){vjp_qr, jvp_qr, 0, DLE_SAVE_ALL};
  r[DLE_OP_LINALG_SVD] = (dle_grad_rule){vjp_svd, jvp_svd, 0, DLE_SAVE_ALL};
  r[DLE_OP_LINALG_EIGH] = (dle_grad_rule){vjp_eigh, jvp_eigh, 0, DLE_SAVE_ALL};
}
