/* lua_rnn.c — the fused recurrent-cell ops for Lua (the building blocks of dle.nn.LSTM / GRU,
 * shapes in engine/ops/rnn.c):
 *   dle.lstm_cell_fused(xg, hg, c) -> h', c', act
 *   dle.gru_cell_fused(xg, hg, h) -> h', act
 *   dle.lstm_cell_fused_backward(gh, gc, act, c, c') -> d gates, d c
 *   dle.gru_cell_fused_backward(gh, act, h) -> d xg, d hg, d h */
#include "../engine/dle.h"
#include "lua_util.h"

static int l_lstm_cell_fused(lua_State *L) {
  dle_tensor *xg = dle_lua_check(L, 1), *hg = dle_lua_check(L, 2), *c = dle_lua_check(L, 3);
  dle_tensor *r[3] = {NULL, NULL, NULL};
  return dle_lua_push_all(L, dle_lstm_cell_fused(&r[0], &r[1], &r[2], xg, hg, c), r, 3);
}

static int l_gru_cell_fused(lua_State *L) {
  dle_tensor *xg = dle_lua_check(L, 1), *hg = dle_lua_check(L, 2), *h = dle_lua_check(L, 3);
  dle_tensor *r[2] = {NULL, NULL};
  return dle_lua_push_all(L, dle_gru_cell_fused(&r[0], &r[1], xg, hg, h), r, 2);
}

static int l_lstm_cell_fused_backward(lua_State *L) {
  dle_tensor *in[5];
  for (int i = 0; i < 5; i++) in[i] = dle_lua_check(L, i + 1);
  dle_tensor *r[2] = {NULL, NULL};
  return dle_lua_push_all(
      L, dle_lstm_cell_fused_backward(&r[0], &r[1], in[0], in[1], in[2], in[3], in[4]), r, 2);
}

static int l_gru_cell_fused_backward(lua_State *L) {
  dle_tensor *gh = dle_lua_check(L, 1), *act = dle_lua_check(L, 2), *h = dle_lua_check(L, 3);
  dle_tensor *r[3] = {NULL, NULL, NULL};
  return dle_lua_push_all(L, dle_gru_cell_fused_backward(&r[0], &r[1], &r[2], gh, act, h), r, 3);
}

void dle_lua_open_rnn(lua_State *L, int module, int methods) {
  static const luaL_Reg module_only[] = {{"lstm_cell_fused", l_lstm_cell_fused},
                                         {"gru_cell_fused", l_gru_cell_fused},
                                         {"lstm_cell_fused_backward", l_lstm_cell_fused_backward},
                                         {"gru_cell_fused_backward", l_gru_cell_fused_backward},
                                         {NULL, NULL}};
  dle_lua_register(L, module, methods, module_only, NULL, NULL);
}
