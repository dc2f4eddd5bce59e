/* nn_front.h — what the front doors of the fused nn ops (nn.c), attention (attention.c) and the
 * losses (losses.c) share: result and compute dtypes, input preparation (cast + contiguous),
 * argument checks, and run(), which calls the kernel into fresh outputs (row-major, or laid out
 * like a given tensor) and delivers them in the result dtype. */
#ifndef DLE_OPS_NN_FRONT_H
#define DLE_OPS_NN_FRONT_H

#include "../internal.h"

#include <string.h>

static inline const char *op_name(dle_op op) { return dle_op_get_info(op)->name; }

static inline dle_dtype result_dtype(dle_dtype dt) {
  return dle_dtype_is_float(dt) ? dt : DLE_DEFAULT_FLOAT;
}
static inline dle_dtype compute_dtype(dle_dtype dt) { return dt == DLE_F64 ? DLE_F64 : DLE_F32; }

/* t cast to dt and made contiguous, into *out (a new reference). */
static inline dle_status prepare(dle_tensor **out, dle_tensor *t, dle_dtype dt) {
  dle_tensor *c = NULL;
  *out = NULL;
  DLE_TRY(dle_cast_if_needed(&c, t, dt));
  dle_status st = dle_contiguous(out, c);
  dle_tensor_release(c);
  return st;
}

static inline dle_status need_indices(const char *fn, const char *what, const dle_tensor *t) {
  if (t->dtype == DLE_I64 || t->dtype == DLE_I32) return DLE_OK;
  return dle_error("%s: %s must be an int64 tensor of indices, got %s (shape %s)", fn, what,
                   dle_dtype_name(t->dtype), SHAPE(t));
}

static inline dle_status need_numeric(const char *fn, const char *what, const dle_tensor *t) {
  if (t->dtype != DLE_BOOL) return DLE_OK;
  return dle_error("%s: %s must be a float tensor, got bool (shape %s)", fn, what, SHAPE(t));
}

/* A new tensor of the given shape laid out like `like` (same ndim): its dims ordered in memory as
 * like's are (by decreasing stride), as PyTorch's empty_like does. An attention output over
 * head-split views ({B, T, H, E} permuted to {B, H, T, E}) then comes out as {B, T, H, E} in
 * memory, so merging the heads back is a view. The last dim stays innermost, and a template with
 * broadcast (stride 0) dims gives the row-major layout. */
static inline dle_status empty_laid_out_like(dle_tensor **out, int ndim, const int64_t *sizes,
                                             dle_dtype dt, dle_device dev, const dle_tensor *like) {
  int order[DLE_MAX_DIMS];
  bool permuted = false, usable = like && like->ndim == ndim && ndim >= 2 && dev.type == DLE_CPU;
  for (int d = 0; d < ndim; d++) order[d] = d;
  for (int d = 0; d + 1 < ndim && usable; d++) usable = like->sizes[d] <= 1 || like->strides[d] > 0;
  if (usable) { /* stable insertion sort of the leading dims by decreasing stride */
    for (int i = 1; i + 1 < ndim; i++) {
      int d = order[i], j = i;
      for (; j > 0 && like->strides[order[j - 1]] < like->strides[d]; j--) order[j] = order[j - 1];
      order[j] = d;
      permuted = permuted || j != i;
    }
  }
  if (!permuted) return dle_tensor_empty(out, ndim, sizes, dt, dev);
  int64_t s[DLE_MAX_DIMS];
  int back[DLE_MAX_DIMS];
  for (int i = 0; i < ndim; i++) s[i] = sizes[order[i]], back[order[i]] = i;
  dle_tensor *dense = NULL;
  DLE_TRY(dle_tensor_empty(&dense, ndim, s, dt, dev));
  dle_status st = dle_permute(out, dense, back);
  dle_tensor_release(dense);
  return st;
}

/* Result shapes of one call. */
typedef struct {
  int nout;
  int ndim[DLE_MAX_OUTS];
  int64_t sizes[DLE_MAX_OUTS][DLE_MAX_DIMS];
  const dle_tensor *like[DLE_MAX_OUTS]; /* lay output k out like this tensor (NULL: row-major) */
  /* the kernel writes matrices where they lie (attention): a caller's output of the compute dtype
   * whose matrices it can address (dle_matrices_in_place) is written directly, not copied into */
  bool write_given;
} out_shapes;

/* Whether the kernel may write the caller's output t directly (see out_shapes.write_given). */
static inline bool writes_directly(const out_shapes *o, const dle_tensor *t, dle_dtype cdt,
                                   dle_tensor *const *cin, int nin) {
  if (!o->write_given || !t || t->dtype != cdt || t->ndim < 2 ||
      dle_tensor_device(t).type != DLE_CPU || !dle_matrices_in_place(t, t->ndim - 2) ||
      dle_tensor_overlaps_itself(t))
    return false;
  for (int i = 0; i < nin; i++)
    if (cin[i] && dle_same_storage(cin[i], t)) return false; /* it would read what it writes */
  return true;
}

