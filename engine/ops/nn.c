/* nn.c — shape rules and public wrappers of the fused nn ops (kind NN in ops.def): embedding,
 * dropout and scaled dot-product attention, with their backward ops (the losses, softmax
 * cross-entropy included, are in losses.c).
 * Their gradient rules are in nn_grad.c.
 *
 * The kernels get contiguous float inputs in the dtype the op computes in (float64 stays, every
 * other dtype computes in float32), int64 contiguous indices, and fresh contiguous outputs; the
 * results are cast back to the float dtype of the first float input (float16 stays float16) and
 * copied into a caller's outputs. Attention is the exception: its operands keep their strides
 * when their rows are contiguous (the mask too, expanded to {..., L, S} with stride 0 on broadcast
 * dims, so it is never materialised), and its outputs are laid out like q and k. */
#include "../autograd.h"
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

/* ---- embedding ---- */

static dle_status forward_embedding(dle_op op, dle_tensor **outs, dle_tensor *const *ins,
                                    const dle_attrs *a) {
  const char *fn = op_name(op);
  bool back = op == DLE_OP_EMBEDDING_BACKWARD;
  dle_tensor *src = ins[0], *idx = ins[1];
  DLE_TRY(need_numeric(fn, back ? "grad_output" : "weight", src));
  DLE_TRY(need_indices(fn, "indices", idx));
  out_shapes o = {.nout = 1};
  if (!back) {
    if (src->ndim != 2)
      return dle_error("%s: weight must be 2-D {V, D}, got shape %s", fn, SHAPE(src));
    if (idx->ndim + 1 > DLE_MAX_DIMS)
      return dle_error("%s: indices %s have too many dims (at most %d)", fn, SHAPE(idx),
                       DLE_MAX_DIMS - 1);
    set_shape(&o, 0, idx->ndim, idx->sizes);
    o.ndim[0] = idx->ndim + 1;
    o.sizes[0][idx->ndim] = src->sizes[1];
  } else {
    if (src->ndim != idx->ndim + 1 ||
        !dle_shape_equal(idx->ndim, src->sizes, idx->ndim, idx->sizes))
      return dle_error("%s: grad_output must have shape {indices..., D} for indices %s, got %s", fn,
                       SHAPE(idx), SHAPE(src));
    if (a->ints[3] < 0)
      return dle_error("%s: the number of rows V must be >= 0, got %lld", fn,
                       (long long)a->ints[3]);
    int64_t s[2] = {a->ints[3], src->sizes[src->ndim - 1]};
    set_shape(&o, 0, 2, s);
  }
  dle_dtype rdt = result_dtype(src->dtype), cdt = compute_dtype(rdt);
  dle_tensor *cin[2];
  prepare(&cin[0], src, cdt), prepare(&cin[1], idx, DLE_I64);
  return run(op, outs, &o, cin, 2, a, cdt, rdt, dle_tensor_device(src));
}

/* ---- dropout ---- */

static dle_status forward_dropout(dle_op op, dle_tensor **outs, dle_tensor *const *ins,
                                  const dle_attrs *a) {
  dle_tensor *x = ins[0];
  if (!(a->f[0] >= 0 && a->f[0] <= 1))
    return dle_error("dropout: p must be in [0, 1], got %g", a->f[0]);
  out_shapes o = {.nout = 1};
  set_shape(&o, 0, x->ndim, x->sizes);
  dle_dtype rdt = result_dtype(x->dtype), cdt = compute_dtype(rdt);
  dle_tensor *cin[1];
  prepare(&cin[0], x, cdt);
  return run(op, outs, &o, cin, 1, a, cdt, rdt, dle_tensor_device(x));
}

/* ---- attention ---- */

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

