/* losses.c — CPU kernels of the losses (engine/ops/losses.c): mse, nll, binary cross-entropy
 * with logits and softmax cross-entropy against class indices or class probabilities, each
 * forward and backward in one pass over its inputs.
 *
 * Inputs are contiguous float32/float64 (int64 class targets), outputs fresh and contiguous. Each
 * body is written once and instantiated per float type by LOSS_TYPES.
 *
 * elementwise losses (mse, bce)  blocks of LOSS_BLOCK elements, side by side on OpenMP threads:
 *     each block's losses go straight to the output (reduction none) or to a stack buffer that is
 *     summed over 8 lanes into a double (mean, sum), so the loss loops vectorise. bce's log1p and
 *     exp are polynomials in float (loss_log1p, RED_EXP), so they vectorise too.
 * pos_weight      read cyclically: element i uses w[i % wn] (the front door made that right), in
 *     runs where the index into w is contiguous; a single weight is a constant.
 * nll             per row: -(1 - eps) x[t] - eps/C sum x; backward writes -w (1 - eps) at the target
 *     and -w eps/C elsewhere (zeros without smoothing).
 * cross_entropy   one pass per row for the max, one for sum exp(x - max): lse = max + log(sum),
 *     loss = lse - (1 - eps) x[t] - eps/C sum x; backward g = w (exp(x - lse) - eps/C),
 *     g[t] -= w (1 - eps), with w = gy (/ count for the mean); ignored rows are zero.
 * soft CE         per row: lse by max + sum exp; loss = -((1 - eps) sum t (x - lse) + eps/C sum
 *     (x - lse)) (shifted by lse before the products: no cancellation of two large sums);
 *     backward g = w (exp(x - lse) sum q - q) with sum q = (1 - eps) sum t + eps. */
#include "../../engine/internal.h"
#include "backend.h"
#include "cpu_loop.h"
#include "cpu_rows.h"
#include "cpu_nn_common.h"

#define LOSS_TYPES(X) X(F32, float) X(F64, double)
#define LOSS_BLOCK    1024

/* log1p(u) for u in [0, 1] (bce's exp(-|x|)): 2 atanh(s) with s = u / (2 + u) <= 1/3, whose odd
 * series to s^15 is within float rounding; branch-free, so it vectorises. float64 uses libm. */
static inline float loss_log1pf(float u) {
  float s = u / (2.0f + u), z = s * s, p = 1.0f / 15;
  p = p * z + 1.0f / 13, p = p * z + 1.0f / 11, p = p * z + 1.0f / 9, p = p * z + 1.0f / 7;
  p = p * z + 1.0f / 5, p = p * z + 1.0f / 3, p = p * z + 1.0f;
  return 2.0f * s * p;
}
#define LOSS_LOG1P(v) _Generic((v), float : loss_log1pf, default : log1p)(v)
#define LOSS_ABS(v)   _Generic((v), float : fabsf, default : fabs)(v)

/* ---- elementwise losses: the per-element expressions ----
 * Each sees xv, yv (input, target), wv (pos_weight) and gv (grad_output, pre-scaled by the
 * mean's 1/n when it is one number) in type CT. */
#define MSE_FWD(CT) ((xv - yv) * (xv - yv))
#define MSE_BWD(CT) ((CT)2 * gv * (xv - yv))
/* softplus(-x) = log1p(exp(-|x|)) + max(-x, 0), the max as (|x| - x) / 2 (exact, and vectorises) */
#define BCE_SOFTPLUS_NEG(CT) (LOSS_LOG1P(RED_EXP(-LOSS_ABS(xv))) + (LOSS_ABS(xv) - xv) * (CT)0.5)
#define BCE_FWD(CT)          (((CT)1 - yv) * xv + ((CT)1 + (wv - (CT)1) * yv) * BCE_SOFTPLUS_NEG(CT))
/* sigmoid(-x) = 1 / (1 + exp(x)): no blend of two stable forms needed, exp(x) saturates (float's
 * polynomial clamps at 88.7, libm's gives inf) and the quotient goes to 0, never NaN */
