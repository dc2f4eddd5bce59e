/* elementwise_grad.c — reverse (vjp) and forward (jvp) rules of the elementwise ops (engine/ops/elementwise.c),
 * registered by dle_grad_register_elementwise (engine/ops/families.def). */
#include "../autograd.h"
#include "../internal.h"

#include <stdlib.h>

/* ---- gradients: reverse (vjp) and forward (jvp) rules, written with dle ops ---- */

/* A forward rule runs after its op: an input that the op overwrote in place (x:sin_()) no longer
 * holds the value the tangent needs, so reading it (bit i of `reads`) is an error, not a wrong
 * tangent. */
static dle_status inputs_intact(dle_op op, dle_tensor *const *ins, int nin, unsigned reads,
                                dle_tensor *out) {
  for (int i = 0; i < nin; i++)
    if ((reads & DLE_SAVE(i)) && dle_same_storage(ins[i], out))
      return dle_error(
          "%s_: forward-mode AD of this in-place op needs the value of input %d that "
          "it overwrote; use the out-of-place %s",
          dle_op_get_info(op)->name, i + 1, dle_op_get_info(op)->name);
  return DLE_OK;
}

static dle_status vjp_add_sub(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  for (int i = 0; i < 2; i++) {
    if (!dle_node_needs_grad(n, i)) continue;
    DLE_TRY(dle_grad_to_input(n, i, gout[0], gin));
    if (i == 1 && dle_node_op(n) == DLE_OP_SUB) {
      dle_tensor *neg = NULL;
      dle_status st = dle_unary(DLE_OP_NEG, &neg, gin[1]);
      dle_tensor_release(gin[1]);
      gin[1] = neg;
      DLE_TRY(st);
    }
  }
  return DLE_OK;
}

DLE_JVP_RULE(jvp_add_sub) {
  if (tin[0] && tin[1]) return dle_binary(op, &tout[0], tin[0], tin[1]);
  if (tin[0]) { /* broadcast to the output's shape by the engine */
    dle_tensor_retain(tin[0]);
    tout[0] = tin[0];
    return DLE_OK;
  }
  if (op == DLE_OP_SUB) return dle_unary(DLE_OP_NEG, &tout[0], tin[1]);
  dle_tensor_retain(tin[1]);
  tout[0] = tin[1];
  return DLE_OK;
}

/* Reverse rules multiply by the conjugate of a complex local derivative (PyTorch's convention,
 * docs/complex_fft.md): *out = g * conj(f), or g / conj(f) when divide. Real f: g * f. */
static dle_status times_conj(dle_tensor **out, dle_tensor *g, dle_tensor *f, bool divide) {
  dle_tensor *c = NULL;
  DLE_TRY(dle_conj(&c, f));
  dle_status st = dle_binary(divide ? DLE_OP_DIV : DLE_OP_MUL, out, g, c);
  dle_tensor_release(c);
  return st;
}

/* d(a*b) = b da + a db: backwards g conj(b), g conj(a) */
static dle_status vjp_mul(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  for (int i = 0; i < 2; i++) {
    if (!dle_node_needs_grad(n, i)) continue;
    dle_tensor *prod = NULL;
    DLE_TRY(times_conj(&prod, gout[0], dle_node_input(n, 1 - i), false));
    dle_status st = dle_grad_to_input(n, i, prod, gin);
    dle_tensor_release(prod);
    DLE_TRY(st);
  }
  return DLE_OK;
}

DLE_JVP_RULE(jvp_mul) {
  DLE_TRY(inputs_intact(op, ins, nin, (tin[0] ? DLE_SAVE(1) : 0) | (tin[1] ? DLE_SAVE(0) : 0),
                        outs[0]));
  return dle_jvp_bilinear(DLE_OP_MUL, NULL, ins[0], ins[1], tin[0], tin[1], &tout[0]);
}

static dle_status vjp_neg(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  (void)n;
  return dle_unary(DLE_OP_NEG, &gin[0], gout[0]);
}

DLE_JVP_RULE(jvp_neg) { return dle_unary(DLE_OP_NEG, &tout[0], tin[0]); }

/* d exp(x) = exp(x) dx: the saved output, no recomputation */
static dle_status vjp_exp(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  return times_conj(&gin[0], gout[0], dle_node_output(n, 0), false);
}

DLE_JVP_RULE(jvp_exp) { return dle_binary(DLE_OP_MUL, &tout[0], tin[0], outs[0]); }

/* d gelu = gelu'(x) dx: one pass of the fused gelu_backward(x, g) = g gelu'(x), not gelu_grad
 * then a multiply (nor the ~30 full-size passes of a composite of dle ops); gelu_backward is
 * differentiable in turn (d_gelu_backward below), so double backward works. */
static dle_status vjp_gelu(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  return dle_binary(DLE_OP_GELU_BACKWARD, &gin[0], dle_node_input(n, 0), gout[0]);
}

DLE_JVP_RULE(jvp_gelu) {
  DLE_TRY(inputs_intact(op, ins, nin, DLE_SAVE(0), outs[0]));
  return dle_binary(DLE_OP_GELU_BACKWARD, &tout[0], ins[0], tin[0]);
}

