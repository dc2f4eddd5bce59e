/* autograd.c — the backward graph: recording a node per op, running reverse mode (sum of partial
 * adjoints per tensor, reverse topological order by dependency counting), freeing graphs, custom
 * nodes, and forward mode (tangents carried beside values). The per-op rules are elsewhere
 * (engine/ops/<family>.c); this file only knows the protocol. */
#include "internal.h"
#include "autograd.h"

#include <stdlib.h>

/* What a node keeps of one input. The edge (producer node and output number, or the leaf itself)
 * is always kept; the value only when the op's rule reads it, so intermediates the backward pass
 * does not need are freed as soon as the forward pass drops them. */
typedef struct {
  bool requires_grad;
  dle_node *fn;         /* producer of the input (retained), NULL for a leaf */
  int output_nr;
  dle_tensor *leaf;     /* a leaf requiring grad (retained): where its gradient accumulates */
  int ndim;
  int64_t sizes[DLE_MAX_DIMS];
  dle_dtype dtype;
  dle_device device;
  dle_tensor *value;    /* saved value: the leaf itself, or an alias carrying the input's history */
  uint32_t version;     /* its storage version when saved */
} node_input;

typedef struct {
  int ndim;
  int64_t sizes[DLE_MAX_DIMS];
  dle_dtype dtype;
  dle_tensor *value;    /* saved detached alias (never points back at this node: no cycle) */
  uint32_t version;
} node_output;

struct dle_node {
  int refcount;
  dle_op op;            /* DLE_NUM_OPS for a custom node */
  dle_attrs attrs;
  int nin, nout;
  node_input *in;
  node_output out[DLE_MAX_OUTS];
  bool freed;           /* saved values released by a backward pass without retain_graph */
  bool pooled;          /* allocated from the node pool (see node_alloc) */
  /* custom nodes */
  char name[32];
  dle_custom_vjp custom_vjp;
  void *custom_ctx;
  void (*custom_free)(void *);
  /* bookkeeping of the backward pass running now */
  uint64_t run;
  int run_slot;
  uint64_t walk;        /* the last dle_tensor_holds walk that went through this node */
};

/* ---------------------------------------------------------------- modes */

static _Thread_local DLE_HOT_TLS bool grad_disabled;  /* default on */
static _Thread_local DLE_HOT_TLS bool forward_ad_off; /* set while a forward rule runs */

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
#define DLE_FAMILY(name, grad, cpu, cuda) grad(dle_grad_register_##name(rules);)
#include "ops/families.def"
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
  struct { dle_node node; node_input in[POOL_NIN]; } block;
} pooled_node;
static _Thread_local DLE_HOT_TLS pooled_node *node_pool;

