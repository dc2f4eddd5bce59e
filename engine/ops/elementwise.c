/* elementwise.c — shape and dtype rules of the elementwise ops (unary, binary, comparisons,
 * where): NumPy broadcasting, dtype promotion (dle_promote in dtype.c), in-place outputs. */
#include "../autograd.h"

#include <float.h>

#include "../kernel/elementwise_math.h"

dle_status dle_broadcast_shapes(const char *fn, int na, const int64_t *a, int nb, const int64_t *b,
                                int *nout, int64_t *out) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) { /* i counts from the right */
    int64_t sa = i < na ? a[na - 1 - i] : 1, sb = i < nb ? b[nb - 1 - i] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      char b1[128], b2[128];
      return dle_error("%s: shapes %s and %s cannot be broadcast (dim %d: %lld vs %lld)", fn,
                       dle_shape_str(b1, sizeof b1, na, a), dle_shape_str(b2, sizeof b2, nb, b),
                       n - i, (long long)sa, (long long)sb);
    }
    out[n - 1 - i] = sa == 1 ? sb : sa;
  }
  *nout = n;
  return DLE_OK;
}

/* isnan, isinf, isfinite: bool results computed in the input's dtype (as comparisons) */
static bool is_predicate(dle_op op) {
  return op == DLE_OP_ISNAN || op == DLE_OP_ISINF || op == DLE_OP_ISFINITE;
}

/* Ops with a bool result: comparisons, predicates, logical_not. */
static bool bool_result(dle_op op) {
  return op == DLE_OP_LOGICAL_NOT || is_predicate(op) ||
         dle_op_get_info(op)->kind == DLE_KIND_COMPARE;
}

static bool is_arithmetic(dle_op op) { return !bool_result(op) && op != DLE_OP_WHERE; }

/* Ops that return integer inputs unchanged (their values are already whole and finite). */
static bool identity_on_integers(dle_op op) {
  return op == DLE_OP_FLOOR || op == DLE_OP_CEIL || op == DLE_OP_ROUND || op == DLE_OP_TRUNC ||
         op == DLE_OP_NAN_TO_NUM;
}

/* The dtype an op computes in, given its inputs' promoted dtype. */
static dle_dtype compute_dtype(dle_op op, dle_dtype in, const dle_attrs *a) {
  unsigned flags = dle_op_get_info(op)->flags;
  if (op == DLE_OP_LOGICAL_NOT) return DLE_BOOL;
  if (dle_dtype_is_float(in) || dle_dtype_is_complex(in)) return in;
  if (flags & DLE_FLOATOUT) return DLE_DEFAULT_FLOAT;
  if (op == DLE_OP_POW_SCALAR && (a->f[0] != floor(a->f[0]) || a->f[0] < 0))
    return DLE_DEFAULT_FLOAT;
  if (in == DLE_BOOL && is_arithmetic(op)) return DLE_I64; /* bool arithmetic counts in int64 */
  return in;
}

/* When out shares memory with an input but views it differently, the kernel could read elements
 * it has already written: give it a private copy of that input instead. */
static dle_status unalias(dle_tensor *out, dle_tensor **in) {
  dle_tensor *t = *in;
  if (t->storage != out->storage || dle_same_view(t, out)) return DLE_OK;
  dle_tensor *c = NULL;
  DLE_TRY(dle_clone(&c, t));
  dle_tensor_release(t);
  *in = c;
  return DLE_OK;
}

/* The common case of a training step's small ops: no output given, every input of one dtype and
 * one shape, and the op computes in that dtype. Such an op needs neither broadcasting nor casts,
 * which are most of its cost on a handful of elements. Sets the result's dtype when it applies. */
static bool plain_operands(dle_op op, dle_tensor *const *ins, int nin, const dle_attrs *a,
                           dle_dtype *out_dt) {
  const dle_tensor *x = ins[0];
  if (op == DLE_OP_WHERE || identity_on_integers(op)) return false;
  if (op == DLE_OP_ABS && dle_dtype_is_complex(x->dtype)) return false; /* a real result */
  for (int i = 1; i < nin; i++)
    if (ins[i]->dtype != x->dtype ||
        !dle_shape_equal(x->ndim, x->sizes, ins[i]->ndim, ins[i]->sizes))
      return false;
  if (bool_result(op) && op != DLE_OP_LOGICAL_NOT) {
    *out_dt = DLE_BOOL;
    return true;
  }
  *out_dt = compute_dtype(op, x->dtype, a);
  return *out_dt == x->dtype;
}

