/* scan.c — CPU kernels of the scan ops (cumsum, cumprod, logcumsumexp, cummax, cummin; kind SCAN).
 *
 * The input is a strided block {outer, n, inner} scanned along n (engine/kernel/scan_geom.h); the
 * outputs are contiguous. Three ways through it:
 *   lines    inner = 1: one running state per line, OpenMP over the lines;
 *   blocked  (cumsum) fewer lines than threads but long ones: each thread reduces its slice of
 *            the line, then scans it again starting from the combined totals of the slices before
 *            it (two passes over the input, so 2 threads help a single line of 1M floats);
 *   columns  inner > 1: states for up to SCAN_COLS adjacent columns, advanced row by row.
 * Float states are double (PyTorch's CPU accumulator for float32 too), integer ones int64 (uint64
 * for uint64) with wrapping arithmetic. cummax/cummin keep the last position of the running extreme on ties, and a
 * NaN, once seen, stays the extreme (each later NaN takes its place), as PyTorch does. */
#include "../../engine/kernel/scan_geom.h"
#include "backend.h"
#include "cpu_loop.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define SCAN_COLS    64
#define SCAN_MAX_THR 64
#define NO_INDEX     INT64_MIN /* an extreme's state before its first element */

/* A running state: the value (double for float dtypes, uint64 for uint64, int64 for the other
 * integer ones) and, for cummax/cummin, the index of the extreme (index_base added). */
typedef struct {
  union {
    double f;
    int64_t i;
    uint64_t u; /* same bits as i for the identities 0 and 1 (state_init) */
  } v;
  int64_t idx;
} scan_state;

