/* norm.cu — CUDA kernels of layer_norm, batch_norm and their backward ops (kind NORM), mirroring
 * kernels/cpu/norm.c. The front door hands over contiguous inputs (x, gy, weight, bias in one
 * float dtype T; statistics in the compute type CT, float64 for float64 and float32 otherwise) and
 * contiguous outputs. x is a block {P, Q, S} (engine/kernel/norm_geom.h): one statistic per q over its
 * P runs of S elements (layer_norm: P = 1, a run is a row; batch_norm: a channel's planes).
 *
 * forward      one block per q: mean, then the centred sums c1 = sum (x - m), c2 = sum (x - m)^2
 *              around the mean m rounded to CT: var = (c2 - c1^2 / n) / n, mean += c1 / n (sums
 *              in double); then y = (x - m) r w + b (layer_norm) or x (r w) + (b - m r w)
 *              (batch_norm), r = 1 / sqrt(var + eps). Eval-mode batch_norm reads its running stats.
 * grad_input   one block per q: A = sum g, B = sum g (x - m) with g = gy w (layer_norm: w per
 *              element; batch_norm: w[q] outside), then gx = r w gy - r w A / n - (x - m) r^3 w B / n.
 * grad_affine  batch_norm: one block per q; layer_norm: one thread per column s summing over the
 *              rows: gw = sum gy (x - m) r, gb = sum gy.
 * Absent weight and bias read as ones and zeros. */
#include "../../engine/kernel/norm_geom.h"
#include "common.cuh"

template <dle_dtype D>
struct norm_io {
  typedef CU_T(D) T;
  typedef std::conditional_t<D == DLE_F64, double, float> CT;
};

/* weight (1 when absent) / bias (0) at i */
template <dle_dtype D>
__device__ __forceinline__ typename norm_io<D>::CT param(const CU_T(D) * p, int64_t i, float def) {
  typedef typename norm_io<D>::CT CT;
  return p ? (CT)cu_load<D>(p[i]) : (CT)def;
}

#define NORM_ELEMENTS(g, q, ...)                                \
  for (int64_t p_ = 0; p_ < (g).p; p_++)                        \
    for (int64_t s = threadIdx.x; s < (g).s; s += blockDim.x) { \
      int64_t e = (p_ * (g).q + (q)) * (g).s + s;               \
      __VA_ARGS__                                               \
    }

template <dle_dtype D>
__global__ void norm_forward(dle_norm_geom g, CU_T(D) * y, typename norm_io<D>::CT *stats,
                             const CU_T(D) * x, const CU_T(D) * w, const CU_T(D) * b,
                             const typename norm_io<D>::CT *rmean,
                             const typename norm_io<D>::CT *rvar, double eps) {
  typedef typename norm_io<D>::CT CT;
  __shared__ double sh[CU_THREADS];
  double n = (double)(g.p * g.s);
  for (int64_t q = blockIdx.x; q < g.q; q += gridDim.x) {
    double mean, var;
    if (rmean) {
      mean = rmean[q], var = rvar[q];
    } else {
      double s1 = 0, c1 = 0, c2 = 0;
      NORM_ELEMENTS(g, q, s1 += (double)(CT)cu_load<D>(x[e]);)
      mean = cu_block_reduce(s1, sh, cu_add{}) / n;
      CT m = (CT)mean;
      NORM_ELEMENTS(g, q, {
        CT d = (CT)cu_load<D>(x[e]) - m;
        c1 += d, c2 += (double)d * d;
      })
      c1 = cu_block_reduce(c1, sh, cu_add{});
      c2 = cu_block_reduce(c2, sh, cu_add{});
      var = (c2 - c1 * c1 / n) / n; /* c1 corrects for mean having been rounded to CT */
      mean += c1 / n;
      if (n == 0) mean = var = NAN;
    }
    if (threadIdx.x == 0) stats[2 * q] = (CT)mean, stats[2 * q + 1] = (CT)var;
    CT m = (CT)mean, r = (CT)(1.0 / sqrt(var + eps));
    if (g.weight_on_q) {
      CT sc = r * param<D>(w, q, 1), sh_ = param<D>(b, q, 0) - m * sc;
      NORM_ELEMENTS(g, q, y[e] = cu_store<D>((CT)cu_load<D>(x[e]) * sc + sh_);)
    } else {
      NORM_ELEMENTS(g, q,
                    y[e] = cu_store<D>(((CT)cu_load<D>(x[e]) - m) * r * param<D>(w, s, 1) +
                                       param<D>(b, s, 0));)
    }
  }
}

