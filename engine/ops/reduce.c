/* reduce.c — shape and dtype rules of the reductions (sum, mean, prod, var, std, logsumexp,
 * amax/amin, max/min with indices, argmax/argmin), with their public wrappers. Dims arrive 0-based (negative wraps); messages print them 1-based, as Lua users
 * wrote them. */
#include "../autograd.h"
#include "reduce_front.h"

static bool is_indexed(dle_op op) {
  return op == DLE_OP_MAX || op == DLE_OP_MIN || op == DLE_OP_ARGMAX || op == DLE_OP_ARGMIN;
}

/* Ops that pick an element: there is nothing to pick from an empty slice. */
static bool needs_elements(dle_op op) {
  return is_indexed(op) || op == DLE_OP_AMAX || op == DLE_OP_AMIN;
}

/* A 0-based dim as the user wrote it (1-based, negatives unchanged). */
static long long dim_text(int64_t d) { return d >= 0 ? (long long)d + 1 : (long long)d; }

/* Wraps dim into 0..ndim-1; a 0-dim tensor accepts 0 and -1 (its one element), reported as *out -1. */
dle_status dle_reduce_wrap_dim(const char *fn, const dle_tensor *x, int64_t dim, int *out) {
  int64_t n = x->ndim > 0 ? x->ndim : 1;
  if (dim < -n || dim >= n)
    return dle_error(
        "%s: dim %lld out of range for a tensor of shape %s (valid: 1..%lld, or %lld..-1)", fn,
        dim_text(dim), SHAPE(x), (long long)n, (long long)-n);
  *out = x->ndim > 0 ? (int)(dim < 0 ? dim + n : dim) : -1;
  return DLE_OK;
}

dle_status dle_line_dim(const char *fn, const dle_tensor *x, int64_t dim, int *out) {
  if (x->ndim == 0)
    return dle_error("%s: expected a tensor with at least 1 dim, got a 0-dim tensor (shape %s)", fn,
                     SHAPE(x));
  return dle_reduce_wrap_dim(fn, x, dim, out);
}

/* Which dims of x the attrs reduce (none listed: all). */
static dle_status reduce_mask(const char *fn, const dle_tensor *x, const dle_attrs *a, bool *mask) {
  memset(mask, 0, DLE_MAX_DIMS * sizeof *mask);
  if (a->nints < 0 || a->nints > DLE_MAX_ATTR_INTS)
    return dle_error("%s: %d dims given, at most %d supported", fn, a->nints, DLE_MAX_DIMS);
  if (a->nints == 0) {
    for (int d = 0; d < x->ndim; d++) mask[d] = true;
    return DLE_OK;
  }
  bool seen_scalar = false;
  for (int i = 0; i < a->nints; i++) {
    int d = 0;
    DLE_TRY(dle_reduce_wrap_dim(fn, x, a->ints[i], &d));
    bool *slot = d < 0 ? &seen_scalar : &mask[d];
    if (*slot)
      return dle_error("%s: dim %lld appears more than once in the dims to reduce (shape %s)", fn,
                       dim_text(d < 0 ? 0 : d), SHAPE(x));
    *slot = true;
  }
  return DLE_OK;
}

/* The result dtype, and the dtype x is converted to before the kernel sees it. */
static void reduce_dtypes(dle_op op, dle_dtype in, dle_dtype *compute, dle_dtype *out) {
  bool fl = dle_dtype_is_float(in);
  *compute = in;
  if (dle_op_get_info(op)->flags & DLE_FLOATOUT) {
    *compute = *out = fl ? in : DLE_DEFAULT_FLOAT;
  } else if (op == DLE_OP_SUM || op == DLE_OP_PROD) {
    /* integers and bool count in int64 (PyTorch), uint64 in uint64 (NumPy; int64 cannot hold it) */
    *out = fl ? in : in == DLE_U64 ? DLE_U64 : DLE_I64;
  } else if (op == DLE_OP_ARGMAX || op == DLE_OP_ARGMIN) {
    *out = DLE_I64;
  } else {
    *out = in;
  }
}

