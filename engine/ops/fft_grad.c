/* fft_grad.c — reverse (vjp) and forward (jvp) rules of the FFT family (engine/ops/fft.c),
 * registered by dle_grad_register_fft (engine/ops/families.def).
 *
 * The op transforms one dim. Every kind is linear over the reals, so its forward rule is the op
 * itself on the tangent. The reverse rules are the adjoints (PyTorch's fft_c2c_backward,
 * fft_r2c_backward and fft_c2r_backward): the adjoint of a DFT is the DFT of the other direction
 * with the mirrored norm ("backward" <-> "forward"; "ortho" stays), which scales it by what the
 * forward scaled by.
 *   c2c: the other direction, mirrored norm (a real input keeps the real part: the engine).
 *   r2c: the n/2+1 gradients zero-padded back to n, then the inverse c2c (real part).
 *   c2r: r2c of the real gradient, then the entries 1 .. n - (n/2+1) doubled: each stands for
 *        itself and its conjugate mirror in the full spectrum the c2r transform implies. */
#include "../autograd.h"
#include "../internal.h"

/* The op along the same dim as a, with kind and norm replaced. */
static dle_status fft_call(dle_tensor **out, dle_tensor *x, const dle_attrs *a, dle_fft_kind kind,
                           int64_t norm) {
  dle_attrs b = *a;
  b.ints[0] = kind;
  b.ints[3] = norm;
  *out = NULL;
  return dle_op_call(DLE_OP_FFT, out, &x, 1, &b);
}

/* r2c's adjoint: g (n/2+1 points along d) zero-padded to the input's n, inverse c2c. */
static dle_status r2c_adjoint(dle_tensor **out, dle_node *n, dle_tensor *g, int d, int64_t norm) {
  dle_tensor *full = NULL;
  DLE_TRY(
      dle_zero_pad_along(&full, g, d, 0, dle_node_input_ndim(n, 0), dle_node_input_sizes(n, 0)));
  dle_status st = fft_call(out, full, dle_node_attrs(n), DLE_FFT_C2C_INVERSE, norm);
  dle_tensor_release(full);
  return st;
}

/* c2r's adjoint: r2c of g (m = n/2+1 points along d), entries 1 .. n-m times 2. */
static dle_status c2r_adjoint(dle_tensor **out, dle_node *n, dle_tensor *g, int d, int64_t norm) {
  dle_tensor *half = NULL, *w = NULL, *twice = NULL, *wv = NULL;
  DLE_TRY(fft_call(&half, g, dle_node_attrs(n), DLE_FFT_R2C, norm));
  int64_t m = half->sizes[d], doubled = g->sizes[d] - m;
  if (doubled <= 0) { /* n = 1 or 2: no entry has a mirror of its own */
    *out = half;
    return DLE_OK;
  }
  int64_t shape[DLE_MAX_DIMS];
  for (int k = 0; k < half->ndim; k++) shape[k] = k == d ? m : 1;
  dle_status st = dle_full_on(&w, 1, &m, 1, dle_real_of(half->dtype), dle_tensor_device(half));
  if (st == DLE_OK) st = dle_narrow(&twice, w, 0, 1, doubled);
  if (st == DLE_OK) st = dle_fill_(twice, 2);
  if (st == DLE_OK) st = dle_view(&wv, w, half->ndim, shape);
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, out, half, wv);
  dle_tensor *tmp[] = {half, w, twice, wv};
  dle_release_all(tmp, 4);
  return st;
}

static dle_status vjp_fft(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0] || !dle_node_needs_grad(n, 0)) return DLE_OK;
  const dle_attrs *a = dle_node_attrs(n);
  int d = 63 - __builtin_clzll((unsigned long long)a->ints[1]); /* the one dim of the mask */
  int64_t mirrored = DLE_FFT_NORM_FORWARD - a->ints[3];
  switch ((dle_fft_kind)a->ints[0]) {
    case DLE_FFT_C2C: return fft_call(&gin[0], gout[0], a, DLE_FFT_C2C_INVERSE, mirrored);
    case DLE_FFT_C2C_INVERSE: return fft_call(&gin[0], gout[0], a, DLE_FFT_C2C, mirrored);
    case DLE_FFT_R2C: return r2c_adjoint(&gin[0], n, gout[0], d, mirrored);
    case DLE_FFT_C2R: return c2r_adjoint(&gin[0], n, gout[0], d, mirrored);
  }
  return dle_error("fft: invalid kind %lld", (long long)a->ints[0]);
}

/* Linear (over the reals): the tangent goes through the same transform. */
DLE_JVP_RULE(jvp_fft) {
  if (!tin[0]) return DLE_OK;
  return dle_op_call(DLE_OP_FFT, &tout[0], &tin[0], 1, a);
}

void dle_grad_register_fft(dle_grad_rule *r) {
  r[DLE_OP_FFT] = (dle_grad_rule){vjp_fft, jvp_fft, 0, false};
}
