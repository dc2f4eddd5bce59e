/* fused.c — the fused elementwise executor (dle_backend.fused_run, behind dle_fused_run in
 * engine/fused.c): a small register program run block by block over the output, with each block's
 * temporaries in cache. */
#include "../../engine/internal.h"
#include "backend.h"
#include "cpu_loop.h"
#include "cpu_stream.h"
#include "cpu_vecmath.h"

#include <omp.h>
#include <stdlib.h>
#include <tgmath.h>

static bool cpu_fused_supports(dle_op op) {
  switch (op) {
    case DLE_OP_NEG:
    case DLE_OP_ABS:
    case DLE_OP_RELU:
    case DLE_OP_EXP:
    case DLE_OP_LOG:
    case DLE_OP_EXPM1:
    case DLE_OP_LOG1P:
    case DLE_OP_SQRT:
    case DLE_OP_RSQRT:
    case DLE_OP_RECIPROCAL:
    case DLE_OP_SIN:
    case DLE_OP_COS:
    case DLE_OP_TANH:
    case DLE_OP_SIGMOID:
    case DLE_OP_GELU:
    case DLE_OP_SILU:
    case DLE_OP_POW_SCALAR:
    case DLE_OP_CLAMP:
    case DLE_OP_ADD:
    case DLE_OP_SUB:
    case DLE_OP_MUL:
    case DLE_OP_DIV:
    case DLE_OP_MAXIMUM:
    case DLE_OP_MINIMUM:
    case DLE_OP_POW: return true;
    default: return false;
  }
}

static bool is_binary(int op) {
  return op == DLE_OP_ADD || op == DLE_OP_SUB || op == DLE_OP_MUL || op == DLE_OP_DIV ||
         op == DLE_OP_MAXIMUM || op == DLE_OP_MINIMUM || op == DLE_OP_POW;
}

/* How a block reads input i: in place (contiguous, the output's shape), one value (a single
 * element), or gathered through element strides aligned to the output's dims (0 where broadcast). */
typedef enum { IN_DIRECT, IN_SCALAR, IN_GATHER } in_kind;

typedef struct {
  in_kind kind;
  int64_t strides[DLE_MAX_DIMS];
} in_plan;

/* One instruction over n elements: d = op(a[, b]). Expressions as in elementwise.c. */
#define SIGMOID_OF(x) (x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)))
/* One line per op, as a table (clang-format would give each three). */
// clang-format off
#define RUN_INSTR(T, VEC)                                                                      \
  static void instr_##T(const dle_fused_instr *in, T *restrict d, const T *restrict a,         \
                        const T *restrict b, int64_t n) {                                      \
    const T p0 = (T)in->f0, p1 = (T)in->f1;                                                      \
    VEC                                                                                        \
    switch (in->op) {                                                                           \
      case DLE_OP_NEG: for (int64_t i = 0; i < n; i++) d[i] = -a[i]; break;                    \
      case DLE_OP_ABS: for (int64_t i = 0; i < n; i++) d[i] = a[i] < 0 ? -a[i] : a[i]; break;  \
      case DLE_OP_RELU: for (int64_t i = 0; i < n; i++) d[i] = a[i] < 0 ? (T)0 : a[i]; break;  \
      case DLE_OP_EXP: for (int64_t i = 0; i < n; i++) d[i] = exp(a[i]); break;                \
      case DLE_OP_LOG: for (int64_t i = 0; i < n; i++) d[i] = log(a[i]); break;                \
      case DLE_OP_EXPM1: for (int64_t i = 0; i < n; i++) d[i] = expm1(a[i]); break;            \
      case DLE_OP_LOG1P: for (int64_t i = 0; i < n; i++) d[i] = log1p(a[i]); break;            \
      case DLE_OP_SQRT: for (int64_t i = 0; i < n; i++) d[i] = sqrt(a[i]); break;              \
      case DLE_OP_RSQRT: for (int64_t i = 0; i < n; i++) d[i] = 1 / sqrt(a[i]); break;         \
      case DLE_OP_RECIPROCAL: for (int64_t i = 0; i < n; i++) d[i] = 1 / a[i]; break;          \
      case DLE_OP_SIN: for (int64_t i = 0; i < n; i++) d[i] = sin(a[i]); break;                \
      case DLE_OP_COS: for (int64_t i = 0; i < n; i++) d[i] = cos(a[i]); break;                \
      case DLE_OP_TANH: for (int64_t i = 0; i < n; i++) d[i] = tanh(a[i]); break;              \
      case DLE_OP_SIGMOID: for (int64_t i = 0; i < n; i++) { T x = a[i]; d[i] = SIGMOID_OF(x); } break; \
      case DLE_OP_SILU: for (int64_t i = 0; i < n; i++) { T x = a[i]; d[i] = x * SIGMOID_OF(x); } break; \
      case DLE_OP_GELU:                                                                        \
        for (int64_t i = 0; i < n; i++)                                                        \
          d[i] = (T)(0.5 * (double)a[i] * erfc((double)a[i] * -0.70710678118654752440));       \
        break;                                                                                 \
      case DLE_OP_POW_SCALAR: for (int64_t i = 0; i < n; i++) d[i] = pow(a[i], p0); break;     \
      case DLE_OP_CLAMP:                                                                       \
        for (int64_t i = 0; i < n; i++) { T x = a[i]; d[i] = x < p0 ? p0 : (x > p1 ? p1 : x); } \
        break;                                                                                 \
      case DLE_OP_ADD: for (int64_t i = 0; i < n; i++) d[i] = a[i] + b[i]; break;              \
      case DLE_OP_SUB: for (int64_t i = 0; i < n; i++) d[i] = a[i] - b[i]; break;              \
      case DLE_OP_MUL: for (int64_t i = 0; i < n; i++) d[i] = a[i] * b[i]; break;              \
      case DLE_OP_DIV: for (int64_t i = 0; i < n; i++) d[i] = a[i] / b[i]; break;              \
      case DLE_OP_POW: for (int64_t i = 0; i < n; i++) d[i] = pow(a[i], b[i]); break;          \
      case DLE_OP_MAXIMUM:                                                                     \
        for (int64_t i = 0; i < n; i++) d[i] = (a[i] > b[i] || a[i] != a[i]) ? a[i] : b[i];     \
        break;                                                                                 \
      case DLE_OP_MINIMUM:                                                                     \
        for (int64_t i = 0; i < n; i++) d[i] = (a[i] < b[i] || a[i] != a[i]) ? a[i] : b[i];     \
        break;                                                                                 \
    }                                                                                          \
  }