/* Gives slot *out a tensor the kernel can write: a new contiguous one, the caller's own when it
 * fits (checked by dle_prepare_out), or a temporary (*tmp) when the caller's is strided or shares
 * memory with the input; the caller then copies *tmp into *out. */
static dle_status output_slot(dle_tensor **out, dle_tensor **tmp, const char *fn, int ndim,
                              const int64_t *sizes, dle_dtype dt, const dle_tensor *x) {
  *tmp = NULL;
  if (!*out) return dle_tensor_empty(out, ndim, sizes, dt, dle_tensor_device(x));
  DLE_TRY(dle_prepare_out(out, fn, ndim, sizes, dt, dle_tensor_device(x)));
  if (dle_tensor_is_contiguous(*out) && !dle_same_storage(*out, x)) return DLE_OK;
  return dle_tensor_empty(tmp, ndim, sizes, dt, dle_tensor_device(x));
}

/* Runs the kernel into outs[0..nout) (NULL slots receive new tensors): shared with softmax.c
 * and sort.c. */
dle_status dle_reduce_run_into(dle_op op, dle_tensor **outs, int nout, int ndim,
                               const int64_t *sizes, const dle_dtype *dts, dle_tensor *x,
                               dle_dtype compute, const dle_attrs *ka) {
  const char *fn = dle_op_get_info(op)->name;
  dle_tensor *res[2] = {NULL, NULL}, *tmp[2] = {NULL, NULL}, *xin = NULL;
  bool fresh[2] = {outs[0] == NULL, nout > 1 && outs[1] == NULL};
  dle_status st = DLE_OK;
  for (int i = 0; i < nout && st == DLE_OK; i++) {
    res[i] = outs[i];
    st = output_slot(&res[i], &tmp[i], fn, ndim, sizes, dts[i], x);
  }
  if (st == DLE_OK) st = dle_cast_if_needed(&xin, x, compute);
  if (st == DLE_OK) {
    dle_tensor *dst[2] = {tmp[0] ? tmp[0] : res[0], nout > 1 ? (tmp[1] ? tmp[1] : res[1]) : NULL};
    st = dle_dispatch(op, dst, nout, &xin, 1, ka);
  }
  for (int i = 0; i < nout && st == DLE_OK; i++)
    if (tmp[i]) st = dle_copy_(res[i], tmp[i]);
  dle_tensor_release(xin);
  for (int i = 0; i < nout; i++) dle_tensor_release(tmp[i]);
  if (st != DLE_OK) {
    for (int i = 0; i < nout; i++)
      if (fresh[i]) dle_tensor_release(res[i]);
    return st;
  }
  for (int i = 0; i < nout; i++) outs[i] = res[i];
  return DLE_OK;
}

/* sum and mean of a complex tensor: the real kernels over its (re, im) view, whose trailing dim
 * of 2 is not reduced; the result viewed back as complex. */
static dle_status complex_reduce(dle_op op, dle_tensor **outs, dle_tensor *x, const dle_attrs *a,
                                 const bool *mask) {
  dle_attrs ra = *a;
  ra.nints = 0;
  for (int d = 0; d < x->ndim; d++)
    if (mask[d]) ra.ints[ra.nints++] = d;
  if (ra.nints == 0) { /* nothing to reduce (a 0-dim tensor): the values themselves */
    if (outs[0]) return dle_copy_(outs[0], x);
    return dle_clone(&outs[0], x);
  }
  dle_tensor *xr = NULL, *r = NULL;
  dle_status st = dle_view_as_real(&xr, x);
  if (st == DLE_OK) st = dle_op_call(op, &r, &xr, 1, &ra);
  dle_tensor_release(xr);
  return dle_complex_result(outs, r, st);
}

