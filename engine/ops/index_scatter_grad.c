/* index_scatter_grad.c — reverse (vjp) and forward (jvp) rules of scatter and scatter_reduce
 * (engine/ops/index.c), registered through dle_grad_register_index.
 *
 * scatter: d out = scatter(d self, index, d src); self's gradient is g where nothing was written,
 * src's is g gathered at index (as PyTorch, duplicates each get it).
 * scatter_reduce is linear in its tangents with coefficients (PyTorch's rules):
 *   d out = scatter_add(d self * Cs, index, d src * Cr),  so  g self = g Cs,  g src = gather(g) Cr,
 * with P = 1 where self takes part (everywhere with include_self, else where nothing was
 * scattered) and N the number of elements combined into each output element:
 *   sum   Cs = P,            Cr = 1
 *   mean  Cs = P / N,        Cr = gather(1 / N)
 *   amax, amin  Cs = P [self == out] / M, Cr = [src == gather(out)] gather(1 / M), M the number
 *         of elements equal to the result (ties share the gradient evenly)
 *   prod  the product of the other elements: out / v for v != 0; for a zero, the product of the
 *         others when it is the only zero of its output element (else 0).
 * Every coefficient is computed with dle ops, so gradients of gradients work. scatter keeps only
 * index and src; scatter_reduce also self and its result (recorded in place, scatter_reduce_'s
 * backward then fails naming the overwritten input, as for other ops that need their input). */
#include "../internal.h"
#include "index_scatter.h"

/* Temporaries of one rule: every tensor made is kept here and released at the end; after the
 * first failure every step returns NULL and the status stays the failure. (Each step calls the op
 * before keep(): the order arguments are evaluated in is unspecified.) */
typedef struct {
  dle_tensor *t[48];
  int n;
  dle_status st;
  dle_tensor *index;
  int dim;
  int64_t base;
} pool;

static dle_tensor *keep(pool *p, dle_status st, dle_tensor *t) {
  if (st == DLE_OK && p->n == (int)(sizeof p->t / sizeof p->t[0])) {
    st = dle_error("scatter_reduce: too many temporaries in a gradient rule");
  }
  if (st != DLE_OK) {
    dle_tensor_release(t);
    p->st = DLE_ERR;
    return NULL;
  }
  return p->t[p->n++] = t;
}

typedef dle_status (*binary_fn)(dle_tensor **, dle_tensor *, dle_tensor *);

static dle_tensor *bin(pool *p, binary_fn f, dle_tensor *a, dle_tensor *b) {
  if (p->st != DLE_OK || !a || !b) return NULL;
  dle_tensor *r = NULL;
  dle_status st = f(&r, a, b);
  return keep(p, st, r);
}

/* a as a float tensor of dtype like's (comparisons give bool) */
static dle_tensor *as(pool *p, dle_tensor *a, const dle_tensor *like) {
  if (p->st != DLE_OK || !a) return NULL;
  dle_tensor *r = NULL;
  dle_status st = dle_to_dtype(&r, a, like->dtype);
  return keep(p, st, r);
}

static dle_tensor *full(pool *p, const dle_tensor *like, double v) {
  if (p->st != DLE_OK) return NULL;
  dle_tensor *r = NULL;
  dle_status st = dle_full(&r, like->ndim, like->sizes, v, like->dtype);
  return keep(p, st, r);
}

static dle_tensor *scalar(pool *p, double v, const dle_tensor *like) {
  if (p->st != DLE_OK) return NULL;
  dle_tensor *r = NULL;
  dle_status st = dle_scalar_tensor(&r, v, like->dtype);
  return keep(p, st, r);
}

static dle_tensor *gather(pool *p, dle_tensor *t) {
  if (p->st != DLE_OK || !t) return NULL;
  dle_tensor *r = NULL;
  dle_status st = dle_gather(&r, t, p->dim, p->index, p->base);
  return keep(p, st, r);
}

