/* elementwise.cu — CUDA kernels of the unary, binary, comparison and where ops, mirroring
 * kernels/cpu/elementwise.c: the same expression per op in the same compute type, the same
 * dtypes per op (numeric ops: every dtype but bool; float ops: the four float dtypes; comparisons
 * and where: all; logical_not: bool). One functor per kind, instantiated per (op, dtype) by
 * templates; cu_map (common.cuh) walks any strides and broadcasts. */
#include "common.cuh"

#include "../../engine/kernel/elementwise_math.h"

/* the float or double libm function, as common.cuh's (tgmath.h's choice) */
CU_MATH(tan)
CU_MATH(asin)
CU_MATH(acos)
CU_MATH(atan)
CU_MATH(sinh)
CU_MATH(cosh)
CU_MATH(asinh)
CU_MATH(acosh)
CU_MATH(atanh)
CU_MATH(erf)
CU_MATH(erfinv)
CU_MATH(log2)
CU_MATH(log10)
CU_MATH(exp2)
CU_MATH(trunc)
#define CU_MATH2(name)                                  \
  template <class X>                                    \
  __device__ __forceinline__ auto cu_##name(X a, X b) { \
    if constexpr (std::is_same<X, float>::value)        \
      return name##f(a, b);                             \
    else                                                \
      return name((double)a, (double)b);                \
  }
CU_MATH2(atan2)
CU_MATH2(hypot)
CU_MATH2(copysign)

/* fmod, remainder, floor division: int64 for integers (a zero divisor gives 0), double for
 * floats (elementwise_math.h, as on the CPU) */
template <class CT>
__device__ __forceinline__ CT cu_fmod(CT a, CT b) {
  if constexpr (std::is_unsigned<CT>::value) /* uint64: no signs, C's % is all three */
    return b ? a % b : 0;
  else if constexpr (std::is_integral<CT>::value)
    return (CT)ew_fmod_i64(a, b);
  else if constexpr (std::is_same<CT, float>::value)
    return fmodf(a, b);
  else
    return fmod(a, b);
}
/* uint64's remainder and floor division: C's % and / (a zero divisor gives 0) */
template <class CT>
__device__ __forceinline__ CT cu_udiv_remainder(CT a, CT b) {
  return b ? a % b : 0;
}
template <class CT>
__device__ __forceinline__ CT cu_udiv_div_floor(CT a, CT b) {
  return b ? a / b : 0;
}
#define CU_DIVLIKE(name)                                \
  template <class CT>                                   \
  __device__ __forceinline__ CT cu_##name(CT a, CT b) { \
    if constexpr (std::is_unsigned<CT>::value)          \
      return (CT)cu_udiv_##name(a, b);                  \
    else if constexpr (std::is_integral<CT>::value)     \
      return (CT)ew_##name##_i64(a, b);                 \
    else                                                \
      return (CT)ew_##name((double)a, (double)b);       \
  }
CU_DIVLIKE(remainder)
CU_DIVLIKE(div_floor)

template <class CT>
__device__ __forceinline__ bool cu_isinf(CT x) {
  return (double)x == INFINITY || (double)x == -INFINITY;
}

/* ---- helpers with the CPU's semantics ---- */

/* sigmoid with one exp of -|x| (no overflow to 0 for large negative x), as CPU_SIGMOID */
template <class CT>
__device__ __forceinline__ CT cu_sigmoid(CT x) {
  return x >= 0 ? 1 / (1 + cu_exp(-x)) : cu_exp(x) / (1 + cu_exp(x));
}
/* gelu'(x) = Phi(x) + x phi(x), as CPU_GELU_GRAD */
template <class CT>
__device__ __forceinline__ CT cu_gelu_grad(CT x) {
  return (CT)0.5 * cu_erfc(x * (CT)-0.70710678118654752440) +
         x * cu_exp((CT)-0.5 * x * x) * (CT)0.39894228040143267794;
}

/* x < 0, written so that uint64 (never negative) draws no warning */
template <class CT>
__device__ __forceinline__ bool cu_negative(CT x) {
  if constexpr (std::is_unsigned<CT>::value)
    return false;
  else
    return x < 0;
}

/* ---- the ops: the expression of each in compute type CT ---- */

