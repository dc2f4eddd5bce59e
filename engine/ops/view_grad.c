/* view_grad.c — reverse (vjp) and forward (jvp) rules of the view ops (engine/ops/view.c),
 * registered by dle_grad_register_view (engine/ops/families.def). */
#include "../autograd.h"
#include "../internal.h"

#include <stdlib.h>

/* ---- gradients: reverse (vjp) and forward (jvp) rules, written with dle ops ---- */

/* A zero tensor of the given shape with g's dtype, on g's device (padding for narrow/select). */
static dle_status zeros_like_g(dle_tensor **out, dle_tensor *g, int ndim, const int64_t *sizes) {
  dle_tensor *z = NULL;
  DLE_TRY(dle_zeros(&z, ndim, sizes, g->dtype));
  if (dle_tensor_device(g).type == DLE_CPU) {
    *out = z;
    return DLE_OK;
  }
  *out = NULL;
  dle_status st = dle_to_device(out, z, dle_tensor_device(g));
  dle_tensor_release(z);
  return st;
}

/* g placed at [start, start + g->sizes[dim]) along dim of a zero tensor of shape (ndim, sizes):
 * cat(zeros before, g, zeros after), so the result stays differentiable in g (no in-place). */
dle_status dle_zero_pad_along(dle_tensor **out, dle_tensor *g, int dim, int64_t start, int ndim,
                              const int64_t *sizes) {
  int64_t len = g->sizes[dim], after = sizes[dim] - start - len;
  if (start == 0 && after == 0) {
    dle_tensor_retain(g);
    *out = g;
    return DLE_OK;
  }
  dle_tensor *parts[3] = {NULL, NULL, NULL};
  int np = 0;
  int64_t bs[DLE_MAX_DIMS];
  memcpy(bs, sizes, (size_t)ndim * sizeof *bs);
  dle_status st = DLE_OK;
  if (start > 0) {
    bs[dim] = start;
    st = zeros_like_g(&parts[np++], g, ndim, bs);
  }
  if (st == DLE_OK) {
    dle_tensor_retain(g);
    parts[np++] = g;
  }
  if (st == DLE_OK && after > 0) {
    bs[dim] = after;
    st = zeros_like_g(&parts[np++], g, ndim, bs);
  }
  *out = NULL;
  if (st == DLE_OK) st = dle_cat(out, parts, np, dim);
  for (int i = 0; i < np; i++) dle_tensor_release(parts[i]);
  return st;
}

/* t (a gradient or tangent) retyped as view_as_real / view_as_complex do: to dtype dt */
static dle_status retype(dle_tensor **out, dle_tensor *t, dle_dtype dt) {
  if (dle_dtype_is_complex(dt)) return dle_view_as_complex_any(out, t);
  return dle_view_as_real(out, t);
}

/* view: d x = reshape(d y, shape of x); forward: d y = reshape(d x, shape of y). With a dtype
 * (view_as_real / view_as_complex) the same reinterpretation of the (re, im) pairs, backwards
 * to x's dtype, forwards to y's: both are linear over the reals and keep each number in place. */
static dle_status vjp_view(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (dle_node_attrs(n)->has_dtype) return retype(&gin[0], gout[0], dle_node_input_dtype(n, 0));
  return dle_reshape(&gin[0], gout[0], dle_node_input_ndim(n, 0), dle_node_input_sizes(n, 0));
}

DLE_JVP_RULE(jvp_view) {
  if (a->has_dtype) return retype(&tout[0], tin[0], outs[0]->dtype);
  return dle_reshape(&tout[0], tin[0], outs[0]->ndim, outs[0]->sizes);
}

/* permute by p: d x = permute(d y, p^-1); forward: d y = permute(d x, p) */
static dle_status vjp_permute(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  const dle_attrs *a = dle_node_attrs(n);
  int nd = dle_node_input_ndim(n, 0), inv[DLE_MAX_DIMS], d0;
  for (int d = 0; d < nd; d++) {
    DLE_TRY(dle_wrap_dim("permute", (int)a->ints[d], nd, 0, &d0));
    inv[d0] = d;
  }
  return dle_permute(&gin[0], gout[0], inv);
}

