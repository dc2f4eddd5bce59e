/* elementwise.c — CPU kernels of the unary, binary, comparison and where ops.
 * Each op is one expression below; the macros instantiate it for every dtype it supports, with a
 * contiguous fast path the compiler vectorises and a strided path for everything else. */
#include "cpu_loop.h"
#include "cpu_stream.h"
#include "cpu_vecmath.h"
#include "../../engine/kernel/elementwise_math.h"

#include <tgmath.h> /* exp(x) etc. pick the float or double version from x's type */

/* abs/sign/relu test x < 0 on every integer dtype, uint64 included, where it is just false */
#pragma GCC diagnostic ignored "-Wtype-limits"

/* sigmoid with one exp of -|x|: 1 / (1 + e) for x >= 0, e / (1 + e) below, so a large negative x
 * gives exp(x) itself (down to the denormals) where 1 / (1 + exp(-x)) would overflow to 0 */
#define CPU_SIGMOID(x) (x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)))

/* gelu'(x) = Phi(x) + x phi(x) (gelu_grad, and gelu_backward's factor) */
#define CPU_GELU_GRAD(x)                                           \
  ((compute_t)0.5 * erfc(x * (compute_t)-0.70710678118654752440) + \
   x * exp((compute_t)-0.5 * x * x) * (compute_t)0.39894228040143267794)

/* uint64 (whose values do not all fit int64): no signs, so C's / and % are already floor and
 * remainder (a zero divisor was rejected before the kernel) */
static inline uint64_t ew_remainder_i64_u64(uint64_t a, uint64_t b) { return a % b; }
static inline uint64_t ew_div_floor_i64_u64(uint64_t a, uint64_t b) { return a / b; }

/* Integer (int64) or double versions of the division-like ops (elementwise_math.h); float32
 * goes through double, where fmod is exact too. */
#define CPU_FMOD(a, b)                                \
  _Generic((a), float                                 \
           : fmodf((float)(a), (float)(b)), double    \
           : fmod((double)(a), (double)(b)), uint64_t \
           : ew_remainder_i64_u64(a, b), default      \
           : ew_fmod_i64((int64_t)(a), (int64_t)(b)))
#define CPU_DIVLIKE(a, b, F, I)                         \
  _Generic((a), float                                   \
           : (float)F((double)(a), (double)(b)), double \
           : F((double)(a), (double)(b)), uint64_t      \
           : I##_u64(a, b), default                     \
           : I((int64_t)(a), (int64_t)(b)))

#define CPU_ISINF(x) ((double)(x) == INFINITY || (double)(x) == -INFINITY)

/* ---- the ops: name, expression of x (unary) or a, b (binary) in compute type CT ---- */
#define UNARY_NUMERIC_OPS(X)                \
  X(NEG, CPU_NEG(x))                        \
  X(ABS, x < 0 ? CPU_NEG(x) : x)            \
  X(SIGN, (compute_t)((x > 0) - (x < 0)))   \
  X(RELU, x < 0 ? (compute_t)0 : x)         \
  X(CLAMP, x < p0 ? p0 : (x > p1 ? p1 : x)) \
  X(POW_SCALAR, pow(x, p0))

