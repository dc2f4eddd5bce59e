/* attention.c — shape rules and public wrappers of scaled dot-product attention (kind ATTENTION
 * in ops.def): sdpa and its backward ops sdpa_score_grad and sdpa_backward. Their gradient rules
 * are in attention_grad.c.
 *
 * Inputs compute in float32 (float64 stays), results are cast back to the float dtype of the
 * first input and copied into a caller's outputs (nn_front.h's run). The operands keep their
 * strides when their rows are contiguous (the mask too, expanded to {..., L, S} with stride 0 on
 * broadcast dims, so it is never materialised), and the outputs are laid out like q and k. */
#include "../internal.h"
#include "nn_front.h"

/* An attention operand: t cast to dt, then expanded to {batch..., r, c} (its own last two dims).
 * The CPU kernel reads matrices where they lie when dle_matrices_in_place (engine/nn.h) says so;
 * only other layouts are copied. Other backends get contiguous operands. */
static dle_status prepare_matrices(dle_tensor **out, dle_tensor *t, int nb, const int64_t *batch,
                                   dle_dtype dt) {
  int64_t s[DLE_MAX_DIMS];
  memcpy(s, batch, sizeof *s * (size_t)nb);
  s[nb] = t->sizes[t->ndim - 2], s[nb + 1] = t->sizes[t->ndim - 1];
  dle_tensor *cast = NULL, *e = NULL;
  *out = NULL;
  DLE_TRY(dle_cast_if_needed(&cast, t, dt));
  dle_status st = dle_expand(&e, cast, nb + 2, s);
  dle_tensor_release(cast);
  if (st != DLE_OK) return st;
  if (dle_tensor_device(e).type == DLE_CPU && dle_matrices_in_place(e, nb)) {
    *out = e;
    return DLE_OK;
  }
  st = dle_contiguous(out, e);
  dle_tensor_release(e);
  return st;
}

/* The batch dims (all but the last two) of the n tensors broadcast together into *nb, batch. */
static dle_status batch_of(const char *fn, dle_tensor *const *ts, int n, int *nb, int64_t *batch) {
  *nb = 0;
  for (int i = 0; i < n; i++) {
    int64_t next[DLE_MAX_DIMS];
    int nn;
    DLE_TRY(dle_broadcast_shapes(fn, *nb, batch, ts[i]->ndim - 2, ts[i]->sizes, &nn, next));
    if (nn < 0 || nn + 2 > DLE_MAX_DIMS) return dle_error("%s: too many batch dims", fn);
    *nb = nn;
    memcpy(batch, next, sizeof *batch * (size_t)nn);
  }
  return DLE_OK;
}

/* The batch dims of an attention call (batch_of). */
typedef struct {
  int nb;
  int64_t batch[DLE_MAX_DIMS];
} batch_dims;

/* The batch dims of the n tensors ts into *b, and the shapes of o's outputs from them: output k
 * is {batch..., rc[k][0], rc[k][1]}. */
static dle_status batched_outputs(const char *fn, dle_tensor *const *ts, int n, batch_dims *b,
                                  out_shapes *o, const int64_t (*rc)[2]) {
  DLE_TRY(batch_of(fn, ts, n, &b->nb, b->batch));
  for (int k = 0; k < o->nout; k++) {
    int64_t s[DLE_MAX_DIMS];
    memcpy(s, b->batch, sizeof *s * (size_t)b->nb);
    s[b->nb] = rc[k][0], s[b->nb + 1] = rc[k][1];
    set_shape(o, k, b->nb + 2, s);
  }
  return DLE_OK;
}

static dle_status need_matrix(const char *fn, const char *what, const dle_tensor *t) {
  DLE_TRY(need_numeric(fn, what, t));
  if (t->ndim >= 2) return DLE_OK;
  return dle_error("%s: %s must have at least 2 dims {..., T, D}, got shape %s", fn, what,
                   SHAPE(t));
}

/* The packed form (ints[1] = 1): ins[0] = qkv {3, ..., T, E} (q, k, v stacked on a first dim of
 * 3), then the optional mask; q, k, v become views of it. A self-attention's fused projection
 * {B, T, 3*H*E} viewed {B, T, 3, H, E} and permuted to {3, B, H, T, E} is such an input: its
 * gradient then comes back as one tensor in the projection's layout, for one weight-gradient and
 * one input-gradient product instead of three each and two sums. */
