/* ctc.c — shape and dtype rules of the CTC loss ops (kind CTC in ops.def) and their public
 * wrappers. Gradient rules: ops/ctc_grad.c; kernel: kernels/cpu/ctc.c (the alpha-beta recursion
 * in log space, PyTorch's algorithm).
 *   ctc_loss           log_probs {T, N, C} (float), targets ({N, S} padded or {sum of lengths}
 *                      concatenated; integer), input_lengths {N}, target_lengths {N} (integer)
 *                      -> nll {N} (-log p(target | input) per sample, +inf when impossible),
 *                      log_alpha {N, T, 2 S' + 1} float64 (S' the longest target; what backward
 *                      reads, not differentiable).
 *   ctc_loss_backward  gy {N}, the four inputs, nll, log_alpha -> d log_probs {T, N, C}
 *                      (not differentiable: ctc_loss has no double backward, as in PyTorch).
 * attrs: ints[0] the blank class (0-based), ints[1] = 1: zero_infinity (backward gives 0 for an
 * infinite loss); index_base: what target class values count from (1 from Lua). The lengths and
 * class values are checked by the kernel, which reads them. CPU only. */
#include "../internal.h"

static dle_status check_int_vector(const char *fn, const char *what, dle_tensor *t, int64_t n) {
  if (dle_dtype_is_float(t->dtype) || t->dtype == DLE_BOOL)
    return dle_error("%s: %s must be an integer tensor, got %s", fn, what,
                     dle_dtype_name(t->dtype));
  if (t->ndim != 1 || t->sizes[0] != n)
    return dle_error("%s: %s must have shape {%lld} (one per batch element), got %s", fn, what,
                     (long long)n, SHAPE(t));
  return DLE_OK;
}

/* The longest target: S of padded targets, else the largest target length (read here). */
static dle_status longest_target(const char *fn, dle_tensor *targets, dle_tensor *tl, int64_t *s) {
  if (targets->ndim == 2) {
    *s = targets->sizes[1];
    return DLE_OK;
  }
  *s = 0;
  for (int64_t n = 0; n < tl->sizes[0]; n++) {
    double v = dle_tensor_get(tl, &n);
    if (v < 0) return dle_error("%s: target_lengths[%lld] is negative (%g)", fn, (long long)n, v);
    if (v > *s) *s = (int64_t)v;
  }
  return DLE_OK;
}

