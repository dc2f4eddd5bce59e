/* softmax.c — shape and dtype rule of softmax and log_softmax along one dim (attrs.ints[0];
 * kind SOFTMAX in ops.def), with the public wrapper. The result has the input's shape; integer
 * inputs compute in the default float. Rules: softmax_grad.c. */
#include "../internal.h"
#include "reduce_front.h"

DLE_FORWARD_RULE(softmax) {
  const char *fn = dle_op_get_info(op)->name;
  dle_tensor *x = ins[0];
  if (a->nints < 1)
    return dle_error("%s: the dim to normalize along is missing (shape %s)", fn, SHAPE(x));
  int d = 0;
  DLE_TRY(dle_reduce_wrap_dim(fn, x, a->ints[0], &d));
  dle_attrs ka = *a;
  ka.nints = d < 0 ? 0 : 1;
  ka.ints[0] = d < 0 ? 0 : d;
  dle_dtype dt = dle_dtype_is_float(x->dtype) ? x->dtype : DLE_DEFAULT_FLOAT;
  return dle_reduce_run_into(op, outs, 1, x->ndim, x->sizes, &dt, x, dt, &ka);
}

/* FLOPs per input element: max, subtract, exp, sum, divide (log_softmax: log, subtract). */
enum { PER_SOFTMAX = 5 };

dle_flops_rule dle_flops_softmax(dle_op op) {
  (void)op;
  return dle_flops_per_in(PER_SOFTMAX);
}

/* ---- public wrapper ---- */

dle_status dle_softmax(dle_op op, dle_tensor **out, dle_tensor *x, int dim) {
  DLE_TRY(dle_check_op_kind(op, DLE_KIND_SOFTMAX, "softmax"));
  dle_attrs a = {0};
  a.ints[0] = dim;
  a.nints = 1;
  return dle_op_call(op, out, &x, 1, &a);
}