#define UNARY_FLOAT_OPS(X)                                                                      \
  X(EXP, exp(x))                                                                                \
  X(LOG, log(x))                                                                                \
  X(EXPM1, expm1(x))                                                                            \
  X(LOG1P, log1p(x))                                                                            \
  X(SQRT, sqrt(x))                                                                              \
  X(RSQRT, 1 / sqrt(x))                                                                         \
  X(RECIPROCAL, 1 / x)                                                                          \
  X(SIN, sin(x))                                                                                \
  X(COS, cos(x))                                                                                \
  X(TANH, tanh(x))                                                                              \
  X(SIGMOID, CPU_SIGMOID(x))                                                                    \
  /* erfc in double even for float: float erfc and the products round to ~7 ulp */              \
  X(GELU, (compute_t)(0.5 * (double)x *                                                         \
                      erfc((double)x * -0.70710678118654752440))) /* no 1 + erf cancellation */ \
  X(GELU_GRAD, CPU_GELU_GRAD(x))                                                                \
  X(SILU, x *CPU_SIGMOID(x))                                                                    \
  X(FLOOR, floor(x))                                                                            \
  X(CEIL, ceil(x))                                                                              \
  X(ROUND, nearbyint(x))                                                                        \
  X(TRUNC, trunc(x))                                                                            \
  X(FRAC, x - trunc(x))                                                                         \
  X(TAN, tan(x))                                                                                \
  X(ASIN, asin(x))                                                                              \
  X(ACOS, acos(x))                                                                              \
  X(ATAN, atan(x))                                                                              \
  X(SINH, sinh(x))                                                                              \
  X(COSH, cosh(x))                                                                              \
  X(ASINH, asinh(x))                                                                            \
  X(ACOSH, acosh(x))                                                                            \
  X(ATANH, atanh(x))                                                                            \
  X(ERF, erf(x))                                                                                \
  X(ERFC, erfc(x))                                                                              \
  X(ERFINV, (compute_t)ew_erfinv((double)x))                                                    \
  X(LOG2, log2(x))                                                                              \
  X(LOG10, log10(x))                                                                            \
  X(EXP2, exp2(x))                                                                              \
  X(NAN_TO_NUM,                                                                                 \
    x != x ? p0 : (x == (compute_t)INFINITY ? p1 : (x == -(compute_t)INFINITY ? p2 : x)))

/* bool results, every dtype (integers are never NaN nor infinite) */
#define PREDICATE_OPS(X) \
  X(ISNAN, x != x)       \
  X(ISINF, CPU_ISINF(x)) \
  X(ISFINITE, x == x && !CPU_ISINF(x))

#define BINARY_NUMERIC_OPS(X)                                     \
  X(ADD, CPU_WRAP(a, b, +))                                       \
  X(SUB, CPU_WRAP(a, b, -))                                       \
  X(MUL, CPU_WRAP(a, b, *))                                       \
  X(POW, pow(a, b))                                               \
  X(MAXIMUM, (a > b || a != a) ? a : b)                           \
  X(MINIMUM, (a < b || a != a) ? a : b)                           \
  X(FMAX, (a > b || b != b) ? a : b)                              \
  X(FMIN, (a < b || b != b) ? a : b)                              \
  X(FMOD, CPU_FMOD(a, b))                                         \
  X(REMAINDER, CPU_DIVLIKE(a, b, ew_remainder, ew_remainder_i64)) \
  X(FLOOR_DIVIDE, CPU_DIVLIKE(a, b, ew_div_floor, ew_div_floor_i64))

#define BINARY_FLOAT_OPS(X)                                   \
  X(DIV, a / b)                                               \
  X(GELU_BACKWARD, b *CPU_GELU_GRAD(a))                       \
  X(ATAN2, atan2(a, b))                                       \
  X(HYPOT, hypot(a, b))                                       \
  X(LOGADDEXP, (compute_t)ew_logaddexp((double)a, (double)b)) \
  X(COPYSIGN, copysign(a, b))

#define COMPARE_OPS(X) \
  X(EQ, a == b) X(NE, a != b) X(LT, a < b) X(LE, a <= b) X(GT, a > b) X(GE, a >= b)

/* complex64/complex128: the elementwise ops with a complex kernel (every other op refuses
 * complex at the front door, engine/complex.c). C99 complex arithmetic: exp/log are cexp/clog
 * through <tgmath.h>, and a / b is libgcc's __divsc3/__divdc3, which scales to avoid the
 * overflow and underflow of the textbook formula (no -ffast-math / -fcx-limited-range here). */