#define BCE_BWD(CT) (gv * (((CT)1 - yv) - ((CT)1 + (wv - (CT)1) * yv) / ((CT)1 + RED_EXP(xv))))

/* dst[j] = EXPR for j < n, with w and gy either arrays or the constants wc, gs; one loop per case
 * so each vectorises. */
#define SPAN_BODY(CT, EXPR)                           \
  if (w && gy)                                        \
    for (int64_t j = 0; j < n; j++) {                 \
      CT xv = x[j], yv = y[j], wv = w[j], gv = gy[j]; \
      dst[j] = EXPR;                                  \
      (void)wv, (void)gv;                             \
    }                                                 \
  else if (w)                                         \
    for (int64_t j = 0; j < n; j++) {                 \
      CT xv = x[j], yv = y[j], wv = w[j], gv = gs;    \
      dst[j] = EXPR;                                  \
      (void)wv, (void)gv;                             \
    }                                                 \
  else if (gy)                                        \
    for (int64_t j = 0; j < n; j++) {                 \
      CT xv = x[j], yv = y[j], wv = wc, gv = gy[j];   \
      dst[j] = EXPR;                                  \
      (void)wv, (void)gv;                             \
    }                                                 \
  else                                                \
    for (int64_t j = 0; j < n; j++) {                 \
      CT xv = x[j], yv = y[j], wv = wc, gv = gs;      \
      dst[j] = EXPR;                                  \
      (void)wv, (void)gv;                             \
    }

#define SPAN_FN(ID, CT, NAME, EXPR)                                                          \
  static CPU_CLONES void NAME##_##ID(CT *dst, const CT *gy, CT gs, const CT *x, const CT *y, \
                                     const CT *w, CT wc, int64_t n) {                        \
    (void)gs, (void)wc;                                                                      \
    SPAN_BODY(CT, EXPR(CT))                                                                  \
  }

/* Sums of a block over ROW_LANES accumulators (vectorises without reassociation). */
#define ELEMENTWISE_DRIVER(ID, CT)                                                                 \
  SPAN_FN(ID, CT, mse_fwd, MSE_FWD)                                                                \
  SPAN_FN(ID, CT, mse_bwd, MSE_BWD)                                                                \
  SPAN_FN(ID, CT, bce_fwd, BCE_FWD)                                                                \
  SPAN_FN(ID, CT, bce_bwd, BCE_BWD)                                                                \
  typedef void (*span_##ID)(CT *, const CT *, CT, const CT *, const CT *, const CT *, CT,          \
                            int64_t);                                                              \
  /* elements [i0, i1) into dst: w is read cyclically over wn elements */                          \
  static void span_over_##ID(span_##ID f, CT *dst, const CT *gy, CT gs, const CT *x, const CT *y,  \
                             const CT *w, int64_t wn, int64_t i0, int64_t i1) {                    \
    const CT *g = gy ? gy + i0 : NULL;                                                             \
    if (!w || wn == 1) {                                                                           \
      f(dst, g, gs, x + i0, y + i0, NULL, w ? w[0] : (CT)1, i1 - i0);                              \
      return;                                                                                      \
    }                                                                                              \
    for (int64_t i = i0; i < i1;) {                                                                \
      int64_t off = i % wn, len = wn - off < i1 - i ? wn - off : i1 - i;                           \
      f(dst + (i - i0), g ? g + (i - i0) : NULL, gs, x + i, y + i, w + off, 1, len);               \
      i += len;                                                                                    \
    }                                                                                              \
  }                                                                                                \
  /* n elements: into out (none) or summed (returned, in double) */                                \
  static double elementwise_##ID(span_##ID f, CT *out, bool none, const CT *gy, CT gs,             \
                                 const CT *x, const CT *y, const CT *w, int64_t wn, int64_t n) {   \
    int64_t nb = (n + LOSS_BLOCK - 1) / LOSS_BLOCK;                                                \
    double total = 0;                                                                              \
    _Pragma("omp parallel for reduction(+ : total) schedule(static) if (n >= CPU_PARALLEL_GRAIN)") \
    for (int64_t b = 0; b < nb; b++) {                                                             \
      CT buf[LOSS_BLOCK];                                                                          \
      int64_t i0 = b * LOSS_BLOCK, i1 = i0 + LOSS_BLOCK < n ? i0 + LOSS_BLOCK : n;                 \
      span_over_##ID(f, none ? out + i0 : buf, gy, gs, x, y, w, wn, i0, i1);                       \
      if (!none) total += (double)row_dot_##ID(buf, ones_##ID, i1 - i0);                           \
    }                                                                                              \
    return total;                                                                                  \
  }

