/* rnn.c — shape and dtype rules of the fused recurrent-cell ops (kind RNN in ops.def) and their
 * public wrappers. Gradient rules: ops/rnn_grad.c; kernels: kernels/cpu/rnn.c.
 *
 * A recurrent layer computes the input projections of all timesteps in one GEMM and, per step,
 * one h @ W_hh^T GEMM; these ops are everything else of a step, in one pass over {N, H}:
 *   lstm_cell_fused  xg {N, 4H}, hg {N, 4H}, c {N, H} -> h' {N, H}, c' {N, H}, act {N, 4H}
 *              gates = xg + hg in PyTorch's order i, f, g, o; c' = f c + i g; h' = o tanh(c');
 *              act holds sigmoid(i), sigmoid(f), tanh(g), sigmoid(o) (what backward reads).
 *   gru_cell_fused   xg {N, 3H}, hg {N, 3H}, h {N, H} -> h' {N, H}, act {N, 4H}
 *              r, z = sigmoid(xg + hg) (first two blocks), n = tanh(xg_n + r hg_n) (PyTorch's
 *              b_hn inside r (...): hg holds h @ W_hh^T + b_hh), h' = (1 - z) n + z h;
 *              act holds r, z, n and hg_n.
 * The biases are folded into xg and hg by the caller. The backward ops are the reverse rules in one
 * pass, used when the backward pass itself is not recorded (create_graph off); they are not
 * differentiable (rnn_grad.c composes dle ops instead when it is):
 *   lstm_cell_fused_backward  gh, gc, act, c, c' -> d gates {N, 4H}, d c {N, H}
 *   gru_cell_fused_backward   gh, act, h -> d xg {N, 3H}, d hg {N, 3H}, d h {N, H} (through h' only)
 * Inputs are 2-D, of one float dtype; the kernels read them contiguous (copied when not). */
#include "../internal.h"

typedef struct {
  int gates; /* blocks of H in xg/hg (4 for LSTM, 3 for GRU); 0: no gate inputs */
  int state; /* index of the {N, H} state input */
  int nout;
} rnn_shape;

static rnn_shape shape_of(dle_op op) {
  switch (op) {
    case DLE_OP_LSTM_CELL_FUSED: return (rnn_shape){4, 2, 3};
    case DLE_OP_GRU_CELL_FUSED: return (rnn_shape){3, 2, 2};
    case DLE_OP_LSTM_CELL_FUSED_BACKWARD: return (rnn_shape){0, 3, 2};
    default: return (rnn_shape){0, 2, 3}; /* gru_cell_fused_backward */
  }
}

/* Every input 2-D, of one float dtype, {N, H} or {N, k H} as its position says. */
static dle_status check_inputs(dle_op op, dle_tensor *const *ins, int nin, int64_t *n, int64_t *h) {
  const char *fn = dle_op_get_info(op)->name;
  rnn_shape s = shape_of(op);
  dle_tensor *st = ins[s.state];
  for (int i = 0; i < nin; i++)
    if (ins[i]->ndim != 2)
      return dle_error("%s: input %d must be 2-D {batch, features}, got shape %s", fn, i + 1,
                       SHAPE(ins[i]));
  *n = st->sizes[0], *h = st->sizes[1];
  for (int i = 0; i < nin; i++) {
    if (!dle_dtype_is_float(ins[i]->dtype) || ins[i]->dtype != st->dtype)
      return dle_error("%s: inputs must share one float dtype, got %s (input %d) and %s (input %d)",
                       fn, dle_dtype_name(ins[i]->dtype), i + 1, dle_dtype_name(st->dtype),
                       s.state + 1);
    /* width of input i in units of H */
    int64_t k = 1;
    if (op == DLE_OP_LSTM_CELL_FUSED || op == DLE_OP_GRU_CELL_FUSED) k = i < 2 ? s.gates : 1;
    if (op == DLE_OP_LSTM_CELL_FUSED_BACKWARD || op == DLE_OP_GRU_CELL_FUSED_BACKWARD)
      k = (op == DLE_OP_LSTM_CELL_FUSED_BACKWARD ? i == 2 : i == 1) ? 4 : 1;
    if (ins[i]->sizes[0] != *n || ins[i]->sizes[1] != k * *h)
      return dle_error(
          "%s: input %d has shape %s, expected {%lld,%lld} (batch %lld, hidden %lld; "
          "state shape %s)",
          fn, i + 1, SHAPE(ins[i]), (long long)*n, (long long)(k * *h), (long long)*n,
          (long long)*h, SHAPE(st));
  }
  return DLE_OK;
}

