/* ctc.c — CPU kernel of the CTC loss (kind CTC: ctc_loss, ctc_loss_backward; layouts in
 * engine/ops/ctc.c). PyTorch's algorithm: per sample, the extended target l' (blanks around and
 * between the labels, 2 L + 1 states), the forward variables log_alpha over T x (2 L + 1) in log
 * space, nll = -log(alpha(T-1, 2L) + alpha(T-1, 2L-1)); backward adds the backward variables
 * log_beta and gives d nll / d log_probs(t, c) = exp(lp) - exp(log sum over s with l'(s) = c of
 * alpha beta + nll - lp). Log-space sums are in double; inputs are contiguous. */
#include "backend.h"
#include "cpu_types.h"

#include <stdlib.h>

static inline double lse2(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  double m = a > b ? a : b;
  return m + log1p(exp(-fabs(a - b)));
}

/* One sample's geometry: its lengths, where its labels start, the blank. */
typedef struct {
  int64_t T, L, off, blank, S, base; /* S: states of the widest target, 2 S' + 1; base: what
                                        * target values count from */
} ctc_sample;

static inline int64_t label(const int64_t *tg, const ctc_sample *c, int64_t s) {
  return s % 2 == 0 ? c->blank : tg[c->off + s / 2] - c->base;
}

/* Reads sample n's lengths and target offset, checking them (an error message or NULL). */
static dle_status sample_of(const int64_t *il, const int64_t *tl, const int64_t *tg,
                            dle_tensor *targets, int64_t n, int64_t T, int64_t C, int64_t S,
                            const dle_attrs *a, ctc_sample *c) {
  c->T = il[n], c->L = tl[n], c->blank = a->ints[0], c->S = S, c->base = a->index_base;
  if (c->T < 0 || c->T > T)
    return dle_error(
        "ctc_loss: input_lengths[%lld] = %lld is outside [0, %lld] (log_probs has T = %lld)",
        (long long)(n + a->index_base), (long long)c->T, (long long)T, (long long)T);
  int64_t per = targets->ndim == 2 ? targets->sizes[1] : -1;
  if (c->L < 0 || (per >= 0 && c->L > per))
    return dle_error("ctc_loss: target_lengths[%lld] = %lld is outside [0, %lld] (targets %s)",
                     (long long)(n + a->index_base), (long long)c->L,
                     (long long)(per >= 0 ? per : 0), SHAPE(targets));
  if (per >= 0) {
    c->off = n * per;
  } else {
    c->off = 0;
    for (int64_t k = 0; k < n; k++) c->off += tl[k];
    if (c->off + c->L > targets->sizes[0])
      return dle_error("ctc_loss: the target lengths sum past the %lld concatenated targets",
                       (long long)targets->sizes[0]);
  }
  for (int64_t k = 0; k < c->L; k++) {
    int64_t v = tg[c->off + k] - a->index_base;
    if (v < 0 || v >= C || v == c->blank)
      return dle_error(
          "ctc_loss: target %lld of sample %lld is %lld, not a class in [%lld, %lld] "
          "other than the blank %lld",
          (long long)(k + a->index_base), (long long)(n + a->index_base), (long long)tg[c->off + k],
          (long long)a->index_base, (long long)(C - 1 + a->index_base),
          (long long)(c->blank + a->index_base));
  }
  return DLE_OK;
}

/* The forward (alpha) or backward (beta) variables of one sample into v {T, S}; returns the nll
 * (from alpha) or unused. lp(t, c) reads log_probs in double. */
