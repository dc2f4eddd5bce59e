/* softmax.c — CPU kernels of softmax / log_softmax along one dim, for any strides: rows planned as
 * a reduction over that dim (reduce_plan.h), each row max, sum of exp(x - max), then the output. */
#include "backend.h"
#include "cpu_exp.h"
#include "cpu_loop.h"
#include "cpu_stream.h"
#include "cpu_vecmath.h"
#include "reduce_plan.h"

#include <tgmath.h> /* exp/log pick the float or double version from the argument's type */

#define SM_BLOCK 1024 /* softmax rows streamed side by side (stack buffers) */

/* The max of a row, NaN if it holds one: vectorised when contiguous. */
#define SM_MAX(ID, T, CT)                                       \
  static CT sm_max_##ID(const char *x, int64_t xs, int64_t D) { \
    if (xs == (int64_t)sizeof(T)) {                             \
      RED_EXTREME_FAST(MAX, ID, T, CT, (const T *)x, D, b, z)   \
      if (z == z) return b;                                     \
    }                                                           \
    CT m = RED_LOWEST(CT);                                      \
    for (int64_t r = 0; r < D; r++) {                           \
      CT v = LD_##ID(*(const T *)(x + r * xs));                 \
      m = STEP_MAX(CT, m, v, 0);                                \
    }                                                           \
    return m;                                                   \
  }

/* One row of D elements (strides in bytes): max, sum of exp(x - max) in double, then the output.
 * Contiguous rows of float32/float64 keep exp(x - max) in the output and scale it after. */