/* scatter_reduce (r a reduction), scatter_add (r 0) or scatter (r -1) of src into self */
static dle_tensor *scat(pool *p, dle_tensor *self, dle_tensor *src, int r, bool include_self) {
  if (p->st != DLE_OK || !self || !src) return NULL;
  dle_tensor *o = NULL;
  dle_status st = r > 0    ? dle_scatter_reduce(&o, self, p->dim, p->index, src,
                                                (dle_scatter_reduction)r, include_self, p->base)
                  : r == 0 ? dle_scatter_add(&o, self, p->dim, p->index, src, p->base)
                           : dle_scatter(&o, self, p->dim, p->index, src, p->base);
  return keep(p, st, o);
}

static dle_tensor *where(pool *p, dle_tensor *c, dle_tensor *a, dle_tensor *b) {
  if (p->st != DLE_OK || !c || !a || !b) return NULL;
  dle_tensor *r = NULL;
  dle_status st = dle_where(&r, c, a, b);
  return keep(p, st, r);
}

/* src narrowed to index's shape (src may be larger; only that part is read). */
static dle_tensor *src_part(pool *p, dle_tensor *src) {
  dle_tensor *cur = src;
  for (int d = 0; d < src->ndim && p->st == DLE_OK; d++) {
    if (cur->sizes[d] == p->index->sizes[d]) continue;
    dle_tensor *r = NULL;
    dle_status st = dle_narrow(&r, cur, d, 0, p->index->sizes[d]);
    cur = keep(p, st, r);
  }
  return cur;
}

/* P: 1 where self takes part in its output element, as self's dtype. */
static dle_tensor *self_part(pool *p, dle_tensor *self, dle_tensor *src, bool include_self) {
  if (include_self) return full(p, self, 1);
  return scat(p, full(p, self, 1), full(p, src, 0), -1, false);
}

/* The coefficients Cs and Cr (NULL: 1) of reduction r (0: scatter's Cs only). */
static void coefficients(pool *p, int r, bool include_self, dle_tensor *self, dle_tensor *src,
                         dle_tensor *out, dle_tensor **cs, dle_tensor **cr) {
  dle_tensor *P = self_part(p, self, src, include_self);
  *cs = P, *cr = NULL;
  if (r == 0 || r == DLE_SCATTER_SUM) return;
  dle_tensor *one = scalar(p, 1, self);
  if (r == DLE_SCATTER_MEAN) {
    dle_tensor *inv = bin(p, dle_div, one, scat(p, P, full(p, src, 1), 0, true));
    *cs = bin(p, dle_mul, P, inv);
    *cr = gather(p, inv);
  } else if (r == DLE_SCATTER_AMAX || r == DLE_SCATTER_AMIN) {
    dle_tensor *ms = bin(p, dle_mul, P, as(p, bin(p, dle_eq, self, out), self));
    dle_tensor *mr = as(p, bin(p, dle_eq, src, gather(p, out)), src);
    dle_tensor *inv = bin(p, dle_div, one, scat(p, ms, mr, 0, true));
    *cs = bin(p, dle_mul, ms, inv);
    *cr = bin(p, dle_mul, mr, gather(p, inv));
  } else { /* prod */
    dle_tensor *zero = scalar(p, 0, self);
    dle_tensor *self_zero = bin(p, dle_eq, self, zero), *src_zero = bin(p, dle_eq, src, zero);
    dle_tensor *self_nz = where(p, self_zero, one, self), *src_nz = where(p, src_zero, one, src);
    dle_tensor *zeros =
        scat(p, bin(p, dle_mul, P, as(p, self_zero, self)), as(p, src_zero, src), 0, true);
    dle_tensor *others = scat(p, self_nz, src_nz, DLE_SCATTER_PROD, include_self);
    dle_tensor *lone = where(p, bin(p, dle_eq, zeros, one), others, full(p, self, 0));
    *cs = bin(p, dle_mul, P, where(p, self_zero, lone, bin(p, dle_div, out, self_nz)));
    *cr = where(p, src_zero, gather(p, lone), bin(p, dle_div, gather(p, out), src_nz));
  }
}

