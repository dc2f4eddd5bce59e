/* reduce.c — CPU kernels of the reductions (sum, mean, prod, var, std, logsumexp, amax, amin,
 * max/min with indices, argmax/argmin), for any strides (softmax, which shares the plan
 * (reduce_plan.h), is in softmax.c).
 *
 * A call is planned once: the input's dims split into kept dims (one per output) and reduced dims,
 * each group merged where memory allows. When the input's fastest dim is reduced, each output
 * folds contiguous runs through independent lanes (so the loop vectorises); when it is kept,
 * whole rows are streamed, acc[j] op= x[r][j], so the inner loop is contiguous over outputs.
 * How one element folds into an accumulator is a "flavor" (sum, product, max, ...), written once
 * and instantiated per dtype by the macros of cpu_types.h. */
#include "cpu_exp.h"
#include "cpu_loop.h"
#include "cpu_stream.h"
#include "cpu_vecmath.h"
#include "reduce_plan.h"

#include <stdlib.h>
#include <tgmath.h> /* exp/log pick the float or double version from the argument's type */

#ifdef _OPENMP
#include <omp.h>
#endif

/* outputs accumulated together: a row of 4096 float64 accumulators is 32 KiB */
#define RED_BLOCK 4096
#define RED_LANES 16 /* independent accumulators of a contiguous run: 16 gives 4-8 vector chains */

/* ================================================================ flavors */

/* Sums and products of floats accumulate in double (a float32 sum of 1e7 ones is exact); of
 * integers in uint64, which wraps like int64 arithmetic without signed-overflow UB. */
#define SACC_F32    double
#define SACC_F64    double
#define SACC_F16    double
#define SACC_BF16   double
#define SACC_I32    uint64_t
#define SACC_I64    uint64_t
#define SACC_U8     uint64_t
#define SACC_BOOL   uint64_t
#define SACC_I8     uint64_t
#define SACC_I16    uint64_t
#define SACC_U16    uint64_t
#define SACC_U32    uint64_t
#define SACC_U64    uint64_t
#define SACC_F8E4M3 double
#define SACC_F8E5M2 double
/* ... and are stored as the float dtype itself, as uint64 for uint64, or as int64 for the other
 * integers and bool. */
#define SOUT_F32      float
#define SOUT_F64      double
#define SOUT_F16      uint16_t
#define SOUT_BF16     uint16_t
#define SOUT_I32      int64_t
#define SOUT_I64      int64_t
#define SOUT_U8       int64_t
#define SOUT_BOOL     int64_t
#define SOUT_I8       int64_t
#define SOUT_I16      int64_t
#define SOUT_U16      int64_t
#define SOUT_U32      int64_t
#define SOUT_U64      uint64_t
#define SOUT_F8E4M3   uint8_t
#define SOUT_F8E5M2   uint8_t
#define SST_F32(v)    ST_F32(v)
#define SST_F64(v)    ST_F64(v)
#define SST_F16(v)    ST_F16(v)
#define SST_BF16(v)   ST_BF16(v)
#define SST_I32(v)    ((int64_t)(v))
#define SST_I64(v)    ((int64_t)(v))
#define SST_U8(v)     ((int64_t)(v))
#define SST_BOOL(v)   ((int64_t)(v))
#define SST_I8(v)     ((int64_t)(v))
#define SST_I16(v)    ((int64_t)(v))
#define SST_U16(v)    ((int64_t)(v))
#define SST_U32(v)    ((int64_t)(v))
#define SST_U64(v)    ((uint64_t)(v))
#define SST_F8E4M3(v) ST_F8E4M3(v)
#define SST_F8E5M2(v) ST_F8E5M2(v)

static inline double red_sq(double d) { return d * d; }

/* Per flavor: accumulator type, initial value, one step (a: accumulator, x: element in compute
 * type, m: the per-output parameter of second passes), merge of two partial accumulators, and
 * the stored type and conversion. Max/min propagate NaN (x != x is false for integers). */
#define ACC_SUM(ID, CT)       SACC_##ID
#define INIT_SUM(CT)          0
#define STEP_SUM(CT, a, x, m) ((a) + (x))
#define MERGE_SUM(a, b)       ((a) + (b))
#define OUT_SUM(ID, T)        SOUT_##ID
#define STORE_SUM(ID, v)      SST_##ID(v)

#define ACC_PROD(ID, CT)       SACC_##ID
#define INIT_PROD(CT)          1
#define STEP_PROD(CT, a, x, m) ((a) * (x))
#define MERGE_PROD(a, b)       ((a) * (b))
#define OUT_PROD(ID, T)        SOUT_##ID
#define STORE_PROD(ID, v)      SST_##ID(v)

/* second pass of var/std: squared deviations from the mean m */
#define ACC_SQDEV(ID, CT)       double
#define INIT_SQDEV(CT)          0
#define STEP_SQDEV(CT, a, x, m) ((a) + red_sq((double)(x) - (m)))
#define MERGE_SQDEV(a, b)       ((a) + (b))
#define OUT_SQDEV(ID, T)        double
#define STORE_SQDEV(ID, v)      (v)

