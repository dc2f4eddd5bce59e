/* fused.c — the fused elementwise executor's front doors (dle.h: dle_fused_run, and
 * dle_fused_reduce with a reduction at the end): check the program and its inputs, allocate the
 * result and run the device backend's fused_run / fused_reduce slot. */
#include "internal.h"

static const dle_backend *fused_backend(dle_device_type type) {
  const dle_backend *b = dle_backend_get(type);
  return b && b->fused_supports && b->fused_run ? b : NULL;
}

bool dle_fused_supports(dle_op op) {
  const dle_backend *b = fused_backend(DLE_CPU);
  return b && (unsigned)op < DLE_NUM_OPS && b->fused_supports(op);
}

/* The checks both entry points share: the program, the dtypes, the inputs' broadcast to sizes. */
static dle_status check_program(const char *fn, const dle_backend *b, dle_tensor *const *ins,
                                int nin, const dle_fused_instr *prog, int n, int ndim,
                                const int64_t *sizes, dle_dtype dt) {
  if (dt != DLE_F32 && dt != DLE_F64)
    return dle_error("%s: only float32 and float64 are supported, got %s", fn, dle_dtype_name(dt));
  if (n < 1 || nin < 0 || nin + n > DLE_FUSED_MAX_REGS)
    return dle_error("%s: %d inputs and %d instructions (at most %d registers)", fn, nin, n,
                     DLE_FUSED_MAX_REGS);
  if (ndim < 0 || ndim > DLE_MAX_DIMS) return dle_error("%s: at most %d dims", fn, DLE_MAX_DIMS);
  if (!b) return dle_error("%s: the CPU backend has no fused executor", fn);
  for (int k = 0; k < n; k++) {
    const dle_fused_instr *ins_k = &prog[k];
    if ((unsigned)ins_k->op >= DLE_NUM_OPS || !b->fused_supports((dle_op)ins_k->op))
      return dle_error("%s: instruction %d: op %d is not supported", fn, k + 1, ins_k->op);
    bool binary = dle_op_table[ins_k->op].nin == 2;
    if (ins_k->a < 0 || ins_k->a >= nin + k || (binary && (ins_k->b < 0 || ins_k->b >= nin + k)))
      return dle_error("%s: instruction %d reads a register not yet written", fn, k + 1);
  }
  char buf[128];
  for (int i = 0; i < nin; i++) {
    const dle_tensor *x = ins[i];
    if (x->dtype != dt)
      return dle_error("%s: input %d is %s, expected %s", fn, i + 1, dle_dtype_name(x->dtype),
                       dle_dtype_name(dt));
    if (dle_tensor_device(x).type != DLE_CPU)
      return dle_error("%s: input %d is not on the CPU", fn, i + 1);
    bool fits = x->ndim <= ndim;
    for (int d = 0; fits && d < x->ndim; d++) {
      int64_t s = x->sizes[d], want = sizes[d + ndim - x->ndim];
      fits = s == want || s == 1;
    }
    if (!fits)
      return dle_error("%s: input %d of shape %s does not broadcast to %s", fn, i + 1, SHAPE(x),
                       dle_shape_str(buf, sizeof buf, ndim, sizes));
  }
  return DLE_OK;
}

/* Bytes the call moves: each input read once and the result written once. */
static int64_t moved_bytes(const dle_tensor *out, dle_tensor *const *ins, int nin) {
  int64_t bytes = dle_profile_data_bytes(out);
  for (int i = 0; i < nin; i++) bytes += dle_profile_data_bytes(ins[i]);
  return bytes;
}

dle_status dle_fused_run(dle_tensor **out, dle_tensor *const *ins, int nin,
                         const dle_fused_instr *prog, int n, int ndim, const int64_t *sizes,
                         dle_dtype dt) {
  *out = NULL;
  const dle_backend *b = fused_backend(DLE_CPU);
  DLE_TRY(check_program("fused", b, ins, nin, prog, n, ndim, sizes, dt));
  DLE_TRY(dle_tensor_empty(out, ndim, sizes, dt, DLE_DEVICE_CPU));
  int64_t numel = dle_tensor_numel(*out);
  if (numel == 0) return DLE_OK;
  double t0 = dle_profile_begin();
  if (b->fused_run(*out, ins, nin, prog, n) != DLE_OK) {
    DLE_RELEASE(*out);
    return DLE_ERR;
  }
  dle_tensor_bump_version(*out);
  /* one FLOP per instruction and element, as the unfused ops count */
  dle_profile_end(DLE_PROF_FUSED_ELEMENTWISE, t0, (int64_t)n * numel, moved_bytes(*out, ins, nin));
  return DLE_OK;
}

dle_status dle_fused_reduce(dle_tensor **out, dle_tensor *const *ins, int nin,
                            const dle_fused_instr *prog, int n, int ndim, const int64_t *sizes,
                            dle_dtype dt, dle_op reduce, bool last_dim) {
  *out = NULL;
  const dle_backend *b = fused_backend(DLE_CPU);
  if (b && !b->fused_reduce) b = NULL;
  DLE_TRY(check_program("fused_reduce", b, ins, nin, prog, n, ndim, sizes, dt));
  if (reduce != DLE_OP_SUM && reduce != DLE_OP_MEAN && reduce != DLE_OP_AMAX &&
      reduce != DLE_OP_AMIN)
    return dle_error("fused_reduce: op %d is not sum, mean, amax or amin", (int)reduce);
  if (last_dim && ndim == 0) return dle_error("fused_reduce: a 0-dim result has no last dim");
  int64_t numel = 1;
  for (int d = 0; d < ndim; d++) numel *= sizes[d];
  if (numel == 0)
    return dle_error("fused_reduce: the program's result of %lld elements is empty (run the ops)",
                     (long long)numel);
  DLE_TRY(dle_tensor_empty(out, last_dim ? ndim - 1 : 0, sizes, dt, DLE_DEVICE_CPU));
  double t0 = dle_profile_begin();
  if (b->fused_reduce(*out, ins, nin, prog, n, ndim, sizes, reduce, last_dim) != DLE_OK) {
    DLE_RELEASE(*out);
    return DLE_ERR;
  }
  dle_tensor_bump_version(*out);
  /* the instructions' FLOPs, and one per element for the reduction */
  dle_profile_end(DLE_PROF_FUSED_ELEMENTWISE, t0, (int64_t)(n + 1) * numel,
                  moved_bytes(*out, ins, nin));
  return DLE_OK;
}
