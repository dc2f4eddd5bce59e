/* scan.c — shape and dtype rules of the scan ops (kind SCAN in ops.def: cumsum, cumprod,
 * logcumsumexp, cummax and cummin along one dim) and their public wrapper dle_scan. Gradient
 * rules: ops/scan_grad.c.
 *
 * Dtypes as in PyTorch: cumsum and cumprod of integers or bool count in int64, except uint64,
 * which int64 cannot hold: it counts in uint64 modulo 2^64, as NumPy does; logcumsumexp takes
 * float tensors only; cummax and cummin keep the dtype and add int64 indices (the last position
 * of the running extreme on ties; a NaN, once seen, stays the extreme). The kernels read the
 * input through strides (engine/kernel/scan_geom.h) and write fresh contiguous outputs, which are
 * copied into a caller's outputs. attrs: ints[0] the dim (0-based, negative wraps), ints[1] = 1
 * scans from the end of the dim (the gradient rules' reversed scans), index_base is added to the
 * indices. */
#include "../internal.h"

#include "../kernel/scan_geom.h"

static bool has_indices(dle_op op) { return op == DLE_OP_CUMMAX || op == DLE_OP_CUMMIN; }

/* The dtype the kernel scans in (and writes values in), or an error. */
static dle_status scan_dtype(dle_op op, const dle_tensor *x, dle_dtype *dt) {
  bool fl = dle_dtype_is_float(x->dtype);
  if (op == DLE_OP_LOGCUMSUMEXP && !fl)
    return dle_error("logcumsumexp: expected a float tensor, got %s (shape %s)",
                     dle_dtype_name(x->dtype), SHAPE(x));
  bool counts = (op == DLE_OP_CUMSUM || op == DLE_OP_CUMPROD) && !fl && x->dtype != DLE_U64;
  *dt = counts ? DLE_I64 : x->dtype;
  return DLE_OK;
}

DLE_FORWARD_RULE(scan) {
  const char *fn = dle_op_get_info(op)->name;
  dle_tensor *x = ins[0];
  if (a->nints < 1)
    return dle_error("%s: the dim to scan along is missing (shape %s)", fn, SHAPE(x));
  int d = 0; /* a 0-dim tensor is scanned as one element along dim 1 (or -1), as in PyTorch */
  DLE_TRY(dle_wrap_dim(fn, (int)a->ints[0], x->ndim > 0 ? x->ndim : 1, 0, &d));
  dle_dtype dt = x->dtype;
  DLE_TRY(scan_dtype(op, x, &dt));
  dle_attrs ka = *a;
  ka.ints[0] = x->ndim > 0 ? d : 0;
  ka.ints[1] = a->nints > 1 && a->ints[1];
  ka.nints = 2;

  int nout = has_indices(op) ? 2 : 1;
  dle_dtype odt[2] = {dt, DLE_I64};
  for (int k = 0; k < nout; k++)
    if (outs[k])
      DLE_TRY(dle_prepare_out(&outs[k], fn, x->ndim, x->sizes, odt[k], dle_tensor_device(x)));

  dle_tensor *xin = NULL, *res[2] = {NULL, NULL};
  dle_scan_geom g;
  dle_status st = dle_cast_if_needed(&xin, x, dt);
  if (st == DLE_OK && !dle_scan_geom_of(xin, (int)ka.ints[0], &g)) {
    dle_tensor *c = NULL;
    st = dle_contiguous(&c, xin);
    dle_tensor_release(xin);
    xin = c;
  }
  for (int k = 0; k < nout && st == DLE_OK; k++)
    st = dle_tensor_empty(&res[k], x->ndim, x->sizes, odt[k], dle_tensor_device(x));
  if (st == DLE_OK) st = dle_dispatch(op, res, nout, &xin, 1, &ka);
  for (int k = 0; k < nout && st == DLE_OK; k++)
    if (outs[k]) st = dle_copy_(outs[k], res[k]);
  dle_tensor_release(xin);
  return dle_hand_over(outs, res, nout, st);
}

/* FLOPs: one combining step per element, as the reductions count (flops.c conventions). */
dle_flops_rule dle_flops_scan(dle_op op) {
  (void)op;
  return dle_flops_per_in(1);
}

dle_status dle_scan(dle_op op, dle_tensor **out, dle_tensor **indices, dle_tensor *x, int dim,
                    bool reverse, int64_t index_base) {
  const dle_op_info *info = dle_op_get_info(op);
  if (!info || info->kind != DLE_KIND_SCAN)
    return dle_error("scan: %s is not a scan op", info ? info->name : "(invalid op)");
  if (has_indices(op) != (indices != NULL))
    return dle_error("%s: %s", info->name,
                     indices ? "gives no indices" : "needs a place for its indices");
  dle_attrs a = {0};
  a.ints[0] = dim, a.ints[1] = reverse, a.nints = 2;
  a.index_base = index_base;
  dle_tensor *outs[2] = {*out, indices ? *indices : NULL};
  DLE_TRY(dle_op_call(op, outs, &x, 1, &a));
  *out = outs[0];
  if (indices) *indices = outs[1];
  return DLE_OK;
}