static dle_node *node_alloc(int nin) {
  if (!DLE_RECYCLE || nin > POOL_NIN) {
    dle_node *n = calloc(1, sizeof *n);
    if (n && !(n->in = calloc((size_t)nin, sizeof *n->in))) { free(n); n = NULL; }
    return n;
  }
  pooled_node *p = node_pool;
  if (p) {
    node_pool = p->next;  /* clear only what this node uses */
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
  pooled_node *p = (pooled_node *)n;  /* the node is the first member of its block */
  p->next = node_pool;
  node_pool = p;
}

void dle_node_retain(dle_node *n) { if (n) n->refcount++; }

static void free_saved(dle_node *n) {
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
    free_saved(x);
    for (int i = 0; i < x->nin; i++) {
      dle_tensor_release(x->in[i].leaf);
      dle_node *p = x->in[i].fn;
      if (p && --p->refcount == 0) {
        if (top == cap) {
          dle_node **bigger = malloc(sizeof *bigger * (size_t)cap * 2);
          if (!bigger) { free_saved(p); continue; } /* out of memory: leak rather than crash */
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
  return t->requires_grad && dle_dtype_is_float(t->dtype);
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
static dle_status alias(dle_tensor **out, dle_tensor *t) {
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
  DLE_TRY(alias(out, t));
  (*out)->requires_grad = t->requires_grad;
  (*out)->grad_fn = t->grad_fn;
  (*out)->output_nr = t->output_nr;
  dle_node_retain(t->grad_fn);
  (*out)->tangent = t->tangent;  /* forward over reverse: the rule's ops see the tangent */
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
      DLE_TRY(alias(&o->value, t));
      o->version = t->storage->version;
    }
  }
  return DLE_OK;
}

/* Makes n the history of the outputs (the float ones require grad from now on). */
static void attach(dle_node *n, dle_tensor **outs, int nout) {
  for (int k = 0; k < nout; k++) {
    dle_tensor *t = outs[k];
    if (!dle_dtype_is_float(t->dtype)) continue;
    dle_node_retain(n);
    dle_node_release(t->grad_fn);  /* an in-place op rewrites the history of its output */
    t->grad_fn = n;
    t->output_nr = k;
    t->requires_grad = true;
  }
}

dle_status dle_autograd_record(dle_op op, const dle_attrs *a, dle_tensor **outs, int nout,
                               dle_tensor *const *ins, int nin, const uint32_t *versions) {
  const dle_grad_rule *r = dle_grad_rule_of(op);
  if (!r->vjp) return dle_error("%s: no gradient rule (cannot record it for autograd)", dle_op_get_info(op)->name);
  dle_node *n = node_new(op, a, nin, nout);
  if (!n) return dle_error("%s: out of memory recording the autograd graph", dle_op_get_info(op)->name);
  if (node_fill(n, ins, versions, r->save_inputs, outs, r->save_outputs) != DLE_OK) {
    dle_node_release(n);
    return DLE_ERR;
  }
  attach(n, outs, nout);
  /* Writing through one view would change what other views of the storage hold without
   * rewriting their histories: a silently wrong gradient. Such writes are refused instead. */
  if (dle_op_get_info(op)->kind == DLE_KIND_VIEW) outs[0]->storage->grad_views = true;
  dle_node_release(n);  /* the outputs hold it now */
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
  if (on && !dle_dtype_is_float(t->dtype))
    return dle_error("requires_grad: only float tensors can require grad, got %s", dle_dtype_name(t->dtype));
  if (!on && t->grad_fn)
    return dle_error("requires_grad: a tensor computed from tensors that require grad (not a leaf) "
                     "cannot stop requiring it; use detach()");
  t->requires_grad = on;
  return DLE_OK;
}

dle_status dle_detach(dle_tensor **out, dle_tensor *t) {
  DLE_TRY(alias(out, t));
  if (dle_tracer_on) dle_trace_note_detach(*out, t);
  return DLE_OK;
}

/* ---------------------------------------------------------------- reverse mode */

typedef struct {
  dle_node *node;
  int deps;               /* consumers in this pass that have not yet sent their gradient */
  dle_tensor *grad[DLE_MAX_OUTS]; /* sum of the gradients received per output */
} slot;

/* A small graph's slots (and the work stacks below) live on the C stack: a backward through a
 * handful of nodes should not pay for malloc, realloc and free on every call. */
#define PASS_INLINE 32

typedef struct {
  slot *slots;            /* inline, or malloc'ed once the graph outgrows it */
  int n, cap;
  uint64_t id;
  slot inline_slots[PASS_INLINE];
} pass;

/* Grows an array that starts in caller-provided inline storage to hold 2x its capacity. */
static void *grow(void *arr, const void *inline_arr, int cap, size_t elem) {
  void *bigger = arr == inline_arr ? malloc(elem * (size_t)cap * 2) : realloc(arr, elem * (size_t)cap * 2);
  if (bigger && arr == inline_arr) memcpy(bigger, arr, elem * (size_t)cap);
  return bigger;
}

static uint64_t next_run = 1;

static int slot_of(pass *p, dle_node *n) {
  if (n->run == p->id) return n->run_slot;
  if (p->n == p->cap) {
    slot *s = grow(p->slots, p->inline_slots, p->cap, sizeof *s);
    if (!s) return -1;
    p->slots = s, p->cap *= 2;
  }
  n->run = p->id, n->run_slot = p->n;
  p->slots[p->n] = (slot){.node = n};
  return p->n++;
}

/* Discovers every node reachable from the roots and counts, per node, the edges that reach it. */
static dle_status discover(pass *p, dle_node *const *roots, int nroots) {
  dle_node *inline_stack[PASS_INLINE], **stack = inline_stack;
  int cap = PASS_INLINE, top = 0;
  for (int r = 0; r < nroots; r++) {
    if (!roots[r] || roots[r]->run == p->id) continue;
    if (slot_of(p, roots[r]) < 0) goto oom;
    stack[top++] = roots[r];
    while (top > 0) {
      dle_node *x = stack[--top];
      for (int i = 0; i < x->nin; i++) {
        dle_node *y = x->in[i].fn;
        if (!y) continue;
        bool seen = y->run == p->id;
        int s = slot_of(p, y);
        if (s < 0) goto oom;
        p->slots[s].deps++;
        if (seen) continue;
        if (top == cap) {
          dle_node **bigger = grow(stack, inline_stack, cap, sizeof *stack);
          if (!bigger) goto oom;
          stack = bigger, cap *= 2;
        }
        stack[top++] = y;
      }
    }
  }
  if (stack != inline_stack) free(stack);
  return DLE_OK;
oom:
  if (stack != inline_stack) free(stack);
  return dle_error("backward: out of memory");
}

/* ---------------------------------------------------------------- reference cycles */

/* One thing a dle_tensor_holds walk still has to look at: a tensor, or else a node. */
typedef struct {
  const dle_tensor *t;
  dle_node *n;
} held;

static uint64_t next_walk = 1;

bool dle_tensor_holds(const dle_tensor *from, const dle_tensor *to) {
  held inline_stack[64], *stack = inline_stack;
  int top = 0, cap = 64;
  uint64_t walk = next_walk++;
  bool found = false;
#define HOLD_PUSH(...)                                                            \
  do {                                                                            \
    if (top == cap) {                                                             \
      held *bigger = grow(stack, inline_stack, cap, sizeof *stack);               \
      if (!bigger) { found = true; goto done; } /* unknown: say held (the safe answer) */ \
      stack = bigger, cap *= 2;                                                   \
    }                                                                             \
    stack[top++] = (held){__VA_ARGS__};                                           \
  } while (0)
  HOLD_PUSH(from, NULL);
  while (top > 0) {
    held h = stack[--top];
    if (h.t) {
      if (h.t == to) { found = true; break; }
      if (h.t->grad) HOLD_PUSH(h.t->grad, NULL);
      if (h.t->tangent) HOLD_PUSH(h.t->tangent, NULL);
      if (h.t->grad_fn && h.t->grad_fn->walk != walk) HOLD_PUSH(NULL, h.t->grad_fn);
      continue;
    }
    h.n->walk = walk;
    for (int i = 0; i < h.n->nin; i++) {
      node_input *in = &h.n->in[i];
      if (in->fn && in->fn->walk != walk) HOLD_PUSH(NULL, in->fn);
      if (in->leaf) HOLD_PUSH(in->leaf, NULL);
      if (in->value) HOLD_PUSH(in->value, NULL);
    }
    for (int k = 0; k < h.n->nout; k++)
      if (h.n->out[k].value) HOLD_PUSH(h.n->out[k].value, NULL);
  }
#undef HOLD_PUSH
done:
  if (stack != inline_stack) free(stack);
  return found;
}

/* *acc += g, out of place so a recorded graph stays valid (g is consumed). */
static dle_status accumulate(dle_tensor **acc, dle_tensor *g) {
  if (!*acc) {
    *acc = g;
    return DLE_OK;
  }
  dle_tensor *sum = NULL;
  dle_status st = dle_binary(DLE_OP_ADD, &sum, *acc, g);
  dle_tensor_release(g);
  if (st != DLE_OK) return st;
  dle_tensor_release(*acc);
  *acc = sum;
  return DLE_OK;
}

static dle_status check_version(const dle_node *n, const char *what, int i, dle_tensor *v, uint32_t version) {
  if (!v || v->storage->version == version) return DLE_OK;
  return dle_error("backward: %s %d of %s (shape %s), needed for its gradient, was modified by an "
                   "in-place operation after it was used (version %u, expected %u)",
                   what, i + 1, dle_node_name(n), SHAPE(v), v->storage->version, version);
}

/* A saved output as the rule sees it: with create_graph it must carry this node's history so
 * that differentiating the gradient reaches the node's inputs. */
static dle_status unpack_outputs(dle_node *n, bool create_graph, dle_tensor **tmp) {
  for (int k = 0; k < n->nout; k++) {
    tmp[k] = NULL;
    dle_tensor *v = n->out[k].value;
    if (!v || !create_graph || !dle_dtype_is_float(v->dtype)) continue;
    DLE_TRY(alias(&tmp[k], v));
    tmp[k]->grad_fn = n, tmp[k]->output_nr = k, tmp[k]->requires_grad = true;
    dle_node_retain(n);
    n->out[k].value = tmp[k];  /* swapped back after the rule */
    tmp[k] = v;
  }
  return DLE_OK;
}

static void restore_outputs(dle_node *n, dle_tensor **tmp) {
  for (int k = 0; k < n->nout; k++) {
    if (!tmp[k]) continue;
    dle_tensor_release(n->out[k].value);
    n->out[k].value = tmp[k];
  }
}

/* Runs one node's reverse rule: gradients for its inputs (cast to their dtypes), into gin. */
static dle_status run_rule(dle_node *n, dle_tensor *const *gout, dle_tensor **gin, bool create_graph) {
  if (n->freed)
    return dle_error("backward: the graph through %s was already freed by a previous backward; "
                     "pass retain_graph = true to the first backward to go through it again",
                     dle_node_name(n));
  for (int i = 0; i < n->nin; i++)
    DLE_TRY(check_version(n, "input", i, n->in[i].value, n->in[i].version));
  for (int k = 0; k < n->nout; k++)
    DLE_TRY(check_version(n, "output", k, n->out[k].value, n->out[k].version));
  dle_status st;
  if (n->op == DLE_NUM_OPS) {
    st = n->custom_vjp(n->custom_ctx, gout, n->nout, gin, n->nin);
  } else {
    dle_tensor *tmp[DLE_MAX_OUTS] = {NULL};
    st = unpack_outputs(n, create_graph, tmp);
    if (st == DLE_OK) st = dle_grad_rule_of(n->op)->vjp(n, gout, gin);
    restore_outputs(n, tmp);
  }
  if (st != DLE_OK) return st;
  for (int i = 0; i < n->nin; i++) {
    if (!gin[i]) continue;
    if (!n->in[i].requires_grad) { DLE_RELEASE(gin[i]); continue; }
    if (!dle_shape_equal(gin[i]->ndim, gin[i]->sizes, n->in[i].ndim, n->in[i].sizes)) {
      char buf[128];
      st = dle_error("backward: the gradient rule of %s gave shape %s for input %d of shape %s",
                     dle_node_name(n), SHAPE(gin[i]), i + 1,
                     dle_shape_str(buf, sizeof buf, n->in[i].ndim, n->in[i].sizes));
      break;
    }
    if (gin[i]->dtype != n->in[i].dtype) {
      dle_tensor *c = NULL;
      st = dle_to_dtype(&c, gin[i], n->in[i].dtype);
      if (st != DLE_OK) break;
      dle_tensor_release(gin[i]);
      gin[i] = c;
    }
  }
  return st;
}

/* Where a requested input's gradient is collected (dle.grad). */
typedef struct {
  int ninputs;
  dle_tensor *const *inputs;
  dle_tensor **grads;
} capture;

static int captured_leaf(const capture *c, const dle_tensor *leaf) {
  for (int j = 0; j < c->ninputs; j++)
    if (c->inputs[j] == leaf) return j;
  return -1;
}

/* A leaf's gradient: into .grad (detached unless create_graph), or into the capture. */
static dle_status deliver_leaf(dle_tensor *leaf, dle_tensor *g, const capture *c, bool create_graph) {
  if (c->ninputs) {
    int j = captured_leaf(c, leaf);
    if (j < 0) { dle_tensor_release(g); return DLE_OK; }
    return accumulate(&c->grads[j], g);
  }
  if (!create_graph && g->grad_fn) {
    dle_tensor *d = NULL;
    dle_status st = dle_detach(&d, g);
    dle_tensor_release(g);
    if (st != DLE_OK) return st;
    g = d;
  }
  if (!leaf->grad) {
    /* A broadcast gradient (sum's is an expanded view) becomes a dense tensor, so .grad looks
     * like its leaf and later steps can add into it in place; and one that holds the leaf
     * (x:backward(x) passes x itself) becomes a copy, as in PyTorch, or x would hold itself. */
    if (dle_tensor_reaches(g, leaf)) {
      dle_tensor *c = NULL;
      dle_status st = dle_clone(&c, g);
      dle_tensor_release(g);
      if (st != DLE_OK) return st;
      g = c;
    } else if (dle_tensor_overlaps_itself(g)) {
      dle_tensor *d = NULL;
      dle_status st = dle_contiguous(&d, g);
      dle_tensor_release(g);
      if (st != DLE_OK) return st;
      g = d;
    }
    leaf->grad = g;
    return DLE_OK;
  }
  /* As PyTorch does: add into .grad itself when nothing else can see it (no other reference to
   * its header or storage, no history) and it is a plain dense tensor of the right shape. Saves an
   * allocation per leaf per step; otherwise a fresh sum replaces it. */
  dle_tensor *acc = leaf->grad;
  if (!create_graph && acc->refcount == 1 && acc->storage->refcount == 1 && !acc->grad_fn &&
      acc->dtype == g->dtype && dle_shape_equal(acc->ndim, acc->sizes, g->ndim, g->sizes) &&
      dle_tensor_is_contiguous(acc)) {
    dle_status st = dle_binary(DLE_OP_ADD, &acc, acc, g);
    dle_tensor_release(g);
    return st;
  }
  dle_tensor *sum = NULL;
  dle_status st = dle_binary(DLE_OP_ADD, &sum, leaf->grad, g);
  dle_tensor_release(g);
  if (st != DLE_OK) return st;
  dle_tensor_release(leaf->grad);
  leaf->grad = sum;
  return DLE_OK;
}

static dle_status root_grad(dle_tensor **out, dle_tensor *root, dle_tensor *given, int r) {
  if (given) {
    if (!dle_shape_equal(given->ndim, given->sizes, root->ndim, root->sizes)) {
      char buf[128];
      return dle_error("backward: grad_output %d has shape %s but output %d has shape %s", r + 1,
                       SHAPE(given), r + 1, dle_tensor_shape_str(buf, sizeof buf, root));
    }
    return dle_to_dtype(out, given, root->dtype);
  }
  if (dle_tensor_numel(root) != 1)
    return dle_error("backward: output %d has shape %s; a gradient can be implied only for a "
                     "one-element output (pass grad_outputs)", r + 1, SHAPE(root));
  *out = NULL;
  return dle_full_on(out, root->ndim, root->sizes, 1, root->dtype, dle_tensor_device(root));
}

dle_status dle_backward(int nroots, dle_tensor *const *roots, dle_tensor *const *root_grads,
                        int ninputs, dle_tensor *const *inputs, dle_tensor **input_grads,
                        bool retain_graph, bool create_graph) {
  if (ninputs == 0) dle_trace_note_unsafe("backward: gradients accumulate into .grad outside the graph");
  for (int r = 0; r < nroots; r++)
    if (!roots[r]->requires_grad)
      return dle_error("backward: output %d (shape %s) does not require grad: nothing recorded "
                       "it (was it computed from tensors with requires_grad, outside no_grad?)",
                       r + 1, SHAPE(roots[r]));
  for (int j = 0; j < ninputs; j++) {
    input_grads[j] = NULL;
    if (!inputs[j]->requires_grad)
      return dle_error("grad: input %d (shape %s) does not require grad", j + 1, SHAPE(inputs[j]));
  }
  capture cap = {ninputs, inputs, input_grads};
  bool was = dle_set_grad_enabled(create_graph);
  /* Gradients run in the dtypes forward recorded (as PyTorch's backward under autocast): the rules'
   * ops are not autocast, whatever the mode around the call. */
  bool was_autocast = dle_autocast_set_enabled(false);
  bool was_paused = dle_autocast_pause_cache(true);
  pass p;   /* not zeroed as a whole: slot_of initialises each slot it hands out */
  p.id = next_run++, p.n = 0, p.cap = PASS_INLINE, p.slots = p.inline_slots;
  dle_node *root_nodes[64];
  dle_node **rn = nroots <= 64 ? root_nodes : malloc(sizeof *rn * (size_t)nroots);
  dle_status st = rn ? DLE_OK : dle_error("backward: out of memory");
  for (int r = 0; st == DLE_OK && r < nroots; r++) rn[r] = roots[r]->grad_fn;
  if (st == DLE_OK) st = discover(&p, rn, nroots);

  /* seed: each root's gradient goes to its node's output slot (or straight to a leaf root) */
  for (int r = 0; st == DLE_OK && r < nroots; r++) {
    dle_tensor *g = NULL;
    st = root_grad(&g, roots[r], root_grads ? root_grads[r] : NULL, r);
    if (st != DLE_OK) break;
    if (!roots[r]->grad_fn) st = deliver_leaf(roots[r], g, &cap, create_graph);
    else st = accumulate(&p.slots[roots[r]->grad_fn->run_slot].grad[roots[r]->output_nr], g);
  }

  /* ready stack: nodes all of whose consumers have sent their gradients */
  int inline_ready[PASS_INLINE];
  int *ready = p.n <= PASS_INLINE ? inline_ready : malloc(sizeof *ready * (size_t)p.n);
  int top = 0;
  if (!ready) st = dle_error("backward: out of memory");
  for (int s = 0; st == DLE_OK && s < p.n; s++)
    if (p.slots[s].deps == 0) ready[top++] = s;
  while (st == DLE_OK && top > 0) {
    slot *sl = &p.slots[ready[--top]];
    dle_node *n = sl->node;
    /* requested non-leaf inputs take the gradient summed at their producer */
    for (int j = 0; j < ninputs; j++)
      if (inputs[j]->grad_fn == n && sl->grad[inputs[j]->output_nr]) {
        dle_tensor_retain(sl->grad[inputs[j]->output_nr]);
        input_grads[j] = sl->grad[inputs[j]->output_nr];
      }
    dle_tensor *gin_small[8] = {NULL}, **gin = n->nin <= 8 ? gin_small : calloc((size_t)n->nin, sizeof *gin);
    if (!gin) { st = dle_error("backward: out of memory"); break; }
    bool any = false;
    for (int k = 0; k < n->nout; k++) any = any || sl->grad[k];
    if (any) st = run_rule(n, sl->grad, gin, create_graph);
    for (int i = 0; st == DLE_OK && i < n->nin; i++) {
      node_input *e = &n->in[i];
      dle_tensor *g = gin[i];
      gin[i] = NULL;
      if (e->fn) {
        slot *up = &p.slots[e->fn->run_slot];
        if (g) st = accumulate(&up->grad[e->output_nr], g);
        if (--up->deps == 0) ready[top++] = e->fn->run_slot;
      } else if (e->leaf && g) {
        st = deliver_leaf(e->leaf, g, &cap, create_graph);
      } else {
        dle_tensor_release(g);
      }
    }
    for (int i = 0; i < n->nin; i++) dle_tensor_release(gin[i]);
    if (gin != gin_small) free(gin);
    if (st == DLE_OK && !retain_graph && any) free_saved(n);
  }
  for (int s = 0; s < p.n; s++) {
    for (int k = 0; k < DLE_MAX_OUTS; k++) dle_tensor_release(p.slots[s].grad[k]);
    p.slots[s].node->run = 0;
  }
  if (ready != inline_ready) free(ready);
  if (p.slots != p.inline_slots) free(p.slots);
  if (rn != root_nodes) free(rn);
  dle_set_grad_enabled(was);
  dle_autocast_set_enabled(was_autocast);
  dle_autocast_pause_cache(was_paused);
  if (st != DLE_OK)
    for (int j = 0; j < ninputs; j++) DLE_RELEASE(input_grads[j]);
  return st;
}

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
    if (!dle_dtype_is_float(t->dtype))
      return dle_error("jvp: only float tensors carry tangents, got %s", dle_dtype_name(t->dtype));
    if (dle_tensor_reaches(tangent, t))
      return dle_error("jvp: a tensor cannot be its own tangent, directly or through .grad/.tangent links "
                       "(shape %s)", SHAPE(t));
  }
  return set_link(&t->tangent, t, tangent);
}

dle_status dle_set_grad(dle_tensor *t, dle_tensor *g) {
  dle_trace_note_unsafe("grad: a .grad assignment is not part of the graph");
  if (g) {
    if (!dle_shape_equal(t->ndim, t->sizes, g->ndim, g->sizes))
      return dle_error("grad: assigned gradient of shape %s does not match tensor shape %s", SHAPE(g),
                       dle_tensor_shape_str((dle_shape_buf){{0}}.s, 128, t));
    if (dle_tensor_reaches(g, t))
      return dle_error("grad: a tensor cannot be its own gradient, directly or through .grad/.tangent links");
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
  if (!(info->flags & DLE_DIFF)) return DLE_OK;  /* integer results carry no tangent */
  const dle_grad_rule *r = dle_grad_rule_of(op);
  if (!r->jvp) return dle_error("%s: no forward-mode rule (jvp)", info->name);
  dle_tensor *tin_small[8], **tin = nin <= 8 ? tin_small : malloc(sizeof *tin * (size_t)nin);
  if (!tin) return dle_error("%s: out of memory", info->name);
  for (int i = 0; i < nin; i++) tin[i] = ins[i]->tangent;
  dle_tensor *tout[DLE_MAX_OUTS] = {NULL};
  forward_ad_off = true;  /* the rule's own ops carry no tangents */
  dle_status st = r->jvp(op, a, ins, nin, tin, outs, tout);
  forward_ad_off = false;
  if (tin != tin_small) free(tin);
  for (int k = 0; k < nout && st == DLE_OK; k++) {
    if (!dle_dtype_is_float(outs[k]->dtype)) continue;
    if (!tout[k]) st = dle_full_on(&tout[k], outs[k]->ndim, outs[k]->sizes, 0, outs[k]->dtype, dle_tensor_device(outs[k]));
    else if (!dle_shape_equal(tout[k]->ndim, tout[k]->sizes, outs[k]->ndim, outs[k]->sizes)) {
      dle_tensor *e = NULL;   /* rules may return a tangent that broadcasts to the output */
      st = dle_expand(&e, tout[k], outs[k]->ndim, outs[k]->sizes);
      dle_tensor_release(tout[k]);
      tout[k] = e;
    }
    if (st == DLE_OK && tout[k] && tout[k]->dtype != outs[k]->dtype) {
      dle_tensor *c = NULL;
      st = dle_to_dtype(&c, tout[k], outs[k]->dtype);
      dle_tensor_release(tout[k]);
      tout[k] = c;
    }
    if (st == DLE_OK) st = dle_set_tangent(outs[k], tout[k]);
  }
  for (int k = 0; k < DLE_MAX_OUTS; k++) dle_tensor_release(tout[k]);
  return st;
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
