/* optim.c — the public entry points of the fused optimizer steps (optim.h): argument checks
 * (devices, dtypes, shapes, contiguity, aliasing), then one kernel call (the CPU's, or the fused
 * step of the param's device backend), then version bumps. */
#include "internal.h"

/* The dtype optimizer state must have for a param of dtype dt (the kernels' compute type). */
static dle_dtype state_dtype(dle_dtype dt) { return dt == DLE_F64 ? DLE_F64 : DLE_F32; }

static dle_status check_param_grad(const char *fn, const dle_tensor *p, const dle_tensor *g) {
  dle_trace_note_unsafe("%s: an optimizer step writes parameters outside the graph", fn);
  if (!p) return dle_error("%s: param is missing", fn);
  if (!g) return dle_error("%s: grad is missing", fn);
  dle_device dp = dle_tensor_device(p), dg = dle_tensor_device(g);
  if (dp.type != dg.type || dp.index != dg.index) {
    char b1[32], b2[32];
    return dle_error("%s: param is on %s but grad is on %s", fn, dle_device_str(b1, sizeof b1, dp),
                     dle_device_str(b2, sizeof b2, dg));
  }
  if (!dle_dtype_is_float(p->dtype))
    return dle_error("%s: param must be float32, float64, float16 or bfloat16, got %s", fn,
                     dle_dtype_name(p->dtype));
  if (!dle_tensor_is_contiguous(p))
    return dle_error("%s: param of shape %s must be contiguous", fn, SHAPE(p));
  if (!dle_shape_equal(p->ndim, p->sizes, g->ndim, g->sizes))
    return dle_error("%s: grad has shape %s, param has shape %s", fn, SHAPE(g), SHAPE(p));
  if (g->dtype != p->dtype)
    return dle_error("%s: grad is %s, param is %s (they must match)", fn, dle_dtype_name(g->dtype),
                     dle_dtype_name(p->dtype));
  if (!dle_tensor_is_contiguous(g))
    return dle_error("%s: grad of shape %s must be contiguous", fn, SHAPE(g));
  if (g->requires_grad)
    return dle_error("%s: grad of shape %s requires grad; detach it first", fn, SHAPE(g));
  if (dle_same_storage(p, g)) return dle_error("%s: param and grad share storage", fn);
  return DLE_OK;
}

/* A state tensor `what`: param's shape, the state dtype, contiguous, CPU, not requiring grad,
 * and sharing storage with none of the `n` tensors already checked. */
static dle_status check_state(const char *fn, const char *what, const dle_tensor *s,
                              const dle_tensor *p, dle_tensor *const *others, int n) {
  if (!s) return dle_error("%s: %s is missing", fn, what);
  dle_device ds = dle_tensor_device(s), dp = dle_tensor_device(p);
  if (ds.type != dp.type || ds.index != dp.index) {
    char b1[32], b2[32];
    return dle_error("%s: %s is on %s, the param on %s", fn, what,
                     dle_device_str(b1, sizeof b1, ds), dle_device_str(b2, sizeof b2, dp));
  }
  if (!dle_shape_equal(p->ndim, p->sizes, s->ndim, s->sizes))
    return dle_error("%s: %s has shape %s, param has shape %s", fn, what, SHAPE(s), SHAPE(p));
  dle_dtype want = state_dtype(p->dtype);
  if (s->dtype != want)
    return dle_error("%s: %s is %s, expected %s for a %s param", fn, what, dle_dtype_name(s->dtype),
                     dle_dtype_name(want), dle_dtype_name(p->dtype));
  if (!dle_tensor_is_contiguous(s))
    return dle_error("%s: %s of shape %s must be contiguous", fn, what, SHAPE(s));
  if (s->requires_grad)
    return dle_error("%s: %s of shape %s requires grad; optimizer state must not", fn, what,
                     SHAPE(s));
  for (int k = 0; k < n; k++)
    if (others[k] && dle_same_storage(s, others[k]))
      return dle_error("%s: %s shares storage with another argument", fn, what);
  return DLE_OK;
}

/* What the profiler counts for one step (dle.profile): bytes = param read and written, grad
 * read, each of nstate state tensors read and written; FLOPs per parameter element are the
 * arithmetic of the update formulas in optim.h (the kernels in kernels/cpu/optim.c), e.g. Adam's 13:
 * m 3, v 4, the bias-corrected denominator 3, the update 3; weight decay adds 2. */