/* row_dot against ones: the lane-parallel sum of cpu_rows.h for a block */
static const float ones_F32[LOSS_BLOCK] = {[0 ... LOSS_BLOCK - 1] = 1.0f};
static const double ones_F64[LOSS_BLOCK] = {[0 ... LOSS_BLOCK - 1] = 1.0};
LOSS_TYPES(ELEMENTWISE_DRIVER)

/* Forward (ins x, y[, w]) or backward (ins gy, x, y[, w]) of mse or bce. */
#define ELEMENTWISE_KERNEL(ID, CT)                                                                \
  static dle_status elementwise_loss_##ID(dle_op op, dle_tensor *out, dle_tensor *const *ins,     \
                                          int nin, const dle_attrs *a) {                          \
    bool back = op == DLE_OP_MSE_LOSS_BACKWARD || op == DLE_OP_BCE_WITH_LOGITS_BACKWARD;          \
    bool mse = op == DLE_OP_MSE_LOSS || op == DLE_OP_MSE_LOSS_BACKWARD;                           \
    int k = back;                                                                                 \
    const CT *x = dle_tensor_data(ins[k]), *y = dle_tensor_data(ins[k + 1]);                      \
    const CT *w = nin > k + 2 ? dle_tensor_data(ins[k + 2]) : NULL;                               \
    int64_t n = dle_tensor_numel(ins[k]), wn = w ? dle_tensor_numel(ins[k + 2]) : 1;              \
    CT *o = dle_tensor_data(out);                                                                 \
    bool none = a->ints[0] == DLE_REDUCTION_NONE;                                                 \
    if (back) {                                                                                   \
      const CT *gy = dle_tensor_data(ins[0]);                                                     \
      double inv = cpu_loss_grad_scale(a->ints[0], n);                                            \
      CT gs = none ? 0 : (CT)((double)gy[0] * inv);                                               \
      elementwise_##ID(mse ? mse_bwd_##ID : bce_bwd_##ID, o, true, none ? gy : NULL, gs, x, y, w, \
                       wn, n);                                                                    \
      return DLE_OK;                                                                              \
    }                                                                                             \
    double total =                                                                                \
        elementwise_##ID(mse ? mse_fwd_##ID : bce_fwd_##ID, o, none, NULL, 0, x, y, w, wn, n);    \
    CPU_LOSS_STORE_TOTAL(CT, o, a->ints[0], total, n);                                            \
    return DLE_OK;                                                                                \
  }
LOSS_TYPES(ELEMENTWISE_KERNEL)

/* ---- nll ---- */

/* The forward loop of the row losses over n rows (work: the elements read, for the OpenMP
 * threshold): the statements after the arguments set `double li`, row i's loss, which goes to
 * loss[i] (reduction none) or into the total CPU_LOSS_STORE_TOTAL stores over count. */
#define ROW_LOSS_LOOP(CT, loss, red, n, work, count, ...)                                          \
  do {                                                                                             \
    double total = 0;                                                                              \
    int64_t work_ = (work);                                                                        \
    _Pragma(                                                                                       \
        "omp parallel for reduction(+ : total) schedule(static) if (work_ >= CPU_PARALLEL_GRAIN)") \
    for (int64_t i = 0; i < (n); i++) {                                                            \
      double li;                                                                                   \
      __VA_ARGS__                                                                                  \
      if ((red) == DLE_REDUCTION_NONE)                                                             \
        (loss)[i] = (CT)li;                                                                        \
      else                                                                                         \
        total += li;                                                                               \
    }                                                                                              \
    CPU_LOSS_STORE_TOTAL(CT, loss, red, total, count);                                             \
  } while (0)

