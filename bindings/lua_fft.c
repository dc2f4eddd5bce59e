/* lua_fft.c — the FFT family for Lua: core._fft(x, kind, dims, n, norm, fn), which
 * lua/dle/fft.lua builds dle.fft.* on (argument parsing, 1-based dims, hfft/ihfft, fftfreq,
 * fftshift). kind: 0 c2c, 1 c2c inverse, 2 r2c, 3 c2r; dims: 0-based; n: a length per dim, -1 for
 * the default; norm: 0 backward, 1 ortho, 2 forward; fn names the Lua function in errors. */
#include "lua_util.h"
#include "../engine/dle.h"

static int l_fft(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1);
  int kind = (int)luaL_checkinteger(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  luaL_checktype(L, 4, LUA_TTABLE);
  int norm = (int)luaL_checkinteger(L, 5);
  const char *fn = luaL_checkstring(L, 6);
  int nd = (int)lua_rawlen(L, 3);
  if (nd < 1 || nd > DLE_MAX_DIMS || (int)lua_rawlen(L, 4) != nd)
    return luaL_error(L, "%s: expected 1 to %d dims, got %d", fn, DLE_MAX_DIMS, nd);
  int dims[DLE_MAX_DIMS];
  int64_t n[DLE_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    lua_rawgeti(L, 3, i + 1);
    lua_rawgeti(L, 4, i + 1);
    dims[i] = (int)lua_tointeger(L, -2);
    n[i] = (int64_t)lua_tointeger(L, -1);
    lua_pop(L, 2);
  }
  dle_tensor *r = NULL;
  return dle_lua_push_new(
      L, dle_fft(&r, x, (dle_fft_kind)kind, nd, dims, n, (dle_fft_norm)norm, fn), &r);
}

void dle_lua_open_fft(lua_State *L, int module, int methods) {
  static const luaL_Reg fns[] = {{"_fft", l_fft}, {NULL, NULL}};
  dle_lua_register(L, module, methods, fns, NULL, NULL);
}