#define UNARY_COMPLEX_OPS(X)   X(NEG, -x) X(EXP, exp(x)) X(LOG, log(x))
#define BINARY_COMPLEX_OPS(X)  X(ADD, a + b) X(SUB, a - b) X(MUL, a *b) X(DIV, a / b)
#define COMPARE_COMPLEX_OPS(X) X(EQ, a == b) X(NE, a != b)

/* ---- loop templates ---- */
#define UNARY_LOOP(OP, EXPR, ID, T, CT)                                                           \
  static void unary_##OP##_##ID(char **p, const int64_t *s, int64_t n, const void *ctx) {         \
    typedef CT compute_t; /* the op expressions name the compute type this way */                 \
    const dle_attrs *at = ctx;                                                                    \
    const double *f = at->f;                                                                      \
    const CT p0 = CPU_PARAM(CT, f[0]), p1 = CPU_PARAM(CT, f[1]);                                  \
    const CT p2 =                                                                                 \
        DLE_OP_##OP == DLE_OP_NAN_TO_NUM ? CPU_PARAM(CT, ew_double_of_bits(at->ints[0])) : (CT)0; \
    (void)p0, (void)p1, (void)p2, (void)sizeof(compute_t);                                        \
    if (s[0] == sizeof(T) && s[1] == sizeof(T)) {                                                 \
      T *o = (T *)p[0];                                                                           \
      const T *in = (const T *)p[1];                                                              \
      _Pragma("GCC ivdep")                                                                        \
      for (int64_t i = 0; i < n; i++) {                                                           \
        CT x = LD_##ID(in[i]);                                                                    \
        o[i] = ST_##ID(EXPR);                                                                     \
      }                                                                                           \
    } else {                                                                                      \
      for (int64_t i = 0; i < n; i++) {                                                           \
        CT x = LD_##ID(*(const T *)(p[1] + i * s[1]));                                            \
        *(T *)(p[0] + i * s[0]) = ST_##ID(EXPR);                                                  \
      }                                                                                           \
    }                                                                                             \
  }

/* Binary: one body, three layouts (both contiguous, a contiguous with scalar b, scalar a with
 * contiguous b) that vectorise, plus the general strided walk. */
#define BINARY_BODY(OT, STORE, ID, T, CT, EXPR)                                                  \
  typedef CT compute_t;                                                                          \
  (void)sizeof(compute_t);                                                                       \
  if (s[0] == sizeof(OT) && s[1] == sizeof(T) && (s[2] == sizeof(T) || s[2] == 0)) {             \
    OT *o = (OT *)p[0];                                                                          \
    const T *pa = (const T *)p[1], *pb = (const T *)p[2];                                        \
    if (s[2]) {                                                                                  \
      _Pragma("GCC ivdep")                                                                       \
      for (int64_t i = 0; i < n; i++) {                                                          \
        CT a = LD_##ID(pa[i]), b = LD_##ID(pb[i]);                                               \
        o[i] = STORE(EXPR);                                                                      \
      }                                                                                          \
    } else {                                                                                     \
      const CT b = LD_##ID(pb[0]);                                                               \
      _Pragma("GCC ivdep")                                                                       \
      for (int64_t i = 0; i < n; i++) {                                                          \
        CT a = LD_##ID(pa[i]);                                                                   \
        o[i] = STORE(EXPR);                                                                      \
      }                                                                                          \
    }                                                                                            \
  } else if (s[0] == sizeof(OT) && s[1] == 0 && s[2] == sizeof(T)) {                             \
    OT *o = (OT *)p[0];                                                                          \
    const T *pb = (const T *)p[2];                                                               \
    const CT a = LD_##ID(*(const T *)p[1]);                                                      \
    _Pragma("GCC ivdep")                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                            \
      CT b = LD_##ID(pb[i]);                                                                     \
      o[i] = STORE(EXPR);                                                                        \
    }                                                                                            \
  } else {                                                                                       \
    for (int64_t i = 0; i < n; i++) {                                                            \
      CT a = LD_##ID(*(const T *)(p[1] + i * s[1])), b = LD_##ID(*(const T *)(p[2] + i * s[2])); \
      *(OT *)(p[0] + i * s[0]) = STORE(EXPR);                                                    \
    }                                                                                            \
  }

