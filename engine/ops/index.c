/* index.c — shape and dtype rules of the joining and indexing ops (cat, gather, scatter_add,
 * index_select, index_add, masked_fill, tril/triu, one_hot) and their public wrappers.
 * Index values are range-checked by the kernels, which read them where they live. */
#include "../autograd.h"

#include <stdlib.h>

static const char *op_name(dle_op op) { return dle_op_get_info(op)->name; }

/* Kernels read inputs while writing the output. Reading the element about to be overwritten
 * is safe (positional inputs: masked_fill's src, tril's input, scatter_add's self); any other
 * overlap with a caller's output would read half-written data, so that input gets a copy. */
static dle_status unalias(dle_tensor *out, dle_tensor **in, bool positional) {
  dle_tensor *t = *in;
  if (t->storage != out->storage || (positional && dle_same_view(t, out))) return DLE_OK;
  dle_tensor *c = NULL;
  DLE_TRY(dle_clone(&c, t));
  dle_tensor_release(t);
  *in = c;
  return DLE_OK;
}

/* Gives outs[0] the result of shape (ndim, sizes) and dtype dt, dispatches op on the owned
 * input references, then releases them. Input `positional` (-1: none) may be the output itself. */
static dle_status run(dle_op op, dle_tensor **outs, dle_tensor **owned, int nin, int ndim,
                      const int64_t *sizes, dle_dtype dt, dle_device dev, int positional,
                      const dle_attrs *a) {
  dle_tensor *given = outs[0], *out = given;
  dle_status st = dle_prepare_out(&out, op_name(op), ndim, sizes, dt, dev);
  for (int i = 0; i < nin && st == DLE_OK && given; i++)
    st = unalias(given, &owned[i], i == positional);
  if (st == DLE_OK) st = dle_dispatch(op, &out, 1, owned, nin, a);
  for (int i = 0; i < nin; i++) dle_tensor_release(owned[i]);
  if (st != DLE_OK) {
    if (!given) dle_tensor_release(out);
    return st;
  }
  outs[0] = out;
  return DLE_OK;
}

static dle_status check_index_dtype(const char *fn, const dle_tensor *index, const char *what) {
  if (index->dtype == DLE_I64) return DLE_OK;
  return dle_error("%s: %s must be int64, got %s (shape %s)", fn, what,
                   dle_dtype_name(index->dtype), SHAPE(index));
}

static dle_attrs with_dim(const dle_attrs *a, int dim) {
  dle_attrs local = *a;
  local.ints[0] = dim;
  local.nints = local.nints > 1 ? local.nints : 1;
  return local;
}

/* ---------------------------------------------------------------- cat */

/* PyTorch skips 1-D empty tensors in cat whatever their rank, so code can start from an empty
 * accumulator; they still take part in dtype promotion. */
static bool skipped_in_cat(const dle_tensor *t) { return t->ndim == 1 && t->sizes[0] == 0; }

static dle_status cat_shape(dle_tensor *const *ins, int n, int64_t dim_arg, int *dim, int *ndim,
                            int64_t *sizes) {
  int ref = 0;
  while (ref < n - 1 && skipped_in_cat(ins[ref])) ref++;
  const dle_tensor *r = ins[ref];
  if (r->ndim == 0)
    return dle_error(
        "cat: input %d is a 0-dim tensor and cannot be concatenated (unsqueeze it, "
        "or use stack)",
        ref + 1);
  DLE_TRY(dle_wrap_dim("cat", (int)dim_arg, r->ndim, 0, dim));
  *ndim = r->ndim;
  memcpy(sizes, r->sizes, sizeof r->sizes);
  sizes[*dim] = 0;
  for (int i = 0; i < n; i++) {
    const dle_tensor *t = ins[i];
    if (skipped_in_cat(t)) continue;
    if (t->ndim != r->ndim)
      return dle_error(
          "cat: input %d has shape %s but input %d has shape %s (all inputs need the "
          "same number of dims)",
          i + 1, SHAPE(t), ref + 1, SHAPE(r));
    for (int d = 0; d < r->ndim; d++)
      if (d != *dim && t->sizes[d] != r->sizes[d])
        return dle_error(
            "cat: input %d has shape %s but input %d has shape %s (sizes must match "
            "except in dim %d)",
            i + 1, SHAPE(t), ref + 1, SHAPE(r), *dim + 1);
    sizes[*dim] += t->sizes[*dim];
  }
  return DLE_OK;
}

/* cat of complex inputs (already in dtype dt): the element-moving kernel works on the (re, im)
 * views, whose trailing dim of 2 is not the cat dim; the result viewed back as complex. Takes
 * over the m inputs of owned. */
