/* checks.c — the graph checks behind .grad and .tangent assignment: does a tensor hold another
 * (through links or through its history)? Storing such a one would make a reference cycle. */
#include "node.h"

#include <stdlib.h>

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
#define HOLD_PUSH(...)                                              \
  do {                                                              \
    if (top == cap) {                                               \
      held *bigger = grow(stack, inline_stack, cap, sizeof *stack); \
      if (!bigger) {                                                \
        found = true;                                               \
        goto done;                                                  \
      } /* unknown: say held (the safe answer) */                   \
      stack = bigger, cap *= 2;                                     \
    }                                                               \
    stack[top++] = (held){__VA_ARGS__};                             \
  } while (0)
  HOLD_PUSH(from, NULL);
  while (top > 0) {
    held h = stack[--top];
    if (h.t) {
      if (h.t == to) {
        found = true;
        break;
      }
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