/* ---- helpers: accumulate a chain of ops in *acc (the old value is released; NULL on error) ---- */

static dle_status chain(dle_op op, dle_tensor **acc, dle_tensor *b) {
  dle_tensor *r = NULL;
  dle_status st = dle_binary(op, &r, *acc, b);
  dle_tensor_release(*acc);
  *acc = r;
  return st;
}

/* *acc = *acc op s (or s op *acc when scalar_first) */
static dle_status chain_s(dle_op op, dle_tensor **acc, double s, bool scalar_first) {
  dle_tensor *r = NULL;
  dle_status st = dle_binary_scalar(op, &r, *acc, s, scalar_first);
  dle_tensor_release(*acc);
  *acc = r;
  return st;
}

static dle_status chain_u(dle_op op, dle_tensor **acc) {
  dle_tensor *r = NULL;
  dle_status st = dle_unary(op, &r, *acc);
  dle_tensor_release(*acc);
  *acc = r;
  return st;
}

/* A 0-dim tensor holding v, of dtype dt, on like's device. */
static dle_status scalar_like(dle_tensor **out, double v, dle_dtype dt, dle_tensor *like) {
  dle_tensor *host = NULL;
  *out = NULL;
  DLE_TRY(dle_scalar_tensor(&host, v, dt));
  if (dle_tensor_device(like).type == DLE_CPU) {
    *out = host;
    return DLE_OK;
  }
  dle_status st = dle_to_device(out, host, dle_tensor_device(like));
  dle_tensor_release(host);
  return st;
}

/* ---- unary ops: gin = gout * f and tout = tin * f with the local derivative f(x, y) (or
 * gout / f when the rule divides: log, log1p, sqrt), x the input and y the output ---- */

typedef dle_status (*deriv_fn)(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a);

/* d |x| = sign(x) dx  (0 at 0, like PyTorch). Complex z: f = conj(z) / |z| (0 at 0), so the
 * reverse rule gives g z / |z| (PyTorch's g * sgn(z)) and the forward one Re(t conj(z)) / |z|
 * (the engine keeps the real part of the tangent of the real result). */
static dle_status d_abs(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y, (void)a;
  if (!dle_dtype_is_complex(x->dtype)) return dle_unary(DLE_OP_SIGN, d, x);
  dle_tensor *r = NULL, *zero = NULL, *c = NULL, *q = NULL;
  dle_status st = dle_unary(DLE_OP_ABS, &r, x);
  if (st == DLE_OK) st = dle_binary_scalar(DLE_OP_EQ, &zero, r, 0, false);
  if (st == DLE_OK) st = dle_conj(&c, x);
  if (st == DLE_OK) st = dle_binary(DLE_OP_DIV, &q, c, r);
  if (st == DLE_OK) {
    dle_tensor *z0 = NULL;
    st = scalar_like(&z0, 0, q->dtype, q);
    if (st == DLE_OK) st = dle_where(d, zero, z0, q);
    dle_tensor_release(z0);
  }
  dle_tensor *tmp[] = {r, zero, c, q};
  dle_release_all(tmp, 4);
  return st;
}

/* d log x = dx / x */
static dle_status d_log(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y, (void)a;
  dle_tensor_retain(x);
  *d = x;
  return DLE_OK;
}

/* d x^(-1/2) = -1/2 y^3 dx */
static dle_status d_rsqrt(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)x, (void)a;
  DLE_TRY(dle_binary(DLE_OP_MUL, d, y, y));
  DLE_TRY(chain(DLE_OP_MUL, d, y));
  return chain_s(DLE_OP_MUL, d, -0.5, false);
}

/* d (1/x) = -y^2 dx */
static dle_status d_reciprocal(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)x, (void)a;
  DLE_TRY(dle_binary(DLE_OP_MUL, d, y, y));
  return chain_u(DLE_OP_NEG, d);
}

/* d sin x = cos x dx */
static dle_status d_sin(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y, (void)a;
  return dle_unary(DLE_OP_COS, d, x);
}

/* d cos x = -sin x dx */
static dle_status d_cos(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y, (void)a;
  DLE_TRY(dle_unary(DLE_OP_SIN, d, x));
  return chain_u(DLE_OP_NEG, d);
}

/* d tanh = (1 - tanh^2) dx */
static dle_status d_tanh(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)x, (void)a;
  DLE_TRY(dle_binary(DLE_OP_MUL, d, y, y));
  return chain_s(DLE_OP_SUB, d, 1, true);
}

/* d sigmoid = s (1 - s) dx, s the saved output (no overflow at large |x|) */
static dle_status d_sigmoid(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)x, (void)a;
  DLE_TRY(dle_binary_scalar(DLE_OP_SUB, d, y, 1, true));
  return chain(DLE_OP_MUL, d, y);
}

/* d gelu'(x) = gelu''(x) dx = (2 - x^2) phi(x) dx, phi(x) = exp(-x^2 / 2) / sqrt(2 pi) (only
 * double backward through gelu runs this, so plain dle ops are fine) */
