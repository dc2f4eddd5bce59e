/* random.c — the random fills rand, randn and randint (kind RANDOM in ops.def): no tensor inputs;
 * sizes are attrs.ints, the dtype attrs.dtype, randint's bounds attrs.f; the generator is
 * attrs.generator (NULL: the default one). Not differentiable: no rules. */
#include "../internal.h"

DLE_FORWARD_RULE(random) {
  const char *fn = dle_op_get_info(op)->name;
  dle_dtype dt = a->has_dtype ? a->dtype : DLE_DEFAULT_FLOAT;
  if ((op == DLE_OP_RAND || op == DLE_OP_RANDN) && !dle_dtype_is_float(dt))
    return dle_error("%s: dtype must be a float type, got %s", fn, dle_dtype_name(dt));
  if (op == DLE_OP_RANDINT && !(a->f[0] < a->f[1]))
    return dle_error("randint: low (%g) must be less than high (%g)", a->f[0], a->f[1]);
  bool fresh = !outs[0];
  if (fresh) DLE_TRY(dle_tensor_empty(&outs[0], a->nints, a->ints, dt, DLE_DEVICE_CPU));
  /* Random ops read a snapshot of the generator; the generator itself moves past the blocks
   * this call consumes, so the next call continues the stream. */
  dle_generator *g = a->generator ? a->generator : dle_default_generator();
  dle_generator snap = *g;
  dle_attrs local = *a;
  local.generator = &snap;
  g->offset += (uint64_t)dle_random_blocks(op, outs[0]->dtype, dle_tensor_numel(outs[0]));
  dle_status st = dle_dispatch(op, outs, 1, NULL, 0, &local);
  if (st != DLE_OK && fresh) DLE_RELEASE(outs[0]);
  return st;
}

/* FLOPs: none are counted for generating random numbers (their cost is in bytes). */
dle_flops_rule dle_flops_random(dle_op op) {
  (void)op;
  return dle_flops_none();
}

dle_status dle_rand(dle_tensor **out, int ndim, const int64_t *sizes, dle_dtype dt,
                    dle_generator *g) {
  return dle_create_call(DLE_OP_RAND, out, ndim, sizes, dt, 0, 0, g);
}

dle_status dle_randn(dle_tensor **out, int ndim, const int64_t *sizes, dle_dtype dt,
                     dle_generator *g) {
  return dle_create_call(DLE_OP_RANDN, out, ndim, sizes, dt, 0, 0, g);
}

dle_status dle_randint(dle_tensor **out, int64_t lo, int64_t hi, int ndim, const int64_t *sizes,
                       dle_dtype dt, dle_generator *g) {
  return dle_create_call(DLE_OP_RANDINT, out, ndim, sizes, dt, (double)lo, (double)hi, g);
}
