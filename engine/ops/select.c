/* select.c — shape and dtype rules of the select family (kind SELECT in ops.def): nonzero,
 * masked_select, masked_scatter, unique, bincount, searchsorted, mode, and their public wrappers.
 * Gradient rules: ops/select_grad.c; kernels: kernels/cpu/select.c (CPU only: kernels/cuda/
 * cpu_only.txt).
 *
 * nonzero, masked_select and unique return as many elements as the data says. Their kernels get
 * outputs sized for the most they can write (capacity) plus a 0-dim int64 count as an extra
 * output; the front door then keeps that many (a copy when fewer). They write into no caller's
 * tensor, and their wrappers make a trace holding them unsafe (as bincount's, whose length is read
 * from x). unique
 * sorts with the sort op first, so its kernel only walks runs. */
#include "../autograd.h"
#include "reduce_front.h"

static const char *op_name(dle_op op) { return dle_op_get_info(op)->name; }

/* A graph replaying the op would keep the size of the traced call: traces holding it are unsafe
 * (dle.compile then runs the function eagerly, with a message under DLE_DEBUG). Noted by the
 * public wrappers, before dle_op_call: a trace stops looking while the op itself runs. */
static void note_data_dependent(dle_op op) {
  dle_trace_note_unsafe("%s: its result size depends on the data, which a graph cannot replay",
                        op_name(op));
}

static dle_status no_given_outputs(dle_op op, dle_tensor **outs) {
  for (int k = 0; k < dle_op_get_info(op)->nout; k++)
    if (outs[k])
      return dle_error(
          "%s: its result size depends on the data; it cannot write into a given tensor",
          op_name(op));
  return DLE_OK;
}

/* Runs op's kernel into fresh outputs of the shapes res (dim 0 of output k is a capacity when bit
 * k of `counted`), then narrows those to the count the kernel wrote. */
static dle_status run_counted(dle_op op, dle_tensor **outs, int nout, const dle_result_spec *res,
                              unsigned counted, dle_tensor *const *ins, int nin,
                              const dle_attrs *a) {
  dle_tensor *full[DLE_MAX_OUTS + 1] = {NULL};
  dle_device dev = dle_tensor_device(ins[0]);
  dle_status st = DLE_OK;
  for (int k = 0; k < nout && st == DLE_OK; k++)
    st = dle_tensor_empty(&full[k], res[k].ndim, res[k].sizes, res[k].dtype, dev);
  if (st == DLE_OK) st = dle_tensor_empty(&full[nout], 0, NULL, DLE_I64, dev);
  if (st == DLE_OK) st = dle_dispatch(op, full, nout + 1, ins, nin, a);
  int64_t count = st == DLE_OK ? *(const int64_t *)dle_tensor_data(full[nout]) : 0;
  for (int k = 0; k < nout; k++) {
    if (st == DLE_OK && (counted >> k & 1) && count < full[k]->sizes[0]) {
      dle_tensor *part = NULL;
      st = dle_narrow(&part, full[k], 0, 0, count);
      if (st == DLE_OK) st = dle_clone(&outs[k], part);
      dle_tensor_release(part);
    } else if (st == DLE_OK) {
      outs[k] = full[k];
      full[k] = NULL;
    }
    dle_tensor_release(full[k]);
  }
  dle_tensor_release(full[nout]);
  if (st != DLE_OK)
    for (int k = 0; k < nout; k++) DLE_RELEASE(outs[k]);
  return st;
}

/* After st (the preparation of the n owned inputs): gives outs[0] a result of (ndim, sizes, dt) or
 * checks the caller's, runs op, releases the owned inputs. */
