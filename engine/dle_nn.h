/* dle_nn.h — the neural-network ops of the public C interface: a part of engine/dle.h, which
 * includes it (include dle.h, not this file); its conventions hold here. */
#ifndef DLE_H
#error "include dle.h, not dle_nn.h"
#endif
#ifndef DLE_NN_H
#define DLE_NN_H

/* ---------------------------------------------------------------- convolution and pooling */
/* 2-D convolution and pooling over {N, C, H, W} tensors (engine/ops/conv.c, engine/ops/pool.c). */
/* Geometry of a convolution: {h, w} pairs. */
typedef struct {
  int64_t stride[2], padding[2], dilation[2];
  int64_t groups;
} dle_conv2d_params;
#define DLE_CONV2D_DEFAULTS ((dle_conv2d_params){{1, 1}, {0, 0}, {1, 1}, 1})

/* Geometry of a pooling window: {h, w} pairs; padding at most half the kernel. */
typedef struct {
  int64_t kernel[2], stride[2], padding[2];
  bool count_include_pad; /* avg_pool2d: padding cells count in the divisor */
} dle_pool2d_params;

/* y {N, O, Ho, Wo} = conv(x {N, C, H, W}, w {O, C/groups, kh, kw}) + bias {O} (bias may be NULL);
 * Ho = (H + 2 pad - dil (kh - 1) - 1) / stride + 1. Integer inputs compute in float32. */
dle_status dle_conv2d(dle_tensor **out, dle_tensor *x, dle_tensor *w, dle_tensor *bias,
                      const dle_conv2d_params *p);
/* The gradient of conv2d's input: gy {N, O, Ho, Wo}, w -> {N, C, h, w_} (the input's H, W). */
dle_status dle_conv2d_grad_input(dle_tensor **out, dle_tensor *gy, dle_tensor *w,
                                 const dle_conv2d_params *p, int64_t h, int64_t w_);
/* The gradient of conv2d's weight: gy {N, O, Ho, Wo}, x {N, C, H, W} -> {O, C/groups, kh, kw}. */
dle_status dle_conv2d_grad_weight(dle_tensor **out, dle_tensor *gy, dle_tensor *x,
                                  const dle_conv2d_params *p, int64_t kh, int64_t kw);

/* Max over windows (padding counts as -inf): values {N, C, Ho, Wo} and int64 indices h*W + w of
 * the max within each {H, W} plane, relative to index_base. */
dle_status dle_max_pool2d(dle_tensor **values, dle_tensor **indices, dle_tensor *x,
                          const dle_pool2d_params *p, int64_t index_base);
dle_status dle_avg_pool2d(dle_tensor **out, dle_tensor *x, const dle_pool2d_params *p);
/* The adjoint of avg_pool2d: gy {N, C, Ho, Wo} -> {N, C, h, w}. */
dle_status dle_avg_pool2d_grad(dle_tensor **out, dle_tensor *gy, const dle_pool2d_params *p,
                               int64_t h, int64_t w);

/* ---------------------------------------------------------------- normalization layers */
/* The fused normalization layers (engine/ops/norm.c). stats {rows or C, 2} holds the mean and
 * biased variance of each normalized group (float32, or float64 for float64 inputs); the backward
 * ops take it instead of recomputing it. */
/* y = (x - mean) / sqrt(var + eps) * w + b over the last k dims of x (k >= 1); w and b (either
 * may be NULL) have the shape of those dims. stats: {numel / D, 2} with D their product. */
dle_status dle_layer_norm(dle_tensor **y, dle_tensor **stats, dle_tensor *x, int k, dle_tensor *w,
                          dle_tensor *b, double eps);
/* Gradient of layer_norm's input (x's statistics taken into account): w may be NULL. */
dle_status dle_layer_norm_grad_input(dle_tensor **gx, dle_tensor *gy, dle_tensor *x,
                                     dle_tensor *stats, dle_tensor *w, int k, double eps);