static dle_status d_gelu_grad(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y, (void)a;
  dle_tensor *z = NULL, *pdf = NULL;
  dle_status st = dle_binary(DLE_OP_MUL, &z, x, x);
  if (st == DLE_OK) st = dle_binary_scalar(DLE_OP_MUL, &pdf, z, -0.5, false);
  if (st == DLE_OK) st = chain_u(DLE_OP_EXP, &pdf);
  if (st == DLE_OK) st = chain_s(DLE_OP_MUL, &pdf, 0.39894228040143267794, false);
  if (st == DLE_OK) st = dle_binary_scalar(DLE_OP_SUB, d, z, 2, true);
  if (st == DLE_OK) st = chain(DLE_OP_MUL, d, pdf);
  dle_release_all((dle_tensor *[]){z, pdf}, 2);
  return st;
}

/* d silu = s (1 + x (1 - s)) dx, s = sigmoid(x) */
static dle_status d_silu(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y, (void)a;
  dle_tensor *s = NULL;
  DLE_TRY(dle_unary(DLE_OP_SIGMOID, &s, x));
  dle_status st = dle_binary_scalar(DLE_OP_SUB, d, s, 1, true);
  if (st == DLE_OK) st = chain(DLE_OP_MUL, d, x);
  if (st == DLE_OK) st = chain_s(DLE_OP_ADD, d, 1, false);
  if (st == DLE_OK) st = chain(DLE_OP_MUL, d, s);
  dle_tensor_release(s);
  return st;
}

/* d x^p = p x^(p-1) dx  (zero for p = 0, like PyTorch) */
static dle_status d_pow_scalar(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y;
  double p = a->f[0];
  if (p == 0) return DLE_OK; /* *d stays NULL: zero */
  if (p == 1) return scalar_like(d, 1, x->dtype, x);
  DLE_TRY(dle_pow_scalar(d, x, p - 1));
  return chain_s(DLE_OP_MUL, d, p, false);
}

/* d clamp(x, lo, hi) = [lo <= x <= hi] dx  (the bounds pass the gradient, like PyTorch) */
static dle_status d_clamp(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y;
  dle_tensor *hi = NULL;
  DLE_TRY(dle_binary_scalar(DLE_OP_GE, d, x, a->f[0], false));
  dle_status st = dle_binary_scalar(DLE_OP_LE, &hi, x, a->f[1], false);
  if (st == DLE_OK) st = chain(DLE_OP_MUL, d, hi); /* bool * bool: 0/1 */
  dle_tensor_release(hi);
  return st;
}

/* *d = s x^2 + c (the derivatives of the inverse trigonometric and hyperbolic functions) */
static dle_status square_affine(dle_tensor **d, dle_tensor *x, double s, double c) {
  DLE_TRY(dle_binary(DLE_OP_MUL, d, x, x));
  if (s != 1) DLE_TRY(chain_s(DLE_OP_MUL, d, s, false));
  return chain_s(DLE_OP_ADD, d, c, false);
}

/* d tan x = (1 + tan^2 x) dx */
static dle_status d_tan(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)x, (void)a;
  return square_affine(d, y, 1, 1);
}

/* d asin x = dx / sqrt(1 - x^2); d acos x = dx / -sqrt(1 - x^2) */
static dle_status d_asin(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y, (void)a;
  DLE_TRY(square_affine(d, x, -1, 1));
  return chain_u(DLE_OP_SQRT, d);
}

static dle_status d_acos(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  DLE_TRY(d_asin(d, x, y, a));
  return chain_u(DLE_OP_NEG, d);
}

/* d atan x = dx / (1 + x^2) */
static dle_status d_atan(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y, (void)a;
  return square_affine(d, x, 1, 1);
}

/* d sinh x = cosh x dx; d cosh x = sinh x dx */
static dle_status d_sinh(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y, (void)a;
  return dle_unary(DLE_OP_COSH, d, x);
}

static dle_status d_cosh(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y, (void)a;
  return dle_unary(DLE_OP_SINH, d, x);
}

/* d asinh x = dx / sqrt(x^2 + 1); d acosh x = dx / sqrt(x^2 - 1) */
static dle_status d_asinh(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y, (void)a;
  DLE_TRY(square_affine(d, x, 1, 1));
  return chain_u(DLE_OP_SQRT, d);
}

static dle_status d_acosh(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y, (void)a;
  DLE_TRY(square_affine(d, x, 1, -1));
  return chain_u(DLE_OP_SQRT, d);
}

/* d atanh x = dx / (1 - x^2) */
static dle_status d_atanh(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y, (void)a;
  return square_affine(d, x, -1, 1);
}

/* d erf x = 2/sqrt(pi) exp(-x^2) dx; erfc the negative */
static dle_status d_erf(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y, (void)a;
  DLE_TRY(square_affine(d, x, -1, 0));
  DLE_TRY(chain_u(DLE_OP_EXP, d));
  return chain_s(DLE_OP_MUL, d, 1.12837916709551257390, false);
}

static dle_status d_erfc(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  DLE_TRY(d_erf(d, x, y, a));
  return chain_u(DLE_OP_NEG, d);
}

