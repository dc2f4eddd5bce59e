/* lua_complex.c — the complex views for Lua: dle.view_as_real(z) and dle.view_as_complex(x)
 * (engine/complex.c), and dle.core._conj (the engine's conj, which lua/dle/complex.lua's t:conj()
 * checks its argument for). The rest of complex support in Lua (dle.complex, real, imag, angle,
 * printing) is lua/dle/complex.lua on these and the ops. */
#include "lua_util.h"
#include "../engine/dle.h"

static int l_view_as_real(lua_State *L) { return dle_lua_apply(L, dle_view_as_real); }

static int l_view_as_complex(lua_State *L) { return dle_lua_apply(L, dle_view_as_complex); }

static int l_conj(lua_State *L) { return dle_lua_apply(L, dle_conj); }

void dle_lua_open_complex(lua_State *L, int module, int methods) {
  static const luaL_Reg fns[] = {{"view_as_real", l_view_as_real},
                                 {"view_as_complex", l_view_as_complex},
                                 {"_conj", l_conj},
                                 {NULL, NULL}};
  dle_lua_register(L, module, methods, fns, NULL, NULL);
}
