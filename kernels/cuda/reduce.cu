/* reduce.cu — CUDA kernels of the reductions (sum, mean, prod, var, std, logsumexp, amax, amin,
 * max/min with indices, argmax/argmin) over any dims of any strides, mirroring
 * kernels/cpu/reduce.c:
 *   sum, prod   floats accumulate in double, integers and bool in uint64 (wrapping like int64),
 *               stored as the float dtype or as int64;
 *   mean        the double sum / N;  var, std: the double mean, then the double sum of squared
 *               deviations / max(N - correction, 0) (two passes, as on the CPU);
 *   amax, amin  in the compute type, NaN propagates;
 *   logsumexp   max m (NaN propagates); an infinite or NaN m is the result, else
 *               m + log(sum exp(x - m)) with exp in the compute type and the sum in double;
 *   arg ops     the first index of the best value in the logical order of the reduced dims;
 *               NaN beats every number, the first NaN stays; indices are int64 + index_base.
 * One block per output (blocks loop over outputs), its threads striding over the reduced
 * elements, then a tree in shared memory: a fixed order, so the same result on every run. The
 * front door gives a contiguous output over the kept dims. */
#include "common.cuh"

#define NO_INDEX INT64_MAX

template <class CT>
struct arg_acc {
  CT v;
  int64_t i; /* NO_INDEX: no element seen */
};

template <bool MAX, class CT>
__device__ __forceinline__ bool better(CT x, CT b) {
  if constexpr (MAX)
    return x > b || (x != x && b == b);
  else
    return x < b || (x != x && b == b);
}

/* The better of two partial results; between equals, the smaller index. */
template <bool MAX>
struct arg_combine {
  template <class CT>
  __device__ arg_acc<CT> operator()(arg_acc<CT> a, arg_acc<CT> b) const {
    if (b.i == NO_INDEX) return a;
    if (a.i == NO_INDEX) return b;
    if (better<MAX>(b.v, a.v)) return b;
    if (better<MAX>(a.v, b.v)) return a;
    return b.i < a.i ? b : a;
  }
};

template <class CT>
__device__ __forceinline__ CT lowest() {
  if constexpr (std::is_floating_point<CT>::value)
    return (CT)-INFINITY;
  else if constexpr (sizeof(CT) == 4)
    return (CT)INT32_MIN;
  else
    return (CT)INT64_MIN;
}
template <class CT>
__device__ __forceinline__ CT highest() {
  if constexpr (std::is_floating_point<CT>::value)
    return (CT)INFINITY;
  else if constexpr (sizeof(CT) == 4)
    return (CT)INT32_MAX;
  else
    return (CT)INT64_MAX;
}

/* Shared memory for one accumulator per thread (at most 16 bytes: an arg_acc<double>). */
#define RED_SMEM (CU_THREADS * 16)

template <dle_dtype D, int OP>
__global__ void reduce_kernel(cu_red_geom g, const char *x, char *out, int64_t out_es,
                              int64_t *idx_out, double correction, int64_t base) {
  typedef CU_T(D) T;
  typedef CU_CT(D) CT;
  typedef std::conditional_t<(cu_float_v<D>), double, uint64_t> S; /* sums and products */
  __shared__ __align__(16) unsigned char smem[RED_SMEM];
  const unsigned tid = threadIdx.x, nt = blockDim.x;
  const double nred = (double)g.nred;
  for (int64_t q = blockIdx.x; q < g.nout; q += gridDim.x) {
    const char *xq = x + cu_group_offset(g.nk, g.ks, g.kx, q);
    auto at = [&](int64_t r) {
      return cu_load<D>(*(const T *)(xq + cu_group_offset(g.nr, g.rs, g.rx, r)));
    };
    T *o = (T *)(out + q * out_es);
    if constexpr (OP == DLE_OP_SUM || OP == DLE_OP_MEAN || OP == DLE_OP_VAR || OP == DLE_OP_STD) {
      S acc = 0;
      for (int64_t r = tid; r < g.nred; r += nt) acc += (S)at(r);
      acc = cu_block_reduce(acc, (S *)smem, cu_add{});
      if constexpr (OP == DLE_OP_SUM) {
        if (tid == 0) {
          if constexpr (cu_float_v<D>)
            *o = cu_store<D>(acc);
          else
            *(int64_t *)o = (int64_t)acc; /* a uint64 result's bits too */
        }
      } else if constexpr (OP == DLE_OP_MEAN) {
        if (tid == 0) *o = cu_store<D>((double)acc / nred);
      } else {
        double mean = (double)acc / nred, sq = 0;
        for (int64_t r = tid; r < g.nred; r += nt) {
          double d = (double)at(r) - mean;
          sq += d * d;
        }
        sq = cu_block_reduce(sq, (double *)smem, cu_add{});
        double dof = nred - correction > 0 ? nred - correction : 0;
        double v = sq / dof;
        if (tid == 0) *o = cu_store<D>(OP == DLE_OP_STD ? sqrt(v) : v);
      }
    } else if constexpr (OP == DLE_OP_PROD) {
      S acc = 1;
      for (int64_t r = tid; r < g.nred; r += nt) acc *= (S)at(r);
      acc = cu_block_reduce(acc, (S *)smem, cu_mul{});
      if (tid == 0) {
        if constexpr (cu_float_v<D>)
          *o = cu_store<D>(acc);
        else
          *(int64_t *)o = (int64_t)acc;
      }
    } else if constexpr (OP == DLE_OP_AMAX || OP == DLE_OP_AMIN || OP == DLE_OP_LOGSUMEXP) {
      constexpr bool is_max = OP != DLE_OP_AMIN;
      typedef std::conditional_t<is_max, cu_max_nan, cu_min_nan> step;
      CT m = is_max ? lowest<CT>() : highest<CT>();
      for (int64_t r = tid; r < g.nred; r += nt) m = step{}(m, at(r));
      m = cu_block_reduce(m, (CT *)smem, step{});
      if constexpr (OP == DLE_OP_LOGSUMEXP) {
        double aux = (double)m, shift = isfinite(aux) ? aux : 0, s = 0;
        for (int64_t r = tid; r < g.nred; r += nt) s += (double)cu_exp(at(r) - (CT)shift);
        s = cu_block_reduce(s, (double *)smem, cu_add{});
        if (tid == 0) *o = cu_store<D>(isfinite(aux) ? aux + log(s) : aux);
      } else {
        if (tid == 0) *o = cu_store<D>(m);
      }
    } else { /* max, min, argmax, argmin */
      constexpr bool is_max = OP == DLE_OP_MAX || OP == DLE_OP_ARGMAX;
      arg_acc<CT> acc = {is_max ? lowest<CT>() : highest<CT>(), NO_INDEX};
      for (int64_t r = tid; r < g.nred; r += nt) { /* increasing r: the first of equals stays */
        CT v = at(r);
        if (acc.i == NO_INDEX || better<is_max>(v, acc.v)) acc = {v, r};
      }
      acc = cu_block_reduce(acc, (arg_acc<CT> *)smem, arg_combine<is_max>{});
      if (tid == 0) {
        int64_t i = (acc.i == NO_INDEX ? 0 : acc.i) + base;
        if constexpr (OP == DLE_OP_MAX || OP == DLE_OP_MIN) {
          *o = cu_store<D>(acc.v);
          idx_out[q] = i;
        } else {
          *(int64_t *)o = i;
        }
      }
    }
  }
}

