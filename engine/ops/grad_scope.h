/* grad_scope.h — building blocks of gradient rules written as composites of dle ops (nn_grad.c,
 * attention_grad.c, losses_grad.c): a scope owns the temporaries, each helper is a no-op once a call has failed. */
#ifndef DLE_OPS_GRAD_SCOPE_H
#define DLE_OPS_GRAD_SCOPE_H

#include "../autograd.h"

/* ---- a scope of temporaries: each helper returns a tensor the scope owns (NULL once something
 * failed, and then every later helper is a no-op), give() hands one out, scope_end() frees the
 * rest and returns the status. */
#define SCOPE_MAX 96
typedef struct {
  dle_tensor *held[SCOPE_MAX];
  int n;
  dle_status st;
} scope;

/* *r is read here, after the call that fills it has run (C leaves the order of evaluation of a
 * call's arguments unspecified, so the tensor itself cannot be passed alongside the status). */
static inline dle_tensor *keep(scope *s, dle_status st, dle_tensor **r) {
  dle_tensor *t = *r;
  if (st != DLE_OK || s->st != DLE_OK || s->n == SCOPE_MAX) {
    if (st == DLE_OK && s->st == DLE_OK) dle_error("nn gradient rule: too many temporaries");
    s->st = DLE_ERR;
    dle_tensor_release(t);
    return NULL;
  }
  s->held[s->n++] = t;
  return t;
}

static inline dle_tensor *give(scope *s, dle_tensor *t) {
  if (s->st != DLE_OK || !t) return NULL;
  dle_tensor_retain(t);
  return t;
}

static inline dle_status scope_end(scope *s, dle_tensor **given, int n) {
  for (int i = 0; i < s->n; i++) dle_tensor_release(s->held[i]);
  if (s->st != DLE_OK)
    for (int i = 0; i < n; i++) DLE_RELEASE(given[i]);
  return s->st;
}

static inline bool ok(scope *s) { return s->st == DLE_OK; }

static inline dle_tensor *bin(scope *s, dle_op op, dle_tensor *a, dle_tensor *b) {
  dle_tensor *r = NULL;
  return ok(s) ? keep(s, dle_binary(op, &r, a, b), &r) : NULL;
}
static inline dle_tensor *muls(scope *s, dle_tensor *a, double c) {
  dle_tensor *r = NULL;
  return ok(s) ? keep(s, dle_binary_scalar(DLE_OP_MUL, &r, a, c, false), &r) : NULL;
}
static inline dle_tensor *adds(scope *s, dle_tensor *a, double c) {
  dle_tensor *r = NULL;
  return ok(s) ? keep(s, dle_binary_scalar(DLE_OP_ADD, &r, a, c, false), &r) : NULL;
}
/* a + b where either may be NULL (zero) */
static inline dle_tensor *add_opt(scope *s, dle_tensor *a, dle_tensor *b) {
  if (!a) return b;
  if (!b) return a;
  return bin(s, DLE_OP_ADD, a, b);
}
static inline dle_tensor *unary(scope *s, dle_op op, dle_tensor *a) {
  dle_tensor *r = NULL;
  return ok(s) ? keep(s, dle_unary(op, &r, a), &r) : NULL;
}
/* sum over the last dim (kept as size 1 when keepdim) */
static inline dle_tensor *rowsum(scope *s, dle_tensor *a, bool keepdim) {
  dle_tensor *r = NULL;
  if (!ok(s)) return NULL;
  int d = a->ndim - 1;
  return keep(s, dle_reduce(DLE_OP_SUM, &r, a, 1, &d, keepdim, 0), &r);
}
/* P (X - rowsum(P X)): the softmax's tangent map (and, P being symmetric in it, its adjoint) */
static inline dle_tensor *softmax_jvp(scope *s, dle_tensor *p, dle_tensor *x) {
  return bin(s, DLE_OP_MUL, p, bin(s, DLE_OP_SUB, x, rowsum(s, bin(s, DLE_OP_MUL, p, x), true)));
}
static inline dle_tensor *sumall(scope *s, dle_tensor *a) {
  dle_tensor *r = NULL;
  return ok(s) ? keep(s, dle_reduce(DLE_OP_SUM, &r, a, 0, NULL, false, 0), &r) : NULL;
}
static inline dle_tensor *unsq(scope *s, dle_tensor *a, int dim) {
  dle_tensor *r = NULL;
  return ok(s) ? keep(s, dle_unsqueeze(&r, a, dim), &r) : NULL;
}
static inline dle_tensor *mm(scope *s, dle_tensor *a, dle_tensor *b) {
  dle_tensor *r = NULL;
  return ok(s) ? keep(s, dle_matmul(&r, a, b), &r) : NULL;
}
/* swap the last two dims */
static inline dle_tensor *tr(scope *s, dle_tensor *a) {
  dle_tensor *r = NULL;
  return ok(s) ? keep(s, dle_transpose(&r, a, a->ndim - 2, a->ndim - 1), &r) : NULL;
}
static inline dle_tensor *sum_to(scope *s, dle_tensor *a, int ndim, const int64_t *sizes) {
  dle_tensor *r = NULL;
  return ok(s) ? keep(s, dle_sum_to(&r, a, ndim, sizes), &r) : NULL;
}
static inline dle_tensor *to_dtype(scope *s, dle_tensor *a, dle_dtype dt) {
  dle_tensor *r = NULL;
  return ok(s) ? keep(s, dle_to_dtype(&r, a, dt), &r) : NULL;
}
static inline dle_tensor *call(scope *s, dle_op op, dle_tensor *const *ins, int nin,
                               const dle_attrs *a) {
  dle_tensor *r = NULL;
  return ok(s) ? keep(s, dle_op_call(op, &r, ins, nin, a), &r) : NULL;
}
#endif