static dle_status run_owned(dle_status st, dle_op op, dle_tensor **outs, dle_tensor **owned, int n,
                            int ndim, const int64_t *sizes, dle_dtype dt, dle_device dev,
                            const dle_attrs *a) {
  dle_tensor *out = outs[0];
  if (st == DLE_OK) st = dle_prepare_out(&out, op_name(op), ndim, sizes, dt, dev);
  if (st == DLE_OK) st = dle_dispatch(op, &out, 1, owned, n, a);
  dle_release_all(owned, n);
  if (st != DLE_OK) {
    if (out != outs[0]) dle_tensor_release(out);
    return st;
  }
  outs[0] = out;
  return DLE_OK;
}

static dle_status check_mask(const char *fn, const dle_tensor *mask, const dle_tensor *x) {
  if (mask->dtype == DLE_BOOL) return DLE_OK;
  return dle_error("%s: mask must be bool, got %s (mask shape %s, input shape %s)", fn,
                   dle_dtype_name(mask->dtype), SHAPE(mask), SHAPE(x));
}

/* The shape x and mask broadcast to, in attrs ints[0..ndim) (the kernels read it there). */
static dle_status broadcast_attrs(const char *fn, const dle_tensor *x, const dle_tensor *mask,
                                  dle_attrs *ka, int64_t *numel) {
  int n;
  int64_t sizes[DLE_MAX_DIMS];
  DLE_TRY(dle_broadcast_shapes(fn, x->ndim, x->sizes, mask->ndim, mask->sizes, &n, sizes));
  memcpy(ka->ints, sizes, sizeof sizes);
  ka->nints = n;
  *numel = dle_shape_numel(n, sizes);
  return DLE_OK;
}

static dle_status forward_nonzero(dle_tensor **outs, dle_tensor *const *ins, const dle_attrs *a) {
  dle_tensor *x = ins[0];
  dle_result_spec r = {2, {dle_tensor_numel(x), x->ndim}, DLE_I64};
  return run_counted(DLE_OP_NONZERO, outs, 1, &r, 1, ins, 1, a);
}

static dle_status forward_masked_select(dle_tensor **outs, dle_tensor *const *ins,
                                        const dle_attrs *a) {
  dle_tensor *x = ins[0], *mask = ins[1];
  DLE_TRY(check_mask("masked_select", mask, x));
  dle_attrs ka = *a;
  int64_t numel;
  DLE_TRY(broadcast_attrs("masked_select", x, mask, &ka, &numel));
  dle_result_spec r = {1, {numel}, x->dtype};
  return run_counted(DLE_OP_MASKED_SELECT, outs, 1, &r, 1, ins, 2, &ka);
}

/* masked_scatter: the result has self's shape (mask broadcasts to it, as in PyTorch); source
 * needs at least as many elements as mask has true ones (the kernel checks). In place when
 * outs[0] is self. */
static dle_status forward_masked_scatter(dle_tensor **outs, dle_tensor *const *ins,
                                         const dle_attrs *a) {
  dle_tensor *self = ins[0], *mask = ins[1], *source = ins[2];
  DLE_TRY(check_mask("masked_scatter", mask, self));
  dle_attrs ka = *a;
  int64_t numel;
  DLE_TRY(broadcast_attrs("masked_scatter", self, mask, &ka, &numel));
  if (!dle_shape_equal((int)ka.nints, ka.ints, self->ndim, self->sizes))
    return dle_error("masked_scatter: mask of shape %s does not broadcast to self of shape %s",
                     SHAPE(mask), SHAPE(self));
  dle_dtype dt = outs[0] ? outs[0]->dtype : self->dtype;
  dle_tensor *owned[3] = {NULL, mask, NULL}, *out = outs[0];
  dle_tensor_retain(mask);
  dle_status st = dle_cast_if_needed(&owned[0], self, dt);
  if (st == DLE_OK) {
    dle_tensor *cast = NULL; /* the kernel reads source in order from its start */
    st = dle_cast_if_needed(&cast, source, dt);
    if (st == DLE_OK) st = dle_contiguous(&owned[2], cast);
    dle_tensor_release(cast);
  }
  /* mask and source are read at other positions than the one written: never the output itself */
  for (int i = 1; i < 3 && st == DLE_OK && out; i++)
    if (owned[i]->storage == out->storage) {
      dle_tensor *c = NULL;
      st = dle_clone(&c, owned[i]);
      dle_tensor_release(owned[i]);
      owned[i] = c;
    }
  return run_owned(st, DLE_OP_MASKED_SCATTER, outs, owned, 3, self->ndim, self->sizes, dt,
                   dle_tensor_device(self), &ka);
}

