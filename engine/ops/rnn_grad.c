/* rnn_grad.c — reverse (vjp) and forward (jvp) rules of the fused recurrent cells
 * (engine/ops/rnn.c), registered by dle_grad_register_rnn.
 *
 * The reverse rules run the one-pass backward op (lstm_cell_fused_backward, gru_cell_fused_backward) when the
 * backward pass is not recorded and only h' / c' have gradients: the common training step. With
 * create_graph, or a gradient on the act output, they compose dle ops instead (the same formulas,
 * differentiable again; act, an output of the node, then carries its history), as PyTorch does
 * with its differentiable LSTM cell backward. The forward rules are compositions. Gates are blocks
 * of H columns: LSTM i, f, g, o; GRU r, z, n (act adds hg_n as a fourth block). */
#include "grad_scope.h"

/* block k of H columns of t {N, kH} (a view) */
static dle_tensor *blk(scope *s, dle_tensor *t, int k, int64_t h) {
  dle_tensor *r = NULL;
  return ok(s) ? keep(s, dle_narrow(&r, t, 1, k * h, h), &r) : NULL;
}

static dle_tensor *cat_blocks(scope *s, dle_tensor *const *parts, int n) {
  dle_tensor *r = NULL;
  return ok(s) ? keep(s, dle_cat(&r, parts, n, 1), &r) : NULL;
}

/* 1 - x */
static dle_tensor *one_minus(scope *s, dle_tensor *x) {
  dle_tensor *r = NULL;
  return ok(s) ? keep(s, dle_binary_scalar(DLE_OP_SUB, &r, x, 1, true), &r) : NULL;
}

/* sigmoid' from the sigmoid's value y: y (1 - y); tanh' from its value: 1 - y^2 */
static dle_tensor *dsig(scope *s, dle_tensor *y) { return bin(s, DLE_OP_MUL, y, one_minus(s, y)); }
static dle_tensor *dtanh(scope *s, dle_tensor *y) { return one_minus(s, bin(s, DLE_OP_MUL, y, y)); }

/* t, or zeros shaped like `like` when t is NULL (the composite rules treat missing gradients and
 * tangents as zeros) */
static dle_tensor *or_zeros(scope *s, dle_tensor *t, dle_tensor *like) {
  if (t || !ok(s)) return t;
  dle_tensor *r = NULL;
  return keep(s, dle_full_on(&r, like->ndim, like->sizes, 0, like->dtype, dle_tensor_device(like)),
              &r);
}

static dle_tensor *mul(scope *s, dle_tensor *a, dle_tensor *b) { return bin(s, DLE_OP_MUL, a, b); }
static dle_tensor *add(scope *s, dle_tensor *a, dle_tensor *b) { return bin(s, DLE_OP_ADD, a, b); }
static dle_tensor *sub(scope *s, dle_tensor *a, dle_tensor *b) { return bin(s, DLE_OP_SUB, a, b); }

/* The gradient of the gates' pre-activation goes to xg and hg alike. */
static void give_gates(scope *s, dle_tensor *d, dle_tensor **gin) {
  gin[0] = give(s, d);
  gin[1] = give(s, d);
}

/* ---- LSTM: inputs xg, hg, c; outputs h', c', act ---- */

static dle_status vjp_lstm(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  dle_tensor *c = dle_node_input(n, 2), *cn = dle_node_output(n, 1), *act = dle_node_output(n, 2);
  int64_t h = c->sizes[1];
  scope s = {.n = 0};
  if (!dle_grad_enabled() && !gout[2]) {
    dle_tensor *gh = or_zeros(&s, gout[0], c), *gc = or_zeros(&s, gout[1], c);
    dle_tensor *dg = NULL, *dc = NULL;
    if (ok(&s)) {
      s.st = dle_lstm_cell_fused_backward(&dg, &dc, gh, gc, act, c, cn);
      keep(&s, s.st, &dg), keep(&s, s.st, &dc);
    }
    give_gates(&s, dg, gin);
    gin[2] = give(&s, dc);
    return scope_end(&s, gin, 3);
  }
  dle_tensor *i = blk(&s, act, 0, h), *f = blk(&s, act, 1, h), *g = blk(&s, act, 2, h),
             *o = blk(&s, act, 3, h);
  dle_tensor *gh = or_zeros(&s, gout[0], c), *ga = or_zeros(&s, gout[2], act);
  dle_tensor *tc = unary(&s, DLE_OP_TANH, cn);
  dle_tensor *dct = add(&s, or_zeros(&s, gout[1], c), mul(&s, mul(&s, gh, o), dtanh(&s, tc)));
  dle_tensor *d[4] = {mul(&s, dct, g), mul(&s, dct, c), mul(&s, dct, i), mul(&s, gh, tc)};
  dle_tensor *y[4] = {i, f, g, o};
  for (int k = 0; k < 4; k++)
    d[k] = mul(&s, add(&s, d[k], blk(&s, ga, k, h)), k == 2 ? dtanh(&s, y[k]) : dsig(&s, y[k]));
  give_gates(&s, cat_blocks(&s, d, 4), gin);
  gin[2] = give(&s, mul(&s, dct, f));
  return scope_end(&s, gin, 3);
}

