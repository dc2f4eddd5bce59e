/* test_dtype.c — dtype names, sizes and promotion; float16/bfloat16 rounding (against the IEEE
 * round-to-nearest-even rule, exhaustively where cheap); conversions between every pair of dtypes. */
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* Short names keep the promotion table readable. */
#define F32  DLE_F32
#define F64  DLE_F64
#define F16  DLE_F16
#define BF16 DLE_BF16
#define I32  DLE_I32
#define I64  DLE_I64
#define U8   DLE_U8
#define BOOL DLE_BOOL
#define I8   DLE_I8
#define I16  DLE_I16
#define U16  DLE_U16
#define U32  DLE_U32
#define U64  DLE_U64
#define E4   DLE_F8E4M3
#define E5   DLE_F8E5M2
#define C64  DLE_C64
#define C128 DLE_C128

TEST(dtype_names_round_trip_through_parse) {
  static const char *const names[DLE_NUM_DTYPES] = {
      [F32] = "float32",    [F64] = "float64",      [F16] = "float16",    [BF16] = "bfloat16",
      [I32] = "int32",      [I64] = "int64",        [U8] = "uint8",       [BOOL] = "bool",
      [I8] = "int8",        [I16] = "int16",        [U16] = "uint16",     [U32] = "uint32",
      [U64] = "uint64",     [E4] = "float8_e4m3fn", [E5] = "float8_e5m2", [C64] = "complex64",
      [C128] = "complex128"};
  for (int dt = 0; dt < DLE_NUM_DTYPES; dt++) {
    CHECK(strcmp(dle_dtype_name(dt), names[dt]) == 0, "dtype %d is named %s", dt,
          dle_dtype_name(dt));
    dle_dtype back = DLE_NUM_DTYPES;
    CHECK(dle_dtype_parse(names[dt], &back) == DLE_OK && back == (dle_dtype)dt, "parse(%s) gave %d",
          names[dt], back);
  }
  CHECK(strcmp(dle_dtype_name(DLE_NUM_DTYPES), "invalid") == 0, "out-of-range dtype is named %s",
        dle_dtype_name(DLE_NUM_DTYPES));
}

TEST(dtype_aliases_parse_to_their_dtypes) {
  static const struct {
    const char *alias;
    dle_dtype dt;
  } cases[] = {{"float", F32}, {"double", F64}, {"half", F16},    {"long", I64}, {"int", I32},
               {"byte", U8},   {"bf16", BF16},  {"fp16", F16},    {"fp32", F32}, {"fp64", F64},
               {"short", I16}, {"cfloat", C64}, {"cdouble", C128}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dle_dtype dt = DLE_NUM_DTYPES;
    CHECK(dle_dtype_parse(cases[i].alias, &dt) == DLE_OK && dt == cases[i].dt, "%s gave %s",
          cases[i].alias, dle_dtype_name(dt));
  }
}

TEST(dtype_sizes_and_float_flags) {
  static const size_t sizes[DLE_NUM_DTYPES] = {
      [F32] = 4, [F64] = 8,  [F16] = 2, [BF16] = 2, [I32] = 4,  [I64] = 8,
      [U8] = 1,  [BOOL] = 1, [I8] = 1,  [I16] = 2,  [U16] = 2,  [U32] = 4,
      [U64] = 8, [E4] = 1,   [E5] = 1,  [C64] = 8,  [C128] = 16};
  for (int dt = 0; dt < DLE_NUM_DTYPES; dt++) {
    CHECK(dle_dtype_size(dt) == sizes[dt], "%s has size %zu", dle_dtype_name(dt),
          dle_dtype_size(dt));
    CHECK(dle_dtype_is_complex(dt) == (dt == C64 || dt == C128), "%s complex flag",
          dle_dtype_name(dt));
    CHECK(dle_dtype_is_float(dt) == (dt <= BF16 || dt == E4 || dt == E5), "%s float flag",
          dle_dtype_name(dt));
  }
}