/* Whether a result of dtype `from` may be stored into an output of dtype `to` (PyTorch's
 * can_cast): not a float into an integer or bool, nor an integer into bool. In-place ops
 * (int64_tensor:exp_(), int_tensor:add_(0.5)) would otherwise truncate silently. */
static bool dle_can_store(dle_dtype from, dle_dtype to) {
  if (dle_dtype_is_complex(from) && !dle_dtype_is_complex(to)) return false;
  if (dle_dtype_is_float(from) && !dle_dtype_is_float(to)) return false;
  if (from != DLE_BOOL && to == DLE_BOOL) return false;
  return true;
}

/* ... and with an output given, one the kernel can write as it is: the result's dtype and shape,
 * no element sharing memory with another, and no input that is another view of its memory
 * (what unalias below would copy). Accumulating a gradient into .grad is such a call. */
static bool plain_output(const dle_tensor *out, dle_tensor *const *ins, int nin, dle_dtype dt) {
  if (out->dtype != dt || !dle_shape_equal(out->ndim, out->sizes, ins[0]->ndim, ins[0]->sizes) ||
      dle_tensor_overlaps_itself(out))
    return false;
  for (int i = 0; i < nin; i++)
    if (ins[i]->storage == out->storage && !dle_same_view(ins[i], out)) return false;
  return true;
}

/* Integer fmod, remainder and floor_divide by zero have no value: PyTorch raises
 * ZeroDivisionError, so an error here rather than a silent 0 from the kernel. */
static dle_status check_integer_divisor(dle_op op, dle_tensor *const *ins, int nin) {
  if (nin != 2 || (op != DLE_OP_FMOD && op != DLE_OP_REMAINDER && op != DLE_OP_FLOOR_DIVIDE))
    return DLE_OK;
  if (dle_dtype_is_float(dle_promote(ins[0]->dtype, ins[1]->dtype))) return DLE_OK;
  dle_tensor *is_zero = NULL, *count = NULL, *host = NULL;
  dle_status st = dle_binary_scalar(DLE_OP_EQ, &is_zero, ins[1], 0, false);
  if (st == DLE_OK) st = dle_reduce(DLE_OP_SUM, &count, is_zero, 0, NULL, false, 0);
  if (st == DLE_OK) st = dle_to_device(&host, count, (dle_device){DLE_CPU, 0});
  double zeros = st == DLE_OK ? dle_tensor_get(host, NULL) : 0;
  dle_tensor_release(is_zero);
  dle_tensor_release(count);
  dle_tensor_release(host);
  DLE_TRY(st);
  if (zeros > 0)
    return dle_error(
        "%s: integer division by zero (the %s divisor of shape %s holds %.0f zero%s); "
        "convert to a float dtype for inf/nan results",
        dle_op_get_info(op)->name, dle_dtype_name(ins[1]->dtype), SHAPE(ins[1]), zeros,
        zeros == 1 ? "" : "s");
  return DLE_OK;
}

