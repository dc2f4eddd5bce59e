/* test_elementwise.c — every op of kind UNARY, BINARY, COMPARE and WHERE in ops.def against a
 * math.h reference, on contiguous, transposed, sliced, stepped, broadcast, 0-dim, empty, odd-sized
 * and large (multi-threaded) inputs, in float32, float64 and int64; dtype rules, scalars, outputs
 * given by the caller (aliasing included) and broadcasting errors. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- references ---- */

/* y = op(x) for a unary op with attrs f; false when this file has no reference for op. */
static bool unary_ref(dle_op op, double x, const double *f, double *y) {
  switch (op) {
    case DLE_OP_NEG: *y = -x; break;
    case DLE_OP_ABS: *y = fabs(x); break;
    case DLE_OP_SIGN: *y = (x > 0) - (x < 0); break;
    case DLE_OP_EXP: *y = exp(x); break;
    case DLE_OP_LOG: *y = log(x); break;
    case DLE_OP_EXPM1: *y = expm1(x); break;
    case DLE_OP_LOG1P: *y = log1p(x); break;
    case DLE_OP_SQRT: *y = sqrt(x); break;
    case DLE_OP_RSQRT: *y = 1 / sqrt(x); break;
    case DLE_OP_RECIPROCAL: *y = 1 / x; break;
    case DLE_OP_SIN: *y = sin(x); break;
    case DLE_OP_COS: *y = cos(x); break;
    case DLE_OP_TANH: *y = tanh(x); break;
    case DLE_OP_SIGMOID: *y = 1 / (1 + exp(-x)); break;
    case DLE_OP_RELU: *y = x < 0 ? 0 : x; break;
    case DLE_OP_GELU: *y = 0.5 * x * (1 + erf(x / sqrt(2.0))); break;
    case DLE_OP_GELU_GRAD:
      *y = 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
      break;
    case DLE_OP_SILU: *y = x / (1 + exp(-x)); break;
    case DLE_OP_FLOOR: *y = floor(x); break;
    case DLE_OP_CEIL: *y = ceil(x); break;
    case DLE_OP_ROUND: *y = nearbyint(x); break; /* half to even */
    case DLE_OP_LOGICAL_NOT: *y = x == 0; break;
    case DLE_OP_POW_SCALAR: *y = pow(x, f[0]); break;
    case DLE_OP_CLAMP: *y = x < f[0] ? f[0] : x > f[1] ? f[1] : x; break;
    case DLE_OP_TRUNC: *y = trunc(x); break;
    case DLE_OP_FRAC: *y = x - trunc(x); break;
    case DLE_OP_TAN: *y = tan(x); break;
    case DLE_OP_ASIN: *y = asin(x); break;
    case DLE_OP_ACOS: *y = acos(x); break;
    case DLE_OP_ATAN: *y = atan(x); break;
    case DLE_OP_SINH: *y = sinh(x); break;
    case DLE_OP_COSH: *y = cosh(x); break;
    case DLE_OP_ASINH: *y = asinh(x); break;
    case DLE_OP_ACOSH: *y = acosh(x); break;
    case DLE_OP_ATANH: *y = atanh(x); break;
    case DLE_OP_ERF: *y = erf(x); break;
    case DLE_OP_ERFC: *y = erfc(x); break;
    case DLE_OP_ERFINV: /* bisection on erf: independent of the kernel's Newton steps */
      if (fabs(x) >= 1) {
        *y = fabs(x) == 1 ? copysign(INFINITY, x) : NAN;
      } else {
        double lo = -7, hi = 7;
        for (int i = 0; i < 200; i++) {
          double m = (lo + hi) / 2;
          *(erf(m) < x ? &lo : &hi) = m;
        }
        *y = (lo + hi) / 2;
      }
      break;
    case DLE_OP_LOG2: *y = log2(x); break;
    case DLE_OP_LOG10: *y = log10(x); break;
    case DLE_OP_EXP2: *y = exp2(x); break;
    case DLE_OP_ISNAN: *y = isnan(x); break;
    case DLE_OP_ISINF: *y = isinf(x); break;
    case DLE_OP_ISFINITE: *y = isfinite(x); break;
    case DLE_OP_NAN_TO_NUM:
      *y = isnan(x) ? f[0] : x == INFINITY ? f[1] : x == -INFINITY ? 0 : x;
      break;
    default: return false;
  }
  return true;
}

static bool binary_ref(dle_op op, double a, double b, double *y) {
  switch (op) {
    case DLE_OP_ADD: *y = a + b; break;
    case DLE_OP_SUB: *y = a - b; break;
    case DLE_OP_MUL: *y = a * b; break;
    case DLE_OP_DIV: *y = a / b; break;
    case DLE_OP_POW: *y = pow(a, b); break;
    case DLE_OP_MAXIMUM: *y = isnan(a) || isnan(b) ? NAN : fmax(a, b); break;
    case DLE_OP_MINIMUM: *y = isnan(a) || isnan(b) ? NAN : fmin(a, b); break;
    case DLE_OP_GELU_BACKWARD:
      *y = b * (0.5 * erfc(-a / sqrt(2.0)) + a * exp(-0.5 * a * a) / sqrt(2 * M_PI));
      break;
    case DLE_OP_ATAN2: *y = atan2(a, b); break;
    case DLE_OP_FMOD: *y = fmod(a, b); break;
    case DLE_OP_REMAINDER: {
      double r = fmod(a, b);
      *y = r != 0 && (r < 0) != (b < 0) ? r + b : r;
      break;
    }
    case DLE_OP_FLOOR_DIVIDE: *y = floor(a / b); break;
    case DLE_OP_FMAX: *y = fmax(a, b); break;
    case DLE_OP_FMIN: *y = fmin(a, b); break;
    case DLE_OP_HYPOT: *y = hypot(a, b); break;
    case DLE_OP_LOGADDEXP: *y = fmax(a, b) + log1p(exp(-fabs(a - b))); break;
    case DLE_OP_COPYSIGN: *y = copysign(a, b); break;
    case DLE_OP_EQ: *y = a == b; break;
    case DLE_OP_NE: *y = a != b; break;
    case DLE_OP_LT: *y = a < b; break;
    case DLE_OP_LE: *y = a <= b; break;
    case DLE_OP_GT: *y = a > b; break;
    case DLE_OP_GE: *y = a >= b; break;
    default: return false;
  }
  return true;
}