#define BINARY_LOOP(OP, EXPR, ID, T, CT)                                                   \
  static void binary_##OP##_##ID(char **p, const int64_t *s, int64_t n, const void *ctx) { \
    (void)ctx;                                                                             \
    BINARY_BODY(T, ST_##ID, ID, T, CT, EXPR)                                               \
  }

#define STORE_BOOL(v) ((uint8_t)((v) != 0))
#define COMPARE_LOOP(OP, EXPR, ID, T, CT)                                                   \
  static void compare_##OP##_##ID(char **p, const int64_t *s, int64_t n, const void *ctx) { \
    (void)ctx;                                                                              \
    BINARY_BODY(uint8_t, STORE_BOOL, ID, T, CT, EXPR)                                       \
  }

#define WHERE_LOOP(ID, T, CT)                                                        \
  static void where_##ID(char **p, const int64_t *s, int64_t n, const void *ctx) {   \
    (void)ctx;                                                                       \
    for (int64_t i = 0; i < n; i++) {                                                \
      uint8_t c = *(const uint8_t *)(p[1] + i * s[1]);                               \
      *(T *)(p[0] + i * s[0]) = *(const T *)(c ? p[2] + i * s[2] : p[3] + i * s[3]); \
    }                                                                                \
  }

#define PREDICATE_LOOP(OP, EXPR, ID, T, CT)                                                   \
  static void predicate_##OP##_##ID(char **p, const int64_t *s, int64_t n, const void *ctx) { \
    typedef CT compute_t;                                                                     \
    (void)ctx, (void)sizeof(compute_t);                                                       \
    for (int64_t i = 0; i < n; i++) {                                                         \
      CT x = LD_##ID(*(const T *)(p[1] + i * s[1]));                                          \
      *(uint8_t *)(p[0] + i * s[0]) = (uint8_t)(EXPR);                                        \
    }                                                                                         \
  }

/* abs of a complex number is real: |z| by hypot (no overflow for large parts) */
#define COMPLEX_ABS_LOOP(ID, T, CT)                                                    \
  static void unary_ABS_##ID(char **p, const int64_t *s, int64_t n, const void *ctx) { \
    typedef __typeof__(__real__(T) 0) real_t;                                          \
    (void)ctx;                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                  \
      T z = *(const T *)(p[1] + i * s[1]);                                             \
      *(real_t *)(p[0] + i * s[0]) = hypot(__real__ z, __imag__ z);                    \
    }                                                                                  \
  }

static void logical_not_BOOL(char **p, const int64_t *s, int64_t n, const void *ctx) {
  (void)ctx;
  for (int64_t i = 0; i < n; i++)
    *(uint8_t *)(p[0] + i * s[0]) = !*(const uint8_t *)(p[1] + i * s[1]);
}

/* ---- instantiation: op x dtype ---- */
#define UNARY_NUMERIC(OP, EXPR)  CPU_NUMERIC_TYPES_WITH(UNARY_LOOP, OP, EXPR)
#define UNARY_FLOAT(OP, EXPR)    CPU_FLOAT_TYPES_WITH(UNARY_LOOP, OP, EXPR)
#define BINARY_NUMERIC(OP, EXPR) CPU_NUMERIC_TYPES_WITH(BINARY_LOOP, OP, EXPR)
#define BINARY_FLOAT(OP, EXPR)   CPU_FLOAT_TYPES_WITH(BINARY_LOOP, OP, EXPR)
#define COMPARE_ALL(OP, EXPR)    CPU_ALL_TYPES_WITH(COMPARE_LOOP, OP, EXPR)
#define PREDICATE_ALL(OP, EXPR)  CPU_ALL_TYPES_WITH(PREDICATE_LOOP, OP, EXPR)