/* unique: the kernel gets x's elements in order (sorted with their positions, unless
 * consecutive) as contiguous 1-D tensors. */
static dle_status forward_unique(dle_tensor **outs, dle_tensor *const *ins, const dle_attrs *a) {
  dle_tensor *x = ins[0], *flat = NULL, *sorted[2] = {NULL, NULL};
  int64_t n = dle_tensor_numel(x);
  DLE_TRY(dle_reshape(&flat, x, 1, &n));
  dle_status st = DLE_OK;
  bool consecutive = a->nints > 0 && a->ints[0];
  if (consecutive) {
    st = dle_contiguous(&sorted[0], flat);
  } else {
    dle_attrs sa = {0};
    sa.nints = 1; /* dim 0, ascending, 0-based positions */
    st = dle_op_call(DLE_OP_SORT, sorted, &flat, 1, &sa);
  }
  dle_tensor_release(flat);
  if (st == DLE_OK) {
    dle_result_spec r[3] = {{1, {n}, x->dtype}, {x->ndim, {0}, DLE_I64}, {1, {n}, DLE_I64}};
    memcpy(r[1].sizes, x->sizes, sizeof r[1].sizes);
    st = run_counted(DLE_OP_UNIQUE, outs, 3, r, 1 | 4, sorted, consecutive ? 1 : 2, a);
  }
  dle_release_all(sorted, 2);
  return st;
}

static bool is_integer(dle_dtype dt) { return !dle_dtype_is_float(dt); }

/* bincount: the length is read from x (its largest value) before the kernel runs. */
static dle_status forward_bincount(dle_tensor **outs, dle_tensor *const *ins, int nin,
                                   const dle_attrs *a) {
  dle_tensor *x = ins[0], *w = nin > 1 ? ins[1] : NULL;
  if (nin > 2) return dle_error("bincount: expected x and optional weights, got %d tensors", nin);
  if (x->ndim != 1 || !is_integer(x->dtype))
    return dle_error("bincount: x must be a 1-D tensor of integers, got %s of shape %s",
                     dle_dtype_name(x->dtype), SHAPE(x));
  if (w && !dle_shape_equal(w->ndim, w->sizes, x->ndim, x->sizes))
    return dle_error("bincount: weights of shape %s must have x's shape %s", SHAPE(w), SHAPE(x));
  int64_t minlength = a->nints > 0 ? a->ints[0] : 0, len = minlength;
  if (minlength < 0)
    return dle_error("bincount: minlength must not be negative, got %lld", (long long)minlength);
  if (x->sizes[0] > 0) {
    dle_tensor *m = NULL, *host = NULL;
    DLE_TRY(dle_reduce(DLE_OP_AMAX, &m, x, 0, NULL, false, 0));
    dle_status st = dle_to_device(&host, m, DLE_DEVICE_CPU);
    dle_tensor_release(m);
    DLE_TRY(st);
    double top = dle_tensor_get(host, (int64_t[DLE_MAX_DIMS]){0});
    dle_tensor_release(host);
    if (top >= 1e15)
      return dle_error("bincount: the largest value %.17g of x (shape %s) is too large", top,
                       SHAPE(x));
    len = (int64_t)top + 1 > len ? (int64_t)top + 1 : len;
  }
  dle_dtype dt = !w ? DLE_I64 : dle_dtype_is_float(w->dtype) ? w->dtype : DLE_F64;
  dle_tensor *owned[2] = {NULL, NULL};
  dle_status st = dle_cast_if_needed(&owned[0], x, DLE_I64);
  if (st == DLE_OK && w) st = dle_cast_if_needed(&owned[1], w, dt);
  return run_owned(st, DLE_OP_BINCOUNT, outs, owned, w ? 2 : 1, 1, &len, dt, dle_tensor_device(x),
                   a);
}