TEST(promote_follows_the_documented_table) {
  /* float beats int, the wider float wins, float16 with bfloat16 (and the two float8 formats) meet
   * in float32; integers as NumPy promotes them (for int8/int16 that is PyTorch's rule too):
   * signed with unsigned widens to the next signed type, uint64 with a signed one gives float64.
   * The integer entries were generated with numpy.promote_types, the float ones with
   * torch.promote_types; complex beats real, complex128 when either side has float64 precision.
   * Rows and columns in dle_dtype order. */
  static const dle_dtype want[DLE_NUM_DTYPES][DLE_NUM_DTYPES] = {
      /*  F32  F64  F16  BF16  I32  I64  U8  BOOL  I8  I16  U16  U32  U64  E4  E5  C64  C128 */
      [F32] = {F32, F64, F32, F32, F32, F32, F32, F32, F32, F32, F32, F32, F32, F32, F32, C64,
               C128},
      [F64] = {F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, C128,
               C128},
      [F16] = {F32, F64, F16, F32, F16, F16, F16, F16, F16, F16, F16, F16, F16, F16, F16, C64,
               C128},
      [BF16] = {F32, F64, F32, BF16, BF16, BF16, BF16, BF16, BF16, BF16, BF16, BF16, BF16, BF16,
                BF16, C64, C128},
      [I32] = {F32, F64, F16, BF16, I32, I64, I32, I32, I32, I32, I32, I64, F64, E4, E5, C64, C128},
      [I64] = {F32, F64, F16, BF16, I64, I64, I64, I64, I64, I64, I64, I64, F64, E4, E5, C64, C128},
      [U8] = {F32, F64, F16, BF16, I32, I64, U8, U8, I16, I16, U16, U32, U64, E4, E5, C64, C128},
      [BOOL] = {F32, F64, F16, BF16, I32, I64, U8, BOOL, I8, I16, U16, U32, U64, E4, E5, C64, C128},
      [I8] = {F32, F64, F16, BF16, I32, I64, I16, I8, I8, I16, I32, I64, F64, E4, E5, C64, C128},
      [I16] = {F32, F64, F16, BF16, I32, I64, I16, I16, I16, I16, I32, I64, F64, E4, E5, C64, C128},
      [U16] = {F32, F64, F16, BF16, I32, I64, U16, U16, I32, I32, U16, U32, U64, E4, E5, C64, C128},
      [U32] = {F32, F64, F16, BF16, I64, I64, U32, U32, I64, I64, U32, U32, U64, E4, E5, C64, C128},
      [U64] = {F32, F64, F16, BF16, F64, F64, U64, U64, F64, F64, U64, U64, U64, E4, E5, C64, C128},
      [E4] = {F32, F64, F16, BF16, E4, E4, E4, E4, E4, E4, E4, E4, E4, E4, F32, C64, C128},
      [E5] = {F32, F64, F16, BF16, E5, E5, E5, E5, E5, E5, E5, E5, E5, F32, E5, C64, C128},
      [C64] = {C64, C128, C64, C64, C64, C64, C64, C64, C64, C64, C64, C64, C64, C64, C64, C64,
               C128},
      [C128] = {C128, C128, C128, C128, C128, C128, C128, C128, C128, C128, C128, C128, C128, C128,
                C128, C128, C128},
  };
  for (int a = 0; a < DLE_NUM_DTYPES; a++)
    for (int b = 0; b < DLE_NUM_DTYPES; b++) {
      dle_dtype got = dle_promote(a, b);
      CHECK(got == want[a][b], "promote(%s, %s) = %s, expected %s", dle_dtype_name(a),
            dle_dtype_name(b), dle_dtype_name(got), dle_dtype_name(want[a][b]));
    }
}

/* ---- float16 / bfloat16 ---- */

static float bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static float f16_round(float f) { return dle_f16_to_f32(dle_f32_to_f16(f)); }
static float bf16_round(float f) { return dle_bf16_to_f32(dle_f32_to_bf16(f)); }

