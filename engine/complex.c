/* complex.c — what the engine knows about complex64/complex128 beyond the kernels: which ops take
 * complex operands (every other one refuses them at the front door), the two dtype-changing views
 * view_as_real / view_as_complex (the op VIEW with a dtype), and the differentiable helpers the
 * gradient rules use (real and imaginary parts, conj, the cast of a gradient to its input). */
#include "internal.h"

#include <complex.h>

/* The ops with complex kernels. Views only move metadata; copy converts into complex (and
 * between complex dtypes); the rest are the elementwise, reduction and matmul ops PyTorch users
 * reach for first, and the FFT. Autograd follows complex tensors through exactly these ops (the
 * gate keeps them from every other one), so each differentiable one here has rules that are right
 * for complex operands (PyTorch's convention: a reverse rule hands back dL/d(re) + i dL/d(im),
 * so holomorphic ones multiply by the conjugate derivative: elementwise_grad.c, matmul_grad.c,
 * fft_grad.c; docs/complex_fft.md). */
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

/* VIEW with a dtype (attrs.has_dtype): view_as_real (complex -> its real dtype, a trailing dim of
 * 2) or view_as_complex (float32/float64 with a last dim of 2, stride 1 -> complex). The front
 * door of both (view.c); an op of the table, so autograd records it and its rules are view_grad.c's. */
dle_status dle_complex_retype(dle_tensor **out, dle_tensor *t, dle_dtype dt) {
  *out = NULL;
  if (dle_dtype_is_complex(t->dtype)) {
    if (dt != dle_real_of(t->dtype))
      return dle_error("view_as_real: a %s tensor of shape %s is viewed as %s, not %s",
                       dle_dtype_name(t->dtype), SHAPE(t), dle_dtype_name(dle_real_of(t->dtype)),
                       dle_dtype_name(dt));
    if (t->ndim >= DLE_MAX_DIMS)
      return dle_error("view_as_real: the input has %d dims already (at most %d)", t->ndim,
                       DLE_MAX_DIMS - 1);
    int64_t sizes[DLE_MAX_DIMS], strides[DLE_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) {
      sizes[d] = t->sizes[d];
      strides[d] = 2 * t->strides[d];
    }
    sizes[t->ndim] = 2;
    strides[t->ndim] = 1;
    return retyped_view(out, t, dt, t->ndim + 1, sizes, strides, 2 * t->offset);
  }
  if (t->dtype != DLE_F32 && t->dtype != DLE_F64)
    return dle_error("view_as_complex: expected a float32 or float64 tensor, got %s of shape %s",
                     dle_dtype_name(t->dtype), SHAPE(t));
  if (dt != dle_complex_of(t->dtype))
    return dle_error("view_as_complex: a %s tensor of shape %s is viewed as %s, not %s",
                     dle_dtype_name(t->dtype), SHAPE(t), dle_dtype_name(dle_complex_of(t->dtype)),
                     dle_dtype_name(dt));
  int n = t->ndim;
  if (n == 0 || t->sizes[n - 1] != 2 || t->strides[n - 1] != 1)
    return dle_error(
        "view_as_complex: the last dim must have size 2 and stride 1, got shape %s "
        "(strides %s)",
        SHAPE(t), dle_shape_str((char[128]){0}, 128, n, t->strides));
  for (int d = 0; d < n - 1; d++)
    if (t->strides[d] % 2 != 0)
      return dle_error(
          "view_as_complex: every stride but the last must be even, got strides %s "
          "for shape %s",
          dle_shape_str((char[128]){0}, 128, n, t->strides), SHAPE(t));
  if (t->offset % 2 != 0)
    return dle_error("view_as_complex: the storage offset must be even, got %lld",
                     (long long)t->offset);
  int64_t strides[DLE_MAX_DIMS];
  for (int d = 0; d < n - 1; d++) strides[d] = t->strides[d] / 2;
  return retyped_view(out, t, dt, n - 1, t->sizes, strides, t->offset / 2);
}

static dle_status retype_call(dle_tensor **out, dle_tensor *t, dle_dtype dt) {
  dle_attrs a = {0};
  a.has_dtype = true;
  a.dtype = dt;
  return dle_op_call(DLE_OP_VIEW, out, &t, 1, &a);
}

