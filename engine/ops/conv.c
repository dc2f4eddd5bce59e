/* conv.c — shape rules and public wrappers of 2-D convolution (rules: conv_grad.c) over
 * {N, C, H, W} (kind CONV in ops.def; pooling is pool.c).
 *
 * attrs.ints, conv ops:  stride h, w, padding h, w, dilation h, w, groups; conv2d_grad_input adds
 *                        the input's H, W in ints[7..8], conv2d_grad_weight the kernel's kh, kw.
 * The kernels get contiguous inputs in the dtype the op computes in (the promoted float dtype;
 * integers compute in float32) and fresh contiguous outputs; a caller's output is filled by a
 * copy afterwards.
 *
 * Gradients: conv2d, conv2d_grad_input and conv2d_grad_weight are the three partial derivatives
 * of one trilinear form F(gy, x, w) = <gy, conv2d(x, w)>, so each one's gradient is another of the
 * three (PyTorch's convolution double backward). */
#include "../autograd.h"
#include "../internal.h"
#include "spatial.h"

/* (in + 2 pad - dil (k - 1) - 1) / stride + 1: the output size along one dim (< 1: too small). */
static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t pad, int64_t dil) {
  int64_t span = in + 2 * pad - dil * (k - 1) - 1;
  return span < 0 ? 0 : span / s + 1;
}

static const char *const conv_names[] = {"stride", "padding", "dilation", "groups"};
static const char *const input_size[] = {"input size"}, *const kernel_size[] = {"kernel size"};

static dle_status check_conv_attrs(const char *fn, const dle_attrs *a) {
  const int64_t *v = a->ints;
  DLE_TRY(check_bounded(fn, a, 0, 7, GEOM_MAX, conv_names));
  DLE_TRY(check_pair_at_least(fn, "stride", v, 1));
  DLE_TRY(check_pair_at_least(fn, "padding", v + 2, 0));
  DLE_TRY(check_pair_at_least(fn, "dilation", v + 4, 1));
  if (v[6] < 1) return dle_error("%s: groups must be positive, got %lld", fn, (long long)v[6]);
  return DLE_OK;
}

/* The output spatial size of a conv with input {H, W} and kernel {kh, kw}, or an error when the
 * dilated kernel does not fit the padded input. */
static dle_status conv_out_hw(const char *fn, const dle_attrs *a, int64_t h, int64_t w, int64_t kh,
                              int64_t kw, int64_t *ho, int64_t *wo) {
  int64_t eh = 0,
          ew = 0; /* the dilated kernel: dilation (<= 2^31) x a size (< 2^59) may overflow */
  if (__builtin_mul_overflow(a->ints[4], kh - 1, &eh) ||
      __builtin_mul_overflow(a->ints[5], kw - 1, &ew))
    return dle_error("%s: kernel %lldx%lld dilated by {%lld, %lld} is too large", fn, (long long)kh,
                     (long long)kw, (long long)a->ints[4], (long long)a->ints[5]);
  eh++, ew++;
  if (eh > h + 2 * a->ints[2] || ew > w + 2 * a->ints[3])
    return dle_error(
        "%s: kernel %lldx%lld (dilated %lldx%lld) is larger than the padded input "
        "%lldx%lld",
        fn, (long long)kh, (long long)kw, (long long)eh, (long long)ew,
        (long long)(h + 2 * a->ints[2]), (long long)(w + 2 * a->ints[3]));
  *ho = out_size(h, kh, a->ints[0], a->ints[2], a->ints[4]);
  *wo = out_size(w, kw, a->ints[1], a->ints[3], a->ints[5]);
  return DLE_OK;
}

