/* flops.c — the FLOP count of every op, for dle.profile and dle.flops (profile.h): one rule per
 * op, picked in rule_of() below, evaluated on the shapes of the call's inputs and outputs.
 *
 * Conventions (those of fvcore/thop for products, plus counts for everything else):
 * - a product counts 2*m*n*k (a multiply and an add per term): matmul/mm/bmm 2*m*n*k per batch,
 *   plus m*n for the added term of addmm/linear; conv2d 2*N*Hout*Wout*Cout*(Cin/groups)*kh*kw,
 *   plus N*Cout*Hout*Wout with a bias; its two gradient ops count the product they compute,
 *   which is the forward's (without bias);
 * - elementwise ops count 1 per output element, whatever the function (add and exp alike), and
 *   comparisons too; reductions count 1 per input element (var/std and logsumexp too);
 * - row-wise ops count a constant per element of their input, the arithmetic of one pass of a
 *   straightforward implementation (softmax: max, subtract, exp, sum, divide = 5), see PER_*;
 * - sdpa counts its two products, 2*L*S*E (q k^T) + 2*L*S*Ev (p v) per batch and head, i.e.
 *   4*B*H*T*T*E when Ev = E; the scaling and softmax (O(1/E) of it) are not counted, and a causal
 *   mask does not reduce it (the skipped half is counted, as in PyTorch's FLOP counter); its
 *   backward counts its four products (twice the forward);
 * - creation, views, copies, casts, and pure data movement (cat, gather, index_select, masked_fill,
 *   tril/triu, one_hot, embedding) count 0: their cost is in bytes, which the profiler reports.
 * The fused optimizer steps are counted in optim.c (per parameter element). */
#include "../internal.h"

/* Per-element constants of the row-wise ops. */
enum {
  PER_SOFTMAX = 5,            /* max, subtract, exp, sum, divide (log_softmax: log, subtract) */
  PER_NORM = 8,               /* mean 1, variance 3, normalize 2, affine 2 */
  PER_NORM_GRAD_INPUT = 10,   /* x-hat 2, two row sums 2, the combination 6 */
  PER_NORM_GRAD_AFFINE = 5,   /* x-hat 2, gw += gy x-hat 2, gb += gy 1 */
  PER_CROSS_ENTROPY = 5,      /* log-sum-exp as softmax; picking the target is per row */
  PER_CROSS_ENTROPY_GRAD = 4, /* exp(x - lse), minus the smoothed one-hot, times gy */
  PER_SOFT_CROSS_ENTROPY = 8, /* log-sum-exp 5, q = (1 - eps) t + eps/C and q (x - lse) 3 */
  PER_SOFT_CROSS_ENTROPY_GRAD = 8,
  PER_MSE = 3,              /* subtract, square, sum (backward: subtract, scale, times gy) */
  PER_BCE = 6,              /* softplus(-x) = log1p(exp(-x)) 3, the weighted sum 3 */
  PER_SDPA_SOFTMAX_GRAD = 3 /* sdpa_score_grad: p (d - rowsum(p d)) besides its product */
};

typedef enum {
  NONE,         /* 0 */
  PER_OUT,      /* per element of the first output */
  PER_IN,       /* per element of the first input */
  MATMUL,       /* 2*m*n*k per batch (+ m*n with the added term) */
  CONV,         /* 2 * out elements * (Cin/groups)*kh*kw (+ out elements with bias) */
  CONV_GRAD_IN, /* the same product from gy and the weight */
  CONV_GRAD_W,  /* the same product from gy and the weight gradient's shape */
  POOL,         /* kh*kw per output element (per gy element for the gradient) */
  POOL_GRAD,
  SDPA,
  SDPA_SCORE_GRAD,
  SDPA_BACKWARD
} rule_kind;

typedef struct {
  rule_kind kind;
  int per; /* PER_OUT, PER_IN: FLOPs per element */
} rule;