#define CU_REDUCE_ALL_OPS(X)   X(SUM) X(PROD) X(AMAX) X(AMIN) X(MAX) X(MIN) X(ARGMAX) X(ARGMIN)
#define CU_REDUCE_FLOAT_OPS(X) X(MEAN) X(VAR) X(STD) X(LOGSUMEXP)

/* attrs.ints: the reduced dims (0-based, sorted, distinct); none means all. */
static dle_status cu_reduce(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                            const dle_attrs *a) {
  (void)nin;
  const char *fn = cu_op_name(op);
  dle_tensor *x = ins[0], *out = outs[0];
  bool two = op == DLE_OP_MAX || op == DLE_OP_MIN;
  bool red[DLE_MAX_DIMS] = {false};
  int bad = dle_reduced_dims(a, x->ndim, red);
  if (bad >= 0) return cu_error("%s: bad dim %lld", fn, (long long)a->ints[bad]);
  if (!cu_contiguous(out) || (two && !cu_contiguous(outs[1])))
    return cu_error("%s: the CUDA kernel expects contiguous outputs", fn);
  cu_red_geom g;
  cu_red_geom_make(&g, x, red, NULL);
  if (g.nout == 0) return DLE_OK;
  CU_OK(cu_use_device(fn, out));
  unsigned blocks = (unsigned)(g.nout < 65535 * 16 ? g.nout : 65535 * 16),
           threads = cu_row_threads(g.nred);
  int64_t *idx = two ? (int64_t *)cu_data(outs[1]) : NULL;
  int64_t oes = cu_esize(out->dtype);
  return cu_with_dtype(x->dtype, [&](auto tag) -> dle_status {
    constexpr dle_dtype D = decltype(tag)::value;
    switch (op) {
#define LAUNCH(OP)                                                                          \
  reduce_kernel<D, DLE_OP_##OP>                                                             \
      <<<blocks, threads>>>(g, cu_data(x), cu_data(out), oes, idx, a->f[0], a->index_base); \
  CU_LAUNCHED(fn);                                                                          \
  return DLE_OK;
#define ALL_CASE(OP)  \
  case DLE_OP_##OP: { \
    LAUNCH(OP)        \
  }
#define FLOAT_CASE(OP)                          \
  case DLE_OP_##OP:                             \
    if constexpr (cu_float_v<D>) { LAUNCH(OP) } \
    break;
      CU_REDUCE_ALL_OPS(ALL_CASE)
      CU_REDUCE_FLOAT_OPS(FLOAT_CASE)
      default: break;
    }
    return cu_error("%s: no CUDA kernel for dtype %s", fn, cu_dtype_name(D));
  });
}

void cu_register_reduce(dle_backend *b) {
#define REGISTER(OP) b->kernels[DLE_OP_##OP] = cu_reduce;
  CU_REDUCE_ALL_OPS(REGISTER)
  CU_REDUCE_FLOAT_OPS(REGISTER)
}
