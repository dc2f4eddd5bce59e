/* sort.c — shape and dtype rules of the sort family (kind SORT in ops.def): sort, topk, kthvalue.
 * Gradient rules: ops/sort_grad.c; kernels: kernels/cpu/sort.c, kernels/cuda/sort.cu.
 *
 * Every op orders the elements of each line along one dim (attrs.ints[0], 0-based; negative
 * wraps) and returns the values it picks, in x's dtype, and their int64 positions along that dim
 * (relative to attrs.index_base). The order is total: NaN counts as larger than every number
 * (all NaNs equal), -0.0 equals 0.0, and equal elements keep their order in x (a stable sort;
 * for descending orders too). topk and kthvalue pick exactly the elements a stable sort would
 * put at those places, so ties go to the lower index.
 *
 * The kernels get x as it is (any strides, its own dtype) and fresh contiguous outputs laid out
 * as x's shape with the dim sized m (n for sort, k for topk, 1 for kthvalue, whose output without
 * keepdim drops that dim, the same elements in the same order). A caller's outputs are written
 * as the reductions' are (dle_reduce_run_into): directly when contiguous and apart from x, else
 * through a copy. */
#include "../internal.h"
#include "reduce_front.h"

/* Longest line the kernels index with 32 bits. */
#define SORT_MAX_LINE ((int64_t)UINT32_MAX)

/* How many elements of each line the op returns (m), checking k against the line's size n. */
static dle_status picked(dle_op op, const char *fn, const dle_tensor *x, int d, const dle_attrs *a,
                         int64_t *m) {
  int64_t n = x->sizes[d], k = a->ints[1];
  if (op == DLE_OP_SORT) {
    *m = n;
  } else if (op == DLE_OP_TOPK) {
    if (k < 0 || k > n)
      return dle_error(
          "%s: k = %lld out of range for dim %d of size %lld (shape %s; valid: 0..%lld)", fn,
          (long long)k, d + 1, (long long)n, SHAPE(x), (long long)n);
    *m = k;
  } else {
    if (n == 0)
      return dle_error("%s: dim %d of shape %s is empty: there is no k-th value", fn, d + 1,
                       SHAPE(x));
    if (k < 1 || k > n)
      return dle_error(
          "%s: k = %lld out of range for dim %d of size %lld (shape %s; valid: 1..%lld)", fn,
          (long long)k, d + 1, (long long)n, SHAPE(x), (long long)n);
    *m = 1;
  }
  if (n > SORT_MAX_LINE)
    return dle_error("%s: dim %d of shape %s has more than %lld elements", fn, d + 1, SHAPE(x),
                     (long long)SORT_MAX_LINE);
  return DLE_OK;
}

DLE_FORWARD_RULE(sort) {
  const char *fn = dle_op_get_info(op)->name;
  dle_tensor *x = ins[0];
  int d = 0;
  int64_t m = 0;
  DLE_TRY(dle_line_dim(fn, x, a->nints > 0 ? a->ints[0] : -1, &d));
  DLE_TRY(picked(op, fn, x, d, a, &m));

  int64_t sizes[DLE_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < x->ndim; i++)
    if (i != d || op != DLE_OP_KTHVALUE || a->keepdim) sizes[nd++] = i == d ? m : x->sizes[i];
  dle_attrs ka = *a;
  ka.ints[0] = d;
  ka.nints = a->nints > 1 ? a->nints : 1;
  dle_dtype dts[2] = {x->dtype, DLE_I64};
  return dle_reduce_run_into(op, outs, 2, nd, sizes, dts, x, x->dtype, &ka);
}

/* FLOPs: one per input element, as for a reduction (each element becomes one key; the radix
 * passes are data movement). */
dle_flops_rule dle_flops_sort(dle_op op) {
  (void)op;
  return dle_flops_per_in(1);
}
