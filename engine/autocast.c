/* autocast.c — the mixed-precision policy of dle_op_call (autocast.h): the per-thread state, the
 * rule of each op, and the casts made before an op runs. */
#include "autocast.h"

#include "internal.h"

#include <stdlib.h>

_Thread_local DLE_HOT_TLS bool dle_autocast_on;
static _Thread_local dle_dtype autocast_dtype = DLE_BF16;

/* PyTorch's lists, restricted to dle's ops. Lower precision: the products, where float16/
 * bfloat16 halve the bytes moved and the kernels still accumulate in float32. Float32: ops whose
 * result loses too much in 16 bits (exp/log/pow ranges, sums over many elements, normalizations,
 * losses). Gradient ops (*_grad*, *_backward) are absent on purpose: they run in the dtypes their
 * forward recorded. */
#define L DLE_AUTOCAST_LOWER
#define F DLE_AUTOCAST_FLOAT32
static const unsigned char rules[DLE_NUM_OPS] = {
    [DLE_OP_MATMUL] = L,        [DLE_OP_CONV2D] = L,         [DLE_OP_SDPA] = L,

    [DLE_OP_EXP] = F,           [DLE_OP_LOG] = F,            [DLE_OP_EXPM1] = F,
    [DLE_OP_LOG1P] = F,         [DLE_OP_RSQRT] = F,          [DLE_OP_RECIPROCAL] = F,
    [DLE_OP_POW] = F,           [DLE_OP_POW_SCALAR] = F,
    [DLE_OP_SUM] = F,           [DLE_OP_PROD] = F,           [DLE_OP_MEAN] = F,
    [DLE_OP_VAR] = F,           [DLE_OP_STD] = F,            [DLE_OP_LOGSUMEXP] = F,
    [DLE_OP_SOFTMAX] = F,       [DLE_OP_LOG_SOFTMAX] = F,
    [DLE_OP_LAYER_NORM] = F,    [DLE_OP_BATCH_NORM] = F,
    [DLE_OP_CROSS_ENTROPY] = F, [DLE_OP_SOFT_CROSS_ENTROPY] = F, [DLE_OP_NLL_LOSS] = F,
    [DLE_OP_MSE_LOSS] = F,      [DLE_OP_BCE_WITH_LOGITS] = F,
};
#undef L
#undef F

dle_autocast_rule dle_autocast_rule_of(dle_op op) {
  return (unsigned)op < DLE_NUM_OPS ? (dle_autocast_rule)rules[op] : DLE_AUTOCAST_KEEP;
}

dle_status dle_autocast_set(bool on, dle_dtype dt) {
  if (dt != DLE_F16 && dt != DLE_BF16)
    return dle_error("autocast: dtype must be float16 or bfloat16, got %s", dle_dtype_name(dt));
  autocast_dtype = dt;
  dle_autocast_on = on;
  return DLE_OK;
}

bool dle_autocast_enabled(void) { return dle_autocast_on; }

dle_dtype dle_autocast_dtype(void) { return autocast_dtype; }

bool dle_autocast_set_enabled(bool on) {
  bool was = dle_autocast_on;
  dle_autocast_on = on;
  return was;
}

/* The dtype an input of dtype have takes under rule r (have itself when it is left alone). As in
 * PyTorch, float64 and non-float inputs are never cast. */
static dle_dtype cast_to(dle_autocast_rule r, dle_dtype have) {
  if (r == DLE_AUTOCAST_LOWER && dle_dtype_is_float(have) && have != DLE_F64) return autocast_dtype;
  if (r == DLE_AUTOCAST_FLOAT32 && (have == DLE_F16 || have == DLE_BF16)) return DLE_F32;
  return have;
}

static dle_status call_with_policy(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                                   const dle_attrs *attrs) {
  const dle_op_info *info = dle_op_get_info(op);
  dle_autocast_rule r = dle_autocast_rule_of(op);
  bool given = false;  /* out= and in-place forms keep their output's dtype: not autocast */
  for (int k = 0; info && k < info->nout; k++) given = given || outs[k];
  bool any = false;
  for (int i = 0; r != DLE_AUTOCAST_KEEP && !given && i < nin && !any; i++)
    any = ins[i] && cast_to(r, ins[i]->dtype) != ins[i]->dtype;
  if (!any) return dle_op_call(op, outs, ins, nin, attrs);

  dle_tensor *small[8] = {NULL}, **cast = small;
  if (nin > 8 && !(cast = calloc((size_t)nin, sizeof *cast)))
    return dle_error("%s: out of memory", info->name);
  dle_status st = DLE_OK;
  /* a missing input stays NULL: the front door names it */
  for (int i = 0; i < nin && st == DLE_OK; i++)
    if (ins[i]) st = dle_cast_if_needed(&cast[i], ins[i], cast_to(r, ins[i]->dtype));
  if (st == DLE_OK) st = dle_op_call(op, outs, cast, nin, attrs);
  for (int i = 0; i < nin; i++) dle_tensor_release(cast[i]);
  if (cast != small) free(cast);
  return st;
}

dle_status dle_autocast_op_call(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                                const dle_attrs *attrs) {
  /* Off while the casts and the op run: neither they nor the ops the op makes inside (its own
   * casts, copies, views, forward-mode rules) are autocast again. */
  dle_autocast_on = false;
  dle_status st = call_with_policy(op, outs, ins, nin, attrs);
  dle_autocast_on = true;
  return st;
}
