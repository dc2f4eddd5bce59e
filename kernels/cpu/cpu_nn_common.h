/* cpu_nn_common.h — what the kernels of the nn ops (nn.c) and of the losses (losses.c)
 * share: the check of the layout the front door promises, and the check of the class targets of
 * the row losses (cross_entropy, nll_loss), done where they are read (their attrs, ce_args, are in
 * engine/ops/targets.h, shared with the CUDA kernels). */
#ifndef DLE_CPU_NN_COMMON_H
#define DLE_CPU_NN_COMMON_H

#include "../../engine/internal.h"
#include "../../engine/ops/targets.h"

/* Inputs contiguous in the output's dtype (or int64 indices), the output contiguous. */
static inline dle_status cpu_nn_check_layout(dle_op op, const dle_tensor *o, dle_tensor *const *ins, int nin) {
  const char *fn = dle_op_get_info(op)->name;
  for (int i = 0; i < nin; i++)
    if ((ins[i]->dtype != o->dtype && ins[i]->dtype != DLE_I64) || !dle_tensor_is_contiguous(ins[i]))
      return dle_error("%s: the CPU kernel expects contiguous %s or int64 inputs", fn,
                       dle_dtype_name(o->dtype));
  if (!dle_tensor_is_contiguous(o)) return dle_error("%s: the CPU kernel expects a contiguous output", fn);
  return DLE_OK;
}

/* Every target not ignored must be a class base..base+C-1; *count gets how many there are. */
static inline dle_status ce_check_targets(const char *fn, const int64_t *t, const ce_args *c, int64_t *count) {
  int64_t n = 0;
  for (int64_t i = 0; i < c->n; i++) {
    if (ce_ignored(c, t[i])) continue;
    if (t[i] < c->base || t[i] - c->base >= c->c)   /* not t[i] - base < 0: overflows for INT64_MIN */
      return dle_error("%s: target %lld (row %lld) is out of range for %lld classes (%lld..%lld)", fn,
                       (long long)t[i], (long long)(i + c->base), (long long)c->c, (long long)c->base,
                       (long long)(c->base + c->c - 1));
    n++;
  }
  *count = n;
  return DLE_OK;
}

#endif
