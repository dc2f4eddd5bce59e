/* index.cu — CUDA kernels of the index family, mirroring kernels/cpu/index.c.
 *
 * Ops that move elements by position: cat (each input moved into its slice of the output), gather and
 * index_select (out[i] = src at index[i] - base along dim), scatter_add and index_add (sums in the
 * CPU's order, no atomics), one_hot. Elements move as raw words of their
 * size; the front door (engine/ops/index.c) has cast cat's inputs to the result dtype and made
 * private copies of inputs that alias the output. Indices (int64, any strides) are range-checked
 * on the device before anything is written, with the CPU's message. */
#include <limits.h>
#include <stdio.h>

#include "common.cuh"

/* ---- index range checks ---- */

struct bounds_fn {
  long long *lohi;
  __device__ void operator()(char *const *p, int64_t) const {
    long long v = *(const int64_t *)p[0];
    atomicMin(&lohi[0], v);
    atomicMax(&lohi[1], v);
  }
};

static const char *shape_str(char *buf, size_t n, const dle_tensor *t) {
  size_t used = (size_t)snprintf(buf, n, "{");
  for (int d = 0; d < t->ndim && used < n; d++)
    used += (size_t)snprintf(buf + used, n - used, "%s%lld", d ? "," : "", (long long)t->sizes[d]);
  if (used < n) snprintf(buf + used, n - used, "}");
  return buf;
}

/* Every index must lie in [base, base + size) of `target`'s dim (check_indices on the CPU): the
 * message gives the offending value as the caller wrote it, the dim and its size. */
static dle_status check_indices(dle_op op, dle_tensor *index, int64_t base, int64_t size, int dim,
                                const char *target_name, const dle_tensor *target) {
  const char *fn = cu_op_name(op);
  if (cu_numel(index) == 0) return DLE_OK;
  long long *lohi = NULL, h[2] = {LLONG_MAX, LLONG_MIN};
  CU_OK(cu_use_device(fn, index));
  CU_OK(cu_scratch(fn, (void **)&lohi, sizeof h));
  dle_status st = DLE_OK;
  cudaError_t e = cudaMemcpy(lohi, h, sizeof h, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) st = cu_fail(fn, "cudaMemcpy", e);
  if (st == DLE_OK) st = cu_map(fn, index, NULL, 0, bounds_fn{lohi});
  if (st == DLE_OK) st = cu_read(fn, h, lohi, sizeof h);
  cu_scratch_free(lohi);
  CU_OK(st);
  int64_t lo = h[0], hi = h[1];
  if (lo >= base && hi - base < size) return DLE_OK;
  int64_t bad = lo < base ? lo : hi;
  char range[64] = "none: the dim is empty", s1[128], s2[128];
  if (size > 0)
    snprintf(range, sizeof range, "%lld..%lld", (long long)base, (long long)(base + size - 1));
  if (op == DLE_OP_ONE_HOT)
    return cu_error(
        "one_hot: class %lld is out of range for %lld classes (valid: %s; classes shape %s)",
        (long long)bad, (long long)size, range, shape_str(s2, sizeof s2, index));
  return cu_error(
      "%s: index %lld is out of range for dim %d of size %lld (valid: %s; %s shape %s, index shape %s)",
      fn, (long long)bad, dim + 1, (long long)size, range, target_name,
      shape_str(s1, sizeof s1, target), shape_str(s2, sizeof s2, index));
}

/* ---- cat ---- */

static dle_status cu_cat(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                         const dle_attrs *a) {
  const char *fn = cu_op_name(op);
  dle_tensor *out = outs[0];
  int dim = (int)a->ints[0];
  int64_t start = 0;
  for (int i = 0; i < nin; i++) {
    dle_tensor slice = *out; /* a header over out's memory: only its geometry is read */
    slice.sizes[dim] = ins[i]->sizes[dim];
    slice.offset += start * out->strides[dim];
    start += ins[i]->sizes[dim];
    if (cu_numel(&slice) > 0) CU_OK(cu_copy_same(fn, &slice, ins[i]));
  }
  return DLE_OK;
}

/* ---- gather, index_select ---- */

/* out[i] = src[i + (index[i] - base) * dim_stride]: p[1] the index, p[2] src with stride 0 along
 * dim. */
template <class T>
struct pick_fn {
  int64_t dim_stride, base;
  __device__ void operator()(char *const *p, int64_t) const {
    int64_t k = *(const int64_t *)p[1] - base;
    *(T *)p[0] = *(const T *)(p[2] + k * dim_stride);
  }
};