/* The dim (wrapped) and the position along it (a negative one counts from the end) of a narrow
 * or select node: its attrs ints {dim, start or index}. */
static dle_status dim_and_position(dle_node *n, const char *fn, int *dim, int64_t *pos) {
  const dle_attrs *a = dle_node_attrs(n);
  DLE_TRY(dle_wrap_dim(fn, (int)a->ints[0], dle_node_input_ndim(n, 0), 0, dim));
  *pos = a->ints[1] < 0 ? a->ints[1] + dle_node_input_sizes(n, 0)[*dim] : a->ints[1];
  return DLE_OK;
}

/* narrow(dim, start, len): d x = d y padded with zeros outside [start, start + len) */
static dle_status vjp_narrow(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  int dim;
  int64_t start;
  DLE_TRY(dim_and_position(n, "narrow", &dim, &start));
  return dle_zero_pad_along(&gin[0], gout[0], dim, start, dle_node_input_ndim(n, 0),
                            dle_node_input_sizes(n, 0));
}

/* select(dim, i): d x = unsqueeze(d y, dim) padded with zeros at every other index */
static dle_status vjp_select(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  int dim;
  int64_t index;
  DLE_TRY(dim_and_position(n, "select", &dim, &index));
  dle_tensor *u = NULL;
  DLE_TRY(dle_unsqueeze(&u, gout[0], dim));
  dle_status st = dle_zero_pad_along(&gin[0], u, dim, index, dle_node_input_ndim(n, 0),
                                     dle_node_input_sizes(n, 0));
  dle_tensor_release(u);
  return st;
}

/* permute, narrow, select, expand: forward, the tangent takes the same view (same attrs) */
DLE_JVP_RULE(jvp_same_view) { return dle_op_call(op, &tout[0], &tin[0], 1, a); }

/* expand: d x = d y summed over the broadcast dims (dle_sum_to) */
static dle_status vjp_expand(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  return dle_grad_to_input(n, 0, gout[0], gin);
}

/* diagonal(offset, dim1, dim2): d x = zeros of x's shape with d y on that diagonal */
static dle_status vjp_diagonal(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  const dle_attrs *a = dle_node_attrs(n);
  int nd = dle_node_input_ndim(n, 0), d1, d2;
  const int64_t *sizes = dle_node_input_sizes(n, 0);
  DLE_TRY(dle_wrap_dim("diagonal", (int)a->ints[1], nd, 0, &d1));
  DLE_TRY(dle_wrap_dim("diagonal", (int)a->ints[2], nd, 0, &d2));
  if (!dle_dtype_is_complex(gout[0]->dtype))
    return dle_diag_embed(&gin[0], gout[0], a->ints[0], d1, d2, sizes[d1], sizes[d2]);
  /* diag_embed (a pad) has no complex kernel: it is linear, so each part goes alone */
  dle_tensor *p[2] = {NULL, NULL}, *e[2] = {NULL, NULL};
  dle_status st = dle_real_part(&p[0], gout[0]);
  if (st == DLE_OK) st = dle_imag_part(&p[1], gout[0]);
  for (int k = 0; k < 2 && st == DLE_OK; k++)
    st = dle_diag_embed(&e[k], p[k], a->ints[0], d1, d2, sizes[d1], sizes[d2]);
  if (st == DLE_OK) st = dle_complex_from_parts(&gin[0], e[0], e[1]);
  dle_release_all(p, 2);
  dle_release_all(e, 2);
  return st;
}

void dle_grad_register_view(dle_grad_rule *r) {
  r[DLE_OP_VIEW] = (dle_grad_rule){vjp_view, jvp_view, 0, false};
  r[DLE_OP_PERMUTE] = (dle_grad_rule){vjp_permute, jvp_same_view, 0, false};
  r[DLE_OP_NARROW] = (dle_grad_rule){vjp_narrow, jvp_same_view, 0, false};
  r[DLE_OP_SELECT] = (dle_grad_rule){vjp_select, jvp_same_view, 0, false};
  r[DLE_OP_EXPAND] = (dle_grad_rule){vjp_expand, jvp_same_view, 0, false};
  r[DLE_OP_DIAGONAL] = (dle_grad_rule){vjp_diagonal, jvp_same_view, 0, false};
}
