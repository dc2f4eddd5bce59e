/* attention_grad.c — reverse (vjp) and forward (jvp) rules of scaled dot-product attention
 * (engine/ops/attention.c), registered by dle_grad_register_attention (engine/ops/families.def).
 * The forward op's gradient is its fused backward ops; their rules are written as composites of
 * dle ops, so gradients of gradients (create_graph) work to any order.
 *
 *   sdpa                 S = scale q k^T + mask, P = softmax(S), out = P v:
 *                        dS = P (dP - rowsum(P dP)) with dP = gout v^T (+ the probs' own gradient),
 *                        dq = scale dS k, dk = scale dS^T q, dv = P^T gout, d mask = dS.
 *   sdpa_score_grad      Z = s P (A - rowsum(P A)) with A = gout v^T. */
#include "../autograd.h"
#include "../internal.h"
#include "grad_scope.h"

static dle_tensor *score_grad(scope *s, dle_tensor *g, dle_tensor *v, dle_tensor *p,
                              const dle_attrs *base, double scale) {
  dle_attrs a = *base;
  a.f[0] = scale;
  return call(s, DLE_OP_SDPA_SCORE_GRAD, (dle_tensor *[]){g, v, p}, 3, &a);
}

/* input i's gradient g, summed to its shape */
static dle_tensor *to_input(scope *s, dle_node *n, int i, dle_tensor *g) {
  return g ? sum_to(s, g, dle_node_input_ndim(n, i), dle_node_input_sizes(n, i)) : NULL;
}

/* The packed form's q, k, v (views of input 0, kept by the scope) or the three inputs. */
static void sdpa_qkv(scope *s, dle_tensor *const *ins, bool packed, dle_tensor **qkv) {
  for (int i = 0; i < 3; i++) qkv[i] = packed ? NULL : ins[i];
  if (!packed || !ok(s)) return;
  if (dle_sdpa_unpack("sdpa", ins[0], qkv) != DLE_OK) {
    s->st = DLE_ERR;
    return;
  }
  for (int i = 0; i < 3; i++) keep(s, DLE_OK, &qkv[i]);
}

/* The packed input's gradient from those of q, k, v (NULL: zero; NULL when all are), stacked with
 * differentiable ops (vjp_sdpa's fast path writes them into one buffer instead). */
static dle_tensor *stack_qkv(scope *s, dle_tensor *qkv, dle_tensor *const *d) {
  if (!ok(s) || (!d[0] && !d[1] && !d[2])) return NULL;
  dle_tensor *part[3], *r = NULL;
  for (int i = 0; i < 3; i++) {
    part[i] = d[i];
    if (!part[i] && ok(s)) {
      dle_tensor *z = NULL;
      part[i] = keep(s, dle_zeros(&z, qkv->ndim - 1, qkv->sizes + 1, qkv->dtype), &z);
    }
  }
  return ok(s) ? keep(s, dle_stack(&r, part, 3, 0), &r) : NULL;
}

dle_status dle_sdpa_backward_packed(dle_tensor **out, dle_tensor *gout, dle_tensor *qkv,
                                    dle_tensor *probs, const dle_attrs *a) {
  dle_tensor *x[3] = {NULL, NULL, NULL}, *views[3] = {NULL, NULL, NULL}, *buf = NULL;
  dle_attrs b = *a;
  b.ints[1] = 0;
  dle_status st = dle_sdpa_unpack("sdpa", qkv, x);
  if (st == DLE_OK) st = dle_empty_laid_out_like(&buf, qkv, qkv->dtype);
  if (st == DLE_OK) st = dle_sdpa_unpack("sdpa", buf, views);
  if (st == DLE_OK)
    st = dle_op_call(DLE_OP_SDPA_BACKWARD, views, (dle_tensor *[]){gout, x[0], x[1], x[2], probs},
                     5, &b);
  for (int i = 0; i < 3; i++) {
    DLE_RELEASE(x[i]);
    DLE_RELEASE(views[i]);
  }
  if (st != DLE_OK) DLE_RELEASE(buf);
  *out = buf;
  return st;
}