/* d erfinv x = sqrt(pi)/2 exp(y^2) dx, y = erfinv(x) */
static dle_status d_erfinv(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)x, (void)a;
  DLE_TRY(square_affine(d, y, 1, 0));
  DLE_TRY(chain_u(DLE_OP_EXP, d));
  return chain_s(DLE_OP_MUL, d, 0.88622692545275801365, false);
}

/* d frac x = dx (trunc is piecewise constant) */
static dle_status d_frac(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y, (void)a;
  return scalar_like(d, 1, x->dtype, x);
}

/* d nan_to_num x = [x finite] dx (PyTorch's rule; a bool mask) */
static dle_status d_nan_to_num(dle_tensor **d, dle_tensor *x, dle_tensor *y, const dle_attrs *a) {
  (void)y, (void)a;
  return dle_unary(DLE_OP_ISFINITE, d, x);
}

typedef struct {
  deriv_fn deriv; /* NULL (and not by_scalar): the gradient is zero (sign) */
  bool divide;    /* gout / f instead of gout * f */
  unsigned save_inputs;
  bool save_outputs;
  /* instead of deriv, f = scalar_op(v, c) with v the output when the rule saves it, else the
   * input */
  bool by_scalar;
  dle_op scalar_op;
  double c;
} unary_rule;

/* f = v op c (see unary_rule) */
#define BY_SCALAR(sop, k) .by_scalar = true, .scalar_op = DLE_OP_##sop, .c = (k)
#define LN2               0.69314718055994530942

static const unary_rule unary_rules[DLE_NUM_OPS] = {
    [DLE_OP_ABS] = {d_abs, false, DLE_SAVE(0), false},
    [DLE_OP_SIGN] = {NULL, false, 0, false},
    [DLE_OP_LOG] = {d_log, true, DLE_SAVE(0), false},
    /* d expm1(x) = (expm1(x) + 1) dx */
    [DLE_OP_EXPM1] = {.save_outputs = true, BY_SCALAR(ADD, 1)},
    /* d log1p(x) = dx / (1 + x) */
    [DLE_OP_LOG1P] = {.divide = true, .save_inputs = DLE_SAVE(0), BY_SCALAR(ADD, 1)},
    /* d sqrt(x) = dx / (2 sqrt(x))  (inf at 0) */
    [DLE_OP_SQRT] = {.divide = true, .save_outputs = true, BY_SCALAR(MUL, 2)},
    [DLE_OP_RSQRT] = {d_rsqrt, false, 0, true},
    [DLE_OP_RECIPROCAL] = {d_reciprocal, false, 0, true},
    [DLE_OP_SIN] = {d_sin, false, DLE_SAVE(0), false},
    [DLE_OP_COS] = {d_cos, false, DLE_SAVE(0), false},
    [DLE_OP_TANH] = {d_tanh, false, 0, true},
    [DLE_OP_SIGMOID] = {d_sigmoid, false, 0, true},
    /* d relu = [y > 0] dx  (0 at 0, like PyTorch); a bool mask */
    [DLE_OP_RELU] = {.save_outputs = true, BY_SCALAR(GT, 0)},
    [DLE_OP_GELU_GRAD] = {d_gelu_grad, false, DLE_SAVE(0), false},
    [DLE_OP_SILU] = {d_silu, false, DLE_SAVE(0), false},
    [DLE_OP_POW_SCALAR] = {d_pow_scalar, false, DLE_SAVE(0), false},
    [DLE_OP_CLAMP] = {d_clamp, false, DLE_SAVE(0), false},
    [DLE_OP_TAN] = {d_tan, false, 0, true},
    [DLE_OP_ASIN] = {d_asin, true, DLE_SAVE(0), false},
    [DLE_OP_ACOS] = {d_acos, true, DLE_SAVE(0), false},
    [DLE_OP_ATAN] = {d_atan, true, DLE_SAVE(0), false},
    [DLE_OP_SINH] = {d_sinh, false, DLE_SAVE(0), false},
    [DLE_OP_COSH] = {d_cosh, false, DLE_SAVE(0), false},
    [DLE_OP_ASINH] = {d_asinh, true, DLE_SAVE(0), false},
    [DLE_OP_ACOSH] = {d_acosh, true, DLE_SAVE(0), false},
    [DLE_OP_ATANH] = {d_atanh, true, DLE_SAVE(0), false},
    [DLE_OP_ERF] = {d_erf, false, DLE_SAVE(0), false},
    [DLE_OP_ERFC] = {d_erfc, false, DLE_SAVE(0), false},
    [DLE_OP_ERFINV] = {d_erfinv, false, 0, true},
    /* d log2 x = dx / (x ln 2); d log10 x = dx / (x ln 10) */
    [DLE_OP_LOG2] = {.divide = true, .save_inputs = DLE_SAVE(0), BY_SCALAR(MUL, LN2)},
    [DLE_OP_LOG10] = {.divide = true,
                      .save_inputs = DLE_SAVE(0),
                      BY_SCALAR(MUL, 2.30258509299404568402)},
    /* d 2^x = 2^x ln 2 dx */
    [DLE_OP_EXP2] = {.save_outputs = true, BY_SCALAR(MUL, LN2)},
    [DLE_OP_FRAC] = {d_frac, false, DLE_SAVE(0), false},
    [DLE_OP_NAN_TO_NUM] = {d_nan_to_num, false, DLE_SAVE(0), false},
};