UNARY_NUMERIC_OPS(UNARY_NUMERIC)
UNARY_FLOAT_OPS(UNARY_FLOAT)
BINARY_NUMERIC_OPS(BINARY_NUMERIC)
BINARY_FLOAT_OPS(BINARY_FLOAT)
COMPARE_OPS(COMPARE_ALL)
PREDICATE_OPS(PREDICATE_ALL)
CPU_ALL_TYPES(WHERE_LOOP)

#define UNARY_COMPLEX(OP, EXPR)   CPU_COMPLEX_TYPES_WITH(UNARY_LOOP, OP, EXPR)
#define BINARY_COMPLEX(OP, EXPR)  CPU_COMPLEX_TYPES_WITH(BINARY_LOOP, OP, EXPR)
#define COMPARE_COMPLEX(OP, EXPR) CPU_COMPLEX_TYPES_WITH(COMPARE_LOOP, OP, EXPR)
UNARY_COMPLEX_OPS(UNARY_COMPLEX)
BINARY_COMPLEX_OPS(BINARY_COMPLEX)
COMPARE_COMPLEX_OPS(COMPARE_COMPLEX)
CPU_COMPLEX_TYPES(COMPLEX_ABS_LOOP)
CPU_COMPLEX_TYPES(WHERE_LOOP)

/* ---- dispatch tables [op][dtype] ---- */
#define ENTRY(PREFIX, OP, EXPR, ID, T, CT) [DLE_OP_##OP][DLE_##ID] = PREFIX##_##OP##_##ID,
#define UNARY_NUMERIC_ENTRIES(OP, EXPR)    CPU_NUMERIC_TYPES_WITH(ENTRY, unary, OP, EXPR)
#define UNARY_FLOAT_ENTRIES(OP, EXPR)      CPU_FLOAT_TYPES_WITH(ENTRY, unary, OP, EXPR)
#define BINARY_NUMERIC_ENTRIES(OP, EXPR)   CPU_NUMERIC_TYPES_WITH(ENTRY, binary, OP, EXPR)
#define BINARY_FLOAT_ENTRIES(OP, EXPR)     CPU_FLOAT_TYPES_WITH(ENTRY, binary, OP, EXPR)
#define COMPARE_ENTRIES(OP, EXPR)          CPU_ALL_TYPES_WITH(ENTRY, compare, OP, EXPR)
#define PREDICATE_ENTRIES(OP, EXPR)        CPU_ALL_TYPES_WITH(ENTRY, predicate, OP, EXPR)
#define WHERE_ENTRY(ID, T, CT)             [DLE_OP_WHERE][DLE_##ID] = where_##ID,
#define UNARY_COMPLEX_ENTRIES(OP, EXPR)    CPU_COMPLEX_TYPES_WITH(ENTRY, unary, OP, EXPR)
#define BINARY_COMPLEX_ENTRIES(OP, EXPR)   CPU_COMPLEX_TYPES_WITH(ENTRY, binary, OP, EXPR)
#define COMPARE_COMPLEX_ENTRIES(OP, EXPR)  CPU_COMPLEX_TYPES_WITH(ENTRY, compare, OP, EXPR)
#define ABS_COMPLEX_ENTRY(ID, T, CT)       [DLE_OP_ABS][DLE_##ID] = unary_ABS_##ID,

static const cpu_loop_fn loops[DLE_NUM_OPS][DLE_NUM_DTYPES] = {
    UNARY_NUMERIC_OPS(UNARY_NUMERIC_ENTRIES) UNARY_FLOAT_OPS(UNARY_FLOAT_ENTRIES)
        BINARY_NUMERIC_OPS(BINARY_NUMERIC_ENTRIES) BINARY_FLOAT_OPS(BINARY_FLOAT_ENTRIES)
            COMPARE_OPS(COMPARE_ENTRIES) PREDICATE_OPS(PREDICATE_ENTRIES)
                CPU_ALL_TYPES(WHERE_ENTRY)[DLE_OP_LOGICAL_NOT][DLE_BOOL] = logical_not_BOOL,
    UNARY_COMPLEX_OPS(UNARY_COMPLEX_ENTRIES) BINARY_COMPLEX_OPS(BINARY_COMPLEX_ENTRIES)
        COMPARE_COMPLEX_OPS(COMPARE_COMPLEX_ENTRIES) CPU_COMPLEX_TYPES(ABS_COMPLEX_ENTRY)
            CPU_COMPLEX_TYPES(WHERE_ENTRY)};

