/* raw_buffer.h — the raw buffers (light userdata from dle.core._raw_buffer) that dle.dist's
 * modules take: bindings/dist/ (MPI) and bindings/dist_nccl/ (NCCL). Header-only, as each is a
 * library of its own that never links the core module. */
#ifndef DLE_RAW_BUFFER_H
#define DLE_RAW_BUFFER_H

#include <lauxlib.h>
#include <lua.h>

/* The buffer at idx of count elements (NULL only when count is 0), or a Lua error naming fn. */
static inline void *dle_raw_buffer_at(lua_State *L, int idx, lua_Integer count, const char *fn) {
  if (!lua_islightuserdata(L, idx))
    luaL_error(L, "%s: expected a raw buffer (light userdata), got %s", fn, luaL_typename(L, idx));
  void *p = lua_touserdata(L, idx);
  if (!p && count > 0) luaL_error(L, "%s: NULL buffer of %I elements", fn, (LUAI_UACINT)count);
  return p;
}

#endif