/* searchsorted: both inputs in their promoted dtype; sorted is 1-D or has values' leading dims. */
static dle_status forward_searchsorted(dle_tensor **outs, dle_tensor *const *ins,
                                       const dle_attrs *a) {
  dle_tensor *seq = ins[0], *v = ins[1];
  if (seq->ndim == 0)
    return dle_error("searchsorted: sorted_sequence must have at least 1 dim, got shape %s",
                     SHAPE(seq));
  bool shared = seq->ndim == 1;
  if (!shared) {
    bool ok = v->ndim == seq->ndim;
    for (int d = 0; ok && d < seq->ndim - 1; d++) ok = v->sizes[d] == seq->sizes[d];
    if (!ok)
      return dle_error(
          "searchsorted: sorted_sequence of shape %s and values of shape %s must have the same "
          "leading dims (or sorted_sequence 1-D)",
          SHAPE(seq), SHAPE(v));
  }
  if (seq->dtype == DLE_BOOL || v->dtype == DLE_BOOL)
    return dle_error("searchsorted: bool tensors are not supported (sorted_sequence %s, values %s)",
                     dle_dtype_name(seq->dtype), dle_dtype_name(v->dtype));
  dle_dtype dt = dle_promote(seq->dtype, v->dtype);
  dle_tensor *owned[2] = {NULL, NULL};
  dle_status st = dle_cast_if_needed(&owned[0], seq, dt);
  if (st == DLE_OK) st = dle_cast_if_needed(&owned[1], v, dt);
  return run_owned(st, DLE_OP_SEARCHSORTED, outs, owned, 2, v->ndim, v->sizes, DLE_I64,
                   dle_tensor_device(v), a);
}

/* mode: laid out as kthvalue's results (the dim sized 1, dropped without keepdim). */
static dle_status forward_mode(dle_tensor **outs, dle_tensor *const *ins, const dle_attrs *a) {
  dle_tensor *x = ins[0];
  int d = 0;
  DLE_TRY(dle_line_dim("mode", x, a->nints > 0 ? a->ints[0] : -1, &d));
  if (x->sizes[d] == 0)
    return dle_error("mode: dim %d of shape %s is empty: there is no mode", d + 1, SHAPE(x));
  int64_t sizes[DLE_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < x->ndim; i++)
    if (i != d || a->keepdim) sizes[nd++] = i == d ? 1 : x->sizes[i];
  dle_attrs ka = *a;
  ka.ints[0] = d;
  ka.nints = a->nints > 1 ? a->nints : 1;
  dle_dtype dts[2] = {x->dtype, DLE_I64};
  return dle_reduce_run_into(DLE_OP_MODE, outs, 2, nd, sizes, dts, x, x->dtype, &ka);
}

DLE_FORWARD_RULE(select) {
  switch (op) {
    case DLE_OP_NONZERO: DLE_TRY(no_given_outputs(op, outs)); return forward_nonzero(outs, ins, a);
    case DLE_OP_MASKED_SELECT:
      DLE_TRY(no_given_outputs(op, outs));
      return forward_masked_select(outs, ins, a);
    case DLE_OP_UNIQUE: DLE_TRY(no_given_outputs(op, outs)); return forward_unique(outs, ins, a);
    case DLE_OP_MASKED_SCATTER: return forward_masked_scatter(outs, ins, a);
    case DLE_OP_BINCOUNT: return forward_bincount(outs, ins, nin, a);
    case DLE_OP_SEARCHSORTED: return forward_searchsorted(outs, ins, a);
    case DLE_OP_MODE: return forward_mode(outs, ins, a);
    default: return dle_error("%s: not a select op", op_name(op));
  }
}

