/* index_grad.c — reverse (vjp) and forward (jvp) rules of the index ops (engine/ops/index.c),
 * registered by dle_grad_register_index (engine/ops/families.def). */
#include "../autograd.h"
#include "../internal.h"
#include "index_scatter.h"

#include <stdlib.h>

/* ---- gradients: reverse (vjp) and forward (jvp) rules, written with dle ops ---- */

/* A new reference to t (rules hand back gradients they pass through unchanged). */
static dle_tensor *retained(dle_tensor *t) {
  if (t) dle_tensor_retain(t);
  return t;
}

/* t padded with trailing zeros up to (ndim, sizes) in every dim where it is shorter (written as
 * cats, so the result stays differentiable). */
dle_status dle_index_pad_to(dle_tensor **out, dle_tensor *t, int ndim, const int64_t *sizes) {
  dle_tensor *cur = retained(t);
  for (int d = 0; d < ndim; d++) {
    if (cur->sizes[d] >= sizes[d]) continue;
    int64_t zs[DLE_MAX_DIMS];
    memcpy(zs, cur->sizes, sizeof zs);
    zs[d] = sizes[d] - cur->sizes[d];
    dle_tensor *z = NULL, *next = NULL;
    dle_status st = dle_zeros(&z, ndim, zs, cur->dtype);
    if (st == DLE_OK) {
      dle_tensor *parts[2] = {cur, z};
      st = dle_cat(&next, parts, 2, d);
    }
    dle_tensor_release(z);
    dle_tensor_release(cur);
    if (st != DLE_OK) return st;
    cur = next;
  }
  *out = cur;
  return DLE_OK;
}

/* d cat(x1..xn) = cat(dx1..dxn): input i's gradient is g narrowed to its slice along dim
 * (inputs skipped by cat, 1-D and empty, get zeros) */
static dle_status vjp_cat(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  int nin = dle_node_num_inputs(n), ref = 0, dim;
  if (!gout[0]) return DLE_OK;
  while (ref < nin - 1 && dle_node_input_ndim(n, ref) == 1 && dle_node_input_sizes(n, ref)[0] == 0)
    ref++;
  int ndim = dle_node_input_ndim(n, ref);
  DLE_TRY(dle_wrap_dim("cat", (int)dle_node_attrs(n)->ints[0], ndim, 0, &dim));
  int64_t offset = 0;
  for (int i = 0; i < nin; i++) {
    const int64_t *sizes = dle_node_input_sizes(n, i);
    bool skipped = dle_node_input_ndim(n, i) != ndim || (ndim == 1 && sizes[0] == 0 && i != ref);
    if (skipped) {
      if (dle_node_needs_grad(n, i)) DLE_TRY(dle_node_zeros_input(&gin[i], n, i));
      continue;
    }
    if (dle_node_needs_grad(n, i)) {
      gin[i] = NULL;
      DLE_TRY(dle_narrow(&gin[i], gout[0], dim, offset, sizes[dim]));
    }
    offset += sizes[dim];
  }
  return DLE_OK;
}

DLE_JVP_RULE(jvp_cat) {
  dle_tensor **ts = calloc((size_t)nin, sizeof *ts);
  if (!ts) return dle_error("cat: out of memory for the tangents of %d inputs", nin);
  dle_status st = DLE_OK;
  for (int i = 0; i < nin && st == DLE_OK; i++)
    st = tin[i] ? (ts[i] = retained(tin[i]), DLE_OK)
                : dle_zeros(&ts[i], ins[i]->ndim, ins[i]->sizes, ins[i]->dtype);
  if (st == DLE_OK) st = dle_cat(&tout[0], ts, nin, (int)a->ints[0]);
  for (int i = 0; i < nin; i++) dle_tensor_release(ts[i]);
  free(ts);
  return st;
}

/* d pick(src, index) = pick(dsrc, index) for the picks along a dim (gather, index_select); the
 * adjoint accumulates g at the indices (scatter_add, index_add) into zeros of src's shape, so
 * repeated indices add up. Both run with the pick's own attrs (dim, index base). */
static dle_status vjp_pick(dle_node *n, dle_tensor *const *gout, dle_tensor **gin, dle_op adjoint) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  dle_tensor *z = NULL;
  DLE_TRY(dle_node_zeros_input(&z, n, 0));
  dle_tensor *ins[3] = {z, dle_node_input(n, 1), gout[0]};
  gin[0] = NULL;
  dle_status st = dle_op_call(adjoint, &gin[0], ins, 3, dle_node_attrs(n));
  dle_tensor_release(z);
  return st;
}
static dle_status vjp_gather(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  return vjp_pick(n, gout, gin, DLE_OP_SCATTER_ADD);
}
static dle_status vjp_index_select(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  return vjp_pick(n, gout, gin, DLE_OP_INDEX_ADD);
}