static dle_status complex_cat(dle_tensor **outs, dle_tensor **owned, int m, int ndim,
                              const int64_t *sizes, dle_dtype dt, dle_device dev,
                              const dle_attrs *a) {
  dle_status st = DLE_OK;
  for (int i = 0; i < m && st == DLE_OK; i++) {
    dle_tensor *r = NULL;
    st = dle_view_as_real(&r, owned[i]);
    dle_tensor_release(owned[i]);
    owned[i] = r;
  }
  int64_t rsizes[DLE_MAX_DIMS + 1];
  memcpy(rsizes, sizes, sizeof(int64_t) * (size_t)ndim);
  rsizes[ndim] = 2;
  dle_tensor *r = NULL;
  if (st == DLE_OK)
    st = run(DLE_OP_CAT, &r, owned, m, ndim + 1, rsizes, dle_real_of(dt), dev, -1, a);
  else
    for (int i = 0; i < m; i++) dle_tensor_release(owned[i]);
  return dle_complex_result(outs, r, st);
}

static dle_status forward_cat(dle_tensor **outs, dle_tensor *const *ins, int n,
                              const dle_attrs *a) {
  int dim = 0, ndim = 0;
  int64_t sizes[DLE_MAX_DIMS];
  if (n < 1) return dle_error("cat: expected at least one tensor, got none");
  DLE_TRY(cat_shape(ins, n, a->ints[0], &dim, &ndim, sizes));
  dle_dtype dt = ins[0]->dtype;
  for (int i = 1; i < n; i++) dt = dle_promote(dt, ins[i]->dtype);
  /* the kernel sees only the inputs that contribute elements, already in the result dtype */
  dle_tensor **owned = calloc((size_t)n, sizeof *owned);
  if (!owned) return dle_error("cat: out of memory for %d inputs", n);
  int m = 0;
  dle_status st = DLE_OK;
  for (int i = 0; i < n && st == DLE_OK; i++) {
    if (ins[i]->ndim != ndim || dle_tensor_numel(ins[i]) == 0) continue;
    st = dle_cast_if_needed(&owned[m], ins[i], dt);
    if (st == DLE_OK) m++;
  }
  dle_attrs local = with_dim(a, dim);
  if (st == DLE_OK && dle_dtype_is_complex(dt))
    st = complex_cat(outs, owned, m, ndim, sizes, dt, dle_tensor_device(ins[0]), &local);
  else if (st == DLE_OK)
    st = run(DLE_OP_CAT, outs, owned, m, ndim, sizes, dt, dle_tensor_device(ins[0]), -1, &local);
  else
    for (int i = 0; i < m; i++) dle_tensor_release(owned[i]);
  free(owned);
  return st;
}

/* ---------------------------------------------------------------- gather and scatter_add */

static dle_status forward_gather(dle_tensor **outs, dle_tensor *const *ins, const dle_attrs *a) {
  dle_tensor *src = ins[0], *index = ins[1];
  int dim;
  DLE_TRY(check_index_dtype("gather", index, "index"));
  if (index->ndim != src->ndim)
    return dle_error(
        "gather: index of shape %s and src of shape %s must have the same number of dims",
        SHAPE(index), SHAPE(src));
  DLE_TRY(dle_wrap_dim("gather", (int)a->ints[0], src->ndim, 0, &dim));
  for (int d = 0; d < src->ndim; d++)
    if (d != dim && index->sizes[d] > src->sizes[d])
      return dle_error("gather: index of shape %s is larger than src of shape %s in dim %d",
                       SHAPE(index), SHAPE(src), d + 1);
  dle_tensor *owned[2] = {src, index};
  dle_tensor_retain(src), dle_tensor_retain(index);
  dle_attrs local = with_dim(a, dim);
  return run(DLE_OP_GATHER, outs, owned, 2, index->ndim, index->sizes, src->dtype,
             dle_tensor_device(src), -1, &local);
}

