/* norm.h — public C interface of the fused normalization layers (engine/ops/norm.c; op table
 * entries in ops.def). Same conventions as dle.h: outputs first (NULL slot: a new tensor),
 * DLE_OK / DLE_ERR with dle_last_error().
 *
 *   dle_tensor *y = NULL, *stats = NULL;   // x {B, T, 768}: normalize each row of 768
 *   if (dle_layer_norm(&y, &stats, x, 1, w, b, 1e-5)) fprintf(stderr, "%s\n", dle_last_error());
 *
 * stats {rows or C, 2} holds the mean and biased variance of each normalized group (float32, or
 * float64 for float64 inputs); the backward ops take it instead of recomputing it. */
#ifndef DLE_NORM_H
#define DLE_NORM_H

#include "dle.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = (x - mean) / sqrt(var + eps) * w + b over the last k dims of x (k >= 1); w and b (either
 * may be NULL) have the shape of those dims. stats: {numel / D, 2} with D their product. */
dle_status dle_layer_norm(dle_tensor **y, dle_tensor **stats, dle_tensor *x, int k, dle_tensor *w,
                          dle_tensor *b, double eps);
/* Gradient of layer_norm's input (x's statistics taken into account): w may be NULL. */
dle_status dle_layer_norm_grad_input(dle_tensor **gx, dle_tensor *gy, dle_tensor *x, dle_tensor *stats,
                                     dle_tensor *w, int k, double eps);
/* Gradients of layer_norm's weight and bias: sums of gy * xhat and of gy over the rows. */
dle_status dle_layer_norm_grad_affine(dle_tensor **gw, dle_tensor **gb, dle_tensor *gy, dle_tensor *x,
                                      dle_tensor *stats, int k, double eps);

/* Per-channel normalization of x {N, C, ...}: with training the batch statistics (over N and the
 * trailing dims) are used, otherwise running_mean and running_var {C} (both required then;
 * ignored and may be NULL in training). w, b {C} may be NULL. stats: {C, 2}, the statistics used.
 * The running statistics are not updated here: stats has what an update needs. */
dle_status dle_batch_norm(dle_tensor **y, dle_tensor **stats, dle_tensor *x, dle_tensor *w,
                          dle_tensor *b, dle_tensor *running_mean, dle_tensor *running_var,
                          bool training, double eps);
/* Gradients of training-mode batch_norm: of the input (w may be NULL) and of weight and bias. */
dle_status dle_batch_norm_grad_input(dle_tensor **gx, dle_tensor *gy, dle_tensor *x, dle_tensor *stats,
                                     dle_tensor *w, double eps);
dle_status dle_batch_norm_grad_affine(dle_tensor **gw, dle_tensor **gb, dle_tensor *gy, dle_tensor *x,
                                      dle_tensor *stats, double eps);

#ifdef __cplusplus
}
#endif
#endif