/* second pass of logsumexp: exp(x - m) with m the max (exp in the compute type) */
#define ACC_EXPSUM(ID, CT)       double
#define INIT_EXPSUM(CT)          0
#define STEP_EXPSUM(CT, a, x, m) ((a) + (double)RED_EXP((x) - (CT)(m)))
#define MERGE_EXPSUM(a, b)       ((a) + (b))
#define OUT_EXPSUM(ID, T)        double
#define STORE_EXPSUM(ID, v)      (v)

/* One pass of a flavor over part of a reduction:
 *   init:  acc[0..n) (and idx for arg flavors) = the identity; pos: first reduced index covered
 *   run:   folds n elements at p (byte stride sb) into the single accumulator acc[0];
 *          pos is the reduced index of the first element, prm[0] the parameter
 *   row:   acc[j] folds element j of a row of n outputs at p (byte stride sb), prm[j] its parameter,
 *          pos the reduced index of the row
 *   merge: acc folds a partial accumulator covering later reduced indices
 *   to_f64 / store: accumulators to doubles / to the output (byte stride os) */
typedef void (*red_init_fn)(void *acc, int64_t *idx, int64_t n, int64_t pos);
typedef void (*red_step_fn)(void *acc, int64_t *idx, const char *p, int64_t sb, int64_t n,
                            const double *prm, int64_t pos);
typedef void (*red_merge_fn)(void *acc, int64_t *idx, const void *acc2, const int64_t *idx2,
                             int64_t n);
typedef void (*red_f64_fn)(double *dst, const void *acc, int64_t n);
typedef void (*red_store_fn)(char *out, int64_t os, const void *acc, int64_t n);

/*   rows (optional): row over nrows rows rs bytes apart, all at once */
typedef void (*red_rows_fn)(void *acc, const char *p, int64_t sb, int64_t rs, int64_t nrows,
                            int64_t n);

typedef struct {
  size_t acc_size;
  red_init_fn init;
  red_step_fn run, row;
  red_merge_fn merge;
  red_f64_fn to_f64;
  red_store_fn store;
  red_rows_fn rows;
} red_flavor;

enum { FL_SUM, FL_PROD, FL_MAX, FL_MIN, FL_SQDEV, FL_EXPSUM, FL_ARGMAX, FL_ARGMIN, FL_COUNT };

/* Pieces every flavor shares: init, merge, to_f64, store. */
#define RED_COMMON(FL, ID, T, CT)                                                                \
  static void init_##FL##_##ID(void *accp, int64_t *idx, int64_t n, int64_t pos) {               \
    ACC_##FL(ID, CT) *acc = accp;                                                                \
    for (int64_t j = 0; j < n; j++) acc[j] = INIT_##FL(CT);                                      \
    if (idx)                                                                                     \
      for (int64_t j = 0; j < n; j++) idx[j] = pos;                                              \
  }                                                                                              \
  static void f64_##FL##_##ID(double *dst, const void *accp, int64_t n) {                        \
    const ACC_##FL(ID, CT) *acc = accp;                                                          \
    for (int64_t j = 0; j < n; j++) dst[j] = (double)acc[j];                                     \
  }                                                                                              \
  static void store_##FL##_##ID(char *out, int64_t os, const void *accp, int64_t n) {            \
    const ACC_##FL(ID, CT) *acc = accp;                                                          \
    for (int64_t j = 0; j < n; j++) *(OUT_##FL(ID, T) *)(out + j * os) = STORE_##FL(ID, acc[j]); \
  }

/* The run of a value-only flavor. Sums fold a contiguous run into RED_LANES independent
 * accumulators (vector registers, no serial dependency). */
#define RED_RUN_LANES(FL, ID, T, CT)                                                          \
  static void run_##FL##_##ID(void *accp, int64_t *idx, const char *p, int64_t sb, int64_t n, \
                              const double *prm, int64_t pos) {                               \
    typedef ACC_##FL(ID, CT) acc_t;                                                           \
    (void)idx, (void)pos;                                                                     \
    const double m0 = prm ? prm[0] : 0;                                                       \
    (void)m0;                                                                                 \
    acc_t a = *(acc_t *)accp;                                                                 \
    if (sb == (int64_t)sizeof(T) && n >= RED_LANES) {                                         \
      const T *x = (const T *)p;                                                              \
      acc_t lane[RED_LANES];                                                                  \
      for (int l = 0; l < RED_LANES; l++) lane[l] = INIT_##FL(CT);                            \
      int64_t i = 0;                                                                          \
      for (; i + RED_LANES <= n; i += RED_LANES)                                              \
        for (int l = 0; l < RED_LANES; l++) {                                                 \
          CT v = LD_##ID(x[i + l]);                                                           \
          lane[l] = STEP_##FL(CT, lane[l], v, m0);                                            \
        }                                                                                     \
      for (; i < n; i++) {                                                                    \
        CT v = LD_##ID(x[i]);                                                                 \
        a = STEP_##FL(CT, a, v, m0);                                                          \
      }                                                                                       \
      for (int w = RED_LANES / 2; w > 0; w /= 2) /* a tree: short dependency chains */        \
        for (int l = 0; l < w; l++) lane[l] = MERGE_##FL(lane[l], lane[l + w]);               \
      a = MERGE_##FL(a, lane[0]);                                                             \
    } else {                                                                                  \
      for (int64_t i = 0; i < n; i++) {                                                       \
        CT v = LD_##ID(*(const T *)(p + i * sb));                                             \
        a = STEP_##FL(CT, a, v, m0);                                                          \
      }                                                                                       \
    }                                                                                         \
    *(acc_t *)accp = a;                                                                       \
  }

