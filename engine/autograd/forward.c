/* forward.c — forward mode: tangents carried beside values (dle_set_tangent), each op's forward
 * rule applied after it runs; and .grad assignment, which shares the cycle-safe linking. */
#include "node.h"

#include <stdlib.h>

static _Thread_local DLE_HOT_TLS bool forward_ad_off; /* set while a forward rule runs */

/* ---------------------------------------------------------------- forward mode */

/* *link (t's .grad or .tangent) = v, retained; a v that holds t only through its history is
 * kept as its values alone (detached), or t would hold itself. The caller has refused a v that
 * holds t through .grad/.tangent links (detaching would not cut those). */
static dle_status set_link(dle_tensor **link, dle_tensor *t, dle_tensor *v) {
  dle_tensor *kept = NULL;
  if (v && dle_tensor_holds(v, t))
    DLE_TRY(dle_detach(&kept, v));
  else
    dle_tensor_retain(kept = v);
  dle_tensor_release(*link);
  *link = kept;
  return DLE_OK;
}

dle_status dle_set_tangent(dle_tensor *t, dle_tensor *tangent) {
  dle_trace_note_unsafe("jvp: forward-mode tangents are not part of the graph");
  if (tangent) {
    if (!dle_shape_equal(t->ndim, t->sizes, tangent->ndim, tangent->sizes))
      return dle_error("jvp: tangent of shape %s for a tensor of shape %s", SHAPE(tangent),
                       dle_tensor_shape_str((dle_shape_buf){{0}}.s, 128, t));
    if (!dle_dtype_is_differentiable(t->dtype))
      return dle_error("jvp: only float and complex tensors carry tangents, got %s",
                       dle_dtype_name(t->dtype));
    if (dle_tensor_reaches(tangent, t))
      return dle_error(
          "jvp: a tensor cannot be its own tangent, directly or through .grad/.tangent links "
          "(shape %s)",
          SHAPE(t));
  }
  return set_link(&t->tangent, t, tangent);
}

dle_status dle_set_grad(dle_tensor *t, dle_tensor *g) {
  dle_trace_note_unsafe("grad: a .grad assignment is not part of the graph");
  if (g) {
    if (!dle_shape_equal(t->ndim, t->sizes, g->ndim, g->sizes))
      return dle_error("grad: assigned gradient of shape %s does not match tensor shape %s",
                       SHAPE(g), dle_tensor_shape_str((dle_shape_buf){{0}}.s, 128, t));
    if (dle_tensor_reaches(g, t))
      return dle_error(
          "grad: a tensor cannot be its own gradient, directly or through .grad/.tangent links");
  }
  return set_link(&t->grad, t, g);
}

bool dle_forward_ad_set_enabled(bool on) {
  bool was = !forward_ad_off;
  forward_ad_off = !on;
  return was;
}

bool dle_forward_ad_wants(dle_tensor *const *ins, int nin) {
  if (forward_ad_off) return false;
  for (int i = 0; i < nin; i++)
    if (ins[i]->tangent) return true;
  return false;
}

dle_status dle_forward_ad_apply(dle_op op, const dle_attrs *a, dle_tensor *const *ins, int nin,
                                dle_tensor **outs, int nout) {
  const dle_op_info *info = dle_op_get_info(op);
  if (!(info->flags & DLE_DIFF)) return DLE_OK; /* integer results carry no tangent */
  const dle_grad_rule *r = dle_grad_rule_of(op);
  if (!r->jvp) return dle_error("%s: no forward-mode rule (jvp)", info->name);
  dle_tensor *tin_small[8], **tin = nin <= 8 ? tin_small : malloc(sizeof *tin * (size_t)nin);
  if (!tin) return dle_error("%s: out of memory", info->name);
  for (int i = 0; i < nin; i++) tin[i] = ins[i]->tangent;
  dle_tensor *tout[DLE_MAX_OUTS] = {NULL};
  forward_ad_off = true; /* the rule's own ops carry no tangents */
  dle_status st = r->jvp(op, a, ins, nin, tin, outs, tout);
  forward_ad_off = false;
  if (tin != tin_small) free(tin);
  for (int k = 0; k < nout && st == DLE_OK; k++) {
    if (!dle_dtype_is_differentiable(outs[k]->dtype)) continue;
    if (!tout[k])
      st = dle_full_on(&tout[k], outs[k]->ndim, outs[k]->sizes, 0, outs[k]->dtype,
                       dle_tensor_device(outs[k]));
    else if (!dle_shape_equal(tout[k]->ndim, tout[k]->sizes, outs[k]->ndim, outs[k]->sizes)) {
      dle_tensor *e = NULL; /* rules may return a tangent that broadcasts to the output */
      st = dle_expand(&e, tout[k], outs[k]->ndim, outs[k]->sizes);
      dle_tensor_release(tout[k]);
      tout[k] = e;
    }
    if (st == DLE_OK && tout[k] && tout[k]->dtype != outs[k]->dtype) {
      dle_tensor *c = NULL;
      st = dle_grad_cast(&c, tout[k], outs[k]->dtype);
      dle_tensor_release(tout[k]);
      tout[k] = c;
    }
    if (st == DLE_OK) st = dle_set_tangent(outs[k], tout[k]);
  }
  for (int k = 0; k < DLE_MAX_OUTS; k++) dle_tensor_release(tout[k]);
  return st;
}
