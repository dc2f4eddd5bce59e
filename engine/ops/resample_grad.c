/* resample_grad.c — reverse (vjp) and forward (jvp) rules of the resample family
 * (engine/ops/resample.c), registered by dle_grad_register_resample (engine/ops/families.def).
 *
 * upsample is linear in x: y = A x, with A fixed by the attrs. Its tangent is A x' (upsample of
 * the tangent), its gradient A^T gy (upsample_backward, whose attrs carry x's spatial sizes in
 * place of y's). upsample_backward is A^T, whose adjoint is A again: the two ops are each other's
 * reverse rules, so every order of derivative is exact. */
#include "../autograd.h"
#include "../internal.h"
#include "../kernel/resample_geom.h"

/* a with the "other side" sizes replaced by the spatial sizes of a tensor of shape {sizes[0..nd)}:
 * the attrs of the adjoint op. */
static dle_attrs adjoint_attrs(const dle_attrs *a, int nd, const int64_t *sizes) {
  dle_attrs r = *a;
  for (int i = 2; i < nd; i++) r.ints[DLE_RESAMPLE_SIZES + i - 2] = sizes[i];
  return r;
}

static dle_status vjp_resample(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  dle_op op = dle_node_op(n);
  dle_attrs r =
      adjoint_attrs(dle_node_attrs(n), dle_node_input_ndim(n, 0), dle_node_input_sizes(n, 0));
  dle_tensor *g = gout[0];
  gin[0] = NULL;
  return dle_op_call(op == DLE_OP_UPSAMPLE ? DLE_OP_UPSAMPLE_BACKWARD : DLE_OP_UPSAMPLE, &gin[0],
                     &g, 1, &r);
}

DLE_JVP_RULE(jvp_resample) {
  if (!tin[0]) return DLE_OK;
  dle_tensor *t = tin[0];
  tout[0] = NULL;
  return dle_op_call(op, &tout[0], &t, 1, a);
}

void dle_grad_register_resample(dle_grad_rule *r) {
  /* linear: nothing saved but x's shape, which the node keeps */
  r[DLE_OP_UPSAMPLE] = (dle_grad_rule){vjp_resample, jvp_resample, 0, false};
  r[DLE_OP_UPSAMPLE_BACKWARD] = (dle_grad_rule){vjp_resample, jvp_resample, 0, false};
}