template <dle_dtype D>
__global__ void norm_grad_input(dle_norm_geom g, CU_T(D) * gx, const CU_T(D) * gy,
                                const CU_T(D) * x, const typename norm_io<D>::CT *stats,
                                const CU_T(D) * w, double eps) {
  typedef typename norm_io<D>::CT CT;
  __shared__ double sh[CU_THREADS];
  double n = (double)(g.p * g.s);
  for (int64_t q = blockIdx.x; q < g.q; q += gridDim.x) {
    CT m = stats[2 * q], r = (CT)(1.0 / sqrt((double)stats[2 * q + 1] + eps));
    CT wq = g.weight_on_q ? param<D>(w, q, 1) : (CT)1;
    double A = 0, B = 0;
    NORM_ELEMENTS(g, q, {
      CT gv = (CT)cu_load<D>(gy[e]) * (g.weight_on_q ? (CT)1 : param<D>(w, s, 1));
      A += gv, B += (double)(gv * ((CT)cu_load<D>(x[e]) - m));
    })
    A = cu_block_reduce(A, sh, cu_add{});
    B = cu_block_reduce(B, sh, cu_add{});
    CT ra = (CT)((double)(r * wq) * A / n), k3 = (CT)((double)r * r * r * wq * B / n), rw = r * wq;
    if (g.weight_on_q) {
      NORM_ELEMENTS(
          g, q,
          gx[e] = cu_store<D>(rw * (CT)cu_load<D>(gy[e]) - ra - ((CT)cu_load<D>(x[e]) - m) * k3);)
    } else {
      NORM_ELEMENTS(g, q,
                    gx[e] = cu_store<D>(r * (CT)cu_load<D>(gy[e]) * param<D>(w, s, 1) - ra -
                                        ((CT)cu_load<D>(x[e]) - m) * k3);)
    }
  }
}

/* batch_norm: one block per channel q. */
template <dle_dtype D>
__global__ void norm_grad_affine_q(dle_norm_geom g, CU_T(D) * gw, CU_T(D) * gb, const CU_T(D) * gy,
                                   const CU_T(D) * x, const typename norm_io<D>::CT *stats,
                                   double eps) {
  typedef typename norm_io<D>::CT CT;
  __shared__ double sh[CU_THREADS];
  for (int64_t q = blockIdx.x; q < g.q; q += gridDim.x) {
    CT m = stats[2 * q];
    double r = 1.0 / sqrt((double)stats[2 * q + 1] + eps), A = 0, B = 0;
    NORM_ELEMENTS(g, q, {
      CT gv = (CT)cu_load<D>(gy[e]);
      A += gv, B += (double)(gv * ((CT)cu_load<D>(x[e]) - m));
    })
    A = cu_block_reduce(A, sh, cu_add{});
    B = cu_block_reduce(B, sh, cu_add{});
    if (threadIdx.x == 0) gw[q] = cu_store<D>(r * B), gb[q] = cu_store<D>(A);
  }
}

/* layer_norm (P = 1): one thread per column s, over the Q rows. */
template <dle_dtype D>
__global__ void norm_grad_affine_s(dle_norm_geom g, CU_T(D) * gw, CU_T(D) * gb, const CU_T(D) * gy,
                                   const CU_T(D) * x, const typename norm_io<D>::CT *stats,
                                   double eps) {
  typedef typename norm_io<D>::CT CT;
  CU_GRID_LOOP(s, g.s) {
    double sw = 0, sb = 0;
    for (int64_t q = 0; q < g.q; q++) {
      CT m = stats[2 * q], r = (CT)(1.0 / sqrt((double)stats[2 * q + 1] + eps));
      CT gv = (CT)cu_load<D>(gy[q * g.s + s]);
      sw += (double)(gv * (((CT)cu_load<D>(x[q * g.s + s]) - m) * r));
      sb += gv;
    }
    gw[s] = cu_store<D>(sw), gb[s] = cu_store<D>(sb);
  }
}

