/* conv_grad.c — reverse (vjp) and forward (jvp) rules of the conv ops (engine/ops/conv.c),
 * registered by dle_grad_register_conv (engine/ops/families.def). */
#include "../autograd.h"
#include "../internal.h"

#include <stdlib.h>

/* ---- gradients: reverse (vjp) and forward (jvp) rules, written with dle ops ----
 * Rules call the ops with a copy of the node's attrs, changing only ints[7..8] (the spatial size
 * a gradient op produces), so strides, padding, dilation and groups carry over. */

static dle_status call1(dle_op op, dle_tensor **out, dle_tensor *a0, dle_tensor *a1,
                        const dle_attrs *base, int64_t s7, int64_t s8) {
  dle_attrs a = *base;
  a.ints[7] = s7, a.ints[8] = s8;
  a.nints = op == DLE_OP_CONV2D || op == DLE_OP_AVG_POOL2D || op == DLE_OP_MAX_POOL2D ? 7 : 9;
  dle_tensor *ins[2] = {a0, a1};
  *out = NULL;
  return dle_op_call(op, out, ins, a1 ? 2 : 1, &a);
}

/* *acc = *acc + t (either may be NULL: NULL is zero); consumes t. */
static dle_status accumulate(dle_tensor **acc, dle_tensor *t) {
  if (!t) return DLE_OK;
  if (!*acc) {
    *acc = t;
    return DLE_OK;
  }
  dle_tensor *s = NULL;
  dle_status st = dle_binary(DLE_OP_ADD, &s, *acc, t);
  dle_tensor_release(t);
  dle_tensor_release(*acc);
  *acc = st == DLE_OK ? s : NULL;
  return st;
}

/* y = conv(x, w) + b: gx = grad_input(gy, w), gw = grad_weight(gy, x), gb = sum of gy over N, H, W */
static dle_status vjp_conv2d(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  const dle_attrs *a = dle_node_attrs(n);
  dle_tensor *g = gout[0];
  if (!g) return DLE_OK;
  const int64_t *xs = dle_node_input_sizes(n, 0), *ws = dle_node_input_sizes(n, 1);
  if (dle_node_needs_grad(n, 0))
    DLE_TRY(call1(DLE_OP_CONV2D_GRAD_INPUT, &gin[0], g, dle_node_input(n, 1), a, xs[2], xs[3]));
  if (dle_node_needs_grad(n, 1))
    DLE_TRY(call1(DLE_OP_CONV2D_GRAD_WEIGHT, &gin[1], g, dle_node_input(n, 0), a, ws[2], ws[3]));
  if (dle_node_num_inputs(n) > 2 && dle_node_needs_grad(n, 2)) {
    int dims[3] = {0, 2, 3};
    gin[2] = NULL;
    DLE_TRY(dle_reduce(DLE_OP_SUM, &gin[2], g, 3, dims, false, 0));
  }
  return DLE_OK;
}

/* z = grad_input(gy, w) = dF/dx, so <g, z> = F(gy, g, w): d gy = conv(g, w), d w = grad_weight(gy, g) */
static dle_status vjp_conv2d_grad_input(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  const dle_attrs *a = dle_node_attrs(n);
  dle_tensor *g = gout[0];
  if (!g) return DLE_OK;
  const int64_t *ws = dle_node_input_sizes(n, 1);
  if (dle_node_needs_grad(n, 0))
    DLE_TRY(call1(DLE_OP_CONV2D, &gin[0], g, dle_node_input(n, 1), a, 0, 0));
  if (dle_node_needs_grad(n, 1))
    DLE_TRY(call1(DLE_OP_CONV2D_GRAD_WEIGHT, &gin[1], dle_node_input(n, 0), g, a, ws[2], ws[3]));
  return DLE_OK;
}