dle_status dle_sdpa_unpack(const char *fn, dle_tensor *qkv, dle_tensor **parts) {
  parts[0] = parts[1] = parts[2] = NULL;
  if (qkv->ndim < 3 || qkv->sizes[0] != 3)
    return dle_error("%s: packed q, k, v must have shape {3, ..., T, E}, got %s", fn, SHAPE(qkv));
  for (int i = 0; i < 3; i++)
    if (dle_select(&parts[i], qkv, 0, i) != DLE_OK) {
      for (int j = 0; j < i; j++) DLE_RELEASE(parts[j]);
      return DLE_ERR;
    }
  return DLE_OK;
}

static dle_status forward_sdpa(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                               const dle_attrs *a) {
  const char *fn = op_name(op);
  if (a->ints[1]) { /* packed: the same op on views */
    if (nin < 1 || nin > 2)
      return dle_error("%s: expected 1 or 2 tensor inputs (qkv[, mask]), got %d", fn, nin);
    dle_tensor *parts[4] = {NULL, NULL, NULL, nin > 1 ? ins[1] : NULL};
    DLE_TRY(dle_sdpa_unpack(fn, ins[0], parts));
    dle_attrs b = *a;
    b.ints[1] = 0;
    dle_status st = forward_sdpa(op, outs, parts, nin + 2, &b);
    for (int i = 0; i < 3; i++) dle_tensor_release(parts[i]);
    return st;
  }
  if (nin < 3 || nin > 4)
    return dle_error("%s: expected 3 or 4 tensor inputs (q, k, v[, mask]), got %d", fn, nin);
  dle_tensor *q = ins[0], *k = ins[1], *v = ins[2], *mask = nin > 3 ? ins[3] : NULL;
  DLE_TRY(need_matrix(fn, "q", q));
  DLE_TRY(need_matrix(fn, "k", k));
  DLE_TRY(need_matrix(fn, "v", v));
  int64_t L = q->sizes[q->ndim - 2], E = q->sizes[q->ndim - 1];
  int64_t S = k->sizes[k->ndim - 2], Ev = v->sizes[v->ndim - 1];
  if (k->sizes[k->ndim - 1] != E)
    return dle_error("%s: q %s and k %s have different feature sizes (%lld vs %lld)", fn, SHAPE(q),
                     SHAPE(k), (long long)E, (long long)k->sizes[k->ndim - 1]);
  if (v->sizes[v->ndim - 2] != S)
    return dle_error("%s: k %s and v %s have different lengths (%lld vs %lld)", fn, SHAPE(k),
                     SHAPE(v), (long long)S, (long long)v->sizes[v->ndim - 2]);
  if (!isfinite(a->f[0])) return dle_error("%s: scale must be finite, got %g", fn, a->f[0]);
  batch_dims b;
  out_shapes o = {.nout = 2};
  DLE_TRY(batched_outputs(fn, ins, 3, &b, &o, (const int64_t[][2]){{L, Ev}, {L, S}}));
  const int64_t *s = o.sizes[1]; /* the scores' shape */
  if (mask) {
    if (mask->dtype != DLE_BOOL && !dle_dtype_is_float(mask->dtype))
      return dle_error(
          "%s: mask must be bool (true = may attend) or float (added to the scores), "
          "got %s",
          fn, dle_dtype_name(mask->dtype));
    int nm;
    int64_t ms[DLE_MAX_DIMS];
    if (dle_broadcast_shapes(fn, mask->ndim, mask->sizes, b.nb + 2, s, &nm, ms) != DLE_OK ||
        !dle_shape_equal(nm, ms, b.nb + 2, s)) {
      char buf[128];
      return dle_error("%s: mask %s does not broadcast to the scores %s", fn, SHAPE(mask),
                       dle_shape_str(buf, sizeof buf, b.nb + 2, s));
    }
  }
  dle_dtype rdt = result_dtype(dle_promote(dle_promote(q->dtype, k->dtype), v->dtype));
  dle_dtype cdt = compute_dtype(rdt);
  dle_tensor *cin[4] = {NULL, NULL, NULL, NULL};
  for (int i = 0; i < 3; i++) prepare_matrices(&cin[i], ins[i], b.nb, b.batch, cdt);
  o.like[0] = cin[0];
  if (mask) { /* cast first (small), then expand: the kernel reads it through strides */
    dle_tensor *c = NULL;
    if (dle_cast_if_needed(&c, mask, mask->dtype == DLE_BOOL ? DLE_BOOL : cdt) == DLE_OK)
      dle_expand(&cin[3], c, b.nb + 2, s);
    dle_tensor_release(c);
  }
  return run(op, outs, &o, cin, nin, a, cdt, rdt, dle_tensor_device(q));
}