/* Shape rules of scatter_add(self, dim, index, src) and index_add(self, dim, index, src). */
static dle_status check_accumulate(dle_op op, const dle_tensor *self, const dle_tensor *index,
                                   const dle_tensor *src, int dim) {
  const char *fn = op_name(op);
  if (op != DLE_OP_INDEX_ADD) { /* scatter_add, scatter, scatter_reduce */
    if (index->ndim != self->ndim || src->ndim != self->ndim)
      return dle_error("%s: self %s, index %s and src %s must have the same number of dims", fn,
                       SHAPE(self), SHAPE(index), SHAPE(src));
    for (int d = 0; d < self->ndim; d++)
      if (index->sizes[d] > src->sizes[d] || (d != dim && index->sizes[d] > self->sizes[d]))
        return dle_error("%s: index of shape %s is larger than %s of shape %s in dim %d", fn,
                         SHAPE(index), index->sizes[d] > src->sizes[d] ? "src" : "self",
                         index->sizes[d] > src->sizes[d] ? SHAPE(src) : SHAPE(self), d + 1);
    return DLE_OK;
  }
  if (index->ndim > 1) return dle_error("%s: index must be 1-D, got shape %s", fn, SHAPE(index));
  bool ok = src->ndim == self->ndim && src->sizes[dim] == dle_tensor_numel(index);
  for (int d = 0; d < self->ndim && ok; d++) ok = d == dim || src->sizes[d] == self->sizes[d];
  if (!ok)
    return dle_error(
        "%s: src of shape %s does not fit self of shape %s with %lld indices in dim %d "
        "(src must match self except for size %lld in dim %d)",
        fn, SHAPE(src), SHAPE(self), (long long)dle_tensor_numel(index), dim + 1,
        (long long)dle_tensor_numel(index), dim + 1);
  return DLE_OK;
}

static dle_status forward_accumulate(dle_op op, dle_tensor **outs, dle_tensor *const *ins,
                                     const dle_attrs *a) {
  dle_tensor *self = ins[0], *index = ins[1], *src = ins[2];
  const char *fn = op_name(op);
  int dim;
  DLE_TRY(check_index_dtype(fn, index, "index"));
  DLE_TRY(dle_wrap_dim(fn, (int)a->ints[0], self->ndim, 0, &dim));
  DLE_TRY(check_accumulate(op, self, index, src, dim));
  /* an in-place call keeps its dtype; otherwise self and src promote */
  dle_dtype dt = outs[0] ? outs[0]->dtype : dle_promote(self->dtype, src->dtype);
  dle_tensor *owned[3] = {NULL, index, NULL};
  dle_tensor_retain(index);
  dle_status st = dle_cast_if_needed(&owned[0], self, dt);
  if (st == DLE_OK) st = dle_cast_if_needed(&owned[2], src, dt);
  if (st != DLE_OK) {
    for (int i = 0; i < 3; i++) dle_tensor_release(owned[i]);
    return st;
  }
  dle_attrs local = with_dim(a, dim);
  return run(op, outs, owned, 3, self->ndim, self->sizes, dt, dle_tensor_device(self), 0, &local);
}

/* ---------------------------------------------------------------- index_select */

static dle_status forward_index_select(dle_tensor **outs, dle_tensor *const *ins,
                                       const dle_attrs *a) {
  dle_tensor *src = ins[0], *index = ins[1];
  int dim;
  DLE_TRY(check_index_dtype("index_select", index, "index"));
  if (index->ndim > 1)
    return dle_error("index_select: index must be 1-D, got shape %s (src shape %s)", SHAPE(index),
                     SHAPE(src));
  DLE_TRY(dle_wrap_dim("index_select", (int)a->ints[0], src->ndim, 0, &dim));
  int64_t sizes[DLE_MAX_DIMS];
  memcpy(sizes, src->sizes, sizeof sizes);
  sizes[dim] = dle_tensor_numel(index);
  dle_tensor *owned[2] = {src, index};
  dle_tensor_retain(src), dle_tensor_retain(index);
  dle_attrs local = with_dim(a, dim);
  return run(DLE_OP_INDEX_SELECT, outs, owned, 2, src->ndim, sizes, src->dtype,
             dle_tensor_device(src), -1, &local);
}

/* ---------------------------------------------------------------- masked_fill, tril, triu */

static dle_status forward_masked_fill(dle_tensor **outs, dle_tensor *const *ins,
                                      const dle_attrs *a) {
  dle_tensor *src = ins[0], *mask = ins[1];
  if (mask->dtype != DLE_BOOL)
    return dle_error("masked_fill: mask must be bool, got %s (mask shape %s, src shape %s)",
                     dle_dtype_name(mask->dtype), SHAPE(mask), SHAPE(src));
  int n;
  int64_t sizes[DLE_MAX_DIMS];
  DLE_TRY(dle_broadcast_shapes("masked_fill", src->ndim, src->sizes, mask->ndim, mask->sizes, &n,
                               sizes));
  dle_tensor *owned[2] = {src, mask};
  dle_tensor_retain(src), dle_tensor_retain(mask);
  return run(DLE_OP_MASKED_FILL, outs, owned, 2, n, sizes, src->dtype, dle_tensor_device(src), 0,
             a);
}