/* z = grad_weight(gy, x) = dF/dw, so <g, z> = F(gy, x, g): d gy = conv(x, g), d x = grad_input(gy, g) */
static dle_status vjp_conv2d_grad_weight(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  const dle_attrs *a = dle_node_attrs(n);
  dle_tensor *g = gout[0];
  if (!g) return DLE_OK;
  const int64_t *xs = dle_node_input_sizes(n, 1);
  if (dle_node_needs_grad(n, 0))
    DLE_TRY(call1(DLE_OP_CONV2D, &gin[0], dle_node_input(n, 1), g, a, 0, 0));
  if (dle_node_needs_grad(n, 1))
    DLE_TRY(call1(DLE_OP_CONV2D_GRAD_INPUT, &gin[1], dle_node_input(n, 0), g, a, xs[2], xs[3]));
  return DLE_OK;
}

/* d conv(x, w, b) = conv(dx, w) + conv(x, dw) + db (broadcast over N, H, W) */
static dle_status jvp_conv2d(dle_op op, const dle_attrs *a, dle_tensor *const *ins, int nin,
                             dle_tensor *const *tin, dle_tensor *const *outs, dle_tensor **tout) {
  (void)op;
  dle_tensor *acc = NULL, *t = NULL;
  dle_status st = DLE_OK;
  if (tin[0]) {
    st = call1(DLE_OP_CONV2D, &t, tin[0], ins[1], a, 0, 0);
    if (st == DLE_OK) st = accumulate(&acc, t);
  }
  if (st == DLE_OK && tin[1]) {
    st = call1(DLE_OP_CONV2D, &t, ins[0], tin[1], a, 0, 0);
    if (st == DLE_OK) st = accumulate(&acc, t);
  }
  if (st == DLE_OK && nin > 2 && tin[2]) {
    int64_t bs[4] = {1, tin[2]->sizes[0], 1, 1};
    dle_tensor *b = NULL, *e = NULL;
    t = NULL;
    st = dle_reshape(&b, tin[2], 4, bs);
    if (st == DLE_OK && !acc) { /* the bias tangent alone: a full-shaped tensor */
      st = dle_expand(&e, b, 4, outs[0]->sizes);
      if (st == DLE_OK) st = dle_contiguous(&t, e);
    } else if (st == DLE_OK) {
      t = b;
      b = NULL;
    }
    dle_tensor_release(b);
    dle_tensor_release(e);
    if (st == DLE_OK) st = accumulate(&acc, t);
  }
  if (st != DLE_OK) {
    dle_tensor_release(acc);
    return st;
  }
  tout[0] = acc;
  return DLE_OK;
}

/* grad_input and grad_weight are bilinear: d f(gy, v) = f(d gy, v) + f(gy, d v) */
static dle_status jvp_bilinear(dle_op op, const dle_attrs *a, dle_tensor *const *ins, int nin,
                               dle_tensor *const *tin, dle_tensor *const *outs, dle_tensor **tout) {
  (void)nin, (void)outs;
  dle_tensor *acc = NULL, *t = NULL;
  dle_status st = DLE_OK;
  if (tin[0]) {
    st = call1(op, &t, tin[0], ins[1], a, a->ints[7], a->ints[8]);
    if (st == DLE_OK) st = accumulate(&acc, t);
  }
  if (st == DLE_OK && tin[1]) {
    st = call1(op, &t, ins[0], tin[1], a, a->ints[7], a->ints[8]);
    if (st == DLE_OK) st = accumulate(&acc, t);
  }
  if (st != DLE_OK) {
    dle_tensor_release(acc);
    return st;
  }
  tout[0] = acc;
  return DLE_OK;
}

/* Views of x {N, C, H, W} as {N*C, H*W} and back, for scatter/gather along the planes. */
static dle_status planes(dle_tensor **out, dle_tensor *t) {
  int64_t s[2] = {t->sizes[0] * t->sizes[1], t->sizes[2] * t->sizes[3]};
  *out = NULL;
  return dle_reshape(out, t, 2, s);
}