/* Ops whose element costs a libm-class function go on several threads from CPU_PARALLEL_GRAIN
 * elements; the others (a few instructions, bound by memory) from CPU_PARALLEL_GRAIN_LIGHT. */
#define HEAVY_ENTRY(OP, EXPR) [DLE_OP_##OP] = true,
static const bool heavy[DLE_NUM_OPS] = {UNARY_FLOAT_OPS(HEAVY_ENTRY)[DLE_OP_POW] = true,
                                        [DLE_OP_POW_SCALAR] = true,
                                        [DLE_OP_GELU_BACKWARD] = true,
                                        [DLE_OP_ATAN2] = true,
                                        [DLE_OP_HYPOT] = true,
                                        [DLE_OP_LOGADDEXP] = true,
                                        [DLE_OP_FMOD] = true,
                                        [DLE_OP_REMAINDER] = true,
                                        [DLE_OP_FLOOR_DIVIDE] = true};
static int64_t grain_of(dle_op op) {
  return heavy[op] ? CPU_PARALLEL_GRAIN : CPU_PARALLEL_GRAIN_LIGHT;
}

/* float32 unary ops with an AVX2 array kernel (cpu_vecmath.h): contiguous runs go straight to it,
 * strided ones through a small stack buffer. */
typedef struct {
  cpu_vec_map_fn map, stream; /* stream: for long contiguous runs of a large output (or NULL) */
} vec_ctx;

/* Runs shorter than this keep cached stores (a tile's rows are written into an L1 buffer). */
#define VEC_STREAM_RUN 16384

static void unary_vec_F32(char **p, const int64_t *s, int64_t n, const void *ctx) {
  const vec_ctx *c = ctx;
  if (s[0] == sizeof(float) && s[1] == sizeof(float)) {
    bool stream = c->stream && n >= VEC_STREAM_RUN && p[0] != p[1];
    (stream ? c->stream : c->map)((float *)p[0], (const float *)p[1], n);
    return;
  }
  cpu_vec_map_fn map = c->map;
  float buf[256];
  for (int64_t i0 = 0; i0 < n; i0 += 256) {
    int64_t m = n - i0 < 256 ? n - i0 : 256;
    for (int64_t i = 0; i < m; i++) buf[i] = *(const float *)(p[1] + (i0 + i) * s[1]);
    map(buf, buf, m);
    for (int64_t i = 0; i < m; i++) *(float *)(p[0] + (i0 + i) * s[0]) = buf[i];
  }
}

/* float32 binary ops with an AVX2 array kernel (gelu_backward): contiguous runs go straight to it,
 * others (strided, broadcast) through small stack buffers. */
typedef struct {
  cpu_vec_map2_fn map, stream;
} vec2_ctx;

static void binary_vec_F32(char **p, const int64_t *s, int64_t n, const void *ctx) {
  const vec2_ctx *c = ctx;
  if (s[0] == sizeof(float) && s[1] == sizeof(float) && s[2] == sizeof(float)) {
    bool stream = c->stream && n >= VEC_STREAM_RUN && p[0] != p[1] && p[0] != p[2];
    (stream ? c->stream : c->map)((float *)p[0], (const float *)p[1], (const float *)p[2], n);
    return;
  }
  float a[256], b[256];
  for (int64_t i0 = 0; i0 < n; i0 += 256) {
    int64_t m = n - i0 < 256 ? n - i0 : 256;
    for (int64_t i = 0; i < m; i++) {
      a[i] = *(const float *)(p[1] + (i0 + i) * s[1]);
      b[i] = *(const float *)(p[2] + (i0 + i) * s[2]);
    }
    c->map(a, a, b, m);
    for (int64_t i = 0; i < m; i++) *(float *)(p[0] + (i0 + i) * s[0]) = a[i];
  }
}