static void pool_start(pool *p, const dle_attrs *a, dle_tensor *index) {
  memset(p, 0, sizeof *p);
  p->index = index;
  p->dim = (int)a->ints[0];
  p->base = a->index_base;
}

static dle_status pool_end(pool *p) {
  for (int i = 0; i < p->n; i++) dle_tensor_release(p->t[i]);
  return p->st;
}

/* Hands t (kept in the pool) over as a new reference. */
static void give(dle_tensor **slot, dle_tensor *t) {
  if (!t) return;
  dle_tensor_retain(t);
  *slot = t;
}

static int reduction_of(dle_op op, const dle_attrs *a) {
  return op == DLE_OP_SCATTER ? 0 : (int)a->ints[1];
}

static dle_status vjp_scatter(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  if (!gout[0]) return DLE_OK;
  const dle_attrs *a = dle_node_attrs(n);
  dle_op op = dle_node_op(n);
  int r = reduction_of(op, a);
  bool include_self = op == DLE_OP_SCATTER ? false : a->ints[2];
  pool p;
  pool_start(&p, a, dle_node_input(n, 1));
  dle_tensor *src = src_part(&p, dle_node_input(n, 2)), *cs = NULL, *cr = NULL, *self = NULL;
  if (r == 0) { /* scatter keeps no values of self (scatter_ may overwrite them): its shape */
    dle_status st = dle_node_zeros_input(&self, n, 0);
    self = keep(&p, st, self);
  } else {
    self = dle_node_input(n, 0);
  }
  if (self)
    coefficients(&p, r, include_self, self, src, r ? dle_node_output(n, 0) : NULL, &cs, &cr);
  if (dle_node_needs_grad(n, 0)) give(&gin[0], bin(&p, dle_mul, gout[0], cs));
  if (dle_node_needs_grad(n, 2)) {
    dle_tensor *g = gather(&p, gout[0]);
    if (cr) g = bin(&p, dle_mul, g, cr);
    if (g && p.st == DLE_OK) {
      gin[2] = NULL;
      p.st = dle_index_pad_to(&gin[2], g, dle_node_input_ndim(n, 2), dle_node_input_sizes(n, 2));
    }
  }
  return pool_end(&p);
}

DLE_JVP_RULE(jvp_scatter) {
  if (!tin[0] && !tin[2]) return DLE_OK;
  int r = reduction_of(op, a);
  bool include_self = op == DLE_OP_SCATTER ? false : a->ints[2];
  pool p;
  pool_start(&p, a, ins[1]);
  dle_tensor *src = src_part(&p, ins[2]), *cs = NULL, *cr = NULL;
  dle_tensor *ts = tin[0] ? tin[0] : full(&p, ins[0], 0);
  dle_tensor *tr = tin[2] ? src_part(&p, tin[2]) : full(&p, src, 0);
  if (r == 0) {
    give(&tout[0], scat(&p, ts, tr, -1, false));
    return pool_end(&p);
  }
  if (r == DLE_SCATTER_SUM || r == DLE_SCATTER_MEAN) { /* linear: the op on the tangents */
    give(&tout[0], scat(&p, ts, tr, r, include_self));
    return pool_end(&p);
  }
  coefficients(&p, r, include_self, ins[0], src, outs[0], &cs, &cr);
  give(&tout[0], scat(&p, bin(&p, dle_mul, ts, cs), cr ? bin(&p, dle_mul, tr, cr) : tr, 0, true));
  return pool_end(&p);
}

void dle_grad_register_index_scatter(dle_grad_rule *r) {
  r[DLE_OP_SCATTER] = (dle_grad_rule){vjp_scatter, jvp_scatter, DLE_SAVE(1) | DLE_SAVE(2), false};
  r[DLE_OP_SCATTER_REDUCE] = (dle_grad_rule){vjp_scatter, jvp_scatter, DLE_SAVE_ALL, DLE_SAVE(0)};
}
