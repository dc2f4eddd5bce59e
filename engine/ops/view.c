/* view.c — movement ops: new geometry over the same storage, never a copy (reshape and
 * contiguous copy only when the strides cannot express the result). */
#include "../autograd.h"

/* Strides for viewing (sizes, strides) as new_sizes without copying, or false when impossible.
 * Walks both shapes from the right, matching runs of old dims that are contiguous with each other
 * ("chunks") against runs of new dims of the same element count. */
static bool view_strides(int nd, const int64_t *sizes, const int64_t *strides, int nnew,
                         const int64_t *new_sizes, int64_t *new_strides) {
  if (nd == 0 || dle_shape_numel(nd, sizes) == 0) {
    dle_contiguous_strides(nnew, new_sizes, new_strides);
    return true;
  }
  int view_d = nnew - 1;
  int64_t chunk_stride = strides[nd - 1], tensor_numel = 1, view_numel = 1;
  for (int d = nd - 1; d >= 0; d--) {
    tensor_numel *= sizes[d];
    bool chunk_ends =
        d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
      new_strides[view_d] = view_numel * chunk_stride;
      view_numel *= new_sizes[view_d];
      view_d--;
    }
    if (view_numel != tensor_numel) return false;
    if (d > 0) {
      chunk_stride = strides[d - 1];
      tensor_numel = view_numel = 1;
    }
  }
  return view_d == -1;
}

/* Resolves one -1 in sizes and checks the element count. */
static dle_status infer_sizes(const char *fn, const dle_tensor *t, int n, const int64_t *in,
                              int64_t *out) {
  int infer = -1;
  /* The product of the non-zero sizes must fit (as for new tensors): the view's element count and
   * strides are products of its sizes, even when a 0 makes it empty. */
  int64_t nonzero = 1;
  bool overflow = false, zero = false;
  char buf[128];
  for (int d = 0; d < n; d++) {
    out[d] = in[d];
    if (in[d] == -1) {
      if (infer >= 0)
        return dle_error("%s: only one size can be -1, got %s", fn,
                         dle_shape_str(buf, sizeof buf, n, in));
      infer = d;
    } else if (in[d] < 0) {
      return dle_error("%s: negative size in %s", fn, dle_shape_str(buf, sizeof buf, n, in));
    } else {
      zero = zero || in[d] == 0;
      overflow = overflow || __builtin_mul_overflow(nonzero, in[d] ? in[d] : 1, &nonzero) ||
                 nonzero > INT64_MAX / 16;
    }
  }
  if (overflow)
    return dle_error("%s: shape %s has too many elements", fn,
                     dle_shape_str(buf, sizeof buf, n, in));
  int64_t known = zero ? 0 : nonzero;
  int64_t numel = dle_tensor_numel(t);
  if (infer >= 0) {
    if (known == 0 || numel % known)
      return dle_error("%s: shape %s is invalid for a tensor of shape %s (%lld elements)", fn,
                       dle_shape_str(buf, sizeof buf, n, in), SHAPE(t), (long long)numel);
    out[infer] = numel / known;
  } else if (known != numel) {
    return dle_error("%s: shape %s is invalid for a tensor of shape %s (%lld elements)", fn,
                     dle_shape_str(buf, sizeof buf, n, in), SHAPE(t), (long long)numel);
  }
  return DLE_OK;
}

/* An index as the caller wrote it, for messages: negative ones count from the end in any base. */
static int64_t user_index(const dle_attrs *a, int64_t i) { return i >= 0 ? i + a->index_base : i; }

