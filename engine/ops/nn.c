/* nn.c — shape rules and public wrappers of the fused nn ops (kind NN in ops.def): embedding and
 * dropout, with embedding's backward op (attention is attention.c; the losses, softmax
 * cross-entropy included, are losses.c). Their gradient rules are in nn_grad.c.
 *
 * The kernels get contiguous float inputs in the dtype the op computes in (float64 stays, every
 * other dtype computes in float32), int64 contiguous indices, and fresh contiguous outputs; the
 * results are cast back to the float dtype of the first float input (float16 stays float16) and
 * copied into a caller's outputs. */
#include "../autograd.h"
#include "../internal.h"
#include "nn_front.h"

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
  return run_with_index(op, outs, &o, src, idx, a);
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

DLE_FORWARD_RULE(nn) {
  switch (op) {
    case DLE_OP_EMBEDDING:
    case DLE_OP_EMBEDDING_BACKWARD: return forward_embedding(op, outs, ins, a);
    case DLE_OP_DROPOUT: return forward_dropout(op, outs, ins, a);
    default: return dle_error("%s: not an nn op", op_name(op));
  }
}

/* FLOPs: embedding moves rows (0), its backward adds gy's rows (1 per gy element), dropout
 * scales (1 per output element). */
dle_flops_rule dle_flops_nn(dle_op op) {
  switch (op) {
    case DLE_OP_EMBEDDING_BACKWARD: return dle_flops_per_in(1);
    case DLE_OP_DROPOUT: return dle_flops_per_out(1);
    default: return dle_flops_none();
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