DLE_FORWARD_RULE(rnn) {
  int64_t n = 0, h = 0;
  DLE_TRY(check_inputs(op, ins, nin, &n, &h));
  dle_dtype dt = ins[0]->dtype;
  rnn_shape s = shape_of(op);
  /* output widths in units of H */
  int64_t w[3] = {1, 1, 4};
  if (op == DLE_OP_GRU_CELL_FUSED) w[1] = 4;
  if (op == DLE_OP_LSTM_CELL_FUSED_BACKWARD) w[0] = 4;
  if (op == DLE_OP_GRU_CELL_FUSED_BACKWARD) w[0] = 3, w[1] = 3, w[2] = 1;
  dle_result_spec res[3];
  for (int k = 0; k < s.nout; k++) res[k] = (dle_result_spec){2, {n, w[k] * h}, dt};
  dle_dtype in_dt[5] = {dt, dt, dt, dt, dt};
  return dle_dispatch_contiguous(op, outs, res, ins, nin, in_dt, a);
}

/* FLOPs: the arithmetic of one straightforward pass per element of the state (flops.c
 * conventions): LSTM forward 4 adds, 3 sigmoids and 2 tanh (counted 4 each), 3 mul, 1 add = 28;
 * GRU forward 5 adds, 2 sigmoids, 1 tanh, 5 mul/sub = 22; their backward passes about as many. */
enum { PER_LSTM = 28, PER_GRU = 22 };
dle_flops_rule dle_flops_rnn(dle_op op) {
  bool lstm = op == DLE_OP_LSTM_CELL_FUSED || op == DLE_OP_LSTM_CELL_FUSED_BACKWARD;
  return dle_flops_per_out(lstm ? PER_LSTM : PER_GRU);
}

/* ---- public wrappers ---- */

static dle_status call(dle_op op, dle_tensor **o0, dle_tensor **o1, dle_tensor **o2,
                       dle_tensor *const *ins, int nin) {
  dle_tensor *outs[3] = {*o0, *o1, o2 ? *o2 : NULL};
  dle_attrs a = {0};
  DLE_TRY(dle_op_call(op, outs, ins, nin, &a));
  *o0 = outs[0], *o1 = outs[1];
  if (o2) *o2 = outs[2];
  return DLE_OK;
}

dle_status dle_lstm_cell_fused(dle_tensor **h, dle_tensor **c, dle_tensor **act, dle_tensor *xg,
                               dle_tensor *hg, dle_tensor *c_prev) {
  return call(DLE_OP_LSTM_CELL_FUSED, h, c, act, (dle_tensor *[]){xg, hg, c_prev}, 3);
}

dle_status dle_gru_cell_fused(dle_tensor **h, dle_tensor **act, dle_tensor *xg, dle_tensor *hg,
                              dle_tensor *h_prev) {
  return call(DLE_OP_GRU_CELL_FUSED, h, act, NULL, (dle_tensor *[]){xg, hg, h_prev}, 3);
}

dle_status dle_lstm_cell_fused_backward(dle_tensor **dgates, dle_tensor **dc_prev, dle_tensor *gh,
                                        dle_tensor *gc, dle_tensor *act, dle_tensor *c_prev,
                                        dle_tensor *c) {
  return call(DLE_OP_LSTM_CELL_FUSED_BACKWARD, dgates, dc_prev, NULL,
              (dle_tensor *[]){gh, gc, act, c_prev, c}, 5);
}

dle_status dle_gru_cell_fused_backward(dle_tensor **dxg, dle_tensor **dhg, dle_tensor **dh_prev,
                                       dle_tensor *gh, dle_tensor *act, dle_tensor *h_prev) {
  return call(DLE_OP_GRU_CELL_FUSED_BACKWARD, dxg, dhg, dh_prev, (dle_tensor *[]){gh, act, h_prev},
              3);
}
