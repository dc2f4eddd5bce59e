/* dtype.c — dtype names, sizes and the promotion rule used by every op with several inputs. */
#include "kernel/half.h"
#include "internal.h"

#include <stdlib.h>

static const char *const dtype_names[DLE_NUM_DTYPES] = {
    [DLE_F32] = "float32",     [DLE_F64] = "float64", [DLE_F16] = "float16",
    [DLE_BF16] = "bfloat16",   [DLE_I32] = "int32",   [DLE_I64] = "int64",
    [DLE_U8] = "uint8",        [DLE_BOOL] = "bool",   [DLE_C64] = "complex64",
    [DLE_C128] = "complex128",
};

static const struct {
  const char *alias;
  dle_dtype dtype;
} aliases[] = {{"float", DLE_F32}, {"double", DLE_F64}, {"half", DLE_F16},   {"long", DLE_I64},
               {"int", DLE_I32},   {"byte", DLE_U8},    {"bf16", DLE_BF16},  {"fp16", DLE_F16},
               {"fp32", DLE_F32},  {"fp64", DLE_F64},   {"cfloat", DLE_C64}, {"cdouble", DLE_C128}};

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
  return dle_error(
      "unknown dtype '%s' (expected float32, float64, float16, bfloat16, int32, "
      "int64, uint8, bool, complex64 or complex128)",
      name);
}

const uint8_t dle_dtype_sizes[DLE_NUM_DTYPES] = {
    [DLE_F32] = 4, [DLE_F64] = 8, [DLE_F16] = 2,  [DLE_BF16] = 2, [DLE_I32] = 4,
    [DLE_I64] = 8, [DLE_U8] = 1,  [DLE_BOOL] = 1, [DLE_C64] = 8,  [DLE_C128] = 16,
};
const bool dle_dtype_floats[DLE_NUM_DTYPES] = {
    [DLE_F32] = true,
    [DLE_F64] = true,
    [DLE_F16] = true,
    [DLE_BF16] = true,
};

/* Rank within a category: integers by width (bool lowest), floats by precision. */
static int rank(dle_dtype t) {
  switch (t) {
    case DLE_BOOL: return 0;
    case DLE_U8: return 1;
    case DLE_I32: return 2;
    case DLE_I64: return 3;
    case DLE_F16:
    case DLE_BF16: return 4;
    case DLE_F32: return 5;
    case DLE_F64: return 6;
    default: return -1;
  }
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
  if ((a == DLE_F16 && b == DLE_BF16) || (a == DLE_BF16 && b == DLE_F16)) return DLE_F32;
  return rank(a) >= rank(b) ? a : b;
}

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