/* gout {..., L, Ev}, v {..., S, Ev}, probs {..., L, S} -> {..., L, S} */
static dle_status forward_score_grad(dle_op op, dle_tensor **outs, dle_tensor *const *ins,
                                     const dle_attrs *a) {
  const char *fn = op_name(op);
  dle_tensor *g = ins[0], *v = ins[1], *p = ins[2];
  DLE_TRY(need_matrix(fn, "grad_output", g));
  DLE_TRY(need_matrix(fn, "v", v));
  DLE_TRY(need_matrix(fn, "probs", p));
  int64_t L = p->sizes[p->ndim - 2], S = p->sizes[p->ndim - 1], Ev = v->sizes[v->ndim - 1];
  if (g->sizes[g->ndim - 2] != L || g->sizes[g->ndim - 1] != Ev || v->sizes[v->ndim - 2] != S)
    return dle_error(
        "%s: grad_output %s, v %s and probs %s do not fit ({..., L, Ev}, {..., S, Ev}, "
        "{..., L, S})",
        fn, SHAPE(g), SHAPE(v), SHAPE(p));
  batch_dims b;
  out_shapes o = {.nout = 1};
  DLE_TRY(batched_outputs(fn, ins, 3, &b, &o, (const int64_t[][2]){{L, S}}));
  dle_dtype rdt = result_dtype(dle_promote(dle_promote(g->dtype, v->dtype), p->dtype));
  dle_dtype cdt = compute_dtype(rdt);
  dle_tensor *cin[3];
  for (int i = 0; i < 3; i++) prepare_matrices(&cin[i], ins[i], b.nb, b.batch, cdt);
  return run(op, outs, &o, cin, 3, a, cdt, rdt, dle_tensor_device(g));
}

/* gout {..., L, Ev}, q {..., L, E}, k {..., S, E}, v {..., S, Ev}, probs {..., L, S} ->
 * {..., L, E}, {..., S, E}, {..., S, Ev} */
static dle_status forward_sdpa_backward(dle_op op, dle_tensor **outs, dle_tensor *const *ins,
                                        const dle_attrs *a) {
  const char *fn = op_name(op);
  static const char *what[5] = {"grad_output", "q", "k", "v", "probs"};
  for (int i = 0; i < 5; i++) DLE_TRY(need_matrix(fn, what[i], ins[i]));
  dle_tensor *g = ins[0], *q = ins[1], *k = ins[2], *v = ins[3], *p = ins[4];
  int64_t L = q->sizes[q->ndim - 2], E = q->sizes[q->ndim - 1];
  int64_t S = k->sizes[k->ndim - 2], Ev = v->sizes[v->ndim - 1];
  if (k->sizes[k->ndim - 1] != E || v->sizes[v->ndim - 2] != S || g->sizes[g->ndim - 2] != L ||
      g->sizes[g->ndim - 1] != Ev || p->sizes[p->ndim - 2] != L || p->sizes[p->ndim - 1] != S)
    return dle_error(
        "%s: grad_output %s, q %s, k %s, v %s and probs %s do not fit ({..., L, Ev}, "
        "{..., L, E}, {..., S, E}, {..., S, Ev}, {..., L, S})",
        fn, SHAPE(g), SHAPE(q), SHAPE(k), SHAPE(v), SHAPE(p));
  batch_dims b;
  out_shapes o = {.nout = 3};
  DLE_TRY(batched_outputs(fn, ins, 5, &b, &o, (const int64_t[][2]){{L, E}, {S, E}, {S, Ev}}));
  dle_dtype rdt = DLE_BOOL;
  for (int i = 0; i < 5; i++) rdt = i ? dle_promote(rdt, ins[i]->dtype) : ins[i]->dtype;
  rdt = result_dtype(rdt);
  dle_dtype cdt = compute_dtype(rdt);
  dle_tensor *cin[5];
  for (int i = 0; i < 5; i++) prepare_matrices(&cin[i], ins[i], b.nb, b.batch, cdt);
  o.like[0] = cin[1], o.like[1] = cin[2], o.like[2] = cin[3]; /* dq like q, dk like k, dv like v */
  o.write_given = true; /* sdpa's gradient rule hands over views of one buffer for dq, dk, dv */
  return run(op, outs, &o, cin, 5, a, cdt, rdt, dle_tensor_device(q));
}

DLE_FORWARD_RULE(attention) {
  switch (op) {
    case DLE_OP_SDPA: return forward_sdpa(op, outs, ins, nin, a);
    case DLE_OP_SDPA_SCORE_GRAD: return forward_score_grad(op, outs, ins, a);
    case DLE_OP_SDPA_BACKWARD: return forward_sdpa_backward(op, outs, ins, a);
    default: return dle_error("%s: not an attention op", op_name(op));
  }
}

/* ---- FLOPs: the products (flops.c's conventions) ---- */

