/* pool.cu — CUDA kernels of 2-D max and average pooling over {N, C, H, W} and avg_pool2d's
 * adjoint, mirroring kernels/cpu/pool.c. The front door (engine/ops/pool.c) hands over a
 * contiguous input in one float dtype and contiguous outputs; attrs.ints hold the geometry
 * (ops.def). One thread per output element, a plain loop over its window:
 *   max_pool2d    the first maximum of the window (padding as -inf), NaN propagates; int64 index
 *                 h W + w + index_base;  avg_pool2d / its adjoint: PyTorch's divisor (pool_window).
 * Sizes of zero give nothing to do. */
#include "../../engine/kernel/conv_geom.h"
#include "common.cuh"

template <dle_dtype D>
__global__ void pool_kernel(pool_geom p, const CU_T(D) * x, CU_T(D) * y, int64_t *idx, int64_t base,
                            bool max) {
  typedef CU_CT(D) CT;
  CU_GRID_LOOP(o, p.planes * p.ho * p.wo) {
    int64_t ow = o % p.wo, oh = (o / p.wo) % p.ho, pl = o / (p.wo * p.ho);
    int64_t h0, h1, w0, w1;
    int64_t div = pool_window(&p, oh, ow, &h0, &h1, &w0, &w1);
    const CU_T(D) *xp = x + pl * p.h * p.w;
    if (max) {
      CT best = (CT)-INFINITY;
      int64_t bi = h0 * p.w + w0;
      for (int64_t h = h0; h < h1; h++)
        for (int64_t w = w0; w < w1; w++) {
          CT v = cu_load<D>(xp[h * p.w + w]);
          if (v > best || v != v) best = v, bi = h * p.w + w; /* the first max; NaN takes over */
        }
      y[o] = cu_store<D>(best);
      idx[o] = bi + base;
    } else {
      CT s = 0;
      for (int64_t h = h0; h < h1; h++)
        for (int64_t w = w0; w < w1; w++) s += cu_load<D>(xp[h * p.w + w]);
      y[o] = cu_store<D>(div > 0 ? s / (CT)div : (CT)0);
    }
  }
}

/* the adjoint of avg_pool, as a gather: input (h, w) sums gy / div over the windows holding it */
template <dle_dtype D>
__global__ void avg_pool_grad_kernel(pool_geom p, const CU_T(D) * gy, CU_T(D) * gx) {
  typedef CU_CT(D) CT;
  CU_GRID_LOOP(e, p.planes * p.h * p.w) {
    int64_t w = e % p.w, h = (e / p.w) % p.h, pl = e / (p.w * p.h);
    const CU_T(D) *gp = gy + pl * p.ho * p.wo;
    /* outputs oh with oh*sh - ph <= h < oh*sh - ph + kh */
    int64_t lo_h = h + p.ph - p.kh + 1, lo_w = w + p.pw - p.kw + 1;
    int64_t oh0 = lo_h <= 0 ? 0 : (lo_h + p.sh - 1) / p.sh,
            ow0 = lo_w <= 0 ? 0 : (lo_w + p.sw - 1) / p.sw;
    int64_t oh1 = (h + p.ph) / p.sh, ow1 = (w + p.pw) / p.sw;
    if (oh1 >= p.ho) oh1 = p.ho - 1;
    if (ow1 >= p.wo) ow1 = p.wo - 1;
    CT s = 0;
    for (int64_t oh = oh0; oh <= oh1; oh++)
      for (int64_t ow = ow0; ow <= ow1; ow++) {
        int64_t h0, h1, w0, w1;
        int64_t div = pool_window(&p, oh, ow, &h0, &h1, &w0, &w1);
        if (div > 0) s += cu_load<D>(gp[oh * p.wo + ow]) / (CT)div;
      }
    gx[e] = cu_store<D>(s);
  }
}

static dle_status cu_pool(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                          const dle_attrs *a) {
  const char *fn = cu_op_name(op);
  dle_tensor *o = outs[0];
  if (nin != 1 || ins[0]->dtype != o->dtype || !cu_contiguous(ins[0]) || ins[0]->ndim != 4)
    return cu_error("%s: the CUDA kernel expects contiguous %s inputs", fn,
                    cu_dtype_name(o->dtype));
  if (!cu_contiguous(o) || o->ndim != 4 || (op == DLE_OP_MAX_POOL2D && !cu_contiguous(outs[1])))
    return cu_error("%s: the CUDA kernel expects contiguous outputs", fn);
  int64_t total = cu_numel(o);
  if (total == 0) return DLE_OK;
  CU_OK(cu_use_device(fn, o));
  pool_geom p = op == DLE_OP_AVG_POOL2D_GRAD ? pool_make_geom(o->sizes, ins[0]->sizes, a)
                                             : pool_make_geom(ins[0]->sizes, o->sizes, a);
  if (p.sh <= 0 || p.sw <= 0) return cu_error("%s: bad stride", fn);
  return cu_with_float_dtype(fn, o->dtype, [&](auto tag) -> dle_status {
    constexpr dle_dtype D = decltype(tag)::value;
    typedef CU_T(D) T;
    const T *in0 = (const T *)cu_data(ins[0]);
    T *out = (T *)cu_data(o);
    if (op == DLE_OP_AVG_POOL2D_GRAD)
      avg_pool_grad_kernel<D><<<cu_blocks(total), CU_THREADS>>>(p, in0, out);
    else /* max_pool2d, avg_pool2d */
      pool_kernel<D><<<cu_blocks(total), CU_THREADS>>>(
          p, in0, out, op == DLE_OP_MAX_POOL2D ? (int64_t *)cu_data(outs[1]) : NULL, a->index_base,
          op == DLE_OP_MAX_POOL2D);
    CU_LAUNCHED(fn);
    return DLE_OK;
  });
}

void cu_register_pool(dle_backend *b) {
  b->kernels[DLE_OP_MAX_POOL2D] = cu_pool;
  b->kernels[DLE_OP_AVG_POOL2D] = cu_pool;
  b->kernels[DLE_OP_AVG_POOL2D_GRAD] = cu_pool;
}
