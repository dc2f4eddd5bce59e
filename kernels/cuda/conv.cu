/* conv.cu — CUDA kernels of 2-D convolution over {N, C, H, W} and its two gradients, mirroring
 * kernels/cpu/conv.c (pooling: pool.cu). The front door (engine/ops/conv.c)
 * hands over contiguous inputs in one float dtype and contiguous outputs; attrs.ints hold the
 * geometry (ops.def). Written as direct loops, one thread per output element, each a plain sum in
 * the compute type (float; double for float64) — the simple and obviously correct form, not the
 * CPU's im2col + gemm or Winograd (sums in another order: equal within rounding):
 *   conv2d        y[n, o, i, j] = bias[o] + sum_{c, u, v} w[o, c, u, v] x[n, g cg + c, i sh - ph + u dh, ...]
 *   grad_input    gx[n, ci, h, w] = sum over the outputs whose window holds (h, w) of gy w
 *   grad_weight   gw[o, c, u, v] = sum over n and the outputs of gy x
 * Sizes of zero give sums over nothing: zeros, or the bias. */
#include "../../engine/kernel/conv_geom.h"
#include "common.cuh"

template <dle_dtype D>
using conv_ct = std::conditional_t<D == DLE_F64, double, float>;

/* Element e of a contiguous {d0, d1, d2, d3} tensor as its indices k[0..3]. */
__device__ __forceinline__ void unravel4(int64_t e, int64_t d1, int64_t d2, int64_t d3,
                                         int64_t *k) {
  k[3] = e % d3, e /= d3;
  k[2] = e % d2, e /= d2;
  k[1] = e % d1, k[0] = e / d1;
}

/* The input position tap (u, v) of output (i, j) reads: its offset ih W + iw in an input plane,
 * or -1 in the padding. */
__device__ __forceinline__ int64_t conv_tap(const conv_geom &q, int64_t i, int64_t j, int64_t u,
                                            int64_t v) {
  int64_t ih = i * q.sh - q.ph + u * q.dh, iw = j * q.sw - q.pw + v * q.dw;
  return ih < 0 || ih >= q.h || iw < 0 || iw >= q.w ? -1 : ih * q.w + iw;
}

/* The output index i whose tap u reads input index h (stride s, padding p, dilation d, n
 * outputs), or -1: i s - p + u d = h. */
__device__ __forceinline__ int64_t conv_out_of(int64_t h, int64_t u, int64_t s, int64_t p,
                                               int64_t d, int64_t n) {
  int64_t t = h + p - u * d;
  return t < 0 || t % s != 0 || t / s >= n ? -1 : t / s;
}

enum { CONV_FORWARD, CONV_GRAD_INPUT, CONV_GRAD_WEIGHT };

/* y[n, o, i, j] (k = n, o, i, j): the bias plus the taps of the group's channels (a = x, b = w). */
template <dle_dtype D, class CT>
__device__ CT forward_sum(const conv_geom &q, const int64_t *k, const CU_T(D) * x,
                          const CU_T(D) * w, const CU_T(D) * bias) {
  const int64_t n = k[0], o = k[1], i = k[2], j = k[3];
  const CU_T(D) *xg = x + (n * q.c + (o / q.og) * q.cg) * q.h * q.w; /* the group's first channel */
  CT s = bias ? (CT)cu_load<D>(bias[o]) : (CT)0;
  for (int64_t c = 0; c < q.cg; c++)
    for (int64_t u = 0; u < q.kh; u++)
      for (int64_t v = 0; v < q.kw; v++) {
        int64_t hw = conv_tap(q, i, j, u, v);
        if (hw >= 0)
          s += (CT)cu_load<D>(w[((o * q.cg + c) * q.kh + u) * q.kw + v]) *
               (CT)cu_load<D>(xg[c * q.h * q.w + hw]);
      }
  return s;
}

/* gx[n, ci, ih, iw]: gy w over the group's outputs whose taps read (ih, iw) (a = gy, b = w). */
template <dle_dtype D, class CT>
__device__ CT grad_input_sum(const conv_geom &q, const int64_t *k, const CU_T(D) * gy,
                             const CU_T(D) * w) {
  const int64_t g = k[1] / q.cg, c = k[1] % q.cg;
  CT s = 0;
  for (int64_t o = g * q.og; o < (g + 1) * q.og; o++)
    for (int64_t u = 0; u < q.kh; u++) {
      int64_t i = conv_out_of(k[2], u, q.sh, q.ph, q.dh, q.ho);
      for (int64_t v = 0; v < q.kw && i >= 0; v++) {
        int64_t j = conv_out_of(k[3], v, q.sw, q.pw, q.dw, q.wo);
        if (j >= 0)
          s += (CT)cu_load<D>(gy[((k[0] * q.o + o) * q.ho + i) * q.wo + j]) *
               (CT)cu_load<D>(w[((o * q.cg + c) * q.kh + u) * q.kw + v]);
      }
    }
  return s;
}