/* The element-wise combining steps, for a double or an int64 state. */
static inline double add_f(double a, double b) { return a + b; }
static inline int64_t add_i(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline double mul_f(double a, double b) { return a * b; }
static inline int64_t mul_i(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static inline uint64_t add_u(uint64_t a, uint64_t b) { return a + b; } /* modulo 2^64 */
static inline uint64_t mul_u(uint64_t a, uint64_t b) { return a * b; }
/* logcumsumexp has float kernels only; _Generic still needs integer branches that compile */
static inline int64_t lae_i(int64_t a, int64_t b) { return a > b ? a : b; }
#define lae_u lae_i
/* log(exp(a) + exp(b)) without overflow; -inf and +inf pass through, NaN propagates */
static inline double lae_f(double a, double b) {
  if (a != a || b != b) return a + b;
  double hi = a > b ? a : b, lo = a > b ? b : a;
  if (lo == -INFINITY || hi == INFINITY) return hi;
  return hi + log1p(exp(lo - hi));
}
#define STEP(name, AT, a, b) \
  _Generic((AT)0, double : name##_f, uint64_t : name##_u, default : name##_i)(a, b)
/* Does v replace the running extreme a? Ties go to the later element; a NaN replaces anything,
 * and only a NaN replaces a NaN. (One comparison while a is a number: !(v < a) is v >= a or v NaN.) */
#define MAX_BETTER(v, a) ((a) == (a) ? !((v) < (a)) : (v) != (v))
#define MIN_BETTER(v, a) ((a) == (a) ? !((v) > (a)) : (v) != (v))

typedef void (*line_fn)(const void *x, int64_t sx, void *y, int64_t sy, int64_t *ix, int64_t n,
                        int64_t i0, int64_t di, scan_state *s);
typedef void (*total_fn)(const void *x, int64_t sx, int64_t n, int64_t i0, int64_t di,
                         scan_state *s);
typedef void (*cols_fn)(const void *x, int64_t sxn, int64_t sxi, void *y, int64_t syn, int64_t *ix,
                        int64_t n, int64_t w, int64_t i0, int64_t di);
typedef void (*combine_fn)(scan_state *c, const scan_state *t);

typedef struct {
  line_fn line;
  total_fn total;     /* with combine: the two-pass scan (cumsum, whose totals cost well under */
  cols_fn cols;       /* its scan); NULL for the others, whose first pass would cost as much as */
  combine_fn combine; /* the scan (or regroup a product): they take one thread per line */
  double ident;       /* the value ops' identity (0, 1, -inf); extremes start empty */
  bool extreme;
} scan_fns;

/* cumsum, cumprod, logcumsumexp over dtype ID (storage T, state AT in field FLD). FAST (sum only):
 * regroup by 4, which breaks the dependency chain of one running value; a double state cannot
 * overflow on float32/16 inputs and int64 wraps the same in any order. A product regrouped could
 * overflow or underflow where the running one does not (2^k times 0.5^k), so cumprod, like
 * logcumsumexp, keeps the sequential order. */
#define VALUE_FNS(OPN, FAST, ID, T, AT, FLD)                                                     \
  static void line_##OPN##_##ID(const void *xv, int64_t sx, void *yv, int64_t sy, int64_t *ix,   \
                                int64_t n, int64_t i0, int64_t di, scan_state *s) {              \
    (void)ix, (void)i0, (void)di;                                                                \
    const T *x = xv;                                                                             \
    T *y = yv;                                                                                   \
    AT a = s->v.FLD;                                                                             \
    int64_t j = 0;                                                                               \
    if (FAST)                                                                                    \
      for (; j + 4 <= n; j += 4) {                                                               \
        AT a0 = (AT)LD_##ID(x[j * sx]);                                                          \
        AT a1 = STEP(OPN, AT, a0, (AT)LD_##ID(x[(j + 1) * sx]));                                 \
        AT a2 = STEP(OPN, AT, a1, (AT)LD_##ID(x[(j + 2) * sx]));                                 \
        AT a3 = STEP(OPN, AT, a2, (AT)LD_##ID(x[(j + 3) * sx]));                                 \
        y[j * sy] = ST_##ID(STEP(OPN, AT, a, a0));                                               \
        y[(j + 1) * sy] = ST_##ID(STEP(OPN, AT, a, a1));                                         \
        y[(j + 2) * sy] = ST_##ID(STEP(OPN, AT, a, a2));                                         \
        y[(j + 3) * sy] = ST_##ID(STEP(OPN, AT, a, a3));                                         \
        a = STEP(OPN, AT, a, a3);                                                                \
      }                                                                                          \
    for (; j < n; j++) {                                                                         \
      a = STEP(OPN, AT, a, (AT)LD_##ID(x[j * sx]));                                              \
      y[j * sy] = ST_##ID(a);                                                                    \
    }                                                                                            \
    s->v.FLD = a;                                                                                \
  }                                                                                              \
  static void cols_##OPN##_##ID(const void *xv, int64_t sxn, int64_t sxi, void *yv, int64_t syn, \
                                int64_t *ix, int64_t n, int64_t w, int64_t i0, int64_t di) {     \
    (void)ix, (void)i0, (void)di;                                                                \
    const T *x = xv;                                                                             \
    T *y = yv;                                                                                   \
    AT a[SCAN_COLS];                                                                             \
    for (int64_t k = 0; k < w; k++) a[k] = (AT)OPN##_IDENT;                                      \
    for (int64_t j = 0; j < n; j++) {                                                            \
      const T *xr = x + j * sxn;                                                                 \
      T *yr = y + j * syn;                                                                       \
      for (int64_t k = 0; k < w; k++) {                                                          \
        a[k] = STEP(OPN, AT, a[k], (AT)LD_##ID(xr[k * sxi]));                                    \
        yr[k] = ST_##ID(a[k]);                                                                   \
      }                                                                                          \
    }                                                                                            \
  }
/* The total of a run and the combining of totals, for the two-pass parallel scan of cumsum (four
 * independent partial results, so the first pass runs at the speed of a plain sum). */
#define VALUE_TOTAL(OPN, ID, T, AT, FLD)                                                         \
  static void total_##OPN##_##ID(const void *xv, int64_t sx, int64_t n, int64_t i0, int64_t di,  \
                                 scan_state *s) {                                                \
    (void)i0, (void)di;                                                                          \
    const T *x = xv;                                                                             \
    AT a = s->v.FLD;                                                                             \
    int64_t j = 0;                                                                               \
    if (n >= 4) { /* four independent partial results */                                         \
      AT p[4];                                                                                   \
      for (int k = 0; k < 4; k++) p[k] = (AT)LD_##ID(x[k * sx]);                                 \
      for (j = 4; j + 4 <= n; j += 4)                                                            \
        for (int k = 0; k < 4; k++) p[k] = STEP(OPN, AT, p[k], (AT)LD_##ID(x[(j + k) * sx]));    \
      a = STEP(OPN, AT, a, STEP(OPN, AT, STEP(OPN, AT, p[0], p[1]), STEP(OPN, AT, p[2], p[3]))); \
    }                                                                                            \
    for (; j < n; j++) a = STEP(OPN, AT, a, (AT)LD_##ID(x[j * sx]));                             \
    s->v.FLD = a;                                                                                \
  }                                                                                              \
  static void combine_##OPN##_##ID(scan_state *c, const scan_state *t) {                         \
    c->v.FLD = STEP(OPN, AT, c->v.FLD, t->v.FLD);                                                \
  }
#define add_IDENT 0
#define mul_IDENT 1
#define lae_IDENT (-INFINITY)

/* cummax (BETTER = MAX_BETTER) or cummin over dtype ID. */
#define EXTREME_FNS(OPN, BETTER, ID, T, AT, FLD)                                                 \
  static inline void step_##OPN##_##ID(AT *a, int64_t *ai, AT v, int64_t i) {                    \
    if (*ai == NO_INDEX || BETTER(v, *a)) *a = v, *ai = i;                                       \
  }                                                                                              \
  static void line_##OPN##_##ID(const void *xv, int64_t sx, void *yv, int64_t sy, int64_t *ix,   \
                                int64_t n, int64_t i0, int64_t di, scan_state *s) {              \
    const T *x = xv;                                                                             \
    T *y = yv;                                                                                   \
    AT a = s->v.FLD;                                                                             \
    int64_t ai = s->idx, j = 0;                                                                  \
    if (ai == NO_INDEX && n > 0) /* the first element starts the line: no test in the loop */    \
      a = (AT)LD_##ID(x[0]), ai = i0, y[0] = ST_##ID(a), ix[0] = ai, j = 1;                      \
    if (sx == 1 && sy == 1) /* the common dense line: simpler addressing for the compiler */     \
      for (; j < n; j++) {                                                                       \
        AT v = (AT)LD_##ID(x[j]);                                                                \
        if (BETTER(v, a)) a = v, ai = i0 + j * di;                                               \
        y[j] = ST_##ID(a);                                                                       \
        ix[j] = ai;                                                                              \
      }                                                                                          \
    for (; j < n; j++) {                                                                         \
      AT v = (AT)LD_##ID(x[j * sx]);                                                             \
      if (BETTER(v, a)) a = v, ai = i0 + j * di;                                                 \
      y[j * sy] = ST_##ID(a);                                                                    \
      ix[j * sy] = ai;                                                                           \
    }                                                                                            \
    s->v.FLD = a, s->idx = ai;                                                                   \
  }                                                                                              \
  static void cols_##OPN##_##ID(const void *xv, int64_t sxn, int64_t sxi, void *yv, int64_t syn, \
                                int64_t *ix, int64_t n, int64_t w, int64_t i0, int64_t di) {     \
    const T *x = xv;                                                                             \
    T *y = yv;                                                                                   \
    AT a[SCAN_COLS];                                                                             \
    int64_t ai[SCAN_COLS];                                                                       \
    for (int64_t k = 0; k < w; k++) a[k] = 0, ai[k] = NO_INDEX;                                  \
    for (int64_t j = 0; j < n; j++)                                                              \
      for (int64_t k = 0; k < w; k++) {                                                          \
        step_##OPN##_##ID(&a[k], &ai[k], (AT)LD_##ID(x[j * sxn + k * sxi]), i0 + j * di);        \
        y[j * syn + k] = ST_##ID(a[k]);                                                          \
        ix[j * syn + k] = ai[k];                                                                 \
      }                                                                                          \
  }

/* dtype ID, storage T, state type and field */
// clang-format off
#define SCAN_FLOATS(X, ...) \
  X(__VA_ARGS__, F32, float, double, f) X(__VA_ARGS__, F64, double, double, f) \
  X(__VA_ARGS__, F16, uint16_t, double, f) X(__VA_ARGS__, BF16, uint16_t, double, f) \
  X(__VA_ARGS__, F8E4M3, uint8_t, double, f) X(__VA_ARGS__, F8E5M2, uint8_t, double, f)
/* cumsum and cumprod of the narrower integers and bool run on an int64 copy (engine/ops/scan.c) */
#define SCAN_WIDE_INTS(X, ...) \
  X(__VA_ARGS__, I64, int64_t, int64_t, i) X(__VA_ARGS__, U64, uint64_t, uint64_t, u)
#define SCAN_INTS(X, ...) \
  SCAN_WIDE_INTS(X, __VA_ARGS__) X(__VA_ARGS__, I32, int32_t, int64_t, i) \
  X(__VA_ARGS__, U8, uint8_t, int64_t, i) X(__VA_ARGS__, BOOL, uint8_t, int64_t, i) \
  X(__VA_ARGS__, I8, int8_t, int64_t, i) X(__VA_ARGS__, I16, int16_t, int64_t, i) \
  X(__VA_ARGS__, U16, uint16_t, int64_t, i) X(__VA_ARGS__, U32, uint32_t, int64_t, i)
// clang-format on

SCAN_FLOATS(VALUE_FNS, add, 1)
SCAN_WIDE_INTS(VALUE_FNS, add, 1)
SCAN_FLOATS(VALUE_TOTAL, add)
SCAN_WIDE_INTS(VALUE_TOTAL, add)
SCAN_FLOATS(VALUE_FNS, mul, 0)
SCAN_WIDE_INTS(VALUE_FNS, mul, 0)
SCAN_FLOATS(VALUE_FNS, lae, 0)
SCAN_FLOATS(EXTREME_FNS, max, MAX_BETTER)
SCAN_INTS(EXTREME_FNS, max, MAX_BETTER)
SCAN_FLOATS(EXTREME_FNS, min, MIN_BETTER)
SCAN_INTS(EXTREME_FNS, min, MIN_BETTER)

/* The tables [dtype] of each op: entries without a line function have no kernel. */
#define ENTRY(OPN, IDENT, EXT, ID, T, AT, FLD) \
  [DLE_##ID] = {line_##OPN##_##ID, NULL, cols_##OPN##_##ID, NULL, IDENT, EXT},
#define ENTRY_2PASS(OPN, IDENT, ID, T, AT, FLD) \
  [DLE_##ID] = {line_##OPN##_##ID,              \
                total_##OPN##_##ID,             \
                cols_##OPN##_##ID,              \
                combine_##OPN##_##ID,           \
                IDENT,                          \
                false},
static const scan_fns fns_sum[DLE_NUM_DTYPES] = {SCAN_FLOATS(ENTRY_2PASS, add, 0)
                                                     SCAN_WIDE_INTS(ENTRY_2PASS, add, 0)};
static const scan_fns fns_prod[DLE_NUM_DTYPES] = {SCAN_FLOATS(ENTRY, mul, 1, false)
                                                      SCAN_WIDE_INTS(ENTRY, mul, 1, false)};
static const scan_fns fns_lse[DLE_NUM_DTYPES] = {SCAN_FLOATS(ENTRY, lae, -INFINITY, false)};
static const scan_fns fns_max[DLE_NUM_DTYPES] = {SCAN_FLOATS(ENTRY, max, 0, true)
                                                     SCAN_INTS(ENTRY, max, 0, true)};
static const scan_fns fns_min[DLE_NUM_DTYPES] = {SCAN_FLOATS(ENTRY, min, 0, true)
                                                     SCAN_INTS(ENTRY, min, 0, true)};
#undef ENTRY
#undef ENTRY_2PASS

static const scan_fns *fns_of(dle_op op, dle_dtype dt) {
  const scan_fns *t = op == DLE_OP_CUMSUM    ? fns_sum
                      : op == DLE_OP_CUMPROD ? fns_prod
                      : op == DLE_OP_CUMMAX  ? fns_max
                      : op == DLE_OP_CUMMIN  ? fns_min
                                             : fns_lse;
  return t[dt].line ? &t[dt] : NULL;
}

static void state_init(const scan_fns *f, scan_state *s, bool is_float) {
  if (is_float)
    s->v.f = f->ident;
  else
    s->v.i = (int64_t)f->ident;
  s->idx = NO_INDEX;
}

static int max_threads(void) {
#ifdef _OPENMP
  int n = omp_get_max_threads();
  return n < SCAN_MAX_THR ? n : SCAN_MAX_THR;
#else
  return 1;
#endif
}

/* One line of n elements on nt threads: slice totals, then each slice scanned from the combined
 * totals of the slices before it. */
static void scan_blocked(const scan_fns *f, bool fl, int nt, const char *x, int64_t sx, char *y,
                         int64_t sy, int64_t *ix, int64_t n, int64_t i0, int64_t di, size_t es) {
  scan_state tot[SCAN_MAX_THR];
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
#endif
  {
    int c, got;
    cpu_team(&c, &got);
    int64_t len = (n + got - 1) / got, lo = c * len, m = lo < n ? (n - lo < len ? n - lo : len) : 0;
    state_init(f, &tot[c], fl);
    if (c < got - 1) f->total(x + lo * sx * (int64_t)es, sx, m, i0 + lo * di, di, &tot[c]);
#ifdef _OPENMP
#pragma omp barrier
#endif
    scan_state s;
    state_init(f, &s, fl);
    for (int k = 0; k < c; k++) f->combine(&s, &tot[k]);
    if (m > 0)
      f->line(x + lo * sx * (int64_t)es, sx, y + lo * sy * (int64_t)es, sy,
              ix ? ix + lo * sy : NULL, m, i0 + lo * di, di, &s);
  }
}

static DLE_KERNEL(cpu_scan) {
  const char *fn = dle_op_get_info(op)->name;
  dle_tensor *x = ins[0];
  const scan_fns *f = fns_of(op, x->dtype);
  if (!f) return dle_error("%s: no CPU kernel for %s", fn, dle_dtype_name(x->dtype));
  dle_scan_geom g;
  if (!dle_scan_geom_of(x, (int)a->ints[0], &g))
    return dle_error("%s: the input's strides do not form a scan block (shape %s)", fn, SHAPE(x));
  if (g.outer * g.n * g.inner == 0) return DLE_OK;
  size_t es = dle_dtype_size(x->dtype);
  bool fl = dle_dtype_is_float(x->dtype), rev = a->ints[1] != 0;
  const char *xd = dle_tensor_data(x);
  char *yd = dle_tensor_data(outs[0]);
  int64_t *id = f->extreme ? dle_tensor_data(outs[1]) : NULL;
  /* from the end: start at the last row, step backwards; indices count down */
  int64_t sn = rev ? -g.sn : g.sn, yn = rev ? -g.inner : g.inner;
  int64_t first = rev ? g.n - 1 : 0, i0 = a->index_base + first, di = rev ? -1 : 1;
  xd += first * g.sn * (int64_t)es;
  yd += first * g.inner * (int64_t)es;
  if (id) id += first * g.inner;
  int64_t numel = g.outer * g.n * g.inner;
  bool par = op == DLE_OP_LOGCUMSUMEXP ? cpu_parallel(numel) : cpu_parallel_light(numel);
  int nt = max_threads();

  if (g.inner == 1 && par && nt > 1 && g.outer < nt && f->total) {
    for (int64_t o = 0; o < g.outer; o++)
      scan_blocked(f, fl, nt, xd + o * g.so * (int64_t)es, sn, yd + o * g.n * (int64_t)es, yn,
                   id ? id + o * g.n : NULL, g.n, i0, di, es);
  } else if (g.inner == 1) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (par && nt > 1)
#endif
    for (int64_t o = 0; o < g.outer; o++) {
      scan_state s;
      state_init(f, &s, fl);
      f->line(xd + o * g.so * (int64_t)es, sn, yd + o * g.n * (int64_t)es, yn,
              id ? id + o * g.n : NULL, g.n, i0, di, &s);
    }
  } else {
    int64_t nb = (g.inner + SCAN_COLS - 1) / SCAN_COLS, tasks = g.outer * nb;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (par && nt > 1 && tasks > 1)
#endif
    for (int64_t t = 0; t < tasks; t++) {
      int64_t o = t / nb, k0 = (t % nb) * SCAN_COLS;
      int64_t w = g.inner - k0 < SCAN_COLS ? g.inner - k0 : SCAN_COLS;
      int64_t yo = o * g.n * g.inner + k0;
      f->cols(xd + (o * g.so + k0 * g.si) * (int64_t)es, sn, g.si, yd + yo * (int64_t)es, yn,
              id ? id + yo : NULL, g.n, w, i0, di);
    }
  }
  return DLE_OK;
}

void cpu_register_scan(dle_backend *b) {
  for (int op = 0; op < DLE_NUM_OPS; op++)
    if (dle_op_get_info((dle_op)op)->kind == DLE_KIND_SCAN) b->kernels[op] = cpu_scan;
}