#define RED_RUN_EXTREME(FL, ID, T, CT)                                                        \
  static void run_##FL##_##ID(void *accp, int64_t *idx, const char *p, int64_t sb, int64_t n, \
                              const double *prm, int64_t pos) {                               \
    (void)idx, (void)pos, (void)prm;                                                          \
    CT a = *(CT *)accp;                                                                       \
    if (sb == (int64_t)sizeof(T)) {                                                           \
      RED_EXTREME_FAST(FL, ID, T, CT, (const T *)p, n, b, z)                                  \
      if (z == z) {                                                                           \
        *(CT *)accp = MERGE_##FL(a, b);                                                       \
        return;                                                                               \
      }                                                                                       \
    }                                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                         \
      CT v = LD_##ID(*(const T *)(p + i * sb));                                               \
      a = STEP_##FL(CT, a, v, 0);                                                             \
    }                                                                                         \
    *(CT *)accp = a;                                                                          \
  }
#define RUN_SUM    RED_RUN_LANES
#define RUN_PROD   RED_RUN_LANES
#define RUN_SQDEV  RED_RUN_LANES
#define RUN_EXPSUM RED_RUN_LANES
#define RUN_MAX    RED_RUN_EXTREME
#define RUN_MIN    RED_RUN_EXTREME

/* Value-only flavors: run (by kind, above), row, merge. */
#define RED_VALUE(FL, ID, T, CT)                                                                \
  RED_COMMON(FL, ID, T, CT)                                                                     \
  RUN_##FL(FL, ID, T, CT) static void row_##FL##_##ID(void *accp, int64_t *idx, const char *p,  \
                                                      int64_t sb, int64_t n, const double *prm, \
                                                      int64_t pos) {                            \
    ACC_##FL(ID, CT) *restrict acc = accp;                                                      \
    (void)idx, (void)pos, (void)prm;                                                            \
    if (sb == (int64_t)sizeof(T)) {                                                             \
      const T *restrict x = (const T *)p;                                                       \
      for (int64_t j = 0; j < n; j++) {                                                         \
        CT v = LD_##ID(x[j]);                                                                   \
        acc[j] = STEP_##FL(CT, acc[j], v, prm[j]);                                              \
      }                                                                                         \
    } else {                                                                                    \
      for (int64_t j = 0; j < n; j++) {                                                         \
        CT v = LD_##ID(*(const T *)(p + j * sb));                                               \
        acc[j] = STEP_##FL(CT, acc[j], v, prm[j]);                                              \
      }                                                                                         \
    }                                                                                           \
  }                                                                                             \
  static void merge_##FL##_##ID(void *accp, int64_t *idx, const void *bp, const int64_t *bidx,  \
                                int64_t n) {                                                    \
    ACC_##FL(ID, CT) *acc = accp;                                                               \
    const ACC_##FL(ID, CT) *b = bp;                                                             \
    (void)idx, (void)bidx;                                                                      \
    for (int64_t j = 0; j < n; j++) acc[j] = MERGE_##FL(acc[j], b[j]);                          \
  }

/* Arg flavors keep the best value and its reduced index: strictly better wins, so ties keep the
 * first occurrence; a NaN beats any number and the first NaN stays. */
#define ACC_ARGMAX(ID, CT)       CT
#define INIT_ARGMAX(CT)          RED_LOWEST(CT)
#define BETTER_ARGMAX(x, b)      ((x) > (b) || ((x) != (x) && (b) == (b)))
#define BETTER_BITS_ARGMAX(x, b) (((x) > (b)) | (((x) != (x)) & ((b) == (b))))
#define OUT_ARGMAX(ID, T)        T
#define STORE_ARGMAX(ID, v)      ST_##ID(v)
#define ACC_ARGMIN(ID, CT)       CT
#define INIT_ARGMIN(CT)          RED_HIGHEST(CT)
#define BETTER_ARGMIN(x, b)      ((x) < (b) || ((x) != (x) && (b) == (b)))
#define BETTER_BITS_ARGMIN(x, b) (((x) < (b)) | (((x) != (x)) & ((b) == (b))))
#define OUT_ARGMIN(ID, T)        T
#define STORE_ARGMIN(ID, v)      ST_##ID(v)

/* A contiguous run goes by blocks: the block's extreme comes from the vectorised max/min, and
 * only a block that beats the best so far is searched for the first element equal to it (checking
 * 16 at a time); a block holding a NaN or an infinity takes the exact scalar scan. */