static dle_status vjp_sdpa(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] && !gout[1]) return DLE_OK;
  const dle_attrs *a = dle_node_attrs(n);
  double scale = a->f[0];
  bool packed = a->ints[1] != 0;
  int mi = packed ? 1 : 3, nin = dle_node_num_inputs(n); /* the mask's input index */
  bool mask_grad = nin > mi && dle_node_needs_grad(n, mi);
  double sk = mask_grad ? 1.0 : scale; /* the mask's gradient is the unscaled score gradient */
  scope s = {.n = 0};
  dle_tensor *ins[3] = {dle_node_input(n, 0), packed ? NULL : dle_node_input(n, 1),
                        packed ? NULL : dle_node_input(n, 2)};
  dle_tensor *x[3], *p = dle_node_output(n, 1), *ds = NULL, *d[3] = {NULL, NULL, NULL};
  sdpa_qkv(&s, ins, packed, x);
  dle_tensor *q = x[0], *k = x[1], *v = x[2];
  bool need[3];
  for (int i = 0; i < 3; i++) need[i] = dle_node_needs_grad(n, packed ? 0 : i);
  if (gout[0] && !gout[1] && !mask_grad &&
      ok(&s)) { /* the common case: one fused kernel for dq, dk, dv */
    dle_tensor *ka[5] = {gout[0], q, k, v, p};
    dle_attrs b = *a;
    b.ints[1] = 0;
    /* no graph to record: the kernel writes into views of one buffer laid out like qkv (the
     * mask broadcasts to the scores, so q, k, v's batch dims are the output's). Under a graph
     * trace, one SDPA_QKV_GRAD record (the tracer records given outputs for result 1 only). */
    if (packed && !dle_grad_enabled()) {
      struct dle_trace *t = dle_tracer_on;
      dle_tensor *buf = NULL;
      dle_tracer_on = NULL;
      dle_status st = dle_sdpa_backward_packed(&buf, gout[0], ins[0], p, a);
      dle_tracer_on = t;
      if (keep(&s, st, &buf)) {
        dle_trace_note_record(DLE_TRACE_SDPA_QKV_GRAD, a, (dle_tensor *[]){gout[0], ins[0], p}, 3,
                              buf);
        gin[0] = give(&s, buf);
      }
      return scope_end(&s, gin, nin);
    }
    if (dle_op_call(DLE_OP_SDPA_BACKWARD, d, ka, 5, &b) != DLE_OK) s.st = DLE_ERR;
    for (int i = 0; i < 3; i++) keep(&s, DLE_OK, &d[i]);
  } else {
    if (gout[0]) ds = score_grad(&s, gout[0], v, p, a, sk);
    if (gout[1]) ds = add_opt(&s, ds, muls(&s, softmax_jvp(&s, p, gout[1]), sk));
    if (mask_grad) {
      gin[mi] = give(&s, sum_to(&s, ds, dle_node_input_ndim(n, mi), dle_node_input_sizes(n, mi)));
      ds = muls(&s, ds, scale);
    }
    if (need[0]) d[0] = mm(&s, ds, k);
    if (need[1]) d[1] = mm(&s, tr(&s, ds), q);
    if (need[2] && gout[0]) d[2] = mm(&s, tr(&s, p), gout[0]);
  }
  if (packed) {
    if (need[0]) gin[0] = give(&s, stack_qkv(&s, ins[0], d));
  } else {
    for (int i = 0; i < 3; i++)
      if (need[i]) gin[i] = give(&s, to_input(&s, n, i, d[i]));
  }
  return scope_end(&s, gin, nin);
}

DLE_JVP_RULE(jvp_sdpa) {
  scope s = {.n = 0};
  bool packed = a->ints[1] != 0;
  dle_tensor *x[3], *t[3], *tm = packed ? (nin > 1 ? tin[1] : NULL) : (nin > 3 ? tin[3] : NULL);
  sdpa_qkv(&s, ins, packed, x);
  if (packed && tin[0])
    sdpa_qkv(&s, tin, true, t);
  else
    for (int i = 0; i < 3; i++) t[i] = packed ? NULL : tin[i];
  dle_tensor *q = x[0], *k = x[1], *v = x[2], *p = outs[1], *ts = NULL;
  if (t[0]) ts = muls(&s, mm(&s, t[0], tr(&s, k)), a->f[0]);
  if (t[1]) ts = add_opt(&s, ts, muls(&s, mm(&s, q, tr(&s, t[1])), a->f[0]));
  if (tm) ts = add_opt(&s, ts, tm);
  dle_tensor *tp = ts ? softmax_jvp(&s, p, ts) : NULL;
  dle_tensor *to = tp ? mm(&s, tp, v) : NULL;
  if (t[2]) to = add_opt(&s, to, mm(&s, p, t[2]));
  tout[0] = give(&s, to);
  tout[1] = give(&s, tp);
  return scope_end(&s, tout, 2);
}

