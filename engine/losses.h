/* losses.h — public C interface of the fused losses (engine/ops/losses.c; op table entries in
 * ops.def): mean squared error, negative log-likelihood, binary cross-entropy with logits and
 * softmax cross-entropy against class probabilities. Each has a backward op, itself
 * differentiable. Conventions as in nn.h: outputs first (NULL slot: a new tensor), DLE_OK /
 * DLE_ERR with dle_last_error(), class targets int64 relative to index_base (1 from Lua).
 *
 *   dle_tensor *loss = NULL;
 *   if (dle_mse_loss(&loss, input, target, DLE_REDUCTION_MEAN)) fprintf(stderr, "%s\n", dle_last_error());
 */
#ifndef DLE_LOSSES_H
#define DLE_LOSSES_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (input - target)^2, elementwise (reduction none) or summed / averaged to a scalar; the shapes
 * must be equal. */
dle_status dle_mse_loss(dle_tensor **loss, dle_tensor *input, dle_tensor *target, dle_reduction r);
/* d loss / d input = 2 (input - target) gy (/ numel for the mean); the target's is its negative. */
dle_status dle_mse_loss_backward(dle_tensor **out, dle_tensor *gy, dle_tensor *input,
                                 dle_tensor *target, dle_reduction r);

/* -(1 - eps) logp[i, t_i] - eps/C sum_c logp[i, c] for log-probabilities {N, C} and int64 class
 * targets {N}; ignored targets give 0 and do not count in the mean (p: as for cross_entropy). */
dle_status dle_nll_loss(dle_tensor **loss, dle_tensor *logp, dle_tensor *targets,
                        const dle_cross_entropy_params *p, int64_t index_base);
/* The gradient {N, c} of logp: -gy (smoothed one-hot of t) (/ count for the mean). */
dle_status dle_nll_loss_backward(dle_tensor **out, dle_tensor *gy, dle_tensor *targets, int64_t c,
                                 const dle_cross_entropy_params *p, int64_t index_base);

/* (1 - y) x + (1 + (w - 1) y) softplus(-x), computed without overflow for any x; pos_weight w
 * (NULL: 1) broadcasts to x's shape (PyTorch: one weight per class of the last dim). */
dle_status dle_bce_with_logits(dle_tensor **loss, dle_tensor *x, dle_tensor *y, dle_tensor *pos_weight,
                               dle_reduction r);
/* d loss / d x = gy ((1 - y) - (1 + (w - 1) y) sigmoid(-x)) (/ numel for the mean); with w = 1 that
 * is gy (sigmoid(x) - y). */
dle_status dle_bce_with_logits_backward(dle_tensor **out, dle_tensor *gy, dle_tensor *x, dle_tensor *y,
                                        dle_tensor *pos_weight, dle_reduction r);

/* Softmax cross-entropy of logits {N, C} against class probabilities {N, C}: -sum_c q (x - lse)
 * with q = (1 - eps) t + eps/C; the mean is over the N rows. lse {N} (may be NULL) is what the
 * backward reads. */
dle_status dle_soft_cross_entropy(dle_tensor **loss, dle_tensor **lse, dle_tensor *logits,
                                  dle_tensor *targets, dle_reduction r, double label_smoothing);
/* The gradient of the logits: gy (softmax(x) sum_c q - q) (/ N for the mean). */
dle_status dle_soft_cross_entropy_backward(dle_tensor **out, dle_tensor *gy, dle_tensor *logits,
                                           dle_tensor *targets, dle_tensor *lse, dle_reduction r,
                                           double label_smoothing);

#ifdef __cplusplus
}
#endif
#endif