static dle_op_kind kind_of(dle_op op) { return dle_op_get_info(op)->kind; }
static const char *name_of(dle_op op) { return dle_op_get_info(op)->name; }
static bool is_elementwise(dle_op op) {
  dle_op_kind k = kind_of(op);
  return k == DLE_KIND_UNARY || k == DLE_KIND_BINARY || k == DLE_KIND_COMPARE ||
         k == DLE_KIND_WHERE;
}

/* The reference value of op's result at idx of the broadcast shape (ndim dims). */
static double ref_at(dle_op op, dle_tensor *const *ins, const double *f, int ndim,
                     const int64_t *idx) {
  double y = NAN;
  switch (kind_of(op)) {
    case DLE_KIND_UNARY: unary_ref(op, at_broadcast(ins[0], ndim, idx), f, &y); break;
    case DLE_KIND_WHERE:
      y = at_broadcast(ins[at_broadcast(ins[0], ndim, idx) != 0 ? 1 : 2], ndim, idx);
      break;
    default: binary_ref(op, at_broadcast(ins[0], ndim, idx), at_broadcast(ins[1], ndim, idx), &y);
  }
  return y;
}

/* Tolerance (relative, with an absolute floor of the same size) for a result dtype. */
static double tolerance(dle_dtype dt) {
  switch (dt) {
    case DLE_F64: return 1e-12;
    case DLE_F32: return 2e-6;
    case DLE_F16:
    case DLE_BF16: return 1e-2;
    default: return 0;
  }
}

static bool close_to(double got, double want, double tol) {
  if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
  if (isinf(want) || isinf(got)) return got == want;
  return fabs(got - want) <= tol * (1 + fabs(want));
}

static void broadcast_shape(dle_tensor *const *ins, int nin, int *nd, int64_t *shape) {
  *nd = 0;
  for (int i = 0; i < nin; i++)
    if (ins[i]->ndim > *nd) *nd = ins[i]->ndim;
  for (int d = 0; d < *nd; d++) shape[d] = 1;
  for (int i = 0; i < nin; i++)
    for (int d = 0; d < ins[i]->ndim; d++) {
      int64_t s = ins[i]->sizes[d];
      if (s != 1) shape[d + *nd - ins[i]->ndim] = s;
    }
}

/* Checks y's dtype, shape and every element against the reference; one failure line per case. */
static void check_result(const char *what, dle_op op, const dle_tensor *y, dle_dtype want_dt,
                         dle_tensor *const *ins, int nin, const double *f) {
  int nd;
  int64_t shape[DLE_MAX_DIMS];
  broadcast_shape(ins, nin, &nd, shape);
  if (!CHECK(y->dtype == want_dt, "%s: result is %s, expected %s", what, dle_dtype_name(y->dtype),
             dle_dtype_name(want_dt)))
    return;
  if (!CHECK(shape_is(y, nd, shape), "%s: result has shape %s", what, shape_of(y))) return;
  if (dle_tensor_numel(y) == 0) return;
  double tol = tolerance(want_dt);
  int64_t idx[DLE_MAX_DIMS] = {0}, wrong = 0, first[DLE_MAX_DIMS];
  double got0 = 0, want0 = 0;
  do {
    double want = ref_at(op, ins, f, nd, idx), got = dle_tensor_get(y, idx);
    if (want_dt == DLE_F32) want = (float)want;
    if (!close_to(got, want, tol) && wrong++ == 0) {
      memcpy(first, idx, sizeof first);
      got0 = got, want0 = want;
    }
  } while (index_next(nd, shape, idx));
  char where[128];
  dle_shape_str(where, sizeof where, nd, first);
  CHECK(wrong == 0, "%s: %lld of %lld elements wrong, first at %s: got %.9g, expected %.9g", what,
        (long long)wrong, (long long)dle_tensor_numel(y), where, got0, want0);
}

/* ---- what each op is tested on ---- */

static value_domain unary_domain(dle_op op, dle_dtype dt) {
  bool positive = op == DLE_OP_LOG || op == DLE_OP_SQRT || op == DLE_OP_RSQRT ||
                  op == DLE_OP_RECIPROCAL || op == DLE_OP_LOG1P;
  if (dt == DLE_BOOL) return DOM_BOOL;
  if (dle_dtype_is_float(dt)) return positive ? DOM_POS : DOM_ANY;
  return positive ? DOM_INT_POS : DOM_INT;
}

static void unary_attrs(dle_op op, dle_dtype dt, double *f) {
  f[0] = f[1] = 0;
  if (op == DLE_OP_POW_SCALAR) f[0] = dle_dtype_is_float(dt) ? 3 : 2;
  if (op == DLE_OP_CLAMP) f[0] = -1, f[1] = dle_dtype_is_float(dt) ? 1.5 : 2;
}

/* Result dtype of a unary op on dt: the rule ops.def's flags describe. */
static dle_dtype unary_result_dtype(dle_op op, dle_dtype dt, const double *f) {
  if (op == DLE_OP_LOGICAL_NOT || op == DLE_OP_ISNAN || op == DLE_OP_ISINF || op == DLE_OP_ISFINITE)
    return DLE_BOOL;
  if (dle_dtype_is_float(dt)) return dt;
  if (dle_op_get_info(op)->flags & DLE_FLOATOUT) return DLE_DEFAULT_FLOAT;
  if (op == DLE_OP_POW_SCALAR && (f[0] != floor(f[0]) || f[0] < 0)) return DLE_DEFAULT_FLOAT;
  return dt;
}

static void binary_domains(dle_op op, dle_dtype dt, value_domain *da, value_domain *db) {
  bool fl = dle_dtype_is_float(dt);
  *da = fl ? DOM_ANY : DOM_INT, *db = fl ? DOM_ANY : DOM_INT;
  if (op == DLE_OP_DIV) *db = fl ? DOM_POS : DOM_INT_POS;
  if (op == DLE_OP_POW) *da = fl ? DOM_POS : DOM_SMALL_INT, *db = fl ? DOM_ANY : DOM_EXPONENT;
  /* integer division by 0 is defined as 0 (elementwise_spec.lua checks it), not floor(a / 0) */
  if (!fl && (op == DLE_OP_FMOD || op == DLE_OP_REMAINDER || op == DLE_OP_FLOOR_DIVIDE))
    *db = DOM_INT_POS;
  if (kind_of(op) == DLE_KIND_COMPARE) *da = *db = DOM_SMALL_INT;
}