/* max pool: gx = zeros with gy added at the argmax positions (scatter_add along each plane) */
static dle_status vjp_max_pool2d(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  dle_tensor *g = gout[0];
  if (!g || !dle_node_needs_grad(n, 0)) return DLE_OK;
  const int64_t *xs = dle_node_input_sizes(n, 0);
  int64_t ps[2] = {xs[0] * xs[1], xs[2] * xs[3]};
  dle_tensor *z = NULL, *gp = NULL, *ip = NULL, *r = NULL;
  dle_status st = dle_zeros(&z, 2, ps, g->dtype);
  if (st == DLE_OK) st = planes(&gp, g);
  if (st == DLE_OK) st = planes(&ip, dle_node_output(n, 1));
  if (st == DLE_OK) st = dle_scatter_add(&r, z, 1, ip, gp, dle_node_attrs(n)->index_base);
  if (st == DLE_OK) {
    gin[0] = NULL;
    st = dle_reshape(&gin[0], r, 4, xs);
  }
  dle_tensor_release(z);
  dle_tensor_release(gp);
  dle_tensor_release(ip);
  dle_tensor_release(r);
  return st;
}

/* max pool: the tangent at the argmax positions; none for the indices */
static dle_status jvp_max_pool2d(dle_op op, const dle_attrs *a, dle_tensor *const *ins, int nin,
                                 dle_tensor *const *tin, dle_tensor *const *outs,
                                 dle_tensor **tout) {
  (void)op, (void)ins, (void)nin;
  if (!tin[0]) return DLE_OK;
  dle_tensor *tp = NULL, *ip = NULL, *r = NULL;
  dle_status st = planes(&tp, tin[0]);
  if (st == DLE_OK) st = planes(&ip, outs[1]);
  if (st == DLE_OK) st = dle_gather(&r, tp, 1, ip, a->index_base);
  if (st == DLE_OK) {
    tout[0] = NULL;
    st = dle_reshape(&tout[0], r, 4, outs[0]->sizes);
  }
  dle_tensor_release(tp);
  dle_tensor_release(ip);
  dle_tensor_release(r);
  return st;
}

/* avg_pool2d and avg_pool2d_grad are linear and adjoint to each other */
static dle_status vjp_avg_pool2d(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  const int64_t *xs = dle_node_input_sizes(n, 0);
  return call1(DLE_OP_AVG_POOL2D_GRAD, &gin[0], gout[0], NULL, dle_node_attrs(n), xs[2], xs[3]);
}

static dle_status vjp_avg_pool2d_grad(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  return call1(DLE_OP_AVG_POOL2D, &gin[0], gout[0], NULL, dle_node_attrs(n), 0, 0);
}

static dle_status jvp_linear_pool(dle_op op, const dle_attrs *a, dle_tensor *const *ins, int nin,
                                  dle_tensor *const *tin, dle_tensor *const *outs,
                                  dle_tensor **tout) {
  (void)ins, (void)nin, (void)outs;
  if (!tin[0]) return DLE_OK;
  return call1(op, &tout[0], tin[0], NULL, a, a->ints[7], a->ints[8]);
}

void dle_grad_register_conv(dle_grad_rule *r) {
  r[DLE_OP_CONV2D] = (dle_grad_rule){vjp_conv2d, jvp_conv2d, DLE_SAVE(0) | DLE_SAVE(1), false};
  r[DLE_OP_CONV2D_GRAD_INPUT] =
      (dle_grad_rule){vjp_conv2d_grad_input, jvp_bilinear, DLE_SAVE(0) | DLE_SAVE(1), false};
  r[DLE_OP_CONV2D_GRAD_WEIGHT] =
      (dle_grad_rule){vjp_conv2d_grad_weight, jvp_bilinear, DLE_SAVE(0) | DLE_SAVE(1), false};
  r[DLE_OP_MAX_POOL2D] = (dle_grad_rule){vjp_max_pool2d, jvp_max_pool2d, 0, true};
  r[DLE_OP_AVG_POOL2D] = (dle_grad_rule){vjp_avg_pool2d, jvp_linear_pool, 0, false};
  r[DLE_OP_AVG_POOL2D_GRAD] = (dle_grad_rule){vjp_avg_pool2d_grad, jvp_linear_pool, 0, false};
}