DLE_JVP_RULE(jvp_pick) {
  if (!tin[0]) return DLE_OK;
  dle_tensor *t[2] = {tin[0], ins[1]};
  return dle_op_call(op, &tout[0], t, 2, a);
}

/* d scatter_add(self, index, src) = dself + scatter_add(0, index, dsrc): grad_self = g,
 * grad_src = gather(g, index) (zero-padded where src is larger than index);
 * d index_add(self, index, src) = dself + index_add(0, index, dsrc): grad_self = g,
 * grad_src = index_select(g, index) */
static dle_status vjp_accumulate(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  const dle_attrs *a = dle_node_attrs(n);
  if (dle_node_needs_grad(n, 0)) gin[0] = retained(gout[0]);
  if (!dle_node_needs_grad(n, 2)) return DLE_OK;
  dle_tensor *index = dle_node_input(n, 1), *picked = NULL;
  int dim = (int)a->ints[0];
  if (dle_node_op(n) == DLE_OP_INDEX_ADD) {
    gin[2] = NULL;
    return dle_index_select(&gin[2], gout[0], dim, index, a->index_base);
  }
  DLE_TRY(dle_gather(&picked, gout[0], dim, index, a->index_base));
  dle_status st =
      dle_index_pad_to(&gin[2], picked, dle_node_input_ndim(n, 2), dle_node_input_sizes(n, 2));
  dle_tensor_release(picked);
  return st;
}

DLE_JVP_RULE(jvp_accumulate) {
  if (!tin[2]) {
    tout[0] = retained(tin[0]);
    return DLE_OK;
  }
  dle_tensor *base = retained(tin[0]);
  if (!base) DLE_TRY(dle_zeros(&base, outs[0]->ndim, outs[0]->sizes, outs[0]->dtype));
  dle_status st = dle_op_call(op, &tout[0], (dle_tensor *[]){base, ins[1], tin[2]}, 3, a);
  dle_tensor_release(base);
  return st;
}

/* d masked_fill(src, mask, v) = masked_fill(dsrc, mask, 0): g with zeros where mask, summed
 * back over the dims the mask broadcast src to */
static dle_status vjp_masked_fill(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  dle_tensor *m = NULL;
  DLE_TRY(dle_masked_fill(&m, gout[0], dle_node_input(n, 1), 0.0));
  dle_status st = dle_grad_to_input(n, 0, m, gin);
  dle_tensor_release(m);
  return st;
}

DLE_JVP_RULE(jvp_masked_fill) {
  if (!tin[0]) return DLE_OK;
  return dle_masked_fill(&tout[0], tin[0], ins[1], 0.0);
}

/* d tril(x, k) = tril(dx, k), d triu(x, k) = triu(dx, k): both are linear masks */
static dle_status vjp_triangle(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  int64_t k = dle_node_attrs(n)->ints[0];
  gin[0] = NULL;
  return dle_node_op(n) == DLE_OP_TRIL ? dle_tril(&gin[0], gout[0], k)
                                       : dle_triu(&gin[0], gout[0], k);
}

DLE_JVP_RULE(jvp_triangle) {
  if (!tin[0]) return DLE_OK;
  return op == DLE_OP_TRIL ? dle_tril(&tout[0], tin[0], a->ints[0])
                           : dle_triu(&tout[0], tin[0], a->ints[0]);
}

void dle_grad_register_index(dle_grad_rule *r) {
  r[DLE_OP_CAT] = (dle_grad_rule){vjp_cat, jvp_cat, 0, false};
  r[DLE_OP_GATHER] = (dle_grad_rule){vjp_gather, jvp_pick, DLE_SAVE(1), false};
  r[DLE_OP_SCATTER_ADD] = (dle_grad_rule){vjp_accumulate, jvp_accumulate, DLE_SAVE(1), false};
  r[DLE_OP_INDEX_SELECT] = (dle_grad_rule){vjp_index_select, jvp_pick, DLE_SAVE(1), false};
  r[DLE_OP_INDEX_ADD] = (dle_grad_rule){vjp_accumulate, jvp_accumulate, DLE_SAVE(1), false};
  r[DLE_OP_MASKED_FILL] = (dle_grad_rule){vjp_masked_fill, jvp_masked_fill, DLE_SAVE(1), false};
  r[DLE_OP_TRIL] = (dle_grad_rule){vjp_triangle, jvp_triangle, 0, false};
  r[DLE_OP_TRIU] = (dle_grad_rule){vjp_triangle, jvp_triangle, 0, false};
  dle_grad_register_index_scatter(r);
}