/* The loop of op in dtype dt and the context it takes, in *ctx: float32's AVX2 array kernel when
 * there is one (with its streaming variant when `stream`), else the op's loop over attrs. NULL
 * when the dtype has no loop. */
typedef union {
  vec_ctx unary;
  vec2_ctx binary;
} loop_ctx;
static cpu_loop_fn loop_of(dle_op op, dle_dtype dt, bool stream, const dle_attrs *attrs,
                           loop_ctx *c, const void **ctx) {
  if (dt == DLE_F32 && cpu_vec && cpu_vec->unary[op]) {
    c->unary = (vec_ctx){cpu_vec->unary[op], stream ? cpu_vec->unary_stream[op] : NULL};
    *ctx = &c->unary;
    return unary_vec_F32;
  }
  if (dt == DLE_F32 && cpu_vec && cpu_vec->binary[op]) {
    c->binary = (vec2_ctx){cpu_vec->binary[op], stream ? cpu_vec->binary_stream[op] : NULL};
    *ctx = &c->binary;
    return binary_vec_F32;
  }
  *ctx = attrs;
  return loops[op][dt];
}

/* The front door has already promoted inputs: the loop is chosen by the dtype the op computes
 * in, which is the last input's dtype (where's first input is its bool condition). */
static DLE_KERNEL(cpu_elementwise) {
  dle_dtype dt = ins[nin - 1]->dtype;
  bool large = cpu_stream_output(dle_tensor_numel(outs[0]) * (int64_t)cpu_esize(outs[0]->dtype));
  loop_ctx c;
  const void *ctx;
  cpu_loop_fn fn = loop_of(op, dt, large, a, &c, &ctx);
  if (!fn)
    return dle_error("%s: no CPU kernel for dtype %s", dle_op_get_info(op)->name,
                     dle_dtype_name(dt));
  cpu_foreach_elementwise(outs[0], ins, nin, fn, ctx, grain_of(op));
  return DLE_OK;
}

/* The small-op lane (dle.h): one call of the op's loop over the whole contiguous arrays, no
 * iterator; a 0-dim operand of a larger result is read with stride 0. Ops too large for one
 * thread are declined, to be split by the general route. */
static bool cpu_small_elementwise(dle_op op, dle_tensor *out, dle_tensor *const *ins, int nin,
                                  const dle_attrs *attrs) {
  int64_t n = dle_tensor_numel(out), es = cpu_esize(out->dtype);
  if (n >= grain_of(op)) return false;
  loop_ctx c;
  const void *ctx;
  cpu_loop_fn fn = loop_of(op, out->dtype, false, attrs, &c, &ctx);
  if (!fn) return false;
  char *p[3] = {dle_tensor_data(out), dle_tensor_data(ins[0]),
                nin > 1 ? dle_tensor_data(ins[1]) : NULL};
  int64_t st[3] = {es, es, es};
  for (int i = 0; i < nin; i++)
    if (ins[i]->ndim == 0 && out->ndim > 0) st[i + 1] = 0;
  fn(p, st, n, ctx);
  return true;
}

void cpu_register_elementwise(dle_backend *b) {
  b->small_elementwise = cpu_small_elementwise;
  for (int op = 0; op < DLE_NUM_OPS; op++) {
    dle_op_kind k = dle_op_get_info((dle_op)op)->kind;
    if (k == DLE_KIND_UNARY || k == DLE_KIND_BINARY || k == DLE_KIND_COMPARE || k == DLE_KIND_WHERE)
      b->kernels[op] = cpu_elementwise;
  }
}
