/* softmax.cu — CUDA kernels of softmax and log_softmax along one dim, mirroring the CPU's row
 * functions (kernels/cpu/reduce.c): per row the max m (NaN propagates), s = sum exp(x - m)
 * with exp in the compute type and the sum in double, then softmax y = exp(x - m) * (1 / s) or
 * log_softmax y = x - m - log(s), the factors rounded to the compute type as there. One block
 * per row (blocks loop over rows), any input strides, the front door's contiguous output. */
#include "common.cuh"

template <dle_dtype D>
__global__ void softmax_kernel(cu_red_geom g, const char *x, char *y, bool lg) {
  typedef CU_T(D) T;
  typedef CU_CT(D) CT;
  __shared__ CT shm[CU_THREADS];
  __shared__ double shs[CU_THREADS];
  const unsigned tid = threadIdx.x, nt = blockDim.x;
  for (int64_t q = blockIdx.x; q < g.nout; q += gridDim.x) {
    const char *xq = x + cu_group_offset(g.nk, g.ks, g.kx, q);
    char *yq = y + cu_group_offset(g.nk, g.ks, g.ky, q);
    auto at = [&](int64_t r) {
      return cu_load<D>(*(const T *)(xq + cu_group_offset(g.nr, g.rs, g.rx, r)));
    };
    CT m = (CT)-INFINITY;
    for (int64_t r = tid; r < g.nred; r += nt) m = cu_max_nan{}(m, at(r));
    m = cu_block_reduce(m, shm, cu_max_nan{});
    double s = 0;
    for (int64_t r = tid; r < g.nred; r += nt) s += (double)cu_exp(at(r) - m);
    s = cu_block_reduce(s, shs, cu_add{});
    CT k = lg ? (CT)log(s) : (CT)(1 / s);
    for (int64_t r = tid; r < g.nred; r += nt) {
      CT v = at(r) - m;
      *(T *)(yq + cu_group_offset(g.nr, g.rs, g.ry, r)) = cu_store<D>(lg ? v - k : cu_exp(v) * k);
    }
  }
}

/* attrs.ints[0]: the dim (0-based, checked); no ints for a 0-dim input. */
static dle_status cu_softmax(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                             const dle_attrs *a) {
  (void)nin;
  const char *fn = cu_op_name(op);
  dle_tensor *x = ins[0], *y = outs[0];
  if (y->dtype != x->dtype || y->ndim != x->ndim)
    return cu_error("%s: output and input differ", fn);
  bool red[DLE_MAX_DIMS] = {false};
  if (a->nints > 0) {
    if (a->ints[0] < 0 || a->ints[0] >= x->ndim)
      return cu_error("%s: bad dim %lld", fn, (long long)a->ints[0]);
    red[a->ints[0]] = true;
  }
  cu_red_geom g;
  cu_red_geom_make(&g, x, red, y);
  if (g.nout == 0 || g.nred == 0) return DLE_OK;
  CU_OK(cu_use_device(fn, y));
  unsigned blocks = (unsigned)(g.nout < 65535 * 16 ? g.nout : 65535 * 16),
           threads = cu_row_threads(g.nred);
  bool lg = op == DLE_OP_LOG_SOFTMAX;
  return cu_with_float_dtype(fn, x->dtype, [&](auto tag) -> dle_status {
    softmax_kernel<decltype(tag)::value><<<blocks, threads>>>(g, cu_data(x), cu_data(y), lg);
    CU_LAUNCHED(fn);
    return DLE_OK;
  });
}

void cu_register_softmax(dle_backend *b) {
  b->kernels[DLE_OP_SOFTMAX] = cu_softmax;
  b->kernels[DLE_OP_LOG_SOFTMAX] = cu_softmax;
}