/* gw[o, c, u, v]: gy x over the batch and the outputs (a = gy, b = x). */
template <dle_dtype D, class CT>
__device__ CT grad_weight_sum(const conv_geom &q, const int64_t *k, const CU_T(D) * gy,
                              const CU_T(D) * x) {
  const int64_t o = k[0], u = k[2], v = k[3], ci = (o / q.og) * q.cg + k[1];
  CT s = 0;
  for (int64_t n = 0; n < q.n; n++) {
    const CU_T(D) *xp = x + (n * q.c + ci) * q.h * q.w, *gp = gy + (n * q.o + o) * q.ho * q.wo;
    for (int64_t i = 0; i < q.ho; i++)
      for (int64_t j = 0; j < q.wo; j++) {
        int64_t hw = conv_tap(q, i, j, u, v);
        if (hw >= 0) s += (CT)cu_load<D>(gp[i * q.wo + j]) * (CT)cu_load<D>(xp[hw]);
      }
  }
  return s;
}

/* One thread per element of the result (y, gx or gw, total elements). */
template <dle_dtype D, int KIND>
__global__ void conv_kernel(conv_geom q, const CU_T(D) * a, const CU_T(D) * b, const CU_T(D) * bias,
                            CU_T(D) * out, int64_t total) {
  typedef conv_ct<D> CT;
  CU_GRID_LOOP(e, total) {
    int64_t k[4];
    if constexpr (KIND == CONV_FORWARD) {
      unravel4(e, q.o, q.ho, q.wo, k);
      out[e] = cu_store<D>(forward_sum<D, CT>(q, k, a, b, bias));
    } else if constexpr (KIND == CONV_GRAD_INPUT) {
      unravel4(e, q.c, q.h, q.w, k);
      out[e] = cu_store<D>(grad_input_sum<D, CT>(q, k, a, b));
    } else {
      unravel4(e, q.cg, q.kh, q.kw, k);
      out[e] = cu_store<D>(grad_weight_sum<D, CT>(q, k, a, b));
    }
  }
}

static dle_status cu_conv(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                          const dle_attrs *a) {
  const char *fn = cu_op_name(op);
  dle_tensor *o = outs[0];
  for (int i = 0; i < nin; i++)
    if (ins[i]->dtype != o->dtype || !cu_contiguous(ins[i]) || ins[i]->ndim != (i == 2 ? 1 : 4))
      return cu_error("%s: the CUDA kernel expects contiguous %s inputs", fn,
                      cu_dtype_name(o->dtype));
  if (!cu_contiguous(o) || o->ndim != 4)
    return cu_error("%s: the CUDA kernel expects contiguous outputs", fn);
  int64_t total = cu_numel(o);
  if (total == 0) return DLE_OK;
  CU_OK(cu_use_device(fn, o));
  conv_geom q = conv_geom_of_call(op, o, ins, a);
  if (q.g <= 0 || q.sh <= 0 || q.sw <= 0) return cu_error("%s: bad groups or stride", fn);
  return cu_with_float_dtype(fn, o->dtype, [&](auto tag) -> dle_status {
    constexpr dle_dtype D = decltype(tag)::value;
    typedef CU_T(D) T;
    const T *in0 = (const T *)cu_data(ins[0]), *in1 = nin > 1 ? (const T *)cu_data(ins[1]) : NULL;
    T *out = (T *)cu_data(o);
    switch (op) {
      case DLE_OP_CONV2D:
        conv_kernel<D, CONV_FORWARD><<<cu_blocks(total), CU_THREADS>>>(
            q, in0, in1, nin > 2 ? (const T *)cu_data(ins[2]) : NULL, out, total);
        break;
      case DLE_OP_CONV2D_GRAD_INPUT:
        conv_kernel<D, CONV_GRAD_INPUT>
            <<<cu_blocks(total), CU_THREADS>>>(q, in0, in1, NULL, out, total);
        break;
      default: /* conv2d_grad_weight */
        conv_kernel<D, CONV_GRAD_WEIGHT>
            <<<cu_blocks(total), CU_THREADS>>>(q, in0, in1, NULL, out, total);
        break;
    }
    CU_LAUNCHED(fn);
    return DLE_OK;
  });
}

void cu_register_conv(dle_backend *b) {
#define REGISTER(OP) b->kernels[DLE_OP_##OP] = cu_conv;
  REGISTER(CONV2D)
  REGISTER(CONV2D_GRAD_INPUT)
  REGISTER(CONV2D_GRAD_WEIGHT)
#undef REGISTER
}