/* The result shape(s) of op; checks every input's shape against the attributes. */
static dle_status conv_shape(dle_op op, dle_tensor *const *ins, int nin, const dle_attrs *a,
                             int64_t *sizes) {
  const char *fn = dle_op_get_info(op)->name;
  switch (op) {
    case DLE_OP_CONV2D: {
      dle_tensor *x = ins[0], *w = ins[1];
      if (nin < 2 || nin > 3)
        return dle_error("conv2d: expected 2 or 3 tensor inputs (x, w[, bias]), got %d", nin);
      DLE_TRY(need_4d(fn, "input", x));
      DLE_TRY(need_4d(fn, "weight", w));
      DLE_TRY(check_conv_attrs(fn, a));
      int64_t g = a->ints[6], c = x->sizes[1], o = w->sizes[0];
      if (c % g || o % g)
        return dle_error(
            "conv2d: groups %lld must divide the input channels %lld and the output "
            "channels %lld (input %s, weight %s)",
            (long long)g, (long long)c, (long long)o, SHAPE(x), SHAPE(w));
      if (w->sizes[1] != c / g) /* not w->sizes[1] * g != c: that product may overflow */
        return dle_error(
            "conv2d: input %s has %lld channels but weight %s expects "
            "%lld per group x %lld groups",
            SHAPE(x), (long long)c, SHAPE(w), (long long)w->sizes[1], (long long)g);
      if (nin == 3 && (ins[2]->ndim != 1 || ins[2]->sizes[0] != o))
        return dle_error("conv2d: bias must have shape {%lld} (one per output channel), got %s",
                         (long long)o, SHAPE(ins[2]));
      sizes[0] = x->sizes[0], sizes[1] = o;
      return conv_out_hw(fn, a, x->sizes[2], x->sizes[3], w->sizes[2], w->sizes[3], &sizes[2],
                         &sizes[3]);
    }
    case DLE_OP_CONV2D_GRAD_INPUT:
    case DLE_OP_CONV2D_GRAD_WEIGHT: {
      bool gi = op == DLE_OP_CONV2D_GRAD_INPUT;
      dle_tensor *gy = ins[0], *other = ins[1];
      DLE_TRY(need_4d(fn, "grad_output", gy));
      DLE_TRY(need_4d(fn, gi ? "weight" : "input", other));
      DLE_TRY(check_conv_attrs(fn, a));
      int64_t g = a->ints[6], s7 = a->ints[7], s8 = a->ints[8];
      if (s7 < 1 || s8 < 1)
        return dle_error("%s: the %s size {%lld, %lld} (ints[7], ints[8]) must be positive", fn,
                         gi ? "input" : "kernel", (long long)s7, (long long)s8);
      DLE_TRY(check_bounded(fn, a, 7, 2, SIZE_MAX_GEOM, gi ? input_size : kernel_size));
      int64_t o = gy->sizes[1], c = other->sizes[1];
      if (gi && __builtin_mul_overflow(other->sizes[1], g, &c))
        return dle_error("%s: weight %s with %lld groups has too many input channels", fn,
                         SHAPE(other), (long long)g);
      if (o % g || c % g)
        return dle_error("%s: groups %lld must divide the channels (grad_output %s, %s %s)", fn,
                         (long long)g, SHAPE(gy), gi ? "weight" : "input", SHAPE(other));
      if (gi && other->sizes[0] != o)
        return dle_error("%s: grad_output %s has %lld channels but weight %s has %lld outputs", fn,
                         SHAPE(gy), (long long)o, SHAPE(other), (long long)other->sizes[0]);
      if (!gi && other->sizes[0] != gy->sizes[0])
        return dle_error("%s: grad_output %s and input %s have different batch sizes", fn,
                         SHAPE(gy), SHAPE(other));
      int64_t h = gi ? s7 : other->sizes[2], w = gi ? s8 : other->sizes[3];
      int64_t kh = gi ? other->sizes[2] : s7, kw = gi ? other->sizes[3] : s8, ho, wo;
      DLE_TRY(conv_out_hw(fn, a, h, w, kh, kw, &ho, &wo));
      if (ho != gy->sizes[2] || wo != gy->sizes[3])
        return dle_error(
            "%s: grad_output %s does not match the conv output %lldx%lld of a %lldx%lld "
            "input and a %lldx%lld kernel",
            fn, SHAPE(gy), (long long)ho, (long long)wo, (long long)h, (long long)w, (long long)kh,
            (long long)kw);
      if (gi)
        sizes[0] = gy->sizes[0], sizes[1] = c, sizes[2] = h, sizes[3] = w;
      else
        sizes[0] = o, sizes[1] = c / g, sizes[2] = kh, sizes[3] = kw;
      return DLE_OK;
    }
    default: return dle_error("%s: not a conv op", fn);
  }
}