TEST(tiny_values_survive_in_bfloat16_but_flush_to_zero_in_float16) {
  float bf = bf16_round(1e-8f);
  CHECK(fabs(bf - 1e-8) < 1e-8 / 128, "bfloat16(1e-8) = %g", bf);
  CHECK(dle_f32_to_f16(1e-8f) == 0, "float16(1e-8) has bits %#x", dle_f32_to_f16(1e-8f));
  CHECK(dle_f32_to_f16(-1e-8f) == 0x8000, "float16(-1e-8) has bits %#x, expected -0",
        dle_f32_to_f16(-1e-8f));
}

TEST(pi_rounds_to_3_140625_in_float16_and_bfloat16) {
  CHECK(f16_round((float)M_PI) == 3.140625f, "float16(pi) = %.9g", f16_round((float)M_PI));
  CHECK(bf16_round((float)M_PI) == 3.140625f, "bfloat16(pi) = %.9g", bf16_round((float)M_PI));
}

TEST(float16_largest_value_is_65504_and_65520_overflows) {
  CHECK(dle_f32_to_f16(65504.0f) == 0x7bff, "65504 -> %#x", dle_f32_to_f16(65504.0f));
  CHECK(f16_round(65519.99f) == 65504.0f, "65519.99 -> %g", f16_round(65519.99f));
  CHECK(dle_f32_to_f16(65520.0f) == 0x7c00, "65520 -> %#x, expected inf", dle_f32_to_f16(65520.0f));
  CHECK(dle_f32_to_f16(-65520.0f) == 0xfc00, "-65520 -> %#x", dle_f32_to_f16(-65520.0f));
  CHECK(dle_f32_to_f16(1e30f) == 0x7c00, "1e30 -> %#x", dle_f32_to_f16(1e30f));
  CHECK(isinf(dle_f16_to_f32(0x7c00)) && dle_f16_to_f32(0xfc00) < 0,
        "inf bits do not decode to inf");
}

TEST(float16_subnormals_round_to_nearest_even) {
  const float tiny = ldexpf(1, -24);
  CHECK(dle_f32_to_f16(tiny) == 0x0001, "2^-24 -> %#x", dle_f32_to_f16(tiny));
  CHECK(dle_f16_to_f32(0x0001) == tiny, "0x0001 -> %g", dle_f16_to_f32(0x0001));
  CHECK(dle_f32_to_f16(ldexpf(1, -25)) == 0, "2^-25 (tie with 0) -> %#x",
        dle_f32_to_f16(ldexpf(1, -25)));
  CHECK(dle_f32_to_f16(ldexpf(3, -25)) == 0x0002, "3*2^-25 (tie) -> %#x",
        dle_f32_to_f16(ldexpf(3, -25)));
  CHECK(dle_f32_to_f16(ldexpf(1.0001f, -25)) == 0x0001, "just above 2^-25 -> %#x",
        dle_f32_to_f16(ldexpf(1.0001f, -25)));
  CHECK(dle_f32_to_f16(ldexpf(1023, -24)) == 0x03ff, "largest subnormal -> %#x",
        dle_f32_to_f16(ldexpf(1023, -24)));
  CHECK(dle_f32_to_f16(ldexpf(1, -14)) == 0x0400, "smallest normal -> %#x",
        dle_f32_to_f16(ldexpf(1, -14)));
}

/* Ties at 1 round to even for a format whose half ulp at 1 is h: 1 + h down to 1, 1 + 3h up to
 * 1 + 4h, and just above 1 + h up to 1 + 2h. */
static void check_ties_at_one(const char *fmt_name, float (*round)(float), float h) {
  CHECK(round(1 + h) == 1.0f, "%s: 1 + h -> %.9g", fmt_name, round(1 + h));
  CHECK(round(1 + 3 * h) == 1 + 4 * h, "%s: 1 + 3h -> %.9g", fmt_name, round(1 + 3 * h));
  CHECK(round(1 + h + ldexpf(1, -20)) == 1 + 2 * h, "%s: just above the tie -> %.9g", fmt_name,
        round(1 + h + ldexpf(1, -20)));
}

