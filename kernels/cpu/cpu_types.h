/* cpu_types.h — how CPU kernels read and write each dtype, as X-macros, so one kernel body written
 * once is instantiated per dtype by the preprocessor instead of copied by hand.
 *
 *   X(ID, T, CT)   ID: dle_dtype suffix (DLE_<ID>), T: storage type, CT: compute type.
 *   LD_<ID>(x)     storage value -> compute type;   ST_<ID>(v)  compute value -> storage.
 * float16/bfloat16/float8 compute in float (fp32 accumulation); bool is stored as a 0/1 byte;
 * the narrow integers compute in int32, uint32 in int64 and uint64 in uint64 (each wide enough
 * that the wrapped result truncated to the storage type is the storage type's own wrap). */
#ifndef DLE_CPU_TYPES_H
#define DLE_CPU_TYPES_H

#include "../../engine/kernel/fp8.h"
#include "../../engine/kernel/half.h"
#include "../../engine/internal.h"

#include <math.h>
#include <stdint.h>

// clang-format off
#define CPU_FLOAT_TYPES(X)                                                       \
  X(F32, float, float) X(F64, double, double) X(F16, uint16_t, float)            \
  X(BF16, uint16_t, float) X(F8E4M3, uint8_t, float) X(F8E5M2, uint8_t, float)
#define CPU_INT_TYPES(X)                                                         \
  X(I32, int32_t, int32_t) X(I64, int64_t, int64_t) X(U8, uint8_t, int32_t)      \
  X(I8, int8_t, int32_t) X(I16, int16_t, int32_t) X(U16, uint16_t, int32_t)      \
  X(U32, uint32_t, int64_t) X(U64, uint64_t, uint64_t)
#define CPU_NUMERIC_TYPES(X) CPU_FLOAT_TYPES(X) CPU_INT_TYPES(X)
#define CPU_ALL_TYPES(X) CPU_NUMERIC_TYPES(X) X(BOOL, uint8_t, int32_t)
/* Complex dtypes are in none of the lists above: a real kernel must not accept them silently.
 * The kernels that support complex instantiate this list explicitly. */
#define CPU_COMPLEX_TYPES(X) X(C64, float _Complex, float _Complex) X(C128, double _Complex, double _Complex)
// clang-format on

/* The same lists taking extra leading arguments: X(args..., ID, T, CT). Two copies, because the
 * preprocessor will not expand a macro inside its own expansion (for type-pair kernels). */
// clang-format off
#define CPU_COMPLEX_TYPES_WITH(X, ...)                                          \
  X(__VA_ARGS__, C64, float _Complex, float _Complex)                           \
  X(__VA_ARGS__, C128, double _Complex, double _Complex)
#define CPU_FLOAT_TYPES_WITH(X, ...)                                            \
  X(__VA_ARGS__, F32, float, float) X(__VA_ARGS__, F64, double, double)         \
  X(__VA_ARGS__, F16, uint16_t, float) X(__VA_ARGS__, BF16, uint16_t, float)    \
  X(__VA_ARGS__, F8E4M3, uint8_t, float) X(__VA_ARGS__, F8E5M2, uint8_t, float)
#define CPU_INT_TYPES_WITH(X, ...)                                              \
  X(__VA_ARGS__, I32, int32_t, int32_t) X(__VA_ARGS__, I64, int64_t, int64_t)   \
  X(__VA_ARGS__, U8, uint8_t, int32_t) X(__VA_ARGS__, I8, int8_t, int32_t)      \
  X(__VA_ARGS__, I16, int16_t, int32_t) X(__VA_ARGS__, U16, uint16_t, int32_t)  \
  X(__VA_ARGS__, U32, uint32_t, int64_t) X(__VA_ARGS__, U64, uint64_t, uint64_t)
#define CPU_NUMERIC_TYPES_WITH(X, ...)                                          \
  CPU_FLOAT_TYPES_WITH(X, __VA_ARGS__) CPU_INT_TYPES_WITH(X, __VA_ARGS__)
#define CPU_ALL_TYPES_WITH(X, ...)                                              \
  CPU_NUMERIC_TYPES_WITH(X, __VA_ARGS__) X(__VA_ARGS__, BOOL, uint8_t, int32_t)
// clang-format on

/* A double attribute (clamp bound, exponent) in compute type CT; saturating for integers. */
#define CPU_PARAM(CT, v)                                           \
  ((CT) _Generic((CT)0, float                                      \
                 : (v), double                                     \
                 : (v), int32_t                                    \
                 : cpu_f_to_i64(v, INT32_MIN, INT32_MAX), uint64_t \
                 : cpu_f_to_u64(v), default                        \
                 : cpu_f_to_i64(v, INT64_MIN, INT64_MAX)))

