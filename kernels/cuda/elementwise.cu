/* elementwise.cu — CUDA kernels of the unary, binary, comparison and where ops, mirroring
 * kernels/cpu/elementwise.c: the same expression per op in the same compute type, the same
 * dtypes per op (numeric ops: every dtype but bool; float ops: the four float dtypes; comparisons
 * and where: all; logical_not: bool). One functor per kind, instantiated per (op, dtype) by
 * templates; cu_map (common.cuh) walks any strides and broadcasts. */
#include "common.cuh"

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

/* ---- the ops: the expression of each in compute type CT ---- */

template <int OP, class CT>
__device__ __forceinline__ auto unary_expr(CT x, CT p0, CT p1) {
  if constexpr (OP == DLE_OP_NEG)
    return cu_neg(x);
  else if constexpr (OP == DLE_OP_ABS)
    return x < 0 ? cu_neg(x) : x;
  else if constexpr (OP == DLE_OP_SIGN)
    return (CT)((x > 0) - (x < 0));
  else if constexpr (OP == DLE_OP_RELU)
    return x < 0 ? (CT)0 : x;
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
  else if constexpr (OP == DLE_OP_DIV)
    return a / b;
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

template <int OP, dle_dtype D>
struct unary_fn {
  CU_CT(D) p0, p1;
  __device__ void operator()(char *const *p, int64_t) const {
    CU_CT(D) x = cu_load<D>(*(const CU_T(D) *)p[1]);
    *(CU_T(D) *)p[0] = cu_store<D>(unary_expr<OP>(x, p0, p1));
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
  X(SIGMOID) X(GELU) X(GELU_GRAD) X(SILU) X(FLOOR) X(CEIL) X(ROUND)
// clang-format on
#define CU_BINARY_NUMERIC_OPS(X) X(ADD) X(SUB) X(MUL) X(POW) X(MAXIMUM) X(MINIMUM)
#define CU_BINARY_FLOAT_OPS(X)   X(DIV) X(GELU_BACKWARD)
#define CU_COMPARE_OPS(X)        X(EQ) X(NE) X(LT) X(LE) X(GT) X(GE)

/* The front door has promoted the inputs: the kernel is chosen by the dtype the op computes in,
 * the last input's (where's first input is its bool condition). */
static dle_status cu_elementwise(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins,
                                 int nin, const dle_attrs *a) {
  const char *fn = cu_op_name(op);
  dle_tensor *out = outs[0];
  dle_dtype dt = ins[nin - 1]->dtype;
  return cu_with_dtype(dt, [&](auto tag) -> dle_status {
    constexpr dle_dtype D = decltype(tag)::value;
    constexpr bool numeric = D != DLE_BOOL, fl = D <= DLE_BF16;
    typedef CU_CT(D) CT;
    CT p0 = cu_param<CT>(a->f[0]), p1 = cu_param<CT>(a->f[1]);
    switch (op) {
#define UNARY_CASE(OP, OK)                                                                \
  case DLE_OP_##OP:                                                                       \
    if constexpr (OK) return cu_map(fn, out, ins, nin, unary_fn<DLE_OP_##OP, D>{p0, p1}); \
    break;
#define UNARY_NUMERIC_CASE(OP) UNARY_CASE(OP, numeric)
#define UNARY_FLOAT_CASE(OP)   UNARY_CASE(OP, fl)
      CU_UNARY_NUMERIC_OPS(UNARY_NUMERIC_CASE)
      CU_UNARY_FLOAT_OPS(UNARY_FLOAT_CASE)
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
  CU_BINARY_NUMERIC_OPS(REGISTER)
  CU_BINARY_FLOAT_OPS(REGISTER)
  CU_COMPARE_OPS(REGISTER)
  REGISTER(WHERE)
  REGISTER(LOGICAL_NOT)
}
