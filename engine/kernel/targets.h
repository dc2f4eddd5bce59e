/* targets.h — the class targets of the row losses (cross_entropy, nll_loss) as their kernels read
 * them, shared by the CPU kernels (kernels/cpu/cpu_nn_common.h) and the CUDA ones (header-only, it
 * calls no engine function; DLE_HD marks what CUDA device code may call too): the attrs (ints:
 * reduction, has ignore_index, ignore_index as stored; f[0] label smoothing) and the list of the
 * fused loss ops every backend registers together. */
#ifndef DLE_TARGETS_H
#define DLE_TARGETS_H

#include "../dle.h"

#include "device_inline.h"

typedef struct {
  int64_t n, c, base, ignore;
  bool has_ignore;
  double eps;
  int64_t reduction;
} ce_args;

static inline ce_args ce_args_of(const dle_attrs *a, const dle_tensor *logits) {
  ce_args c = {logits->sizes[0], logits->sizes[1], a->index_base, a->ints[2],
               a->ints[1] != 0,  a->f[0],          a->ints[0]};
  return c;
}

static inline DLE_HD bool ce_ignored(const ce_args *c, int64_t t) {
  return c->has_ignore && t == c->ignore;
}

/* mse, nll, binary cross-entropy with logits, soft cross-entropy, and their backward ops */
// clang-format off
#define DLE_FUSED_LOSS_OPS(X)                                       \
  X(MSE_LOSS) X(MSE_LOSS_BACKWARD) X(NLL_LOSS) X(NLL_LOSS_BACKWARD) \
  X(BCE_WITH_LOGITS) X(BCE_WITH_LOGITS_BACKWARD)                    \
  X(SOFT_CROSS_ENTROPY) X(SOFT_CROSS_ENTROPY_BACKWARD)
// clang-format on

#endif