#define LD_F32(x)    (x)
#define LD_F64(x)    (x)
#define LD_F16(x)    dle_half_to_float(x)
#define LD_BF16(x)   dle_bfloat_to_float(x)
#define LD_I32(x)    (x)
#define LD_I64(x)    (x)
#define LD_U8(x)     ((int32_t)(x))
#define LD_BOOL(x)   ((int32_t)((x) != 0))
#define LD_I8(x)     ((int32_t)(x))
#define LD_I16(x)    ((int32_t)(x))
#define LD_U16(x)    ((int32_t)(x))
#define LD_U32(x)    ((int64_t)(x))
#define LD_U64(x)    (x)
#define LD_F8E4M3(x) dle_f8e4m3_to_float(x)
#define LD_F8E5M2(x) dle_f8e5m2_to_float(x)
#define LD_C64(x)    (x)
#define LD_C128(x)   (x)

#define ST_F32(v)    ((float)(v))
#define ST_F64(v)    ((double)(v))
#define ST_F16(v)    dle_float_to_half((float)(v))
#define ST_BF16(v)   dle_float_to_bfloat((float)(v))
#define ST_I32(v)    ((int32_t)cpu_to_i64(v, INT32_MIN, INT32_MAX))
#define ST_I64(v)    (cpu_to_i64(v, INT64_MIN, INT64_MAX))
#define ST_U8(v)     ((uint8_t)cpu_to_i64(v, 0, 255))
#define ST_BOOL(v)   ((uint8_t)((v) != 0))
#define ST_I8(v)     ((int8_t)cpu_to_i64(v, INT8_MIN, INT8_MAX))
#define ST_I16(v)    ((int16_t)cpu_to_i64(v, INT16_MIN, INT16_MAX))
#define ST_U16(v)    ((uint16_t)cpu_to_i64(v, 0, UINT16_MAX))
#define ST_U32(v)    ((uint32_t)cpu_to_i64(v, 0, UINT32_MAX))
#define ST_U64(v)    cpu_to_u64(v)
#define ST_F8E4M3(v) dle_float_to_f8e4m3((float)(v))
#define ST_F8E5M2(v) dle_float_to_f8e5m2((float)(v))
#define ST_C64(v)    ((float _Complex)(v))
#define ST_C128(v)   ((double _Complex)(v))

/* Conversions into integers: plain for integer values (wrapping like C casts of in-range
 * values), saturating for floating values so NaN and overflow are defined (NaN -> 0). */
static inline int64_t cpu_f_to_i64(double v, int64_t lo, int64_t hi) {
  if (v != v) return 0;
  if (v <= (double)lo) return lo;
  if (v >= (double)hi) return hi;
  return (int64_t)v;
}
static inline int64_t cpu_i_to_i64(int64_t v, int64_t lo, int64_t hi) {
  (void)lo, (void)hi;
  return v;
}
#define cpu_to_i64(v, lo, hi) \
  _Generic((v), float : cpu_f_to_i64, double : cpu_f_to_i64, default : cpu_i_to_i64)(v, lo, hi)
/* ... into uint64: floats saturate to [0, 2^64-1] (NaN -> 0), integers wrap. */
static inline uint64_t cpu_f_to_u64(double v) {
  if (!(v > 0)) return 0;
  if (v >= 18446744073709551616.0) return UINT64_MAX;
  return (uint64_t)v;
}
static inline uint64_t cpu_i_to_u64(uint64_t v) { return v; }
#define cpu_to_u64(v) \
  _Generic((v), float : cpu_f_to_u64, double : cpu_f_to_u64, default : cpu_i_to_u64)(v)

/* a OP b for + - *: integers wrap around (two's complement) as in PyTorch, computed in the
 * unsigned type because signed overflow is undefined behaviour in C; floats are unchanged. */
#define CPU_WRAP(a, b, OP)                                    \
  _Generic((a), int32_t                                       \
           : (int32_t)((uint32_t)(a)OP(uint32_t)(b)), int64_t \
           : (int64_t)((uint64_t)(a)OP(uint64_t)(b)), default \
           : (a)OP(b))
#define CPU_NEG(x)                                  \
  _Generic((x), int32_t                             \
           : (int32_t)(0u - (uint32_t)(x)), int64_t \
           : (int64_t)(0u - (uint64_t)(x)), default \
           : -(x))

/* Element size per dtype, for byte strides. */
static inline int64_t cpu_esize(dle_dtype t) { return (int64_t)dle_dtype_size(t); }

#endif
