/* flops.c — the FLOP count of every op, for dle.profile and dle.flops (profile.h): each op's rule
 * comes from its kind's family (dle_flops_<front> beside the front door, families.def) and is
 * evaluated on the shapes of the call's inputs and outputs. Here: the conventions every rule
 * follows, the shared rules, and the dispatch.
 *
 * Conventions (those of fvcore/thop for products, plus counts for everything else):
 * - a product counts 2*m*n*k (a multiply and an add per term): matmul/mm/bmm 2*m*n*k per batch,
 *   plus m*n for the added term of addmm/linear; conv2d 2*N*Hout*Wout*Cout*(Cin/groups)*kh*kw,
 *   plus N*Cout*Hout*Wout with a bias; its two gradient ops count the product they compute,
 *   which is the forward's (without bias);
 * - elementwise ops count 1 per output element, whatever the function (add and exp alike), and
 *   comparisons too; reductions count 1 per input element (var/std and logsumexp too);
 * - row-wise ops count a constant per element of their input, the arithmetic of one pass of a
 *   straightforward implementation (softmax: max, subtract, exp, sum, divide = 5), named PER_* in
 *   their family's file;
 * - sdpa counts its two products, 2*L*S*E (q k^T) + 2*L*S*Ev (p v) per batch and head, i.e.
 *   4*B*H*T*T*E when Ev = E; the scaling and softmax (O(1/E) of it) are not counted, and a causal
 *   mask does not reduce it (the skipped half is counted, as in PyTorch's FLOP counter); its
 *   backward counts its four products (twice the forward);
 * - creation, views, copies, casts, and pure data movement (cat, gather, index_select, masked_fill,
 *   tril/triu, one_hot, embedding) count 0: their cost is in bytes, which the profiler reports.
 * The fused optimizer steps are counted in optim.c (per parameter element). */
#include "../internal.h"

int64_t dle_flops_numel(const dle_tensor *t) { return t ? dle_tensor_numel(t) : 0; }
int64_t dle_flops_last_dim(const dle_tensor *t) { return t->ndim ? t->sizes[t->ndim - 1] : 1; }

static int64_t per_out(const dle_flops_call *c, int per) {
  return per * dle_flops_numel(c->outs[0]);
}
static int64_t per_in(const dle_flops_call *c, int per) {
  return c->nin ? per * dle_flops_numel(c->ins[0]) : 0;
}

dle_flops_rule dle_flops_none(void) { return (dle_flops_rule){"none", NULL, 0}; }
dle_flops_rule dle_flops_per_out(int per) {
  return (dle_flops_rule){"per output element", per_out, per};
}
dle_flops_rule dle_flops_per_in(int per) {
  return (dle_flops_rule){"per input element", per_in, per};
}

static dle_flops_rule rule_of(dle_op op) {
  typedef dle_flops_rule (*rule_fn)(dle_op);
  static const rule_fn of_kind[DLE_NUM_KINDS] = {
#define DLE_KIND(ID, name, front) [DLE_KIND_##ID] = dle_flops_##front,
#include "families.def"
  };
  return of_kind[dle_op_table[op].kind](op);
}

int64_t dle_op_flops(dle_op op, dle_tensor *const *outs, int nout, dle_tensor *const *ins, int nin,
                     const dle_attrs *a) {
  if ((unsigned)op >= DLE_NUM_OPS || nout < 1 || !outs[0]) return 0;
  dle_flops_rule r = rule_of(op);
  dle_flops_call c = {.outs = outs, .ins = ins, .nout = nout, .nin = nin, .a = a};
  return r.count ? r.count(&c, r.per) : 0;
}

const char *dle_op_flops_rule(dle_op op, int *per) {
  if ((unsigned)op >= DLE_NUM_OPS) return NULL;
  dle_flops_rule r = rule_of(op);
  if (per) *per = r.per;
  return r.name;
}
