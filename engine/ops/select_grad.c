/* select_grad.c — reverse (vjp) and forward (jvp) rules of the select family (engine/ops/select.c),
 * registered by dle_grad_register_select (engine/ops/families.def). nonzero, unique, bincount and
 * searchsorted give integers and have none.
 *
 * masked_select picks elements: its gradient is g scattered back to the masked places of zeros
 * (masked_scatter), summed over the dims the mask broadcast x to; its tangent is the tangent picked
 * the same way. masked_scatter takes self's elements where the mask is false and source's first
 * ones where it is true: self's gradient is g with zeros where the mask is true, source's is
 * g's masked elements in order, followed by zeros for the source elements not used. mode picks one
 * element per line, as kthvalue: its rules are kthvalue's (sort_grad.c). */
#include "../autograd.h"
#include "../internal.h"

static dle_status vjp_masked_select(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  dle_tensor *mask = dle_node_input(n, 1), *z = NULL, *g = NULL;
  int nd;
  int64_t sizes[DLE_MAX_DIMS];
  DLE_TRY(dle_broadcast_shapes("masked_select", dle_node_input_ndim(n, 0),
                               dle_node_input_sizes(n, 0), mask->ndim, mask->sizes, &nd, sizes));
  dle_status st = dle_zeros(&z, nd, sizes, gout[0]->dtype);
  if (st == DLE_OK) st = dle_masked_scatter(&g, z, mask, gout[0]);
  if (st == DLE_OK) st = dle_grad_to_input(n, 0, g, gin);
  dle_tensor_release(z);
  dle_tensor_release(g);
  return st;
}

DLE_JVP_RULE(jvp_masked_select) {
  if (!tin[0]) return DLE_OK;
  return dle_masked_select(&tout[0], tin[0], ins[1]);
}

/* g's masked elements as source's gradient: padded with zeros to source's size, in its shape. */
static dle_status source_grad(dle_tensor **out, dle_tensor *g, dle_tensor *mask, int ndim,
                              const int64_t *sizes) {
  dle_tensor *picked = NULL, *pad = NULL, *flat = NULL;
  DLE_TRY(dle_masked_select(&picked, g, mask));
  int64_t total = dle_shape_numel(ndim, sizes), rest = total - picked->sizes[0];
  dle_status st = dle_zeros(&pad, 1, &rest, g->dtype);
  if (st == DLE_OK) st = dle_cat(&flat, (dle_tensor *[]){picked, pad}, 2, 0);
  if (st == DLE_OK) st = dle_reshape(out, flat, ndim, sizes);
  dle_tensor_release(picked);
  dle_tensor_release(pad);
  dle_tensor_release(flat);
  return st;
}

static dle_status vjp_masked_scatter(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  dle_tensor *mask = dle_node_input(n, 1);
  if (dle_node_needs_grad(n, 0)) {
    gin[0] = NULL;
    DLE_TRY(dle_masked_fill(&gin[0], gout[0], mask, 0.0));
  }
  if (!dle_node_needs_grad(n, 2)) return DLE_OK;
  gin[2] = NULL;
  return source_grad(&gin[2], gout[0], mask, dle_node_input_ndim(n, 2), dle_node_input_sizes(n, 2));
}

DLE_JVP_RULE(jvp_masked_scatter) {
  if (!tin[0] && !tin[2]) return DLE_OK;
  dle_tensor *ts = tin[0], *tr = tin[2], *zs = NULL, *zr = NULL;
  dle_status st = DLE_OK;
  if (!ts) st = dle_zeros(&zs, outs[0]->ndim, outs[0]->sizes, outs[0]->dtype), ts = zs;
  if (st == DLE_OK && !tr) st = dle_zeros(&zr, ins[2]->ndim, ins[2]->sizes, ts->dtype), tr = zr;
  if (st == DLE_OK) st = dle_masked_scatter(&tout[0], ts, ins[1], tr);
  dle_tensor_release(zs);
  dle_tensor_release(zr);
  return st;
}

void dle_grad_register_select(dle_grad_rule *r) {
  r[DLE_OP_MASKED_SELECT] = (dle_grad_rule){vjp_masked_select, jvp_masked_select, DLE_SAVE(1), 0};
  r[DLE_OP_MASKED_SCATTER] =
      (dle_grad_rule){vjp_masked_scatter, jvp_masked_scatter, DLE_SAVE(1), 0};
  r[DLE_OP_MODE] = r[DLE_OP_KTHVALUE]; /* registered before: the sort family comes first */
}