static void *data_or_null(const dle_tensor *t) { return t ? (void *)cu_data(t) : NULL; }

static dle_status cu_norm(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                          const dle_attrs *a) {
  const char *fn = cu_op_name(op);
  bool fwd = op == DLE_OP_LAYER_NORM || op == DLE_OP_BATCH_NORM;
  int nout = op == DLE_OP_LAYER_NORM_GRAD_INPUT || op == DLE_OP_BATCH_NORM_GRAD_INPUT ? 1 : 2;
  bool dense = true; /* the front door's promise, checked */
  for (int i = 0; i < nin + nout; i++)
    dense = dense && cu_contiguous(i < nin ? ins[i] : outs[i - nin]);
  if (!dense) return cu_error("%s: the CUDA kernel expects contiguous inputs and outputs", fn);
  const dle_tensor *x = fwd ? ins[0] : ins[1];
  dle_norm_geom g = dle_norm_geom_of(op, x, a);
  if (g.q == 0) return DLE_OK;
  dle_tensor *w, *b, *rmean, *rvar;
  dle_norm_param_inputs(op, ins, nin, a, &w, &b, &rmean, &rvar);
  double eps = a->f[0];
  CU_OK(cu_use_device(fn, outs[0]));
  unsigned blocks = (unsigned)(g.q < 65535 * 16 ? g.q : 65535 * 16);
  unsigned threads = cu_row_threads(g.s);
  return cu_with_float_dtype(fn, outs[0]->dtype, [&](auto tag) -> dle_status {
    constexpr dle_dtype D = decltype(tag)::value;
    typedef CU_T(D) T;
    typedef typename norm_io<D>::CT CT;
    switch (op) {
      case DLE_OP_LAYER_NORM:
      case DLE_OP_BATCH_NORM:
        norm_forward<D><<<blocks, threads>>>(
            g, (T *)cu_data(outs[0]), (CT *)cu_data(outs[1]), (const T *)cu_data(ins[0]),
            (const T *)data_or_null(w), (const T *)data_or_null(b), (const CT *)data_or_null(rmean),
            (const CT *)data_or_null(rvar), eps);
        break;
      case DLE_OP_LAYER_NORM_GRAD_INPUT:
      case DLE_OP_BATCH_NORM_GRAD_INPUT:
        norm_grad_input<D><<<blocks, threads>>>(
            g, (T *)cu_data(outs[0]), (const T *)cu_data(ins[0]), (const T *)cu_data(ins[1]),
            (const CT *)cu_data(ins[2]), (const T *)data_or_null(w), eps);
        break;
      case DLE_OP_BATCH_NORM_GRAD_AFFINE:
        norm_grad_affine_q<D><<<blocks, threads>>>(
            g, (T *)cu_data(outs[0]), (T *)cu_data(outs[1]), (const T *)cu_data(ins[0]),
            (const T *)cu_data(ins[1]), (const CT *)cu_data(ins[2]), eps);
        break;
      default: /* layer_norm_grad_affine */
        if (g.s == 0) return DLE_OK;
        norm_grad_affine_s<D><<<cu_blocks(g.s), CU_THREADS>>>(
            g, (T *)cu_data(outs[0]), (T *)cu_data(outs[1]), (const T *)cu_data(ins[0]),
            (const T *)cu_data(ins[1]), (const CT *)cu_data(ins[2]), eps);
        break;
    }
    CU_LAUNCHED(fn);
    return DLE_OK;
  });
}

void cu_register_norm(dle_backend *b) {
  static const dle_op ops[] = {
      DLE_OP_LAYER_NORM, DLE_OP_LAYER_NORM_GRAD_INPUT, DLE_OP_LAYER_NORM_GRAD_AFFINE,
      DLE_OP_BATCH_NORM, DLE_OP_BATCH_NORM_GRAD_INPUT, DLE_OP_BATCH_NORM_GRAD_AFFINE};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) b->kernels[ops[i]] = cu_norm;
}