/* float32 takes the AVX2 maps eager ops use (exp, log, tanh, sigmoid, gelu, silu): same results */
RUN_INSTR(float, if (cpu_vec && cpu_vec->unary[in->op]) { cpu_vec->unary[in->op](d, a, n); return; })
RUN_INSTR(double, )
// clang-format on

/* Gathers n elements of input x from linear output position start, a run of the last dim at a
 * time (a copy, a fill for a broadcast dim, or a strided walk). */
#define GATHER(T)                                                                   \
  static void gather_##T(T *restrict dst, const T *src, const in_plan *p, int ndim, \
                         const int64_t *sizes, int64_t start, int64_t n) {          \
    if (ndim == 0) {                                                                \
      for (int64_t i = 0; i < n; i++) dst[i] = src[0];                              \
      return;                                                                       \
    }                                                                               \
    int64_t coord[DLE_MAX_DIMS], off = 0, rest = start;                             \
    for (int d = ndim - 1; d >= 0; d--) {                                           \
      coord[d] = rest % sizes[d];                                                   \
      rest /= sizes[d];                                                             \
      off += coord[d] * p->strides[d];                                              \
    }                                                                               \
    int last = ndim - 1;                                                            \
    int64_t ls = p->strides[last], i = 0;                                           \
    while (i < n) {                                                                 \
      int64_t run = sizes[last] - coord[last];                                      \
      if (run > n - i) run = n - i;                                                 \
      const T *s0 = src + off;                                                      \
      if (ls == 1)                                                                  \
        memcpy(dst + i, s0, sizeof(T) * (size_t)run);                               \
      else if (ls == 0)                                                             \
        for (int64_t k = 0; k < run; k++) dst[i + k] = s0[0];                       \
      else                                                                          \
        for (int64_t k = 0; k < run; k++) dst[i + k] = s0[k * ls];                  \
      i += run;                                                                     \
      off += run * ls;                                                              \
      coord[last] += run;                                                           \
      for (int d = last; d > 0 && coord[d] == sizes[d]; d--) {                      \
        off -= coord[d] * p->strides[d];                                            \
        coord[d] = 0;                                                               \
        coord[d - 1]++;                                                             \
        off += p->strides[d - 1];                                                   \
      }                                                                             \
    }                                                                               \
  }
