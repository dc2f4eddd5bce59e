/* resample.c — shape and dtype rules and public wrappers of the resample family (kind RESAMPLE in
 * ops.def): upsample (PyTorch's interpolate of nearest, nearest-exact, n-linear and cubic modes
 * over the 1 to 3 spatial dims of x {N, C, ...}) and its adjoint upsample_backward. The attrs'
 * layout and the source-index rules: engine/kernel/resample_geom.h. Gradient rules:
 * ops/resample_grad.c; kernels: kernels/cpu/resample.c.
 *
 * The kernels get contiguous inputs in x's dtype and a fresh contiguous output; the nearest modes
 * take every dtype, the interpolating ones and the backward float dtypes. */
#include "../internal.h"

#include "../kernel/resample_geom.h"

static const char *const mode_names[DLE_RESAMPLE_NUM_MODES] = {"nearest", "nearest-exact", "linear",
                                                               "cubic"};

DLE_FORWARD_RULE(resample) {
  const char *fn = dle_op_get_info(op)->name;
  dle_tensor *x = ins[0];
  int64_t mode = a->ints[0];
  if (x->ndim < 3 || x->ndim > 5)
    return dle_error("%s: expected an input of 3 to 5 dims {N, C, d1[, d2[, d3]]}, got %s", fn,
                     SHAPE(x));
  if (mode < 0 || mode >= DLE_RESAMPLE_NUM_MODES)
    return dle_error("%s: unknown mode %lld", fn, (long long)mode);
  bool nearest = dle_resample_taps(mode) == 1;
  if (!dle_dtype_is_float(x->dtype) && (!nearest || op == DLE_OP_UPSAMPLE_BACKWARD))
    return dle_error("%s: mode %s needs a float tensor, got %s (shape %s)", fn, mode_names[mode],
                     dle_dtype_name(x->dtype), SHAPE(x));
  int d = x->ndim - 2;
  dle_result_spec res = {.ndim = x->ndim, .dtype = x->dtype};
  res.sizes[0] = x->sizes[0], res.sizes[1] = x->sizes[1];
  for (int i = 0; i < d; i++) {
    int64_t other = a->ints[DLE_RESAMPLE_SIZES + i];
    if (other <= 0 || x->sizes[2 + i] <= 0)
      return dle_error(
          "%s: input and output sizes must be greater than 0, got spatial size %lld "
          "and %lld for dim %d of input %s",
          fn, (long long)x->sizes[2 + i], (long long)other, 3 + i, SHAPE(x));
    double s = dle_resample_scale(a, i);
    if (!(s >= 0) || isinf(s))
      return dle_error("%s: scale %g of dim %d must be a finite non-negative number", fn, s, 3 + i);
    res.sizes[2 + i] = other;
  }
  dle_dtype in_dt = x->dtype;
  return dle_dispatch_contiguous(op, outs, &res, ins, 1, &in_dt, a);
}

/* FLOPs: a multiply and an add per tap, taps^d per element of upsample's output (its output, the
 * backward's input gy, which it scatters with the same products); 0 for the nearest modes, which
 * only copy. */
static int64_t resample_flops(const dle_tensor *big, const dle_attrs *a) {
  int64_t t = 1, k = dle_resample_taps(a->ints[0]);
  if (k == 1 || !big) return 0;
  for (int i = 2; i < big->ndim; i++) t *= k;
  return 2 * t * dle_flops_numel(big);
}
static int64_t upsample_flops(const dle_flops_call *c, int per) {
  (void)per;
  return resample_flops(c->outs[0], c->a);
}
static int64_t upsample_backward_flops(const dle_flops_call *c, int per) {
  (void)per;
  return resample_flops(c->nin ? c->ins[0] : NULL, c->a);
}

dle_flops_rule dle_flops_resample(dle_op op) {
  const char *name = "2 * taps^d per element of upsample's output (0 for nearest)";
  return (dle_flops_rule){name, op == DLE_OP_UPSAMPLE ? upsample_flops : upsample_backward_flops,
                          0};
}

/* ---- public wrappers ---- */

static dle_status resample_attrs(dle_attrs *a, const char *fn, int d, const int64_t *sizes,
                                 dle_resample_mode mode, bool align_corners, const double *scales) {
  *a = (dle_attrs){0};
  if (d < 1 || d > 3) return dle_error("%s: expected 1 to 3 spatial sizes, got %d", fn, d);
  a->ints[0] = mode, a->ints[1] = align_corners;
  for (int i = 0; i < d; i++) {
    a->ints[DLE_RESAMPLE_SIZES + i] = sizes[i];
    dle_resample_set_scale(a, i, scales ? scales[i] : 0);
  }
  a->nints = DLE_RESAMPLE_SCALES + 3;
  return DLE_OK;
}

dle_status dle_upsample(dle_tensor **out, dle_tensor *x, int d, const int64_t *sizes,
                        dle_resample_mode mode, bool align_corners, const double *scales) {
  dle_attrs a;
  DLE_TRY(resample_attrs(&a, "upsample", d, sizes, mode, align_corners, scales));
  if (x && x->ndim != d + 2)
    return dle_error("upsample: %d output sizes for input %s, expected %d", d, SHAPE(x),
                     x->ndim - 2);
  return dle_op_call(DLE_OP_UPSAMPLE, out, &x, 1, &a);
}

dle_status dle_upsample_backward(dle_tensor **gx, dle_tensor *gy, int d, const int64_t *in_sizes,
                                 dle_resample_mode mode, bool align_corners, const double *scales) {
  dle_attrs a;
  DLE_TRY(resample_attrs(&a, "upsample_backward", d, in_sizes, mode, align_corners, scales));
  if (gy && gy->ndim != d + 2)
    return dle_error("upsample_backward: %d input sizes for grad_output %s, expected %d", d,
                     SHAPE(gy), gy->ndim - 2);
  return dle_op_call(DLE_OP_UPSAMPLE_BACKWARD, gx, &gy, 1, &a);
}
