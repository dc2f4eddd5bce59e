/* pool_grad.c — reverse (vjp) and forward (jvp) rules of the pool ops (engine/ops/pool.c),
 * registered by dle_grad_register_pool (engine/ops/families.def). */
#include "../autograd.h"
#include "../internal.h"
#include "spatial.h"

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
  dle_release_all((dle_tensor *[]){z, gp, ip, r}, 4);
  return st;
}

/* max pool: the tangent at the argmax positions; none for the indices */
DLE_JVP_RULE(jvp_max_pool2d) {
  if (!tin[0]) return DLE_OK;
  dle_tensor *tp = NULL, *ip = NULL, *r = NULL;
  dle_status st = planes(&tp, tin[0]);
  if (st == DLE_OK) st = planes(&ip, outs[1]);
  if (st == DLE_OK) st = dle_gather(&r, tp, 1, ip, a->index_base);
  if (st == DLE_OK) {
    tout[0] = NULL;
    st = dle_reshape(&tout[0], r, 4, outs[0]->sizes);
  }
  dle_release_all((dle_tensor *[]){tp, ip, r}, 3);
  return st;
}

/* avg_pool2d and avg_pool2d_grad are linear and adjoint to each other */
static dle_status vjp_avg_pool2d(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  const int64_t *xs = dle_node_input_sizes(n, 0);
  return dle_spatial_call(DLE_OP_AVG_POOL2D_GRAD, &gin[0], gout[0], NULL, dle_node_attrs(n), xs[2],
                          xs[3]);
}

static dle_status vjp_avg_pool2d_grad(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  return dle_spatial_call(DLE_OP_AVG_POOL2D, &gin[0], gout[0], NULL, dle_node_attrs(n), 0, 0);
}

DLE_JVP_RULE(jvp_linear_pool) {
  if (!tin[0]) return DLE_OK;
  return dle_spatial_call(op, &tout[0], tin[0], NULL, a, a->ints[7], a->ints[8]);
}

void dle_grad_register_pool(dle_grad_rule *r) {
  r[DLE_OP_MAX_POOL2D] = (dle_grad_rule){vjp_max_pool2d, jvp_max_pool2d, 0, true};
  r[DLE_OP_AVG_POOL2D] = (dle_grad_rule){vjp_avg_pool2d, jvp_linear_pool, 0, false};
  r[DLE_OP_AVG_POOL2D_GRAD] = (dle_grad_rule){vjp_avg_pool2d_grad, jvp_linear_pool, 0, false};
}