/* Gradients of layer_norm's weight and bias: sums of gy * xhat and of gy over the rows. */
dle_status dle_layer_norm_grad_affine(dle_tensor **gw, dle_tensor **gb, dle_tensor *gy,
                                      dle_tensor *x, dle_tensor *stats, int k, double eps);

/* Per-channel normalization of x {N, C, ...}: with training the batch statistics (over N and the
 * trailing dims) are used, otherwise running_mean and running_var {C} (both required then;
 * ignored and may be NULL in training). w, b {C} may be NULL. stats: {C, 2}, the statistics used.
 * The running statistics are not updated here: stats has what an update needs. */
dle_status dle_batch_norm(dle_tensor **y, dle_tensor **stats, dle_tensor *x, dle_tensor *w,
                          dle_tensor *b, dle_tensor *running_mean, dle_tensor *running_var,
                          bool training, double eps);
/* Gradients of training-mode batch_norm: of the input (w may be NULL) and of weight and bias. */
dle_status dle_batch_norm_grad_input(dle_tensor **gx, dle_tensor *gy, dle_tensor *x,
                                     dle_tensor *stats, dle_tensor *w, double eps);
dle_status dle_batch_norm_grad_affine(dle_tensor **gw, dle_tensor **gb, dle_tensor *gy,
                                      dle_tensor *x, dle_tensor *stats, double eps);
/* Normalization of x {N, C, ...} over each sample's groups of C / groups channels (C divisible
 * by groups); w, b {C} may be NULL. stats: {N * groups, 2}. Its gradients as for batch_norm. */
dle_status dle_group_norm(dle_tensor **y, dle_tensor **stats, dle_tensor *x, int64_t groups,
                          dle_tensor *w, dle_tensor *b, double eps);
dle_status dle_group_norm_grad_input(dle_tensor **gx, dle_tensor *gy, dle_tensor *x,
                                     dle_tensor *stats, dle_tensor *w, int64_t groups, double eps);
dle_status dle_group_norm_grad_affine(dle_tensor **gw, dle_tensor **gb, dle_tensor *gy,
                                      dle_tensor *x, dle_tensor *stats, int64_t groups, double eps);

/* ---------------------------------------------------------------- resampling */
/* PyTorch's interpolate over the d = 1..3 spatial dims of x {N, C, ...} (engine/ops/resample.c;
 * the index rules in engine/kernel/resample_geom.h). */
typedef enum {
  DLE_RESAMPLE_NEAREST,
  DLE_RESAMPLE_NEAREST_EXACT,
  DLE_RESAMPLE_LINEAR, /* linear, bilinear, trilinear by d */
  DLE_RESAMPLE_CUBIC,
  DLE_RESAMPLE_NUM_MODES
} dle_resample_mode;
/* y {N, C, sizes[0..d)}; scales (NULL or d entries, 0 for none) are the scale factors the source
 * indices use instead of in / out, as PyTorch's scale_factor without recompute_scale_factor. */
dle_status dle_upsample(dle_tensor **out, dle_tensor *x, int d, const int64_t *sizes,
                        dle_resample_mode mode, bool align_corners, const double *scales);
/* The adjoint of upsample: gy {N, C, ...} -> gx {N, C, in_sizes[0..d)}. */
dle_status dle_upsample_backward(dle_tensor **gx, dle_tensor *gy, int d, const int64_t *in_sizes,
                                 dle_resample_mode mode, bool align_corners, const double *scales);

/* ---------------------------------------------------------------- cross-entropy, embedding, dropout, attention */
/* Softmax cross-entropy, embedding, dropout and scaled dot-product attention (engine/ops/losses.c,
 * nn.c, attention.c). */
typedef enum { DLE_REDUCTION_NONE, DLE_REDUCTION_MEAN, DLE_REDUCTION_SUM } dle_reduction;

typedef struct {
  dle_reduction reduction;
  bool has_ignore_index;
  int64_t ignore_index;   /* compared with the targets as stored (1-based from Lua) */
  double label_smoothing; /* in [0, 1] */
} dle_cross_entropy_params;
#define DLE_CROSS_ENTROPY_DEFAULTS ((dle_cross_entropy_params){DLE_REDUCTION_MEAN, false, 0, 0.0})