GATHER(float)
GATHER(double)

/* What a run needs: the inputs, their plans, the program and its element space. */
typedef struct {
  dle_tensor *const *ins;
  const in_plan *plans;
  int nin, n, ndim;
  const dle_fused_instr *prog;
  const int64_t *sizes;
  int64_t numel;
} fused_ctx;

/* One thread's block registers (nin + n of DLE_FUSED_BLOCK elements), single-value inputs
 * splatted once; NULL when out of memory. Evaluation of one block: the inputs gathered (or read in
 * place), the instructions run; the last one writes into last_dst when given. Returns the block's
 * result. */
#define EVAL_BLOCK(T)                                                                            \
  static T *block_regs_##T(const fused_ctx *c) {                                                 \
    T *buf = malloc(sizeof(T) * (size_t)(c->nin + c->n) * DLE_FUSED_BLOCK);                      \
    for (int i = 0; buf && i < c->nin; i++)                                                      \
      if (c->plans[i].kind == IN_SCALAR) {                                                       \
        T v = *(const T *)dle_tensor_data(c->ins[i]);                                            \
        for (int64_t e = 0; e < DLE_FUSED_BLOCK; e++) buf[(size_t)i * DLE_FUSED_BLOCK + e] = v;  \
      }                                                                                          \
    return buf;                                                                                  \
  }                                                                                              \
  static const T *eval_block_##T(const fused_ctx *c, T *buf, int64_t start, int64_t len,         \
                                 T *last_dst) {                                                  \
    const T *reg[DLE_FUSED_MAX_REGS];                                                            \
    for (int i = 0; i < c->nin; i++) {                                                           \
      T *slot = buf + (size_t)i * DLE_FUSED_BLOCK;                                               \
      const T *src = (const T *)dle_tensor_data(c->ins[i]);                                      \
      if (c->plans[i].kind == IN_DIRECT)                                                         \
        reg[i] = src + start;                                                                    \
      else if (c->plans[i].kind == IN_SCALAR)                                                    \
        reg[i] = slot;                                                                           \
      else {                                                                                     \
        gather_##T(slot, src, &c->plans[i], c->ndim, c->sizes, start, len);                      \
        reg[i] = slot;                                                                           \
      }                                                                                          \
    }                                                                                            \
    T *dst = NULL;                                                                               \
    for (int k = 0; k < c->n; k++) {                                                             \
      const dle_fused_instr *in = &c->prog[k];                                                   \
      dst = k == c->n - 1 && last_dst ? last_dst : buf + (size_t)(c->nin + k) * DLE_FUSED_BLOCK; \
      instr_##T(in, dst, reg[in->a], reg[is_binary(in->op) ? in->b : in->a], len);               \
      reg[c->nin + k] = dst;                                                                     \
    }                                                                                            \
    return dst;                                                                                  \
  }
EVAL_BLOCK(float)
EVAL_BLOCK(double)

/* The program over the whole output, block by block, on threads for large outputs; a large output
 * leaves the last register with streaming stores (cpu_stream.h). */
#define RUN_PROGRAM(T)                                                                      \
  static dle_status run_##T(T *out, const fused_ctx *c) {                                   \
    int64_t numel = c->numel, nblocks = (numel + DLE_FUSED_BLOCK - 1) / DLE_FUSED_BLOCK;    \
    bool failed = false, stream = cpu_stream_output(numel * (int64_t)sizeof(T));            \
    _Pragma("omp parallel if (numel >= CPU_PARALLEL_GRAIN && nblocks > 1)")                 \
    {                                                                                       \
      T *buf = block_regs_##T(c);                                                           \
      if (!buf) {                                                                           \
        _Pragma("omp atomic write")                                                         \
        failed = true;                                                                      \
      } else {                                                                              \
        _Pragma("omp for schedule(static)")                                                 \
        for (int64_t blk = 0; blk < nblocks; blk++) {                                       \
          int64_t start = blk * DLE_FUSED_BLOCK;                                            \
          int64_t len = numel - start < DLE_FUSED_BLOCK ? numel - start : DLE_FUSED_BLOCK;  \
          const T *r = eval_block_##T(c, buf, start, len, stream ? NULL : out + start);     \
          if (stream) cpu_stream_copy(out + start, r, sizeof(T) * (size_t)len);             \
        }                                                                                   \
        if (stream) cpu_stream_fence();                                                     \
        free(buf);                                                                          \
      }                                                                                     \
    }                                                                                       \
    return failed ? dle_error("fused: out of memory for %d block registers", c->nin + c->n) \
                  : DLE_OK;                                                                 \
  }