static dle_dtype binary_result_dtype(dle_op op, dle_dtype dt) {
  if (kind_of(op) == DLE_KIND_COMPARE) return DLE_BOOL;
  if (!dle_dtype_is_float(dt) && (dle_op_get_info(op)->flags & DLE_FLOATOUT))
    return DLE_DEFAULT_FLOAT;
  return dt;
}

static dle_status call_op(dle_op op, dle_tensor **out, dle_tensor *const *ins, int nin,
                          const double *f) {
  dle_attrs a = {0};
  if (f) a.f[0] = f[0], a.f[1] = f[1];
  return dle_op_call(op, out, ins, nin, &a);
}

static const dle_dtype test_dtypes[] = {DLE_F32, DLE_F64, DLE_I64};
#define NUM_TEST_DTYPES 3

/* An input of one test case: shape and memory layout. */
typedef struct {
  int ndim;
  int64_t sizes[3];
  memory_layout layout;
} operand;

static const char *describe(char *buf, size_t n, dle_op op, dle_dtype dt, const operand *ops,
                            int nops) {
  int used = snprintf(buf, n, "%s %s", name_of(op), dle_dtype_name(dt));
  for (int i = 0; i < nops && used < (int)n; i++) {
    char s[64];
    used += snprintf(buf + used, n - (size_t)used, "%s %s %s", i ? " with" : " on",
                     layout_names[ops[i].layout],
                     dle_shape_str(s, sizeof s, ops[i].ndim, ops[i].sizes));
  }
  return buf;
}

/* Cases with more elements than CPU_PARALLEL_GRAIN (32768) run on several threads, which split
 * the strided walk mid-row. The split does not depend on the op, so those cases run for one op of
 * each loop family only, to keep the file fast. */
static bool is_large(const operand *ops, int n) {
  for (int i = 0; i < n; i++)
    if (ops[i].ndim == 2 && ops[i].sizes[0] * ops[i].sizes[1] > 32768) return true;
  return false;
}

static bool runs_large_cases(dle_op op) {
  return op == DLE_OP_NEG || op == DLE_OP_EXP || op == DLE_OP_ADD || op == DLE_OP_DIV ||
         op == DLE_OP_LT || op == DLE_OP_WHERE;
}

/* ---- unary ---- */

static const operand unary_cases[] = {
    {2, {7, 13}, LAYOUT_CONTIGUOUS},
    {2, {7, 13}, LAYOUT_TRANSPOSED},
    {2, {7, 13}, LAYOUT_SLICED},
    {2, {7, 13}, LAYOUT_STEPPED},
    {0, {0}, LAYOUT_CONTIGUOUS},
    {0, {0}, LAYOUT_SLICED},
    {3, {2, 0, 3}, LAYOUT_CONTIGUOUS},
    {3, {3, 5, 7}, LAYOUT_TRANSPOSED},
    /* above CPU_PARALLEL_GRAIN: threads split rows of the strided walk */
    {2, {259, 131}, LAYOUT_TRANSPOSED},
    {2, {259, 131}, LAYOUT_CONTIGUOUS},
};

static void run_unary_case(dle_op op, dle_dtype dt, const operand *c) {
  if (is_large(c, 1) && !runs_large_cases(op)) return;
  if (op == DLE_OP_FRAC && !dle_dtype_is_float(dt)) return; /* floats only, as in PyTorch */
  double f[2];
  unary_attrs(op, dt, f);
  char what[256];
  describe(what, sizeof what, op, dt, c, 1);
  int mark = track_count();
  dle_tensor *x = t_make(c->layout, dt, c->ndim, c->sizes, unary_domain(op, dt), 0), *y = NULL;
  if (CHECK(call_op(op, &y, &x, 1, f) == DLE_OK, "%s: %s", what, dle_last_error())) {
    track(y);
    check_result(what, op, y, unary_result_dtype(op, dt, f), &x, 1, f);
  }
  track_release_from(mark);
}

TEST(every_unary_op_matches_its_reference_in_every_layout_and_dtype) {
  for (int op = 0; op < DLE_NUM_OPS; op++) {
    if (kind_of(op) != DLE_KIND_UNARY) continue;
    for (int k = 0; k < NUM_TEST_DTYPES; k++)
      for (size_t c = 0; c < sizeof unary_cases / sizeof unary_cases[0]; c++)
        run_unary_case(op, test_dtypes[k], &unary_cases[c]);
  }
}

/* ---- binary and comparisons ---- */

static const operand binary_cases[][2] = {
    {{2, {7, 13}, LAYOUT_CONTIGUOUS}, {2, {7, 13}, LAYOUT_CONTIGUOUS}},
    {{2, {7, 13}, LAYOUT_TRANSPOSED}, {2, {7, 13}, LAYOUT_CONTIGUOUS}},
    {{2, {7, 13}, LAYOUT_CONTIGUOUS}, {2, {7, 13}, LAYOUT_SLICED}},
    {{2, {7, 13}, LAYOUT_STEPPED}, {2, {7, 13}, LAYOUT_TRANSPOSED}},
    {{2, {3, 1}, LAYOUT_CONTIGUOUS}, {2, {1, 4}, LAYOUT_CONTIGUOUS}},
    {{2, {7, 13}, LAYOUT_TRANSPOSED}, {1, {13}, LAYOUT_STEPPED}},
    {{2, {7, 1}, LAYOUT_SLICED}, {2, {7, 13}, LAYOUT_CONTIGUOUS}},
    {{0, {0}, LAYOUT_CONTIGUOUS}, {2, {7, 13}, LAYOUT_TRANSPOSED}},
    {{2, {7, 13}, LAYOUT_CONTIGUOUS}, {0, {0}, LAYOUT_SLICED}},
    {{0, {0}, LAYOUT_SLICED}, {0, {0}, LAYOUT_CONTIGUOUS}},
    {{3, {2, 1, 5}, LAYOUT_TRANSPOSED}, {2, {3, 1}, LAYOUT_SLICED}},
    {{2, {0, 4}, LAYOUT_CONTIGUOUS}, {1, {4}, LAYOUT_CONTIGUOUS}},
    {{2, {259, 131}, LAYOUT_TRANSPOSED}, {1, {131}, LAYOUT_CONTIGUOUS}},
    {{2, {259, 131}, LAYOUT_CONTIGUOUS}, {2, {259, 131}, LAYOUT_CONTIGUOUS}},
    {{1, {1}, LAYOUT_CONTIGUOUS}, {2, {259, 131}, LAYOUT_STEPPED}},
};

