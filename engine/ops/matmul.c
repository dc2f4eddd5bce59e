/* matmul.c — shape and dtype rules of matmul (PyTorch semantics: 1-D, 2-D, batched with
 * broadcast batch dims) and the mm/bmm wrappers. Kernels only ever see the canonical form
 * out {batch..., M, N} = a {batch..., M, K} . b {batch..., K, N}, batch dims broadcast by stride 0. */
#include "../autograd.h"
#include "deliver.h"

/* Shapes of a product, worked out once: batch dims, M, K, N, and the result's own shape. */
typedef struct {
  int nbatch;
  int64_t batch[DLE_MAX_DIMS];
  int64_t m, k, n;
  int ndim; /* of the result: batch, then M unless a is 1-D, N unless b is */
  int64_t sizes[DLE_MAX_DIMS];
} mm_shape;

static dle_status matmul_shape(const char *fn, const dle_tensor *a, const dle_tensor *b,
                               mm_shape *s) {
  int na = a->ndim, nb = b->ndim;
  if (na == 0 || nb == 0)
    return dle_error("%s: both arguments need at least 1 dim, got shapes %s and %s", fn, SHAPE(a),
                     SHAPE(b));
  int64_t ka = a->sizes[na - 1], kb = nb == 1 ? b->sizes[0] : b->sizes[nb - 2];
  if (ka != kb)
    return dle_error("%s: shapes %s and %s are not aligned (%lld vs %lld)", fn, SHAPE(a), SHAPE(b),
                     (long long)ka, (long long)kb);
  int ba = na > 2 ? na - 2 : 0, bb = nb > 2 ? nb - 2 : 0;
  s->nbatch = ba > bb ? ba : bb;
  for (int i = 0; i < s->nbatch; i++) { /* i counts from the right */
    int64_t sa = i < ba ? a->sizes[ba - 1 - i] : 1, sb = i < bb ? b->sizes[bb - 1 - i] : 1;
    if (sa != sb && sa != 1 && sb != 1)
      return dle_error(
          "%s: shapes %s and %s have batch dims that cannot be broadcast "
          "(dim %d: %lld vs %lld)",
          fn, SHAPE(a), SHAPE(b), s->nbatch - i, (long long)sa, (long long)sb);
    s->batch[s->nbatch - 1 - i] = sa == 1 ? sb : sa;
  }
  s->m = na >= 2 ? a->sizes[na - 2] : 1;
  s->k = ka;
  s->n = nb >= 2 ? b->sizes[nb - 1] : 1;
  s->ndim = s->nbatch;
  memcpy(s->sizes, s->batch, sizeof s->batch);
  if (na >= 2) s->sizes[s->ndim++] = s->m;
  if (nb >= 2) s->sizes[s->ndim++] = s->n;
  return DLE_OK;
}

/* t as the canonical operand {batch..., rows, cols}: its own batch dims right-aligned, stride 0
 * where it is broadcast; a 1-D t becomes a row (is_left) or a column. Size-1 dims get stride 0
 * (never read). */
static dle_status canonical_operand(dle_tensor **out, dle_tensor *t, const mm_shape *s,
                                    bool is_left) {
  int nd = s->nbatch + 2, own = t->ndim > 2 ? t->ndim - 2 : 0;
  int64_t sizes[DLE_MAX_DIMS], strides[DLE_MAX_DIMS];
  for (int d = 0; d < s->nbatch; d++) {
    int src = d - (s->nbatch - own);
    sizes[d] = s->batch[d];
    strides[d] = (src < 0 || t->sizes[src] == 1) ? 0 : t->strides[src];
  }
  int64_t last_stride = t->strides[t->ndim - 1];
  if (t->ndim >= 2) {
    sizes[nd - 2] = t->sizes[t->ndim - 2], strides[nd - 2] = t->strides[t->ndim - 2];
    sizes[nd - 1] = t->sizes[t->ndim - 1], strides[nd - 1] = last_stride;
  } else if (is_left) {
    sizes[nd - 2] = 1, strides[nd - 2] = 0;
    sizes[nd - 1] = t->sizes[0], strides[nd - 1] = last_stride;
  } else {
    sizes[nd - 2] = t->sizes[0], strides[nd - 2] = last_stride;
    sizes[nd - 1] = 1, strides[nd - 1] = 0;
  }
  return dle_tensor_as_strided(out, t, nd, sizes, strides, t->offset);
}

