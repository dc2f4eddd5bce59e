/* cpu_nn_common.h — what the kernels of the nn ops (nn.c) and of the losses (losses.c)
 * share: the check of the layout the front door promises, and the check of the class targets of
 * the row losses (cross_entropy, nll_loss), done where they are read (their attrs, ce_args, are in
 * engine/kernel/targets.h, shared with the CUDA kernels). */
#ifndef DLE_CPU_NN_COMMON_H
#define DLE_CPU_NN_COMMON_H

#include "../../engine/internal.h"
#include "../../engine/kernel/targets.h"

/* Inputs contiguous in the output's dtype (or int64 indices), the output contiguous. */
static inline dle_status cpu_nn_check_layout(dle_op op, const dle_tensor *o, dle_tensor *const *ins,
                                             int nin) {
  const char *fn = dle_op_get_info(op)->name;
  for (int i = 0; i < nin; i++)
    if ((ins[i]->dtype != o->dtype && ins[i]->dtype != DLE_I64) ||
        !dle_tensor_is_contiguous(ins[i]))
      return dle_error("%s: the CPU kernel expects contiguous %s or int64 inputs", fn,
                       dle_dtype_name(o->dtype));
  if (!dle_tensor_is_contiguous(o))
    return dle_error("%s: the CPU kernel expects a contiguous output", fn);
  return DLE_OK;
}

/* A row or elementwise loss's reduced result: loss[0] = total (sum) or total / count (mean; 0/0
 * gives NaN); nothing for reduction none, which wrote each element's loss. */
#define CPU_LOSS_STORE_TOTAL(CT, loss, reduction, total, count) \
  do {                                                          \
    if ((reduction) == DLE_REDUCTION_MEAN)                      \
      (loss)[0] = (CT)((total) / (double)(count));              \
    else if ((reduction) == DLE_REDUCTION_SUM)                  \
      (loss)[0] = (CT)(total);                                  \
  } while (0)

/* The factor of a loss gradient: 1 / count for the mean, 1 otherwise. */
static inline double cpu_loss_grad_scale(int64_t reduction, int64_t count) {
  return reduction == DLE_REDUCTION_MEAN ? 1.0 / (double)count : 1.0;
}

/* One kernel of a family's ops for one float dtype (F32, F64). */
typedef dle_status (*cpu_float_kernel)(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins,
                                       int nin, const dle_attrs *a);

/* The dtype dispatch of the nn and loss kernels: checks the layout, then runs the float32 or
 * float64 kernel of the output's dtype (an error naming the op for any other). */
static inline dle_status cpu_float_dispatch(dle_op op, dle_tensor *const *outs,
                                            dle_tensor *const *ins, int nin, const dle_attrs *a,
                                            cpu_float_kernel f32, cpu_float_kernel f64) {
  const dle_tensor *o = outs[0];
  DLE_TRY(cpu_nn_check_layout(op, o, ins, nin));
  if (o->dtype == DLE_F32) return f32(op, outs, ins, nin, a);
  if (o->dtype == DLE_F64) return f64(op, outs, ins, nin, a);
  return dle_error("%s: no CPU kernel for %s", dle_op_get_info(op)->name, dle_dtype_name(o->dtype));
}
/* cpu_<name>: the family's kernel, <name>_F32 or <name>_F64 through cpu_float_dispatch. */
#define CPU_FLOAT_FAMILY(name)                                                             \
  static dle_status cpu_##name(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, \
                               int nin, const dle_attrs *a) {                              \
    return cpu_float_dispatch(op, outs, ins, nin, a, name##_F32, name##_F64);              \
  }

/* Every target not ignored must be a class base..base+C-1; *count gets how many there are. */
static inline dle_status ce_check_targets(const char *fn, const int64_t *t, const ce_args *c,
                                          int64_t *count) {
  int64_t n = 0;
  for (int64_t i = 0; i < c->n; i++) {
    if (ce_ignored(c, t[i])) continue;
    if (t[i] < c->base || t[i] - c->base >= c->c) /* not t[i] - base < 0: overflows for INT64_MIN */
      return dle_error("%s: target %lld (row %lld) is out of range for %lld classes (%lld..%lld)",
                       fn, (long long)t[i], (long long)(i + c->base), (long long)c->c,
                       (long long)c->base, (long long)(c->base + c->c - 1));
    n++;
  }
  *count = n;
  return DLE_OK;
}

#endif
