/* tape.c — recording the backward graph: grad mode, the rule table (filled by the families of
 * engine/ops/families.def), nodes and what they save of their inputs and outputs, leaves, and the
 * helpers rules share. The per-op rules are in engine/ops/<family>_grad.c. */
#include "node.h"

#include <stdlib.h>

/* ---------------------------------------------------------------- modes */

static _Thread_local DLE_HOT_TLS bool grad_disabled; /* default on */

bool dle_grad_enabled(void) { return !grad_disabled; }

bool dle_set_grad_enabled(bool on) {
  bool was = !grad_disabled;
  grad_disabled = !on;
  return was;
}

/* ---------------------------------------------------------------- rule table */

static dle_grad_rule rules[DLE_NUM_OPS];

const dle_grad_rule *dle_grad_rule_of(dle_op op) {
  static bool ready;
  if (!ready) {
#define DLE_FAMILY(name, grad, cpu, cuda, lua) grad(dle_grad_register_##name(rules);)
#include "../ops/families.def"
    ready = true;
  }
  return &rules[op];
}

void dle_op_grad_rules(dle_op op, bool *has_vjp, bool *has_jvp) {
  const dle_grad_rule *r = (unsigned)op < DLE_NUM_OPS ? dle_grad_rule_of(op) : NULL;
  *has_vjp = r && r->vjp;
  *has_jvp = r && r->jvp;
}

/* ---------------------------------------------------------------- nodes */

/* A training step records and frees hundreds of nodes; calloc/free for each was a tenth of a small
 * op's cost. Nodes with at most POOL_NIN inputs (nearly all) are one block, node then inputs,
 * recycled through a per-thread free list (as tensor headers are, tensor.c); larger ones are two
 * plain allocations. */
#define POOL_NIN 3
typedef union pooled_node {
  union pooled_node *next;
  struct {
    dle_node node;
    node_input in[POOL_NIN];
  } block;
} pooled_node;
static _Thread_local DLE_HOT_TLS pooled_node *node_pool;

static dle_node *node_alloc(int nin) {
  if (!DLE_RECYCLE || nin > POOL_NIN) {
    dle_node *n = calloc(1, sizeof *n);
    if (n && !(n->in = calloc((size_t)nin, sizeof *n->in))) {
      free(n);
      n = NULL;
    }
    return n;
  }
  pooled_node *p = node_pool;
  if (p) {
    node_pool = p->next; /* clear only what this node uses */
    memset(&p->block.node, 0, sizeof p->block.node);
    memset(p->block.in, 0, sizeof p->block.in[0] * (size_t)nin);
  } else if (!(p = calloc(1, sizeof *p))) {
    return NULL;
  }
  p->block.node.in = p->block.in;
  p->block.node.pooled = true;
  return &p->block.node;
}

static void node_free(dle_node *n) {
  if (!n->pooled) {
    free(n->in);
    free(n);
    return;
  }
  pooled_node *p = (pooled_node *)n; /* the node is the first member of its block */
  p->next = node_pool;
  node_pool = p;
}

void dle_node_retain(dle_node *n) {
  if (n) n->refcount++;
}

void dle_node_free_saved(dle_node *n) {
  for (int i = 0; i < n->nin; i++) DLE_RELEASE(n->in[i].value);
  for (int k = 0; k < n->nout; k++) DLE_RELEASE(n->out[k].value);
  if (n->custom_free && n->custom_ctx) n->custom_free(n->custom_ctx);
  n->custom_ctx = NULL;
  n->freed = true;
}

/* Long chains of nodes would recurse once per node when the last reference goes; a worklist
 * keeps the stack flat. */