/* The class-target kernels' arguments: c (the rows and classes of tensor shaped, the attrs a) and
 * the int64 targets t of tensor targets, checked (count: those not ignored), or an error naming fn. */
#define CE_TARGETS(fn, shaped, targets)        \
  ce_args c = ce_args_of(a, shaped);           \
  const int64_t *t = dle_tensor_data(targets); \
  int64_t count = 0;                           \
  DLE_TRY(ce_check_targets(fn, t, &c, &count))

/* -(1 - eps) x[t] - eps/C sum x: the class-target part of a row's loss (nll_loss's whole loss,
 * cross_entropy's after lse); 0 for an ignored target. */
#define TARGET_TERM(ID, CT)                                                           \
  static inline double target_term_##ID(const CT *row, int64_t t, const ce_args *c) { \
    if (ce_ignored(c, t)) return 0;                                                   \
    double li = -(1 - c->eps) * (double)row[t - c->base];                             \
    if (c->eps > 0) li -= c->eps / (double)c->c * row_sum_##ID(row, c->c);            \
    return li;                                                                        \
  }
LOSS_TYPES(TARGET_TERM)

#define NLL_KERNELS(ID, CT)                                                                     \
  static dle_status nll_fwd_##ID(dle_tensor *out, dle_tensor *const *ins, const dle_attrs *a) { \
    CE_TARGETS("nll_loss", ins[0], ins[1]);                                                     \
    const CT *x = dle_tensor_data(ins[0]);                                                      \
    CT *loss = dle_tensor_data(out);                                                            \
    ROW_LOSS_LOOP(CT, loss, c.reduction, c.n, c.n *(c.eps > 0 ? c.c : 1), count,                \
                  li = target_term_##ID(x + i * c.c, t[i], &c););                               \
    return DLE_OK;                                                                              \
  }                                                                                             \
  /* out {N, C}: ins gy, targets */                                                             \
  static dle_status nll_bwd_##ID(dle_tensor *out, dle_tensor *const *ins, const dle_attrs *a) { \
    CE_TARGETS("nll_loss_backward", out, ins[1]);                                               \
    const CT *gy = dle_tensor_data(ins[0]);                                                     \
    CT *g = dle_tensor_data(out);                                                               \
    bool none = c.reduction == DLE_REDUCTION_NONE;                                              \
    double inv = cpu_loss_grad_scale(c.reduction, count);                                       \
    _Pragma("omp parallel for schedule(static) if (c.n * c.c >= CPU_PARALLEL_GRAIN)")           \
    for (int64_t i = 0; i < c.n; i++) {                                                         \
      CT *gr = g + i * c.c;                                                                     \
      bool skip = ce_ignored(&c, t[i]);                                                         \
      CT w = skip ? 0 : (CT)(-(double)gy[none ? i : 0] * inv),                                  \
         off = w * (CT)(c.eps / (double)c.c);                                                   \
      for (int64_t j = 0; j < c.c; j++) gr[j] = off;                                            \
      if (!skip) gr[t[i] - c.base] += w * (CT)(1 - c.eps);                                      \
    }                                                                                           \
    return DLE_OK;                                                                              \
  }
LOSS_TYPES(NLL_KERNELS)

/* ---- cross-entropy against class indices ---- */

/* g = w (exp(x - l) - off): a row of the cross-entropy gradient before the target's term */
#define CE_GRAD_ROW(ID, CT)                                                                    \
  static CPU_CLONES void ce_grad_row_##ID(CT *g, const CT *x, int64_t n, CT w, CT l, CT off) { \
    for (int64_t j = 0; j < n; j++) g[j] = w * (RED_EXP(x[j] - l) - off);                      \
  }
LOSS_TYPES(CE_GRAD_ROW)