/* The contiguous result r seen as {batch..., M, N} (same memory: only size-1 dims differ). */
static dle_status canonical_result(dle_tensor **out, dle_tensor *r, const mm_shape *s) {
  int64_t sizes[DLE_MAX_DIMS], strides[DLE_MAX_DIMS];
  memcpy(sizes, s->batch, sizeof s->batch);
  sizes[s->nbatch] = s->m, sizes[s->nbatch + 1] = s->n;
  dle_contiguous_strides(s->nbatch + 2, sizes, strides);
  return dle_tensor_as_strided(out, r, s->nbatch + 2, sizes, strides, r->offset);
}

/* A caller's output is written directly only when the kernel can: same dtype, contiguous, and no
 * memory shared with an input (BLAS would read what it already overwrote). */
static bool writable_directly(const dle_tensor *o, dle_dtype dt, dle_tensor *const *ins, int nin) {
  for (int i = 0; i < nin; i++)
    if (o->storage == ins[i]->storage) return false;
  return o->dtype == dt && dle_tensor_is_contiguous(o);
}

static dle_status run_matmul(dle_op op, dle_tensor *r, dle_tensor *const *cast, const mm_shape *s,
                             const dle_attrs *attrs) {
  dle_tensor *views[3] = {NULL, NULL, NULL};
  dle_status st = canonical_result(&views[0], r, s);
  if (st == DLE_OK) st = canonical_operand(&views[1], cast[0], s, true);
  if (st == DLE_OK) st = canonical_operand(&views[2], cast[1], s, false);
  if (st == DLE_OK) st = dle_dispatch(op, &views[0], 1, &views[1], 2, attrs);
  for (int i = 0; i < 3; i++) dle_tensor_release(views[i]);
  return st;
}

/* The addend c of a b + c must broadcast to the product's shape s without growing it. */
static dle_status check_addend(const char *fn, const dle_tensor *c, const mm_shape *s) {
  int n;
  int64_t shape[DLE_MAX_DIMS];
  DLE_TRY(dle_broadcast_shapes(fn, c->ndim, c->sizes, s->ndim, s->sizes, &n, shape));
  if (dle_shape_equal(n, shape, s->ndim, s->sizes)) return DLE_OK;
  char buf[128];
  return dle_error("%s: the addend of shape %s does not broadcast to the product's shape %s", fn,
                   SHAPE(c), dle_shape_str(buf, sizeof buf, s->ndim, s->sizes));
}

/* c broadcast into r, which BLAS then accumulates into with beta = 1: the separate pass of an add
 * is saved, as PyTorch's addmm does. */
static dle_status put_addend(dle_tensor *r, dle_tensor *c, const mm_shape *s) {
  dle_tensor *e = NULL;
  DLE_TRY(dle_expand(&e, c, s->ndim, s->sizes));
  dle_status st = dle_copy_(r, e);
  dle_tensor_release(e);
  return st;
}