static void run_binary_case(dle_op op, dle_dtype dt, const operand *c) {
  if (is_large(c, 2) && !runs_large_cases(op)) return;
  char what[256];
  describe(what, sizeof what, op, dt, c, 2);
  value_domain da, db;
  binary_domains(op, dt, &da, &db);
  int mark = track_count();
  dle_tensor *ins[2] = {t_make(c[0].layout, dt, c[0].ndim, c[0].sizes, da, 0),
                        t_make(c[1].layout, dt, c[1].ndim, c[1].sizes, db, 1)};
  dle_tensor *y = NULL;
  if (CHECK(call_op(op, &y, ins, 2, NULL) == DLE_OK, "%s: %s", what, dle_last_error())) {
    track(y);
    check_result(what, op, y, binary_result_dtype(op, dt), ins, 2, NULL);
  }
  track_release_from(mark);
}

static void run_binary_kind(dle_op_kind kind) {
  for (int op = 0; op < DLE_NUM_OPS; op++) {
    if (kind_of(op) != kind) continue;
    for (int k = 0; k < NUM_TEST_DTYPES; k++)
      for (size_t c = 0; c < sizeof binary_cases / sizeof binary_cases[0]; c++)
        run_binary_case(op, test_dtypes[k], binary_cases[c]);
  }
}

TEST(every_binary_op_matches_its_reference_in_every_layout_and_dtype) {
  run_binary_kind(DLE_KIND_BINARY);
}

TEST(every_comparison_matches_its_reference_and_returns_bool) { run_binary_kind(DLE_KIND_COMPARE); }

/* ---- where ---- */

TEST(where_picks_from_a_or_b_with_broadcasting_in_every_dtype) {
  static const operand cases[][3] = {
      /* cond, a, b */
      {{2, {7, 13}, LAYOUT_CONTIGUOUS},
       {2, {7, 13}, LAYOUT_CONTIGUOUS},
       {2, {7, 13}, LAYOUT_CONTIGUOUS}},
      {{2, {7, 1}, LAYOUT_SLICED}, {2, {7, 13}, LAYOUT_TRANSPOSED}, {0, {0}, LAYOUT_CONTIGUOUS}},
      {{2, {7, 13}, LAYOUT_TRANSPOSED}, {1, {13}, LAYOUT_CONTIGUOUS}, {2, {7, 13}, LAYOUT_STEPPED}},
      {{1, {13}, LAYOUT_STEPPED}, {2, {7, 1}, LAYOUT_CONTIGUOUS}, {2, {1, 13}, LAYOUT_SLICED}},
      {{2, {259, 131}, LAYOUT_TRANSPOSED},
       {2, {259, 131}, LAYOUT_CONTIGUOUS},
       {1, {131}, LAYOUT_CONTIGUOUS}},
  };
  for (int k = 0; k < NUM_TEST_DTYPES; k++)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      dle_dtype dt = test_dtypes[k];
      char what[256];
      const operand *o = cases[c];
      describe(what, sizeof what, DLE_OP_WHERE, dt, o, 3);
      int mark = track_count();
      value_domain d = dle_dtype_is_float(dt) ? DOM_ANY : DOM_INT;
      dle_tensor *ins[3] = {t_make(o[0].layout, DLE_BOOL, o[0].ndim, o[0].sizes, DOM_BOOL, 2),
                            t_make(o[1].layout, dt, o[1].ndim, o[1].sizes, d, 0),
                            t_make(o[2].layout, dt, o[2].ndim, o[2].sizes, d, 1)};
      dle_tensor *y = NULL;
      if (CHECK(dle_where(&y, ins[0], ins[1], ins[2]) == DLE_OK, "%s: %s", what,
                dle_last_error())) {
        track(y);
        check_result(what, DLE_OP_WHERE, y, dt, ins, 3, NULL);
      }
      track_release_from(mark);
    }
}

TEST(where_promotes_its_two_value_operands) {
  dle_tensor *cond = t_values(DLE_BOOL, SIZES(3), (const double[]){1, 0, 1});
  dle_tensor *a = t_values(DLE_F32, SIZES(3), (const double[]){1.5, 2.5, 3.5});
  dle_tensor *b = t_values(DLE_I64, SIZES(3), (const double[]){-1, -2, -3}), *y;
  MAKE(y, dle_where(&y, cond, a, b));
  CHECK(y->dtype == DLE_F32, "where(float32, int64) is %s", dle_dtype_name(y->dtype));
  CHECK(at(y, 0) == 1.5 && at(y, 1) == -2 && at(y, 2) == 3.5, "got %g %g %g", at(y, 0), at(y, 1),
        at(y, 2));
}

TEST(every_elementwise_op_in_the_table_has_a_reference_here) {
  for (int op = 0; op < DLE_NUM_OPS; op++) {
    if (!is_elementwise(op)) continue;
    double y, f[2] = {1, 2};
    bool known = op == DLE_OP_WHERE || (kind_of(op) == DLE_KIND_UNARY ? unary_ref(op, 0.5, f, &y)
                                                                      : binary_ref(op, 0.5, 1, &y));
    CHECK(known, "op %s has no reference in test_elementwise.c", name_of(op));
  }
}

/* ---- special values ---- */

static dle_tensor *unary_of(dle_op op, dle_tensor *x) {
  dle_tensor *y;
  MAKE(y, dle_unary(op, &y, x));
  return y;
}

TEST(round_goes_half_to_even_and_floor_ceil_handle_negatives) {
  const double v[7] = {0.5, 1.5, 2.5, -0.5, -2.5, -1.25, 3.75};
  for (int k = 0; k < 2; k++) {
    dle_tensor *x = t_values(k ? DLE_F64 : DLE_F32, SIZES(7), v);
    dle_tensor *r = unary_of(DLE_OP_ROUND, x), *fl = unary_of(DLE_OP_FLOOR, x),
               *ce = unary_of(DLE_OP_CEIL, x);
    const double want_r[7] = {0, 2, 2, -0.0, -2, -1, 4}, want_f[7] = {0, 1, 2, -1, -3, -2, 3},
                 want_c[7] = {1, 2, 3, -0.0, -2, -1, 4};
    for (int i = 0; i < 7; i++) {
      CHECK(at(r, i) == want_r[i], "round(%g) = %g", v[i], at(r, i));
      CHECK(at(fl, i) == want_f[i], "floor(%g) = %g", v[i], at(fl, i));
      CHECK(at(ce, i) == want_c[i], "ceil(%g) = %g", v[i], at(ce, i));
    }
  }
}