dle_status dle_view_as_real(dle_tensor **out, dle_tensor *z) {
  *out = NULL;
  if (!dle_dtype_is_complex(z->dtype))
    return dle_error("view_as_real: expected a complex tensor, got %s of shape %s",
                     dle_dtype_name(z->dtype), SHAPE(z));
  return retype_call(out, z, dle_real_of(z->dtype));
}

dle_status dle_view_as_complex(dle_tensor **out, dle_tensor *x) {
  *out = NULL;
  if (dle_dtype_is_complex(x->dtype))
    return dle_error("view_as_complex: expected a float32 or float64 tensor, got %s of shape %s",
                     dle_dtype_name(x->dtype), SHAPE(x));
  return retype_call(out, x, dle_complex_of(x->dtype));
}

/* Can x (float {.., 2}) be viewed as complex without a copy? */
static bool complex_viewable(const dle_tensor *x) {
  int n = x->ndim;
  if (n == 0 || x->strides[n - 1] != 1 || x->offset % 2) return false;
  for (int d = 0; d < n - 1; d++)
    if (x->strides[d] % 2) return false;
  return true;
}

dle_status dle_view_as_complex_any(dle_tensor **out, dle_tensor *x) {
  *out = NULL;
  if (complex_viewable(x)) return dle_view_as_complex(out, x);
  dle_tensor *c = NULL;
  DLE_TRY(dle_contiguous(&c, x));
  dle_status st = dle_view_as_complex(out, c);
  dle_tensor_release(c);
  return st;
}

/* part 0 (real) or 1 (imaginary) of z as a real view */
static dle_status part(dle_tensor **out, dle_tensor *z, int k) {
  dle_tensor *r = NULL;
  *out = NULL;
  DLE_TRY(dle_view_as_real(&r, z));
  dle_status st = dle_select(out, r, r->ndim - 1, k);
  dle_tensor_release(r);
  return st;
}

dle_status dle_real_part(dle_tensor **out, dle_tensor *z) {
  if (dle_dtype_is_complex(z->dtype)) return part(out, z, 0);
  dle_tensor_retain(z);
  *out = z;
  return DLE_OK;
}

dle_status dle_imag_part(dle_tensor **out, dle_tensor *z) {
  if (dle_dtype_is_complex(z->dtype)) return part(out, z, 1);
  *out = NULL;
  return dle_error("imag: expected a complex tensor, got %s of shape %s", dle_dtype_name(z->dtype),
                   SHAPE(z));
}

dle_status dle_complex_from_parts(dle_tensor **out, dle_tensor *re, dle_tensor *im) {
  dle_tensor *s = NULL;
  *out = NULL;
  DLE_TRY(dle_stack(&s, (dle_tensor *[]){re, im}, 2, re->ndim));
  dle_status st = dle_view_as_complex(out, s);
  dle_tensor_release(s);
  return st;
}

dle_status dle_conj(dle_tensor **out, dle_tensor *z) {
  *out = NULL;
  if (!dle_dtype_is_complex(z->dtype)) {
    dle_tensor_retain(z);
    *out = z;
    return DLE_OK;
  }
  /* (re, im) * (1, -1): a fresh contiguous tensor, viewed as complex again */
  dle_tensor *r = NULL, *sign = NULL, *m = NULL;
  dle_status st = dle_view_as_real(&r, z);
  if (st == DLE_OK) st = dle_full_on(&sign, 1, (int64_t[]){2}, 1, r->dtype, dle_tensor_device(z));
  if (st == DLE_OK) {
    dle_tensor *second = NULL;
    st = dle_select(&second, sign, 0, 1);
    if (st == DLE_OK) st = dle_fill_(second, -1);
    dle_tensor_release(second);
  }
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, &m, r, sign);
  if (st == DLE_OK) st = dle_view_as_complex(out, m);
  dle_tensor_release(r);
  dle_tensor_release(sign);
  dle_tensor_release(m);
  return st;
}

dle_status dle_grad_cast(dle_tensor **out, dle_tensor *g, dle_dtype dt) {
  *out = NULL;
  if (dle_dtype_is_complex(g->dtype) && !dle_dtype_is_complex(dt)) {
    dle_tensor *re = NULL;
    DLE_TRY(dle_real_part(&re, g));
    dle_status st = dle_to_dtype(out, re, dt);
    dle_tensor_release(re);
    return st;
  }
  return dle_to_dtype(out, g, dt);
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
