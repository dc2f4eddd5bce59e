/* copy.c — the copy op (with dtype conversion and broadcasting) and what is built on it:
 * clone, copy_, conversions between dtypes and devices. */
#include "../autograd.h"
#include "../internal.h"

dle_status dle_forward_copy(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                            const dle_attrs *a) {
  (void)nin;
  dle_tensor *src = ins[0];
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