static dle_status forward_triangle(dle_op op, dle_tensor **outs, dle_tensor *const *ins,
                                   const dle_attrs *a) {
  dle_tensor *t = ins[0];
  if (t->ndim < 2)
    return dle_error("%s: expects a tensor of at least 2 dims, got shape %s", op_name(op),
                     SHAPE(t));
  dle_tensor *owned[1] = {t};
  dle_tensor_retain(t);
  return run(op, outs, owned, 1, t->ndim, t->sizes, t->dtype, dle_tensor_device(t), 0, a);
}

/* ---------------------------------------------------------------- one_hot */

/* The largest class in an int64 tensor (read on the host). */
static dle_status max_class(dle_tensor *classes, int64_t *out) {
  dle_tensor *host = NULL, *dense = NULL;
  DLE_TRY(dle_to_device(&host, classes, DLE_DEVICE_CPU));
  dle_status st = dle_contiguous(&dense, host);
  dle_tensor_release(host);
  DLE_TRY(st);
  const int64_t *v = dle_tensor_data(dense);
  int64_t n = dle_tensor_numel(dense), m = v[0];
  for (int64_t i = 1; i < n; i++) m = v[i] > m ? v[i] : m;
  dle_tensor_release(dense);
  *out = m;
  return DLE_OK;
}

static dle_status forward_one_hot(dle_tensor **outs, dle_tensor *const *ins, const dle_attrs *a) {
  dle_tensor *classes = ins[0];
  DLE_TRY(check_index_dtype("one_hot", classes, "classes"));
  if (classes->ndim >= DLE_MAX_DIMS)
    return dle_error("one_hot: classes of shape %s already have %d dims", SHAPE(classes),
                     DLE_MAX_DIMS);
  dle_attrs local = *a;
  if (local.ints[0] < 0) { /* infer the class count from the largest class */
    if (dle_tensor_numel(classes) == 0)
      return dle_error("one_hot: cannot infer the number of classes from empty classes of shape %s",
                       SHAPE(classes));
    int64_t m;
    DLE_TRY(max_class(classes, &m));
    int64_t base = a->index_base; /* m - base + 1 without overflow at the int64 extremes */
    local.ints[0] = m < base ? 0 : m - base >= INT64_MAX - 1 ? INT64_MAX : m - base + 1;
  }
  int64_t sizes[DLE_MAX_DIMS];
  memcpy(sizes, classes->sizes, sizeof sizes);
  sizes[classes->ndim] = local.ints[0];
  dle_tensor *owned[1] = {classes};
  dle_tensor_retain(classes);
  return run(DLE_OP_ONE_HOT, outs, owned, 1, classes->ndim + 1, sizes, DLE_I64,
             dle_tensor_device(classes), -1, &local);
}

/* ---------------------------------------------------------------- front door */

DLE_FORWARD_RULE(index) {
  switch (op) {
    case DLE_OP_CAT: return forward_cat(outs, ins, nin, a);
    case DLE_OP_GATHER: return forward_gather(outs, ins, a);
    case DLE_OP_SCATTER_ADD:
    case DLE_OP_INDEX_ADD:
    case DLE_OP_SCATTER:
    case DLE_OP_SCATTER_REDUCE: return forward_accumulate(op, outs, ins, a);
    case DLE_OP_INDEX_SELECT: return forward_index_select(outs, ins, a);
    case DLE_OP_MASKED_FILL: return forward_masked_fill(outs, ins, a);
    case DLE_OP_TRIL:
    case DLE_OP_TRIU: return forward_triangle(op, outs, ins, a);
    case DLE_OP_ONE_HOT: return forward_one_hot(outs, ins, a);
    default: return dle_error("%s: not an indexing op", op_name(op));
  }
}

/* FLOPs: scatter_add, index_add and scatter_reduce combine into self, 1 per input element; the
 * rest move data. */
dle_flops_rule dle_flops_index(dle_op op) {
  return op == DLE_OP_SCATTER_ADD || op == DLE_OP_INDEX_ADD || op == DLE_OP_SCATTER_REDUCE
             ? dle_flops_per_in(1)
             : dle_flops_none();
}

/* ---------------------------------------------------------------- public wrappers */

static dle_attrs dim_attrs(int64_t v, int64_t base) {
  dle_attrs a = {0};
  a.ints[0] = v;
  a.nints = 1;
  a.index_base = base;
  return a;
}

dle_status dle_cat(dle_tensor **out, dle_tensor *const *ts, int n, int dim) {
  if (n < 1) return dle_error("cat: expected at least one tensor, got none");
  dle_attrs a = dim_attrs(dim, 0);
  return dle_op_call(DLE_OP_CAT, out, ts, n, &a);
}