template <int OP, class CT>
__device__ __forceinline__ auto unary_expr(CT x, CT p0, CT p1, CT p2) {
  if constexpr (OP == DLE_OP_NEG)
    return cu_neg(x);
  else if constexpr (OP == DLE_OP_ABS)
    return cu_negative(x) ? cu_neg(x) : x;
  else if constexpr (OP == DLE_OP_SIGN)
    return (CT)((x > 0) - cu_negative(x));
  else if constexpr (OP == DLE_OP_RELU)
    return cu_negative(x) ? (CT)0 : x;
  else if constexpr (OP == DLE_OP_CLAMP)
    return x < p0 ? p0 : (x > p1 ? p1 : x);
  else if constexpr (OP == DLE_OP_POW_SCALAR)
    return cu_pow(x, p0);
  else if constexpr (OP == DLE_OP_EXP)
    return cu_exp(x);
  else if constexpr (OP == DLE_OP_LOG)
    return cu_log(x);
  else if constexpr (OP == DLE_OP_EXPM1)
    return cu_expm1(x);
  else if constexpr (OP == DLE_OP_LOG1P)
    return cu_log1p(x);
  else if constexpr (OP == DLE_OP_SQRT)
    return cu_sqrt(x);
  else if constexpr (OP == DLE_OP_RSQRT)
    return 1 / cu_sqrt(x);
  else if constexpr (OP == DLE_OP_RECIPROCAL)
    return 1 / x;
  else if constexpr (OP == DLE_OP_SIN)
    return cu_sin(x);
  else if constexpr (OP == DLE_OP_COS)
    return cu_cos(x);
  else if constexpr (OP == DLE_OP_TANH)
    return cu_tanh(x);
  else if constexpr (OP == DLE_OP_SIGMOID)
    return cu_sigmoid(x);
  /* erfc in double even for float (no 1 + erf cancellation) */
  else if constexpr (OP == DLE_OP_GELU)
    return (CT)(0.5 * (double)x * erfc((double)x * -0.70710678118654752440));
  else if constexpr (OP == DLE_OP_GELU_GRAD)
    return cu_gelu_grad(x);
  else if constexpr (OP == DLE_OP_SILU)
    return x * cu_sigmoid(x);
  else if constexpr (OP == DLE_OP_FLOOR)
    return cu_floor(x);
  else if constexpr (OP == DLE_OP_CEIL)
    return cu_ceil(x);
  else if constexpr (OP == DLE_OP_ROUND)
    return cu_rint(x);
  else if constexpr (OP == DLE_OP_TRUNC)
    return cu_trunc(x);
  else if constexpr (OP == DLE_OP_FRAC)
    return x - cu_trunc(x);
  else if constexpr (OP == DLE_OP_TAN)
    return cu_tan(x);
  else if constexpr (OP == DLE_OP_ASIN)
    return cu_asin(x);
  else if constexpr (OP == DLE_OP_ACOS)
    return cu_acos(x);
  else if constexpr (OP == DLE_OP_ATAN)
    return cu_atan(x);
  else if constexpr (OP == DLE_OP_SINH)
    return cu_sinh(x);
  else if constexpr (OP == DLE_OP_COSH)
    return cu_cosh(x);
  else if constexpr (OP == DLE_OP_ASINH)
    return cu_asinh(x);
  else if constexpr (OP == DLE_OP_ACOSH)
    return cu_acosh(x);
  else if constexpr (OP == DLE_OP_ATANH)
    return cu_atanh(x);
  else if constexpr (OP == DLE_OP_ERF)
    return cu_erf(x);
  else if constexpr (OP == DLE_OP_ERFC)
    return cu_erfc(x);
  else if constexpr (OP == DLE_OP_ERFINV)
    return cu_erfinv(x);
  else if constexpr (OP == DLE_OP_LOG2)
    return cu_log2(x);
  else if constexpr (OP == DLE_OP_LOG10)
    return cu_log10(x);
  else if constexpr (OP == DLE_OP_EXP2)
    return cu_exp2(x);
  else if constexpr (OP == DLE_OP_NAN_TO_NUM)
    return x != x ? p0 : (x == (CT)INFINITY ? p1 : (x == -(CT)INFINITY ? p2 : x));
  else if constexpr (OP == DLE_OP_ISNAN)
    return x != x;
  else if constexpr (OP == DLE_OP_ISINF)
    return cu_isinf(x);
  else if constexpr (OP == DLE_OP_ISFINITE)
    return x == x && !cu_isinf(x);
  else
    static_assert(OP < 0, "not a unary op");
}

