/* arrange_grad.c — reverse (vjp) and forward (jvp) rules of flip, roll and pad (engine/ops/
 * arrange.c), registered by dle_grad_register_arrange (engine/ops/families.def). All three are
 * linear, so the forward rule is the op on the tangent (pad's fill value has tangent 0); written
 * with dle ops, so they differentiate again. */
#include "../autograd.h"
#include "../internal.h"

#include "../kernel/arrange_geom.h"

/* The op with attrs a on t (pad's value 0). */
static dle_status redo(dle_op op, dle_tensor **out, dle_tensor *t, const dle_attrs *a) {
  dle_attrs b = *a;
  b.f[0] = 0;
  *out = NULL;
  return dle_op_call(op, out, &t, 1, &b);
}

DLE_JVP_RULE(jvp_arrange) {
  if (!tin[0]) return DLE_OK;
  return redo(op, &tout[0], tin[0], a);
}

/* flip undoes itself; roll by the opposite shifts */
static dle_status vjp_flip_roll(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  dle_attrs a = *dle_node_attrs(n);
  if (dle_node_op(n) == DLE_OP_ROLL) {
    const int64_t *sizes = dle_node_input_sizes(n, 0);
    for (int d = 0; d < a.nints; d++) a.ints[d] = a.ints[d] ? sizes[d] - a.ints[d] : 0;
  }
  return redo(dle_node_op(n), &gin[0], gout[0], &a);
}

/* t padded with zeros along dim d only (lo, hi >= 0; d among the last DLE_PAD_MAX_DIMS) */
static dle_status zero_pad_dim(dle_tensor **out, dle_tensor *t, int d, int64_t lo, int64_t hi) {
  int64_t pads[2 * DLE_PAD_MAX_DIMS] = {0};
  int k = t->ndim - 1 - d;
  pads[2 * k] = lo, pads[2 * k + 1] = hi;
  *out = NULL;
  return dle_pad(out, t, 2 * k + 2, pads, DLE_PAD_CONSTANT, 0);
}

/* *acc += part placed at [lo, size - hi) of dim d (part released) */
static dle_status add_placed(dle_tensor **acc, dle_tensor *part, int d, int64_t lo, int64_t hi) {
  dle_tensor *p = NULL, *s = NULL;
  dle_status st = zero_pad_dim(&p, part, d, lo, hi);
  if (st == DLE_OK) st = dle_binary(DLE_OP_ADD, &s, *acc, p);
  dle_tensor_release(part);
  dle_tensor_release(p);
  if (st == DLE_OK) dle_tensor_release(*acc), *acc = s;
  return st;
}

/* The gradient of reflect, replicate or circular padding along one dim d (input size n, pads lo
 * and hi): the middle of g, plus each border's part added where it was read from:
 *   reflect    the border flipped, at [1, lo] and [n-1-hi, n-2];
 *   replicate  the border's sum, at 0 and n-1;
 *   circular   the left border at [n-lo, n), the right one at [0, hi). */
static dle_status unpad_dim(dle_tensor **out, dle_tensor *g, int mode, int d, int64_t n, int64_t lo,
                            int64_t hi) {
  *out = NULL;
  dle_tensor *acc = NULL;
  DLE_TRY(dle_narrow(&acc, g, d, lo, n)); /* a view of g until the first add */
  dle_status st = DLE_OK;
  int64_t border[2] = {lo, hi}, start[2] = {0, lo + n};
  for (int side = 0; side < 2 && st == DLE_OK; side++) {
    if (border[side] == 0) continue;
    int64_t b = border[side];
    dle_tensor *part = NULL, *p = NULL;
    st = dle_narrow(&part, g, d, start[side], b);
    if (st != DLE_OK) break;
    int64_t at = 0, len = b; /* where the part goes, its length along d */
    if (mode == DLE_PAD_REFLECT) {
      st = dle_flip(&p, part, 1, &d);
      at = side == 0 ? 1 : n - 1 - hi;
    } else if (mode == DLE_PAD_REPLICATE) {
      st = dle_reduce(DLE_OP_SUM, &p, part, 1, &d, true, 0);
      at = side == 0 ? 0 : n - 1, len = 1;
    } else {
      dle_tensor_retain(part);
      p = part;
      at = side == 0 ? n - lo : 0;
    }
    dle_tensor_release(part);
    if (st == DLE_OK) st = add_placed(&acc, p, d, at, n - at - len);
  }
  if (st == DLE_OK)
    *out = acc;
  else
    dle_tensor_release(acc);
  return st;
}

/* constant: pad's opposite crops (and the crops' opposite pads with zeros); the other modes one
 * padded dim at a time */
static dle_status vjp_pad(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  const dle_attrs *a = dle_node_attrs(n);
  int mode = (int)a->ints[0], npads = a->nints - 1;
  if (mode == DLE_PAD_CONSTANT) {
    int64_t neg[2 * DLE_PAD_MAX_DIMS];
    for (int k = 0; k < npads; k++) neg[k] = -a->ints[1 + k];
    gin[0] = NULL;
    return dle_pad(&gin[0], gout[0], npads, neg, DLE_PAD_CONSTANT, 0);
  }
  const int64_t *sizes = dle_node_input_sizes(n, 0);
  int ndim = dle_node_input_ndim(n, 0);
  dle_tensor *g = gout[0];
  dle_tensor_retain(g);
  dle_status st = DLE_OK;
  for (int k = 0; k < npads / 2 && st == DLE_OK; k++) {
    int64_t lo = a->ints[1 + 2 * k], hi = a->ints[2 + 2 * k];
    if (lo == 0 && hi == 0) continue;
    dle_tensor *next = NULL;
    st = unpad_dim(&next, g, mode, ndim - 1 - k, sizes[ndim - 1 - k], lo, hi);
    dle_tensor_release(g);
    g = next;
  }
  if (st == DLE_OK)
    gin[0] = g;
  else
    dle_tensor_release(g);
  return st;
}

void dle_grad_register_arrange(dle_grad_rule *r) {
  r[DLE_OP_FLIP] = (dle_grad_rule){vjp_flip_roll, jvp_arrange, 0, 0};
  r[DLE_OP_ROLL] = (dle_grad_rule){vjp_flip_roll, jvp_arrange, 0, 0};
  r[DLE_OP_PAD] = (dle_grad_rule){vjp_pad, jvp_arrange, 0, 0};
}
