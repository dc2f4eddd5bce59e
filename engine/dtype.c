/* dtype.c — dtype names, sizes and the promotion rule used by every op with several inputs. */
#include "kernel/fp8.h"
#include "kernel/half.h"
#include "internal.h"

#include <stdlib.h>

static const char *const dtype_names[DLE_NUM_DTYPES] = {
    [DLE_F32] = "float32",
    [DLE_F64] = "float64",
    [DLE_F16] = "float16",
    [DLE_BF16] = "bfloat16",
    [DLE_I32] = "int32",
    [DLE_I64] = "int64",
    [DLE_U8] = "uint8",
    [DLE_BOOL] = "bool",
    [DLE_I8] = "int8",
    [DLE_I16] = "int16",
    [DLE_U16] = "uint16",
    [DLE_U32] = "uint32",
    [DLE_U64] = "uint64",
    [DLE_F8E4M3] = "float8_e4m3fn",
    [DLE_F8E5M2] = "float8_e5m2",
    [DLE_C64] = "complex64",
    [DLE_C128] = "complex128",
};

static const struct {
  const char *alias;
  dle_dtype dtype;
} aliases[] = {{"float", DLE_F32},   {"double", DLE_F64}, {"half", DLE_F16},  {"long", DLE_I64},
               {"int", DLE_I32},     {"byte", DLE_U8},    {"bf16", DLE_BF16}, {"fp16", DLE_F16},
               {"fp32", DLE_F32},    {"fp64", DLE_F64},   {"short", DLE_I16}, {"cfloat", DLE_C64},
               {"cdouble", DLE_C128}};

const char *dle_dtype_name(dle_dtype t) {
  return (unsigned)t < DLE_NUM_DTYPES ? dtype_names[t] : "invalid";
}

dle_status dle_dtype_parse(const char *name, dle_dtype *out) {
  for (int i = 0; i < DLE_NUM_DTYPES; i++)
    if (strcmp(name, dtype_names[i]) == 0) {
      *out = (dle_dtype)i;
      return DLE_OK;
    }
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (strcmp(name, aliases[i].alias) == 0) {
      *out = aliases[i].dtype;
      return DLE_OK;
    }
  char list[256];
  size_t n = 0;
  for (int i = 0; i < DLE_NUM_DTYPES; i++)
    n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i == 0 ? "" : ", ", dtype_names[i]);
  return dle_error("unknown dtype '%s' (expected one of %s)", name, list);
}

const uint8_t dle_dtype_sizes[DLE_NUM_DTYPES] = {
    [DLE_F32] = 4, [DLE_F64] = 8,   [DLE_F16] = 2,  [DLE_BF16] = 2,   [DLE_I32] = 4,
    [DLE_I64] = 8, [DLE_U8] = 1,    [DLE_BOOL] = 1, [DLE_I8] = 1,     [DLE_I16] = 2,
    [DLE_U16] = 2, [DLE_U32] = 4,   [DLE_U64] = 8,  [DLE_F8E4M3] = 1, [DLE_F8E5M2] = 1,
    [DLE_C64] = 8, [DLE_C128] = 16,
};
const bool dle_dtype_floats[DLE_NUM_DTYPES] = {
    [DLE_F32] = true,  [DLE_F64] = true,    [DLE_F16] = true,
    [DLE_BF16] = true, [DLE_F8E4M3] = true, [DLE_F8E5M2] = true,
};

/* Each dtype's place in the promotion: its kind and, for integers, its width in bits, for floats
 * a precision rank (float16 and bfloat16 share one, as do the two float8 formats). */