enum { PER_SDPA_SOFTMAX_GRAD = 3 }; /* sdpa_score_grad: p (d - rowsum(p d)) besides its product */

/* ins[0] is q (or the packed qkv) with E last; outs: out {..., L, Ev}, probs {..., L, S} */
static int64_t sdpa_flops(const dle_flops_call *c, int per) {
  (void)per;
  if (c->nout < 2) return 0;
  return 2 * dle_flops_numel(c->outs[1]) *
         (dle_flops_last_dim(c->ins[0]) + dle_flops_last_dim(c->outs[0]));
}
/* gout {..., L, Ev}, v, probs -> the scores' gradient {..., L, S} */
static int64_t score_grad_flops(const dle_flops_call *c, int per) {
  (void)per;
  return dle_flops_numel(c->outs[0]) * (2 * dle_flops_last_dim(c->ins[0]) + PER_SDPA_SOFTMAX_GRAD);
}
/* gout, q, k, v, probs: d p = gout v^T, d v = p^T gout, d q = ds k, d k = ds^T q */
static int64_t sdpa_backward_flops(const dle_flops_call *c, int per) {
  (void)per;
  if (c->nin != 5) return 0;
  return 4 * dle_flops_numel(c->ins[4]) *
         (dle_flops_last_dim(c->ins[0]) + dle_flops_last_dim(c->ins[1]));
}

dle_flops_rule dle_flops_attention(dle_op op) {
  switch (op) {
    case DLE_OP_SDPA: return (dle_flops_rule){"2*L*S*(E+Ev) per batch and head", sdpa_flops, 0};
    case DLE_OP_SDPA_SCORE_GRAD:
      return (dle_flops_rule){"2*L*S*Ev + 3*L*S per batch and head", score_grad_flops, 0};
    case DLE_OP_SDPA_BACKWARD:
      return (dle_flops_rule){"4*L*S*(E+Ev) per batch and head", sdpa_backward_flops, 0};
    default: return dle_flops_none();
  }
}

/* ---- public wrappers ---- */

dle_status dle_sdpa(dle_tensor **out, dle_tensor **probs, dle_tensor *q, dle_tensor *k,
                    dle_tensor *v, dle_tensor *mask, bool causal, double scale) {
  dle_attrs a = {0};
  a.ints[0] = causal, a.nints = 1;
  a.f[0] = scale;
  dle_tensor *ins[4] = {q, k, v, mask}, *outs[2] = {*out, probs ? *probs : NULL};
  DLE_TRY(dle_op_call(DLE_OP_SDPA, outs, ins, mask ? 4 : 3, &a));
  *out = outs[0];
  if (probs)
    *probs = outs[1];
  else
    dle_tensor_release(outs[1]);
  return DLE_OK;
}

dle_status dle_empty_laid_out_like(dle_tensor **out, const dle_tensor *like, dle_dtype dt) {
  return empty_laid_out_like(out, like->ndim, like->sizes, dt, dle_tensor_device(like), like);
}

dle_status dle_sdpa_packed(dle_tensor **out, dle_tensor **probs, dle_tensor *qkv, dle_tensor *mask,
                           bool causal, double scale) {
  dle_attrs a = {0};
  a.ints[0] = causal, a.ints[1] = 1, a.nints = 2;
  a.f[0] = scale;
  dle_tensor *ins[2] = {qkv, mask}, *outs[2] = {*out, probs ? *probs : NULL};
  DLE_TRY(dle_op_call(DLE_OP_SDPA, outs, ins, mask ? 2 : 1, &a));
  *out = outs[0];
  if (probs)
    *probs = outs[1];
  else
    dle_tensor_release(outs[1]);
  return DLE_OK;
}

dle_status dle_sdpa_score_grad(dle_tensor **out, dle_tensor *gout, dle_tensor *v, dle_tensor *probs,
                               double scale) {
  dle_attrs a = {0};
  a.f[0] = scale;
  dle_tensor *ins[3] = {gout, v, probs};
  return dle_op_call(DLE_OP_SDPA_SCORE_GRAD, out, ins, 3, &a);
}

dle_status dle_sdpa_backward(dle_tensor **dq, dle_tensor **dk, dle_tensor **dv, dle_tensor *gout,
                             dle_tensor *q, dle_tensor *k, dle_tensor *v, dle_tensor *probs,
                             double scale) {
  dle_attrs a = {0};
  a.f[0] = scale;
  dle_tensor *ins[5] = {gout, q, k, v, probs}, *outs[3] = {*dq, *dk, *dv};
  DLE_TRY(dle_op_call(DLE_OP_SDPA_BACKWARD, outs, ins, 5, &a));
  *dq = outs[0], *dk = outs[1], *dv = outs[2];
  return DLE_OK;
}