/* Softmax cross-entropy of logits {N, C} (float; integers compute in float32) against int64
 * class targets {N}: loss_i = lse_i - (1 - eps) x[i, t_i] - eps/C sum_c x[i, c]; ignored targets
 * give 0 and do not count in the mean. loss is {N} (reduction none) or a scalar; lse {N} is the
 * row log-sum-exp (may be NULL when the caller does not want it; it is needed for gradients). */
dle_status dle_cross_entropy(dle_tensor **loss, dle_tensor **lse, dle_tensor *logits,
                             dle_tensor *targets, const dle_cross_entropy_params *p,
                             int64_t index_base);
/* Gradient of the logits: (softmax - smoothed one-hot) * gy / count (mean) or * gy. */
dle_status dle_cross_entropy_backward(dle_tensor **out, dle_tensor *gy, dle_tensor *logits,
                                      dle_tensor *targets, dle_tensor *lse,
                                      const dle_cross_entropy_params *p, int64_t index_base);

/* Rows of weight {V, D} at int64 indices of any shape -> {..., D}. With has_padding, the row
 * padding_idx (as stored in indices, i.e. relative to index_base) receives no gradient. */
dle_status dle_embedding(dle_tensor **out, dle_tensor *weight, dle_tensor *indices,
                         bool has_padding, int64_t padding_idx, int64_t index_base);
/* {V, D} zeros with each row of gy {..., D} added at its index (padding_idx skipped). */
dle_status dle_embedding_backward(dle_tensor **out, dle_tensor *gy, dle_tensor *indices, int64_t v,
                                  bool has_padding, int64_t padding_idx, int64_t index_base);

/* Inverted dropout: each element kept with probability 1 - p (scaled by 1/(1-p)) by a Philox
 * mask from g (NULL: the default generator), which advances past the numbers used. p = 1 gives
 * zeros. The mask depends only on (seed, offset, element number), never on threads or strides. */
dle_status dle_dropout(dle_tensor **out, dle_tensor *x, double p, dle_generator *g);

/* Scaled dot-product attention: probs = softmax(q k^T * scale + mask) over the keys (causal:
 * query i sees keys 0..i), out = probs v. q {..., L, E}, k {..., S, E}, v {..., S, Ev}, batch
 * dims broadcast; mask NULL, bool (true = may attend) or float (added), broadcastable to
 * {..., L, S}. A query row with no allowed key gives zero probabilities and a zero output.
 * probs may be NULL when not wanted. */
dle_status dle_sdpa(dle_tensor **out, dle_tensor **probs, dle_tensor *q, dle_tensor *k,
                    dle_tensor *v, dle_tensor *mask, bool causal, double scale);
/* sdpa on q, k, v packed in one tensor qkv {3, ..., T, E} (q = qkv[0], ...): the same results; the
 * gradient of qkv comes back as one tensor laid out like qkv. */
dle_status dle_sdpa_packed(dle_tensor **out, dle_tensor **probs, dle_tensor *qkv, dle_tensor *mask,
                           bool causal, double scale);
/* d scores = scale * probs * (gout v^T - rowsum(probs * gout v^T)): the gradient of q k^T. */
dle_status dle_sdpa_score_grad(dle_tensor **out, dle_tensor *gout, dle_tensor *v, dle_tensor *probs,
                               double scale);
/* The fused backward of sdpa (no mask gradient): with dS the score gradient above,
 * dq = dS k {..., L, E}, dk = dS^T q {..., S, E} and dv = probs^T gout {..., S, Ev}. */
dle_status dle_sdpa_backward(dle_tensor **dq, dle_tensor **dk, dle_tensor **dv, dle_tensor *gout,
                             dle_tensor *q, dle_tensor *k, dle_tensor *v, dle_tensor *probs,
                             double scale);