static dle_status pick(const char *fn, dle_tensor *out, dle_tensor *index_view,
                       dle_tensor *src_view, int64_t dim_stride, int64_t base) {
  dle_tensor *ins[2] = {index_view, src_view};
  switch (cu_esize(out->dtype)) {
    case 1: return cu_map(fn, out, ins, 2, pick_fn<uint8_t>{dim_stride, base});
    case 2: return cu_map(fn, out, ins, 2, pick_fn<uint16_t>{dim_stride, base});
    case 4: return cu_map(fn, out, ins, 2, pick_fn<uint32_t>{dim_stride, base});
    default: return cu_map(fn, out, ins, 2, pick_fn<uint64_t>{dim_stride, base});
  }
}

/* gather: index has out's shape; index_select: a 1-D index, seen as a tensor of out's rank that
 * varies only along dim. src is seen with out's sizes and stride 0 along dim. */
static dle_status cu_pick(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                          const dle_attrs *a) {
  (void)nin;
  const char *fn = cu_op_name(op);
  dle_tensor *out = outs[0], *src = ins[0], *index = ins[1];
  int dim = (int)a->ints[0];
  CU_OK(check_indices(op, index, a->index_base, src->sizes[dim], dim, "src", src));
  dle_tensor index_view = *index, src_view = *src; /* headers over their memory: geometry only */
  if (op == DLE_OP_INDEX_SELECT) {
    index_view.ndim = out->ndim;
    for (int d = 0; d < out->ndim; d++) index_view.sizes[d] = 1, index_view.strides[d] = 0;
    index_view.sizes[dim] = out->sizes[dim];
    index_view.strides[dim] = index->ndim ? index->strides[0] : 0;
  }
  memcpy(src_view.sizes, out->sizes, sizeof src_view.sizes);
  src_view.strides[dim] = 0;
  return pick(fn, out, &index_view, &src_view, src->strides[dim] * cu_esize(src->dtype),
              a->index_base);
}

/* ---- scatter_add, index_add ---- */

/* One thread per position off dim (output, index and src seen with size 1 along dim): for each
 * step k along dim in order, out[pos + (index - base) out_step] += src[pos + k src_step]. Positions
 * never share an output element, and each adds in the CPU's order: the same sums, bit for bit.
 * Integers wrap, as the elementwise add does. */
template <dle_dtype D>
struct accumulate_fn {
  int64_t count, index_step, src_step, out_step, base;
  __device__ void operator()(char *const *p, int64_t) const {
    typedef CU_T(D) T;
    for (int64_t k = 0; k < count; k++) {
      T *o = (T *)(p[0] + (*(const int64_t *)(p[1] + k * index_step) - base) * out_step);
      *o = cu_store<D>(cu_wrap_add(cu_load<D>(*o), cu_load<D>(*(const T *)(p[2] + k * src_step))));
    }
  }
};

/* out = self, then the additions; scatter_add walks index's shape, index_add src's with the 1-D
 * index broadcast over every position. */
static dle_status cu_accumulate(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                                const dle_attrs *a) {
  (void)nin;
  const char *fn = cu_op_name(op);
  dle_tensor *out = outs[0], *self = ins[0], *index = ins[1], *src = ins[2];
  int dim = (int)a->ints[0];
  CU_OK(check_indices(op, index, a->index_base, out->sizes[dim], dim, "self", self));
  if (cu_numel(out) > 0) CU_OK(cu_copy_same(fn, out, self));
  const dle_tensor *walk = op == DLE_OP_SCATTER_ADD ? index : src;
  if (cu_numel(walk) == 0) return DLE_OK;
  int64_t es = cu_esize(out->dtype);
  dle_tensor out_view = *out, index_view = *index, src_view = *src; /* geometry only */
  memcpy(out_view.sizes, walk->sizes, sizeof out_view.sizes);
  memcpy(src_view.sizes, walk->sizes, sizeof src_view.sizes);
  int64_t index_step;
  if (op == DLE_OP_SCATTER_ADD) {
    index_step = index->strides[dim] * 8;
  } else {
    index_step = index->ndim ? index->strides[0] * 8 : 0;
    index_view.ndim = out->ndim;
    memcpy(index_view.sizes, walk->sizes, sizeof index_view.sizes);
    memset(index_view.strides, 0, sizeof index_view.strides);
  }
  int64_t count = walk->sizes[dim];
  out_view.sizes[dim] = index_view.sizes[dim] = src_view.sizes[dim] = 1;
  dle_tensor *views[2] = {&index_view, &src_view};
  return cu_with_dtype(out->dtype, [&](auto tag) -> dle_status {
    return cu_map(fn, &out_view, views, 2,
                  accumulate_fn<decltype(tag)::value>{count, index_step, src->strides[dim] * es,
                                                      out->strides[dim] * es, a->index_base});
  });
}

/* ---- one_hot ---- */

struct zero_fn {
  __device__ void operator()(char *const *p, int64_t) const { *(int64_t *)p[0] = 0; }
};