DLE_FORWARD_RULE(elementwise) {
  DLE_TRY(check_integer_divisor(op, ins, nin));
  dle_dtype plain_dt;
  if (plain_operands(op, ins, nin, a, &plain_dt)) {
    if (!outs[0]) {
      DLE_TRY(dle_tensor_empty(&outs[0], ins[0]->ndim, ins[0]->sizes, plain_dt,
                               dle_tensor_device(ins[0])));
      dle_status st = dle_dispatch(op, outs, 1, ins, nin, a);
      if (st != DLE_OK) DLE_RELEASE(outs[0]);
      return st;
    }
    if (plain_output(outs[0], ins, nin, plain_dt)) return dle_dispatch(op, outs, 1, ins, nin, a);
  }
  const dle_op_info *info = dle_op_get_info(op);
  const char *fn = info->name;
  int first = op == DLE_OP_WHERE; /* where's condition is not promoted */
  if (op == DLE_OP_WHERE && ins[0]->dtype != DLE_BOOL)
    return dle_error("where: condition must be bool, got %s", dle_dtype_name(ins[0]->dtype));

  /* shape: broadcast of all inputs */
  int n = ins[0]->ndim;
  int64_t shape[DLE_MAX_DIMS];
  memcpy(shape, ins[0]->sizes, sizeof shape);
  for (int i = 1; i < nin; i++)
    if (!dle_shape_equal(n, shape, ins[i]->ndim, ins[i]->sizes))
      DLE_TRY(dle_broadcast_shapes(fn, n, shape, ins[i]->ndim, ins[i]->sizes, &n, shape));

  /* dtypes: promote, then the op's own rule */
  dle_dtype in_dt = ins[first]->dtype;
  for (int i = first + 1; i < nin; i++) in_dt = dle_promote(in_dt, ins[i]->dtype);
  if (identity_on_integers(op) && !dle_dtype_is_float(in_dt)) {
    if (!outs[0]) return dle_clone(&outs[0], ins[0]); /* already whole numbers */
    return dle_copy_(outs[0], ins[0]);
  }
  dle_dtype cdt = compute_dtype(op, in_dt, a);
  dle_dtype out_dt = bool_result(op)                                 ? DLE_BOOL
                     : op == DLE_OP_ABS && dle_dtype_is_complex(cdt) ? dle_real_of(cdt)
                                                                     : cdt;
  if (bool_result(op) && op != DLE_OP_LOGICAL_NOT) cdt = in_dt; /* logical_not reads bools */

  dle_tensor *cast[3] = {NULL, NULL, NULL};
  dle_tensor *result = NULL;
  dle_status st = DLE_OK;
  for (int i = 0; i < nin && st == DLE_OK; i++)
    st = dle_cast_if_needed(&cast[i], ins[i], i < first ? ins[i]->dtype : cdt);

  dle_tensor *given = outs[0];
  if (st == DLE_OK && given) {
    if (!dle_shape_equal(n, shape, given->ndim, given->sizes)) {
      char buf[128];
      st = dle_error("%s: result of shape %s cannot be written into an output of shape %s", fn,
                     dle_shape_str(buf, sizeof buf, n, shape), SHAPE(given));
    } else if (dle_tensor_overlaps_itself(given)) {
      char buf[128];
      st = dle_error(
          "%s: cannot write in place into an expanded tensor of shape %s (strides %s: "
          "several elements share memory); clone it first",
          fn, SHAPE(given), dle_shape_str(buf, sizeof buf, given->ndim, given->strides));
    } else if (!dle_can_store(out_dt, given->dtype)) {
      st = dle_error(
          "%s: the result's dtype %s cannot be written into an output of dtype %s "
          "(PyTorch's casting rule: no float into an integer, no number into bool); "
          "convert the output first, e.g. t = t:to(\"%s\")",
          fn, dle_dtype_name(out_dt), dle_dtype_name(given->dtype), dle_dtype_name(out_dt));
    } else if (given->dtype == out_dt) {
      result = given;
      dle_tensor_retain(result);
      for (int i = 0; i < nin && st == DLE_OK; i++) st = unalias(given, &cast[i]);
    }
  }
  if (st == DLE_OK && !result) {
    dle_device dev = dle_tensor_device(ins[0]);
    st = dle_tensor_empty(&result, n, shape, out_dt, dev);
  }
  if (st == DLE_OK) st = dle_dispatch(op, &result, 1, cast, nin, a);
  if (st == DLE_OK && given && result != given) st = dle_copy_(given, result); /* cast on store */
  for (int i = 0; i < nin; i++) dle_tensor_release(cast[i]);
  if (st != DLE_OK || given) {
    dle_tensor_release(result);
    return st;
  }
  outs[0] = result;
  return DLE_OK;
}

/* FLOPs: 1 per output element, whatever the function (comparisons and where too). */
dle_flops_rule dle_flops_elementwise(dle_op op) {
  (void)op;
  return dle_flops_per_out(1);
}

/* ---- public wrappers ---- */

