/* copy.c — the copy op (with dtype conversion and broadcasting) and what is built on it: clone,
 * copy_, conversions between dtypes and devices; and the creation ops full and arange (kind
 * CREATE; the random fills are random.c), with full, zeros, arange, linspace and eye. */
#include "../autograd.h"
#include "../internal.h"

DLE_FORWARD_RULE(copy) {
  dle_tensor *src = ins[0];
  dle_dtype to = outs[0] ? outs[0]->dtype : a->has_dtype ? a->dtype : src->dtype;
  if (dle_dtype_is_complex(src->dtype) && !dle_dtype_is_complex(to))
    return dle_error(
        "to: cannot convert %s (shape %s) to %s: the imaginary part would be lost; take "
        "dle.real(t) / t:real() (or dle.abs, dle.angle) first",
        dle_dtype_name(src->dtype), SHAPE(src), dle_dtype_name(to));
  if (!outs[0]) {
    dle_dtype dt = a->has_dtype ? a->dtype : src->dtype;
    DLE_TRY(dle_tensor_empty(&outs[0], src->ndim, src->sizes, dt, dle_tensor_device(src)));
    return dle_dispatch(op, outs, 1, ins, 1, a);
  }
  dle_tensor *dst = outs[0];
  int n;
  int64_t shape[DLE_MAX_DIMS];
  DLE_TRY(dle_broadcast_shapes("copy_", dst->ndim, dst->sizes, src->ndim, src->sizes, &n, shape));
  if (!dle_shape_equal(n, shape, dst->ndim, dst->sizes))
    return dle_error("copy_: source of shape %s cannot be broadcast to destination shape %s",
                     SHAPE(src), SHAPE(dst));
  if (dle_same_view(dst, src)) return DLE_OK;
  if (dle_tensor_overlaps_itself(dst)) {
    char buf[128];
    return dle_error(
        "copy_: cannot write into an expanded tensor of shape %s (strides %s: several "
        "elements share memory); clone it first",
        SHAPE(dst), dle_shape_str(buf, sizeof buf, dst->ndim, dst->strides));
  }
  if (dle_tensor_device(dst).type != dle_tensor_device(src).type) {
    dle_tensor *moved = NULL;
    DLE_TRY(dle_to_device(&moved, src, dle_tensor_device(dst)));
    dle_status st = dle_copy_(dst, moved);
    dle_tensor_release(moved);
    return st;
  }
  if (dst->storage == src->storage) { /* overlapping views: read from a snapshot */
    dle_tensor *snap = NULL;
    DLE_TRY(dle_clone(&snap, src));
    dle_status st = dle_dispatch(op, outs, 1, &snap, 1, a);
    dle_tensor_release(snap);
    return st;
  }
  return dle_dispatch(op, outs, 1, ins, 1, a);
}

/* FLOPs: a copy moves bytes (counted by the profiler), it computes nothing. */
dle_flops_rule dle_flops_copy(dle_op op) {
  (void)op;
  return dle_flops_none();
}

dle_status dle_clone(dle_tensor **out, dle_tensor *t) {
  *out = NULL;
  return dle_op_call(DLE_OP_COPY, out, &t, 1, NULL);
}

dle_status dle_copy_(dle_tensor *dst, dle_tensor *src) {
  return dle_op_call(DLE_OP_COPY, &dst, &src, 1, NULL);
}

dle_status dle_to_dtype(dle_tensor **out, dle_tensor *t, dle_dtype dt) {
  if ((unsigned)dt >= DLE_NUM_DTYPES) return dle_error("to: invalid dtype %d", (int)dt);
  if (t->dtype == dt) {
    dle_tensor_retain(t);
    *out = t;
    return DLE_OK;
  }
  dle_attrs a = {0};
  a.dtype = dt, a.has_dtype = true;
  *out = NULL;
  return dle_op_call(DLE_OP_COPY, out, &t, 1, &a);
}

dle_status dle_to_device(dle_tensor **out, dle_tensor *t, dle_device d) {
  dle_device from = dle_tensor_device(t);
  if (from.type == d.type && from.index == d.index) {
    dle_tensor_retain(t);
    *out = t;
    return DLE_OK;
  }
  char buf[32];
  dle_trace_note_unsafe("to(%s): device copies are not traced", dle_device_str(buf, sizeof buf, d));
  const dle_backend *b = dle_backend_get(d.type == DLE_CPU ? from.type : d.type);
  if (!b)
    return dle_error("to(%s): %s", dle_device_str(buf, sizeof buf, d),
                     dle_backend_unavailable_reason(d.type == DLE_CPU ? from.type : d.type));
  dle_tensor *c = NULL, *r = NULL;
  DLE_TRY(dle_contiguous(&c, t));
  dle_status st = dle_tensor_empty(&r, t->ndim, t->sizes, t->dtype, d);
  if (st == DLE_OK) {
    size_t nbytes = (size_t)dle_tensor_numel(t) * dle_dtype_size(t->dtype);
    if (from.type == DLE_CPU)
      st = b->from_host(dle_tensor_data(r), dle_tensor_data(c), nbytes, d.index);
    else if (d.type == DLE_CPU)
      st = b->to_host(dle_tensor_data(r), dle_tensor_data(c), nbytes, from.index);
    else
      st = dle_error("to(%s): copies between two accelerators go through the CPU",
                     dle_device_str(buf, sizeof buf, d));
  }
  dle_tensor_release(c);
  if (st != DLE_OK) {
    dle_tensor_release(r);
    return st;
  }
  *out = r;
  return DLE_OK;
}