TEST(floor_ceil_round_of_integers_return_new_tensors_with_the_same_values) {
  dle_tensor *x = t_make(LAYOUT_TRANSPOSED, DLE_I64, SIZES(3, 4), DOM_INT, 0);
  for (dle_op op = DLE_OP_FLOOR; op <= DLE_OP_ROUND; op++) {
    dle_tensor *y = unary_of(op, x);
    CHECK(y->dtype == DLE_I64 && !dle_same_storage(x, y), "%s of int64 gave %s sharing storage %d",
          name_of(op), dle_dtype_name(y->dtype), dle_same_storage(x, y));
    for (int64_t i = 0; i < 12; i++)
      CHECK(at(y, i) == at(x, i), "%s changed element %lld", name_of(op), (long long)i);
  }
}

TEST(nan_propagates_through_maximum_minimum_relu_and_clamp) {
  dle_tensor *a = t_values(DLE_F32, SIZES(3), (const double[]){NAN, 1, NAN});
  dle_tensor *b = t_values(DLE_F32, SIZES(3), (const double[]){1, NAN, NAN}), *mx, *mn, *cl;
  MAKE(mx, dle_binary(DLE_OP_MAXIMUM, &mx, a, b));
  MAKE(mn, dle_binary(DLE_OP_MINIMUM, &mn, a, b));
  MAKE(cl, dle_clamp(&cl, a, 0, 1));
  dle_tensor *r = unary_of(DLE_OP_RELU, a);
  for (int i = 0; i < 3; i++) {
    CHECK(isnan(at(mx, i)) && isnan(at(mn, i)), "maximum/minimum lost a NaN at %d: %g %g", i,
          at(mx, i), at(mn, i));
  }
  CHECK(isnan(at(r, 0)) && isnan(at(cl, 0)), "relu(NaN) = %g, clamp(NaN) = %g", at(r, 0),
        at(cl, 0));
}

TEST(comparisons_with_nan_are_false_except_ne) {
  dle_tensor *a = t_values(DLE_F64, SIZES(2), (const double[]){NAN, 1});
  dle_tensor *b = t_values(DLE_F64, SIZES(2), (const double[]){NAN, NAN});
  for (dle_op op = DLE_OP_EQ; op <= DLE_OP_GE; op++) {
    dle_tensor *y;
    MAKE(y, dle_binary(op, &y, a, b));
    double want = op == DLE_OP_NE;
    CHECK(at(y, 0) == want && at(y, 1) == want, "%s with NaN gave %g %g", name_of(op), at(y, 0),
          at(y, 1));
  }
}

TEST(float_results_reach_inf_and_nan_like_ieee) {
  dle_tensor *z = t_values(DLE_F32, SIZES(2), (const double[]){0, -1});
  dle_tensor *lg = unary_of(DLE_OP_LOG, z), *sq = unary_of(DLE_OP_SQRT, z),
             *rc = unary_of(DLE_OP_RECIPROCAL, z);
  CHECK(isinf(at(lg, 0)) && at(lg, 0) < 0, "log(0) = %g", at(lg, 0));
  CHECK(isnan(at(sq, 1)), "sqrt(-1) = %g", at(sq, 1));
  CHECK(isinf(at(rc, 0)) && at(rc, 0) > 0, "1/0 = %g", at(rc, 0));
  dle_tensor *big = t_values(DLE_F32, SIZES(2), (const double[]){100, -100});
  dle_tensor *sg = unary_of(DLE_OP_SIGMOID, big), *si = unary_of(DLE_OP_SILU, big);
  CHECK(at(sg, 0) == 1 && at(sg, 1) >= 0 && at(sg, 1) < 1e-30, "sigmoid(+-100) = %g %g", at(sg, 0),
        at(sg, 1));
  CHECK(at(si, 0) == 100 && fabs(at(si, 1)) < 1e-30, "silu(+-100) = %g %g", at(si, 0), at(si, 1));
}

TEST(pow_scalar_and_clamp_follow_their_attributes) {
  dle_tensor *xi = t_values(DLE_I64, SIZES(3), (const double[]){4, 9, 2}), *h, *n, *sq;
  MAKE(h, dle_pow_scalar(&h, xi, 0.5));
  CHECK(h->dtype == DLE_F32, "int64 ^ 0.5 is %s", dle_dtype_name(h->dtype));
  CHECK(at(h, 0) == 2 && at(h, 1) == 3, "sqrt by pow: %g %g", at(h, 0), at(h, 1));
  MAKE(n, dle_pow_scalar(&n, xi, -1));
  CHECK(n->dtype == DLE_F32 && at(n, 2) == 0.5, "int64 ^ -1 is %s, 2^-1 = %g",
        dle_dtype_name(n->dtype), at(n, 2));
  MAKE(sq, dle_pow_scalar(&sq, xi, 2));
  CHECK(sq->dtype == DLE_I64 && at(sq, 1) == 81, "int64 ^ 2 is %s, 9^2 = %g",
        dle_dtype_name(sq->dtype), at(sq, 1));
  dle_tensor *x = t_values(DLE_F64, SIZES(4), (const double[]){-5, -0.5, 0.5, 5}), *lo, *hi;
  MAKE(lo, dle_clamp(&lo, x, -1, NAN)); /* NaN bound: unbounded above */
  MAKE(hi, dle_clamp(&hi, x, NAN, 1));
  CHECK(at(lo, 0) == -1 && at(lo, 3) == 5, "clamp(-1, none): %g %g", at(lo, 0), at(lo, 3));
  CHECK(at(hi, 0) == -5 && at(hi, 3) == 1, "clamp(none, 1): %g %g", at(hi, 0), at(hi, 3));
}