void dle_node_release(dle_node *n) {
  dle_node *stack_small[64], **stack = stack_small;
  int top = 0, cap = 64;
  if (!n || --n->refcount > 0) return;
  stack[top++] = n;
  while (top > 0) {
    dle_node *x = stack[--top];
    dle_node_free_saved(x);
    for (int i = 0; i < x->nin; i++) {
      dle_tensor_release(x->in[i].leaf);
      dle_node *p = x->in[i].fn;
      if (p && --p->refcount == 0) {
        if (top == cap) {
          dle_node **bigger = malloc(sizeof *bigger * (size_t)cap * 2);
          if (!bigger) {
            dle_node_free_saved(p);
            continue;
          } /* out of memory: leak rather than crash */
          memcpy(bigger, stack, sizeof *stack * (size_t)top);
          if (stack != stack_small) free(stack);
          stack = bigger, cap *= 2;
        }
        stack[top++] = p;
      }
    }
    node_free(x);
  }
  if (stack != stack_small) free(stack);
}

const char *dle_node_name(const dle_node *n) {
  return n->op == DLE_NUM_OPS ? n->name : dle_op_get_info(n->op)->name;
}

dle_op dle_node_op(const dle_node *n) { return n->op; }
const dle_attrs *dle_node_attrs(const dle_node *n) { return &n->attrs; }
int dle_node_num_inputs(const dle_node *n) { return n->nin; }
bool dle_node_freed(const dle_node *n) { return n->freed; }
bool dle_node_needs_grad(const dle_node *n, int i) { return n->in[i].requires_grad; }
int dle_node_input_ndim(const dle_node *n, int i) { return n->in[i].ndim; }
const int64_t *dle_node_input_sizes(const dle_node *n, int i) { return n->in[i].sizes; }
dle_dtype dle_node_input_dtype(const dle_node *n, int i) { return n->in[i].dtype; }
dle_tensor *dle_node_input(const dle_node *n, int i) { return n->in[i].value; }
dle_tensor *dle_node_output(const dle_node *n, int k) { return n->out[k].value; }

dle_status dle_node_zeros_input(dle_tensor **out, const dle_node *n, int i) {
  *out = NULL;
  return dle_full_on(out, n->in[i].ndim, n->in[i].sizes, 0, n->in[i].dtype, n->in[i].device);
}

static bool requires_grad(const dle_tensor *t) {
  return t->requires_grad && dle_dtype_is_differentiable(t->dtype);
}

bool dle_tensor_reaches(const dle_tensor *from, const dle_tensor *to) {
  if (!from) return false;
  return from == to || dle_tensor_reaches(from->grad, to) || dle_tensor_reaches(from->tangent, to);
}

bool dle_autograd_wants(dle_op op, dle_tensor *const *ins, int nin) {
  if (grad_disabled || !(dle_op_get_info(op)->flags & DLE_DIFF)) return false;
  for (int i = 0; i < nin; i++)
    if (requires_grad(ins[i])) return true;
  return false;
}

/* A new header over t's storage and geometry (no history). */
dle_status dle_node_alias(dle_tensor **out, dle_tensor *t) {
  *out = NULL;
  return dle_tensor_as_strided(out, t, t->ndim, t->sizes, t->strides, t->offset);
}

/* The value a rule will read for input t: a leaf that requires grad is kept itself (its gradient
 * must reach it when the rule's own ops are differentiated); anything else as an alias holding its
 * history, so an in-place op that later rewrites t's history cannot make a cycle through this node
 * (a:mul_(b) with b requiring grad gives a, which did not, this node as its history: kept itself,
 * a would hold the node holding a, and neither would ever be freed). */
static dle_status save_input_value(dle_tensor **out, dle_tensor *t) {
  if (!t->grad_fn && t->requires_grad) {
    dle_tensor_retain(t);
    *out = t;
    return DLE_OK;
  }
  DLE_TRY(dle_node_alias(out, t));
  (*out)->requires_grad = t->requires_grad;
  (*out)->grad_fn = t->grad_fn;
  (*out)->output_nr = t->output_nr;
  dle_node_retain(t->grad_fn);
  (*out)->tangent = t->tangent; /* forward over reverse: the rule's ops see the tangent */
  dle_tensor_retain(t->tangent);
  return DLE_OK;
}

