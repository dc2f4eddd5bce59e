/* arrange.cu — the CUDA kernel of flip, roll and pad (kind ARRANGE), mirroring kernels/cpu/
 * arrange.c: one thread per output element (logical order of the new contiguous output) finds its
 * input element dim by dim with dle_arrange_src (engine/kernel/arrange_geom.h) and reads it
 * through the input's strides, or stores pad's fill value. */
#include "../../engine/kernel/arrange_geom.h"
#include "common.cuh"

template <dle_dtype D>
struct arrange_fn {
  dle_arrange_geom g;
  int64_t strides[DLE_MAX_DIMS]; /* the input's, in elements */
  const char *x;
  double fill;
  __device__ void operator()(char *const *p, int64_t i) const {
    int64_t off = 0;
    bool filled = false;
    for (int d = g.ndim - 1; d >= 0; d--) {
      int64_t s = dle_arrange_src(&g, d, i % g.out[d]);
      i /= g.out[d];
      if (s < 0) filled = true;
      off += s * strides[d];
    }
    *(CU_T(D) *)p[0] = filled ? cu_store<D>(fill) : ((const CU_T(D) *)x)[off];
  }
};

static dle_status cu_arrange(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                             const dle_attrs *a) {
  (void)nin;
  dle_tensor *x = ins[0];
  return cu_with_dtype(x->dtype, [&](auto tag) -> dle_status {
    arrange_fn<decltype(tag)::value> f;
    dle_arrange_geom_of(&f.g, op, a, x->ndim, x->sizes);
    for (int d = 0; d < x->ndim; d++) f.strides[d] = x->strides[d];
    f.x = cu_data(x);
    f.fill = op == DLE_OP_PAD ? a->f[0] : 0;
    return cu_map(cu_op_name(op), outs[0], NULL, 0, f);
  });
}

void cu_register_arrange(dle_backend *b) {
  b->kernels[DLE_OP_FLIP] = cu_arrange;
  b->kernels[DLE_OP_ROLL] = cu_arrange;
  b->kernels[DLE_OP_PAD] = cu_arrange;
}
