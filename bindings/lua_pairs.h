/* lua_pairs.h — the {h, w} geometry arguments of the 2-D ops' bindings (lua_conv.c, lua_pool.c):
 * a number (both dims) or a table {h, w} of integers. */
#ifndef DLE_LUA_PAIRS_H
#define DLE_LUA_PAIRS_H

#include "lua_util.h"

/* A number or a {h, w} table at idx into out[0..1]; def when nil. */
static inline void pair_at(lua_State *L, int idx, const char *fn, const char *what, int64_t def,
                           int64_t *out) {
  out[0] = out[1] = def; /* also on the error paths, which the compiler cannot tell end here */
  if (lua_isnoneornil(L, idx)) return;
  if (lua_isinteger(L, idx)) {
    out[0] = out[1] = lua_tointeger(L, idx);
    return;
  }
  if (lua_istable(L, idx) && lua_rawlen(L, idx) == 2) {
    for (int i = 0; i < 2; i++) {
      lua_rawgeti(L, idx, i + 1);
      if (!lua_isinteger(L, -1))
        luaL_error(L, "%s: %s must be an integer or a table {h, w} of integers", fn, what);
      out[i] = lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
    return;
  }
  luaL_error(L, "%s: %s must be an integer or a table {h, w} of integers, got %s", fn, what,
             luaL_typename(L, idx));
}

/* opts[field] as a pair (def when absent). */
static inline void pair_field(lua_State *L, int opts, const char *fn, const char *field,
                              int64_t def, int64_t *out) {
  if (!opts) {
    out[0] = out[1] = def;
    return;
  }
  lua_getfield(L, opts, field);
  pair_at(L, lua_gettop(L), fn, field, def, out);
  lua_pop(L, 1);
}

#endif
