/* create.c — ops with no tensor inputs: full, arange and the random fills.
 * Sizes are attrs.ints, the dtype attrs.dtype; values live in attrs.f. */
#include "../internal.h"

dle_status dle_forward_create(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                              const dle_attrs *a) {
  (void)ins, (void)nin;
  const char *fn = dle_op_get_info(op)->name;
  dle_dtype dt = a->has_dtype ? a->dtype : DLE_DEFAULT_FLOAT;
  if ((op == DLE_OP_RAND || op == DLE_OP_RANDN) && !dle_dtype_is_float(dt))
    return dle_error("%s: dtype must be a float type, got %s", fn, dle_dtype_name(dt));
  if (op == DLE_OP_RANDINT && !(a->f[0] < a->f[1]))
    return dle_error("randint: low (%g) must be less than high (%g)", a->f[0], a->f[1]);
  bool fresh = !outs[0];
  if (fresh) DLE_TRY(dle_tensor_empty(&outs[0], a->nints, a->ints, dt, DLE_DEVICE_CPU));
  dle_status st;
  if (op != DLE_OP_RAND && op != DLE_OP_RANDN && op != DLE_OP_RANDINT) {
    st = dle_dispatch(op, outs, 1, NULL, 0, a);
    if (st != DLE_OK && fresh) DLE_RELEASE(outs[0]);
    return st;
  }
  /* Random ops read a snapshot of the generator; the generator itself moves past the blocks
   * this call consumes, so the next call continues the stream. */
  dle_generator *g = a->generator ? a->generator : dle_default_generator();
  dle_generator snap = *g;
  dle_attrs local = *a;
  local.generator = &snap;
  g->offset += (uint64_t)dle_random_blocks(op, outs[0]->dtype, dle_tensor_numel(outs[0]));
  st = dle_dispatch(op, outs, 1, NULL, 0, &local);
  if (st != DLE_OK && fresh) DLE_RELEASE(outs[0]);
  return st;
}

static dle_status create(dle_op op, dle_tensor **out, int ndim, const int64_t *sizes, dle_dtype dt,
                         double f0, double f1, dle_generator *g) {
  const char *fn = dle_op_get_info(op)->name;
  if (ndim < 0 || ndim > DLE_MAX_DIMS) return dle_error("%s: at most %d dims", fn, DLE_MAX_DIMS);
  for (int d = 0; d < ndim; d++)
    if (sizes[d] < 0) {
      char buf[128];
      return dle_error("%s: negative size in %s", fn, dle_shape_str(buf, sizeof buf, ndim, sizes));
    }
  dle_attrs a = {0};
  a.nints = ndim;
  if (ndim > 0) memcpy(a.ints, sizes, (size_t)ndim * sizeof *sizes);
  a.dtype = dt, a.has_dtype = true;
  a.f[0] = f0, a.f[1] = f1;
  a.generator = g;
  *out = NULL;
  return dle_op_call(op, out, NULL, 0, &a);
}

dle_status dle_full(dle_tensor **out, int ndim, const int64_t *sizes, double value, dle_dtype dt) {
  return create(DLE_OP_FULL, out, ndim, sizes, dt, value, 0, NULL);
}

dle_status dle_fill_(dle_tensor *t, double value) {
  dle_attrs a = {0};
  a.f[0] = value;
  return dle_op_call(DLE_OP_FULL, &t, NULL, 0, &a);
}

dle_status dle_full_on(dle_tensor **out, int ndim, const int64_t *sizes, double value, dle_dtype dt,
                       dle_device dev) {
  if (dev.type == DLE_CPU) return dle_full(out, ndim, sizes, value, dt);
  *out = NULL;
  DLE_TRY(dle_tensor_empty(out, ndim, sizes, dt, dev));
  dle_status st = dle_fill_(*out, value);
  if (st != DLE_OK) DLE_RELEASE(*out);
  return st;
}

dle_status dle_zeros(dle_tensor **out, int ndim, const int64_t *sizes, dle_dtype dt) {
  return dle_full(out, ndim, sizes, 0, dt);
}

dle_status dle_arange(dle_tensor **out, double start, double stop, double step, dle_dtype dt) {
  if (step == 0 || !isfinite(step))
    return dle_error("arange: step must be finite and nonzero, got %g", step);
  if (!isfinite(start) || !isfinite(stop))
    return dle_error("arange: start and stop must be finite, got %g and %g", start, stop);
  double n = ceil((stop - start) / step);
  if (!(n >= 0)) n = 0;
  if (n > 1e15) return dle_error("arange: %g elements requested", n);
  int64_t len = (int64_t)n;
  return create(DLE_OP_ARANGE, out, 1, &len, dt, start, step, NULL);
}

dle_status dle_linspace(dle_tensor **out, double a, double b, int64_t n, dle_dtype dt) {
  if (n < 0) return dle_error("linspace: number of points must be >= 0, got %lld", (long long)n);
  double step = n > 1 ? (b - a) / (double)(n - 1) : 0;
  DLE_TRY(create(DLE_OP_ARANGE, out, 1, &n, dt, a, step, NULL));
  if (n > 1) dle_tensor_set(*out, (int64_t[]){n - 1}, b); /* exact end point */
  return DLE_OK;
}

dle_status dle_eye(dle_tensor **out, int64_t n, int64_t m, dle_dtype dt) {
  if (n < 0 || m < 0)
    return dle_error("eye: sizes must be >= 0, got %lld x %lld", (long long)n, (long long)m);
  DLE_TRY(dle_zeros(out, 2, (int64_t[]){n, m}, dt));
  for (int64_t i = 0; i < n && i < m; i++) dle_tensor_set(*out, (int64_t[]){i, i}, 1);
  return DLE_OK;
}

dle_status dle_rand(dle_tensor **out, int ndim, const int64_t *sizes, dle_dtype dt,
                    dle_generator *g) {
  return create(DLE_OP_RAND, out, ndim, sizes, dt, 0, 0, g);
}

dle_status dle_randn(dle_tensor **out, int ndim, const int64_t *sizes, dle_dtype dt,
                     dle_generator *g) {
  return create(DLE_OP_RANDN, out, ndim, sizes, dt, 0, 0, g);
}

dle_status dle_randint(dle_tensor **out, int64_t lo, int64_t hi, int ndim, const int64_t *sizes,
                       dle_dtype dt, dle_generator *g) {
  return create(DLE_OP_RANDINT, out, ndim, sizes, dt, (double)lo, (double)hi, g);
}