RUN_PROGRAM(float)
RUN_PROGRAM(double)

/* A reduction's running value: a double sum (sum, mean), or the extreme so far (amax, amin; NaN
 * once seen stays). */
typedef struct {
  dle_op op;
  double v;
} reduction;
static inline double red_init(dle_op op) {
  return op == DLE_OP_AMAX ? -INFINITY : op == DLE_OP_AMIN ? INFINITY : 0;
}
static inline double red_step(dle_op op, double acc, double x) {
  if (op == DLE_OP_AMAX) return (x > acc || x != x || acc != acc) ? (acc != acc ? acc : x) : acc;
  if (op == DLE_OP_AMIN) return (x < acc || x != x || acc != acc) ? (acc != acc ? acc : x) : acc;
  return acc + x;
}
static inline double red_combine(dle_op op, double a, double b) {
  return op == DLE_OP_SUM || op == DLE_OP_MEAN ? a + b : red_step(op, a, b);
}

/* acc combined with the reduction of a block's n values: sums with the AVX2 float sum (double
 * accumulators) or four double partial sums, extremes with a compare loop the compiler vectorises
 * and a NaN flag beside it. */
#define BLOCK_REDUCE(T)                                                                          \
  static double block_reduce_##T(dle_op op, double acc, const T *r, int64_t n) {                 \
    if (op == DLE_OP_SUM || op == DLE_OP_MEAN) {                                                 \
      if (sizeof(T) == sizeof(float) && cpu_vec) return acc + cpu_vec->sum((const float *)r, n); \
      double s[4] = {0, 0, 0, 0};                                                                \
      int64_t i = 0;                                                                             \
      for (; i + 4 <= n; i += 4)                                                                 \
        for (int j = 0; j < 4; j++) s[j] += (double)r[i + j];                                    \
      for (; i < n; i++) s[0] += (double)r[i];                                                   \
      return acc + ((s[0] + s[1]) + (s[2] + s[3]));                                              \
    }                                                                                            \
    T m = r[0];                                                                                  \
    bool nan = false;                                                                            \
    if (op == DLE_OP_AMAX)                                                                       \
      for (int64_t i = 0; i < n; i++) m = r[i] > m ? r[i] : m, nan |= r[i] != r[i];              \
    else                                                                                         \
      for (int64_t i = 0; i < n; i++) m = r[i] < m ? r[i] : m, nan |= r[i] != r[i];              \
    return red_step(op, acc, nan ? (double)NAN : (double)m);                                     \
  }
BLOCK_REDUCE(float)
BLOCK_REDUCE(double)

/* The program reduced over every element (one partial per thread, combined in thread order, so a
 * given thread count gives one result) or over the last dim (rows on threads, each row in chunks
 * of at most a block). */
