/* copy.cu — CUDA kernels that move or produce values, mirroring kernels/cpu/copy.c: copy with
 * dtype conversion between every pair of dtypes (any strides, broadcast source), full (fill) and
 * arange. */
#include "common.cuh"

/* Same dtype (bool aside, which is normalised to 0/1): the element's bytes. */
template <class T>
struct raw_copy_fn {
  __device__ void operator()(char *const *p, int64_t) const { *(T *)p[0] = *(const T *)p[1]; }
};

template <dle_dtype S, dle_dtype D>
struct cast_fn {
  __device__ void operator()(char *const *p, int64_t) const {
    *(CU_T(D) *)p[0] = cu_store<D>(cu_load<S>(*(const CU_T(S) *)p[1]));
  }
};

dle_status cu_copy_same(const char *fn, dle_tensor *dst, dle_tensor *src) {
  dle_tensor *ins[1] = {src};
  switch (cu_esize(dst->dtype)) {
    case 1: return cu_map(fn, dst, ins, 1, raw_copy_fn<uint8_t>{});
    case 2: return cu_map(fn, dst, ins, 1, raw_copy_fn<uint16_t>{});
    case 4: return cu_map(fn, dst, ins, 1, raw_copy_fn<uint32_t>{});
    default: return cu_map(fn, dst, ins, 1, raw_copy_fn<uint64_t>{});
  }
}

static dle_status cu_copy(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                          const dle_attrs *a) {
  (void)a;
  const char *fn = cu_op_name(op);
  dle_tensor *dst = outs[0], *src = ins[0];
  if (dst->dtype == src->dtype && dst->dtype != DLE_BOOL) return cu_copy_same(fn, dst, src);
  return cu_with_dtype(src->dtype, [&](auto s) -> dle_status {
    return cu_with_dtype(dst->dtype, [&](auto d) -> dle_status {
      return cu_map(fn, dst, ins, nin, cast_fn<decltype(s)::value, decltype(d)::value>{});
    });
  });
}

/* full: the double value converted by each thread (the same conversion as the CPU's, done once
 * there), any strides (fill_ writes into views). */
template <dle_dtype D>
struct fill_fn {
  double v;
  __device__ void operator()(char *const *p, int64_t) const { *(CU_T(D) *)p[0] = cu_store<D>(v); }
};

static dle_status cu_full(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                          const dle_attrs *a) {
  (void)ins, (void)nin;
  return cu_with_dtype(outs[0]->dtype, [&](auto tag) -> dle_status {
    return cu_map(cu_op_name(op), outs[0], NULL, 0, fill_fn<decltype(tag)::value>{a->f[0]});
  });
}

/* arange: element i (logical order) is start + i * step, computed in double then converted. */
template <dle_dtype D>
struct arange_fn {
  double start, step;
  __device__ void operator()(char *const *p, int64_t i) const {
    *(CU_T(D) *)p[0] = cu_store<D>(start + (double)i * step);
  }
};

static dle_status cu_arange(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                            const dle_attrs *a) {
  (void)ins, (void)nin;
  return cu_with_dtype(outs[0]->dtype, [&](auto tag) -> dle_status {
    return cu_map(cu_op_name(op), outs[0], NULL, 0,
                  arange_fn<decltype(tag)::value>{a->f[0], a->f[1]});
  });
}

void cu_register_copy(dle_backend *b) {
  b->kernels[DLE_OP_COPY] = cu_copy;
  b->kernels[DLE_OP_FULL] = cu_full;
  b->kernels[DLE_OP_ARANGE] = cu_arange;
}