/* FLOPs: bincount adds one per element, mode compares as a sort does (one per input element),
 * searchsorted one per value; nonzero, masked_select, masked_scatter and unique move data (unique's
 * sort is counted as the sort op it runs). */
dle_flops_rule dle_flops_select(dle_op op) {
  switch (op) {
    case DLE_OP_BINCOUNT:
    case DLE_OP_MODE: return dle_flops_per_in(1);
    case DLE_OP_SEARCHSORTED: return dle_flops_per_out(1);
    default: return dle_flops_none();
  }
}

/* ---------------------------------------------------------------- public wrappers */

dle_status dle_nonzero(dle_tensor **out, dle_tensor *x, int64_t base) {
  note_data_dependent(DLE_OP_NONZERO);
  dle_attrs a = {0};
  a.index_base = base;
  return dle_op_call(DLE_OP_NONZERO, out, &x, 1, &a);
}

dle_status dle_masked_select(dle_tensor **out, dle_tensor *x, dle_tensor *mask) {
  note_data_dependent(DLE_OP_MASKED_SELECT);
  return dle_op_call(DLE_OP_MASKED_SELECT, out, (dle_tensor *[]){x, mask}, 2, NULL);
}

dle_status dle_masked_scatter(dle_tensor **out, dle_tensor *self, dle_tensor *mask,
                              dle_tensor *source) {
  return dle_op_call(DLE_OP_MASKED_SCATTER, out, (dle_tensor *[]){self, mask, source}, 3, NULL);
}

dle_status dle_unique(dle_tensor **values, dle_tensor **inverse, dle_tensor **counts, dle_tensor *x,
                      bool consecutive, int64_t base) {
  dle_attrs a = {0};
  note_data_dependent(DLE_OP_UNIQUE);
  a.ints[0] = consecutive;
  a.nints = 1;
  a.index_base = base;
  dle_tensor *outs[3] = {NULL, NULL, NULL};
  DLE_TRY(dle_op_call(DLE_OP_UNIQUE, outs, &x, 1, &a));
  dle_tensor **want[3] = {values, inverse, counts};
  for (int k = 0; k < 3; k++) {
    if (want[k])
      *want[k] = outs[k];
    else
      dle_tensor_release(outs[k]);
  }
  return DLE_OK;
}

dle_status dle_bincount(dle_tensor **out, dle_tensor *x, dle_tensor *weights, int64_t minlength) {
  note_data_dependent(DLE_OP_BINCOUNT);
  dle_attrs a = {0};
  a.ints[0] = minlength;
  a.nints = 1;
  return dle_op_call(DLE_OP_BINCOUNT, out, (dle_tensor *[]){x, weights}, weights ? 2 : 1, &a);
}

dle_status dle_searchsorted(dle_tensor **out, dle_tensor *sorted, dle_tensor *values, bool right,
                            int64_t base) {
  dle_attrs a = {0};
  a.ints[0] = right;
  a.nints = 1;
  a.index_base = base;
  return dle_op_call(DLE_OP_SEARCHSORTED, out, (dle_tensor *[]){sorted, values}, 2, &a);
}

dle_status dle_mode(dle_tensor **values, dle_tensor **indices, dle_tensor *x, int dim, bool keepdim,
                    int64_t base) {
  dle_attrs a = {0};
  a.ints[0] = dim;
  a.nints = 1;
  a.keepdim = keepdim;
  a.index_base = base;
  dle_tensor *outs[2] = {NULL, NULL};
  DLE_TRY(dle_op_call(DLE_OP_MODE, outs, &x, 1, &a));
  *values = outs[0];
  if (indices)
    *indices = outs[1];
  else
    dle_tensor_release(outs[1]);
  return DLE_OK;
}