static dle_node *node_new(dle_op op, const dle_attrs *a, int nin, int nout) {
  dle_node *n = node_alloc(nin);
  if (!n) return NULL;
  n->refcount = 1;
  n->op = op;
  if (a) n->attrs = *a;
  n->attrs.generator = NULL; /* the generator may not outlive the call */
  n->nin = nin, n->nout = nout;
  return n;
}

/* Fills the edges and metadata of the inputs (values per mask) and of the outputs. */
static dle_status node_fill(dle_node *n, dle_tensor *const *ins, const uint32_t *versions,
                            unsigned save_inputs, dle_tensor **outs, unsigned save_outputs) {
  for (int i = 0; i < n->nin; i++) {
    node_input *e = &n->in[i];
    dle_tensor *t = ins[i];
    e->requires_grad = requires_grad(t);
    e->ndim = t->ndim;
    memcpy(e->sizes, t->sizes, sizeof e->sizes);
    e->dtype = t->dtype;
    e->device = dle_tensor_device(t);
    if (e->requires_grad) {
      if (t->grad_fn) {
        e->fn = t->grad_fn, e->output_nr = t->output_nr;
        dle_node_retain(e->fn);
      } else {
        e->leaf = t;
        dle_tensor_retain(t);
      }
    }
    if (save_inputs & (1u << (i < 31 ? i : 31))) {
      DLE_TRY(save_input_value(&e->value, t));
      e->version = versions ? versions[i] : t->storage->version;
    }
  }
  for (int k = 0; k < n->nout; k++) {
    node_output *o = &n->out[k];
    dle_tensor *t = outs[k];
    o->ndim = t->ndim;
    memcpy(o->sizes, t->sizes, sizeof o->sizes);
    o->dtype = t->dtype;
    if (save_outputs == 1 || (save_outputs & (1u << (k < 31 ? k : 31)))) { /* 1: true, all */
      DLE_TRY(dle_node_alias(&o->value, t));
      o->version = t->storage->version;
    }
  }
  return DLE_OK;
}

/* Makes n the history of the outputs (the float ones require grad from now on). */
static void attach(dle_node *n, dle_tensor **outs, int nout) {
  for (int k = 0; k < nout; k++) {
    dle_tensor *t = outs[k];
    if (!dle_dtype_is_differentiable(t->dtype)) continue;
    dle_node_retain(n);
    dle_node_release(t->grad_fn); /* an in-place op rewrites the history of its output */
    t->grad_fn = n;
    t->output_nr = k;
    t->requires_grad = true;
  }
}

dle_status dle_autograd_record(dle_op op, const dle_attrs *a, dle_tensor **outs, int nout,
                               dle_tensor *const *ins, int nin, const uint32_t *versions) {
  const dle_grad_rule *r = dle_grad_rule_of(op);
  if (!r->vjp)
    return dle_error("%s: no gradient rule (cannot record it for autograd)",
                     dle_op_get_info(op)->name);
  dle_node *n = node_new(op, a, nin, nout);
  if (!n)
    return dle_error("%s: out of memory recording the autograd graph", dle_op_get_info(op)->name);
  if (node_fill(n, ins, versions, r->save_inputs, outs, r->save_outputs) != DLE_OK) {
    dle_node_release(n);
    return DLE_ERR;
  }
  attach(n, outs, nout);
  /* Writing through one view would change what other views of the storage hold without
   * rewriting their histories: a silently wrong gradient. Such writes are refused instead. */
  if (dle_op_get_info(op)->kind == DLE_KIND_VIEW) outs[0]->storage->grad_views = true;
  dle_node_release(n); /* the outputs hold it now */
  return DLE_OK;
}

