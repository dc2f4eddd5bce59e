/* fp8.c — dle_fp8_scaled_matmul: the checks of its contract, then the device backend's fp8 matmul
 * (cuBLASLt on CUDA) or, where there is none (the CPU), the product upcast to float32. */
#include "internal.h"
#include "kernel/backend.h"

#define FN "dle.fp8.scaled_matmul"

static bool is_fp8(dle_dtype t) { return t == DLE_F8E4M3 || t == DLE_F8E5M2; }

static dle_status check_operand(const char *what, const dle_tensor *t) {
  char s[128];
  if (!t) return dle_error(FN ": %s is missing", what);
  dle_shape_str(s, sizeof s, t->ndim, t->sizes);
  if (!is_fp8(t->dtype))
    return dle_error(FN ": %s must be float8_e4m3fn or float8_e5m2, got %s %s", what,
                     dle_dtype_name(t->dtype), s);
  if (t->ndim != 2) return dle_error(FN ": %s must be 2-D, got shape %s", what, s);
  if (t->requires_grad)
    return dle_error(FN ": %s requires grad, but scaled_matmul has no gradient (detach it)", what);
  return DLE_OK;
}

static dle_status check_scale(const char *what, const dle_tensor *t) {
  char s[128];
  if (!t) return dle_error(FN ": %s is missing", what);
  dle_shape_str(s, sizeof s, t->ndim, t->sizes);
  if (t->ndim != 0 || t->dtype != DLE_F32)
    return dle_error(FN ": %s must be a 0-d float32 tensor, got %s %s", what,
                     dle_dtype_name(t->dtype), s);
  if (t->requires_grad)
    return dle_error(FN ": %s requires grad, but scaled_matmul has no gradient (detach it)", what);
  return DLE_OK;
}

/* x * scale in float32 (CPU path). */
static dle_status upcast(dle_tensor **out, dle_tensor *x, dle_tensor *scale) {
  dle_tensor *f = NULL;
  DLE_TRY(dle_to_dtype(&f, x, DLE_F32));
  dle_status st = dle_binary(DLE_OP_MUL, out, f, scale);
  dle_tensor_release(f);
  return st;
}

static dle_status cpu_scaled_matmul(dle_tensor **out, dle_tensor *a, dle_tensor *b, dle_tensor *sa,
                                    dle_tensor *sb, dle_dtype out_dt) {
  dle_tensor *fa = NULL, *fb = NULL, *p = NULL;
  dle_status st = upcast(&fa, a, sa);
  if (st == DLE_OK) st = upcast(&fb, b, sb);
  if (st == DLE_OK) st = dle_matmul(&p, fa, fb);
  if (st == DLE_OK) st = dle_to_dtype(out, p, out_dt);
  dle_tensor_release(fa);
  dle_tensor_release(fb);
  dle_tensor_release(p);
  return st;
}

/* The backend's hook: a and b^T made contiguous, a float32 result converted to out_dt. */
static dle_status device_scaled_matmul(const dle_backend *be, dle_tensor **out, dle_tensor *a,
                                       dle_tensor *b, dle_tensor *sa, dle_tensor *sb,
                                       dle_dtype out_dt) {
  dle_tensor *ac = NULL, *bv = NULL, *bt = NULL, *r = NULL;
  int64_t sizes[2] = {a->sizes[0], b->sizes[1]};
  dle_status st = dle_contiguous(&ac, a);
  if (st == DLE_OK) st = dle_transpose(&bv, b, 0, 1);
  if (st == DLE_OK) st = dle_contiguous(&bt, bv);
  if (st == DLE_OK) st = dle_tensor_empty(&r, 2, sizes, DLE_F32, dle_tensor_device(a));
  if (st == DLE_OK) st = be->fp8_scaled_matmul(r, ac, bt, sa, sb);
  if (st == DLE_OK) st = dle_to_dtype(out, r, out_dt);
  dle_tensor_release(ac);
  dle_tensor_release(bv);
  dle_tensor_release(bt);
  dle_tensor_release(r);
  return st;
}

dle_status dle_fp8_scaled_matmul(dle_tensor **out, dle_tensor *a, dle_tensor *b,
                                 dle_tensor *a_scale, dle_tensor *b_scale, dle_dtype out_dt) {
  *out = NULL;
  DLE_TRY(check_operand("a", a));
  DLE_TRY(check_operand("b", b));
  DLE_TRY(check_scale("a_scale", a_scale));
  DLE_TRY(check_scale("b_scale", b_scale));
  char sa[128], sb[128], da[32], db[32];
  dle_shape_str(sa, sizeof sa, a->ndim, a->sizes);
  dle_shape_str(sb, sizeof sb, b->ndim, b->sizes);
  if (a->sizes[1] != b->sizes[0]) return dle_error(FN ": inner dims differ: a %s and b %s", sa, sb);
  if ((unsigned)out_dt >= DLE_NUM_DTYPES || !dle_dtype_is_float(out_dt) || is_fp8(out_dt))
    return dle_error(FN ": out_dtype must be float32, float64, float16 or bfloat16, got %s",
                     dle_dtype_name(out_dt));
  dle_device dev = dle_tensor_device(a);
  const dle_tensor *others[3] = {b, a_scale, b_scale};
  for (int i = 0; i < 3; i++) {
    dle_device d = dle_tensor_device(others[i]);
    if (d.type != dev.type || d.index != dev.index)
      return dle_error(FN ": all inputs must be on one device, got a on %s and %s on %s",
                       dle_device_str(da, sizeof da, dev),
                       i == 0   ? "b"
                       : i == 1 ? "a_scale"
                                : "b_scale",
                       dle_device_str(db, sizeof db, d));
  }
  bool prev = dle_set_grad_enabled(false);
  dle_status st;
  const dle_backend *be = dle_backend_get(dev.type);
  if (dev.type == DLE_CPU || (be && !be->fp8_scaled_matmul)) {
    st = cpu_scaled_matmul(out, a, b, a_scale, b_scale, out_dt);
  } else if (!be) {
    st = dle_error(FN ": no backend for device %s", dle_device_str(da, sizeof da, dev));
  } else {
    st = device_scaled_matmul(be, out, a, b, a_scale, b_scale, out_dt);
  }
  dle_set_grad_enabled(prev);
  return st;
}