static void profile_step(int entry, double t0, const dle_tensor *p, int nstate, int64_t per) {
  if (!dle_profiler_on) return;
  int64_t n = dle_tensor_numel(p), ps = (int64_t)dle_dtype_size(p->dtype);
  int64_t ss = (int64_t)dle_dtype_size(state_dtype(p->dtype));
  dle_profile_end(entry, t0, per * n, n * (3 * ps + 2 * nstate * ss));
}

static int64_t weight_decay_flops(double wd) { return wd != 0 ? 2 : 0; }

/* The fused steps of the param's device: NULL for the CPU (its kernels are called directly), or an
 * error when that device's backend has none. */
static dle_status device_kernels(const char *fn, const dle_tensor *p, const dle_optim_kernels **k) {
  dle_device d = dle_tensor_device(p);
  *k = NULL;
  char buf[32];
  const dle_backend *b = dle_backend_get(d.type);
  if (!b) return dle_error("%s: %s", fn, dle_backend_unavailable_reason(d.type));
  if (!b->optim)
    return dle_error("%s: no fused kernel for device %s", fn, dle_device_str(buf, sizeof buf, d));
  *k = b->optim;
  return DLE_OK;
}

static bool finite_nonneg(double x) { return x >= 0 && isfinite(x); }

/* What every step checks first: param and grad, that the options o are given, their lr. */
static dle_status check_step(const char *fn, const dle_tensor *param, const dle_tensor *grad,
                             const void *o, double lr) {
  DLE_TRY(check_param_grad(fn, param, grad));
  if (!o) return dle_error("%s: options are missing", fn);
  if (!finite_nonneg(lr)) return dle_error("%s: invalid lr %g", fn, lr);
  return DLE_OK;
}

dle_status dle_sgd_step(dle_tensor *param, dle_tensor *grad, dle_tensor *buf,
                        const dle_sgd_opts *o) {
  const char *fn = "sgd_step";
  DLE_TRY(check_step(fn, param, grad, o, o ? o->lr : 0));
  if (o->momentum != 0) {
    dle_tensor *seen[2] = {param, grad};
    DLE_TRY(check_state(fn, "momentum_buffer", buf, param, seen, 2));
  }
  if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
    return dle_error(
        "%s: nesterov needs momentum > 0 and dampening 0 (got momentum %g, "
        "dampening %g)",
        fn, o->momentum, o->dampening);
  int64_t n = dle_tensor_numel(param);
  bool use_buf = o->momentum != 0;
  const dle_optim_kernels *k;
  DLE_TRY(device_kernels(fn, param, &k));
  double t0 = dle_profile_begin();
  void *pb = use_buf ? dle_tensor_data(buf) : NULL;
  DLE_TRY(k->sgd(param->storage->device.index, param->dtype, n, dle_tensor_data(param),
                 dle_tensor_data(grad), pb, o));
  profile_step(DLE_PROF_SGD_STEP, t0, param, use_buf,
               2 + weight_decay_flops(o->weight_decay) + (use_buf ? 3 + (o->nesterov ? 2 : 0) : 0));
  dle_tensor_bump_version(param);
  if (use_buf) dle_tensor_bump_version(buf);
  return DLE_OK;
}

dle_status dle_adagrad_step(dle_tensor *param, dle_tensor *grad, dle_tensor *sum,
                            const dle_adagrad_opts *o) {
  const char *fn = "adagrad_step";
  DLE_TRY(check_step(fn, param, grad, o, o ? o->lr : 0));
  if (o->step < 1) return dle_error("%s: step must be >= 1, got %lld", fn, (long long)o->step);
  dle_tensor *seen[2] = {param, grad};
  DLE_TRY(check_state(fn, "sum", sum, param, seen, 2));
  const dle_optim_kernels *k;
  DLE_TRY(device_kernels(fn, param, &k));
  double t0 = dle_profile_begin();
  int64_t n = dle_tensor_numel(param);
  DLE_TRY(k->adagrad(param->storage->device.index, param->dtype, n, dle_tensor_data(param),
                     dle_tensor_data(grad), dle_tensor_data(sum), o));
  profile_step(DLE_PROF_ADAGRAD_STEP, t0, param, 1, 7 + weight_decay_flops(o->weight_decay));
  dle_tensor_bump_version(param);
  dle_tensor_bump_version(sum);
  return DLE_OK;
}