/* Output k of o is {batch..., r, c}. */
static void set_batched(out_shapes *o, int k, int nb, const int64_t *batch, int64_t r, int64_t c) {
  int64_t s[DLE_MAX_DIMS];
  memcpy(s, batch, sizeof *s * (size_t)nb);
  s[nb] = r, s[nb + 1] = c;
  set_shape(o, k, nb + 2, s);
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
  int nb;
  int64_t batch[DLE_MAX_DIMS];
  DLE_TRY(batch_of(fn, ins, 3, &nb, batch));
  out_shapes o = {.nout = 2};
  set_batched(&o, 0, nb, batch, L, Ev);
  set_batched(&o, 1, nb, batch, L, S);
  const int64_t *s = o.sizes[1]; /* the scores' shape */
  if (mask) {
    if (mask->dtype != DLE_BOOL && !dle_dtype_is_float(mask->dtype))
      return dle_error(
          "%s: mask must be bool (true = may attend) or float (added to the scores), "
          "got %s",
          fn, dle_dtype_name(mask->dtype));
    int nm;
    int64_t ms[DLE_MAX_DIMS];
    if (dle_broadcast_shapes(fn, mask->ndim, mask->sizes, nb + 2, s, &nm, ms) != DLE_OK ||
        !dle_shape_equal(nm, ms, nb + 2, s)) {
      char buf[128];
      return dle_error("%s: mask %s does not broadcast to the scores %s", fn, SHAPE(mask),
                       dle_shape_str(buf, sizeof buf, nb + 2, s));
    }
  }
  dle_dtype rdt = result_dtype(dle_promote(dle_promote(q->dtype, k->dtype), v->dtype));
  dle_dtype cdt = compute_dtype(rdt);
  dle_tensor *cin[4] = {NULL, NULL, NULL, NULL};
  for (int i = 0; i < 3; i++) prepare_matrices(&cin[i], ins[i], nb, batch, cdt);
  o.like[0] = cin[0];
  if (mask) { /* cast first (small), then expand: the kernel reads it through strides */
    dle_tensor *c = NULL;
    if (dle_cast_if_needed(&c, mask, mask->dtype == DLE_BOOL ? DLE_BOOL : cdt) == DLE_OK)
      dle_expand(&cin[3], c, nb + 2, s);
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
  int nb;
  int64_t batch[DLE_MAX_DIMS];
  DLE_TRY(batch_of(fn, ins, 3, &nb, batch));
  out_shapes o = {.nout = 1};
  set_batched(&o, 0, nb, batch, L, S);
  dle_dtype rdt = result_dtype(dle_promote(dle_promote(g->dtype, v->dtype), p->dtype));
  dle_dtype cdt = compute_dtype(rdt);
  dle_tensor *cin[3];
  for (int i = 0; i < 3; i++) prepare_matrices(&cin[i], ins[i], nb, batch, cdt);
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
  int nb;
  int64_t batch[DLE_MAX_DIMS];
  DLE_TRY(batch_of(fn, ins, 5, &nb, batch));
  out_shapes o = {.nout = 3};
  set_batched(&o, 0, nb, batch, L, E);
  set_batched(&o, 1, nb, batch, S, E);
  set_batched(&o, 2, nb, batch, S, Ev);
  dle_dtype rdt = DLE_BOOL;
  for (int i = 0; i < 5; i++) rdt = i ? dle_promote(rdt, ins[i]->dtype) : ins[i]->dtype;
  rdt = result_dtype(rdt);
  dle_dtype cdt = compute_dtype(rdt);
  dle_tensor *cin[5];
  for (int i = 0; i < 5; i++) prepare_matrices(&cin[i], ins[i], nb, batch, cdt);
  o.like[0] = cin[1], o.like[1] = cin[2], o.like[2] = cin[3]; /* dq like q, dk like k, dv like v */
  o.write_given = true; /* sdpa's gradient rule hands over views of one buffer for dq, dk, dv */
  return run(op, outs, &o, cin, 5, a, cdt, rdt, dle_tensor_device(q));
}

dle_status dle_forward_nn(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                          const dle_attrs *a) {
  switch (op) {
    case DLE_OP_EMBEDDING:
    case DLE_OP_EMBEDDING_BACKWARD: return forward_embedding(op, outs, ins, a);
    case DLE_OP_DROPOUT: return forward_dropout(op, outs, ins, a);
    case DLE_OP_SDPA: return forward_sdpa(op, outs, ins, nin, a);
    case DLE_OP_SDPA_SCORE_GRAD: return forward_score_grad(op, outs, ins, a);
    case DLE_OP_SDPA_BACKWARD: return forward_sdpa_backward(op, outs, ins, a);
    default:
      return dle_forward_losses(op, outs, ins, nin,
                                a); /* the losses (cross_entropy too) are kind NN */
  }
}

/* ---- public wrappers ---- */

static dle_attrs embedding_attrs(bool has_padding, int64_t padding_idx, int64_t base, int64_t v) {
  dle_attrs a = {0};
  a.ints[0] = has_padding, a.ints[1] = padding_idx, a.ints[2] = 0, a.ints[3] = v;
  a.nints = 4;
  a.index_base = base;
  return a;
}

dle_status dle_embedding(dle_tensor **out, dle_tensor *weight, dle_tensor *indices,
                         bool has_padding, int64_t padding_idx, int64_t index_base) {
  dle_attrs a = embedding_attrs(has_padding, padding_idx, index_base, 0);
  dle_tensor *ins[2] = {weight, indices};
  return dle_op_call(DLE_OP_EMBEDDING, out, ins, 2, &a);
}

dle_status dle_embedding_backward(dle_tensor **out, dle_tensor *gy, dle_tensor *indices, int64_t v,
                                  bool has_padding, int64_t padding_idx, int64_t index_base) {
  dle_attrs a = embedding_attrs(has_padding, padding_idx, index_base, v);
  dle_tensor *ins[2] = {gy, indices};
  return dle_op_call(DLE_OP_EMBEDDING_BACKWARD, out, ins, 2, &a);
}

/* The generator is read here, not in the kernel: the (seed, offset) the mask comes from travel in
 * the attrs, so the gradient rule regenerates the same mask, and the generator moves past the
 * blocks used (4 elements per block, as rand's float32 numbers). */
dle_status dle_dropout(dle_tensor **out, dle_tensor *x, double p, dle_generator *g) {
  if (!g) g = dle_default_generator();
  dle_attrs a = {0};
  a.f[0] = p;
  a.ints[0] = (int64_t)g->seed, a.ints[1] = (int64_t)g->offset;
  a.nints = 2;
  a.generator = g; /* unused by the kernel; a graph replay draws the next seed and offset from it */
  DLE_TRY(dle_op_call(DLE_OP_DROPOUT, out, &x, 1, &a));
  g->offset += (uint64_t)((dle_tensor_numel(x) + 3) / 4);
  return DLE_OK;
}

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
