/* fft.c — the FFT family (kind FFT in ops.def): the shape and dtype rule of the one op `fft`, its
 * FLOP rule, and dle_fft, the entry point that turns PyTorch's (n, dim, norm) arguments into calls
 * of the op. Kernels (FFTW): kernels/cpu/fft.c; no CUDA kernel (kernels/cuda/cpu_only.txt);
 * gradient rules: ops/fft_grad.c (dle_fft is a composition of ops, the op included, so autograd
 * follows it). The Lua functions dle.fft.* are lua/dle/fft.lua on dle.core._fft. */
#include "../autograd.h"
#include "deliver.h"

#include <math.h>

static const char *const kind_names[] = {"fft", "ifft", "rfft", "irfft"};

/* The op: ints[0] kind, ints[1] mask of dims, ints[2] c2r's output length, ints[3] norm. */
DLE_FORWARD_RULE(fft) {
  dle_tensor *x = ins[0];
  dle_fft_kind kind = (dle_fft_kind)a->ints[0];
  int64_t mask = a->ints[1];
  if ((unsigned)kind > DLE_FFT_C2R || (uint64_t)a->ints[3] > DLE_FFT_NORM_FORWARD)
    return dle_error("fft: invalid kind %lld or norm %lld", (long long)kind, (long long)a->ints[3]);
  if (mask <= 0 || mask >= ((int64_t)1 << x->ndim))
    return dle_error("fft: dims mask %lld out of range for an input of shape %s", (long long)mask,
                     SHAPE(x));
  int last = 63 - __builtin_clzll((unsigned long long)mask);
  if (mask != ((int64_t)1 << last)) /* dle_fft runs one dim per call */
    return dle_error("fft: transforms one dim per call (mask %lld)", (long long)mask);
  for (int d = 0; d < x->ndim; d++)
    if ((mask >> d & 1) && x->sizes[d] < 1)
      return dle_error("fft: invalid number of data points (%lld) along dim %d of shape %s",
                       (long long)x->sizes[d], d + 1, SHAPE(x));
  dle_dtype in_dt, out_dt;
  int64_t sizes[DLE_MAX_DIMS];
  memcpy(sizes, x->sizes, sizeof sizes);
  if (kind == DLE_FFT_R2C) {
    if (dle_dtype_is_complex(x->dtype))
      return dle_error("fft: r2c expects a real input, got %s of shape %s",
                       dle_dtype_name(x->dtype), SHAPE(x));
    in_dt = x->dtype == DLE_F64 ? DLE_F64 : DLE_F32;
    out_dt = dle_complex_of(in_dt);
    sizes[last] = sizes[last] / 2 + 1;
  } else {
    in_dt = dle_dtype_is_complex(x->dtype) ? x->dtype : dle_complex_of(x->dtype);
    out_dt = kind == DLE_FFT_C2R ? dle_real_of(in_dt) : in_dt;
    if (kind == DLE_FFT_C2R) {
      if (a->ints[2] < 1 || a->ints[2] / 2 + 1 != x->sizes[last])
        return dle_error("fft: c2r output length %lld does not match %lld input points",
                         (long long)a->ints[2], (long long)x->sizes[last]);
      sizes[last] = a->ints[2];
    }
  }
  /* c2r overwrites its input (FFTW): it always gets a private copy */
  dle_tensor *in = NULL, *res = NULL;
  dle_status st = DLE_OK;
  if (kind == DLE_FFT_C2R || x->dtype != in_dt) {
    st = dle_tensor_empty(&in, x->ndim, x->sizes, in_dt, dle_tensor_device(x));
    if (st == DLE_OK) st = dle_copy_(in, x);
  } else {
    dle_tensor_retain(x);
    in = x;
  }
  if (st == DLE_OK) st = dle_tensor_empty(&res, x->ndim, sizes, out_dt, dle_tensor_device(x));
  if (st == DLE_OK) st = dle_dispatch(op, &res, 1, &in, 1, a);
  dle_tensor_release(in);
  return dle_deliver_result(&outs[0], res, st);
}

/* FLOPs: 5 N log2 N per complex transform of N points (the usual radix-2 count), half that for
 * the real transforms; the batch multiplies. */
static int64_t fft_count(const dle_flops_call *c, int per) {
  (void)per;
  const dle_tensor *x = c->ins[0], *y = c->outs[0];
  const dle_tensor *big = c->a->ints[0] == DLE_FFT_C2R ? y : x;
  double n = 1;
  for (int d = 0; d < big->ndim; d++)
    if (c->a->ints[1] >> d & 1) n *= (double)big->sizes[d];
  double batch = n > 0 ? (double)dle_tensor_numel(big) / n : 0;
  double per_transform = 5 * n * log2(n > 1 ? n : 2);
  if (c->a->ints[0] >= DLE_FFT_R2C) per_transform /= 2;
  return (int64_t)(batch * per_transform);
}

dle_flops_rule dle_flops_fft(dle_op op) {
  (void)op;
  return (dle_flops_rule){"5 N log2 N per transform (real: half)", fft_count, 0};
}

/* ---- dle_fft: crop or zero-pad, then the op ---- */

/* *out = x with dim d cropped or zero-padded to length m (differentiable: narrow, or cat with
 * zeros). */
static dle_status resize_dim(dle_tensor **out, dle_tensor *x, int d, int64_t m) {
  *out = NULL;
  if (x->sizes[d] == m) {
    dle_tensor_retain(x);
    *out = x;
    return DLE_OK;
  }
  if (x->sizes[d] > m) return dle_narrow(out, x, d, 0, m);
  int64_t sizes[DLE_MAX_DIMS];
  memcpy(sizes, x->sizes, sizeof sizes);
  sizes[d] = m;
  return dle_zero_pad_along(out, x, d, 0, x->ndim, sizes);
}