#define ARG_BLOCK 4096
#define ARG_SCAN(FL, ID, T, CT, p, sb, n, pos, best, at) \
  for (int64_t i = 0; i < (n); i++) {                    \
    CT v = LD_##ID(*(const T *)((p) + i * (sb)));        \
    if (BETTER_##FL(v, best)) best = v, at = (pos) + i;  \
  }
#define ARG_FIND(ID, x, len, b, found)                                  \
  int64_t found = 0;                                                    \
  for (; found + 16 <= (len); found += 16) {                            \
    int hit = 0;                                                        \
    for (int l = 0; l < 16; l++) hit |= LD_##ID((x)[found + l]) == (b); \
    if (hit) break;                                                     \
  }                                                                     \
  while (LD_##ID((x)[found]) != (b)) found++; /* b is one of the elements: this ends */
#define SIMPLE_ARGMAX SIMPLE_MAX
#define SIMPLE_ARGMIN SIMPLE_MIN
#define SIMD_ARGMAX   SIMD_MAX
#define SIMD_ARGMIN   SIMD_MIN
#define RED_ARG(FL, ID, T, CT)                                                                  \
  RED_COMMON(FL, ID, T, CT)                                                                     \
  static void run_##FL##_##ID(void *accp, int64_t *idx, const char *p, int64_t sb, int64_t n,   \
                              const double *prm, int64_t pos) {                                 \
    (void)prm;                                                                                  \
    CT best = *(CT *)accp;                                                                      \
    int64_t at = idx[0];                                                                        \
    if (sb != (int64_t)sizeof(T)) {                                                             \
      ARG_SCAN(FL, ID, T, CT, p, sb, n, pos, best, at)                                          \
    } else {                                                                                    \
      for (int64_t i0 = 0; i0 < n; i0 += ARG_BLOCK) {                                           \
        int64_t len = n - i0 < ARG_BLOCK ? n - i0 : ARG_BLOCK;                                  \
        const T *x = (const T *)p + i0;                                                         \
        RED_EXTREME_FAST(FL, ID, T, CT, x, len, b, z)                                           \
        if (z != z) {                                                                           \
          ARG_SCAN(FL, ID, T, CT, (const char *)x, (int64_t)sizeof(T), len, pos + i0, best, at) \
        } else if (BETTER_##FL(b, best)) {                                                      \
          ARG_FIND(ID, x, len, b, k)                                                            \
          best = LD_##ID(x[k]), at = pos + i0 + k;                                              \
        }                                                                                       \
      }                                                                                         \
    }                                                                                           \
    *(CT *)accp = best;                                                                         \
    idx[0] = at;                                                                                \
  }                                                                                             \
  static void row_##FL##_##ID(void *accp, int64_t *idx, const char *p, int64_t sb, int64_t n,   \
                              const double *prm, int64_t pos) {                                 \
    CT *restrict acc = accp;                                                                    \
    (void)prm;                                                                                  \
    for (int64_t j = 0; j < n; j++) { /* branch-free: which rows win is unpredictable */        \
      CT v = LD_##ID(*(const T *)(p + j * sb)), a = acc[j];                                     \
      int take = BETTER_BITS_##FL(v, a);                                                        \
      acc[j] = take ? v : a;                                                                    \
      idx[j] = take ? pos : idx[j];                                                             \
    }                                                                                           \
  }                                                                                             \
  static void merge_##FL##_##ID(void *accp, int64_t *idx, const void *bp, const int64_t *bidx,  \
                                int64_t n) {                                                    \
    CT *acc = accp;                                                                             \
    const CT *b = bp;                                                                           \
    for (int64_t j = 0; j < n; j++)                                                             \
      if (BETTER_##FL(b[j], acc[j])) acc[j] = b[j], idx[j] = bidx[j];                           \
  }

#define RED_VALUE_ALL(FL)   CPU_ALL_TYPES_WITH(RED_VALUE, FL)
#define RED_VALUE_FLOAT(FL) CPU_FLOAT_TYPES_WITH(RED_VALUE, FL)
#define RED_ARG_ALL(FL)     CPU_ALL_TYPES_WITH(RED_ARG, FL)
RED_VALUE_ALL(SUM)
RED_VALUE_ALL(PROD)
RED_VALUE_ALL(MAX)
RED_VALUE_ALL(MIN)
RED_VALUE_FLOAT(SQDEV)
RED_VALUE_FLOAT(EXPSUM)
RED_ARG_ALL(ARGMAX)
RED_ARG_ALL(ARGMIN)

#define FL_ENTRY(FL, ID, T, CT)                                                        \
  [FL_##FL][DLE_##ID] = {sizeof(ACC_##FL(ID, CT)), init_##FL##_##ID,  run_##FL##_##ID, \
                         row_##FL##_##ID,          merge_##FL##_##ID, f64_##FL##_##ID, \
                         store_##FL##_##ID},
#define FL_ALL(FL)   CPU_ALL_TYPES_WITH(FL_ENTRY, FL)
#define FL_FLOAT(FL) CPU_FLOAT_TYPES_WITH(FL_ENTRY, FL)
static const red_flavor flavors[FL_COUNT][DLE_NUM_DTYPES] = {FL_ALL(SUM) FL_ALL(PROD) FL_ALL(
    MAX) FL_ALL(MIN) FL_FLOAT(SQDEV) FL_FLOAT(EXPSUM) FL_ALL(ARGMAX) FL_ALL(ARGMIN)};

/* The float32 sum with the AVX2 kernels of cpu_vecmath.h (set up by cpu_register_reduce when the
 * CPU has them): contiguous runs and rows go to them, strided ones to the portable loops. */
static red_flavor sum_f32_vec;
static void run_sum_f32_vec(void *acc, int64_t *idx, const char *p, int64_t sb, int64_t n,
                            const double *prm, int64_t pos) {
  if (sb == sizeof(float))
    *(double *)acc += cpu_vec->sum((const float *)p, n);
  else
    run_SUM_F32(acc, idx, p, sb, n, prm, pos);
}
static void rows_sum_f32_vec(void *acc, const char *p, int64_t sb, int64_t rs, int64_t nrows,
                             int64_t n) {
  if (sb == sizeof(float)) {
    cpu_vec->sum_rows(acc, p, rs, nrows, n);
    return;
  }
  for (int64_t r = 0; r < nrows; r++) row_SUM_F32(acc, NULL, p + r * rs, sb, n, NULL, r);
}
static void row_sum_f32_vec(void *acc, int64_t *idx, const char *p, int64_t sb, int64_t n,
                            const double *prm, int64_t pos) {
  (void)idx, (void)prm, (void)pos;
  rows_sum_f32_vec(acc, p, sb, 0, 1, n);
}

/* Results computed in double (mean, var, std, logsumexp) stored into a float output. */
#define STORE_F64(ID, T, CT)                                                      \
  static void store_f64_##ID(char *out, int64_t os, const double *v, int64_t n) { \
    for (int64_t j = 0; j < n; j++) *(T *)(out + j * os) = ST_##ID(v[j]);         \
  }
CPU_FLOAT_TYPES(STORE_F64)
#define STORE_F64_ENTRY(ID, T, CT) [DLE_##ID] = store_f64_##ID,
static void (*const store_f64[DLE_NUM_DTYPES])(char *, int64_t, const double *,
                                               int64_t) = {CPU_FLOAT_TYPES(STORE_F64_ENTRY)};

/* Folds reduced positions [r0, r1) of the input at b into one accumulator, a run at a time. */
static void fold_runs(const red_plan *pl, const red_flavor *f, const char *b, void *acc,
                      int64_t *idx, const double *prm, int64_t r0, int64_t r1) {
  int last = pl->nr - 1;
  int64_t id[DLE_MAX_DIMS], len = pl->rs[last], sb = pl->rx[last];
  int64_t off = group_seek(pl->nr, pl->rs, pl->rx, r0, id);
  for (int64_t pos = r0; pos < r1;) {
    int64_t n = len - id[last] < r1 - pos ? len - id[last] : r1 - pos;
    f->run(acc, idx, b + off, sb, n, prm, pos);
    pos += n;
    off += n * sb;
    id[last] += n;
    if (pos < r1) off += group_carry(pl->nr, pl->rs, pl->rx, id);
  }
}

/* Whether chunk c reads memory in order when its outputs take turns run by run, rather than each
 * output folding all its runs in turn: the kept dims lie between the reduced ones, as the
 * channels of an {N, C, H*W} tensor summed over N and H*W (a bias gradient, batch-norm
 * statistics). Output by output, that jumped a whole sample ahead every run (a conv layer's
 * bias gradient ran far below memory speed). Runs of at least 64 bytes, so that going around the
 * outputs once per run costs little next to the run itself. */
static bool runs_outermost(const red_plan *pl, const red_chunk *c) {
  int last = pl->nr - 1;
  if (pl->nr < 2 || c->n < 2 || abs64(pl->rx[last]) * pl->rs[last] < 64) return false;
  int64_t kept = INT64_MAX, outer = INT64_MAX;
  for (int d = 0; d < pl->nk; d++)
    if (pl->kx[d] && abs64(pl->kx[d]) < kept) kept = abs64(pl->kx[d]);
  for (int d = 0; d < last; d++)
    if (pl->rx[d] && abs64(pl->rx[d]) < outer) outer = abs64(pl->rx[d]);
  return kept < outer;
}

/* Reduced positions [r0, r1) into every output of chunk c, one run at a time across all outputs.
 * Each output still folds its runs in increasing position: the same results, bit for bit. */
static void fold_run_major(const red_plan *pl, const red_chunk *c, const red_flavor *f, char *acc,
                           int64_t *idx, const double *prm, int64_t r0, int64_t r1) {
  int last = pl->nr - 1, klast = pl->nk - 1;
  int64_t rid[DLE_MAX_DIMS], kid[DLE_MAX_DIMS], len = pl->rs[last], sb = pl->rx[last];
  int64_t roff = group_seek(pl->nr, pl->rs, pl->rx, r0, rid);
  for (int64_t pos = r0; pos < r1;) {
    int64_t n = len - rid[last] < r1 - pos ? len - rid[last] : r1 - pos;
    int64_t koff = group_seek(pl->nk, pl->ks, pl->kx, c->first, kid);
    for (int64_t i = 0; i < c->n; i++) {
      f->run(acc + i * f->acc_size, idx ? idx + i : NULL, pl->x + koff + roff, sb, n,
             prm ? prm + i : NULL, pos);
      koff += pl->kx[klast];
      if (++kid[klast] == pl->ks[klast] && i + 1 < c->n)
        koff += group_carry(pl->nk, pl->ks, pl->kx, kid);
    }
    pos += n;
    roff += n * sb;
    rid[last] += n;
    if (pos < r1) roff += group_carry(pl->nr, pl->rs, pl->rx, rid);
  }
}

/* Folds reduced positions [r0, r1) into every output of chunk c (accumulators acc/idx/prm). */
static void chunk_fold(const red_plan *pl, const red_chunk *c, const red_flavor *f, char *acc,
                       int64_t *idx, const double *prm, int64_t r0, int64_t r1) {
  if (r0 >= r1) return;
  if (pl->stream && f->rows && pl->nr == 1) { /* rows equally spaced: several at a time */
    f->rows(acc, pl->x + c->in_off + r0 * pl->rx[0], pl->kx[pl->k0], pl->rx[0], r1 - r0, c->n);
    return;
  }
  if (pl->stream) {
    const char *b = pl->x + c->in_off;
    int64_t id[DLE_MAX_DIMS], sb = pl->kx[pl->k0];
    int last = pl->nr - 1;
    int64_t off = group_seek(pl->nr, pl->rs, pl->rx, r0, id);
    for (int64_t r = r0; r < r1; r++) {
      f->row(acc, idx, b + off, sb, c->n, prm, r);
      off += pl->rx[last];
      if (++id[last] == pl->rs[last] && r + 1 < r1) off += group_carry(pl->nr, pl->rs, pl->rx, id);
    }
    return;
  }
  if (runs_outermost(pl, c)) {
    fold_run_major(pl, c, f, acc, idx, prm, r0, r1);
    return;
  }
  int64_t id[DLE_MAX_DIMS];
  int last = pl->nk - 1;
  int64_t off = group_seek(pl->nk, pl->ks, pl->kx, c->first, id);
  for (int64_t i = 0; i < c->n; i++) {
    fold_runs(pl, f, pl->x + off, acc + i * f->acc_size, idx ? idx + i : NULL, prm ? prm + i : NULL,
              r0, r1);
    off += pl->kx[last];
    if (++id[last] == pl->ks[last] && i + 1 < c->n) off += group_carry(pl->nk, pl->ks, pl->kx, id);
  }
}

/* Bytes of one thread's array of n accumulators: whole 128-byte units, so threads writing their
 * own arrays never share a cache line (or an adjacent-line prefetch pair). */
static size_t red_slot_bytes(int64_t n) { return ((size_t)n * 8 + 127) / 128 * 128; }

/* One pass of flavor f over chunk c: the whole reduction on this thread, or (given scratch for
 * every thread's partial results) divided into per-thread ranges merged in order. */
static void red_pass(const red_plan *pl, const red_chunk *c, const red_flavor *f, char *acc,
                     int64_t *idx, const double *prm, char *scratch) {
  if (!scratch) {
    f->init(acc, idx, c->n, 0);
    chunk_fold(pl, c, f, acc, idx, prm, 0, pl->nred);
    return;
  }
  int nt = red_threads(), used = 1;
  size_t per = red_slot_bytes(pl->blk);
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
#endif
  {
    int t, n;
    cpu_team(&t, &n);
    int64_t r0 = pl->nred * t / n, r1 = pl->nred * (t + 1) / n;
    char *a = scratch + (size_t)t * per;
    int64_t *ix = idx ? (int64_t *)(scratch + (size_t)(nt + t) * per) : NULL;
    f->init(a, ix, c->n, r0);
    chunk_fold(pl, c, f, a, ix, prm, r0, r1);
    if (t == 0) used = n;
  }
  bool have = false;
  for (int t = 0; t < used; t++) {
    if (pl->nred * (t + 1) / used == pl->nred * t / used) continue; /* empty range */
    char *a = scratch + (size_t)t * per;
    int64_t *ix = idx ? (int64_t *)(scratch + (size_t)(nt + t) * per) : NULL;
    if (!have) {
      memcpy(acc, a, (size_t)c->n * f->acc_size);
      if (idx) memcpy(idx, ix, (size_t)c->n * sizeof *idx);
      have = true;
    } else {
      f->merge(acc, idx, a, ix, c->n);
    }
  }
  if (!have) f->init(acc, idx, c->n, 0);
}

/* ================================================================ reductions */

typedef struct {
  dle_op op;
  const red_flavor *f1, *f2; /* first pass; second pass of var/std/logsumexp */
  red_plan pl;
  char *out, *out2; /* values (or indices), and max/min's indices */
  int64_t es;       /* element size of out */
  dle_dtype out_dt;
  double correction;
  int64_t base; /* index_base added to stored indices */
  bool arg;     /* the first pass tracks indices */
} red_job;

static void store_indices(char *out, int64_t os, const int64_t *idx, int64_t n, int64_t base) {
  int64_t *o = (int64_t *)out;
  for (int64_t j = 0; j < n; j++) o[j * os] = idx[j] + base;
}

/* Computes and stores every output of chunk i. work: 4 * blk doubles; scratch: see red_pass. */
static void red_chunk_run(const red_job *job, int64_t i, double *work, char *scratch) {
  double *acc = work, *prm = work + job->pl.blk, *aux = work + 2 * job->pl.blk;
  int64_t *idx = (int64_t *)(work + 3 * job->pl.blk);
  red_chunk c;
  chunk_get(&job->pl, i, &c);
  const red_plan *pl = &job->pl;
  red_pass(pl, &c, job->f1, (char *)acc, job->arg ? idx : NULL, NULL, scratch);
  char *out = job->out + c.out_off * job->es;
  int64_t os = c.os * job->es, n = c.n;
  double nred = (double)pl->nred;
  switch (job->op) {
    case DLE_OP_SUM:
    case DLE_OP_PROD:
    case DLE_OP_AMAX:
    case DLE_OP_AMIN: job->f1->store(out, os, acc, n); return;
    case DLE_OP_ARGMAX:
    case DLE_OP_ARGMIN: store_indices(out, c.os, idx, n, job->base); return;
    case DLE_OP_MAX:
    case DLE_OP_MIN:
      job->f1->store(out, os, acc, n);
      store_indices(job->out2 + c.out_off * 8, c.os, idx, n, job->base);
      return;
    case DLE_OP_VAR:
    case DLE_OP_STD: {
      job->f1->to_f64(prm, acc, n);
      for (int64_t j = 0; j < n; j++) prm[j] /= nred;
      red_pass(pl, &c, job->f2, (char *)acc, NULL, prm, scratch);
      double dof = nred - job->correction > 0 ? nred - job->correction : 0;
      for (int64_t j = 0; j < n; j++) prm[j] = acc[j] / dof;
      if (job->op == DLE_OP_STD)
        for (int64_t j = 0; j < n; j++) prm[j] = sqrt(prm[j]);
      break;
    }
    case DLE_OP_LOGSUMEXP: {
      /* the max is the shift; an infinite or NaN max is the answer itself */
      job->f1->to_f64(aux, acc, n);
      for (int64_t j = 0; j < n; j++) prm[j] = isfinite(aux[j]) ? aux[j] : 0;
      red_pass(pl, &c, job->f2, (char *)acc, NULL, prm, scratch);
      for (int64_t j = 0; j < n; j++) prm[j] = isfinite(aux[j]) ? aux[j] + log(acc[j]) : aux[j];
      break;
    }
    default: /* mean */
      job->f1->to_f64(prm, acc, n);
      for (int64_t j = 0; j < n; j++) prm[j] /= nred;
      break;
  }
  store_f64[job->out_dt](out, os, prm, n);
}

/* logsumexp of float32 rows that are contiguous: the online AVX2 kernel, one read per row. */
static void lse_chunk(const red_plan *pl, int64_t i, float *out) {
  red_chunk c;
  chunk_get(pl, i, &c);
  int64_t id[DLE_MAX_DIMS];
  int last = pl->nk - 1;
  int64_t off = group_seek(pl->nk, pl->ks, pl->kx, c.first, id);
  for (int64_t k = 0; k < c.n; k++) {
    out[c.out_off + k] = cpu_vec->logsumexp_row((const float *)(pl->x + off), pl->rs[0]);
    off += pl->kx[last];
    if (++id[last] == pl->ks[last] && k + 1 < c.n) off += group_carry(pl->nk, pl->ks, pl->kx, id);
  }
}

static int red_flavor_of(dle_op op) {
  switch (op) {
    case DLE_OP_PROD: return FL_PROD;
    case DLE_OP_AMAX:
    case DLE_OP_LOGSUMEXP: return FL_MAX;
    case DLE_OP_AMIN: return FL_MIN;
    case DLE_OP_MAX:
    case DLE_OP_ARGMAX: return FL_ARGMAX;
    case DLE_OP_MIN:
    case DLE_OP_ARGMIN: return FL_ARGMIN;
    default: return FL_SUM; /* sum, mean, var and std start with a sum */
  }
}

/* A small contiguous input into one value (a loss; the sum closing a tiny autograd graph): the
 * single run the plan would make of it, folded without building the plan (which was 850 of the
 * 1,350 instructions of a one-element sum). Value-only flavors, below the threading grain. */
static bool reduce_small_whole(const red_job *job, const dle_tensor *x, const dle_tensor *out) {
  dle_op op = job->op;
  bool plain = op == DLE_OP_SUM || op == DLE_OP_PROD || op == DLE_OP_AMAX || op == DLE_OP_AMIN;
  int64_t n = dle_tensor_numel(x);
  if ((!plain && op != DLE_OP_MEAN) || n == 0 || n >= CPU_PARALLEL_GRAIN_LIGHT ||
      dle_tensor_numel(out) != 1 || !dle_tensor_is_contiguous(x))
    return false;
  double acc[1], mean[1]; /* an accumulator is at most 8 bytes: double, int64 or float */
  job->f1->init(acc, NULL, 1, 0);
  job->f1->run(acc, NULL, dle_tensor_data(x), cpu_esize(x->dtype), n, NULL, 0);
  if (plain) {
    job->f1->store(job->out, job->es, acc, 1);
  } else {
    job->f1->to_f64(mean, acc, 1);
    mean[0] /= (double)n;
    store_f64[job->out_dt](job->out, job->es, mean, 1);
  }
  return true;
}

/* attrs.ints: the reduced dims (0-based, checked, distinct); none means all. */
static DLE_KERNEL(cpu_reduce) {
  const char *fn = dle_op_get_info(op)->name;
  dle_tensor *x = ins[0], *out = outs[0];
  bool red[DLE_MAX_DIMS] = {false};
  int bad = dle_reduced_dims(a, x->ndim, red);
  if (bad >= 0) return dle_error("%s: bad dim %lld", fn, (long long)a->ints[bad]);
  red_job job = {.op = op,
                 .out = dle_tensor_data(out),
                 .es = cpu_esize(out->dtype),
                 .out_dt = out->dtype,
                 .correction = a->f[0],
                 .base = a->index_base};
  int fl = red_flavor_of(op);
  job.f1 = &flavors[fl][x->dtype];
  if (fl == FL_SUM && x->dtype == DLE_F32 && sum_f32_vec.run) job.f1 = &sum_f32_vec;
  if (op == DLE_OP_VAR || op == DLE_OP_STD) job.f2 = &flavors[FL_SQDEV][x->dtype];
  if (op == DLE_OP_LOGSUMEXP) job.f2 = &flavors[FL_EXPSUM][x->dtype];
  bool in_f64 = op == DLE_OP_MEAN || job.f2; /* results computed in double, stored as float */
  if (!job.f1->run || (job.f2 && !job.f2->run) || (in_f64 && !store_f64[out->dtype]))
    return dle_error("%s: no CPU kernel for dtype %s", fn, dle_dtype_name(x->dtype));
  if (op == DLE_OP_MAX || op == DLE_OP_MIN) job.out2 = dle_tensor_data(outs[1]);
  if (reduce_small_whole(&job, x, out)) return DLE_OK;

  /* the output is contiguous over the kept dims, in their order */
  int64_t ostr[DLE_MAX_DIMS], st = 1;
  for (int d = x->ndim - 1; d >= 0; d--) {
    ostr[d] = red[d] ? 0 : st;
    if (!red[d]) st *= x->sizes[d];
  }
  job.arg = fl == FL_ARGMAX || fl == FL_ARGMIN;
  plan_build(&job.pl, x, ostr, red, job.arg);
  if (job.pl.nout == 0) return DLE_OK;
  int nt = red_threads();
  /* sums, extrema and norms are light (bound by memory); logsumexp takes an exp per element */
  double grain = op == DLE_OP_LOGSUMEXP ? CPU_PARALLEL_GRAIN : CPU_PARALLEL_GRAIN_LIGHT;
  bool par = nt > 1 && (double)job.pl.nout * (double)job.pl.nred >= grain;
  plan_chunks(&job.pl, par ? nt : 1, RED_BLOCK);
  if (op == DLE_OP_LOGSUMEXP && x->dtype == DLE_F32 && cpu_vec && !job.pl.stream &&
      job.pl.nr == 1 && job.pl.rx[0] == sizeof(float) &&
      (!par || job.pl.nchunks >= 2 * (int64_t)nt)) {
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (par)
#endif
    for (int64_t i = 0; i < job.pl.nchunks; i++) lse_chunk(&job.pl, i, (float *)job.out);
    return DLE_OK;
  }
  /* few chunks: each chunk's reduction is split across the threads instead */
  bool split = par && job.pl.nchunks < 4 * (int64_t)nt;
  if (split) plan_chunks(&job.pl, 1, RED_BLOCK);
  int slots = par && !split ? nt : 1;
  size_t work = red_slot_bytes(job.pl.blk) * 4;
  size_t scratch = split ? red_slot_bytes(job.pl.blk) * 2 * (size_t)nt : 0;
  /* accumulators of a few outputs (a full reduction has one) fit on the stack: no malloc per op */
  char small[1024];
  size_t need = work * (size_t)slots + scratch + 128;
  char *raw = need <= sizeof small ? small : malloc(need);
  if (!raw)
    return dle_error("%s: out of memory for the accumulators of %lld outputs", fn,
                     (long long)job.pl.blk);
  char *mem = raw + (128 - (uintptr_t)raw % 128);
  if (!par || split) {
    for (int64_t i = 0; i < job.pl.nchunks; i++)
      red_chunk_run(&job, i, (double *)mem, split ? mem + work : NULL);
  } else {
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
    for (int64_t i = 0; i < job.pl.nchunks; i++) {
#ifdef _OPENMP
      int t = omp_get_thread_num();
#else
      int t = 0;
#endif
      red_chunk_run(&job, i, (double *)(mem + work * (size_t)t), NULL);
    }
  }
  if (raw != small) free(raw);
  return DLE_OK;
}

void cpu_register_reduce(dle_backend *b) {
  if (cpu_vec) {
    sum_f32_vec = flavors[FL_SUM][DLE_F32];
    sum_f32_vec.run = run_sum_f32_vec;
    sum_f32_vec.row = row_sum_f32_vec;
    sum_f32_vec.rows = rows_sum_f32_vec;
  }
  for (int op = 0; op < DLE_NUM_OPS; op++) {
    dle_op_kind k = dle_op_get_info((dle_op)op)->kind;
    if (k == DLE_KIND_REDUCE) b->kernels[op] = cpu_reduce;
  }
}
