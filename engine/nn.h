/* nn.h — public C interface of the fused neural-network ops: softmax cross-entropy, embedding,
 * dropout and scaled dot-product attention (engine/ops/nn.c; op table entries in ops.def).
 * Same conventions as dle.h: outputs first (NULL slot: a new tensor), DLE_OK / DLE_ERR with
 * dle_last_error(); index tensors are int64 read relative to index_base (1 from Lua).
 *
 *   dle_cross_entropy_params p = DLE_CROSS_ENTROPY_DEFAULTS;   // mean, no ignore, no smoothing
 *   dle_tensor *loss = NULL, *lse = NULL;
 *   if (dle_cross_entropy(&loss, &lse, logits, targets, &p, 0)) fprintf(stderr, "%s\n", dle_last_error());
 */
#ifndef DLE_NN_H
#define DLE_NN_H

#include "dle.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DLE_REDUCTION_NONE, DLE_REDUCTION_MEAN, DLE_REDUCTION_SUM } dle_reduction;

typedef struct {
  dle_reduction reduction;
  bool has_ignore_index;
  int64_t ignore_index;    /* compared with the targets as stored (1-based from Lua) */
  double label_smoothing;  /* in [0, 1] */
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
dle_status dle_embedding(dle_tensor **out, dle_tensor *weight, dle_tensor *indices, bool has_padding,
                         int64_t padding_idx, int64_t index_base);
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
/* Leading dimension of the matrices in t's last two dims (nb batch dims before them) as BLAS takes
 * it: the row stride, or the row length for a single row (BLAS wants ld >= max(1, columns) even
 * where it is never used). */
static inline int64_t dle_matrix_ld(const dle_tensor *t, int nb) {
  int64_t cols = t->sizes[nb + 1] > 1 ? t->sizes[nb + 1] : 1;
  return t->sizes[nb] > 1 ? t->strides[nb] : cols;
}

/* Whether attention's kernel reads or writes t's matrices where they lie: rows contiguous, rows
 * at least a row apart, batch strides not negative (stride 0 where broadcast is fine). The front
 * door copies other operands; the kernel refuses them. */
static inline bool dle_matrices_in_place(const dle_tensor *t, int nb) {
  int64_t cols = t->sizes[nb + 1];
  if (cols > 1 && t->strides[nb + 1] != 1) return false;
  for (int d = 0; d < nb; d++)
    if (t->strides[d] < 0) return false;
  return dle_matrix_ld(t, nb) >= (cols > 1 ? cols : 1);
}

dle_status dle_sdpa(dle_tensor **out, dle_tensor **probs, dle_tensor *q, dle_tensor *k,
                    dle_tensor *v, dle_tensor *mask, bool causal, double scale);
/* sdpa on q, k, v packed in one tensor qkv {3, ..., T, E} (q = qkv[0], ...): the same results; the
 * gradient of qkv comes back as one tensor laid out like qkv. */
dle_status dle_sdpa_packed(dle_tensor **out, dle_tensor **probs, dle_tensor *qkv, dle_tensor *mask,
                           bool causal, double scale);
/* A new tensor of like's shape and dims ordered in memory as like's are (see nn_front.h). */
dle_status dle_empty_laid_out_like(dle_tensor **out, const dle_tensor *like, dle_dtype dt);
/* q, k, v: new views of a packed qkv {3, ...} (fn names the caller in the error for other shapes). */
dle_status dle_sdpa_unpack(const char *fn, dle_tensor *qkv, dle_tensor **parts);
/* d scores = scale * probs * (gout v^T - rowsum(probs * gout v^T)): the gradient of q k^T. */
dle_status dle_sdpa_score_grad(dle_tensor **out, dle_tensor *gout, dle_tensor *v, dle_tensor *probs,
                               double scale);
/* The fused backward of sdpa (no mask gradient): with dS the score gradient above,
 * dq = dS k {..., L, E}, dk = dS^T q {..., S, E} and dv = probs^T gout {..., S, Ev}. */
dle_status dle_sdpa_backward(dle_tensor **dq, dle_tensor **dk, dle_tensor **dv, dle_tensor *gout,
                             dle_tensor *q, dle_tensor *k, dle_tensor *v, dle_tensor *probs, double scale);

#ifdef __cplusplus
}
#endif
#endif
