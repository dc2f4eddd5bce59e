/* fused.c — the fused elementwise executor's front door (dle.h: dle_fused_run): checks the program
 * and its inputs, allocates the result and runs the device backend's fused_run slot. */
#include "internal.h"

static const dle_backend *fused_backend(dle_device_type type) {
  const dle_backend *b = dle_backend_get(type);
  return b && b->fused_supports && b->fused_run ? b : NULL;
}

bool dle_fused_supports(dle_op op) {
  const dle_backend *b = fused_backend(DLE_CPU);
  return b && (unsigned)op < DLE_NUM_OPS && b->fused_supports(op);
}

dle_status dle_fused_run(dle_tensor **out, dle_tensor *const *ins, int nin,
                         const dle_fused_instr *prog, int n, int ndim, const int64_t *sizes,
                         dle_dtype dt) {
  *out = NULL;
  if (dt != DLE_F32 && dt != DLE_F64)
    return dle_error("fused: only float32 and float64 are supported, got %s", dle_dtype_name(dt));
  if (n < 1 || nin < 0 || nin + n > DLE_FUSED_MAX_REGS)
    return dle_error("fused: %d inputs and %d instructions (at most %d registers)", nin, n,
                     DLE_FUSED_MAX_REGS);
  if (ndim < 0 || ndim > DLE_MAX_DIMS) return dle_error("fused: at most %d dims", DLE_MAX_DIMS);
  const dle_backend *b = fused_backend(DLE_CPU);
  if (!b) return dle_error("fused: the CPU backend has no fused executor");
  for (int k = 0; k < n; k++) {
    const dle_fused_instr *ins_k = &prog[k];
    if ((unsigned)ins_k->op >= DLE_NUM_OPS || !b->fused_supports((dle_op)ins_k->op))
      return dle_error("fused: instruction %d: op %d is not supported", k + 1, ins_k->op);
    bool binary = dle_op_table[ins_k->op].nin == 2;
    if (ins_k->a < 0 || ins_k->a >= nin + k || (binary && (ins_k->b < 0 || ins_k->b >= nin + k)))
      return dle_error("fused: instruction %d reads a register not yet written", k + 1);
  }
  char buf[128];
  for (int i = 0; i < nin; i++) {
    const dle_tensor *x = ins[i];
    if (x->dtype != dt)
      return dle_error("fused: input %d is %s, expected %s", i + 1, dle_dtype_name(x->dtype),
                       dle_dtype_name(dt));
    if (dle_tensor_device(x).type != DLE_CPU)
      return dle_error("fused: input %d is not on the CPU", i + 1);
    bool fits = x->ndim <= ndim;
    for (int d = 0; fits && d < x->ndim; d++) {
      int64_t s = x->sizes[d], want = sizes[d + ndim - x->ndim];
      fits = s == want || s == 1;
    }
    if (!fits)
      return dle_error("fused: input %d of shape %s does not broadcast to %s", i + 1, SHAPE(x),
                       dle_shape_str(buf, sizeof buf, ndim, sizes));
  }
  DLE_TRY(dle_tensor_empty(out, ndim, sizes, dt, DLE_DEVICE_CPU));
  int64_t numel = dle_tensor_numel(*out);
  if (numel == 0) return DLE_OK;
  double t0 = dle_profile_begin();
  if (b->fused_run(*out, ins, nin, prog, n) != DLE_OK) {
    DLE_RELEASE(*out);
    return DLE_ERR;
  }
  dle_tensor_bump_version(*out);
  /* one FLOP per instruction and element, as the unfused ops count; inputs read once, out written once */
  int64_t bytes = dle_profile_data_bytes(*out);
  for (int i = 0; i < nin; i++) bytes += dle_profile_data_bytes(ins[i]);
  dle_profile_end(DLE_PROF_FUSED_ELEMENTWISE, t0, (int64_t)n * numel, bytes);
  return DLE_OK;
}