/* ---- full and arange: no tensor inputs; sizes are attrs.ints, the dtype attrs.dtype, values
 * attrs.f ---- */

DLE_FORWARD_RULE(create) {
  dle_dtype dt = a->has_dtype ? a->dtype : DLE_DEFAULT_FLOAT;
  bool fresh = !outs[0];
  if (fresh) DLE_TRY(dle_tensor_empty(&outs[0], a->nints, a->ints, dt, DLE_DEVICE_CPU));
  dle_status st = dle_dispatch(op, outs, 1, NULL, 0, a);
  if (st != DLE_OK && fresh) DLE_RELEASE(outs[0]);
  return st;
}

/* FLOPs: filling memory computes nothing. */
dle_flops_rule dle_flops_create(dle_op op) {
  (void)op;
  return dle_flops_none();
}

/* A call of the creation op op (full, arange, or a random fill of random.c) with the sizes, dtype,
 * values f0, f1 and generator in its attrs, into a new tensor *out. */
dle_status dle_create_call(dle_op op, dle_tensor **out, int ndim, const int64_t *sizes,
                           dle_dtype dt, double f0, double f1, dle_generator *g) {
  const char *fn = dle_op_get_info(op)->name;
  if (ndim < 0 || ndim > DLE_MAX_DIMS) return dle_error("%s: at most %d dims", fn, DLE_MAX_DIMS);
  for (int d = 0; d < ndim; d++)
    if (sizes[d] < 0) {
      char buf[128];
      return dle_error("%s: negative size in %s", fn, dle_shape_str(buf, sizeof buf, ndim, sizes));
    }
  dle_attrs a = {0};
  a.nints = ndim;
  if (ndim > 0) memcpy(a.ints, sizes, (size_t)ndim * sizeof *sizes);
  a.dtype = dt, a.has_dtype = true;
  a.f[0] = f0, a.f[1] = f1;
  a.generator = g;
  *out = NULL;
  return dle_op_call(op, out, NULL, 0, &a);
}

dle_status dle_full(dle_tensor **out, int ndim, const int64_t *sizes, double value, dle_dtype dt) {
  return dle_create_call(DLE_OP_FULL, out, ndim, sizes, dt, value, 0, NULL);
}

dle_status dle_fill_(dle_tensor *t, double value) {
  dle_attrs a = {0};
  a.f[0] = value;
  return dle_op_call(DLE_OP_FULL, &t, NULL, 0, &a);
}

dle_status dle_full_on(dle_tensor **out, int ndim, const int64_t *sizes, double value, dle_dtype dt,
                       dle_device dev) {
  if (dev.type == DLE_CPU) return dle_full(out, ndim, sizes, value, dt);
  *out = NULL;
  DLE_TRY(dle_tensor_empty(out, ndim, sizes, dt, dev));
  dle_status st = dle_fill_(*out, value);
  if (st != DLE_OK) DLE_RELEASE(*out);
  return st;
}

dle_status dle_zeros(dle_tensor **out, int ndim, const int64_t *sizes, dle_dtype dt) {
  return dle_full(out, ndim, sizes, 0, dt);
}

dle_status dle_arange(dle_tensor **out, double start, double stop, double step, dle_dtype dt) {
  if (step == 0 || !isfinite(step))
    return dle_error("arange: step must be finite and nonzero, got %g", step);
  if (!isfinite(start) || !isfinite(stop))
    return dle_error("arange: start and stop must be finite, got %g and %g", start, stop);
  double n = ceil((stop - start) / step);
  if (!(n >= 0)) n = 0;
  if (n > 1e15) return dle_error("arange: %g elements requested", n);
  int64_t len = (int64_t)n;
  return dle_create_call(DLE_OP_ARANGE, out, 1, &len, dt, start, step, NULL);
}

dle_status dle_linspace(dle_tensor **out, double a, double b, int64_t n, dle_dtype dt) {
  if (n < 0) return dle_error("linspace: number of points must be >= 0, got %lld", (long long)n);
  double step = n > 1 ? (b - a) / (double)(n - 1) : 0;
  DLE_TRY(dle_create_call(DLE_OP_ARANGE, out, 1, &n, dt, a, step, NULL));
  if (n > 1) dle_tensor_set(*out, (int64_t[]){n - 1}, b); /* exact end point */
  return DLE_OK;
}

dle_status dle_eye(dle_tensor **out, int64_t n, int64_t m, dle_dtype dt) {
  if (n < 0 || m < 0)
    return dle_error("eye: sizes must be >= 0, got %lld x %lld", (long long)n, (long long)m);
  DLE_TRY(dle_zeros(out, 2, (int64_t[]){n, m}, dt));
  for (int64_t i = 0; i < n && i < m; i++) dle_tensor_set(*out, (int64_t[]){i, i}, 1);
  return DLE_OK;
}