DLE_FORWARD_RULE(view) {
  dle_tensor *t = ins[0];
  if (outs[0])
    return dle_error("%s: views cannot write into a given output", dle_op_get_info(op)->name);
  if (op == DLE_OP_VIEW && a->has_dtype) /* view_as_real / view_as_complex */
    return dle_complex_retype(&outs[0], t, a->dtype);
  int nd = t->ndim, n = 0, dim;
  int64_t sizes[DLE_MAX_DIMS], strides[DLE_MAX_DIMS], offset = t->offset;
  switch (op) {
    case DLE_OP_VIEW:
      if (a->nints > DLE_MAX_DIMS) return dle_error("view: at most %d dims", DLE_MAX_DIMS);
      n = a->nints;
      DLE_TRY(infer_sizes("view", t, n, a->ints, sizes));
      if (!view_strides(nd, t->sizes, t->strides, n, sizes, strides)) {
        char buf[128];
        return dle_error(
            "view: a tensor of shape %s with strides %s cannot be viewed as %s "
            "without a copy; use reshape",
            SHAPE(t), dle_shape_str((dle_shape_buf){{0}}.s, 128, nd, t->strides),
            dle_shape_str(buf, sizeof buf, n, sizes));
      }
      break;
    case DLE_OP_PERMUTE: {
      if (a->nints != nd)
        return dle_error("permute: %d dims given for a tensor of shape %s", a->nints, SHAPE(t));
      bool seen[DLE_MAX_DIMS] = {false};
      n = nd;
      for (int d = 0; d < nd; d++) {
        if (dle_wrap_dim("permute", (int)a->ints[d], nd, 0, &dim) != DLE_OK)
          return dle_error("permute: dim %lld out of range for a tensor of shape %s",
                           (long long)(a->ints[d] < 0 ? a->ints[d] : a->ints[d] + 1), SHAPE(t));
        if (seen[dim])
          return dle_error("permute: dim %d repeated for a tensor of shape %s", dim + 1, SHAPE(t));
        seen[dim] = true;
        sizes[d] = t->sizes[dim];
        strides[d] = t->strides[dim];
      }
      break;
    }
    case DLE_OP_NARROW: {
      DLE_TRY(dle_wrap_dim("narrow", (int)a->ints[0], nd, 0, &dim));
      int64_t start = a->ints[1], len = a->ints[2], size = t->sizes[dim];
      if (start < 0) start += size;
      if (start < 0 || start > size || len < 0 || len > size - start)
        return dle_error(
            "narrow: start %lld and length %lld out of range for dim %d of size %lld (shape %s)",
            (long long)user_index(a, a->ints[1]), (long long)a->ints[2], dim + 1, (long long)size,
            SHAPE(t));
      n = nd;
      memcpy(sizes, t->sizes, sizeof sizes);
      memcpy(strides, t->strides, sizeof strides);
      sizes[dim] = len;
      offset += start * t->strides[dim];
      break;
    }
    case DLE_OP_SELECT: {
      DLE_TRY(dle_wrap_dim("select", (int)a->ints[0], nd, 0, &dim));
      int64_t i = a->ints[1], size = t->sizes[dim];
      if (i < 0) i += size;
      if (i < 0 || i >= size)
        return dle_error("select: index %lld out of range for dim %d of size %lld (shape %s)",
                         (long long)user_index(a, a->ints[1]), dim + 1, (long long)size, SHAPE(t));
      offset += i * t->strides[dim];
      for (int d = 0; d < nd; d++)
        if (d != dim) sizes[n] = t->sizes[d], strides[n++] = t->strides[d];
      break;
    }
    case DLE_OP_EXPAND: {
      n = a->nints;
      if (n < nd || n > DLE_MAX_DIMS)
        return dle_error("expand: %d sizes given for a tensor of shape %s (need at least %d)", n,
                         SHAPE(t), nd);
      for (int d = n - 1; d >= 0; d--) {
        int src = d - (n - nd);
        int64_t want = a->ints[d];
        if (src < 0) {
          if (want < 0)
            return dle_error("expand: size -1 not allowed for new leading dim %d", d + 1);
          sizes[d] = want, strides[d] = 0;
        } else if (want == -1 || want == t->sizes[src]) {
          sizes[d] = t->sizes[src], strides[d] = t->strides[src];
        } else if (t->sizes[src] == 1 && want >= 0) {
          sizes[d] = want, strides[d] = 0;
        } else {
          char buf[128];
          return dle_error("expand: cannot expand shape %s to %s (dim %d has size %lld)", SHAPE(t),
                           dle_shape_str(buf, sizeof buf, n, a->ints), d + 1,
                           (long long)t->sizes[src]);
        }
      }
      break;
    }
    case DLE_OP_DIAGONAL: { /* ints: offset, dim1, dim2; stride dim1's + dim2's */
      if (nd < 2) return dle_error("diagonal: expected at least 2 dims, got shape %s", SHAPE(t));
      int d1, d2;
      DLE_TRY(dle_wrap_dim("diagonal", (int)a->ints[1], nd, 0, &d1));
      DLE_TRY(dle_wrap_dim("diagonal", (int)a->ints[2], nd, 0, &d2));
      if (d1 == d2)
        return dle_error("diagonal: dim1 and dim2 are both dim %d (shape %s)", d1 + 1, SHAPE(t));
      /* the first element's row and column, clamped (an offset past the matrix, as far as
       * INT64_MIN, gives an empty diagonal without overflowing) */
      int64_t off = a->ints[0], r0 = 0, c0 = 0;
      if (off < 0)
        r0 = off < -t->sizes[d1] ? t->sizes[d1] : -off;
      else
        c0 = off > t->sizes[d2] ? t->sizes[d2] : off;
      int64_t len = t->sizes[d1] - r0 < t->sizes[d2] - c0 ? t->sizes[d1] - r0 : t->sizes[d2] - c0;
      if (len < 0) len = 0;
      for (int d = 0; d < nd; d++)
        if (d != d1 && d != d2) sizes[n] = t->sizes[d], strides[n++] = t->strides[d];
      sizes[n] = len, strides[n++] = t->strides[d1] + t->strides[d2];
      if (len > 0) offset += r0 * t->strides[d1] + c0 * t->strides[d2];
      break;
    }
    default: return dle_error("%s: not a view op", dle_op_get_info(op)->name);
  }
  DLE_TRY(dle_tensor_as_strided(&outs[0], t, n, sizes, strides, offset));
  outs[0]->is_view = true;
  return DLE_OK;
}