TEST(float16_ties_round_to_even) {
  check_ties_at_one("float16", f16_round, ldexpf(1, -11));
  CHECK(f16_round(-(1 + ldexpf(1, -11))) == -1.0f, "negative tie -> %.9g",
        f16_round(-(1 + ldexpf(1, -11))));
  CHECK(f16_round(2049.0f) == 2048.0f && f16_round(2051.0f) == 2052.0f, "2049 -> %g, 2051 -> %g",
        f16_round(2049.0f), f16_round(2051.0f));
}

TEST(bfloat16_ties_round_to_even_and_overflow_to_inf) {
  check_ties_at_one("bfloat16", bf16_round, ldexpf(1, -8));
  CHECK(dle_f32_to_bf16(bits_to_float(0x7f7f0000u)) == 0x7f7f,
        "largest bfloat16 does not round trip");
  CHECK(dle_f32_to_bf16(FLT_MAX) == 0x7f80, "FLT_MAX -> %#x, expected inf",
        dle_f32_to_bf16(FLT_MAX));
  CHECK(dle_f32_to_bf16(-INFINITY) == 0xff80, "-inf -> %#x", dle_f32_to_bf16(-INFINITY));
  CHECK(dle_f32_to_bf16(-0.0f) == 0x8000, "-0 -> %#x", dle_f32_to_bf16(-0.0f));
}

TEST(nan_stays_nan_in_both_half_formats) {
  const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fffffffu, 0xff800001u};
  for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
    float n = bits_to_float(nans[i]);
    CHECK(isnan(f16_round(n)), "float16 of NaN bits %#x gives %g", nans[i], f16_round(n));
    CHECK(isnan(bf16_round(n)), "bfloat16 of NaN bits %#x gives %g", nans[i], bf16_round(n));
  }
}