DLE_FORWARD_RULE(conv) {
  int64_t sizes[4];
  DLE_TRY(conv_shape(op, ins, nin, a, sizes));
  return dle_spatial_dispatch(op, outs, ins, nin, a, sizes);
}

/* ---- FLOPs: 2 * output elements * (Cin/groups)*kh*kw (+ the output elements with a bias); the
 * gradient ops count the same product, from gy and the weight or the weight gradient's shape ---- */

/* (Cin/groups)*kh*kw: the weight's (or weight gradient's) elements per output channel. */
static int64_t per_out_channel(const dle_tensor *w) {
  return w->ndim && w->sizes[0] ? dle_tensor_numel(w) / w->sizes[0] : 0;
}
static int64_t conv_flops(const dle_flops_call *c, int per) {
  (void)per;
  int64_t y = dle_flops_numel(c->outs[0]);
  return 2 * y * per_out_channel(c->ins[1]) + (c->nin == 3 ? y : 0);
}
static int64_t conv_grad_input_flops(const dle_flops_call *c, int per) {
  (void)per;
  return 2 * dle_flops_numel(c->ins[0]) * per_out_channel(c->ins[1]);
}
static int64_t conv_grad_weight_flops(const dle_flops_call *c, int per) {
  (void)per;
  return 2 * dle_flops_numel(c->ins[0]) * per_out_channel(c->outs[0]);
}

dle_flops_rule dle_flops_conv(dle_op op) {
  const char *product = "2*N*Hout*Wout*Cout*(Cin/groups)*kh*kw";
  switch (op) {
    case DLE_OP_CONV2D:
      return (dle_flops_rule){"2*N*Hout*Wout*Cout*(Cin/groups)*kh*kw (+ N*Cout*Hout*Wout bias)",
                              conv_flops, 0};
    case DLE_OP_CONV2D_GRAD_INPUT: return (dle_flops_rule){product, conv_grad_input_flops, 0};
    case DLE_OP_CONV2D_GRAD_WEIGHT: return (dle_flops_rule){product, conv_grad_weight_flops, 0};
    default: return dle_flops_none();
  }
}

/* ---- public wrappers ---- */

static dle_attrs conv_attrs(const dle_conv2d_params *p) {
  static const dle_conv2d_params def = {{1, 1}, {0, 0}, {1, 1}, 1};
  if (!p) p = &def;
  return spatial_attrs(p->stride, p->padding, p->dilation, p->groups);
}

dle_status dle_conv2d(dle_tensor **out, dle_tensor *x, dle_tensor *w, dle_tensor *bias,
                      const dle_conv2d_params *p) {
  dle_attrs a = conv_attrs(p);
  dle_tensor *ins[3] = {x, w, bias};
  return dle_op_call(DLE_OP_CONV2D, out, ins, bias ? 3 : 2, &a);
}

/* A gradient op of conv2d on gy and v (w or x), whose output's last two sizes are h, w. */
static dle_status conv_grad_call(dle_op op, dle_tensor **out, dle_tensor *gy, dle_tensor *v,
                                 const dle_conv2d_params *p, int64_t h, int64_t w) {
  dle_attrs a = conv_attrs(p);
  a.ints[7] = h, a.ints[8] = w, a.nints = 9;
  dle_tensor *ins[2] = {gy, v};
  return dle_op_call(op, out, ins, 2, &a);
}

dle_status dle_conv2d_grad_input(dle_tensor **out, dle_tensor *gy, dle_tensor *w,
                                 const dle_conv2d_params *p, int64_t h, int64_t w_) {
  return conv_grad_call(DLE_OP_CONV2D_GRAD_INPUT, out, gy, w, p, h, w_);
}

dle_status dle_conv2d_grad_weight(dle_tensor **out, dle_tensor *gy, dle_tensor *x,
                                  const dle_conv2d_params *p, int64_t kh, int64_t kw) {
  return conv_grad_call(DLE_OP_CONV2D_GRAD_WEIGHT, out, gy, x, p, kh, kw);
}