TEST(integer_arithmetic_wraps_around_like_twos_complement) {
  /* PyTorch's integer semantics; in C the kernels must not overflow a signed type to get there */
  dle_tensor *a = t_values(DLE_I64, SIZES(1), (const double[]){0}),
             *one = t_values(DLE_I64, SIZES(1), (const double[]){1});
  *(int64_t *)dle_tensor_data(a) = INT64_MAX;
  dle_tensor *sum, *neg, *prod;
  MAKE(sum, dle_binary(DLE_OP_ADD, &sum, a, one));
  CHECK(*(int64_t *)dle_tensor_data(sum) == INT64_MIN, "INT64_MAX + 1 = %lld",
        (long long)*(int64_t *)dle_tensor_data(sum));
  MAKE(neg, dle_unary(DLE_OP_NEG, &neg, sum));
  CHECK(*(int64_t *)dle_tensor_data(neg) == INT64_MIN, "-INT64_MIN = %lld",
        (long long)*(int64_t *)dle_tensor_data(neg));
  MAKE(prod, dle_binary(DLE_OP_MUL, &prod, a, a));
  CHECK(*(int64_t *)dle_tensor_data(prod) == 1, "INT64_MAX * INT64_MAX = %lld",
        (long long)*(int64_t *)dle_tensor_data(prod));
  dle_tensor *b = t_values(DLE_I32, SIZES(1), (const double[]){INT32_MAX}),
             *one32 = t_values(DLE_I32, SIZES(1), (const double[]){1}), *s32;
  MAKE(s32, dle_binary(DLE_OP_ADD, &s32, b, one32));
  CHECK(at(s32, 0) == INT32_MIN, "INT32_MAX + 1 = %g", at(s32, 0));
  dle_tensor *u = t_values(DLE_U8, SIZES(1), (const double[]){200}),
             *u2 = t_values(DLE_U8, SIZES(1), (const double[]){100}), *su;
  MAKE(su, dle_binary(DLE_OP_ADD, &su, u, u2));
  CHECK(at(su, 0) == 44, "uint8 200 + 100 = %g", at(su, 0));
}

/* ---- dtypes ---- */

TEST(mixed_dtype_operands_are_promoted_before_computing) {
  static const struct {
    dle_dtype a, b;
    dle_op op;
    dle_dtype want;
  } cases[] = {
      {DLE_F32, DLE_I64, DLE_OP_ADD, DLE_F32},     {DLE_I32, DLE_I64, DLE_OP_MUL, DLE_I64},
      {DLE_U8, DLE_BOOL, DLE_OP_ADD, DLE_U8},      {DLE_F16, DLE_BF16, DLE_OP_SUB, DLE_F32},
      {DLE_BOOL, DLE_BOOL, DLE_OP_ADD, DLE_I64},   {DLE_I32, DLE_I32, DLE_OP_DIV, DLE_F32},
      {DLE_F32, DLE_F64, DLE_OP_MAXIMUM, DLE_F64}, {DLE_I64, DLE_F16, DLE_OP_MUL, DLE_F16},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int mark = track_count();
    dle_tensor *a = t_make(LAYOUT_TRANSPOSED, cases[c].a, SIZES(3, 5), DOM_BOOL, 0);
    dle_tensor *b = t_make(LAYOUT_CONTIGUOUS, cases[c].b, SIZES(5),
                           cases[c].b == DLE_BOOL ? DOM_BOOL : DOM_INT_POS, 1),
               *y;
    MAKE(y, dle_binary(cases[c].op, &y, a, b));
    char what[128];
    snprintf(what, sizeof what, "%s(%s, %s)", name_of(cases[c].op), dle_dtype_name(cases[c].a),
             dle_dtype_name(cases[c].b));
    dle_tensor *ins[2] = {a, b};
    check_result(what, cases[c].op, y, cases[c].want, ins, 2, NULL);
    track_release_from(mark);
  }
}

TEST(comparison_of_float32_with_float64_happens_in_float64) {
  dle_tensor *a = t_values(DLE_F32, SIZES(1), (const double[]){0.1});
  dle_tensor *b = t_values(DLE_F64, SIZES(1), (const double[]){0.1}), *eq;
  MAKE(eq, dle_binary(DLE_OP_EQ, &eq, a, b));
  CHECK(eq->dtype == DLE_BOOL && at(eq, 0) == 0, "float32(0.1) == float64(0.1) gave %g", at(eq, 0));
}

TEST(half_precision_inputs_compute_with_float_accuracy) {
  for (dle_dtype dt = DLE_F16; dt <= DLE_BF16; dt++) {
    dle_tensor *x = t_make(LAYOUT_TRANSPOSED, dt, SIZES(7, 13), DOM_ANY, 0);
    dle_tensor *z = t_make(LAYOUT_CONTIGUOUS, dt, SIZES(13), DOM_ANY, 1), *e, *s;
    MAKE(e, dle_unary(DLE_OP_EXP, &e, x));
    MAKE(s, dle_binary(DLE_OP_MUL, &s, x, z));
    char what[64];
    snprintf(what, sizeof what, "exp %s", dle_dtype_name(dt));
    check_result(what, DLE_OP_EXP, e, dt, &x, 1, NULL);
    snprintf(what, sizeof what, "mul %s", dle_dtype_name(dt));
    check_result(what, DLE_OP_MUL, s, dt, (dle_tensor *const[]){x, z}, 2, NULL);
  }
}