template <int OP, class CT>
__device__ __forceinline__ auto binary_expr(CT a, CT b) {
  if constexpr (OP == DLE_OP_ADD)
    return cu_wrap_add(a, b);
  else if constexpr (OP == DLE_OP_SUB)
    return cu_wrap_sub(a, b);
  else if constexpr (OP == DLE_OP_MUL)
    return cu_wrap_mul(a, b);
  else if constexpr (OP == DLE_OP_POW)
    return cu_pow(a, b);
  else if constexpr (OP == DLE_OP_MAXIMUM)
    return (a > b || a != a) ? a : b; /* NaN wins */
  else if constexpr (OP == DLE_OP_MINIMUM)
    return (a < b || a != a) ? a : b;
  else if constexpr (OP == DLE_OP_FMAX)
    return (a > b || b != b) ? a : b; /* NaN loses */
  else if constexpr (OP == DLE_OP_FMIN)
    return (a < b || b != b) ? a : b;
  else if constexpr (OP == DLE_OP_FMOD)
    return cu_fmod(a, b);
  else if constexpr (OP == DLE_OP_REMAINDER)
    return cu_remainder(a, b);
  else if constexpr (OP == DLE_OP_FLOOR_DIVIDE)
    return cu_div_floor(a, b);
  else if constexpr (OP == DLE_OP_DIV)
    return a / b;
  else if constexpr (OP == DLE_OP_ATAN2)
    return cu_atan2(a, b);
  else if constexpr (OP == DLE_OP_HYPOT)
    return cu_hypot(a, b);
  else if constexpr (OP == DLE_OP_LOGADDEXP)
    return (CT)ew_logaddexp((double)a, (double)b);
  else if constexpr (OP == DLE_OP_COPYSIGN)
    return cu_copysign(a, b);
  else if constexpr (OP == DLE_OP_GELU_BACKWARD)
    return b * cu_gelu_grad(a);
  else if constexpr (OP == DLE_OP_EQ)
    return a == b;
  else if constexpr (OP == DLE_OP_NE)
    return a != b;
  else if constexpr (OP == DLE_OP_LT)
    return a < b;
  else if constexpr (OP == DLE_OP_LE)
    return a <= b;
  else if constexpr (OP == DLE_OP_GT)
    return a > b;
  else if constexpr (OP == DLE_OP_GE)
    return a >= b;
  else
    static_assert(OP < 0, "not a binary op");
}

/* ---- functors: p[0] the output element, p[1..] the inputs' ---- */

/* OD: the output's dtype (bool for isnan, isinf, isfinite). */
template <int OP, dle_dtype D, dle_dtype OD = D>
struct unary_fn {
  CU_CT(D) p0, p1, p2;
  __device__ void operator()(char *const *p, int64_t) const {
    CU_CT(D) x = cu_load<D>(*(const CU_T(D) *)p[1]);
    *(CU_T(OD) *)p[0] = cu_store<OD>(unary_expr<OP>(x, p0, p1, p2));
  }
};

/* OD: the output's dtype (bool for comparisons). */
template <int OP, dle_dtype D, dle_dtype OD>
struct binary_fn {
  __device__ void operator()(char *const *p, int64_t) const {
    CU_CT(D) a = cu_load<D>(*(const CU_T(D) *)p[1]), b = cu_load<D>(*(const CU_T(D) *)p[2]);
    *(CU_T(OD) *)p[0] = cu_store<OD>(binary_expr<OP>(a, b));
  }
};

/* where: the chosen element's bytes, unconverted */
template <class T>
struct where_fn {
  __device__ void operator()(char *const *p, int64_t) const {
    *(T *)p[0] = *(const uint8_t *)p[1] ? *(const T *)p[2] : *(const T *)p[3];
  }
};

struct logical_not_fn {
  __device__ void operator()(char *const *p, int64_t) const {
    *(uint8_t *)p[0] = !*(const uint8_t *)p[1];
  }
};

/* ---- which ops exist for which dtypes (the CPU's lists) ---- */
#define CU_UNARY_NUMERIC_OPS(X) X(NEG) X(ABS) X(SIGN) X(RELU) X(CLAMP) X(POW_SCALAR)
// clang-format off
#define CU_UNARY_FLOAT_OPS(X)                                                                 \
  X(EXP) X(LOG) X(EXPM1) X(LOG1P) X(SQRT) X(RSQRT) X(RECIPROCAL) X(SIN) X(COS) X(TANH)         \
  X(SIGMOID) X(GELU) X(GELU_GRAD) X(SILU) X(FLOOR) X(CEIL) X(ROUND) X(TRUNC) X(FRAC) X(TAN)    \
  X(ASIN) X(ACOS) X(ATAN) X(SINH) X(COSH) X(ASINH) X(ACOSH) X(ATANH) X(ERF) X(ERFC) X(ERFINV)  \
  X(LOG2) X(LOG10) X(EXP2) X(NAN_TO_NUM)
