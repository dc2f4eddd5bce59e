/* complex.c — what the engine knows about complex64/complex128 beyond the kernels: which ops take
 * complex operands (every other one refuses them at the front door), the refusal of autograd
 * through complex results, and the two dtype-changing views view_as_real / view_as_complex. */
#include "internal.h"

#include <complex.h>

/* The ops with complex kernels. Views only move metadata; copy converts into complex (and
 * between complex dtypes); the rest are the elementwise, reduction and matmul ops PyTorch users
 * reach for first, and the FFT. */
static bool takes_complex(dle_op op) {
  switch (op) {
    case DLE_OP_VIEW:
    case DLE_OP_PERMUTE:
    case DLE_OP_NARROW:
    case DLE_OP_SELECT:
    case DLE_OP_EXPAND:
    case DLE_OP_DIAGONAL:
    case DLE_OP_COPY:
    case DLE_OP_FULL:
    case DLE_OP_NEG:
    case DLE_OP_ABS:
    case DLE_OP_EXP:
    case DLE_OP_LOG:
    case DLE_OP_ADD:
    case DLE_OP_SUB:
    case DLE_OP_MUL:
    case DLE_OP_DIV:
    case DLE_OP_EQ:
    case DLE_OP_NE:
    case DLE_OP_WHERE:
    case DLE_OP_SUM:
    case DLE_OP_MEAN:
    case DLE_OP_CAT:
    case DLE_OP_MATMUL:
    case DLE_OP_FFT: return true;
    default: return false;
  }
}

dle_status dle_complex_gate(dle_op op, dle_tensor *const *ins, int nin, const dle_attrs *a) {
  if (takes_complex(op)) return DLE_OK;
  for (int i = 0; i < nin; i++)
    if (dle_dtype_is_complex(ins[i]->dtype))
      return dle_error("%s: complex input (%s of shape %s, input %d) is not supported",
                       dle_op_get_info(op)->name, dle_dtype_name(ins[i]->dtype), SHAPE(ins[i]),
                       i + 1);
  if (a && a->has_dtype && dle_dtype_is_complex(a->dtype))
    return dle_error("%s: dtype %s is not supported", dle_op_get_info(op)->name,
                     dle_dtype_name(a->dtype));
  return DLE_OK;
}

dle_status dle_complex_autograd_guard(dle_op op, dle_tensor *const *outs, int nout) {
  for (int k = 0; k < nout; k++)
    if (outs[k] && dle_dtype_is_complex(outs[k]->dtype))
      return dle_error(
          "%s: autograd through complex tensors is not supported (the result is %s and an "
          "input requires grad or has a tangent); run it under dle.no_grad() or on detached "
          "inputs",
          dle_op_get_info(op)->name, dle_dtype_name(outs[k]->dtype));
  return DLE_OK;
}

/* A view of t's storage in another dtype; sizes, strides and offset in the new dtype's elements. */
static dle_status retyped_view(dle_tensor **out, dle_tensor *t, dle_dtype dt, int ndim,
                               const int64_t *sizes, const int64_t *strides, int64_t offset) {
  dle_tensor *v = NULL;
  const int64_t none = 0, one = 1;
  /* an empty header on t's storage (as_strided checks in t's dtype), then given its geometry */
  DLE_TRY(dle_tensor_as_strided(&v, t, 1, &none, &one, 0));
  v->dtype = dt;
  v->ndim = ndim;
  v->offset = offset;
  memcpy(v->sizes, sizes, sizeof(int64_t) * (size_t)ndim);
  memcpy(v->strides, strides, sizeof(int64_t) * (size_t)ndim);
  v->is_view = true;
  *out = v;
  return DLE_OK;
}