/* FLOPs: a view changes metadata only. */
dle_flops_rule dle_flops_view(dle_op op) {
  (void)op;
  return dle_flops_none();
}

/* ---- public wrappers ---- */

static dle_status call1(dle_op op, dle_tensor **out, dle_tensor *t, const dle_attrs *a) {
  return dle_op_call(op, out, &t, 1, a);
}

static dle_attrs ints_attrs(int n, const int64_t *v) {
  dle_attrs a = {0};
  a.nints = n;
  if (n > 0) memcpy(a.ints, v, (size_t)n * sizeof *v);
  return a;
}

dle_status dle_view(dle_tensor **out, dle_tensor *t, int ndim, const int64_t *sizes) {
  if (ndim < 0 || ndim > DLE_MAX_DIMS) return dle_error("view: at most %d dims", DLE_MAX_DIMS);
  dle_attrs a = ints_attrs(ndim, sizes);
  return call1(DLE_OP_VIEW, out, t, &a);
}

dle_status dle_reshape(dle_tensor **out, dle_tensor *t, int ndim, const int64_t *sizes) {
  if (ndim < 0 || ndim > DLE_MAX_DIMS) return dle_error("reshape: at most %d dims", DLE_MAX_DIMS);
  int64_t resolved[DLE_MAX_DIMS], strides[DLE_MAX_DIMS];
  DLE_TRY(infer_sizes("reshape", t, ndim, sizes, resolved));
  if (view_strides(t->ndim, t->sizes, t->strides, ndim, resolved, strides))
    return dle_view(out, t, ndim, resolved);
  dle_tensor *c = NULL;
  DLE_TRY(dle_contiguous(&c, t));
  dle_status st = dle_view(out, c, ndim, resolved);
  dle_tensor_release(c);
  return st;
}

dle_status dle_permute(dle_tensor **out, dle_tensor *t, const int *dims) {
  dle_attrs a = {0};
  a.nints = t->ndim;
  for (int d = 0; d < t->ndim; d++) a.ints[d] = dims[d];
  return call1(DLE_OP_PERMUTE, out, t, &a);
}