#define CU_PREDICATE_OPS(X) X(ISNAN) X(ISINF) X(ISFINITE)
// clang-format on
#define CU_BINARY_NUMERIC_OPS(X) \
  X(ADD)                         \
  X(SUB) X(MUL) X(POW) X(MAXIMUM) X(MINIMUM) X(FMAX) X(FMIN) X(FMOD) X(REMAINDER) X(FLOOR_DIVIDE)
#define CU_BINARY_FLOAT_OPS(X) X(DIV) X(GELU_BACKWARD) X(ATAN2) X(HYPOT) X(LOGADDEXP) X(COPYSIGN)
#define CU_COMPARE_OPS(X)      X(EQ) X(NE) X(LT) X(LE) X(GT) X(GE)

/* The front door has promoted the inputs: the kernel is chosen by the dtype the op computes in,
 * the last input's (where's first input is its bool condition). */
static dle_status cu_elementwise(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins,
                                 int nin, const dle_attrs *a) {
  const char *fn = cu_op_name(op);
  dle_tensor *out = outs[0];
  dle_dtype dt = ins[nin - 1]->dtype;
  return cu_with_dtype(dt, [&](auto tag) -> dle_status {
    constexpr dle_dtype D = decltype(tag)::value;
    constexpr bool numeric = D != DLE_BOOL, fl = cu_float_v<D>;
    typedef CU_CT(D) CT;
    CT p0 = cu_param<CT>(a->f[0]), p1 = cu_param<CT>(a->f[1]);
    CT p2 = op == DLE_OP_NAN_TO_NUM ? cu_param<CT>(ew_double_of_bits(a->ints[0])) : (CT)0;
    switch (op) {
#define UNARY_CASE(OP, OK)                                                                    \
  case DLE_OP_##OP:                                                                           \
    if constexpr (OK) return cu_map(fn, out, ins, nin, unary_fn<DLE_OP_##OP, D>{p0, p1, p2}); \
    break;
#define UNARY_NUMERIC_CASE(OP) UNARY_CASE(OP, numeric)
#define UNARY_FLOAT_CASE(OP)   UNARY_CASE(OP, fl)
      CU_UNARY_NUMERIC_OPS(UNARY_NUMERIC_CASE)
      CU_UNARY_FLOAT_OPS(UNARY_FLOAT_CASE)
#define PREDICATE_CASE(OP) \
  case DLE_OP_##OP:        \
    return cu_map(fn, out, ins, nin, unary_fn<DLE_OP_##OP, D, DLE_BOOL>{p0, p1, p2});
      CU_PREDICATE_OPS(PREDICATE_CASE)
#define BINARY_CASE(OP, OK, OD)                                                          \
  case DLE_OP_##OP:                                                                      \
    if constexpr (OK) return cu_map(fn, out, ins, nin, binary_fn<DLE_OP_##OP, D, OD>{}); \
    break;
#define BINARY_NUMERIC_CASE(OP) BINARY_CASE(OP, numeric, D)
#define BINARY_FLOAT_CASE(OP)   BINARY_CASE(OP, fl, D)
#define COMPARE_CASE(OP)        BINARY_CASE(OP, true, DLE_BOOL)
      CU_BINARY_NUMERIC_OPS(BINARY_NUMERIC_CASE)
      CU_BINARY_FLOAT_OPS(BINARY_FLOAT_CASE)
      CU_COMPARE_OPS(COMPARE_CASE)
      case DLE_OP_WHERE: return cu_map(fn, out, ins, nin, where_fn<CU_T(D)>{});
      case DLE_OP_LOGICAL_NOT:
        if constexpr (D == DLE_BOOL) return cu_map(fn, out, ins, nin, logical_not_fn{});
        break;
      default: break;
    }
    return cu_error("%s: no CUDA kernel for dtype %s", fn, cu_dtype_name(D));
  });
}

void cu_register_elementwise(dle_backend *b) {
#define REGISTER(OP) b->kernels[DLE_OP_##OP] = cu_elementwise;
  CU_UNARY_NUMERIC_OPS(REGISTER)
  CU_UNARY_FLOAT_OPS(REGISTER)
  CU_PREDICATE_OPS(REGISTER)
  CU_BINARY_NUMERIC_OPS(REGISTER)
  CU_BINARY_FLOAT_OPS(REGISTER)
  CU_COMPARE_OPS(REGISTER)
  REGISTER(WHERE)
  REGISTER(LOGICAL_NOT)
}