/* p[0]: the row's first class element, p[1]: its class */
struct one_hot_fn {
  int64_t class_step, base;
  __device__ void operator()(char *const *p, int64_t) const {
    *(int64_t *)(p[0] + (*(const int64_t *)p[1] - base) * class_step) = 1;
  }
};

static dle_status cu_one_hot(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                             const dle_attrs *a) {
  (void)nin;
  const char *fn = cu_op_name(op);
  dle_tensor *out = outs[0], *classes = ins[0];
  int last = out->ndim - 1;
  if (last < 0) return cu_error("%s: the output needs a class dim", fn);
  CU_OK(check_indices(op, classes, a->index_base, out->sizes[last], last, "out", out));
  CU_OK(cu_map(fn, out, NULL, 0, zero_fn{}));
  if (cu_numel(out) == 0) return DLE_OK;
  dle_tensor rows = *out; /* the output without its class dim */
  rows.ndim = last;
  dle_tensor *cls[1] = {classes};
  return cu_map(fn, &rows, cls, 1, one_hot_fn{out->strides[last] * 8, a->index_base});
}

static void register_join(dle_backend *b) {
  static const struct {
    dle_op op;
    dle_kernel_fn fn;
  } table[] = {{DLE_OP_CAT, cu_cat},
               {DLE_OP_GATHER, cu_pick},
               {DLE_OP_INDEX_SELECT, cu_pick},
               {DLE_OP_SCATTER_ADD, cu_accumulate},
               {DLE_OP_INDEX_ADD, cu_accumulate},
               {DLE_OP_ONE_HOT, cu_one_hot}};
  for (const auto &e : table) b->kernels[e.op] = e.fn;
}

/* ---------------------------------------------------------------- masked_fill, tril, triu
 * Kernels that keep some elements and replace the others: masked_fill (the value, converted once to the dtype as ST_<ID> does,
 * where the broadcast bool mask is set) and tril/triu (zeros outside the triangle: tril keeps
 * column j <= i + k, triu keeps j >= i + k, of each matrix in the last two dims). The front door
 * (engine/ops/index.c) has already made a private copy of an input that aliases the output. */

template <dle_dtype D>
struct masked_fill_fn {
  double v;
  __device__ void operator()(char *const *p, int64_t) const {
    typedef CU_T(D) T;
    *(T *)p[0] = *(const uint8_t *)p[2] ? cu_store<D>(v) : *(const T *)p[1];
  }
};

/* Zero bits are 0 in every dtype: the element's bytes or zeros. */
template <class T>
struct triangle_fn {
  int64_t rows, cols, k;
  bool lower;
  __device__ void operator()(char *const *p, int64_t e) const {
    int64_t j = e % cols, i = (e / cols) % rows;
    bool keep = lower ? j <= i + k : j >= i + k;
    *(T *)p[0] = keep ? *(const T *)p[1] : (T)0;
  }
};

static dle_status cu_masked_fill(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins,
                                 int nin, const dle_attrs *a) {
  const char *fn = cu_op_name(op);
  return cu_with_dtype(outs[0]->dtype, [&](auto tag) -> dle_status {
    return cu_map(fn, outs[0], ins, nin, masked_fill_fn<decltype(tag)::value>{a->f[0]});
  });
}

static dle_status cu_triangle(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                              const dle_attrs *a) {
  const char *fn = cu_op_name(op);
  dle_tensor *out = outs[0];
  int nd = out->ndim;
  if (nd < 2) return cu_error("%s: expects a tensor of at least 2 dims", fn);
  int64_t rows = out->sizes[nd - 2], cols = out->sizes[nd - 1], k = a->ints[0];
  if (rows == 0 || cols == 0) return DLE_OK;
  k = k > cols ? cols : k < -rows ? -rows : k; /* the same mask, and i + k cannot overflow */
  bool lower = op == DLE_OP_TRIL;
  switch (cu_esize(out->dtype)) {
    case 1: return cu_map(fn, out, ins, nin, triangle_fn<uint8_t>{rows, cols, k, lower});
    case 2: return cu_map(fn, out, ins, nin, triangle_fn<uint16_t>{rows, cols, k, lower});
    case 4: return cu_map(fn, out, ins, nin, triangle_fn<uint32_t>{rows, cols, k, lower});
    default: return cu_map(fn, out, ins, nin, triangle_fn<uint64_t>{rows, cols, k, lower});
  }
}

static void register_select(dle_backend *b) {
  b->kernels[DLE_OP_MASKED_FILL] = cu_masked_fill;
  b->kernels[DLE_OP_TRIL] = cu_triangle;
  b->kernels[DLE_OP_TRIU] = cu_triangle;
}

void cu_register_index(dle_backend *b) {
  register_join(b);
  register_select(b);
}
