/* backward.c — reverse mode: the sum of partial adjoints per tensor, in reverse topological order
 * by dependency counting, delivered to leaves' .grad or to the inputs asked for; frees graphs not
 * retained. */
#include "node.h"

#include <stdlib.h>

/* ---------------------------------------------------------------- reverse mode */

typedef struct {
  dle_node *node;
  int deps;                       /* consumers in this pass that have not yet sent their gradient */
  dle_tensor *grad[DLE_MAX_OUTS]; /* sum of the gradients received per output */
} slot;

/* A small graph's slots (and the work stacks below) live on the C stack: a backward through a
 * handful of nodes should not pay for malloc, realloc and free on every call. */
#define PASS_INLINE 32

typedef struct {
  slot *slots; /* inline, or malloc'ed once the graph outgrows it */
  int n, cap;
  uint64_t id;
  slot inline_slots[PASS_INLINE];
} pass;

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

static dle_status check_version(const dle_node *n, const char *what, int i, dle_tensor *v,
                                uint32_t version) {
  if (!v || v->storage->version == version) return DLE_OK;
  return dle_error(
      "backward: %s %d of %s (shape %s), needed for its gradient, was modified by an "
      "in-place operation after it was used (version %u, expected %u)",
      what, i + 1, dle_node_name(n), SHAPE(v), v->storage->version, version);
}

/* A saved output as the rule sees it: with create_graph it must carry this node's history so
 * that differentiating the gradient reaches the node's inputs. */
static dle_status unpack_outputs(dle_node *n, bool create_graph, dle_tensor **tmp) {
  for (int k = 0; k < n->nout; k++) {
    tmp[k] = NULL;
    dle_tensor *v = n->out[k].value;
    if (!v || !create_graph || !dle_dtype_is_differentiable(v->dtype)) continue;
    DLE_TRY(dle_node_alias(&tmp[k], v));
    tmp[k]->grad_fn = n, tmp[k]->output_nr = k, tmp[k]->requires_grad = true;
    dle_node_retain(n);
    n->out[k].value = tmp[k]; /* swapped back after the rule */
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
static dle_status run_rule(dle_node *n, dle_tensor *const *gout, dle_tensor **gin,
                           bool create_graph) {
  if (n->freed)
    return dle_error(
        "backward: the graph through %s was already freed by a previous backward; "
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
    if (!n->in[i].requires_grad) {
      DLE_RELEASE(gin[i]);
      continue;
    }
    if (!dle_shape_equal(gin[i]->ndim, gin[i]->sizes, n->in[i].ndim, n->in[i].sizes)) {
      char buf[128];
      st = dle_error("backward: the gradient rule of %s gave shape %s for input %d of shape %s",
                     dle_node_name(n), SHAPE(gin[i]), i + 1,
                     dle_shape_str(buf, sizeof buf, n->in[i].ndim, n->in[i].sizes));
      break;
    }
    if (gin[i]->dtype != n->in[i].dtype) {
      dle_tensor *c = NULL;
      st = dle_grad_cast(&c, gin[i], n->in[i].dtype);
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

static dle_status into_grad(dle_tensor *leaf, dle_tensor *g, bool create_graph);

/* A leaf's gradient: into .grad (detached unless create_graph), or into the capture. Under a
 * trace, .grad's update is one GRAD_ACC record (its inner ops are not recorded): a replay redoes
 * it by the rule of the .grad it finds then (set, or add), as eager code would. */
static dle_status deliver_leaf(dle_tensor *leaf, dle_tensor *g, const capture *c,
                               bool create_graph) {
  if (c->ninputs) {
    int j = captured_leaf(c, leaf);
    if (j < 0) {
      dle_tensor_release(g);
      return DLE_OK;
    }
    return accumulate(&c->grads[j], g);
  }
  struct dle_trace *t = dle_tracer_on;
  if (!t || create_graph) return into_grad(leaf, g, create_graph);
  dle_tensor_retain(g);
  dle_tracer_on = NULL;
  dle_status st = into_grad(leaf, g, false);
  dle_tracer_on = t;
  if (st == DLE_OK)
    dle_trace_note_record(DLE_TRACE_GRAD_ACC, NULL, (dle_tensor *[]){leaf, g}, 2, leaf->grad);
  dle_tensor_release(g);
  return st;
}

dle_status dle_grad_accumulate(dle_tensor *leaf, dle_tensor *g) {
  if (!leaf || !g) return dle_error("grad_accumulate: leaf and gradient are required");
  if (!dle_shape_equal(leaf->ndim, leaf->sizes, g->ndim, g->sizes)) {
    char buf[128];
    return dle_error("grad_accumulate: gradient of shape %s for a leaf of shape %s", SHAPE(g),
                     dle_tensor_shape_str(buf, sizeof buf, leaf));
  }
  dle_tensor_retain(g);
  return into_grad(leaf, g, false);
}

/* g (consumed) into leaf's .grad: set, or added (see dle_grad_accumulate). */
static dle_status into_grad(dle_tensor *leaf, dle_tensor *g, bool create_graph) {
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
  if (dle_dtype_is_complex(root->dtype))
    return dle_error(
        "backward: output %d is %s (shape %s); a gradient can be implied only for a real "
        "one-element output (pass grad_outputs, or take a real loss such as abs or real)",
        r + 1, dle_dtype_name(root->dtype), SHAPE(root));
  if (dle_tensor_numel(root) != 1)
    return dle_error(
        "backward: output %d has shape %s; a gradient can be implied only for a "
        "one-element output (pass grad_outputs)",
        r + 1, SHAPE(root));
  *out = NULL;
  return dle_full_on(out, root->ndim, root->sizes, 1, root->dtype, dle_tensor_device(root));
}

dle_status dle_backward(int nroots, dle_tensor *const *roots, dle_tensor *const *root_grads,
                        int ninputs, dle_tensor *const *inputs, dle_tensor **input_grads,
                        bool retain_graph, bool create_graph) {
  if (ninputs == 0 && create_graph)
    dle_trace_note_unsafe("backward: create_graph gradients into .grad are not part of the graph");
  for (int r = 0; r < nroots; r++)
    if (!roots[r]->requires_grad)
      return dle_error(
          "backward: output %d (shape %s) does not require grad: nothing recorded "
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
  pass p; /* not zeroed as a whole: slot_of initialises each slot it hands out */
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
    if (!roots[r]->grad_fn)
      st = deliver_leaf(roots[r], g, &cap, create_graph);
    else
      st = accumulate(&p.slots[roots[r]->grad_fn->run_slot].grad[roots[r]->output_nr], g);
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
    dle_tensor *gin_small[8] = {NULL},
               **gin = n->nin <= 8 ? gin_small : calloc((size_t)n->nin, sizeof *gin);
    if (!gin) {
      st = dle_error("backward: out of memory");
      break;
    }
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
    if (st == DLE_OK && !retain_graph && any) dle_node_free_saved(n);
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