DLE_FORWARD_RULE(matmul) {
  const char *fn = dle_op_get_info(op)->name;
  if (nin != 2 && nin != 3) return dle_error("%s: expected 2 or 3 tensor inputs, got %d", fn, nin);
  mm_shape s;
  DLE_TRY(matmul_shape(fn, ins[0], ins[1], &s));
  if (nin == 3) DLE_TRY(check_addend(fn, ins[2], &s));
  dle_dtype dt = dle_promote(ins[0]->dtype, ins[1]->dtype);
  if (dt == DLE_BOOL) dt = DLE_I64; /* bool products count, like bool arithmetic elsewhere */

  dle_tensor *given = outs[0];
  if (given && !dle_shape_equal(s.ndim, s.sizes, given->ndim, given->sizes)) {
    char buf[128];
    return dle_error("%s: result of shape %s cannot be written into an output of shape %s", fn,
                     dle_shape_str(buf, sizeof buf, s.ndim, s.sizes), SHAPE(given));
  }
  dle_tensor *cast[2] = {NULL, NULL}, *r = NULL;
  dle_status st = dle_cast_if_needed(&cast[0], ins[0], dt);
  if (st == DLE_OK) st = dle_cast_if_needed(&cast[1], ins[1], dt);
  if (st == DLE_OK) {
    if (given && writable_directly(given, dt, ins, nin)) {
      r = given;
      dle_tensor_retain(r);
    } else {
      st = dle_tensor_empty(&r, s.ndim, s.sizes, dt, dle_tensor_device(ins[0]));
    }
  }
  /* a b + c: the kernel accumulates the product onto c (for float16/bfloat16 in float32, rounded
   * once at the end); integer dtypes add c after the product */
  bool fused = nin == 3 && (dle_dtype_is_float(dt) || dle_dtype_is_complex(dt));
  dle_attrs acc = a ? *a : (dle_attrs){0};
  acc.f[0] = fused;
  if (st == DLE_OK && fused) st = put_addend(r, ins[2], &s);
  if (st == DLE_OK) st = run_matmul(op, r, cast, &s, &acc);
  if (st == DLE_OK && nin == 3 && !fused) st = dle_binary(DLE_OP_ADD, &r, r, ins[2]);
  dle_release_all(cast, 2);
  return dle_deliver_result(&outs[0], r, st);
}

/* FLOPs: 2*m*n*k per batch, plus m*n for the added term c. */
static int64_t matmul_flops(const dle_flops_call *c, int per) {
  (void)per;
  int64_t y = dle_flops_numel(c->outs[0]);
  return 2 * y * dle_flops_last_dim(c->ins[0]) + (c->nin == 3 ? y : 0);
}

dle_flops_rule dle_flops_matmul(dle_op op) {
  (void)op;
  return (dle_flops_rule){"2*m*n*k per batch (+ m*n added)", matmul_flops, 0};
}

/* ---- public wrappers ---- */

dle_status dle_matmul(dle_tensor **out, dle_tensor *a, dle_tensor *b) {
  dle_tensor *ins[2] = {a, b};
  return dle_op_call(DLE_OP_MATMUL, out, ins, 2, NULL);
}

/* mm and bmm are matmul restricted to one rank; their errors carry their own names. */
static dle_status restricted_matmul(const char *fn, int rank, dle_tensor **out, dle_tensor *a,
                                    dle_tensor *b) {
  if (!a || !b) return dle_error("%s: input %d is missing", fn, a ? 2 : 1);
  if (a->ndim != rank || b->ndim != rank)
    return dle_error("%s: expected %d-D tensors, got shapes %s and %s", fn, rank, SHAPE(a),
                     SHAPE(b));
  if (rank == 3 && a->sizes[0] != b->sizes[0])
    return dle_error("%s: batch sizes of shapes %s and %s differ (%lld vs %lld)", fn, SHAPE(a),
                     SHAPE(b), (long long)a->sizes[0], (long long)b->sizes[0]);
  mm_shape s;
  DLE_TRY(matmul_shape(fn, a, b, &s));
  return dle_matmul(out, a, b);
}

dle_status dle_mm(dle_tensor **out, dle_tensor *a, dle_tensor *b) {
  return restricted_matmul("mm", 2, out, a, b);
}

dle_status dle_bmm(dle_tensor **out, dle_tensor *a, dle_tensor *b) {
  return restricted_matmul("bmm", 3, out, a, b);
}
