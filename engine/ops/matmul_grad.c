/* matmul_grad.c — reverse (vjp) and forward (jvp) rules of the matmul ops (engine/ops/matmul.c),
 * registered by dle_grad_register_matmul (engine/ops/families.def). */
#include "../autograd.h"
#include "../internal.h"

#include <stdlib.h>

/* ---- gradients: reverse (vjp) and forward (jvp) rules, written with dle ops ---- */

/* x with its last two dims swapped (x has at least 2 dims). */
static dle_status mT(dle_tensor **out, dle_tensor *x) {
  *out = NULL;
  return dle_transpose(out, x, -2, -1);
}

/* x's conjugate transpose (x^T for a real x): a complex product's operands go back conjugated */
static dle_status mH(dle_tensor **out, dle_tensor *x) {
  dle_tensor *t = NULL;
  DLE_TRY(mT(&t, x));
  if (!dle_dtype_is_complex(t->dtype)) {
    *out = t;
    return DLE_OK;
  }
  dle_status st = dle_conj(out, t);
  dle_tensor_release(t);
  return st;
}

/* A 1-D operand as a 2-D one: a row {1,K} on the left, a column {K,1} on the right; 2-D and up
 * retained as they are. */
static dle_status as_matrix(dle_tensor **out, dle_tensor *t, bool is_left) {
  *out = NULL;
  if (t->ndim >= 2) {
    dle_tensor_retain(t);
    *out = t;
    return DLE_OK;
  }
  return dle_unsqueeze(out, t, is_left ? 0 : 1);
}

/* The product of a and b summed to the shape (ndim, sizes) of the operand it is the gradient of;
 * drop (-2 or -1, else 0) is the size-1 dim a 1-D operand gained in as_matrix. */
static dle_status mm_grad(dle_tensor **out, dle_tensor *a, dle_tensor *b, int drop, int ndim,
                          const int64_t *sizes) {
  dle_tensor *p = NULL, *q = NULL;
  DLE_TRY(dle_matmul(&p, a, b));
  dle_status st = DLE_OK;
  if (drop) {
    st = dle_squeeze(&q, p, drop);
    dle_tensor_release(p);
    p = q;
  }
  *out = NULL;
  if (st == DLE_OK) st = dle_sum_to(out, p, ndim, sizes);
  dle_tensor_release(p);
  return st;
}

/* Is the matrix x stored transposed ({M, N} with strides {1, M}), as Linear's weight is when
 * used as w^T? */
static bool is_transposed_matrix(const dle_tensor *x) {
  return x->ndim == 2 && x->sizes[0] > 1 && x->sizes[1] > 1 && x->strides[0] == 1 &&
         x->strides[1] == x->sizes[0];
}

/* The gradient x y of a 2-D operand `like` that is stored transposed, laid out like it: computed
 * as (y^T x^T)^T, which gemm does with transpose flags. Its transpose, the parameter's gradient,
 * is then dense, so .grad needs no copy and accumulates in place (as PyTorch's mm backward). */
static dle_status mm_grad_transposed(dle_tensor **out, dle_tensor *x, dle_tensor *y) {
  dle_tensor *xt = NULL, *yt = NULL, *p = NULL;
  dle_status st = mT(&xt, x);
  if (st == DLE_OK) st = mT(&yt, y);
  if (st == DLE_OK) st = dle_matmul(&p, yt, xt);
  if (st == DLE_OK) st = mT(out, p);
  dle_tensor_release(xt);
  dle_tensor_release(yt);
  dle_tensor_release(p);
  return st;
}

/* c = a b: d a = d c b^H, d b = a^H d c (summed over broadcast batch dims; 1-D operands as a row
 * on the left, a column on the right, whose extra dim the result drops) */
static dle_status vjp_matmul(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  dle_tensor *a = dle_node_input(n, 0), *b = dle_node_input(n, 1);
  int na = dle_node_input_ndim(n, 0), nb = dle_node_input_ndim(n, 1);
  /* the gradient with the dims the result dropped put back: {batch..., M or 1, N or 1} */
  dle_tensor *g = NULL, *a2 = NULL, *b2 = NULL, *t = NULL;
  int64_t gs[DLE_MAX_DIMS];
  int gnd = gout[0]->ndim;
  memcpy(gs, gout[0]->sizes, (size_t)gnd * sizeof *gs);
  if (na == 1) {
    gs[gnd] = nb == 1 ? 1 : gs[gnd - 1];
    if (nb != 1) gs[gnd - 1] = 1;
    gnd++;
  }
  if (nb == 1) gs[gnd++] = 1;
  dle_status st = dle_reshape(&g, gout[0], gnd, gs);
  if (st == DLE_OK) st = as_matrix(&a2, a, true);
  if (st == DLE_OK) st = as_matrix(&b2, b, false);
  bool plain = na == 2 && nb == 2; /* no batch dims to sum over */
  /* operand i's gradient: g times the other operand conjugate-transposed, on the side i stands on */
  dle_tensor *const ops[2] = {a, b}, *const mats[2] = {b2, a2};
  const int nds[2] = {na, nb}, drops[2] = {-2, -1};
  for (int i = 0; i < 2 && st == DLE_OK; i++) {
    if (!dle_node_needs_grad(n, i)) continue;
    st = mH(&t, mats[i]);
    dle_tensor *x = i == 0 ? g : t, *y = i == 0 ? t : g;
    if (st == DLE_OK && plain && is_transposed_matrix(ops[i]))
      st = mm_grad_transposed(&gin[i], x, y);
    else if (st == DLE_OK)
      st = mm_grad(&gin[i], x, y, nds[i] == 1 ? drops[i] : 0, nds[i], dle_node_input_sizes(n, i));
    DLE_RELEASE(t);
  }
  /* d c = d out summed over the dims c was broadcast along */
  if (st == DLE_OK && dle_node_num_inputs(n) == 3 && dle_node_needs_grad(n, 2))
    st = dle_grad_to_input(n, 2, gout[0], gin);
  dle_tensor_release(g);
  dle_tensor_release(a2);
  dle_tensor_release(b2);
  return st;
}

/* d(a b) = da b + a db */
DLE_JVP_RULE(jvp_matmul) {
  DLE_TRY(dle_jvp_bilinear(DLE_OP_MATMUL, NULL, ins[0], ins[1], tin[0], tin[1], &tout[0]));
  if (nin < 3 || !tin[2]) return DLE_OK; /* + d c, broadcast like c */
  if (!tout[0]) {
    dle_tensor *z = NULL;
    DLE_TRY(dle_full_on(&z, outs[0]->ndim, outs[0]->sizes, 0, outs[0]->dtype,
                        dle_tensor_device(outs[0])));
    tout[0] = z;
  }
  dle_tensor *sum = NULL;
  dle_status st = dle_binary(DLE_OP_ADD, &sum, tout[0], tin[2]);
  dle_tensor_release(tout[0]);
  tout[0] = sum;
  return st;
}

void dle_grad_register_matmul(dle_grad_rule *r) {
  r[DLE_OP_MATMUL] = (dle_grad_rule){vjp_matmul, jvp_matmul, DLE_SAVE(0) | DLE_SAVE(1), false};
}
