/* softmax_grad.c — reverse (vjp) and forward (jvp) rules of softmax and log_softmax
 * (engine/ops/softmax.c), written with dle ops from the saved output; registered by
 * dle_grad_register_softmax (engine/ops/families.def). */
#include "../autograd.h"
#include "../internal.h"

/* sum of x along the softmax dim, kept. */
static dle_status sum_along(dle_tensor **out, dle_tensor *x, const dle_attrs *a) {
  int dim = (int)a->ints[0];
  *out = NULL;
  return dle_reduce(DLE_OP_SUM, out, x, 1, &dim, true, 0);
}

/* s = softmax(x): ds = s v - s sum(s v), for v the output gradient or the input tangent */
static dle_status softmax_apply(dle_tensor **out, dle_tensor *s, dle_tensor *v,
                                const dle_attrs *a) {
  dle_tensor *sv = NULL, *sum = NULL, *ss = NULL;
  dle_status st = dle_binary(DLE_OP_MUL, &sv, s, v);
  if (st == DLE_OK) st = sum_along(&sum, sv, a);
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, &ss, s, sum);
  *out = NULL;
  if (st == DLE_OK) st = dle_binary(DLE_OP_SUB, out, sv, ss);
  dle_release_all((dle_tensor *[]){sv, sum, ss}, 3);
  return st;
}

/* d softmax: g s - s sum(g s) (symmetric Jacobian), from the saved output */
static dle_status vjp_softmax(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  return softmax_apply(&gin[0], dle_node_output(n, 0), gout[0], dle_node_attrs(n));
}

/* d softmax: s t - s sum(s t) */
DLE_JVP_RULE(jvp_softmax) {
  if (!tin[0]) return DLE_OK;
  return softmax_apply(&tout[0], outs[0], tin[0], a);
}

/* d log_softmax (reverse): g - exp(out) sum(g) */
static dle_status vjp_log_softmax(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  dle_tensor *p = NULL, *sum = NULL, *ps = NULL;
  dle_status st = dle_unary(DLE_OP_EXP, &p, dle_node_output(n, 0));
  if (st == DLE_OK) st = sum_along(&sum, gout[0], dle_node_attrs(n));
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, &ps, p, sum);
  if (st == DLE_OK) st = dle_binary(DLE_OP_SUB, &gin[0], gout[0], ps);
  dle_release_all((dle_tensor *[]){p, sum, ps}, 3);
  return st;
}

/* d log_softmax (forward): t - sum(exp(out) t) */
DLE_JVP_RULE(jvp_log_softmax) {
  if (!tin[0]) return DLE_OK;
  dle_tensor *p = NULL, *pt = NULL, *sum = NULL;
  dle_status st = dle_unary(DLE_OP_EXP, &p, outs[0]);
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, &pt, p, tin[0]);
  if (st == DLE_OK) st = sum_along(&sum, pt, a);
  if (st == DLE_OK) st = dle_binary(DLE_OP_SUB, &tout[0], tin[0], sum);
  dle_release_all((dle_tensor *[]){p, pt, sum}, 3);
  return st;
}

void dle_grad_register_softmax(dle_grad_rule *r) {
  r[DLE_OP_SOFTMAX] = (dle_grad_rule){vjp_softmax, jvp_softmax, 0, true};
  r[DLE_OP_LOG_SOFTMAX] = (dle_grad_rule){vjp_log_softmax, jvp_log_softmax, 0, true};
}
