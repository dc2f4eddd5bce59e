/* lua_softmax.c — the softmax family for Lua: dle.<name>(t, d) and t:<name>(d) for each op of
 * kind softmax in ops.def (softmax, log_softmax); d is 1-based and defaults to the last dim. */
#include "lua_util.h"
#include "../engine/dle.h"

/* t:softmax(d), t:log_softmax(d): d defaults to the last dim. */
static int l_softmax(lua_State *L) {
  dle_op op = (dle_op)lua_tointeger(L, lua_upvalueindex(1));
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  int d = dle_lua_optdim(L, 2, dle_op_get_info(op)->name, -1);
  DLE_LUA_TRY(L, dle_softmax(op, &r, x, d));
  dle_lua_push(L, r);
  return 1;
}

void dle_lua_open_softmax(lua_State *L, int module, int methods) {
  for (int i = 0; i < DLE_NUM_OPS; i++) {
    const dle_op_info *info = dle_op_get_info((dle_op)i);
    if (info->kind != DLE_KIND_SOFTMAX) continue;
    lua_pushinteger(L, i);
    lua_pushcclosure(L, l_softmax, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, module, info->name);
    lua_setfield(L, methods, info->name);
  }
}
