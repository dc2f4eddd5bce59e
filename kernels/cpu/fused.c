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

/* The program over the whole output, block by block, on threads for large outputs. */
#define RUN_PROGRAM(T)                                                                          \
  static dle_status run_##T(T *out, dle_tensor *const *ins, const in_plan *plans, int nin,      \
                            const dle_fused_instr *prog, int n, int ndim, const int64_t *sizes, \
                            int64_t numel) {                                                    \
    int nregs = nin + n;                                                                        \
    int64_t nblocks = (numel + DLE_FUSED_BLOCK - 1) / DLE_FUSED_BLOCK;                          \
    bool failed = false;                                                                        \
    /* a large output is written from the last register with streaming stores (cpu_stream.h) */ \
    bool stream = cpu_stream_output(numel * (int64_t)sizeof(T));                                \
    _Pragma("omp parallel if (numel >= CPU_PARALLEL_GRAIN && nblocks > 1)")                     \
    {                                                                                           \
      T *buf = malloc(sizeof(T) * (size_t)nregs * DLE_FUSED_BLOCK);                             \
      const T *reg[DLE_FUSED_MAX_REGS];                                                         \
      if (!buf) {                                                                               \
        _Pragma("omp atomic write")                                                             \
        failed = true;                                                                          \
      } else {                                                                                  \
        /* single values are splatted once per thread */                                        \
        for (int i = 0; i < nin; i++)                                                           \
          if (plans[i].kind == IN_SCALAR) {                                                     \
            T v = *(const T *)dle_tensor_data(ins[i]);                                          \
            for (int64_t e = 0; e < DLE_FUSED_BLOCK; e++)                                       \
              buf[(size_t)i * DLE_FUSED_BLOCK + e] = v;                                         \
          }                                                                                     \
        _Pragma("omp for schedule(static)")                                                     \
        for (int64_t blk = 0; blk < nblocks; blk++) {                                           \
          int64_t start = blk * DLE_FUSED_BLOCK;                                                \
          int64_t len = numel - start < DLE_FUSED_BLOCK ? numel - start : DLE_FUSED_BLOCK;      \
          for (int i = 0; i < nin; i++) {                                                       \
            T *slot = buf + (size_t)i * DLE_FUSED_BLOCK;                                        \
            const T *src = (const T *)dle_tensor_data(ins[i]);                                  \
            if (plans[i].kind == IN_DIRECT)                                                     \
              reg[i] = src + start;                                                             \
            else if (plans[i].kind == IN_SCALAR)                                                \
              reg[i] = slot;                                                                    \
            else {                                                                              \
              gather_##T(slot, src, &plans[i], ndim, sizes, start, len);                        \
              reg[i] = slot;                                                                    \
            }                                                                                   \
          }                                                                                     \
          for (int k = 0; k < n; k++) {                                                         \
            T *dst = k == n - 1 && !stream ? out + start                                        \
                                           : buf + (size_t)(nin + k) * DLE_FUSED_BLOCK;         \
            instr_##T(&prog[k], dst, reg[prog[k].a],                                            \
                      reg[is_binary(prog[k].op) ? prog[k].b : prog[k].a], len);                 \
            reg[nin + k] = dst;                                                                 \
          }                                                                                     \
          if (stream) cpu_stream_copy(out + start, reg[nin + n - 1], sizeof(T) * (size_t)len);  \
        }                                                                                       \
        if (stream) cpu_stream_fence();                                                         \
        free(buf);                                                                              \
      }                                                                                         \
    }                                                                                           \
    return failed ? dle_error("fused: out of memory for %d block registers", nregs) : DLE_OK;   \
  }
RUN_PROGRAM(float)
RUN_PROGRAM(double)

/* The engine (engine/fused.c) has checked the program, the dtypes and that every input
 * broadcasts to out's shape, and allocated out (contiguous, at least one element). */
static dle_status cpu_fused_run(dle_tensor *out, dle_tensor *const *ins, int nin,
                                const dle_fused_instr *prog, int n) {
  int ndim = out->ndim;
  const int64_t *sizes = out->sizes;
  in_plan plans[DLE_FUSED_MAX_REGS];
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
  int64_t numel = dle_tensor_numel(out);
  return out->dtype == DLE_F32
             ? run_float(dle_tensor_data(out), ins, plans, nin, prog, n, ndim, sizes, numel)
             : run_double(dle_tensor_data(out), ins, plans, nin, prog, n, ndim, sizes, numel);
}

void cpu_register_fused(dle_backend *b) {
  b->fused_supports = cpu_fused_supports;
  b->fused_run = cpu_fused_run;
}