dle_status dle_unary(dle_op op, dle_tensor **out, dle_tensor *x) {
  return dle_op_call(op, out, &x, 1, NULL);
}

dle_status dle_binary(dle_op op, dle_tensor **out, dle_tensor *a, dle_tensor *b) {
  dle_tensor *ins[2] = {a, b};
  return dle_op_call(op, out, ins, 2, NULL);
}

dle_status dle_scalar_tensor(dle_tensor **out, double v, dle_dtype dt) {
  *out = NULL;
  if (dt != DLE_F32 && dt != DLE_F64) return dle_full(out, 0, NULL, v, dt);
  /* float32/64 (every `x * 2` on float tensors) without the op machinery of dle_full */
  DLE_TRY(dle_tensor_empty(out, 0, NULL, dt, (dle_device){DLE_CPU, 0}));
  if (dt == DLE_F32)
    *(float *)dle_tensor_data(*out) = (float)v;
  else
    *(double *)dle_tensor_data(*out) = v;
  return DLE_OK;
}

dle_status dle_binary_scalar(dle_op op, dle_tensor **out, dle_tensor *t, double s,
                             bool scalar_first) {
  /* A number takes the tensor's dtype, so float32 stays float32; it only lifts an integer
   * tensor to float when it has a fraction, and a bool tensor to int64. */
  dle_dtype dt = t->dtype;
  if (dle_dtype_is_complex(dt))
    ; /* a real number is exact in the tensor's own complex dtype */
  else if (!dle_dtype_is_float(dt) && !(isfinite(s) && s == floor(s)))
    dt = DLE_DEFAULT_FLOAT; /* nan, inf too */
  else if (dt == DLE_BOOL && s != 0 && s != 1)
    dt = DLE_I64;
  dle_tensor *st = NULL;
  if (dle_tensor_device(t).type != DLE_CPU) {
    dle_tensor *host = NULL;
    DLE_TRY(dle_scalar_tensor(&host, s, dt));
    dle_status r = dle_to_device(&st, host, dle_tensor_device(t));
    dle_tensor_release(host);
    DLE_TRY(r);
  } else {
    DLE_TRY(dle_scalar_tensor(&st, s, dt));
  }
  dle_status r = scalar_first ? dle_binary(op, out, st, t) : dle_binary(op, out, t, st);
  dle_tensor_release(st);
  return r;
}

dle_status dle_pow_scalar(dle_tensor **out, dle_tensor *x, double p) {
  dle_attrs a = {0};
  a.f[0] = p;
  return dle_op_call(DLE_OP_POW_SCALAR, out, &x, 1, &a);
}

dle_status dle_clamp(dle_tensor **out, dle_tensor *x, double lo, double hi) {
  if (lo > hi) return dle_error("clamp: min %g is greater than max %g", lo, hi);
  dle_attrs a = {0};
  a.f[0] = lo != lo ? -INFINITY : lo;
  a.f[1] = hi != hi ? INFINITY : hi;
  return dle_op_call(DLE_OP_CLAMP, out, &x, 1, &a);
}

/* The largest finite value of a float dtype (nan_to_num's default for +inf). */
static double max_finite(dle_dtype dt) {
  switch (dt) {
    case DLE_F16: return 65504.0;
    case DLE_BF16: return 3.3895313892515355e38;
    case DLE_F32: return FLT_MAX;
    default: return DBL_MAX;
  }
}

dle_status dle_nan_to_num(dle_tensor **out, dle_tensor *x, double nan, double posinf,
                          double neginf) {
  dle_attrs a = {0};
  a.f[0] = nan;
  a.f[1] = posinf != posinf ? max_finite(x->dtype) : posinf;
  a.ints[0] = ew_bits_of_double(neginf != neginf ? -max_finite(x->dtype) : neginf);
  a.nints = 1;
  return dle_op_call(DLE_OP_NAN_TO_NUM, out, &x, 1, &a);
}

dle_status dle_where(dle_tensor **out, dle_tensor *cond, dle_tensor *a, dle_tensor *b) {
  dle_tensor *ins[3] = {cond, a, b};
  return dle_op_call(DLE_OP_WHERE, out, ins, 3, NULL);
}
