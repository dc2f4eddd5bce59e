/* rnn.c — CPU kernels of the fused recurrent cells (kind RNN: lstm_cell, gru_cell and their
 * backward ops; shapes and layouts in engine/ops/rnn.c). Inputs and outputs are contiguous {N, k H}
 * rows; each element (n, j < H) reads its gate columns j, j + H, ... of row n. One body per op,
 * instantiated per float dtype (float16/bfloat16 compute in float, as cpu_types.h says). */
#include "backend.h"
#include "cpu_loop.h"
#include "cpu_types.h"
#include "cpu_vecmath.h"

static inline float sigm_f(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline double sigm_d(double x) { return 1.0 / (1.0 + exp(-x)); }
#define SIGM(CT, x) _Generic((CT)0, float : sigm_f, default : sigm_d)(x)
#define TANH(CT, x) _Generic((CT)0, float : tanhf, default : tanh)(x)

/* Row loop shared by the kernels (whose parameters N and H it reads): the body sees n (row) and
 * j (column < H). About 8 transcendental-sized steps per element decide the threading. */
#define RNN_ROWS(...)                                                         \
  do {                                                                        \
    _Pragma("omp parallel for schedule(static) if (cpu_parallel(N * H * 8))") \
    for (int64_t n = 0; n < N; n++)                                           \
      for (int64_t j = 0; j < H; j++) { __VA_ARGS__ }                         \
  } while (0)

#define LSTM_FWD(ID, T, CT)                                                                      \
  static void lstm_fwd_##ID(dle_tensor *const *o, dle_tensor *const *in, int64_t N, int64_t H) { \
    const T *xg = dle_tensor_data(in[0]), *hg = dle_tensor_data(in[1]),                          \
            *c = dle_tensor_data(in[2]);                                                         \
    T *ho = dle_tensor_data(o[0]), *co = dle_tensor_data(o[1]), *act = dle_tensor_data(o[2]);    \
    RNN_ROWS({                                                                                   \
      const T *x = xg + n * 4 * H + j, *hh = hg + n * 4 * H + j;                                 \
      T *a = act + n * 4 * H + j;                                                                \
      CT i = SIGM(CT, (CT)LD_##ID(x[0]) + (CT)LD_##ID(hh[0]));                                   \
      CT f = SIGM(CT, (CT)LD_##ID(x[H]) + (CT)LD_##ID(hh[H]));                                   \
      CT g = TANH(CT, (CT)LD_##ID(x[2 * H]) + (CT)LD_##ID(hh[2 * H]));                           \
      CT og = SIGM(CT, (CT)LD_##ID(x[3 * H]) + (CT)LD_##ID(hh[3 * H]));                          \
      CT cn = f * (CT)LD_##ID(c[n * H + j]) + i * g;                                             \
      co[n * H + j] = ST_##ID(cn);                                                               \
      ho[n * H + j] = ST_##ID(og * TANH(CT, cn));                                                \
      a[0] = ST_##ID(i), a[H] = ST_##ID(f), a[2 * H] = ST_##ID(g), a[3 * H] = ST_##ID(og);       \
    });                                                                                          \
  }

/* d c' = gc + gh o (1 - tanh(c')^2); gates: d i = dc' g i (1 - i), d f = dc' c f (1 - f),
 * d g = dc' i (1 - g^2), d o = gh tanh(c') o (1 - o); d c = dc' f */
#define LSTM_BWD(ID, T, CT)                                                                      \
  static void lstm_bwd_##ID(dle_tensor *const *o, dle_tensor *const *in, int64_t N, int64_t H) { \
    const T *gh = dle_tensor_data(in[0]), *gc = dle_tensor_data(in[1]),                          \
            *act = dle_tensor_data(in[2]), *c = dle_tensor_data(in[3]),                          \
            *cn = dle_tensor_data(in[4]);                                                        \
    T *dg = dle_tensor_data(o[0]), *dc = dle_tensor_data(o[1]);                                  \
    RNN_ROWS({                                                                                   \
      const T *a = act + n * 4 * H + j;                                                          \
      T *d = dg + n * 4 * H + j;                                                                 \
      int64_t e = n * H + j;                                                                     \
      CT i = (CT)LD_##ID(a[0]), f = (CT)LD_##ID(a[H]), g = (CT)LD_##ID(a[2 * H]);                \
      CT og = (CT)LD_##ID(a[3 * H]), tc = TANH(CT, (CT)LD_##ID(cn[e]));                          \
      CT ghe = (CT)LD_##ID(gh[e]);                                                               \
      CT dct = (CT)LD_##ID(gc[e]) + ghe * og * (1 - tc * tc);                                    \
      d[0] = ST_##ID(dct * g * i * (1 - i));                                                     \
      d[H] = ST_##ID(dct * (CT)LD_##ID(c[e]) * f * (1 - f));                                     \
      d[2 * H] = ST_##ID(dct * i * (1 - g * g));                                                 \
      d[3 * H] = ST_##ID(ghe * tc * og * (1 - og));                                              \
      dc[e] = ST_##ID(dct * f);                                                                  \
    });                                                                                          \
  }

#define GRU_FWD(ID, T, CT)                                                                      \
  static void gru_fwd_##ID(dle_tensor *const *o, dle_tensor *const *in, int64_t N, int64_t H) { \
    const T *xg = dle_tensor_data(in[0]), *hg = dle_tensor_data(in[1]),                         \
            *hp = dle_tensor_data(in[2]);                                                       \
    T *ho = dle_tensor_data(o[0]), *act = dle_tensor_data(o[1]);                                \
    RNN_ROWS({                                                                                  \
      const T *x = xg + n * 3 * H + j, *hh = hg + n * 3 * H + j;                                \
      T *a = act + n * 4 * H + j;                                                               \
      CT r = SIGM(CT, (CT)LD_##ID(x[0]) + (CT)LD_##ID(hh[0]));                                  \
      CT z = SIGM(CT, (CT)LD_##ID(x[H]) + (CT)LD_##ID(hh[H]));                                  \
      CT hn = (CT)LD_##ID(hh[2 * H]);                                                           \
      CT nn = TANH(CT, (CT)LD_##ID(x[2 * H]) + r * hn);                                         \
      ho[n * H + j] = ST_##ID((1 - z) * nn + z * (CT)LD_##ID(hp[n * H + j]));                   \
      a[0] = ST_##ID(r), a[H] = ST_##ID(z), a[2 * H] = ST_##ID(nn), a[3 * H] = ST_##ID(hn);     \
    });                                                                                         \
  }

/* d n_pre = gh (1 - z) (1 - n^2); d r_pre = d n_pre hn r (1 - r); d z_pre = gh (h - n) z (1 - z);
 * d xg = (d r_pre, d z_pre, d n_pre), d hg = (d r_pre, d z_pre, d n_pre r), d h = gh z */
#define GRU_BWD(ID, T, CT)                                                                      \
  static void gru_bwd_##ID(dle_tensor *const *o, dle_tensor *const *in, int64_t N, int64_t H) { \
    const T *gh = dle_tensor_data(in[0]), *act = dle_tensor_data(in[1]),                        \
            *hp = dle_tensor_data(in[2]);                                                       \
    T *dx = dle_tensor_data(o[0]), *dhg = dle_tensor_data(o[1]), *dh = dle_tensor_data(o[2]);   \
    RNN_ROWS({                                                                                  \
      const T *a = act + n * 4 * H + j;                                                         \
      T *px = dx + n * 3 * H + j, *ph = dhg + n * 3 * H + j;                                    \
      int64_t e = n * H + j;                                                                    \
      CT r = (CT)LD_##ID(a[0]), z = (CT)LD_##ID(a[H]), nn = (CT)LD_##ID(a[2 * H]);              \
      CT hn = (CT)LD_##ID(a[3 * H]), g = (CT)LD_##ID(gh[e]);                                    \
      CT dn = g * (1 - z) * (1 - nn * nn);                                                      \
      CT dr = dn * hn * r * (1 - r);                                                            \
      CT dz = g * ((CT)LD_##ID(hp[e]) - nn) * z * (1 - z);                                      \
      px[0] = ph[0] = ST_##ID(dr);                                                              \
      px[H] = ph[H] = ST_##ID(dz);                                                              \
      px[2 * H] = ST_##ID(dn);                                                                  \
      ph[2 * H] = ST_##ID(dn * r);                                                              \
      dh[e] = ST_##ID(g * z);                                                                   \
    });                                                                                         \
  }

CPU_FLOAT_TYPES(LSTM_FWD)
CPU_FLOAT_TYPES(LSTM_BWD)
CPU_FLOAT_TYPES(GRU_FWD)
CPU_FLOAT_TYPES(GRU_BWD)

typedef void (*rnn_fn)(dle_tensor *const *o, dle_tensor *const *in, int64_t N, int64_t H);

/* float32 with the AVX2 sigmoid and tanh of cpu_vecmath (cpu_vec non-NULL): the same steps row by
 * row, the transcendentals over whole blocks of H in place. */
#define VEC(op, p, n) cpu_vec->unary[DLE_OP_##op]((p), (p), (n))

static void lstm_fwd_vec(dle_tensor *const *o, dle_tensor *const *in, int64_t N, int64_t H) {
  const float *xg = dle_tensor_data(in[0]), *hg = dle_tensor_data(in[1]),
              *c = dle_tensor_data(in[2]);
  float *ho = dle_tensor_data(o[0]), *co = dle_tensor_data(o[1]), *act = dle_tensor_data(o[2]);
#pragma omp parallel for schedule(static) if (cpu_parallel(N * H * 8))
  for (int64_t n = 0; n < N; n++) {
    float *a = act + n * 4 * H, *hr = ho + n * H, *cr = co + n * H;
    const float *x = xg + n * 4 * H, *hh = hg + n * 4 * H, *cp = c + n * H;
    for (int64_t j = 0; j < 4 * H; j++) a[j] = x[j] + hh[j];
    VEC(SIGMOID, a, 2 * H);
    VEC(TANH, a + 2 * H, H);
    VEC(SIGMOID, a + 3 * H, H);
    for (int64_t j = 0; j < H; j++) cr[j] = a[H + j] * cp[j] + a[j] * a[2 * H + j];
    for (int64_t j = 0; j < H; j++) hr[j] = cr[j];
    VEC(TANH, hr, H);
    for (int64_t j = 0; j < H; j++) hr[j] *= a[3 * H + j];
  }
}

static void lstm_bwd_vec(dle_tensor *const *o, dle_tensor *const *in, int64_t N, int64_t H) {
  const float *gh = dle_tensor_data(in[0]), *gc = dle_tensor_data(in[1]),
              *act = dle_tensor_data(in[2]), *c = dle_tensor_data(in[3]),
              *cn = dle_tensor_data(in[4]);
  float *dg = dle_tensor_data(o[0]), *dc = dle_tensor_data(o[1]);
#pragma omp parallel for schedule(static) if (cpu_parallel(N * H * 8))
  for (int64_t n = 0; n < N; n++) {
    const float *a = act + n * 4 * H;
    float *d = dg + n * 4 * H, *tc = dc + n * H; /* dc's row holds tanh(c') until overwritten */
    for (int64_t j = 0; j < H; j++) tc[j] = cn[n * H + j];
    VEC(TANH, tc, H);
    for (int64_t j = 0; j < H; j++) {
      int64_t e = n * H + j;
      float i = a[j], f = a[H + j], g = a[2 * H + j], og = a[3 * H + j], t = tc[j], ghe = gh[e];
      float dct = gc[e] + ghe * og * (1 - t * t);
      d[j] = dct * g * i * (1 - i);
      d[H + j] = dct * c[e] * f * (1 - f);
      d[2 * H + j] = dct * i * (1 - g * g);
      d[3 * H + j] = ghe * t * og * (1 - og);
      tc[j] = dct * f;
    }
  }
}

static void gru_fwd_vec(dle_tensor *const *o, dle_tensor *const *in, int64_t N, int64_t H) {
  const float *xg = dle_tensor_data(in[0]), *hg = dle_tensor_data(in[1]),
              *hp = dle_tensor_data(in[2]);
  float *ho = dle_tensor_data(o[0]), *act = dle_tensor_data(o[1]);
#pragma omp parallel for schedule(static) if (cpu_parallel(N * H * 8))
  for (int64_t n = 0; n < N; n++) {
    float *a = act + n * 4 * H, *hr = ho + n * H;
    const float *x = xg + n * 3 * H, *hh = hg + n * 3 * H, *p = hp + n * H;
    for (int64_t j = 0; j < 2 * H; j++) a[j] = x[j] + hh[j];
    VEC(SIGMOID, a, 2 * H);
    for (int64_t j = 0; j < H; j++) {
      a[3 * H + j] = hh[2 * H + j];
      a[2 * H + j] = x[2 * H + j] + a[j] * hh[2 * H + j];
    }
    VEC(TANH, a + 2 * H, H);
    for (int64_t j = 0; j < H; j++) hr[j] = (1 - a[H + j]) * a[2 * H + j] + a[H + j] * p[j];
  }
}

#define RNN_TABLE(ID, T, CT) \
  [DLE_##ID] = {lstm_fwd_##ID, gru_fwd_##ID, lstm_bwd_##ID, gru_bwd_##ID},
static const rnn_fn rnn_fns[DLE_NUM_DTYPES][4] = {CPU_FLOAT_TYPES(RNN_TABLE)};

static DLE_KERNEL(cpu_rnn) {
  /* the {N, H} state: c (lstm_cell), h (gru_cell), c (lstm_cell_fused_backward), h (gru_cell_fused_backward) */
  int which = op == DLE_OP_LSTM_CELL_FUSED            ? 0
              : op == DLE_OP_GRU_CELL_FUSED           ? 1
              : op == DLE_OP_LSTM_CELL_FUSED_BACKWARD ? 2
                                                      : 3;
  const dle_tensor *st = ins[which == 2 ? 3 : 2];
  rnn_fn f = rnn_fns[st->dtype][which];
  /* float32 with the vector sigmoid and tanh (gru_cell_fused_backward has no transcendental) */
  if (st->dtype == DLE_F32 && cpu_vec && cpu_vec->unary[DLE_OP_SIGMOID] &&
      cpu_vec->unary[DLE_OP_TANH]) {
    static const rnn_fn vec[4] = {lstm_fwd_vec, gru_fwd_vec, lstm_bwd_vec, NULL};
    if (vec[which]) f = vec[which];
  }
  if (!f)
    return dle_error("%s: no CPU kernel for %s", dle_op_get_info(op)->name,
                     dle_dtype_name(st->dtype));
  f(outs, ins, st->sizes[0], st->sizes[1]);
  return DLE_OK;
}

void cpu_register_rnn(dle_backend *b) {
  CPU_REGISTER(b, cpu_rnn, DLE_OP_LSTM_CELL_FUSED, DLE_OP_GRU_CELL_FUSED,
               DLE_OP_LSTM_CELL_FUSED_BACKWARD, DLE_OP_GRU_CELL_FUSED_BACKWARD);
}
