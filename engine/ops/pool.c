/* pool.c — shape rules and public wrappers of 2-D max and average pooling (rules: pool_grad.c)
 * over {N, C, H, W} (kind POOL in ops.def).
 *
 * attrs.ints: kernel h, w, stride h, w, padding h, w; avg: ints[6] count_include_pad;
 *             avg_pool2d_grad adds the input's H, W in ints[7..8].
 * The kernels get contiguous inputs in the dtype the op computes in (integers compute in float32)
 * and fresh contiguous outputs; max_pool2d's second output is the int64 argmax h*W+w.
 *
 * Gradients: avg_pool2d and avg_pool2d_grad are adjoint; max_pool2d scatters into (and its
 * tangent gathers from) the argmax positions. */
#include "../internal.h"
#include "spatial.h"

static const char *const pool_names[] = {"kernel size", "stride", "padding"};
static const char *const input_size[] = {"input size"};

static dle_status check_pool_attrs(const char *fn, const dle_attrs *a, int64_t h, int64_t w) {
  const int64_t *v = a->ints;
  DLE_TRY(check_bounded(fn, a, 0, 6, GEOM_MAX, pool_names));
  DLE_TRY(check_pair_at_least(fn, "kernel size", v, 1));
  DLE_TRY(check_pair_at_least(fn, "stride", v + 2, 1));
  if (v[4] < 0 || v[5] < 0 || 2 * v[4] > v[0] || 2 * v[5] > v[1])
    return dle_error("%s: padding {%lld, %lld} must be between 0 and half the kernel {%lld, %lld}",
                     fn, (long long)v[4], (long long)v[5], (long long)v[0], (long long)v[1]);
  if (v[0] > h + 2 * v[4] || v[1] > w + 2 * v[5])
    return dle_error("%s: kernel %lldx%lld is larger than the padded input %lldx%lld", fn,
                     (long long)v[0], (long long)v[1], (long long)(h + 2 * v[4]),
                     (long long)(w + 2 * v[5]));
  return DLE_OK;
}

static int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t pad) {
  return (in + 2 * pad - k) / s + 1;
}

/* The result shape of op; checks the input's shape against the attributes. */
static dle_status pool_shape(dle_op op, dle_tensor *const *ins, const dle_attrs *a,
                             int64_t *sizes) {
  const char *fn = dle_op_get_info(op)->name;
  switch (op) {
    case DLE_OP_MAX_POOL2D:
    case DLE_OP_AVG_POOL2D: {
      dle_tensor *x = ins[0];
      DLE_TRY(need_4d(fn, "input", x));
      DLE_TRY(check_pool_attrs(fn, a, x->sizes[2], x->sizes[3]));
      sizes[0] = x->sizes[0], sizes[1] = x->sizes[1];
      sizes[2] = pool_out(x->sizes[2], a->ints[0], a->ints[2], a->ints[4]);
      sizes[3] = pool_out(x->sizes[3], a->ints[1], a->ints[3], a->ints[5]);
      return DLE_OK;
    }
    case DLE_OP_AVG_POOL2D_GRAD: {
      dle_tensor *gy = ins[0];
      DLE_TRY(need_4d(fn, "grad_output", gy));
      int64_t h = a->ints[7], w = a->ints[8];
      if (h < 1 || w < 1)
        return dle_error("%s: the input size {%lld, %lld} (ints[7], ints[8]) must be positive", fn,
                         (long long)h, (long long)w);
      DLE_TRY(check_bounded(fn, a, 7, 2, SIZE_MAX_GEOM, input_size));
      DLE_TRY(check_pool_attrs(fn, a, h, w));
      int64_t ho = pool_out(h, a->ints[0], a->ints[2], a->ints[4]);
      int64_t wo = pool_out(w, a->ints[1], a->ints[3], a->ints[5]);
      if (gy->sizes[2] != ho || gy->sizes[3] != wo)
        return dle_error(
            "%s: grad_output %s does not match the pooled size %lldx%lld of a %lldx%lld "
            "input",
            fn, SHAPE(gy), (long long)ho, (long long)wo, (long long)h, (long long)w);
      sizes[0] = gy->sizes[0], sizes[1] = gy->sizes[1], sizes[2] = h, sizes[3] = w;
      return DLE_OK;
    }
    default: return dle_error("%s: not a pool op", fn);
  }
}

DLE_FORWARD_RULE(pool) {
  int64_t sizes[4];
  DLE_TRY(pool_shape(op, ins, a, sizes));
  return dle_spatial_dispatch(op, outs, ins, nin, a, sizes);
}

/* FLOPs: kh*kw per output element (per gy element for avg_pool2d_grad). */
static int64_t pool_flops(const dle_flops_call *c, int per) {
  (void)per;
  return dle_flops_numel(c->outs[0]) * c->a->ints[0] * c->a->ints[1];
}
static int64_t pool_grad_flops(const dle_flops_call *c, int per) {
  (void)per;
  return dle_flops_numel(c->ins[0]) * c->a->ints[0] * c->a->ints[1];
}

dle_flops_rule dle_flops_pool(dle_op op) {
  if (op == DLE_OP_AVG_POOL2D_GRAD)
    return (dle_flops_rule){"kh*kw per gradient element", pool_grad_flops, 0};
  return (dle_flops_rule){"kh*kw per output element", pool_flops, 0};
}

/* ---- public wrappers ---- */

static dle_attrs pool_attrs(const dle_pool2d_params *p) {
  return spatial_attrs(p->kernel, p->stride, p->padding, p->count_include_pad);
}

dle_status dle_max_pool2d(dle_tensor **values, dle_tensor **indices, dle_tensor *x,
                          const dle_pool2d_params *p, int64_t index_base) {
  dle_attrs a = pool_attrs(p);
  a.index_base = index_base;
  dle_tensor *outs[2] = {*values, *indices};
  DLE_TRY(dle_op_call(DLE_OP_MAX_POOL2D, outs, &x, 1, &a));
  *values = outs[0], *indices = outs[1];
  return DLE_OK;
}

dle_status dle_avg_pool2d(dle_tensor **out, dle_tensor *x, const dle_pool2d_params *p) {
  dle_attrs a = pool_attrs(p);
  return dle_op_call(DLE_OP_AVG_POOL2D, out, &x, 1, &a);
}

dle_status dle_avg_pool2d_grad(dle_tensor **out, dle_tensor *gy, const dle_pool2d_params *p,
                               int64_t h, int64_t w) {
  dle_attrs a = pool_attrs(p);
  a.ints[7] = h, a.ints[8] = w, a.nints = 9;
  return dle_op_call(DLE_OP_AVG_POOL2D_GRAD, out, &gy, 1, &a);
}