#define CE_KERNELS(ID, CT)                                                                     \
  static dle_status ce_fwd_##ID(dle_tensor *const *outs, dle_tensor *const *ins,               \
                                const dle_attrs *a) {                                          \
    CE_TARGETS("cross_entropy", ins[0], ins[1]);                                               \
    const CT *x = dle_tensor_data(ins[0]);                                                     \
    CT *loss = dle_tensor_data(outs[0]), *lse = dle_tensor_data(outs[1]);                      \
    ROW_LOSS_LOOP(CT, loss, c.reduction, c.n, c.n *c.c, count, const CT *row = x + i * c.c;    \
                  double l = row_lse_##ID(row, c.c); lse[i] = (CT)l;                           \
                  li = ce_ignored(&c, t[i]) ? 0 : l + target_term_##ID(row, t[i], &c););       \
    return DLE_OK;                                                                             \
  }                                                                                            \
  static dle_status ce_bwd_##ID(dle_tensor *out, dle_tensor *const *ins, const dle_attrs *a) { \
    CE_TARGETS("cross_entropy_backward", ins[1], ins[2]);                                      \
    const CT *gy = dle_tensor_data(ins[0]), *x = dle_tensor_data(ins[1]);                      \
    const CT *lse = dle_tensor_data(ins[3]);                                                   \
    CT *g = dle_tensor_data(out);                                                              \
    bool none = c.reduction == DLE_REDUCTION_NONE;                                             \
    double inv = cpu_loss_grad_scale(c.reduction, count);                                      \
    CT off = (CT)(c.eps / (double)c.c), hit = (CT)(1 - c.eps);                                 \
    _Pragma("omp parallel for schedule(static) if (c.n * c.c >= CPU_PARALLEL_GRAIN)")          \
    for (int64_t i = 0; i < c.n; i++) {                                                        \
      CT *gr = g + i * c.c;                                                                    \
      const CT *row = x + i * c.c;                                                             \
      if (ce_ignored(&c, t[i])) {                                                              \
        for (int64_t j = 0; j < c.c; j++) gr[j] = 0;                                           \
        continue;                                                                              \
      }                                                                                        \
      CT w = (CT)((double)gy[none ? i : 0] * inv), l = lse[i];                                 \
      ce_grad_row_##ID(gr, row, c.c, w, l, off);                                               \
      gr[t[i] - c.base] -= w * hit;                                                            \
    }                                                                                          \
    return DLE_OK;                                                                             \
  }
LOSS_TYPES(CE_KERNELS)

/* ---- cross-entropy against class probabilities ---- */

#define SOFT_CE_ROWS(ID, CT)                                                                     \
  /* sum of t (x - l) */                                                                         \
  static CPU_CLONES double row_dot_shifted_##ID(const CT *t, const CT *x, CT l, int64_t n) {     \
    CT acc[ROW_LANES] = {0}, s = 0;                                                              \
    int64_t j = 0;                                                                               \
    for (; j + ROW_LANES <= n; j += ROW_LANES)                                                   \
      for (int q = 0; q < ROW_LANES; q++) acc[q] += t[j + q] * (x[j + q] - l);                   \
    for (; j < n; j++) s += t[j] * (x[j] - l);                                                   \
    for (int q = 0; q < ROW_LANES; q++) s += acc[q];                                             \
    return s;                                                                                    \
  }                                                                                              \
  /* g = w (exp(x - l) sq - a t - b) */                                                          \
  static CPU_CLONES void soft_ce_grad_row_##ID(CT *g, const CT *x, const CT *t, int64_t n, CT w, \
                                               CT l, CT sq, CT a, CT b) {                        \
    for (int64_t j = 0; j < n; j++) g[j] = w * (RED_EXP(x[j] - l) * sq - a * t[j] - b);          \
  }
LOSS_TYPES(SOFT_CE_ROWS)