dle_status dle_rmsprop_step(dle_tensor *param, dle_tensor *grad, dle_tensor *square_avg,
                            dle_tensor *momentum_buf, dle_tensor *grad_avg,
                            const dle_rmsprop_opts *o) {
  const char *fn = "rmsprop_step";
  DLE_TRY(check_step(fn, param, grad, o, o ? o->lr : 0));
  dle_tensor *seen[4] = {param, grad, square_avg, momentum_buf};
  DLE_TRY(check_state(fn, "square_avg", square_avg, param, seen, 2));
  bool use_mom = o->momentum > 0;
  if (use_mom) DLE_TRY(check_state(fn, "momentum_buffer", momentum_buf, param, seen, 3));
  if (o->centered) DLE_TRY(check_state(fn, "grad_avg", grad_avg, param, seen, use_mom ? 4 : 3));
  const dle_optim_kernels *k;
  DLE_TRY(device_kernels(fn, param, &k));
  double t0 = dle_profile_begin();
  int64_t n = dle_tensor_numel(param);
  void *mb = use_mom ? dle_tensor_data(momentum_buf) : NULL;
  void *ga = o->centered ? dle_tensor_data(grad_avg) : NULL;
  DLE_TRY(k->rmsprop(param->storage->device.index, param->dtype, n, dle_tensor_data(param),
                     dle_tensor_data(grad), dle_tensor_data(square_avg), mb, ga, o));
  profile_step(DLE_PROF_RMSPROP_STEP, t0, param, 1 + use_mom + o->centered,
               8 + weight_decay_flops(o->weight_decay) + (use_mom ? 2 : 0) + (o->centered ? 5 : 0));
  dle_tensor_bump_version(param);
  dle_tensor_bump_version(square_avg);
  if (use_mom) dle_tensor_bump_version(momentum_buf);
  if (o->centered) dle_tensor_bump_version(grad_avg);
  return DLE_OK;
}

dle_status dle_adam_step(dle_tensor *param, dle_tensor *grad, dle_tensor *exp_avg,
                         dle_tensor *exp_avg_sq, dle_tensor *max_exp_avg_sq,
                         const dle_adam_opts *o) {
  const char *fn = o && o->decoupled ? "adamw_step" : "adam_step";
  DLE_TRY(check_step(fn, param, grad, o, o ? o->lr : 0));
  if (!(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1))
    return dle_error("%s: betas must be in [0, 1), got (%g, %g)", fn, o->beta1, o->beta2);
  if (o->step < 1) return dle_error("%s: step must be >= 1, got %lld", fn, (long long)o->step);
  dle_tensor *seen[4] = {param, grad, exp_avg, exp_avg_sq};
  DLE_TRY(check_state(fn, "exp_avg", exp_avg, param, seen, 2));
  DLE_TRY(check_state(fn, "exp_avg_sq", exp_avg_sq, param, seen, 3));
  if (o->amsgrad) DLE_TRY(check_state(fn, "max_exp_avg_sq", max_exp_avg_sq, param, seen, 4));
  const dle_optim_kernels *k;
  DLE_TRY(device_kernels(fn, param, &k));
  double t0 = dle_profile_begin();
  int64_t n = dle_tensor_numel(param);
  void *vmax = o->amsgrad ? dle_tensor_data(max_exp_avg_sq) : NULL;
  DLE_TRY(k->adam(param->storage->device.index, param->dtype, n, dle_tensor_data(param),
                  dle_tensor_data(grad), dle_tensor_data(exp_avg), dle_tensor_data(exp_avg_sq),
                  vmax, o));
  profile_step(o->decoupled ? DLE_PROF_ADAMW_STEP : DLE_PROF_ADAM_STEP, t0, param, 2 + o->amsgrad,
               13 + weight_decay_flops(o->weight_decay) + o->amsgrad);
  dle_tensor_bump_version(param);
  dle_tensor_bump_version(exp_avg);
  dle_tensor_bump_version(exp_avg_sq);
  if (o->amsgrad) dle_tensor_bump_version(max_exp_avg_sq);
  return DLE_OK;
}
