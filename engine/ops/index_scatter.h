/* index_scatter.h — what the index family's gradient files share (engine/ops/index_grad.c,
 * engine/ops/index_scatter_grad.c). */
#ifndef DLE_OPS_INDEX_SCATTER_H
#define DLE_OPS_INDEX_SCATTER_H

#include "../autograd.h"

/* t padded with trailing zeros up to (ndim, sizes) in every dim where it is shorter
 * (differentiable: written as cats). */
dle_status dle_index_pad_to(dle_tensor **out, dle_tensor *t, int ndim, const int64_t *sizes);
/* The rules of scatter and scatter_reduce, registered by dle_grad_register_index. */
void dle_grad_register_index_scatter(dle_grad_rule *r);

#endif