/* ---------------------------------------------------------------- fused losses */
/* The fused losses (engine/ops/losses.c); each has a backward op, itself differentiable. */
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
dle_status dle_bce_with_logits(dle_tensor **loss, dle_tensor *x, dle_tensor *y,
                               dle_tensor *pos_weight, dle_reduction r);
/* d loss / d x = gy ((1 - y) - (1 + (w - 1) y) sigmoid(-x)) (/ numel for the mean); with w = 1 that
 * is gy (sigmoid(x) - y). */
dle_status dle_bce_with_logits_backward(dle_tensor **out, dle_tensor *gy, dle_tensor *x,
                                        dle_tensor *y, dle_tensor *pos_weight, dle_reduction r);

/* Softmax cross-entropy of logits {N, C} against class probabilities {N, C}: -sum_c q (x - lse)
 * with q = (1 - eps) t + eps/C; the mean is over the N rows. lse {N} (may be NULL) is what the
 * backward reads. */
dle_status dle_soft_cross_entropy(dle_tensor **loss, dle_tensor **lse, dle_tensor *logits,
                                  dle_tensor *targets, dle_reduction r, double label_smoothing);
/* The gradient of the logits: gy (softmax(x) sum_c q - q) (/ N for the mean). */
dle_status dle_soft_cross_entropy_backward(dle_tensor **out, dle_tensor *gy, dle_tensor *logits,
                                           dle_tensor *targets, dle_tensor *lse, dle_reduction r,
                                           double label_smoothing);

/* ---------------------------------------------------------------- recurrent cells (ops/rnn.c) */
/* One LSTM step after its projections: xg, hg {N, 4H} (gates i, f, g, o, biases folded in), c
 * {N, H} -> h', c' {N, H} and act {N, 4H} (the activated gates, what backward reads). */
dle_status dle_lstm_cell_fused(dle_tensor **h, dle_tensor **c, dle_tensor **act, dle_tensor *xg,
                               dle_tensor *hg, dle_tensor *c_prev);
/* One GRU step: xg, hg {N, 3H} (r, z, n; hg holds h W_hh^T + b_hh), h {N, H} -> h', act {N, 4H}. */
dle_status dle_gru_cell_fused(dle_tensor **h, dle_tensor **act, dle_tensor *xg, dle_tensor *hg,
                              dle_tensor *h_prev);
/* Their one-pass reverse rules (not differentiable). */
dle_status dle_lstm_cell_fused_backward(dle_tensor **dgates, dle_tensor **dc_prev, dle_tensor *gh,
                                        dle_tensor *gc, dle_tensor *act, dle_tensor *c_prev,
                                        dle_tensor *c);
dle_status dle_gru_cell_fused_backward(dle_tensor **dxg, dle_tensor **dhg, dle_tensor **dh_prev,
                                       dle_tensor *gh, dle_tensor *act, dle_tensor *h_prev);

/* ---------------------------------------------------------------- CTC loss (ops/ctc.c) */
/* -log p(target | input) per sample {N} and the log-space forward variables (float64) of
 * log_probs {T, N, C}, targets {N, S} or concatenated, input/target_lengths {N}; blank 0-based,
 * target values counted from index_base. CPU only. */
dle_status dle_ctc_loss(dle_tensor **nll, dle_tensor **log_alpha, dle_tensor *log_probs,
                        dle_tensor *targets, dle_tensor *input_lengths, dle_tensor *target_lengths,
                        int64_t blank, bool zero_infinity, int64_t index_base);
/* Its reverse rule: d log_probs {T, N, C} for gy {N} (0 for infinite losses with zero_infinity). */
dle_status dle_ctc_loss_backward(dle_tensor **grad, dle_tensor *gy, dle_tensor *log_probs,
                                 dle_tensor *targets, dle_tensor *input_lengths,
                                 dle_tensor *target_lengths, dle_tensor *nll, dle_tensor *log_alpha,
                                 int64_t blank, bool zero_infinity, int64_t index_base);

#endif