#define CTC_KERNELS(ID, T_, CT)                                                                \
  static double lp_##ID(const T_ *lp, int64_t t, int64_t n, int64_t c, int64_t N, int64_t C) { \
    return (double)LD_##ID(lp[(t * N + n) * C + c]);                                           \
  }                                                                                            \
  static double alpha_##ID(const T_ *lp, const int64_t *tg, const ctc_sample *c, int64_t n,    \
                           int64_t N, int64_t C, double *al) {                                 \
    int64_t S2 = 2 * c->L + 1;                                                                 \
    for (int64_t k = 0; k < c->T * c->S; k++) al[k] = -INFINITY;                               \
    if (c->T == 0) return c->L == 0 ? 0 : INFINITY;                                            \
    al[0] = lp_##ID(lp, 0, n, c->blank, N, C);                                                 \
    if (c->L > 0) al[1] = lp_##ID(lp, 0, n, label(tg, c, 1), N, C);                            \
    for (int64_t t = 1; t < c->T; t++)                                                         \
      for (int64_t s = 0; s < S2; s++) {                                                       \
        int64_t l = label(tg, c, s);                                                           \
        const double *p = al + (t - 1) * c->S;                                                 \
        double v = p[s];                                                                       \
        if (s > 0) v = lse2(v, p[s - 1]);                                                      \
        if (s > 1 && l != c->blank && l != label(tg, c, s - 2)) v = lse2(v, p[s - 2]);         \
        al[t * c->S + s] = v == -INFINITY ? v : v + lp_##ID(lp, t, n, l, N, C);                \
      }                                                                                        \
    const double *e = al + (c->T - 1) * c->S;                                                  \
    return -(c->L > 0 ? lse2(e[S2 - 1], e[S2 - 2]) : e[0]);                                    \
  }                                                                                            \
  static void beta_##ID(const T_ *lp, const int64_t *tg, const ctc_sample *c, int64_t n,       \
                        int64_t N, int64_t C, double *be) {                                    \
    int64_t S2 = 2 * c->L + 1;                                                                 \
    for (int64_t k = 0; k < c->T * c->S; k++) be[k] = -INFINITY;                               \
    if (c->T == 0) return;                                                                     \
    double *last = be + (c->T - 1) * c->S;                                                     \
    last[S2 - 1] = lp_##ID(lp, c->T - 1, n, c->blank, N, C);                                   \
    if (c->L > 0) last[S2 - 2] = lp_##ID(lp, c->T - 1, n, label(tg, c, S2 - 2), N, C);         \
    for (int64_t t = c->T - 2; t >= 0; t--)                                                    \
      for (int64_t s = 0; s < S2; s++) {                                                       \
        int64_t l = label(tg, c, s);                                                           \
        const double *q = be + (t + 1) * c->S;                                                 \
        double v = q[s];                                                                       \
        if (s < S2 - 1) v = lse2(v, q[s + 1]);                                                 \
        if (s < S2 - 2 && l != c->blank && l != label(tg, c, s + 2)) v = lse2(v, q[s + 2]);    \
        be[t * c->S + s] = v == -INFINITY ? v : v + lp_##ID(lp, t, n, l, N, C);                \
      }                                                                                        \
  }                                                                                            \
  static dle_status ctc_fwd_##ID(dle_tensor *const *o, dle_tensor *const *in,                  \
                                 const dle_attrs *a) {                                         \
    dle_tensor *lpt = in[0];                                                                   \
    const T_ *lp = dle_tensor_data(lpt);                                                       \
    const int64_t *tg = dle_tensor_data(in[1]), *il = dle_tensor_data(in[2]),                  \
                  *tl = dle_tensor_data(in[3]);                                                \
    int64_t T = lpt->sizes[0], N = lpt->sizes[1], C = lpt->sizes[2], S = o[1]->sizes[2];       \
    T_ *nll = dle_tensor_data(o[0]);                                                           \
    double *al = dle_tensor_data(o[1]);                                                        \
    for (int64_t n = 0; n < N; n++) {                                                          \
      ctc_sample c;                                                                            \
      DLE_TRY(sample_of(il, tl, tg, in[1], n, T, C, S, a, &c));                                \
      for (int64_t k = c.T * S; k < T * S; k++) al[n * T * S + k] = -INFINITY;                 \
      nll[n] = ST_##ID(alpha_##ID(lp, tg, &c, n, N, C, al + n * T * S));                       \
    }                                                                                          \
    return DLE_OK;                                                                             \
  }                                                                                            \
  static dle_status ctc_bwd_##ID(dle_tensor *const *o, dle_tensor *const *in,                  \
                                 const dle_attrs *a) {                                         \
    dle_tensor *lpt = in[1];                                                                   \
    const T_ *gy = dle_tensor_data(in[0]), *lp = dle_tensor_data(lpt),                         \
             *nll = dle_tensor_data(in[5]);                                                    \
    const int64_t *tg = dle_tensor_data(in[2]), *il = dle_tensor_data(in[3]),                  \
                  *tl = dle_tensor_data(in[4]);                                                \
    const double *alpha = dle_tensor_data(in[6]);                                              \
    int64_t T = lpt->sizes[0], N = lpt->sizes[1], C = lpt->sizes[2], S = in[6]->sizes[2];      \
    T_ *g = dle_tensor_data(o[0]);                                                             \
    double *be = malloc(sizeof(double) * (size_t)(T * S + C + 1));                             \
    if (!be) return dle_error("ctc_loss_backward: out of memory");                             \
    double *acc = be + T * S;                                                                  \
    dle_status st = DLE_OK;                                                                    \
    for (int64_t n = 0; n < N && st == DLE_OK; n++) {                                          \
      ctc_sample c;                                                                            \
      st = sample_of(il, tl, tg, in[2], n, T, C, S, a, &c);                                    \
      if (st != DLE_OK) break;                                                                 \
      double nl = (double)LD_##ID(nll[n]), gn = (double)LD_##ID(gy[n]);                        \
      bool zero = a->ints[1] && isinf(nl);                                                     \
      if (!zero) beta_##ID(lp, tg, &c, n, N, C, be);                                           \
      const double *al = alpha + n * T * S;                                                    \
      for (int64_t t = 0; t < T; t++) {                                                        \
        T_ *gr = g + (t * N + n) * C;                                                          \
        if (zero || t >= c.T) {                                                                \
          for (int64_t k = 0; k < C; k++) gr[k] = ST_##ID(0.0);                                \
          continue;                                                                            \
        }                                                                                      \
        for (int64_t k = 0; k < C; k++) acc[k] = -INFINITY;                                    \
        for (int64_t s = 0; s < 2 * c.L + 1; s++) {                                            \
          int64_t l = label(tg, &c, s);                                                        \
          acc[l] = lse2(acc[l], al[t * S + s] + be[t * S + s]);                                \
        }                                                                                      \
        for (int64_t k = 0; k < C; k++) {                                                      \
          double l = lp_##ID(lp, t, n, k, N, C);                                               \
          double r = acc[k] == -INFINITY ? 0 : exp(acc[k] + nl - l);                           \
          gr[k] = ST_##ID((exp(l) - r) * gn);                                                  \
        }                                                                                      \
      }                                                                                        \
    }                                                                                          \
    free(be);                                                                                  \
    return st;                                                                                 \
  }

CPU_FLOAT_TYPES(CTC_KERNELS)

typedef dle_status (*ctc_fn)(dle_tensor *const *o, dle_tensor *const *in, const dle_attrs *a);
#define CTC_TABLE(ID, T_, CT) [DLE_##ID] = {ctc_fwd_##ID, ctc_bwd_##ID},
static const ctc_fn ctc_fns[DLE_NUM_DTYPES][2] = {CPU_FLOAT_TYPES(CTC_TABLE)};

static DLE_KERNEL(cpu_ctc) {
  bool bwd = op == DLE_OP_CTC_LOSS_BACKWARD;
  dle_dtype dt = ins[bwd ? 1 : 0]->dtype;
  ctc_fn f = ctc_fns[dt][bwd];
  if (!f)
    return dle_error("%s: no CPU kernel for %s", dle_op_get_info(op)->name, dle_dtype_name(dt));
  return f(outs, ins, a);
}

void cpu_register_ctc(dle_backend *b) {
  CPU_REGISTER(b, cpu_ctc, DLE_OP_CTC_LOSS, DLE_OP_CTC_LOSS_BACKWARD);
}