/* g * f (or g / f) for the unary op's local derivative f at (x, y); NULL result means zero.
 * Reverse: g * conj(f) (times_conj). */
static dle_status apply_unary(dle_op op, dle_tensor **out, dle_tensor *g, dle_tensor *x,
                              dle_tensor *y, const dle_attrs *a, bool reverse) {
  const unary_rule *u = &unary_rules[op];
  if (!g || (!u->deriv && !u->by_scalar)) return DLE_OK;
  dle_tensor *f = NULL;
  if (u->by_scalar)
    DLE_TRY(dle_binary_scalar(u->scalar_op, &f, u->save_outputs ? y : x, u->c, false));
  else
    DLE_TRY(u->deriv(&f, x, y, a));
  if (!f) return DLE_OK;
  dle_status st = reverse ? times_conj(out, g, f, u->divide)
                          : dle_binary(u->divide ? DLE_OP_DIV : DLE_OP_MUL, out, g, f);
  dle_tensor_release(f);
  return st;
}

static dle_status vjp_unary(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  return apply_unary(dle_node_op(n), &gin[0], gout[0], dle_node_input(n, 0), dle_node_output(n, 0),
                     dle_node_attrs(n), true);
}

DLE_JVP_RULE(jvp_unary) {
  DLE_TRY(inputs_intact(op, ins, nin, unary_rules[op].save_inputs, outs[0]));
  return apply_unary(op, &tout[0], tin[0], ins[0], outs[0], a, false);
}

/* ---- binary ops: local derivatives fa = dy/da, fb = dy/db (only those asked for), then
 * gin = sum_to(gout * f) and tout = ta * fa + tb * fb ---- */

/* Defines a binary op's local derivatives: `BINARY_DERIV(d_foo) { ... }` has the parameters
 * (fa, fb, a, b, y) that binary_derivs passes. A rule may leave any of them unused (the build
 * passes -Wno-unused-parameter). */
#define BINARY_DERIV(name)                                                               \
  static dle_status name(dle_tensor **fa, dle_tensor **fb, dle_tensor *a, dle_tensor *b, \
                         dle_tensor *y)

/* d(a/b) = da / b - y db / b */
BINARY_DERIV(d_div) {
  if (fa && dle_dtype_is_complex(b->dtype)) /* reciprocal has no complex kernel */
    DLE_TRY(dle_binary_scalar(DLE_OP_DIV, fa, b, 1, true));
  else if (fa)
    DLE_TRY(dle_unary(DLE_OP_RECIPROCAL, fa, b));
  if (fb) {
    DLE_TRY(dle_binary(DLE_OP_DIV, fb, y, b));
    DLE_TRY(chain_u(DLE_OP_NEG, fb));
  }
  return DLE_OK;
}

/* d a^b = b a^(b-1) da + a^b log(a) db  (each term 0 where b = 0, resp. a = 0, like PyTorch) */
BINARY_DERIV(d_pow) {
  dle_dtype dt = y->dtype;
  dle_tensor *zero = NULL, *mask = NULL, *v = NULL;
  dle_status st = scalar_like(&zero, 0, dt, y);
  if (st == DLE_OK && fa) {
    st = dle_binary_scalar(DLE_OP_SUB, &v, b, 1, false);
    if (st == DLE_OK) {
      dle_tensor *p = NULL;
      st = dle_binary(DLE_OP_POW, &p, a, v);
      dle_tensor_release(v);
      v = p;
    }
    if (st == DLE_OK) st = chain(DLE_OP_MUL, &v, b);
    if (st == DLE_OK) st = dle_binary_scalar(DLE_OP_EQ, &mask, b, 0, false);
    if (st == DLE_OK) st = dle_where(fa, mask, zero, v);
    DLE_RELEASE(mask);
    DLE_RELEASE(v);
  }
  if (st == DLE_OK && fb) {
    st = dle_unary(DLE_OP_LOG, &v, a);
    if (st == DLE_OK) st = chain(DLE_OP_MUL, &v, y);
    if (st == DLE_OK) st = dle_binary_scalar(DLE_OP_EQ, &mask, a, 0, false);
    if (st == DLE_OK) st = dle_where(fb, mask, zero, v);
    DLE_RELEASE(mask);
    DLE_RELEASE(v);
  }
  dle_tensor_release(zero);
  return st;
}

/* [a cmp b] + tie (tie NULL: none), as dtype dt */
static dle_status side_weight(dle_tensor **w, dle_op cmp, dle_tensor *a, dle_tensor *b,
                              dle_tensor *tie, dle_dtype dt) {
  dle_tensor *m = NULL;
  DLE_TRY(dle_binary(cmp, &m, a, b));
  dle_status st = dle_to_dtype(w, m, dt);
  dle_tensor_release(m);
  if (st == DLE_OK && tie) st = chain(DLE_OP_ADD, w, tie);
  return st;
}