DLE_FORWARD_RULE(ctc) {
  const char *fn = op == DLE_OP_CTC_LOSS ? "ctc_loss" : "ctc_loss_backward";
  int base = op == DLE_OP_CTC_LOSS ? 0 : 1; /* backward: gy first */
  dle_tensor *lp = ins[base], *targets = ins[base + 1], *il = ins[base + 2], *tl = ins[base + 3];
  for (int i = 0; i < nin; i++)
    if (dle_tensor_device(ins[i]).type != DLE_CPU)
      return dle_error("%s: CPU only; move the tensors to the CPU with :cpu()", fn);
  if (lp->ndim != 3 || !dle_dtype_is_float(lp->dtype))
    return dle_error("%s: log_probs must be a 3-D float tensor {T, N, C}, got %s %s", fn,
                     dle_dtype_name(lp->dtype), SHAPE(lp));
  int64_t T = lp->sizes[0], N = lp->sizes[1], C = lp->sizes[2];
  if (a->ints[0] < 0 || a->ints[0] >= C)
    return dle_error("%s: blank %lld is not a class of log_probs %s (%lld classes)", fn,
                     (long long)(a->ints[0] + a->index_base), SHAPE(lp), (long long)C);
  if (dle_dtype_is_float(targets->dtype) || targets->dtype == DLE_BOOL)
    return dle_error("%s: targets must be an integer tensor, got %s", fn,
                     dle_dtype_name(targets->dtype));
  if (!(targets->ndim == 2 && targets->sizes[0] == N) && targets->ndim != 1)
    return dle_error(
        "%s: targets must be {N, S} (padded) or 1-D (concatenated) with N = %lld "
        "(log_probs %s), got %s",
        fn, (long long)N, SHAPE(lp), SHAPE(targets));
  DLE_TRY(check_int_vector(fn, "input_lengths", il, N));
  DLE_TRY(check_int_vector(fn, "target_lengths", tl, N));
  int64_t s = 0;
  DLE_TRY(longest_target(fn, targets, tl, &s));

  dle_dtype in_dt[7] = {lp->dtype, DLE_I64, DLE_I64, DLE_I64};
  dle_result_spec res[2] = {{1, {N}, lp->dtype}, {3, {N, T, 2 * s + 1}, DLE_F64}};
  if (op == DLE_OP_CTC_LOSS_BACKWARD) {
    dle_tensor *gy = ins[0], *nll = ins[5], *alpha = ins[6];
    if (gy->ndim != 1 || gy->sizes[0] != N || nll->ndim != 1 || nll->sizes[0] != N ||
        !dle_shape_equal(alpha->ndim, alpha->sizes, 3, res[1].sizes))
      return dle_error("%s: gy %s, nll %s and log_alpha %s do not match log_probs %s", fn,
                       SHAPE(gy), SHAPE(nll), SHAPE(alpha), SHAPE(lp));
    in_dt[0] = lp->dtype, in_dt[1] = lp->dtype, in_dt[2] = DLE_I64, in_dt[3] = DLE_I64;
    in_dt[4] = DLE_I64, in_dt[5] = lp->dtype, in_dt[6] = DLE_F64;
    res[0] = (dle_result_spec){3, {T, N, C}, lp->dtype};
  }
  return dle_dispatch_contiguous(op, outs, res, ins, nin, in_dt, a);
}

/* FLOPs: about 3 log-sum-exp terms per cell of the alpha (and, backward, beta) table, counted per
 * element of log_probs as a row-wise op (flops.c conventions). */
enum { PER_CTC = 6, PER_CTC_BACKWARD = 14 };
dle_flops_rule dle_flops_ctc(dle_op op) {
  return op == DLE_OP_CTC_LOSS ? dle_flops_per_in(PER_CTC) : dle_flops_per_out(PER_CTC_BACKWARD);
}

static dle_attrs ctc_attrs(int64_t blank, bool zero_infinity, int64_t index_base) {
  dle_attrs a = {0};
  a.ints[0] = blank, a.ints[1] = zero_infinity, a.nints = 2;
  a.index_base = index_base;
  return a;
}

dle_status dle_ctc_loss(dle_tensor **nll, dle_tensor **log_alpha, dle_tensor *log_probs,
                        dle_tensor *targets, dle_tensor *input_lengths, dle_tensor *target_lengths,
                        int64_t blank, bool zero_infinity, int64_t index_base) {
  dle_attrs a = ctc_attrs(blank, zero_infinity, index_base);
  dle_tensor *outs[2] = {*nll, *log_alpha};
  DLE_TRY(dle_op_call(DLE_OP_CTC_LOSS, outs,
                      (dle_tensor *[]){log_probs, targets, input_lengths, target_lengths}, 4, &a));
  *nll = outs[0], *log_alpha = outs[1];
  return DLE_OK;
}

dle_status dle_ctc_loss_backward(dle_tensor **grad, dle_tensor *gy, dle_tensor *log_probs,
                                 dle_tensor *targets, dle_tensor *input_lengths,
                                 dle_tensor *target_lengths, dle_tensor *nll, dle_tensor *log_alpha,
                                 int64_t blank, bool zero_infinity, int64_t index_base) {
  dle_attrs a = ctc_attrs(blank, zero_infinity, index_base);
  return dle_op_call(
      DLE_OP_CTC_LOSS_BACKWARD, grad,
      (dle_tensor *[]){gy, log_probs, targets, input_lengths, target_lengths, nll, log_alpha}, 7,
      &a);
}
