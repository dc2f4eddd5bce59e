/* sort_grad.c — reverse (vjp) and forward (jvp) rules of the sort family (engine/ops/sort.c),
 * registered by dle_grad_register_sort (engine/ops/families.def).
 *
 * sort, topk and kthvalue pick elements of x along a dim: their values' gradient goes back to the
 * picked positions (scatter_add into zeros; the positions along a line are distinct), and their
 * tangent is the input's tangent gathered at those positions. The indices have no gradient. */
#include "../autograd.h"
#include "../internal.h"

/* The 0-based dim the op worked along in an input of ndim dims. */
static int line_dim(const dle_attrs *a, int ndim) {
  int64_t d = a->nints > 0 ? a->ints[0] : -1;
  return (int)(d < 0 ? d + ndim : d);
}

/* kthvalue and mode (whose rules these also are: select_grad.c) drop the dim without keepdim. */
static bool drops_dim(dle_op op, const dle_attrs *a) {
  return (op == DLE_OP_KTHVALUE || op == DLE_OP_MODE) && !a->keepdim;
}

/* t with a dropped dim put back (a new reference to t otherwise). */
static dle_status with_dim(dle_tensor **out, dle_tensor *t, dle_op op, const dle_attrs *a, int d) {
  *out = NULL;
  if (drops_dim(op, a)) return dle_unsqueeze(out, t, d);
  dle_tensor_retain(t);
  *out = t;
  return DLE_OK;
}

static dle_status vjp_sort(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  const dle_attrs *a = dle_node_attrs(n);
  dle_op op = dle_node_op(n);
  int d = line_dim(a, dle_node_input_ndim(n, 0));
  dle_tensor *z = NULL, *g = NULL, *idx = NULL;
  dle_status st = dle_node_zeros_input(&z, n, 0);
  if (st == DLE_OK) st = with_dim(&g, gout[0], op, a, d);
  if (st == DLE_OK) st = with_dim(&idx, dle_node_output(n, 1), op, a, d);
  gin[0] = NULL;
  if (st == DLE_OK) st = dle_scatter_add(&gin[0], z, d, idx, g, a->index_base);
  dle_release_all((dle_tensor *[]){z, g, idx}, 3);
  return st;
}

DLE_JVP_RULE(jvp_sort) {
  if (!tin[0]) return DLE_OK;
  int d = line_dim(a, ins[0]->ndim);
  dle_tensor *idx = NULL, *t = NULL;
  DLE_TRY(with_dim(&idx, outs[1], op, a, d));
  dle_status st = dle_gather(&t, tin[0], d, idx, a->index_base);
  dle_tensor_release(idx);
  if (st != DLE_OK) return st;
  if (!drops_dim(op, a)) {
    tout[0] = t;
    return DLE_OK;
  }
  st = dle_squeeze(&tout[0], t, d);
  dle_tensor_release(t);
  return st;
}

void dle_grad_register_sort(dle_grad_rule *r) {
  r[DLE_OP_SORT] = (dle_grad_rule){vjp_sort, jvp_sort, 0, DLE_SAVE(1)};
  r[DLE_OP_TOPK] = (dle_grad_rule){vjp_sort, jvp_sort, 0, DLE_SAVE(1)};
  r[DLE_OP_KTHVALUE] = (dle_grad_rule){vjp_sort, jvp_sort, 0, DLE_SAVE(1)};
}
