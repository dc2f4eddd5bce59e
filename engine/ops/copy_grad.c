/* copy_grad.c — reverse (vjp) and forward (jvp) rules of the copy ops (engine/ops/copy.c),
 * registered by dle_grad_register_copy (engine/ops/families.def). */
#include "../autograd.h"
#include "../internal.h"

#include <stdlib.h>

/* ---- gradients: reverse (vjp) and forward (jvp) rules, written with dle ops ---- */

/* d copy(x) = dx: the gradient summed back over the dims copy_ broadcast the source to; the
 * engine casts it back to the source's dtype (a dtype-converting copy). */
static dle_status vjp_copy(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  return dle_grad_to_input(n, 0, gout[0], gin);
}

/* The tangent passes through; the engine broadcasts it to the destination and casts it. */
DLE_JVP_RULE(jvp_copy) {
  if (tin[0]) dle_tensor_retain(tin[0]);
  tout[0] = tin[0];
  return DLE_OK;
}

void dle_grad_register_copy(dle_grad_rule *r) {
  r[DLE_OP_COPY] = (dle_grad_rule){vjp_copy, jvp_copy, 0, false};
}