/* d max(a, b) = [a > b] da + [a < b] db, ties split evenly (1/2 each, like PyTorch); min the
 * same with the comparisons swapped */
static dle_status d_maxmin(bool is_max, dle_tensor **fa, dle_tensor **fb, dle_tensor *a,
                           dle_tensor *b, dle_tensor *y) {
  (void)y; /* not saved: the weights take the dtype the op computed in */
  dle_dtype dt = dle_promote(a->dtype, b->dtype);
  dle_tensor *eq = NULL, *tie = NULL;
  DLE_TRY(dle_binary(DLE_OP_EQ, &eq, a, b));
  dle_status st = dle_to_dtype(&tie, eq, dt);
  dle_tensor_release(eq);
  if (st == DLE_OK) st = chain_s(DLE_OP_MUL, &tie, 0.5, false);
  if (st == DLE_OK && fa) st = side_weight(fa, is_max ? DLE_OP_GT : DLE_OP_LT, a, b, tie, dt);
  if (st == DLE_OK && fb) st = side_weight(fb, is_max ? DLE_OP_LT : DLE_OP_GT, a, b, tie, dt);
  dle_tensor_release(tie);
  return st;
}

/* d (g gelu'(x)) = g gelu''(x) dx + gelu'(x) dg */
static dle_status d_gelu_backward(dle_tensor **fa, dle_tensor **fb, dle_tensor *x, dle_tensor *g,
                                  dle_tensor *y) {
  (void)y;
  if (fa) {
    DLE_TRY(d_gelu_grad(fa, x, NULL, NULL));
    DLE_TRY(chain(DLE_OP_MUL, fa, g));
  }
  if (fb) DLE_TRY(dle_unary(DLE_OP_GELU_GRAD, fb, x));
  return DLE_OK;
}

/* d atan2(a, b) = (b da - a db) / (a^2 + b^2) */
BINARY_DERIV(d_atan2) {
  dle_tensor *r = NULL, *bb = NULL;
  dle_status st = dle_binary(DLE_OP_MUL, &r, a, a);
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, &bb, b, b);
  if (st == DLE_OK) st = chain(DLE_OP_ADD, &r, bb);
  if (st == DLE_OK && fa) st = dle_binary(DLE_OP_DIV, fa, b, r);
  if (st == DLE_OK && fb) st = dle_binary(DLE_OP_DIV, fb, a, r);
  if (st == DLE_OK && fb) st = chain_u(DLE_OP_NEG, fb);
  dle_release_all((dle_tensor *[]){r, bb}, 2);
  return st;
}

/* d hypot(a, b) = (a da + b db) / y */
BINARY_DERIV(d_hypot) {
  if (fa) DLE_TRY(dle_binary(DLE_OP_DIV, fa, a, y));
  if (fb) DLE_TRY(dle_binary(DLE_OP_DIV, fb, b, y));
  return DLE_OK;
}

/* d logaddexp(a, b) = exp(a - y) da + exp(b - y) db */
BINARY_DERIV(d_logaddexp) {
  if (fa) {
    DLE_TRY(dle_binary(DLE_OP_SUB, fa, a, y));
    DLE_TRY(chain_u(DLE_OP_EXP, fa));
  }
  if (fb) {
    DLE_TRY(dle_binary(DLE_OP_SUB, fb, b, y));
    DLE_TRY(chain_u(DLE_OP_EXP, fb));
  }
  return DLE_OK;
}

/* d copysign(a, b) = y / a da (0 at a = 0, like PyTorch); nothing flows to b */
BINARY_DERIV(d_copysign) {
  dle_tensor *zero = NULL, *q = NULL, *mask = NULL;
  dle_status st = scalar_like(&zero, 0, y->dtype, y);
  if (st == DLE_OK && fb) st = scalar_like(fb, 0, y->dtype, y);
  if (st == DLE_OK && fa) st = dle_binary(DLE_OP_DIV, &q, y, a);
  if (st == DLE_OK && fa) st = dle_binary_scalar(DLE_OP_EQ, &mask, a, 0, false);
  if (st == DLE_OK && fa) st = dle_where(fa, mask, zero, q);
  dle_release_all((dle_tensor *[]){zero, q, mask}, 3);
  return st;
}

/* d fmod(a, b) = da - trunc(a / b) db; d remainder(a, b) = da - floor(a / b) db */
static dle_status d_fmod_remainder(dle_op rounding, dle_tensor **fa, dle_tensor **fb, dle_tensor *a,
                                   dle_tensor *b, dle_tensor *y) {
  (void)y; /* not saved */
  if (fa) DLE_TRY(scalar_like(fa, 1, a->dtype, a));
  if (fb) {
    DLE_TRY(dle_binary(DLE_OP_DIV, fb, a, b));
    DLE_TRY(chain_u(rounding, fb));
    DLE_TRY(chain_u(DLE_OP_NEG, fb));
  }
  return DLE_OK;
}