dle_status dle_transpose(dle_tensor **out, dle_tensor *t, int d1, int d2) {
  int a1, a2, perm[DLE_MAX_DIMS];
  if (t->ndim < 2 && (d1 == 0 || d1 == -1) && (d2 == 0 || d2 == -1)) { /* 0-/1-D: itself */
    dle_attrs a = {0};
    return call1(DLE_OP_PERMUTE, out, t, (a.nints = t->ndim, &a));
  }
  DLE_TRY(dle_wrap_dim("transpose", d1, t->ndim, 0, &a1));
  DLE_TRY(dle_wrap_dim("transpose", d2, t->ndim, 0, &a2));
  for (int d = 0; d < t->ndim; d++) perm[d] = d;
  perm[a1] = a2, perm[a2] = a1;
  return dle_permute(out, t, perm);
}

dle_status dle_narrow(dle_tensor **out, dle_tensor *t, int dim, int64_t start, int64_t length) {
  int64_t v[3] = {dim, start, length};
  dle_attrs a = ints_attrs(3, v);
  return call1(DLE_OP_NARROW, out, t, &a);
}

dle_status dle_select(dle_tensor **out, dle_tensor *t, int dim, int64_t index) {
  int64_t v[2] = {dim, index};
  dle_attrs a = ints_attrs(2, v);
  return call1(DLE_OP_SELECT, out, t, &a);
}

dle_status dle_expand(dle_tensor **out, dle_tensor *t, int ndim, const int64_t *sizes) {
  if (ndim < 0 || ndim > DLE_MAX_DIMS) return dle_error("expand: at most %d dims", DLE_MAX_DIMS);
  dle_attrs a = ints_attrs(ndim, sizes);
  return call1(DLE_OP_EXPAND, out, t, &a);
}

dle_status dle_diagonal(dle_tensor **out, dle_tensor *t, int64_t offset, int dim1, int dim2) {
  dle_attrs a = ints_attrs(3, (int64_t[]){offset, dim1, dim2});
  return call1(DLE_OP_DIAGONAL, out, t, &a);
}

dle_status dle_squeeze(dle_tensor **out, dle_tensor *t, int dim) {
  int64_t sizes[DLE_MAX_DIMS];
  int n = 0, d0 = -1;
  if (dim != DLE_ALL_DIMS) DLE_TRY(dle_wrap_dim("squeeze", dim, t->ndim, 0, &d0));
  for (int d = 0; d < t->ndim; d++)
    if (!(t->sizes[d] == 1 && (d0 < 0 || d == d0))) sizes[n++] = t->sizes[d];
  return dle_view(out, t, n, sizes);
}

dle_status dle_unsqueeze(dle_tensor **out, dle_tensor *t, int dim) {
  int d0;
  if (t->ndim >= DLE_MAX_DIMS)
    return dle_error("unsqueeze: a tensor of shape %s already has %d dims", SHAPE(t), DLE_MAX_DIMS);
  DLE_TRY(dle_wrap_dim("unsqueeze", dim, t->ndim, 1, &d0));
  int64_t sizes[DLE_MAX_DIMS];
  for (int d = 0, n = 0; d <= t->ndim; d++) sizes[d] = d == d0 ? 1 : t->sizes[n++];
  return dle_view(out, t, t->ndim + 1, sizes);
}

dle_status dle_flatten(dle_tensor **out, dle_tensor *t, int d1, int d2) {
  if (t->ndim == 0) return dle_reshape(out, t, 1, (int64_t[]){1});
  int a1, a2;
  DLE_TRY(dle_wrap_dim("flatten", d1, t->ndim, 0, &a1));
  DLE_TRY(dle_wrap_dim("flatten", d2, t->ndim, 0, &a2));
  if (a1 > a2) return dle_error("flatten: start dim %d comes after end dim %d", a1 + 1, a2 + 1);
  int64_t sizes[DLE_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (d <= a1 || d > a2)
      sizes[n++] = t->sizes[d];
    else
      sizes[n - 1] *= t->sizes[d];
  }
  return dle_reshape(out, t, n, sizes);
}

dle_status dle_contiguous(dle_tensor **out, dle_tensor *t) {
  if (dle_tensor_is_contiguous(t)) {
    dle_tensor_retain(t);
    *out = t;
    return DLE_OK;
  }
  return dle_clone(out, t);
}