/* The adjoint of Z = s P (A - rowsum(P A)), A = gout v^T, at G: the gradients of <G, Z> in gout,
 * v and P, into *dgo, *dv, *dp (each only when its pointer is given; shapes broadcast, not summed) */
static void score_grad_adjoint(scope *s, dle_tensor *g, dle_tensor *go, dle_tensor *v,
                               dle_tensor *p, double sc, dle_tensor **dgo, dle_tensor **dv,
                               dle_tensor **dp) {
  if (dgo || dv) {
    dle_tensor *ga = muls(s, softmax_jvp(s, p, g), sc); /* d/dA */
    if (dgo) *dgo = mm(s, ga, v);
    if (dv) *dv = mm(s, tr(s, ga), go);
  }
  if (dp) { /* s (G A - G rowsum(P A) - A rowsum(G P)) */
    dle_tensor *am = mm(s, go, tr(s, v));
    dle_tensor *r = rowsum(s, bin(s, DLE_OP_MUL, p, am), true);
    dle_tensor *gp = rowsum(s, bin(s, DLE_OP_MUL, g, p), true);
    dle_tensor *x = bin(s, DLE_OP_SUB, bin(s, DLE_OP_MUL, g, bin(s, DLE_OP_SUB, am, r)),
                        bin(s, DLE_OP_MUL, am, gp));
    *dp = muls(s, x, sc);
  }
}

/* The tangent of Z given tangents of gout, v, P (NULL: zero; result NULL when all are):
 * dZ = s (U - P rowsum(U) - dP rowsum(P A)), U = dP A + P dA, dA = d gout v^T + gout dv^T */
static dle_tensor *score_grad_tangent(scope *s, dle_tensor *go, dle_tensor *v, dle_tensor *p,
                                      double sc, dle_tensor *tgo, dle_tensor *tv, dle_tensor *tp) {
  dle_tensor *am = mm(s, go, tr(s, v)), *ta = NULL, *u = NULL;
  if (tgo) ta = mm(s, tgo, tr(s, v));
  if (tv) ta = add_opt(s, ta, mm(s, go, tr(s, tv)));
  if (tp) u = bin(s, DLE_OP_MUL, tp, am);
  if (ta) u = add_opt(s, u, bin(s, DLE_OP_MUL, p, ta));
  if (!u) return NULL;
  dle_tensor *z = bin(s, DLE_OP_SUB, u, bin(s, DLE_OP_MUL, p, rowsum(s, u, true)));
  if (tp)
    z = bin(s, DLE_OP_SUB, z, bin(s, DLE_OP_MUL, tp, rowsum(s, bin(s, DLE_OP_MUL, p, am), true)));
  return muls(s, z, sc);
}

static dle_status vjp_score_grad(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  scope s = {.n = 0};
  dle_tensor *d[3] = {NULL, NULL, NULL};
  score_grad_adjoint(&s, gout[0], dle_node_input(n, 0), dle_node_input(n, 1), dle_node_input(n, 2),
                     dle_node_attrs(n)->f[0], dle_node_needs_grad(n, 0) ? &d[0] : NULL,
                     dle_node_needs_grad(n, 1) ? &d[1] : NULL,
                     dle_node_needs_grad(n, 2) ? &d[2] : NULL);
  for (int i = 0; i < 3; i++) gin[i] = give(&s, to_input(&s, n, i, d[i]));
  return scope_end(&s, gin, 3);
}

DLE_JVP_RULE(jvp_score_grad) {
  scope s = {.n = 0};
  tout[0] =
      give(&s, score_grad_tangent(&s, ins[0], ins[1], ins[2], a->f[0], tin[0], tin[1], tin[2]));
  return scope_end(&s, tout, 1);
}

