/* conv_grad.c — reverse (vjp) and forward (jvp) rules of the conv ops (engine/ops/conv.c),
 * registered by dle_grad_register_conv (engine/ops/families.def). */
#include "../autograd.h"
#include "../internal.h"
#include "spatial.h"

#include <stdlib.h>

/* ---- gradients: reverse (vjp) and forward (jvp) rules, written with dle ops ----
 * Rules call the ops with a copy of the node's attrs (dle_spatial_call, spatial.h). */

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
    DLE_TRY(dle_spatial_call(DLE_OP_CONV2D_GRAD_INPUT, &gin[0], g, dle_node_input(n, 1), a, xs[2],
                             xs[3]));
  if (dle_node_needs_grad(n, 1))
    DLE_TRY(dle_spatial_call(DLE_OP_CONV2D_GRAD_WEIGHT, &gin[1], g, dle_node_input(n, 0), a, ws[2],
                             ws[3]));
  if (dle_node_num_inputs(n) > 2 && dle_node_needs_grad(n, 2)) {
    int dims[3] = {0, 2, 3};
    gin[2] = NULL;
    DLE_TRY(dle_reduce(DLE_OP_SUM, &gin[2], g, 3, dims, false, 0));
  }
  return DLE_OK;
}

/* The gradient ops of conv2d are adjoints of the bilinear F(gy, x, w) = <gy, conv(x, w)>:
 *   z = grad_input(gy, w) = dF/dx, so <g, z> = F(gy, g, w): d gy = conv(g, w), d w = grad_weight(gy, g);
 *   z = grad_weight(gy, x) = dF/dw, so <g, z> = F(gy, x, g): d gy = conv(x, g), d x = grad_input(gy, g).
 * Input 1 (w or x) gives the size of the other one's gradient's spatial dims. */
static dle_status vjp_conv2d_adjoint(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  bool of_input = dle_node_op(n) == DLE_OP_CONV2D_GRAD_INPUT;
  const dle_attrs *a = dle_node_attrs(n);
  dle_tensor *g = gout[0], *other = dle_node_input(n, 1);
  if (!g) return DLE_OK;
  const int64_t *s = dle_node_input_sizes(n, 1);
  if (dle_node_needs_grad(n, 0))
    DLE_TRY(dle_spatial_call(DLE_OP_CONV2D, &gin[0], of_input ? g : other, of_input ? other : g, a,
                             0, 0));
  if (dle_node_needs_grad(n, 1))
    DLE_TRY(dle_spatial_call(of_input ? DLE_OP_CONV2D_GRAD_WEIGHT : DLE_OP_CONV2D_GRAD_INPUT,
                             &gin[1], dle_node_input(n, 0), g, a, s[2], s[3]));
  return DLE_OK;
}

/* d op(u, v) = op(du, v) + op(u, dv) for a bilinear op (conv2d in x and w, its gradient ops in
 * their two inputs), added into *acc; h, w: the gradient ops' output size. */
static dle_status bilinear_tangent(dle_op op, const dle_attrs *a, dle_tensor *const *ins,
                                   dle_tensor *const *tin, int64_t h, int64_t w, dle_tensor **acc) {
  dle_tensor *t = NULL;
  dle_status st = DLE_OK;
  if (tin[0]) {
    st = dle_spatial_call(op, &t, tin[0], ins[1], a, h, w);
    if (st == DLE_OK) st = accumulate(acc, t);
  }
  if (st == DLE_OK && tin[1]) {
    st = dle_spatial_call(op, &t, ins[0], tin[1], a, h, w);
    if (st == DLE_OK) st = accumulate(acc, t);
  }
  return st;
}

/* d conv(x, w, b) = conv(dx, w) + conv(x, dw) + db (broadcast over N, H, W) */
DLE_JVP_RULE(jvp_conv2d) {
  dle_tensor *acc = NULL, *t = NULL;
  dle_status st = bilinear_tangent(DLE_OP_CONV2D, a, ins, tin, 0, 0, &acc);
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
DLE_JVP_RULE(jvp_bilinear) {
  dle_tensor *acc = NULL;
  dle_status st = bilinear_tangent(op, a, ins, tin, a->ints[7], a->ints[8], &acc);
  if (st != DLE_OK) {
    dle_tensor_release(acc);
    return st;
  }
  tout[0] = acc;
  return DLE_OK;
}

void dle_grad_register_conv(dle_grad_rule *r) {
  r[DLE_OP_CONV2D] = (dle_grad_rule){vjp_conv2d, jvp_conv2d, DLE_SAVE(0) | DLE_SAVE(1), false};
  r[DLE_OP_CONV2D_GRAD_INPUT] =
      (dle_grad_rule){vjp_conv2d_adjoint, jvp_bilinear, DLE_SAVE(0) | DLE_SAVE(1), false};
  r[DLE_OP_CONV2D_GRAD_WEIGHT] =
      (dle_grad_rule){vjp_conv2d_adjoint, jvp_bilinear, DLE_SAVE(0) | DLE_SAVE(1), false};
}
