/* ctc_grad.c — reverse (vjp) and forward (jvp) rules of ctc_loss (engine/ops/ctc.c), registered
 * by dle_grad_register_ctc. Both go through ctc_loss_backward, which is not differentiable:
 * ctc_loss has no second derivative (PyTorch has none either), so a recorded backward pass
 * (create_graph) is refused with an error rather than giving a gradient that silently lacks its
 * own gradient. log_alpha is not differentiable (a gradient reaching it is ignored). */
#include "grad_scope.h"

static dle_status backward_call(dle_tensor **out, dle_tensor *gy, dle_tensor *const *ins,
                                dle_tensor *nll, dle_tensor *alpha, const dle_attrs *a) {
  return dle_ctc_loss_backward(out, gy, ins[0], ins[1], ins[2], ins[3], nll, alpha, a->ints[0],
                               a->ints[1] != 0, a->index_base);
}

static dle_status vjp_ctc(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  if (dle_grad_enabled())
    return dle_error("ctc_loss: double backward (create_graph) is not supported");
  dle_tensor *ins[4];
  for (int i = 0; i < 4; i++) ins[i] = dle_node_input(n, i);
  return backward_call(&gin[0], gout[0], ins, dle_node_output(n, 0), dle_node_output(n, 1),
                       dle_node_attrs(n));
}

/* d nll_n = sum over t, c of (d nll_n / d lp(t, n, c)) t(t, n, c): the backward at gy = 1 */
DLE_JVP_RULE(jvp_ctc) {
  if (!tin[0]) return DLE_OK;
  scope s = {.n = 0};
  dle_tensor *ones = NULL, *g = NULL, *r = NULL;
  ones = keep(
      &s, dle_full_on(&ones, 1, outs[0]->sizes, 1.0, outs[0]->dtype, dle_tensor_device(outs[0])),
      &ones);
  if (ok(&s)) g = keep(&s, backward_call(&g, ones, ins, outs[0], outs[1], a), &g);
  dle_tensor *gt = bin(&s, DLE_OP_MUL, g, tin[0]);
  if (ok(&s)) {
    int dims[2] = {0, 2};
    r = keep(&s, dle_reduce(DLE_OP_SUM, &r, gt, 2, dims, false, 0), &r);
  }
  tout[0] = give(&s, r);
  return scope_end(&s, tout, 2);
}

void dle_grad_register_ctc(dle_grad_rule *r) {
  r[DLE_OP_CTC_LOSS] = (dle_grad_rule){vjp_ctc, jvp_ctc, DLE_SAVE_ALL, DLE_SAVE_ALL};
}