/* Autograd does not follow a change of dtype: refuse rather than drop a gradient. */
static dle_status no_grad_needed(const char *fn, dle_tensor *t) {
  if ((t->requires_grad && dle_grad_enabled()) || t->tangent)
    return dle_error(
        "%s: autograd through complex tensors is not supported (the input of shape "
        "%s requires grad); run it under dle.no_grad() or on a detached tensor",
        fn, SHAPE(t));
  return DLE_OK;
}

dle_status dle_view_as_real(dle_tensor **out, dle_tensor *z) {
  *out = NULL;
  if (!dle_dtype_is_complex(z->dtype))
    return dle_error("view_as_real: expected a complex tensor, got %s of shape %s",
                     dle_dtype_name(z->dtype), SHAPE(z));
  if (z->ndim >= DLE_MAX_DIMS)
    return dle_error("view_as_real: the input has %d dims already (at most %d)", z->ndim,
                     DLE_MAX_DIMS - 1);
  DLE_TRY(no_grad_needed("view_as_real", z));
  int64_t sizes[DLE_MAX_DIMS], strides[DLE_MAX_DIMS];
  for (int d = 0; d < z->ndim; d++) {
    sizes[d] = z->sizes[d];
    strides[d] = 2 * z->strides[d];
  }
  sizes[z->ndim] = 2;
  strides[z->ndim] = 1;
  return retyped_view(out, z, dle_real_of(z->dtype), z->ndim + 1, sizes, strides, 2 * z->offset);
}

dle_status dle_view_as_complex(dle_tensor **out, dle_tensor *x) {
  *out = NULL;
  if (x->dtype != DLE_F32 && x->dtype != DLE_F64)
    return dle_error("view_as_complex: expected a float32 or float64 tensor, got %s of shape %s",
                     dle_dtype_name(x->dtype), SHAPE(x));
  int n = x->ndim;
  if (n == 0 || x->sizes[n - 1] != 2 || x->strides[n - 1] != 1)
    return dle_error(
        "view_as_complex: the last dim must have size 2 and stride 1, got shape %s "
        "(strides %s)",
        SHAPE(x), dle_shape_str((char[128]){0}, 128, n, x->strides));
  for (int d = 0; d < n - 1; d++)
    if (x->strides[d] % 2 != 0)
      return dle_error(
          "view_as_complex: every stride but the last must be even, got strides %s "
          "for shape %s",
          dle_shape_str((char[128]){0}, 128, n, x->strides), SHAPE(x));
  if (x->offset % 2 != 0)
    return dle_error("view_as_complex: the storage offset must be even, got %lld",
                     (long long)x->offset);
  DLE_TRY(no_grad_needed("view_as_complex", x));
  int64_t strides[DLE_MAX_DIMS];
  for (int d = 0; d < n - 1; d++) strides[d] = x->strides[d] / 2;
  return retyped_view(out, x, dle_complex_of(x->dtype), n - 1, x->sizes, strides, x->offset / 2);
}

dle_status dle_complex_result(dle_tensor **outs, dle_tensor *r, dle_status st) {
  dle_tensor *z = NULL;
  if (st == DLE_OK) st = dle_view_as_complex(&z, r);
  dle_tensor_release(r);
  if (st == DLE_OK && outs[0]) {
    st = dle_copy_(outs[0], z);
    dle_tensor_release(z);
  } else if (st == DLE_OK) {
    outs[0] = z;
  }
  return st;
}

void dle_tensor_get_complex(const dle_tensor *t, const int64_t *index, double *re, double *im) {
  if (!dle_dtype_is_complex(t->dtype)) {
    *re = dle_tensor_get(t, index);
    *im = 0;
    return;
  }
  int64_t off = t->offset;
  for (int d = 0; d < t->ndim; d++) off += index[d] * t->strides[d];
  if (t->dtype == DLE_C64) {
    float _Complex z = ((const float _Complex *)t->storage->data)[off];
    *re = crealf(z), *im = cimagf(z);
  } else {
    double _Complex z = ((const double _Complex *)t->storage->data)[off];
    *re = creal(z), *im = cimag(z);
  }
}
