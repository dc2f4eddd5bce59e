/* join.cu — CUDA kernels of the ops that move elements by position, mirroring
 * kernels/cpu/cpu_index.c: cat (each input moved into its slice of the output), gather and
 * index_select (out[i] = src at index[i] - base along dim). Elements move as raw words of their
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

/* Every index must lie in [base, base + size) of `target`'s dim (check_indices on the CPU). */
static dle_status check_indices(const char *fn, dle_tensor *index, int64_t base, int64_t size, int dim,
                                const dle_tensor *target) {
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
  if (size > 0) snprintf(range, sizeof range, "%lld..%lld", (long long)base, (long long)(base + size - 1));
  return cu_error("%s: index %lld is out of range for dim %d of size %lld (valid: %s; src shape %s, index shape %s)",
                  fn, (long long)bad, dim + 1, (long long)size, range, shape_str(s1, sizeof s1, target),
                  shape_str(s2, sizeof s2, index));
}

/* ---- cat ---- */

static dle_status cu_cat(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin, const dle_attrs *a) {
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
template <class T> struct pick_fn {
  int64_t dim_stride, base;
  __device__ void operator()(char *const *p, int64_t) const {
    int64_t k = *(const int64_t *)p[1] - base;
    *(T *)p[0] = *(const T *)(p[2] + k * dim_stride);
  }
};

static dle_status pick(const char *fn, dle_tensor *out, dle_tensor *index_view, dle_tensor *src_view,
                       int64_t dim_stride, int64_t base) {
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
static dle_status cu_pick(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin, const dle_attrs *a) {
  (void)nin;
  const char *fn = cu_op_name(op);
  dle_tensor *out = outs[0], *src = ins[0], *index = ins[1];
  int dim = (int)a->ints[0];
  CU_OK(check_indices(fn, index, a->index_base, src->sizes[dim], dim, src));
  dle_tensor index_view = *index, src_view = *src; /* headers over their memory: geometry only */
  if (op == DLE_OP_INDEX_SELECT) {
    index_view.ndim = out->ndim;
    for (int d = 0; d < out->ndim; d++) index_view.sizes[d] = 1, index_view.strides[d] = 0;
    index_view.sizes[dim] = out->sizes[dim];
    index_view.strides[dim] = index->ndim ? index->strides[0] : 0;
  }
  memcpy(src_view.sizes, out->sizes, sizeof src_view.sizes);
  src_view.strides[dim] = 0;
  return pick(fn, out, &index_view, &src_view, src->strides[dim] * cu_esize(src->dtype), a->index_base);
}

void cu_register_join(dle_backend *b) {
  b->kernels[DLE_OP_CAT] = cu_cat;
  b->kernels[DLE_OP_GATHER] = cu_pick;
  b->kernels[DLE_OP_INDEX_SELECT] = cu_pick;
}