/* sdpa_backward(gout, q, k, v, P) = (D k, D^T q, P^T gout) with D = score_grad(gout, v, P).
 * Its adjoint at (Gq, Gk, Gv): through D with H = Gq k^T + q Gk^T (score_grad_adjoint), plus
 * d k = D^T Gq, d q = D Gk, d P = gout Gv^T, d gout = P Gv. */
static dle_status vjp_sdpa_backward(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] && !gout[1] && !gout[2]) return DLE_OK;
  double sc = dle_node_attrs(n)->f[0];
  scope s = {.n = 0};
  dle_tensor *go = dle_node_input(n, 0), *q = dle_node_input(n, 1), *k = dle_node_input(n, 2);
  dle_tensor *v = dle_node_input(n, 3), *p = dle_node_input(n, 4);
  dle_tensor *gq = gout[0], *gk = gout[1], *gv = gout[2];
  dle_tensor *ds = score_grad(&s, go, v, p, dle_node_attrs(n), sc);
  dle_tensor *h = gq ? mm(&s, gq, tr(&s, k)) : NULL, *d[5] = {NULL, NULL, NULL, NULL, NULL};
  if (gk) h = add_opt(&s, h, mm(&s, q, tr(&s, gk)));
  if (h)
    score_grad_adjoint(&s, h, go, v, p, sc, dle_node_needs_grad(n, 0) ? &d[0] : NULL,
                       dle_node_needs_grad(n, 3) ? &d[3] : NULL,
                       dle_node_needs_grad(n, 4) ? &d[4] : NULL);
  if (gk && dle_node_needs_grad(n, 1)) d[1] = mm(&s, ds, gk);
  if (gq && dle_node_needs_grad(n, 2)) d[2] = mm(&s, tr(&s, ds), gq);
  if (gv && dle_node_needs_grad(n, 4)) d[4] = add_opt(&s, d[4], mm(&s, go, tr(&s, gv)));
  if (gv && dle_node_needs_grad(n, 0)) d[0] = add_opt(&s, d[0], mm(&s, p, gv));
  for (int i = 0; i < 5; i++) gin[i] = give(&s, to_input(&s, n, i, d[i]));
  return scope_end(&s, gin, 5);
}

/* d(D k) = dD k + D dk, d(D^T q) = dD^T q + D^T dq, d(P^T gout) = dP^T gout + P^T d gout */
DLE_JVP_RULE(jvp_sdpa_backward) {
  scope s = {.n = 0};
  dle_tensor *go = ins[0], *q = ins[1], *k = ins[2], *v = ins[3], *p = ins[4];
  dle_tensor *ds = score_grad(&s, go, v, p, a, a->f[0]);
  dle_tensor *tds = score_grad_tangent(&s, go, v, p, a->f[0], tin[0], tin[3], tin[4]);
  dle_tensor *tq = tds ? mm(&s, tds, k) : NULL, *tk = tds ? mm(&s, tr(&s, tds), q) : NULL,
             *tv = NULL;
  if (tin[2]) tq = add_opt(&s, tq, mm(&s, ds, tin[2]));
  if (tin[1]) tk = add_opt(&s, tk, mm(&s, tr(&s, ds), tin[1]));
  if (tin[4]) tv = mm(&s, tr(&s, tin[4]), go);
  if (tin[0]) tv = add_opt(&s, tv, mm(&s, tr(&s, p), tin[0]));
  (void)outs; /* a missing tangent is zero; one that broadcasts is expanded by the engine */
  tout[0] = give(&s, tq);
  tout[1] = give(&s, tk);
  tout[2] = give(&s, tv);
  return scope_end(&s, tout, 3);
}

void dle_grad_register_attention(dle_grad_rule *r) {
  r[DLE_OP_SDPA] =
      (dle_grad_rule){vjp_sdpa, jvp_sdpa, DLE_SAVE(0) | DLE_SAVE(1) | DLE_SAVE(2), true};
  r[DLE_OP_SDPA_SCORE_GRAD] = (dle_grad_rule){vjp_score_grad, jvp_score_grad, DLE_SAVE_ALL, false};
  r[DLE_OP_SDPA_BACKWARD] =
      (dle_grad_rule){vjp_sdpa_backward, jvp_sdpa_backward, DLE_SAVE_ALL, false};
}