#define SOFT_CE_KERNELS(ID, CT)                                                                \
  static dle_status soft_ce_fwd_##ID(dle_tensor *const *outs, dle_tensor *const *ins,          \
                                     const dle_attrs *a) {                                     \
    int64_t n = ins[0]->sizes[0], c = ins[0]->sizes[1], red = a->ints[0];                      \
    double eps = a->f[0];                                                                      \
    const CT *x = dle_tensor_data(ins[0]), *t = dle_tensor_data(ins[1]);                       \
    CT *loss = dle_tensor_data(outs[0]), *lse = dle_tensor_data(outs[1]);                      \
    ROW_LOSS_LOOP(                                                                             \
        CT, loss, red, n, n *c, n, const CT *row = x + i * c, *tr = t + i * c;                 \
        CT l = (CT)row_lse_##ID(row, c); lse[i] = l;                                           \
        li = -(1 - eps) * row_dot_shifted_##ID(tr, row, l, c);                                 \
        if (eps > 0) li -= eps / (double)c * (row_sum_##ID(row, c) - (double)c * (double)l);); \
    return DLE_OK;                                                                             \
  }                                                                                            \
  /* ins gy, x, t, lse */                                                                      \
  static dle_status soft_ce_bwd_##ID(dle_tensor *out, dle_tensor *const *ins,                  \
                                     const dle_attrs *a) {                                     \
    int64_t n = ins[1]->sizes[0], c = ins[1]->sizes[1];                                        \
    bool none = a->ints[0] == DLE_REDUCTION_NONE;                                              \
    double eps = a->f[0], inv = cpu_loss_grad_scale(a->ints[0], n);                            \
    const CT *gy = dle_tensor_data(ins[0]), *x = dle_tensor_data(ins[1]);                      \
    const CT *t = dle_tensor_data(ins[2]), *lse = dle_tensor_data(ins[3]);                     \
    CT *g = dle_tensor_data(out);                                                              \
    _Pragma("omp parallel for schedule(static) if (n * c >= CPU_PARALLEL_GRAIN)")              \
    for (int64_t i = 0; i < n; i++) {                                                          \
      const CT *tr = t + i * c;                                                                \
      double sq = (1 - eps) * row_sum_##ID(tr, c) + eps;                                       \
      CT w = (CT)((double)gy[none ? i : 0] * inv);                                             \
      soft_ce_grad_row_##ID(g + i * c, x + i * c, tr, c, w, lse[i], (CT)sq, (CT)(1 - eps),     \
                            (CT)(eps / (double)c));                                            \
    }                                                                                          \
    return DLE_OK;                                                                             \
  }
LOSS_TYPES(SOFT_CE_KERNELS)

/* ---- dispatch over dtypes ---- */

#define LOSS_OPS(ID, CT)                                                                    \
  static dle_status losses_##ID(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, \
                                int nin, const dle_attrs *a) {                              \
    dle_tensor *o = outs[0];                                                                \
    switch (op) {                                                                           \
      case DLE_OP_CROSS_ENTROPY: return ce_fwd_##ID(outs, ins, a);                          \
      case DLE_OP_CROSS_ENTROPY_BACKWARD: return ce_bwd_##ID(o, ins, a);                    \
      case DLE_OP_NLL_LOSS: return nll_fwd_##ID(o, ins, a);                                 \
      case DLE_OP_NLL_LOSS_BACKWARD: return nll_bwd_##ID(o, ins, a);                        \
      case DLE_OP_SOFT_CROSS_ENTROPY: return soft_ce_fwd_##ID(outs, ins, a);                \
      case DLE_OP_SOFT_CROSS_ENTROPY_BACKWARD: return soft_ce_bwd_##ID(o, ins, a);          \
      default: return elementwise_loss_##ID(op, o, ins, nin, a); /* mse, bce with logits */ \
    }                                                                                       \
  }
LOSS_TYPES(LOSS_OPS)

CPU_FLOAT_FAMILY(losses)

void cpu_register_losses(dle_backend *b) {
#define REGISTER(OP) b->kernels[DLE_OP_##OP] = cpu_losses;
  REGISTER(CROSS_ENTROPY) REGISTER(CROSS_ENTROPY_BACKWARD) DLE_FUSED_LOSS_OPS(REGISTER)
#undef REGISTER
}