dle_status dle_autograd_record_custom(const char *name, dle_tensor **outs, int nout,
                                      dle_tensor *const *ins, int nin, dle_custom_vjp vjp,
                                      void *ctx, void (*free_ctx)(void *ctx)) {
  dle_trace_note_unsafe("%s: a custom autograd function's backward is not part of the graph", name);
  if (nout < 1 || nout > 2) {
    if (free_ctx) free_ctx(ctx);
    return dle_error("%s: a custom op has 1 or 2 outputs, got %d", name, nout);
  }
  dle_node *n = node_new(DLE_NUM_OPS, NULL, nin, nout);
  if (!n) {
    if (free_ctx) free_ctx(ctx);
    return dle_error("%s: out of memory recording the autograd graph", name);
  }
  snprintf(n->name, sizeof n->name, "%s", name);
  n->custom_vjp = vjp, n->custom_ctx = ctx, n->custom_free = free_ctx;
  if (node_fill(n, ins, NULL, 0, outs, false) != DLE_OK) {
    dle_node_release(n);
    return DLE_ERR;
  }
  attach(n, outs, nout);
  dle_node_release(n);
  return DLE_OK;
}

/* ---------------------------------------------------------------- tensors */

dle_status dle_set_requires_grad(dle_tensor *t, bool on) {
  if (on && !dle_dtype_is_differentiable(t->dtype))
    return dle_error("requires_grad: only float and complex tensors can require grad, got %s",
                     dle_dtype_name(t->dtype));
  if (!on && t->grad_fn)
    return dle_error(
        "requires_grad: a tensor computed from tensors that require grad (not a leaf) "
        "cannot stop requiring it; use detach()");
  t->requires_grad = on;
  return DLE_OK;
}

dle_status dle_detach(dle_tensor **out, dle_tensor *t) {
  DLE_TRY(dle_node_alias(out, t));
  if (dle_tracer_on) dle_trace_note_detach(*out, t);
  return DLE_OK;
}

/* ---------------------------------------------------------------- helpers for rules */

dle_status dle_sum_to(dle_tensor **out, dle_tensor *g, int ndim, const int64_t *sizes) {
  if (dle_shape_equal(g->ndim, g->sizes, ndim, sizes)) {
    dle_tensor_retain(g);
    *out = g;
    return DLE_OK;
  }
  int dims[DLE_MAX_DIMS], nd = 0, lead = g->ndim - ndim;
  for (int d = 0; d < g->ndim; d++)
    if (d < lead || (sizes[d - lead] == 1 && g->sizes[d] != 1)) dims[nd++] = d;
  dle_tensor *s = NULL;
  DLE_TRY(dle_reduce(DLE_OP_SUM, &s, g, nd, dims, true, 0));
  *out = NULL;
  dle_status st = dle_reshape(out, s, ndim, sizes);
  dle_tensor_release(s);
  return st;
}

dle_status dle_grad_to_input(const dle_node *n, int i, dle_tensor *g, dle_tensor **gin) {
  return dle_sum_to(&gin[i], g, dle_node_input_ndim(n, i), dle_node_input_sizes(n, i));
}

dle_status dle_jvp_bilinear(dle_op op, const dle_attrs *attrs, dle_tensor *a, dle_tensor *b,
                            dle_tensor *ta, dle_tensor *tb, dle_tensor **out) {
  dle_tensor *t0 = NULL, *t1 = NULL;
  if (ta) DLE_TRY(dle_op_call(op, &t0, (dle_tensor *[]){ta, b}, 2, attrs));
  if (tb && dle_op_call(op, &t1, (dle_tensor *[]){a, tb}, 2, attrs) != DLE_OK) {
    dle_tensor_release(t0);
    return DLE_ERR;
  }
  if (!t0 || !t1) {
    *out = t0 ? t0 : t1;
    return DLE_OK;
  }
  dle_status st = dle_binary(DLE_OP_ADD, out, t0, t1);
  dle_tensor_release(t0);
  dle_tensor_release(t1);
  return st;
}