DLE_FORWARD_RULE(reduce) {
  const char *fn = dle_op_get_info(op)->name;
  dle_tensor *x = ins[0];
  if ((op == DLE_OP_MAX || op == DLE_OP_MIN) && a->nints != 1)
    return dle_error("%s: expects exactly one dim to reduce along, got %d (shape %s)", fn, a->nints,
                     SHAPE(x));
  if ((op == DLE_OP_ARGMAX || op == DLE_OP_ARGMIN) && a->nints > 1)
    return dle_error("%s: expects one dim or none, got %d (shape %s)", fn, a->nints, SHAPE(x));
  bool mask[DLE_MAX_DIMS];
  DLE_TRY(reduce_mask(fn, x, a, mask));
  if (dle_dtype_is_complex(x->dtype)) return complex_reduce(op, outs, x, a, mask);

  dle_attrs ka = *a; /* the kernel gets the reduced dims sorted and 0-based */
  ka.nints = 0;
  int ndim = 0;
  int64_t sizes[DLE_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) {
    if (mask[d] && x->sizes[d] == 0 && needs_elements(op))
      return dle_error("%s: cannot reduce over dim %d of size 0 (shape %s)", fn, d + 1, SHAPE(x));
    if (mask[d]) ka.ints[ka.nints++] = d;
    if (!mask[d])
      sizes[ndim++] = x->sizes[d];
    else if (a->keepdim)
      sizes[ndim++] = 1;
  }
  dle_dtype compute, dts[2];
  reduce_dtypes(op, x->dtype, &compute, &dts[0]);
  dts[1] = DLE_I64;
  return dle_reduce_run_into(op, outs, dle_op_get_info(op)->nout, ndim, sizes, dts, x, compute,
                             &ka);
}

/* FLOPs: 1 per input element (var/std and logsumexp too). */
dle_flops_rule dle_flops_reduce(dle_op op) {
  (void)op;
  return dle_flops_per_in(1);
}

/* ---- public wrappers ---- */

dle_status dle_check_op_kind(dle_op op, dle_op_kind kind, const char *what) {
  const dle_op_info *info = dle_op_get_info(op);
  if (!info || info->kind != kind)
    return dle_error("%s: %s is not a %s op", what, info ? info->name : "(invalid op)", what);
  return DLE_OK;
}

dle_status dle_reduce(dle_op op, dle_tensor **out, dle_tensor *x, int ndims, const int *dims,
                      bool keepdim, double correction) {
  DLE_TRY(dle_check_op_kind(op, DLE_KIND_REDUCE, "reduce"));
  if (op == DLE_OP_MAX) op = DLE_OP_AMAX; /* one result: the values */
  if (op == DLE_OP_MIN) op = DLE_OP_AMIN;
  const char *fn = dle_op_get_info(op)->name;
  if (ndims < 0 || ndims > DLE_MAX_DIMS || (ndims > 0 && !dims))
    return dle_error("%s: bad list of %d dims", fn, ndims);
  dle_attrs a = {0};
  for (int i = 0; i < ndims; i++) a.ints[i] = dims[i];
  a.nints = ndims;
  a.keepdim = keepdim;
  a.f[0] = correction;
  return dle_op_call(op, out, &x, 1, &a);
}

dle_status dle_max_dim(dle_op op, dle_tensor **values, dle_tensor **indices, dle_tensor *x, int dim,
                       bool keepdim, int64_t index_base) {
  if (op != DLE_OP_MAX && op != DLE_OP_MIN)
    return dle_error("max_dim: op must be max or min, got %s",
                     dle_op_get_info(op) ? dle_op_get_info(op)->name : "?");
  dle_attrs a = {0};
  a.ints[0] = dim;
  a.nints = 1;
  a.keepdim = keepdim;
  a.index_base = index_base;
  dle_tensor *outs[2] = {*values, *indices};
  DLE_TRY(dle_op_call(op, outs, &x, 1, &a));
  *values = outs[0];
  *indices = outs[1];
  return DLE_OK;
}

dle_status dle_arg_reduce(dle_op op, dle_tensor **out, dle_tensor *x, int dim, bool keepdim,
                          int64_t index_base) {
  if (op != DLE_OP_ARGMAX && op != DLE_OP_ARGMIN)
    return dle_error("arg_reduce: op must be argmax or argmin, got %s",
                     dle_op_get_info(op) ? dle_op_get_info(op)->name : "?");
  dle_attrs a = {0};
  if (dim != DLE_ALL_DIMS) a.ints[0] = dim, a.nints = 1;
  a.keepdim = keepdim;
  a.index_base = index_base;
  return dle_op_call(op, out, &x, 1, &a);
}