static rule rule_of(dle_op op) {
  switch (op) {
    case DLE_OP_SCATTER_ADD:
    case DLE_OP_INDEX_ADD: return (rule){PER_IN, 1}; /* adds to self */
    case DLE_OP_CONV2D: return (rule){CONV, 0};
    case DLE_OP_CONV2D_GRAD_INPUT: return (rule){CONV_GRAD_IN, 0};
    case DLE_OP_CONV2D_GRAD_WEIGHT: return (rule){CONV_GRAD_W, 0};
    case DLE_OP_MAX_POOL2D:
    case DLE_OP_AVG_POOL2D: return (rule){POOL, 0};
    case DLE_OP_AVG_POOL2D_GRAD: return (rule){POOL_GRAD, 0};
    case DLE_OP_LAYER_NORM:
    case DLE_OP_BATCH_NORM: return (rule){PER_IN, PER_NORM};
    case DLE_OP_LAYER_NORM_GRAD_INPUT:
    case DLE_OP_BATCH_NORM_GRAD_INPUT: return (rule){PER_IN, PER_NORM_GRAD_INPUT};
    case DLE_OP_LAYER_NORM_GRAD_AFFINE:
    case DLE_OP_BATCH_NORM_GRAD_AFFINE: return (rule){PER_IN, PER_NORM_GRAD_AFFINE};
    case DLE_OP_CROSS_ENTROPY: return (rule){PER_IN, PER_CROSS_ENTROPY};
    case DLE_OP_CROSS_ENTROPY_BACKWARD: return (rule){PER_OUT, PER_CROSS_ENTROPY_GRAD};
    case DLE_OP_SOFT_CROSS_ENTROPY: return (rule){PER_IN, PER_SOFT_CROSS_ENTROPY};
    case DLE_OP_SOFT_CROSS_ENTROPY_BACKWARD: return (rule){PER_OUT, PER_SOFT_CROSS_ENTROPY_GRAD};
    case DLE_OP_EMBEDDING: return (rule){NONE, 0};
    case DLE_OP_EMBEDDING_BACKWARD: return (rule){PER_IN, 1}; /* adds gy rows */
    case DLE_OP_DROPOUT: return (rule){PER_OUT, 1};
    case DLE_OP_SDPA: return (rule){SDPA, 0};
    case DLE_OP_SDPA_SCORE_GRAD: return (rule){SDPA_SCORE_GRAD, 0};
    case DLE_OP_SDPA_BACKWARD: return (rule){SDPA_BACKWARD, 0};
    case DLE_OP_MSE_LOSS: return (rule){PER_IN, PER_MSE};
    case DLE_OP_MSE_LOSS_BACKWARD: return (rule){PER_OUT, PER_MSE};
    case DLE_OP_NLL_LOSS: return (rule){PER_IN, 1}; /* the smoothing term sums every logp */
    case DLE_OP_NLL_LOSS_BACKWARD: return (rule){PER_OUT, 1};
    case DLE_OP_BCE_WITH_LOGITS: return (rule){PER_IN, PER_BCE};
    case DLE_OP_BCE_WITH_LOGITS_BACKWARD: return (rule){PER_OUT, PER_BCE};
    default: break;
  }
  switch (dle_op_table[op].kind) {
    case DLE_KIND_UNARY:
    case DLE_KIND_BINARY:
    case DLE_KIND_COMPARE:
    case DLE_KIND_WHERE: return (rule){PER_OUT, 1};
    case DLE_KIND_REDUCE: return (rule){PER_IN, 1};
    case DLE_KIND_SOFTMAX: return (rule){PER_IN, PER_SOFTMAX};
    case DLE_KIND_MATMUL: return (rule){MATMUL, 0};
    default: return (rule){NONE, 0}; /* create, view, copy, index: data movement */
  }
}

static int64_t numel(const dle_tensor *t) { return t ? dle_tensor_numel(t) : 0; }
static int64_t last_dim(const dle_tensor *t) { return t->ndim ? t->sizes[t->ndim - 1] : 1; }
/* (Cin/groups)*kh*kw: the weight's (or weight gradient's) elements per output channel. */
static int64_t per_out_channel(const dle_tensor *w) {
  return w->ndim && w->sizes[0] ? dle_tensor_numel(w) / w->sizes[0] : 0;
}

int64_t dle_op_flops(dle_op op, dle_tensor *const *outs, int nout, dle_tensor *const *ins, int nin,
                     const dle_attrs *a) {
  if ((unsigned)op >= DLE_NUM_OPS || nout < 1 || !outs[0]) return 0;
  rule r = rule_of(op);
  const dle_tensor *y = outs[0];
  switch (r.kind) {
    case NONE: return 0;
    case PER_OUT: return r.per * numel(y);
    case PER_IN: return nin ? r.per * numel(ins[0]) : 0;
    case MATMUL: return 2 * numel(y) * last_dim(ins[0]) + (nin == 3 ? numel(y) : 0);
    case CONV: return 2 * numel(y) * per_out_channel(ins[1]) + (nin == 3 ? numel(y) : 0);
    case CONV_GRAD_IN: return 2 * numel(ins[0]) * per_out_channel(ins[1]);
    case CONV_GRAD_W: return 2 * numel(ins[0]) * per_out_channel(y);
    case POOL: return numel(y) * a->ints[0] * a->ints[1];
    case POOL_GRAD: return numel(ins[0]) * a->ints[0] * a->ints[1];
    /* ins[0] is q (or the packed qkv) with E last; outs: out {..., L, Ev}, probs {..., L, S} */
    case SDPA: return nout > 1 ? 2 * numel(outs[1]) * (last_dim(ins[0]) + last_dim(y)) : 0;
    /* gout {..., L, Ev}, v, probs -> the scores' gradient {..., L, S} */
    case SDPA_SCORE_GRAD: return numel(y) * (2 * last_dim(ins[0]) + PER_SDPA_SOFTMAX_GRAD);
    /* gout, q, k, v, probs: d p = gout v^T, d v = p^T gout, d q = ds k, d k = ds^T q */
    case SDPA_BACKWARD:
      return nin == 5 ? 4 * numel(ins[4]) * (last_dim(ins[0]) + last_dim(ins[1])) : 0;
  }
  return 0;
}

const char *dle_op_flops_rule(dle_op op, int *per) {
  static const char *const names[] = {
      [NONE] = "none",
      [PER_OUT] = "per output element",
      [PER_IN] = "per input element",
      [MATMUL] = "2*m*n*k per batch (+ m*n added)",
      [CONV] = "2*N*Hout*Wout*Cout*(Cin/groups)*kh*kw (+ N*Cout*Hout*Wout bias)",
      [CONV_GRAD_IN] = "2*N*Hout*Wout*Cout*(Cin/groups)*kh*kw",
      [CONV_GRAD_W] = "2*N*Hout*Wout*Cout*(Cin/groups)*kh*kw",
      [POOL] = "kh*kw per output element",
      [POOL_GRAD] = "kh*kw per gradient element",
      [SDPA] = "2*L*S*(E+Ev) per batch and head",
      [SDPA_SCORE_GRAD] = "2*L*S*Ev + 3*L*S per batch and head",
      [SDPA_BACKWARD] = "4*L*S*(E+Ev) per batch and head",
  };
  if ((unsigned)op >= DLE_NUM_OPS) return NULL;
  rule r = rule_of(op);
  if (per) *per = r.per;
  return names[r.kind];
}
