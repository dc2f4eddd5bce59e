/* arrange.c — shape rules and public wrappers of the rearranging copies (kind ARRANGE in ops.def:
 * flip, roll, pad). Each output element is one input element or pad's fill value, found dim by
 * dim (engine/kernel/arrange_geom.h, which also lays out the attrs); the kernels read the input
 * through its strides and write a new contiguous tensor of the input's dtype (copied into a
 * caller's output). Gradient rules: ops/arrange_grad.c. */
#include "../internal.h"

#include "../kernel/arrange_geom.h"

static const char *const pad_modes[] = {"constant", "reflect", "replicate", "circular"};

/* pad's attrs against x: pads for at most DLE_PAD_MAX_DIMS and x's dims, each mode's limits. */
static dle_status check_pad(const dle_tensor *x, const dle_attrs *a) {
  int npads = a->nints - 1;
  if (npads < 0 || npads % 2 || npads / 2 > x->ndim || npads / 2 > DLE_PAD_MAX_DIMS)
    return dle_error(
        "pad: %d pads for a %d-dim tensor (shape %s): expected an even number, for "
        "at most %d trailing dims",
        npads, x->ndim, SHAPE(x), DLE_PAD_MAX_DIMS < x->ndim ? DLE_PAD_MAX_DIMS : x->ndim);
  int64_t mode = a->ints[0];
  if (mode < DLE_PAD_CONSTANT || mode > DLE_PAD_CIRCULAR)
    return dle_error("pad: unknown mode %lld", (long long)mode);
  for (int k = 0; k < npads / 2; k++) {
    int d = x->ndim - 1 - k;
    int64_t n = x->sizes[d], lo = a->ints[1 + 2 * k], hi = a->ints[2 + 2 * k];
    const char *m = pad_modes[mode];
    if (mode == DLE_PAD_CONSTANT) {
      if (n + lo + hi < 0)
        return dle_error(
            "pad: pads %lld, %lld of dim %d (size %lld) of shape %s leave a negative "
            "size",
            (long long)lo, (long long)hi, d + 1, (long long)n, SHAPE(x));
      continue;
    }
    if (lo < 0 || hi < 0)
      return dle_error(
          "pad: negative pads (%lld, %lld of dim %d, shape %s) are for mode "
          "\"constant\" only",
          (long long)lo, (long long)hi, d + 1, SHAPE(x));
    if (lo == 0 && hi == 0) continue;
    if (mode == DLE_PAD_REFLECT && (lo >= n || hi >= n))
      return dle_error(
          "pad: reflect pads %lld, %lld of dim %d must be less than its size %lld "
          "(shape %s)",
          (long long)lo, (long long)hi, d + 1, (long long)n, SHAPE(x));
    if (mode == DLE_PAD_CIRCULAR && (lo > n || hi > n))
      return dle_error(
          "pad: circular pads %lld, %lld of dim %d must be at most its size %lld "
          "(shape %s)",
          (long long)lo, (long long)hi, d + 1, (long long)n, SHAPE(x));
    if (n == 0)
      return dle_error("pad: mode \"%s\" cannot pad dim %d of size 0 (shape %s)", m, d + 1,
                       SHAPE(x));
  }
  return DLE_OK;
}

static dle_status check_attrs(dle_op op, const dle_tensor *x, const dle_attrs *a) {
  const char *fn = dle_op_get_info(op)->name;
  if (op == DLE_OP_PAD) return check_pad(x, a);
  if (op == DLE_OP_FLIP) {
    if (a->nints < 1 || a->ints[0] < 0 || a->ints[0] >> x->ndim)
      return dle_error("flip: dims out of range for shape %s", SHAPE(x));
    return DLE_OK;
  }
  if (a->nints != x->ndim)
    return dle_error("%s: %d shifts for shape %s (one per dim)", fn, a->nints, SHAPE(x));
  for (int d = 0; d < x->ndim; d++)
    if (a->ints[d] < 0 || (a->ints[d] > 0 && a->ints[d] >= x->sizes[d]))
      return dle_error("%s: shift %lld of dim %d outside [0, %lld) (shape %s)", fn,
                       (long long)a->ints[d], d + 1, (long long)x->sizes[d], SHAPE(x));
  return DLE_OK;
}

DLE_FORWARD_RULE(arrange) {
  dle_tensor *x = ins[0];
  DLE_TRY(check_attrs(op, x, a));
  dle_arrange_geom g;
  dle_arrange_geom_of(&g, op, a, x->ndim, x->sizes);
  const char *fn = dle_op_get_info(op)->name;
  if (outs[0])
    DLE_TRY(dle_prepare_out(&outs[0], fn, x->ndim, g.out, x->dtype, dle_tensor_device(x)));
  dle_tensor *res = NULL;
  DLE_TRY(dle_tensor_empty(&res, x->ndim, g.out, x->dtype, dle_tensor_device(x)));
  dle_status st = dle_dispatch(op, &res, 1, &x, 1, a);
  if (st == DLE_OK && outs[0]) st = dle_copy_(outs[0], res);
  if (st == DLE_OK && !outs[0])
    outs[0] = res;
  else
    dle_tensor_release(res);
  return st;
}

/* FLOPs: none, the ops move data (flops.c conventions). */
dle_flops_rule dle_flops_arrange(dle_op op) {
  (void)op;
  return dle_flops_none();
}