#define REDUCE_PROGRAM(T)                                                                         \
  static dle_status reduce_##T(T *out, const fused_ctx *c, dle_op op, bool last_dim) {            \
    int64_t numel = c->numel, L = last_dim ? c->sizes[c->ndim - 1] : numel, rows = numel / L;     \
    int nthreads = numel >= CPU_PARALLEL_GRAIN ? omp_get_max_threads() : 1;                       \
    double partial[256];                                                                          \
    if (nthreads > 256) nthreads = 256;                                                           \
    for (int t = 0; t < nthreads; t++) partial[t] = red_init(op);                                 \
    bool failed = false;                                                                          \
    _Pragma("omp parallel num_threads(nthreads)")                                                 \
    {                                                                                             \
      T *buf = block_regs_##T(c);                                                                 \
      int me = omp_get_thread_num();                                                              \
      if (!buf) {                                                                                 \
        _Pragma("omp atomic write")                                                               \
        failed = true;                                                                            \
      } else if (!last_dim) {                                                                     \
        int64_t nblocks = (numel + DLE_FUSED_BLOCK - 1) / DLE_FUSED_BLOCK;                        \
        double acc = red_init(op);                                                                \
        _Pragma("omp for schedule(static)")                                                       \
        for (int64_t blk = 0; blk < nblocks; blk++) {                                             \
          int64_t start = blk * DLE_FUSED_BLOCK;                                                  \
          int64_t len = numel - start < DLE_FUSED_BLOCK ? numel - start : DLE_FUSED_BLOCK;        \
          acc = block_reduce_##T(op, acc, eval_block_##T(c, buf, start, len, NULL), len);         \
        }                                                                                         \
        partial[me] = acc;                                                                        \
      } else {                                                                                    \
        _Pragma("omp for schedule(static)")                                                       \
        for (int64_t row = 0; row < rows; row++) {                                                \
          double acc = red_init(op);                                                              \
          for (int64_t off = 0; off < L; off += DLE_FUSED_BLOCK) {                                \
            int64_t len = L - off < DLE_FUSED_BLOCK ? L - off : DLE_FUSED_BLOCK;                  \
            acc =                                                                                 \
                block_reduce_##T(op, acc, eval_block_##T(c, buf, row * L + off, len, NULL), len); \
          }                                                                                       \
          out[row] = (T)(op == DLE_OP_MEAN ? acc / (double)L : acc);                              \
        }                                                                                         \
      }                                                                                           \
      free(buf);                                                                                  \
    }                                                                                             \
    if (failed)                                                                                   \
      return dle_error("fused_reduce: out of memory for %d block registers", c->nin + c->n);      \
    if (!last_dim) {                                                                              \
      double acc = partial[0];                                                                    \
      for (int t = 1; t < nthreads; t++) acc = red_combine(op, acc, partial[t]);                  \
      out[0] = (T)(op == DLE_OP_MEAN ? acc / (double)numel : acc);                                \
    }                                                                                             \
    return DLE_OK;                                                                                \
  }
REDUCE_PROGRAM(float)
REDUCE_PROGRAM(double)

/* How each input is read over the element space (ndim, sizes). */
static void plan_inputs(in_plan *plans, dle_tensor *const *ins, int nin, int ndim,
                        const int64_t *sizes) {
  for (int i = 0; i < nin; i++) {
    const dle_tensor *x = ins[i];
    in_plan *p = &plans[i];
    memset(p, 0, sizeof *p);
    for (int d = 0; d < ndim; d++) {
      int xd = d - (ndim - x->ndim);
      if (xd >= 0 && x->sizes[xd] == sizes[d]) p->strides[d] = x->strides[xd];
    }
    if (dle_tensor_numel(x) == 1)
      p->kind = IN_SCALAR;
    else if (x->ndim == ndim && dle_shape_equal(x->ndim, x->sizes, ndim, sizes) &&
             dle_tensor_is_contiguous(x))
      p->kind = IN_DIRECT;
    else
      p->kind = IN_GATHER;
  }
}

/* The engine (engine/fused.c) has checked the program, the dtypes and that every input
 * broadcasts to out's shape, and allocated out (contiguous, at least one element). */
static dle_status cpu_fused_run(dle_tensor *out, dle_tensor *const *ins, int nin,
                                const dle_fused_instr *prog, int n) {
  in_plan plans[DLE_FUSED_MAX_REGS];
  plan_inputs(plans, ins, nin, out->ndim, out->sizes);
  fused_ctx c = {ins, plans, nin, n, out->ndim, prog, out->sizes, dle_tensor_numel(out)};
  return out->dtype == DLE_F32 ? run_float(dle_tensor_data(out), &c)
                               : run_double(dle_tensor_data(out), &c);
}

/* The same checks, for the element space sizes (not empty) and out 0-dim or sizes minus the last. */
static dle_status cpu_fused_reduce(dle_tensor *out, dle_tensor *const *ins, int nin,
                                   const dle_fused_instr *prog, int n, int ndim,
                                   const int64_t *sizes, dle_op reduce, bool last_dim) {
  in_plan plans[DLE_FUSED_MAX_REGS];
  plan_inputs(plans, ins, nin, ndim, sizes);
  int64_t numel = 1;
  for (int d = 0; d < ndim; d++) numel *= sizes[d];
  fused_ctx c = {ins, plans, nin, n, ndim, prog, sizes, numel};
  return out->dtype == DLE_F32 ? reduce_float(dle_tensor_data(out), &c, reduce, last_dim)
                               : reduce_double(dle_tensor_data(out), &c, reduce, last_dim);
}

void cpu_register_fused(dle_backend *b) {
  b->fused_supports = cpu_fused_supports;
  b->fused_run = cpu_fused_run;
  b->fused_reduce = cpu_fused_reduce;
}