BINARY_DERIV(d_fmod) { return d_fmod_remainder(DLE_OP_TRUNC, fa, fb, a, b, y); }

BINARY_DERIV(d_remainder) { return d_fmod_remainder(DLE_OP_FLOOR, fa, fb, a, b, y); }

/* fmax/fmin: all of the gradient to a where a wins or ties, or b is NaN (PyTorch's rule), the
 * rest to b */
static dle_status d_fmaxmin(bool is_max, dle_tensor **fa, dle_tensor **fb, dle_tensor *a,
                            dle_tensor *b, dle_tensor *y) {
  (void)y; /* not saved */
  dle_dtype dt = a->dtype;
  dle_tensor *isnan_b = NULL, *nan = NULL, *wa = NULL;
  dle_status st = dle_unary(DLE_OP_ISNAN, &isnan_b, b);
  if (st == DLE_OK) st = dle_to_dtype(&nan, isnan_b, dt);
  /* [a wins] + [b NaN]: never both, as a comparison with NaN is false */
  if (st == DLE_OK) st = side_weight(&wa, is_max ? DLE_OP_GE : DLE_OP_LE, a, b, nan, dt);
  if (st == DLE_OK && fb) st = dle_binary_scalar(DLE_OP_SUB, fb, wa, 1, true);
  if (st == DLE_OK && fa) {
    *fa = wa;
    wa = NULL;
  }
  dle_release_all((dle_tensor *[]){isnan_b, nan, wa}, 3);
  return st;
}

/* The local derivatives of the binary op (only those asked for). */
static dle_status binary_derivs(dle_op op, dle_tensor **fa, dle_tensor **fb, dle_tensor *a,
                                dle_tensor *b, dle_tensor *y) {
  switch (op) {
    case DLE_OP_GELU_BACKWARD: return d_gelu_backward(fa, fb, a, b, y);
    case DLE_OP_DIV: return d_div(fa, fb, a, b, y);
    case DLE_OP_POW: return d_pow(fa, fb, a, b, y);
    case DLE_OP_MAXIMUM: return d_maxmin(true, fa, fb, a, b, y);
    case DLE_OP_ATAN2: return d_atan2(fa, fb, a, b, y);
    case DLE_OP_HYPOT: return d_hypot(fa, fb, a, b, y);
    case DLE_OP_LOGADDEXP: return d_logaddexp(fa, fb, a, b, y);
    case DLE_OP_COPYSIGN: return d_copysign(fa, fb, a, b, y);
    case DLE_OP_FMOD: return d_fmod(fa, fb, a, b, y);
    case DLE_OP_REMAINDER: return d_remainder(fa, fb, a, b, y);
    case DLE_OP_FMAX: return d_fmaxmin(true, fa, fb, a, b, y);
    case DLE_OP_FMIN: return d_fmaxmin(false, fa, fb, a, b, y);
    default: return d_maxmin(false, fa, fb, a, b, y); /* minimum */
  }
}

/* The local derivatives, computed in the dtype the op computed in (an int64 divisor or base
 * would otherwise make reciprocal/log compute in the default float and lose precision). */
static dle_status local_derivs(dle_op op, dle_dtype dt, dle_tensor **fa, dle_tensor **fb,
                               dle_tensor *a, dle_tensor *b, dle_tensor *y) {
  dle_tensor *ca = NULL, *cb = NULL; /* a, b: NULL when the rule does not read them */
  dle_status st = a ? dle_cast_if_needed(&ca, a, dt) : DLE_OK;
  if (st == DLE_OK && b) st = dle_cast_if_needed(&cb, b, dt);
  if (st == DLE_OK) st = binary_derivs(op, fa, fb, ca, cb, y);
  dle_release_all((dle_tensor *[]){ca, cb}, 2);
  return st;
}

static dle_status vjp_binary(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  dle_tensor *f[2] = {NULL, NULL};
  bool need[2] = {dle_node_needs_grad(n, 0), dle_node_needs_grad(n, 1)};
  dle_dtype dt = dle_promote(dle_node_input_dtype(n, 0), dle_node_input_dtype(n, 1));
  dle_status st = local_derivs(dle_node_op(n), dt, need[0] ? &f[0] : NULL, need[1] ? &f[1] : NULL,
                               dle_node_input(n, 0), dle_node_input(n, 1), dle_node_output(n, 0));
  for (int i = 0; i < 2 && st == DLE_OK; i++) {
    if (!need[i]) continue;
    dle_tensor *p = NULL;
    st = times_conj(&p, gout[0], f[i], false);
    if (st == DLE_OK) st = dle_grad_to_input(n, i, p, gin);
    dle_tensor_release(p);
  }
  dle_release_all(f, 2);
  return st;
}

