/* select.cu — CUDA kernels that keep some elements and replace the others, mirroring
 * kernels/cpu/index.c: masked_fill (the value, converted once to the dtype as ST_<ID> does,
 * where the broadcast bool mask is set) and tril/triu (zeros outside the triangle: tril keeps
 * column j <= i + k, triu keeps j >= i + k, of each matrix in the last two dims). The front door
 * (engine/ops/index.c) has already made a private copy of an input that aliases the output. */
#include "common.cuh"

template <dle_dtype D> struct masked_fill_fn {
  double v;
  __device__ void operator()(char *const *p, int64_t) const {
    typedef CU_T(D) T;
    *(T *)p[0] = *(const uint8_t *)p[2] ? cu_store<D>(v) : *(const T *)p[1];
  }
};

/* Zero bits are 0 in every dtype: the element's bytes or zeros. */
template <class T> struct triangle_fn {
  int64_t rows, cols, k;
  bool lower;
  __device__ void operator()(char *const *p, int64_t e) const {
    int64_t j = e % cols, i = (e / cols) % rows;
    bool keep = lower ? j <= i + k : j >= i + k;
    *(T *)p[0] = keep ? *(const T *)p[1] : (T)0;
  }
};

static dle_status cu_masked_fill(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                                 const dle_attrs *a) {
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

void cu_register_select(dle_backend *b) {
  b->kernels[DLE_OP_MASKED_FILL] = cu_masked_fill;
  b->kernels[DLE_OP_TRIL] = cu_triangle;
  b->kernels[DLE_OP_TRIU] = cu_triangle;
}