/* The bit mask of dims (0-based, negative wrapping) of an ndim-dim tensor, each at most once. */
static dle_status dim_mask(const char *fn, int ndims, const int *dims, int ndim, int64_t *mask) {
  *mask = 0;
  for (int k = 0; k < ndims; k++) {
    int d;
    DLE_TRY(dle_wrap_dim(fn, dims[k], ndim, 0, &d));
    if (*mask >> d & 1) return dle_error("%s: dim %d appears twice", fn, d + 1);
    *mask |= (int64_t)1 << d;
  }
  return DLE_OK;
}

static dle_status call1(dle_op op, dle_tensor **out, dle_tensor *x, const dle_attrs *a) {
  *out = NULL;
  return dle_op_call(op, out, &x, 1, a);
}

dle_status dle_flip(dle_tensor **out, dle_tensor *x, int ndims, const int *dims) {
  dle_attrs a = {0};
  a.nints = 1;
  DLE_TRY(dim_mask("flip", ndims, dims, x->ndim, &a.ints[0]));
  return call1(DLE_OP_FLIP, out, x, &a);
}

dle_status dle_roll(dle_tensor **out, dle_tensor *x, int ndims, const int *dims,
                    const int64_t *shifts) {
  dle_attrs a = {0};
  a.nints = x->ndim;
  for (int k = 0; k < ndims; k++) { /* a dim named twice rolls by the sum, as in PyTorch */
    int d;
    DLE_TRY(dle_wrap_dim("roll", dims[k], x->ndim, 0, &d));
    int64_t n = x->sizes[d];
    if (n > 0) a.ints[d] = ((a.ints[d] + shifts[k] % n) % n + n) % n;
  }
  return call1(DLE_OP_ROLL, out, x, &a);
}

dle_status dle_pad(dle_tensor **out, dle_tensor *x, int npads, const int64_t *pads,
                   dle_pad_mode mode, double value) {
  if (npads < 0 || npads > 2 * DLE_PAD_MAX_DIMS)
    return dle_error("pad: %d pads for shape %s: at most %d trailing dims pad at once", npads,
                     SHAPE(x), DLE_PAD_MAX_DIMS);
  dle_attrs a = {0};
  a.ints[0] = mode;
  for (int k = 0; k < npads; k++) a.ints[1 + k] = pads[k];
  a.nints = 1 + npads;
  a.f[0] = value;
  return call1(DLE_OP_PAD, out, x, &a);
}

/* g's last dim (length len) spread over a square (g times an identity), padded to n1 x n2 with
 * the diagonal at offset, the two new dims moved to d1, d2: linear in g, so differentiable. */
dle_status dle_diag_embed(dle_tensor **out, dle_tensor *g, int64_t offset, int d1, int d2,
                          int64_t n1, int64_t n2) {
  int nd = g->ndim + 1;
  if (g->ndim < 1) return dle_error("diag_embed: expected at least 1 dim, got shape %s", SHAPE(g));
  DLE_TRY(dle_wrap_dim("diag_embed", d1, nd, 0, &d1));
  DLE_TRY(dle_wrap_dim("diag_embed", d2, nd, 0, &d2));
  if (d1 == d2) return dle_error("diag_embed: dim1 and dim2 are both dim %d", d1 + 1);
  int64_t len = g->sizes[g->ndim - 1];
  bool outside =
      n1 < 0 || n2 < 0 || offset < -n1 || offset > n2; /* (and -offset cannot overflow) */
  int64_t r0 = !outside && offset < 0 ? -offset : 0, c0 = !outside && offset > 0 ? offset : 0;
  int64_t pads[4] = {c0, n2 - c0 - len, r0, n1 - r0 - len};
  if (outside || pads[1] < 0 || pads[3] < 0)
    return dle_error("diag_embed: a diagonal of %lld at offset %lld does not fit %lld x %lld",
                     (long long)len, (long long)offset, (long long)n1, (long long)n2);
  dle_tensor *eye = NULL, *ones = NULL, *dg = NULL, *u = NULL, *sq = NULL, *padded = NULL;
  dle_status st = dle_zeros(&eye, 2, (int64_t[]){len, len}, g->dtype);
  if (st == DLE_OK) st = dle_full(&ones, 1, &len, 1, g->dtype);
  if (st == DLE_OK) st = dle_diagonal(&dg, eye, 0, 0, 1);
  if (st == DLE_OK) st = dle_copy_(dg, ones);
  if (st == DLE_OK && dle_tensor_device(g).type != DLE_CPU) {
    dle_tensor *moved = NULL;
    st = dle_to_device(&moved, eye, dle_tensor_device(g));
    dle_tensor_release(eye);
    eye = moved;
  }
  if (st == DLE_OK) st = dle_unsqueeze(&u, g, g->ndim - 1);
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, &sq, u, eye); /* {..., len, len} */
  if (st == DLE_OK) st = dle_pad(&padded, sq, 4, pads, DLE_PAD_CONSTANT, 0);
  if (st == DLE_OK) { /* padded's dims: the others in order, then d1's, then d2's */
    int perm[DLE_MAX_DIMS], k = 0;
    for (int d = 0; d < nd; d++) perm[d] = d == d1 ? nd - 2 : d == d2 ? nd - 1 : k++;
    *out = NULL;
    st = dle_permute(out, padded, perm);
  }
  dle_tensor *all[] = {eye, ones, dg, u, sq, padded};
  for (int i = 0; i < 6; i++) dle_tensor_release(all[i]);
  return st;
}