TEST(binary_scalar_keeps_float32_and_lifts_integers_only_for_fractions) {
  dle_tensor *f = t_values(DLE_F32, SIZES(3), (const double[]){1, 2, 3});
  dle_tensor *i = t_values(DLE_I64, SIZES(3), (const double[]){1, 2, 3});
  dle_tensor *b = t_values(DLE_BOOL, SIZES(3), (const double[]){1, 0, 1});
  dle_tensor *h = t_values(DLE_F16, SIZES(3), (const double[]){1, 2, 3});
  dle_tensor *y;
  MAKE(y, dle_binary_scalar(DLE_OP_ADD, &y, f, 0.5, false));
  CHECK(y->dtype == DLE_F32 && at(y, 2) == 3.5, "float32 + 0.5: %s %g", dle_dtype_name(y->dtype),
        at(y, 2));
  MAKE(y, dle_binary_scalar(DLE_OP_ADD, &y, i, 2, false));
  CHECK(y->dtype == DLE_I64 && at(y, 2) == 5, "int64 + 2: %s %g", dle_dtype_name(y->dtype),
        at(y, 2));
  MAKE(y, dle_binary_scalar(DLE_OP_MUL, &y, i, 0.5, false));
  CHECK(y->dtype == DLE_F32 && at(y, 2) == 1.5, "int64 * 0.5: %s %g", dle_dtype_name(y->dtype),
        at(y, 2));
  MAKE(y, dle_binary_scalar(DLE_OP_ADD, &y, b, 2, false));
  CHECK(y->dtype == DLE_I64 && at(y, 0) == 3 && at(y, 1) == 2, "bool + 2: %s %g %g",
        dle_dtype_name(y->dtype), at(y, 0), at(y, 1));
  MAKE(y, dle_binary_scalar(DLE_OP_MUL, &y, h, 3, false));
  CHECK(y->dtype == DLE_F16 && at(y, 2) == 9, "float16 * 3: %s %g", dle_dtype_name(y->dtype),
        at(y, 2));
  MAKE(y, dle_binary_scalar(DLE_OP_ADD, &y, i, NAN, false));
  CHECK(y->dtype == DLE_F32 && isnan(at(y, 0)), "int64 + NaN: %s %g", dle_dtype_name(y->dtype),
        at(y, 0));
  MAKE(y, dle_binary_scalar(DLE_OP_MUL, &y, i, INFINITY, false));
  CHECK(y->dtype == DLE_F32 && isinf(at(y, 0)), "int64 * inf: %s %g", dle_dtype_name(y->dtype),
        at(y, 0));
  MAKE(y, dle_binary_scalar(DLE_OP_GT, &y, i, 1.5, false));
  CHECK(y->dtype == DLE_BOOL && at(y, 0) == 0 && at(y, 1) == 1, "int64 > 1.5: %s %g %g",
        dle_dtype_name(y->dtype), at(y, 0), at(y, 1));
}

TEST(binary_scalar_with_the_scalar_first_keeps_operand_order) {
  dle_tensor *f = t_values(DLE_F64, SIZES(2), (const double[]){4, 8});
  dle_tensor *i = t_values(DLE_I64, SIZES(2), (const double[]){4, 8}), *y;
  MAKE(y, dle_binary_scalar(DLE_OP_SUB, &y, f, 1, true));
  CHECK(at(y, 0) == -3 && at(y, 1) == -7, "1 - t gave %g %g", at(y, 0), at(y, 1));
  MAKE(y, dle_binary_scalar(DLE_OP_DIV, &y, i, 2, true));
  CHECK(y->dtype == DLE_F32 && at(y, 0) == 0.5 && at(y, 1) == 0.25, "2 / int64 gave %s %g %g",
        dle_dtype_name(y->dtype), at(y, 0), at(y, 1));
  MAKE(y, dle_binary_scalar(DLE_OP_POW, &y, f, 2, true));
  CHECK(at(y, 0) == 16 && at(y, 1) == 256, "2 ^ t gave %g %g", at(y, 0), at(y, 1));
}

/* ---- outputs given by the caller ---- */

TEST(a_given_output_receives_the_result_and_keeps_its_identity) {
  dle_tensor *a = t_make(LAYOUT_TRANSPOSED, DLE_F32, SIZES(7, 13), DOM_ANY, 0);
  dle_tensor *b = t_make(LAYOUT_CONTIGUOUS, DLE_F32, SIZES(13), DOM_ANY, 1), *out, *keep;
  MAKE(out, dle_zeros(&out, SIZES(7, 13), DLE_F32));
  keep = out;
  REQUIRE_OK(dle_binary(DLE_OP_SUB, &out, a, b));
  CHECK(out == keep && out->refcount == 1, "output pointer or refcount changed");
  check_result("sub into a given output", DLE_OP_SUB, out, DLE_F32, (dle_tensor *const[]){a, b}, 2,
               NULL);
}

TEST(output_equal_to_an_input_computes_in_place) {
  dle_tensor *a = t_make(LAYOUT_CONTIGUOUS, DLE_F64, SIZES(7, 13), DOM_ANY, 0), *old, *b, *x, *xold;
  MAKE(old, dle_clone(&old, a));
  b = t_make(LAYOUT_SLICED, DLE_F64, SIZES(7, 1), DOM_ANY, 1);
  dle_tensor *same = a;
  REQUIRE_OK(dle_binary(DLE_OP_MUL, &a, a, b));
  CHECK(a == same, "in-place output replaced");
  check_result("a *= b", DLE_OP_MUL, a, DLE_F64, (dle_tensor *const[]){old, b}, 2, NULL);
  x = t_make(LAYOUT_TRANSPOSED, DLE_F32, SIZES(7, 13), DOM_ANY, 2);
  MAKE(xold, dle_clone(&xold, x));
  REQUIRE_OK(dle_unary(DLE_OP_EXP, &x, x));
  check_result("x = exp(x) on a transposed x", DLE_OP_EXP, x, DLE_F32, &xold, 1, NULL);
}

TEST(output_that_is_a_transposed_view_of_an_input_reads_the_old_values) {
  dle_tensor *x = t_make(LAYOUT_CONTIGUOUS, DLE_F32, SIZES(5, 5), DOM_ANY, 0), *old, *y, *xt;
  MAKE(old, dle_clone(&old, x));
  y = t_make(LAYOUT_CONTIGUOUS, DLE_F32, SIZES(5, 5), DOM_ANY, 1);
  MAKE(xt, dle_transpose(&xt, x, 0, 1));
  REQUIRE_OK(dle_binary(DLE_OP_ADD, &xt, x, y)); /* x^T = x + y, all in x's storage */
  check_result("x^T = x + y", DLE_OP_ADD, xt, DLE_F32, (dle_tensor *const[]){old, y}, 2, NULL);
}

TEST(input_that_is_a_row_of_the_output_is_read_before_it_is_overwritten) {
  dle_tensor *a = t_make(LAYOUT_CONTIGUOUS, DLE_I64, SIZES(4, 6), DOM_INT, 0), *old, *row, *orow;
  MAKE(old, dle_clone(&old, a));
  MAKE(row, dle_select(&row, a, 0, 0));
  MAKE(orow, dle_select(&orow, old, 0, 0));
  REQUIRE_OK(dle_binary(DLE_OP_ADD, &a, a, row)); /* a += a[0] */
  check_result("a += a[0]", DLE_OP_ADD, a, DLE_I64, (dle_tensor *const[]){old, orow}, 2, NULL);
}

/* op(a, b) written into the transpose of a fresh {c, r} tensor *base: a {r, c} and b {r, bc} in
 * the given layouts; checks the result against the reference and returns the output view. */
