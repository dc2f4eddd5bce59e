/* lua_ctc.c — the CTC loss ops for Lua (dle.nn.functional.ctc_loss builds on them):
 *   dle.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity)
 *     -> nll {N}, log_alpha; blank and the target values are 1-based class numbers.
 *   dle.ctc_loss_backward(gy, log_probs, targets, input_lengths, target_lengths, nll, log_alpha,
 *     blank, zero_infinity) -> d log_probs. */
#include "../engine/dle.h"
#include "lua_util.h"

static int l_ctc_loss(lua_State *L) {
  dle_tensor *in[4];
  for (int i = 0; i < 4; i++) in[i] = dle_lua_check(L, i + 1);
  int64_t blank = (int64_t)luaL_optinteger(L, 5, 1) - 1;
  bool zi = lua_toboolean(L, 6);
  dle_tensor *r[2] = {NULL, NULL}; /* nll, log_alpha */
  return dle_lua_push_all(L, dle_ctc_loss(&r[0], &r[1], in[0], in[1], in[2], in[3], blank, zi, 1),
                          r, 2);
}

static int l_ctc_loss_backward(lua_State *L) {
  dle_tensor *in[7];
  for (int i = 0; i < 7; i++) in[i] = dle_lua_check(L, i + 1);
  int64_t blank = (int64_t)luaL_optinteger(L, 8, 1) - 1;
  bool zi = lua_toboolean(L, 9);
  dle_tensor *g = NULL;
  return dle_lua_push_new(
      L, dle_ctc_loss_backward(&g, in[0], in[1], in[2], in[3], in[4], in[5], in[6], blank, zi, 1),
      &g);
}

void dle_lua_open_ctc(lua_State *L, int module, int methods) {
  static const luaL_Reg fns[] = {
      {"ctc_loss", l_ctc_loss}, {"ctc_loss_backward", l_ctc_loss_backward}, {NULL, NULL}};
  dle_lua_register(L, module, methods, fns, NULL, NULL);
}
