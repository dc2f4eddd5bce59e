/* lua_memory.c — dle's memory accounting and limits for Lua: dle.memory_allocated, memory_peak,
 * memory_stats, reset_peak_memory_stats, empty_cache, set_cache_limit, set_memory_limit,
 * get_memory_limit, and the DLE_MAX_MEMORY variable (read when dle.core loads). The collector's
 * pacing by native memory is lua_core.c's, beside the userdata it counts. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "lua_util.h"

static int l_memory_allocated(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)dle_memory_allocated());
  return 1;
}

static int l_memory_peak(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)dle_memory_peak());
  return 1;
}

/* dle.memory_stats(): bytes held by live tensors now and at most so far, and bytes of freed
 * blocks the allocator keeps for reuse (engine/alloc.c). */
static int l_memory_stats(lua_State *L) {
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, (lua_Integer)dle_memory_allocated());
  lua_setfield(L, -2, "allocated");
  lua_pushinteger(L, (lua_Integer)dle_memory_peak());
  lua_setfield(L, -2, "peak");
  lua_pushinteger(L, (lua_Integer)dle_memory_cached());
  lua_setfield(L, -2, "cached");
  if (dle_memory_limit()) {
    lua_pushinteger(L, (lua_Integer)dle_memory_limit());
    lua_setfield(L, -2, "limit");
  }
  return 1;
}

/* dle.reset_peak_memory_stats(): the next peak counts from the bytes live now. */
static int l_reset_peak(lua_State *L) {
  (void)L;
  dle_memory_reset_peak();
  return 0;
}

/* dle.empty_cache(): returns the cached blocks to the system. */
static int l_empty_cache(lua_State *L) {
  dle_empty_cache();
  return 0;
}

/* dle.set_cache_limit(bytes): the most the allocator keeps cached (1 GiB by default). */
static int l_set_cache_limit(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  luaL_argcheck(L, n >= 0, 1, "set_cache_limit: the limit must be a non-negative number of bytes");
  dle_set_cache_limit((size_t)n);
  return 0;
}

/* Bytes from "2G", "512M", "1.5GB", "64KiB" or "1000": K, M, G, T are powers of 1000, Ki, Mi,
 * Gi, Ti of 1024, a trailing B is optional. False for anything else (or past SIZE_MAX). */
static bool parse_bytes(const char *s, size_t *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || !(v >= 0)) return false;
  static const char units[] = "KMGT";
  const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
  double scale = 1;
  if (u) {
    end++;
    bool binary = *end == 'i' || *end == 'I';
    if (binary) end++;
    for (const char *k = units; k <= u; k++) scale *= binary ? 1024 : 1000;
  }
  if (*end == 'B' || *end == 'b') end++;
  if (*end || v * scale >= 18446744073709551615.0) return false;
  *out = (size_t)(v * scale);
  return true;
}

/* dle.set_memory_limit(bytes): caps the bytes live tensors hold (nil or 0: no cap); bytes is a
 * number or a string with a suffix as DLE_MAX_MEMORY ("2G"). */
static int l_set_memory_limit(lua_State *L) {
  size_t n = 0;
  if (lua_type(L, 1) == LUA_TNUMBER) {
    lua_Number v = lua_tonumber(L, 1);
    if (!(v >= 0) || v >= 18446744073709551615.0)
      return luaL_error(
          L, "set_memory_limit: the limit must be a non-negative number of bytes, got %s",
          lua_tostring(L, 1));
    n = (size_t)v;
  } else if (lua_type(L, 1) == LUA_TSTRING) {
    if (!parse_bytes(lua_tostring(L, 1), &n))
      return luaL_error(
          L, "set_memory_limit: '%s' is not a number of bytes (e.g. 2000000, \"512M\", \"2G\")",
          lua_tostring(L, 1));
  } else if (!lua_isnoneornil(L, 1)) {
    return luaL_typeerror(L, 1, "number of bytes or nil");
  }
  dle_set_memory_limit(n);
  return 0;
}

/* dle.get_memory_limit(): the cap in bytes, or nil when there is none. */
static int l_get_memory_limit(lua_State *L) {
  size_t n = dle_memory_limit();
  if (n)
    lua_pushinteger(L, (lua_Integer)n);
  else
    lua_pushnil(L);
  return 1;
}

/* DLE_MAX_MEMORY, read when dle.core loads: a bad value is an error naming the variable. */
static void apply_env_memory_limit(lua_State *L) {
  const char *s = getenv("DLE_MAX_MEMORY");
  if (!s || !*s) return;
  size_t n;
  if (!parse_bytes(s, &n))
    luaL_error(L, "DLE_MAX_MEMORY: '%s' is not a number of bytes (e.g. 2000000, 512M, 2G, 4GiB)",
               s);
  dle_set_memory_limit(n);
}

void dle_lua_open_memory(lua_State *L, int module, int methods) {
  apply_env_memory_limit(L);
  static const luaL_Reg fns[] = {{"memory_allocated", l_memory_allocated},
                                 {"memory_peak", l_memory_peak},
                                 {"memory_stats", l_memory_stats},
                                 {"empty_cache", l_empty_cache},
                                 {"reset_peak_memory_stats", l_reset_peak},
                                 {"set_cache_limit", l_set_cache_limit},
                                 {"set_memory_limit", l_set_memory_limit},
                                 {"get_memory_limit", l_get_memory_limit},
                                 {NULL, NULL}};
  dle_lua_register(L, module, methods, fns, NULL, NULL);
}