/* *out = the op along dim d of x alone. Unless d is already x's innermost dim with stride 1, it
 * runs on a contiguous copy with d moved innermost, and the result is a transposed view: FFTW
 * (FFTW_ESTIMATE) plans a transform along an outer, strided dim poorly, and the copy costs much
 * less than the difference. */
static dle_status fft_along(dle_tensor **out, dle_tensor *x, const dle_attrs *a, int d) {
  int last = x->ndim - 1;
  dle_attrs b = *a;
  b.ints[1] = (int64_t)1 << last;
  if (d == last && (x->strides[last] == 1 || x->sizes[last] == 1))
    return dle_op_call(DLE_OP_FFT, out, &x, 1, &b);
  dle_tensor *t = NULL, *c = NULL, *y = NULL;
  dle_status st = dle_transpose(&t, x, d, last);
  if (st == DLE_OK) st = dle_contiguous(&c, t);
  if (st == DLE_OK) st = dle_op_call(DLE_OP_FFT, &y, &c, 1, &b);
  if (st == DLE_OK) st = dle_transpose(out, y, d, last);
  dle_tensor_release(t);
  dle_tensor_release(c);
  dle_tensor_release(y);
  return st;
}

static dle_status check_args(const dle_tensor *x, dle_fft_kind kind, int ndims, const int *dims,
                             const int64_t *n, dle_fft_norm norm, const char *fn) {
  if ((unsigned)kind > DLE_FFT_C2R) return dle_error("%s: invalid transform kind %d", fn, kind);
  if ((unsigned)norm > DLE_FFT_NORM_FORWARD) return dle_error("%s: invalid norm %d", fn, norm);
  if (ndims < 1 || ndims > x->ndim)
    return dle_error("%s: expected 1 to %d dims for an input of shape %s, got %d", fn, x->ndim,
                     SHAPE(x), ndims);
  for (int i = 0; i < ndims; i++) {
    if (dims[i] < 0 || dims[i] >= x->ndim)
      return dle_error("%s: dim %d out of range for an input of shape %s", fn, dims[i] + 1,
                       SHAPE(x));
    for (int j = 0; j < i; j++)
      if (dims[j] == dims[i]) return dle_error("%s: dim %d appears twice", fn, dims[i] + 1);
    if (n[i] != -1 && n[i] < 1)
      return dle_error("%s: invalid number of data points (%lld) for dim %d", fn, (long long)n[i],
                       dims[i] + 1);
  }
  if (kind == DLE_FFT_R2C && dle_dtype_is_complex(x->dtype))
    return dle_error("%s: expected a real input, got %s of shape %s (use fft for complex input)",
                     fn, dle_dtype_name(x->dtype), SHAPE(x));
  return DLE_OK;
}

dle_status dle_fft(dle_tensor **out, dle_tensor *x, dle_fft_kind kind, int ndims, const int *dims,
                   const int64_t *n, dle_fft_norm norm, const char *fn) {
  *out = NULL;
  if (!fn) fn = kind_names[(unsigned)kind <= DLE_FFT_C2R ? kind : 0];
  DLE_TRY(check_args(x, kind, ndims, dims, n, norm, fn));
  if (kind == DLE_FFT_C2R && ndims > 1) {
    /* c2c inverse over the leading dims, then c2r over the last (PyTorch's order) */
    dle_tensor *mid = NULL;
    DLE_TRY(dle_fft(&mid, x, DLE_FFT_C2C_INVERSE, ndims - 1, dims, n, norm, fn));
    dle_status st = dle_fft(out, mid, DLE_FFT_C2R, 1, dims + ndims - 1, n + ndims - 1, norm, fn);
    dle_tensor_release(mid);
    return st;
  }
  dle_attrs a = {0};
  a.ints[0] = kind;
  a.ints[3] = norm;
  a.nints = 4;
  dle_tensor *cur = x;
  dle_tensor_retain(cur);
  dle_status st = DLE_OK;
  for (int i = 0; i < ndims && st == DLE_OK; i++) {
    int d = dims[i];
    int64_t m = n[i];
    if (kind == DLE_FFT_C2R) {
      if (m == -1) m = 2 * (x->sizes[d] - 1);
      if (m < 1)
        st = dle_error("%s: invalid number of data points (%lld) for dim %d: give n", fn,
                       (long long)m, d + 1);
      a.ints[2] = m;
      m = m / 2 + 1;
    } else if (m == -1) {
      m = x->sizes[d];
      if (m < 1)
        st = dle_error("%s: invalid number of data points (0) along dim %d of shape %s", fn, d + 1,
                       SHAPE(x));
    }
    dle_tensor *r = NULL;
    if (st == DLE_OK) st = resize_dim(&r, cur, d, m);
    if (st == DLE_OK) {
      dle_tensor_release(cur);
      cur = r;
    }
  }
  /* one dim per pass, r2c first over the last dim given (which it halves), then c2c over the
   * others; c2c in the order given */
  for (int k = 0; k < ndims && st == DLE_OK; k++) {
    int i = kind != DLE_FFT_R2C ? k : k == 0 ? ndims - 1 : k - 1;
    a.ints[0] = kind == DLE_FFT_R2C && k > 0 ? DLE_FFT_C2C : kind;
    dle_tensor *r = NULL;
    st = fft_along(&r, cur, &a, dims[i]);
    if (st == DLE_OK) {
      dle_tensor_release(cur);
      cur = r;
    }
  }
  if (st == DLE_OK) {
    *out = cur; /* a result: ndims >= 1 passes ran */
    return DLE_OK;
  }
  dle_tensor_release(cur);
  return st;
}