DLE_JVP_RULE(jvp_binary) {
  DLE_TRY(inputs_intact(op, ins, nin, dle_grad_rule_of(op)->save_inputs, outs[0]));
  dle_tensor *f[2] = {NULL, NULL};
  dle_status st = local_derivs(op, dle_promote(ins[0]->dtype, ins[1]->dtype), tin[0] ? &f[0] : NULL,
                               tin[1] ? &f[1] : NULL, ins[0], ins[1], outs[0]);
  for (int i = 0; i < 2 && st == DLE_OK; i++) {
    if (!tin[i]) continue;
    if (!tout[0])
      st = dle_binary(DLE_OP_MUL, &tout[0], tin[i], f[i]);
    else {
      dle_tensor *p = NULL;
      st = dle_binary(DLE_OP_MUL, &p, tin[i], f[i]);
      if (st == DLE_OK) st = chain(DLE_OP_ADD, &tout[0], p);
      dle_tensor_release(p);
    }
  }
  dle_release_all(f, 2);
  return st;
}

/* ---- where(cond, a, b): the gradient goes to a where cond holds, to b elsewhere; none to cond ---- */

/* where(cond, g, 0) (side 0) or where(cond, 0, g) (side 1); g NULL: zero */
static dle_status masked(dle_tensor **out, dle_tensor *cond, dle_tensor *g, int side,
                         dle_tensor *zero) {
  return side == 0 ? dle_where(out, cond, g, zero) : dle_where(out, cond, zero, g);
}

static dle_status vjp_where(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  dle_tensor *zero = NULL;
  DLE_TRY(scalar_like(&zero, 0, gout[0]->dtype, gout[0]));
  dle_status st = DLE_OK;
  for (int i = 1; i < 3 && st == DLE_OK; i++) {
    if (!dle_node_needs_grad(n, i)) continue;
    dle_tensor *m = NULL;
    st = masked(&m, dle_node_input(n, 0), gout[0], i - 1, zero);
    if (st == DLE_OK) st = dle_grad_to_input(n, i, m, gin);
    dle_tensor_release(m);
  }
  dle_tensor_release(zero);
  return st;
}

DLE_JVP_RULE(jvp_where) {
  dle_tensor *zero = NULL;
  DLE_TRY(scalar_like(&zero, 0, outs[0]->dtype, outs[0]));
  dle_status st = dle_where(&tout[0], ins[0], tin[1] ? tin[1] : zero, tin[2] ? tin[2] : zero);
  dle_tensor_release(zero);
  return st;
}

void dle_grad_register_elementwise(dle_grad_rule *r) {
  r[DLE_OP_ADD] = (dle_grad_rule){vjp_add_sub, jvp_add_sub, 0, false};
  r[DLE_OP_SUB] = (dle_grad_rule){vjp_add_sub, jvp_add_sub, 0, false};
  r[DLE_OP_MUL] = (dle_grad_rule){vjp_mul, jvp_mul, DLE_SAVE(0) | DLE_SAVE(1), false};
  r[DLE_OP_NEG] = (dle_grad_rule){vjp_neg, jvp_neg, 0, false};
  r[DLE_OP_EXP] = (dle_grad_rule){vjp_exp, jvp_exp, 0, true};
  r[DLE_OP_GELU] = (dle_grad_rule){vjp_gelu, jvp_gelu, DLE_SAVE(0), false};
  for (int op = 0; op < DLE_NUM_OPS; op++)
    if (dle_op_get_info((dle_op)op)->kind == DLE_KIND_UNARY && !r[op].vjp &&
        (dle_op_get_info((dle_op)op)->flags & DLE_DIFF)) {
      const unary_rule *u = &unary_rules[op];
      r[op] = (dle_grad_rule){vjp_unary, jvp_unary, u->save_inputs, u->save_outputs};
    }
  /* div reads b and y; pow reads a, b and y; maximum/minimum compare a with b */
  r[DLE_OP_DIV] = (dle_grad_rule){vjp_binary, jvp_binary, DLE_SAVE(1), true};
  r[DLE_OP_POW] = (dle_grad_rule){vjp_binary, jvp_binary, DLE_SAVE(0) | DLE_SAVE(1), true};
  r[DLE_OP_MAXIMUM] = (dle_grad_rule){vjp_binary, jvp_binary, DLE_SAVE(0) | DLE_SAVE(1), false};
  r[DLE_OP_MINIMUM] = (dle_grad_rule){vjp_binary, jvp_binary, DLE_SAVE(0) | DLE_SAVE(1), false};
  /* atan2, fmod, remainder, fmax, fmin read a and b; hypot, logaddexp and copysign y too */
  const dle_op both[] = {DLE_OP_ATAN2, DLE_OP_FMOD,  DLE_OP_REMAINDER, DLE_OP_FMAX,
                         DLE_OP_FMIN,  DLE_OP_HYPOT, DLE_OP_LOGADDEXP, DLE_OP_COPYSIGN};
  for (size_t i = 0; i < sizeof both / sizeof both[0]; i++)
    r[both[i]] = (dle_grad_rule){vjp_binary, jvp_binary, DLE_SAVE(0) | DLE_SAVE(1), i >= 5};
  r[DLE_OP_GELU_BACKWARD] =
      (dle_grad_rule){vjp_binary, jvp_binary, DLE_SAVE(0) | DLE_SAVE(1), false};
  r[DLE_OP_WHERE] = (dle_grad_rule){vjp_where, jvp_where, DLE_SAVE(0), false};
}