DLE_JVP_RULE(jvp_lstm) {
  if (!tin[0] && !tin[1] && !tin[2]) return DLE_OK;
  scope s = {.n = 0};
  dle_tensor *c = ins[2], *act = outs[2];
  int64_t h = c->sizes[1];
  dle_tensor *tp = add_opt(&s, tin[0], tin[1]);
  tp = or_zeros(&s, tp, ins[0]);
  dle_tensor *y[4], *t[4];
  for (int k = 0; k < 4; k++) {
    y[k] = blk(&s, act, k, h);
    t[k] = mul(&s, blk(&s, tp, k, h), k == 2 ? dtanh(&s, y[k]) : dsig(&s, y[k]));
  }
  dle_tensor *tcp = or_zeros(&s, tin[2], c);
  /* c' = f c + i g */
  dle_tensor *tcn = add(&s, add(&s, mul(&s, t[1], c), mul(&s, y[1], tcp)),
                        add(&s, mul(&s, t[0], y[2]), mul(&s, y[0], t[2])));
  dle_tensor *tc = unary(&s, DLE_OP_TANH, outs[1]);
  tout[0] = give(&s, add(&s, mul(&s, t[3], tc), mul(&s, mul(&s, y[3], dtanh(&s, tc)), tcn)));
  tout[1] = give(&s, tcn);
  tout[2] = give(&s, cat_blocks(&s, t, 4));
  return scope_end(&s, tout, 3);
}

/* ---- GRU: inputs xg, hg, h; outputs h', act (r, z, n, hg_n) ---- */

static dle_status vjp_gru(dle_node *n, dle_tensor *const *gout, dle_tensor **gin) {
  dle_tensor *hp = dle_node_input(n, 2), *act = dle_node_output(n, 1);
  int64_t h = hp->sizes[1];
  scope s = {.n = 0};
  if (!dle_grad_enabled() && !gout[1]) {
    if (!gout[0]) return DLE_OK;
    dle_tensor *dx = NULL, *dhg = NULL, *dh = NULL;
    s.st = dle_gru_cell_fused_backward(&dx, &dhg, &dh, gout[0], act, hp);
    keep(&s, s.st, &dx), keep(&s, s.st, &dhg), keep(&s, s.st, &dh);
    gin[0] = give(&s, dx), gin[1] = give(&s, dhg), gin[2] = give(&s, dh);
    return scope_end(&s, gin, 3);
  }
  dle_tensor *r = blk(&s, act, 0, h), *z = blk(&s, act, 1, h), *nn = blk(&s, act, 2, h),
             *hn = blk(&s, act, 3, h);
  dle_tensor *gh = or_zeros(&s, gout[0], hp), *ga = or_zeros(&s, gout[1], act);
  /* h' = (1 - z) n + z h */
  dle_tensor *dn =
      mul(&s, add(&s, mul(&s, gh, one_minus(&s, z)), blk(&s, ga, 2, h)), dtanh(&s, nn));
  dle_tensor *dr = mul(&s, add(&s, mul(&s, dn, hn), blk(&s, ga, 0, h)), dsig(&s, r));
  dle_tensor *dz = mul(&s, add(&s, mul(&s, gh, sub(&s, hp, nn)), blk(&s, ga, 1, h)), dsig(&s, z));
  dle_tensor *dhn = add(&s, mul(&s, dn, r), blk(&s, ga, 3, h));
  gin[0] = give(&s, cat_blocks(&s, (dle_tensor *[]){dr, dz, dn}, 3));
  gin[1] = give(&s, cat_blocks(&s, (dle_tensor *[]){dr, dz, dhn}, 3));
  gin[2] = give(&s, mul(&s, gh, z));
  return scope_end(&s, gin, 3);
}

DLE_JVP_RULE(jvp_gru) {
  if (!tin[0] && !tin[1] && !tin[2]) return DLE_OK;
  scope s = {.n = 0};
  dle_tensor *hp = ins[2], *act = outs[1];
  int64_t h = hp->sizes[1];
  dle_tensor *tx = or_zeros(&s, tin[0], ins[0]), *th = or_zeros(&s, tin[1], ins[1]);
  dle_tensor *thp = or_zeros(&s, tin[2], hp);
  dle_tensor *r = blk(&s, act, 0, h), *z = blk(&s, act, 1, h), *nn = blk(&s, act, 2, h),
             *hn = blk(&s, act, 3, h);
  dle_tensor *tr = mul(&s, add(&s, blk(&s, tx, 0, h), blk(&s, th, 0, h)), dsig(&s, r));
  dle_tensor *tz = mul(&s, add(&s, blk(&s, tx, 1, h), blk(&s, th, 1, h)), dsig(&s, z));
  dle_tensor *thn = blk(&s, th, 2, h);
  dle_tensor *tn =
      mul(&s, add(&s, blk(&s, tx, 2, h), add(&s, mul(&s, tr, hn), mul(&s, r, thn))), dtanh(&s, nn));
  /* d h' = (1 - z) dn + dz (h - n) + z dh */
  tout[0] = give(&s, add(&s, add(&s, mul(&s, one_minus(&s, z), tn), mul(&s, tz, sub(&s, hp, nn))),
                         mul(&s, z, thp)));
  tout[1] = give(&s, cat_blocks(&s, (dle_tensor *[]){tr, tz, tn, thn}, 4));
  return scope_end(&s, tout, 2);
}

void dle_grad_register_rnn(dle_grad_rule *r) {
  r[DLE_OP_LSTM_CELL_FUSED] =
      (dle_grad_rule){vjp_lstm, jvp_lstm, DLE_SAVE(2), DLE_SAVE(1) | DLE_SAVE(2)};
  r[DLE_OP_GRU_CELL_FUSED] = (dle_grad_rule){vjp_gru, jvp_gru, DLE_SAVE(2), DLE_SAVE(1)};
}