static dle_tensor *into_transposed(const char *what, dle_op op, dle_dtype dt, int64_t r, int64_t c,
                                   memory_layout la, memory_layout lb, int64_t bc,
                                   dle_tensor **base) {
  dle_tensor *a = t_make(la, dt, SIZES(r, c), DOM_ANY, 0);
  dle_tensor *b = t_make(lb, dt, SIZES(r, bc), DOM_ANY, 1), *out;
  MAKE(*base, dle_zeros(base, SIZES(c, r), dt));
  MAKE(out, dle_transpose(&out, *base, 0, 1));
  REQUIRE_OK(dle_binary(op, &out, a, b));
  check_result(what, op, out, dt, (dle_tensor *const[]){a, b}, 2, NULL);
  return out;
}

TEST(a_transposed_output_is_written_through_its_strides) {
  dle_tensor *base;
  dle_tensor *out = into_transposed("maximum into a transposed output", DLE_OP_MAXIMUM, DLE_F64, 7,
                                    13, LAYOUT_STEPPED, LAYOUT_CONTIGUOUS, 13, &base);
  CHECK(dle_tensor_get(base, (const int64_t[]){12, 6}) ==
            dle_tensor_get(out, (const int64_t[]){6, 12}),
        "base and output disagree");
}

TEST(a_large_transposed_output_is_written_correctly_by_several_threads) {
  dle_tensor *base;
  into_transposed("mul into a large transposed output", DLE_OP_MUL, DLE_F32, 259, 131,
                  LAYOUT_CONTIGUOUS, LAYOUT_SLICED, 1, &base);
}

TEST(an_output_of_another_dtype_gets_the_result_converted_where_pytorch_can_cast) {
  dle_tensor *a = t_values(DLE_F32, SIZES(3), (const double[]){1.25, -2.75, 3.5});
  dle_tensor *b = t_values(DLE_F32, SIZES(3), (const double[]){1, 1, 1}), *o64, *oi, *of, *ob;
  dle_tensor *i = t_values(DLE_I64, SIZES(3), (const double[]){1, 2, 3});
  MAKE(o64, dle_zeros(&o64, SIZES(3), DLE_F64));
  MAKE(oi, dle_zeros(&oi, SIZES(3), DLE_I64));
  MAKE(of, dle_zeros(&of, SIZES(3), DLE_F32));
  MAKE(ob, dle_zeros(&ob, SIZES(3), DLE_BOOL));
  REQUIRE_OK(dle_binary(DLE_OP_ADD, &o64, a, b));
  REQUIRE_OK(dle_binary(DLE_OP_GT, &of, a, b));
  REQUIRE_OK(dle_binary(DLE_OP_ADD, &of, i, i)); /* an integer result into a float output */
  CHECK(at(o64, 1) == -1.75 && o64->dtype == DLE_F64, "float64 output: %g", at(o64, 1));
  CHECK(at(of, 0) == 2 && at(of, 2) == 6, "float32 output of an int64 add: %g %g", at(of, 0),
        at(of, 2));
  /* a float result would be truncated into an integer output, a number squashed into bool */
  CHECK_ERR(dle_binary(DLE_OP_ADD, &oi, a, b), "add", "float32", "int64");
  CHECK_ERR(dle_unary(DLE_OP_EXP, &oi, i), "exp", "float32", "int64");
  CHECK_ERR(dle_binary(DLE_OP_ADD, &ob, i, i), "add", "int64", "bool");
  CHECK(at(oi, 0) == 0 && at(oi, 2) == 0, "the refused int64 output is untouched: %g %g", at(oi, 0),
        at(oi, 2));
}

TEST(floor_of_integers_into_a_given_output_copies) {
  dle_tensor *x = t_values(DLE_I64, SIZES(3), (const double[]){-2, 0, 5}), *out;
  MAKE(out, dle_zeros(&out, SIZES(3), DLE_F64));
  REQUIRE_OK(dle_unary(DLE_OP_FLOOR, &out, x));
  CHECK(at(out, 0) == -2 && at(out, 2) == 5, "floor into float64 output: %g %g", at(out, 0),
        at(out, 2));
}

TEST(an_output_of_the_wrong_shape_is_an_error_naming_the_op_and_shapes) {
  dle_tensor *a = t_arange(6, DLE_F32), *m, *out, *small;
  MAKE(m, dle_view(&m, a, SIZES(2, 3)));
  MAKE(out, dle_zeros(&out, SIZES(3, 2), DLE_F32));
  CHECK_ERR(dle_binary(DLE_OP_ADD, &out, m, m), "add", "{2,3}", "{3,2}");
  CHECK_ERR(dle_unary(DLE_OP_EXP, &out, m), "exp", "{2,3}", "{3,2}");
  MAKE(small, dle_zeros(&small, SIZES(2, 1), DLE_F32));
  CHECK_ERR(dle_binary(DLE_OP_MUL, &small, small, m), "mul", "{2,3}", "{2,1}");
}

TEST(an_expanded_output_is_refused_because_its_elements_share_memory) {
  dle_tensor *col, *out, *a = t_make(LAYOUT_CONTIGUOUS, DLE_F32, SIZES(3, 4), DOM_ANY, 0);
  MAKE(col, dle_zeros(&col, SIZES(3, 1), DLE_F32));
  MAKE(out, dle_expand(&out, col, SIZES(3, 4)));
  CHECK_ERR(dle_binary(DLE_OP_ADD, &out, a, a), "add", "expanded", "{3,4}");
  CHECK_ERR(dle_unary(DLE_OP_NEG, &out, a), "neg", "{3,4}");
  for (int64_t i = 0; i < 3; i++)
    CHECK(at(col, i) == 0, "element %lld written to %g", (long long)i, at(col, i));
}

TEST(broadcasting_errors_name_the_op_and_both_shapes) {
  dle_tensor *a, *b, *c, *y = NULL;
  MAKE(a, dle_zeros(&a, SIZES(2, 3), DLE_F32));
  MAKE(b, dle_zeros(&b, SIZES(4), DLE_F32));
  MAKE(c, dle_zeros(&c, SIZES(2, 3), DLE_BOOL));
  CHECK_ERR(dle_binary(DLE_OP_ADD, &y, a, b), "add", "{2,3}", "{4}");
  CHECK_ERR(dle_binary(DLE_OP_LE, &y, b, a), "le", "{4}", "{2,3}");
  CHECK_ERR(dle_where(&y, c, a, b), "where", "{2,3}", "{4}");
  CHECK(y == NULL, "output set on error");
}
