/* nn_grad.c — reverse (vjp) and forward (jvp) rules of the fused nn ops (engine/ops/nn.c;
 * attention's are attention_grad.c, cross_entropy's losses_grad.c).
 *
 * The forward ops' gradients are the fused backward ops (embedding_backward, dropout itself); the
 * rules of those backward ops are written as composites of dle ops, so gradients of gradients
 * (create_graph) work to any order.
 *
 *   embedding            linear in the weight; embedding_backward is its adjoint (with the rows at
 *                        padding_idx read as zeros, attrs.ints[2] = 1, which is what "no gradient
 *                        to the padding row" makes the forward look like to the gradient).
 *   dropout              linear: y = mask x / (1 - p) with the mask regenerated from the attrs'
 *                        Philox (seed, offset), so it is its own adjoint and tangent map. */
#include "../autograd.h"
#include "../internal.h"
#include "grad_scope.h"

/* ---- embedding ---- */

static dle_status embedding_call(dle_op op, dle_tensor **out, dle_tensor *src, dle_tensor *idx,
                                 const dle_attrs *base, int64_t zero_pad, int64_t v) {
  dle_attrs a = *base;
  a.ints[2] = zero_pad, a.ints[3] = v, a.nints = 4;
  *out = NULL;
  return dle_op_call(op, out, (dle_tensor *[]){src, idx}, 2, &a);
}

static dle_status vjp_embedding(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  return embedding_call(DLE_OP_EMBEDDING_BACKWARD, &gin[0], gout[0], dle_node_input(n, 1),
                        dle_node_attrs(n), 0, dle_node_input_sizes(n, 0)[0]);
}

/* the tangent the reverse rule is adjoint to: padding rows carry none */
DLE_JVP_RULE(jvp_embedding) {
  if (!tin[0]) return DLE_OK;
  return embedding_call(DLE_OP_EMBEDDING, &tout[0], tin[0], ins[1], a, 1, 0);
}

static dle_status vjp_embedding_backward(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  return embedding_call(DLE_OP_EMBEDDING, &gin[0], gout[0], dle_node_input(n, 1), dle_node_attrs(n),
                        1, 0);
}

DLE_JVP_RULE(jvp_embedding_backward) {
  if (!tin[0]) return DLE_OK;
  return embedding_call(DLE_OP_EMBEDDING_BACKWARD, &tout[0], tin[0], ins[1], a, a->ints[2],
                        a->ints[3]);
}

/* ---- dropout: the same mask (same attrs) applied to the gradient or the tangent ---- */

static dle_status vjp_dropout(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  gin[0] = NULL;
  return dle_op_call(DLE_OP_DROPOUT, &gin[0], &gout[0], 1, dle_node_attrs(n));
}

DLE_JVP_RULE(jvp_dropout) {
  if (!tin[0]) return DLE_OK;
  tout[0] = NULL;
  return dle_op_call(DLE_OP_DROPOUT, &tout[0], &tin[0], 1, a);
}

void dle_grad_register_nn(dle_grad_rule *r) {
  r[DLE_OP_EMBEDDING] = (dle_grad_rule){vjp_embedding, jvp_embedding, DLE_SAVE(1), false};
  r[DLE_OP_EMBEDDING_BACKWARD] =
      (dle_grad_rule){vjp_embedding_backward, jvp_embedding_backward, DLE_SAVE(1), false};
  r[DLE_OP_DROPOUT] = (dle_grad_rule){vjp_dropout, jvp_dropout, 0, false};
}
