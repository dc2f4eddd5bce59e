/* reduce_front.h — what the front doors of the reductions (reduce.c), softmax (softmax.c), sort
 * (sort.c) and select (select.c) share; defined in reduce.c. */
#ifndef DLE_OPS_REDUCE_FRONT_H
#define DLE_OPS_REDUCE_FRONT_H

#include "../internal.h"

/* Wraps dim into 0..ndim-1; a 0-dim tensor accepts 0 and -1 (its one element), reported as *out
 * -1. Messages print dims 1-based, as Lua users wrote them. */
dle_status dle_reduce_wrap_dim(const char *fn, const dle_tensor *x, int64_t dim, int *out);
/* The same for ops along the lines of a dim (sort, topk, kthvalue, mode), which need x to have
 * at least one dim. */
dle_status dle_line_dim(const char *fn, const dle_tensor *x, int64_t dim, int *out);
/* Runs op's kernel on x (cast to compute) into outs[0..nout) of shape {sizes} and dtypes dts;
 * NULL slots receive new tensors, a caller's strided or overlapping output gets a copy. */
dle_status dle_reduce_run_into(dle_op op, dle_tensor **outs, int nout, int ndim,
                               const int64_t *sizes, const dle_dtype *dts, dle_tensor *x,
                               dle_dtype compute, const dle_attrs *ka);
/* An error "<what>: <op> is not a <what> op" unless op is of the given kind. */
dle_status dle_check_op_kind(dle_op op, dle_op_kind kind, const char *what);

#endif