static inline void set_shape(out_shapes *o, int k, int ndim, const int64_t *sizes) {
  o->ndim[k] = ndim;
  if (ndim) memcpy(o->sizes[k], sizes, sizeof *sizes * (size_t)ndim);
}

/* Runs the kernel on prepared inputs cin (released here) into fresh outputs of dtype cdt, then
 * delivers them as rdt: into the caller's tensors (copy with cast) or as new tensors. */
static inline dle_status run(dle_op op, dle_tensor **outs, const out_shapes *o, dle_tensor **cin,
                             int nin, const dle_attrs *a, dle_dtype cdt, dle_dtype rdt,
                             dle_device dev) {
  const char *fn = op_name(op);
  dle_status st = DLE_OK;
  for (int k = 0; k < o->nout && st == DLE_OK; k++)
    if (outs[k] && !dle_shape_equal(outs[k]->ndim, outs[k]->sizes, o->ndim[k], o->sizes[k])) {
      char buf[128];
      st = dle_error("%s: result of shape %s cannot be written into an output of shape %s", fn,
                     dle_shape_str(buf, sizeof buf, o->ndim[k], o->sizes[k]), SHAPE(outs[k]));
    }
  dle_tensor *r[DLE_MAX_OUTS] = {NULL};
  bool direct[DLE_MAX_OUTS] = {false};
  for (int i = 0; i < nin && st == DLE_OK; i++)
    if (!cin[i]) st = DLE_ERR; /* the cast or copy that failed has set the message */
  for (int k = 0; k < o->nout && st == DLE_OK; k++) {
    if ((direct[k] = writes_directly(o, outs[k], cdt, cin, nin))) {
      dle_tensor_retain(outs[k]);
      r[k] = outs[k];
      continue;
    }
    st = o->like[k] ? empty_laid_out_like(&r[k], o->ndim[k], o->sizes[k], cdt, dev, o->like[k])
                    : dle_tensor_empty(&r[k], o->ndim[k], o->sizes[k], cdt, dev);
  }
  if (st == DLE_OK) st = dle_dispatch(op, r, o->nout, cin, nin, a);
  for (int k = 0; k < o->nout && st == DLE_OK; k++) {
    if (outs[k]) {
      if (!direct[k]) st = dle_copy_(outs[k], r[k]);
    } else if (rdt != cdt) {
      dle_tensor *c = NULL;
      st = dle_to_dtype(&c, r[k], rdt);
      dle_tensor_release(r[k]);
      r[k] = c;
    }
  }
  for (int i = 0; i < nin; i++) dle_tensor_release(cin[i]);
  return dle_hand_over(outs, r, o->nout, st);
}

/* run() for the ops whose inputs are a float tensor x (computed in its compute dtype, delivered in
 * its result dtype) and an int64 index tensor idx: embedding and its backward, nll_loss and its
 * backward. */
static inline dle_status run_with_index(dle_op op, dle_tensor **outs, const out_shapes *o,
                                        dle_tensor *x, dle_tensor *idx, const dle_attrs *a) {
  dle_dtype rdt = result_dtype(x->dtype), cdt = compute_dtype(rdt);
  dle_tensor *cin[2];
  prepare(&cin[0], x, cdt), prepare(&cin[1], idx, DLE_I64);
  return run(op, outs, o, cin, 2, a, cdt, rdt, dle_tensor_device(x));
}

static inline dle_status check_ce_attrs(const char *fn, const dle_attrs *a) {
  if (a->ints[0] < DLE_REDUCTION_NONE || a->ints[0] > DLE_REDUCTION_SUM)
    return dle_error("%s: reduction must be none, mean or sum (0..2), got %lld", fn,
                     (long long)a->ints[0]);
  if (!(a->f[0] >= 0 && a->f[0] <= 1))
    return dle_error("%s: label_smoothing must be in [0, 1], got %g", fn, a->f[0]);
  return DLE_OK;
}

/* x {N, C} (what: "logits", "input") and targets {N}. */
static inline dle_status check_rows_targets(const char *fn, const char *what, const dle_tensor *x,
                                            const dle_tensor *t) {
  DLE_TRY(need_numeric(fn, what, x));
  if (x->ndim != 2) return dle_error("%s: %s must be 2-D {N, C}, got shape %s", fn, what, SHAPE(x));
  DLE_TRY(need_indices(fn, "targets", t));
  if (t->ndim != 1 || t->sizes[0] != x->sizes[0])
    return dle_error("%s: targets must have shape {%lld} (one class per row of %s %s), got %s", fn,
                     (long long)x->sizes[0], what, SHAPE(x), SHAPE(t));
  if (x->sizes[1] < 1 && x->sizes[0] > 0)
    return dle_error("%s: %s %s have no classes", fn, what, SHAPE(x));
  return DLE_OK;
}

#endif
