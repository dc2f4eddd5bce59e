/* lua_profile.c — the native side of dle.profile / dle.flops (lua/dle/profile.lua): switching
 * the engine's profiler (engine/profile.h) and reading its counters. */
#include "../engine/dle.h"
#include "lua_util.h"

static const char *const mode_names[] = {"off", "count", "timed", NULL};

/** dle.core._profile_mode([mode]) -> the mode before: "off", "count" (calls, FLOPs, bytes) or
 * "timed" (also self time per op). Switching on from "off" zeroes the counters. */
static int l_profile_mode(lua_State *L) {
  lua_pushstring(L, mode_names[dle_profile_get_mode()]);
  if (!lua_isnoneornil(L, 1)) {
    int mode = luaL_checkoption(L, 1, NULL, mode_names);
    DLE_LUA_TRY(L, dle_profile_set_mode((dle_profile_mode)mode));
  }
  return 1;
}

/** dle.core._profile_counters() -> {name = {calls =, seconds =, flops =, bytes =}} for every op
 * or optimizer step called since the profiler was switched on. */
static int l_profile_counters(lua_State *L) {
  const dle_profile_entry *e = dle_profile_counters();
  lua_newtable(L);
  for (int i = 0; i < DLE_PROF_NUM_ENTRIES; i++) {
    if (!e[i].calls) continue;
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, e[i].calls), lua_setfield(L, -2, "calls");
    lua_pushnumber(L, e[i].seconds), lua_setfield(L, -2, "seconds");
    lua_pushinteger(L, e[i].flops), lua_setfield(L, -2, "flops");
    lua_pushinteger(L, e[i].bytes), lua_setfield(L, -2, "bytes");
    lua_setfield(L, -2, dle_profile_entry_name(i));
  }
  return 1;
}

/** dle.core._op_flops_rule(op_name) -> rule name ("none" for 0 FLOPs), FLOPs per element. */
static int l_op_flops_rule(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  dle_op op = dle_op_by_name(name);
  if (op == DLE_NUM_OPS) return luaL_error(L, "op_flops_rule: no op named '%s'", name);
  int per = 0;
  lua_pushstring(L, dle_op_flops_rule(op, &per));
  lua_pushinteger(L, per);
  return 2;
}

void dle_lua_open_profile(lua_State *L, int module, int methods) {
  static const luaL_Reg fns[] = {{"_profile_mode", l_profile_mode},
                                 {"_profile_counters", l_profile_counters},
                                 {"_op_flops_rule", l_op_flops_rule},
                                 {NULL, NULL}};
  dle_lua_register(L, module, methods, fns, NULL, NULL);
}