enum { K_BOOL, K_UNSIGNED, K_SIGNED, K_FLOAT };
static const struct {
  uint8_t kind, rank;
} promo[DLE_NUM_DTYPES] = {
    [DLE_BOOL] = {K_BOOL, 0},     [DLE_U8] = {K_UNSIGNED, 8},   [DLE_U16] = {K_UNSIGNED, 16},
    [DLE_U32] = {K_UNSIGNED, 32}, [DLE_U64] = {K_UNSIGNED, 64}, [DLE_I8] = {K_SIGNED, 8},
    [DLE_I16] = {K_SIGNED, 16},   [DLE_I32] = {K_SIGNED, 32},   [DLE_I64] = {K_SIGNED, 64},
    [DLE_F8E4M3] = {K_FLOAT, 1},  [DLE_F8E5M2] = {K_FLOAT, 1},  [DLE_F16] = {K_FLOAT, 2},
    [DLE_BF16] = {K_FLOAT, 2},    [DLE_F32] = {K_FLOAT, 3},     [DLE_F64] = {K_FLOAT, 4},
};

static dle_dtype signed_of_bits(int bits) {
  return bits <= 8 ? DLE_I8 : bits <= 16 ? DLE_I16 : bits <= 32 ? DLE_I32 : DLE_I64;
}

dle_dtype dle_complex_of(dle_dtype t) { return t == DLE_F64 || t == DLE_C128 ? DLE_C128 : DLE_C64; }

dle_dtype dle_real_of(dle_dtype t) { return t == DLE_C64 ? DLE_F32 : t == DLE_C128 ? DLE_F64 : t; }

dle_dtype dle_promote(dle_dtype a, dle_dtype b) {
  if (a == b) return a;
  if (dle_dtype_is_complex(a) || dle_dtype_is_complex(b)) {
    /* the precision of the wider real part: float64 or complex128 makes complex128 */
    bool wide = a == DLE_C128 || b == DLE_C128 || a == DLE_F64 || b == DLE_F64;
    return wide ? DLE_C128 : DLE_C64;
  }
  int ka = promo[a].kind, kb = promo[b].kind, ra = promo[a].rank, rb = promo[b].rank;
  if (ka != kb && (ka == K_FLOAT || kb == K_FLOAT || ka == K_BOOL || kb == K_BOOL))
    return ka > kb ? a : b; /* bool < any integer < any float */
  if (ka == kb) {
    if (ra != rb) return ra > rb ? a : b;
    return DLE_F32; /* float16/bfloat16, e4m3fn/e5m2: neither holds the other */
  }
  int s = ka == K_SIGNED ? ra : rb, u = ka == K_UNSIGNED ? ra : rb;
  if (s > u) return signed_of_bits(s);
  return u >= 64 ? DLE_F64 : signed_of_bits(2 * u);
}

uint8_t dle_f32_to_f8e4m3(float f) { return dle_float_to_f8e4m3(f); }
float dle_f8e4m3_to_f32(uint8_t c) { return dle_f8e4m3_to_float(c); }
uint8_t dle_f32_to_f8e5m2(float f) { return dle_float_to_f8e5m2(f); }
float dle_f8e5m2_to_f32(uint8_t c) { return dle_f8e5m2_to_float(c); }
uint16_t dle_f32_to_f16(float f) { return dle_float_to_half(f); }
float dle_f16_to_f32(uint16_t h) { return dle_half_to_float(h); }
uint16_t dle_f32_to_bf16(float f) { return dle_float_to_bfloat(f); }
float dle_bf16_to_f32(uint16_t b) { return dle_bfloat_to_float(b); }

dle_status dle_device_parse(const char *name, dle_device *out) {
  if (strcmp(name, "cpu") == 0) {
    *out = DLE_DEVICE_CPU;
    return DLE_OK;
  }
  if (strncmp(name, "cuda", 4) == 0) {
    int index = 0;
    if (name[4] == ':') {
      char *end;
      long v = strtol(name + 5, &end, 10);
      if (*end || end == name + 5 || v < 0 || v > 255) goto bad;
      index = (int)v;
    } else if (name[4]) {
      goto bad;
    }
    *out = (dle_device){DLE_CUDA, index};
    return DLE_OK;
  }
bad:
  return dle_error("unknown device '%s' (expected \"cpu\", \"cuda\" or \"cuda:N\")", name);
}

const char *dle_device_str(char *buf, size_t n, dle_device d) {
  if (d.type == DLE_CPU)
    snprintf(buf, n, "cpu");
  else
    snprintf(buf, n, "cuda:%d", d.index);
  return buf;
}