#define SOFTMAX_ROW(ID, T, CT)                                                                  \
  static void sm_row_##ID(char *y, int64_t ys, const char *x, int64_t xs, int64_t D, bool lg) { \
    CT m = sm_max_##ID(x, xs, D);                                                               \
    double s = 0;                                                                               \
    if (xs == (int64_t)sizeof(T) && ys == (int64_t)sizeof(T)) {                                 \
      const T *restrict xp = (const T *)x;                                                      \
      T *restrict yp = (T *)y;                                                                  \
      if (!lg && sizeof(T) == sizeof(CT)) {                                                     \
        _Pragma("omp simd reduction(+ : s)")                                                    \
        for (int64_t r = 0; r < D; r++) {                                                       \
          CT e = RED_EXP(LD_##ID(xp[r]) - m);                                                   \
          s += e;                                                                               \
          yp[r] = ST_##ID(e);                                                                   \
        }                                                                                       \
        CT inv = (CT)(1 / s);                                                                   \
        for (int64_t r = 0; r < D; r++) yp[r] = ST_##ID(LD_##ID(yp[r]) * inv);                  \
        return;                                                                                 \
      }                                                                                         \
      _Pragma("omp simd reduction(+ : s)")                                                      \
      for (int64_t r = 0; r < D; r++) s += RED_EXP(LD_##ID(xp[r]) - m);                         \
      CT k = lg ? (CT)log(s) : (CT)(1 / s);                                                     \
      if (lg)                                                                                   \
        for (int64_t r = 0; r < D; r++) yp[r] = ST_##ID(LD_##ID(xp[r]) - m - k);                \
      else                                                                                      \
        for (int64_t r = 0; r < D; r++) yp[r] = ST_##ID(RED_EXP(LD_##ID(xp[r]) - m) * k);       \
      return;                                                                                   \
    }                                                                                           \
    for (int64_t r = 0; r < D; r++) s += RED_EXP(LD_##ID(*(const T *)(x + r * xs)) - m);        \
    CT k = lg ? (CT)log(s) : (CT)(1 / s);                                                       \
    for (int64_t r = 0; r < D; r++) {                                                           \
      CT v = LD_##ID(*(const T *)(x + r * xs)) - m;                                             \
      *(T *)(y + r * ys) = ST_##ID(lg ? v - k : RED_EXP(v) * k);                                \
    }                                                                                           \
  }

/* n rows side by side (dim of stride xj in x, yj in y), streamed D times along the softmax dim
 * (strides xr, yr), so that every pass reads memory contiguously when xj is the element size. */
#define SM_BLOCK_PASSES(ID, T, CT, XJ, YJ)                                                         \
  for (int64_t r = 0; r < D; r++) {                                                                \
    const T *restrict xp = (const T *)(x + r * xr);                                                \
    for (int64_t j = 0; j < n; j++) {                                                              \
      CT v = LD_##ID(xp[j * (XJ)]);                                                                \
      m[j] = STEP_MAX(CT, m[j], v, 0);                                                             \
    }                                                                                              \
  }                                                                                                \
  if (!lg && sizeof(T) == sizeof(CT)) { /* keep exp(x - max) in y, then scale it */                \
    for (int64_t r = 0; r < D; r++) {                                                              \
      const T *restrict xp = (const T *)(x + r * xr);                                              \
      T *restrict yp = (T *)(y + r * yr);                                                          \
      for (int64_t j = 0; j < n; j++) {                                                            \
        CT e = RED_EXP(LD_##ID(xp[j * (XJ)]) - m[j]);                                              \
        s[j] += e;                                                                                 \
        yp[j * (YJ)] = ST_##ID(e);                                                                 \
      }                                                                                            \
    }                                                                                              \
    for (int64_t j = 0; j < n; j++) k[j] = (CT)(1 / s[j]);                                         \
    for (int64_t r = 0; r < D; r++) {                                                              \
      T *restrict yp = (T *)(y + r * yr);                                                          \
      for (int64_t j = 0; j < n; j++) yp[j * (YJ)] = ST_##ID(LD_##ID(yp[j * (YJ)]) * k[j]);        \
    }                                                                                              \
    return;                                                                                        \
  }                                                                                                \
  for (int64_t r = 0; r < D; r++) {                                                                \
    const T *restrict xp = (const T *)(x + r * xr);                                                \
    for (int64_t j = 0; j < n; j++) s[j] += RED_EXP(LD_##ID(xp[j * (XJ)]) - m[j]);                 \
  }                                                                                                \
  for (int64_t j = 0; j < n; j++) k[j] = lg ? (CT)log(s[j]) : (CT)(1 / s[j]);                      \
  for (int64_t r = 0; r < D; r++) {                                                                \
    const T *restrict xp = (const T *)(x + r * xr);                                                \
    T *restrict yp = (T *)(y + r * yr);                                                            \
    if (lg)                                                                                        \
      for (int64_t j = 0; j < n; j++) yp[j * (YJ)] = ST_##ID(LD_##ID(xp[j * (XJ)]) - m[j] - k[j]); \
    else                                                                                           \
      for (int64_t j = 0; j < n; j++)                                                              \
        yp[j * (YJ)] = ST_##ID(RED_EXP(LD_##ID(xp[j * (XJ)]) - m[j]) * k[j]);                      \
  }
#define SOFTMAX_BLOCK(ID, T, CT)                                                        \
  static void sm_block_##ID(char *y, int64_t yj, int64_t yr, const char *x, int64_t xj, \
                            int64_t xr, int64_t n, int64_t D, bool lg) {                \
    CT m[SM_BLOCK], k[SM_BLOCK];                                                        \
    double s[SM_BLOCK];                                                                 \
    for (int64_t j = 0; j < n; j++) m[j] = RED_LOWEST(CT), s[j] = 0;                    \
    if (xj == (int64_t)sizeof(T) && yj == (int64_t)sizeof(T)) {                         \
      SM_BLOCK_PASSES(ID, T, CT, 1, 1)                                                  \
    } else {                                                                            \
      int64_t xje = xj / (int64_t)sizeof(T), yje = yj / (int64_t)sizeof(T);             \
      SM_BLOCK_PASSES(ID, T, CT, xje, yje)                                              \
    }                                                                                   \
  }
CPU_FLOAT_TYPES(SM_MAX)
CPU_FLOAT_TYPES(SOFTMAX_ROW)
CPU_FLOAT_TYPES(SOFTMAX_BLOCK)

typedef void (*sm_row_fn)(char *, int64_t, const char *, int64_t, int64_t, bool);
typedef void (*sm_block_fn)(char *, int64_t, int64_t, const char *, int64_t, int64_t, int64_t,
                            int64_t, bool);
#define SM_ROW_ENTRY(ID, T, CT)   [DLE_##ID] = sm_row_##ID,
#define SM_BLOCK_ENTRY(ID, T, CT) [DLE_##ID] = sm_block_##ID,
static const sm_row_fn sm_rows[DLE_NUM_DTYPES] = {CPU_FLOAT_TYPES(SM_ROW_ENTRY)};
static const sm_block_fn sm_blocks[DLE_NUM_DTYPES] = {CPU_FLOAT_TYPES(SM_BLOCK_ENTRY)};

/* stream: write float32 rows with streaming stores (a large output, cpu_stream.h). */
static void sm_chunk(const red_plan *pl, int64_t i, char *y, int64_t es, dle_dtype dt, bool lg,
                     bool stream) {
  red_chunk c;
  chunk_get(pl, i, &c);
  int64_t D = pl->rs[0], xr = pl->rx[0], yr = pl->ro[0] * es;
  if (pl->stream) {
    sm_blocks[dt](y + c.out_off * es, c.os * es, yr, pl->x + c.in_off, pl->kx[pl->k0], xr, c.n, D,
                  lg);
    return;
  }
  int64_t id[DLE_MAX_DIMS], xo = c.in_off, yo = c.out_off;
  int last = pl->nk - 1;
  group_seek(pl->nk, pl->ks, pl->kx, c.first, id);
  bool vec = dt == DLE_F32 && cpu_vec && xr == sizeof(float) && yr == sizeof(float);
  for (int64_t k = 0; k < c.n; k++) {
    if (vec)
      cpu_vec->softmax_row((float *)(y + yo * es), (const float *)(pl->x + xo), D, lg, stream);
    else
      sm_rows[dt](y + yo * es, yr, pl->x + xo, xr, D, lg);
    xo += pl->kx[last], yo += pl->ko[last];
    if (++id[last] == pl->ks[last] && k + 1 < c.n) {
      for (int d = last; d > 0 && id[d] == pl->ks[d]; d--) {
        xo += pl->kx[d - 1] - id[d] * pl->kx[d];
        yo += pl->ko[d - 1] - id[d] * pl->ko[d];
        id[d] = 0;
        id[d - 1]++;
      }
    }
  }
  if (vec && stream) cpu_stream_fence();
}

/* attrs.ints[0]: the dim (0-based, checked); no ints for a 0-dim input. Output contiguous. */
static DLE_KERNEL(cpu_softmax) {
  dle_tensor *x = ins[0], *y = outs[0];
  if (!sm_rows[x->dtype])
    return dle_error("%s: no CPU kernel for dtype %s", dle_op_get_info(op)->name,
                     dle_dtype_name(x->dtype));
  bool red[DLE_MAX_DIMS] = {false};
  if (a->nints > 0) red[a->ints[0]] = true;
  int64_t ostr[DLE_MAX_DIMS];
  dle_contiguous_strides(y->ndim, y->sizes, ostr);
  red_plan pl;
  plan_build(&pl, x, ostr, red, true);
  if (pl.nout == 0 || pl.nred == 0) return DLE_OK;
  int nt = red_threads();
  bool par = nt > 1 && (double)pl.nout * (double)pl.nred >= CPU_PARALLEL_GRAIN;
  /* 16 chunks per thread, taken dynamically: a thread that loses its core on a shared machine
   * leaves its remaining rows to the others */
  plan_chunks(&pl, par ? 4 * nt : 1, SM_BLOCK);
  char *yd = dle_tensor_data(y);
  int64_t es = cpu_esize(y->dtype);
  bool lg = op == DLE_OP_LOG_SOFTMAX, stream = cpu_stream_output(pl.nout * pl.nred * es);
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (par && pl.nchunks > 1)
#endif
  for (int64_t i = 0; i < pl.nchunks; i++) sm_chunk(&pl, i, yd, es, y->dtype, lg, stream);
  return DLE_OK;
}

void cpu_register_softmax(dle_backend *b) {
  for (int op = 0; op < DLE_NUM_OPS; op++)
    if (dle_op_get_info((dle_op)op)->kind == DLE_KIND_SOFTMAX) b->kernels[op] = cpu_softmax;
}
