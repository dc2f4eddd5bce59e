/* node.h — the autograd graph's node, shared by the files of engine/autograd/ (private): the tape
 * (tape.c: modes, the rule table, recording nodes), reverse mode (backward.c), forward mode
 * (forward.c) and the reference-cycle checks (checks.c). Rules see nodes only through
 * engine/autograd.h. */
#ifndef DLE_AUTOGRAD_NODE_H
#define DLE_AUTOGRAD_NODE_H

#include "../autograd.h"

#include <stdlib.h>
#include <string.h>

/* What a node keeps of one input. The edge (producer node and output number, or the leaf itself)
 * is always kept; the value only when the op's rule reads it, so intermediates the backward pass
 * does not need are freed as soon as the forward pass drops them. */
typedef struct {
  bool requires_grad;
  dle_node *fn; /* producer of the input (retained), NULL for a leaf */
  int output_nr;
  dle_tensor *leaf; /* a leaf requiring grad (retained): where its gradient accumulates */
  int ndim;
  int64_t sizes[DLE_MAX_DIMS];
  dle_dtype dtype;
  dle_device device;
  dle_tensor *value; /* saved value: the leaf itself, or an alias carrying the input's history */
  uint32_t version;  /* its storage version when saved */
} node_input;

typedef struct {
  int ndim;
  int64_t sizes[DLE_MAX_DIMS];
  dle_dtype dtype;
  dle_tensor *value; /* saved detached alias (never points back at this node: no cycle) */
  uint32_t version;
} node_output;

struct dle_node {
  int refcount;
  dle_op op; /* DLE_NUM_OPS for a custom node */
  dle_attrs attrs;
  int nin, nout;
  node_input *in;
  node_output out[DLE_MAX_OUTS];
  bool freed;  /* saved values released by a backward pass without retain_graph */
  bool pooled; /* allocated from the node pool (see node_alloc) */
  /* custom nodes */
  char name[32];
  dle_custom_vjp custom_vjp;
  void *custom_ctx;
  void (*custom_free)(void *);
  /* bookkeeping of the backward pass running now */
  uint64_t run;
  int run_slot;
  uint64_t walk; /* the last dle_tensor_holds walk that went through this node */
};

/* Releases the values n saved (a backward pass without retain_graph went through it). */
void dle_node_free_saved(dle_node *n);
/* A new header over t's storage and geometry (no history). */
dle_status dle_node_alias(dle_tensor **out, dle_tensor *t);

/* Grows an array that starts in caller-provided inline storage to hold 2x its capacity. */
static inline void *grow(void *arr, const void *inline_arr, int cap, size_t elem) {
  void *bigger =
      arr == inline_arr ? malloc(elem * (size_t)cap * 2) : realloc(arr, elem * (size_t)cap * 2);
  if (bigger && arr == inline_arr) memcpy(bigger, arr, elem * (size_t)cap);
  return bigger;
}

#endif