dle_status dle_stack(dle_tensor **out, dle_tensor *const *ts, int n, int dim) {
  if (n < 1) return dle_error("stack: expected at least one tensor, got none");
  for (int i = 1; i < n; i++)
    if (!dle_shape_equal(ts[i]->ndim, ts[i]->sizes, ts[0]->ndim, ts[0]->sizes))
      return dle_error(
          "stack: input %d has shape %s but input 1 has shape %s (stack needs equal shapes)", i + 1,
          SHAPE(ts[i]), SHAPE(ts[0]));
  int d;
  DLE_TRY(dle_wrap_dim("stack", dim, ts[0]->ndim, 1, &d));
  dle_tensor **views = calloc((size_t)n, sizeof *views);
  if (!views) return dle_error("stack: out of memory for %d inputs", n);
  dle_status st = DLE_OK;
  for (int i = 0; i < n && st == DLE_OK; i++) st = dle_unsqueeze(&views[i], ts[i], d);
  if (st == DLE_OK) st = dle_cat(out, views, n, d);
  for (int i = 0; i < n; i++) dle_tensor_release(views[i]);
  free(views);
  return st;
}

/* The ops along a dim with an index (gather, scatter_add, index_select, index_add). */
static dle_status dim_call(dle_op op, dle_tensor **out, dle_tensor *const *ins, int nin, int dim,
                           int64_t base) {
  dle_attrs a = dim_attrs(dim, base);
  return dle_op_call(op, out, ins, nin, &a);
}

dle_status dle_gather(dle_tensor **out, dle_tensor *src, int dim, dle_tensor *index, int64_t base) {
  return dim_call(DLE_OP_GATHER, out, (dle_tensor *[]){src, index}, 2, dim, base);
}

dle_status dle_scatter_add(dle_tensor **out, dle_tensor *self, int dim, dle_tensor *index,
                           dle_tensor *src, int64_t base) {
  return dim_call(DLE_OP_SCATTER_ADD, out, (dle_tensor *[]){self, index, src}, 3, dim, base);
}

dle_status dle_index_select(dle_tensor **out, dle_tensor *src, int dim, dle_tensor *index,
                            int64_t base) {
  return dim_call(DLE_OP_INDEX_SELECT, out, (dle_tensor *[]){src, index}, 2, dim, base);
}

dle_status dle_index_add(dle_tensor **out, dle_tensor *self, int dim, dle_tensor *index,
                         dle_tensor *src, int64_t base) {
  return dim_call(DLE_OP_INDEX_ADD, out, (dle_tensor *[]){self, index, src}, 3, dim, base);
}

dle_status dle_masked_fill(dle_tensor **out, dle_tensor *src, dle_tensor *mask, double value) {
  dle_tensor *ins[2] = {src, mask};
  dle_attrs a = {0};
  a.f[0] = value;
  return dle_op_call(DLE_OP_MASKED_FILL, out, ins, 2, &a);
}

dle_status dle_tril(dle_tensor **out, dle_tensor *t, int64_t k) {
  dle_attrs a = dim_attrs(k, 0);
  return dle_op_call(DLE_OP_TRIL, out, &t, 1, &a);
}

dle_status dle_triu(dle_tensor **out, dle_tensor *t, int64_t k) {
  dle_attrs a = dim_attrs(k, 0);
  return dle_op_call(DLE_OP_TRIU, out, &t, 1, &a);
}

dle_status dle_one_hot(dle_tensor **out, dle_tensor *classes, int64_t n, int64_t base) {
  dle_attrs a = dim_attrs(n, base);
  return dle_op_call(DLE_OP_ONE_HOT, out, &classes, 1, &a);
}

dle_status dle_scatter(dle_tensor **out, dle_tensor *self, int dim, dle_tensor *index,
                       dle_tensor *src, int64_t base) {
  return dim_call(DLE_OP_SCATTER, out, (dle_tensor *[]){self, index, src}, 3, dim, base);
}

dle_status dle_scatter_reduce(dle_tensor **out, dle_tensor *self, int dim, dle_tensor *index,
                              dle_tensor *src, dle_scatter_reduction r, bool include_self,
                              int64_t base) {
  if (r < DLE_SCATTER_SUM || r > DLE_SCATTER_AMIN)
    return dle_error("scatter_reduce: unknown reduction %d", (int)r);
  dle_attrs a = dim_attrs(dim, base);
  a.ints[1] = r;
  a.ints[2] = include_self;
  a.nints = 3;
  return dle_op_call(DLE_OP_SCATTER_REDUCE, out, (dle_tensor *[]){self, index, src}, 3, &a);
}
