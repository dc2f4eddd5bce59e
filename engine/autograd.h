/* autograd.h — what gradient rules see of the autograd graph (engine-internal).
 *
 * Every differentiable op has a reverse rule (vjp: output gradients -> input gradients) and a
 * forward rule (jvp: input tangents -> output tangents), both written with dle ops, so a
 * gradient computed with create_graph is itself a graph and can be differentiated again.
 * Rules live in engine/ops/<family>_grad.c, beside their family's shape rules in <family>.c, and
 * are registered into one table by dle_grad_register_<family>() (engine/ops/families.def). */
#ifndef DLE_AUTOGRAD_H
#define DLE_AUTOGRAD_H

#include "internal.h"

typedef struct dle_node dle_node;

/* Reverse rule: gout[k] is the gradient of output k (NULL: none flowed there, i.e. zeros).
 * Writes gin[i] (a new reference, or NULL for zero) for each input i; the engine casts each
 * gradient to its input's dtype and ignores those of inputs that do not require grad
 * (dle_node_needs_grad tells, so rules can skip the work). */
typedef dle_status (*dle_vjp_fn)(dle_node *n, dle_tensor *const *gout, dle_tensor **gin);

/* Forward rule: tin[i] is the tangent of input i (NULL: zero). Writes tout[k] (new reference or
 * NULL for zero) for each output k, given the inputs and the outputs already computed. */
typedef dle_status (*dle_jvp_fn)(dle_op op, const dle_attrs *a, dle_tensor *const *ins, int nin,
                                 dle_tensor *const *tin, dle_tensor *const *outs,
                                 dle_tensor **tout);
/* Defines a forward rule: `DLE_JVP_RULE(jvp_foo) { ... }` has exactly dle_jvp_fn's parameters,
 * named as above. A rule may leave any of them unused (the build passes -Wno-unused-parameter). */
#define DLE_JVP_RULE(name)                                                               \
  static dle_status name(dle_op op, const dle_attrs *a, dle_tensor *const *ins, int nin, \
                         dle_tensor *const *tin, dle_tensor *const *outs, dle_tensor **tout)

typedef struct {
  dle_vjp_fn vjp;
  dle_jvp_fn jvp;
  unsigned save_inputs;  /* bit i: the reverse rule reads input i's value */
  unsigned save_outputs; /* the reverse rule reads the outputs' values: true (1) every output,
                          * else bit k (DLE_SAVE(k)) output k. An output not saved is neither kept
                          * alive by the graph nor checked for later in-place writes. */
} dle_grad_rule;

#define DLE_SAVE(i)  (1u << (i))
#define DLE_SAVE_ALL 0xffffffffu

/* ---- what a reverse rule may ask its node ---- */
dle_op dle_node_op(const dle_node *n);
const dle_attrs *dle_node_attrs(const dle_node *n);
int dle_node_num_inputs(const dle_node *n);
/* Does input i need a gradient? */
bool dle_node_needs_grad(const dle_node *n, int i);
/* Shape and dtype input i had. */
int dle_node_input_ndim(const dle_node *n, int i);
const int64_t *dle_node_input_sizes(const dle_node *n, int i);
dle_dtype dle_node_input_dtype(const dle_node *n, int i);
/* The saved value of input i / output k (borrowed: valid during the rule). Only available when
 * the rule's save_inputs / save_outputs asked for it. */
dle_tensor *dle_node_input(const dle_node *n, int i);
dle_tensor *dle_node_output(const dle_node *n, int k);
/* Whether a backward pass without retain_graph went through n (another one through it fails). */
bool dle_node_freed(const dle_node *n);

/* ---- helpers for rules ---- */
/* g summed over broadcast dims so it has the given shape (undoes broadcasting). */
dle_status dle_sum_to(dle_tensor **out, dle_tensor *g, int ndim, const int64_t *sizes);
/* gin[i] = g summed to the shape of n's input i (dle_sum_to): the gradient of a broadcast input. */
dle_status dle_grad_to_input(const dle_node *n, int i, dle_tensor *g, dle_tensor **gin);
/* Product rule of a bilinear op (mul, matmul, conv...): *out = op(ta, b) + op(a, tb), either
 * tangent may be NULL (zero); *out stays NULL when both are. */
dle_status dle_jvp_bilinear(dle_op op, const dle_attrs *attrs, dle_tensor *a, dle_tensor *b,
                            dle_tensor *ta, dle_tensor *tb, dle_tensor **out);
/* g placed at [start, start + g->sizes[dim]) along dim of a zero tensor of shape (ndim, sizes), by
 * cat with zeros (differentiable in g; no in-place write): narrow's gradient, an FFT's padding. */
dle_status dle_zero_pad_along(dle_tensor **out, dle_tensor *g, int dim, int64_t start, int ndim,
                              const int64_t *sizes);
/* A zero tensor with input i's shape and dtype. */
dle_status dle_node_zeros_input(dle_tensor **out, const dle_node *n, int i);

/* Releases the n temporaries of a rule (NULL entries are skipped). */
static inline void dle_release_all(dle_tensor **ts, int n) {
  for (int i = 0; i < n; i++) dle_tensor_release(ts[i]);
}

/* The rule table, filled once by the families. */
const dle_grad_rule *dle_grad_rule_of(dle_op op);
/* Each family with rules (ops/families.def) registers them: dle_grad_register_<family>. */
#define DLE_FAMILY(name, grad, cpu, cuda, lua) \
  grad(void dle_grad_register_##name(dle_grad_rule *rules);)
#include "ops/families.def"

/* ---- used by the front door (ops.c) ---- */
/* Should a call of op with these inputs be recorded? (grad mode on, op differentiable, some
 * float input requiring grad). */
bool dle_autograd_wants(dle_op op, dle_tensor *const *ins, int nin);
/* Is `from` the tensor `to`, or does it hold it through its .grad and .tangent links? Storing
 * such a tensor in to's .grad or .tangent would make a reference cycle, never freed. */
bool dle_tensor_reaches(const dle_tensor *from, const dle_tensor *to);
/* Does `from` hold `to` at all: through those links or through its history (the values, leaves
 * and producers its grad_fn keeps, and theirs)? A .grad or .tangent set from outside that holds
 * its tensor this way is stored detached (its values without the history): the reference cycle
 * could never be freed. Walks each node once. */
bool dle_tensor_holds(const dle_tensor *from, const dle_tensor *to);
/* Records a node for outputs computed from ins; versions are the inputs' storage versions from
 * before the op ran (an in-place op has already bumped them). */
dle_status dle_autograd_record(dle_op op, const dle_attrs *a, dle_tensor **outs, int nout,
                               dle_tensor *const *ins, int nin, const uint32_t *versions);
/* Turns tangent propagation off inside an op's own forward computation; returns the old mode. */
bool dle_forward_ad_set_enabled(bool on);
/* Some input carries a forward-mode tangent. */
bool dle_forward_ad_wants(dle_tensor *const *ins, int nin);
/* Computes and attaches the output tangents with the op's forward rule. */
dle_status dle_forward_ad_apply(dle_op op, const dle_attrs *a, dle_tensor *const *ins, int nin,
                                dle_tensor **outs, int nout);

#endif