/* The value of a float16 bit pattern, decoded independently of the engine. */
static double f16_value_ref(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

TEST(every_float16_decodes_exactly_and_round_trips) {
  for (uint32_t h = 0; h <= 0xffff; h++) {
    double want = f16_value_ref((uint16_t)h);
    float got = dle_f16_to_f32((uint16_t)h);
    if (isnan(want)) {
      CHECK(isnan(got), "%#x decodes to %g, expected NaN", h, got);
      continue;
    }
    CHECK(got == want, "%#x decodes to %.9g, expected %.9g", h, got, want);
    CHECK(dle_f32_to_f16(got) == h, "%#x -> %.9g -> %#x", h, got, dle_f32_to_f16(got));
  }
}

TEST(every_bfloat16_decodes_exactly_and_round_trips) {
  for (uint32_t b = 0; b <= 0xffff; b++) {
    float want = bits_to_float(b << 16), got = dle_bf16_to_f32((uint16_t)b);
    if (isnan(want)) {
      CHECK(isnan(got) && isnan(bf16_round(want)), "NaN %#x lost", b);
      continue;
    }
    CHECK(memcmp(&got, &want, 4) == 0, "%#x decodes to %.9g", b, got);
    CHECK(dle_f32_to_bf16(got) == b, "%#x -> %.9g -> %#x", b, got, dle_f32_to_bf16(got));
  }
}

static uint32_t xorshift(uint32_t *s) {
  *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
  return *s;
}

/* True when `code` (magnitude bits, sign handled by the caller) is the nearest of the format's
 * values to a, ties going to the even code; value(code) decodes a magnitude code. */
static bool is_nearest_even(double a, uint16_t code, uint16_t max_code, float (*value)(uint16_t)) {
  double d = fabs(a - value(code));
  if (code > 0 && fabs(a - value(code - 1)) < d) return false;
  if (code < max_code && fabs(a - value(code + 1)) < d) return false;
  bool tie = (code > 0 && fabs(a - value(code - 1)) == d) ||
             (code < max_code && fabs(a - value(code + 1)) == d);
  return !tie || (code & 1) == 0;
}

TEST(float16_rounding_is_nearest_even_on_random_floats) {
  uint32_t s = 12345;
  int bad = 0;
  for (int i = 0; i < 400000 && bad < 5; i++) {
    /* exponents 2^-26 .. 2^15: subnormals, normals and values just below the overflow */
    uint32_t u = (xorshift(&s) & 0x807fffffu) | ((101u + xorshift(&s) % 42u) << 23);
    float f = bits_to_float(u);
    if (fabsf(f) >= 65504.0f) continue;
    uint16_t h = dle_f32_to_f16(f);
    bool ok = (h & 0x8000) == ((u >> 16) & 0x8000) &&
              is_nearest_even(fabsf(f), h & 0x7fff, 0x7bff, dle_f16_to_f32);
    if (!CHECK(ok, "float16(%.9g) = %#x (%.9g)", f, h, dle_f16_to_f32(h))) bad++;
  }
}

TEST(bfloat16_rounding_is_nearest_even_on_random_floats) {
  uint32_t s = 777;
  int bad = 0;
  for (int i = 0; i < 400000 && bad < 5; i++) {
    uint32_t u = xorshift(&s);
    if ((u & 0x7f800000u) == 0x7f800000u || (u & 0x7fffffffu) > 0x7f7f0000u) continue;
    float f = bits_to_float(u);
    uint16_t b = dle_f32_to_bf16(f);
    bool ok = (b & 0x8000) == ((u >> 16) & 0x8000) &&
              is_nearest_even(fabsf(f), b & 0x7fff, 0x7f7f, dle_bf16_to_f32);
    if (!CHECK(ok, "bfloat16(%.9g) = %#x (%.9g)", f, b, dle_bf16_to_f32(b))) bad++;
  }
}

/* ---- conversions between dtypes ---- */

static double saturate(double v, double lo, double hi) {
  return isnan(v) ? 0 : v <= lo ? lo : v >= hi ? hi : trunc(v);
}

/* What converting the (already stored) value v of dtype `from` into `to` must give: floats round,
 * floats into integers truncate and saturate (NaN -> 0), integers into narrower integers wrap
 * like C casts, anything into bool tests != 0. */
static double convert_ref(double v, dle_dtype from, dle_dtype to) {
  bool from_float = dle_dtype_is_float(from);
  switch (to) {
    case DLE_F64: return v;
    case DLE_F32: return (float)v;
    case DLE_F16: return f16_round((float)v);
    case DLE_BF16: return bf16_round((float)v);
    case DLE_I32:
      return from_float ? saturate(v, INT32_MIN, INT32_MAX) : (double)(int32_t)(int64_t)v;
    case DLE_I64: return from_float ? saturate(v, -0x1p63, 0x1p63) : v;
    case DLE_U8: return from_float ? saturate(v, 0, 255) : (double)(uint8_t)(int64_t)v;
    case DLE_BOOL: return v != 0;
    case DLE_C64: return (float)v; /* the real part, read back by at() */
    case DLE_C128: return v;
    case DLE_I8: return from_float ? saturate(v, INT8_MIN, INT8_MAX) : (double)(int8_t)(int64_t)v;
    case DLE_I16:
      return from_float ? saturate(v, INT16_MIN, INT16_MAX) : (double)(int16_t)(int64_t)v;
    case DLE_U16: return from_float ? saturate(v, 0, UINT16_MAX) : (double)(uint16_t)(int64_t)v;
    case DLE_U32: return from_float ? saturate(v, 0, UINT32_MAX) : (double)(uint32_t)(int64_t)v;
    case DLE_U64: return from_float ? saturate(v, 0, 0x1p64) : (double)(uint64_t)(int64_t)v;
    case DLE_F8E4M3: return dle_f8e4m3_to_f32(dle_f32_to_f8e4m3((float)v));
    case DLE_F8E5M2: return dle_f8e5m2_to_f32(dle_f32_to_f8e5m2((float)v));
    default: return NAN;
  }
}

TEST(to_dtype_converts_between_every_pair_of_dtypes) {
  const double vals[8] = {0, 1, -3, 7.5, -2.5, 100, 250, 1e10};
  for (int from = 0; from < DLE_NUM_DTYPES; from++) {
    dle_tensor *contig = t_values(from, SIZES(8), vals), *base, *stepped;
    /* the same values read with stride 2, to exercise the strided loop as well */
    MAKE(base, dle_zeros(&base, SIZES(8, 2), from));
    MAKE(stepped, dle_select(&stepped, base, 1, 1));
    REQUIRE_OK(dle_copy_(stepped, contig));
    dle_tensor *srcs[2] = {contig, stepped};
    for (int to = 0; to < DLE_NUM_DTYPES; to++)
      for (int k = 0; k < 2; k++) {
        dle_tensor *out = NULL;
        if (dle_dtype_is_complex(from) && !dle_dtype_is_complex(to)) { /* would drop the imag */
          CHECK(dle_to_dtype(&out, srcs[k], to) != DLE_OK && out == NULL &&
                    strstr(dle_last_error(), "imaginary part"),
                "%s -> %s was not refused", dle_dtype_name(from), dle_dtype_name(to));
          continue;
        }
        MAKE(out, dle_to_dtype(&out, srcs[k], to));
        CHECK(out->dtype == (dle_dtype)to, "dtype %s", dle_dtype_name(out->dtype));
        for (int64_t i = 0; i < 8; i++) {
          double stored = at(srcs[k], i), want = convert_ref(stored, from, to), got = at(out, i);
          CHECK(got == want || (isnan(got) && isnan(want)),
                "%s %s -> %s: %.9g became %.9g, expected %.9g", k ? "stepped" : "contiguous",
                dle_dtype_name(from), dle_dtype_name(to), stored, got, want);
        }
      }
  }
}

TEST(float_to_integer_conversion_saturates_and_maps_nan_to_zero) {
  const double vals[6] = {NAN, INFINITY, -INFINITY, 1e30, -1e30, -0.99};
  static const struct {
    dle_dtype dt;
    int64_t want[6];
  } cases[] = {
      {DLE_I32, {0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 0}},
      {DLE_I64, {0, INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 0}},
      {DLE_U8, {0, 255, 0, 255, 0, 0}},
      {DLE_BOOL, {1, 1, 1, 1, 1, 1}},
  };
  for (int from = DLE_F32; from <= DLE_BF16; from++) {
    dle_tensor *src = t_values(from, SIZES(6), vals);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      dle_tensor *out;
      MAKE(out, dle_to_dtype(&out, src, cases[c].dt));
      for (int i = 0; i < 6; i++) {
        /* int64 is read raw: as a double INT64_MAX and INT64_MAX - 1000 look alike */
        int64_t got = cases[c].dt == DLE_I64 ? ((const int64_t *)dle_tensor_data(out))[i]
                                             : (int64_t)at(out, i);
        CHECK(got == cases[c].want[i], "%s(%g) -> %s gave %lld, expected %lld",
              dle_dtype_name(from), at(src, i), dle_dtype_name(cases[c].dt), (long long)got,
              (long long)cases[c].want[i]);
      }
    }
  }
}

TEST(to_dtype_of_the_same_dtype_returns_the_tensor_itself) {
  dle_tensor *a = t_arange(4, DLE_F32), *b;
  MAKE(b, dle_to_dtype(&b, a, DLE_F32));
  CHECK(a == b && a->refcount == 2, "same-dtype conversion made a new tensor");
}

TEST(long_conversions_use_the_vector_path_and_stay_exact) {
  /* 0..999 are exact in every float type except bfloat16 (8 bits) above 256 */
  dle_tensor *a = t_arange(1000, DLE_I64), *h, *back, *bf;
  MAKE(h, dle_to_dtype(&h, a, DLE_F16));
  MAKE(back, dle_to_dtype(&back, h, DLE_I64));
  MAKE(bf, dle_to_dtype(&bf, a, DLE_BF16));
  for (int64_t i = 0; i < 1000; i++) {
    CHECK(at(back, i) == i, "int64 -> float16 -> int64 turned %lld into %g", (long long)i,
          at(back, i));
    CHECK(at(bf, i) == bf16_round((float)i), "bfloat16(%lld) = %g", (long long)i, at(bf, i));
  }
}
