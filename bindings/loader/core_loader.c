/* core_loader.c — `require "dle.core"`: sets the process's OpenMP wait policy, then loads the
 * native module (dle.native, which links libgomp and OpenBLAS) and returns it.
 *
 * Why a separate module: libgomp reads OMP_WAIT_POLICY once, when it is loaded. Its default
 * lets idle worker threads spin after every parallel region, and on a 2-core machine they then
 * steal the cores from OpenBLAS's threads and from the Lua thread itself (a Fashion-MNIST
 * MLP epoch ran several times slower, much of it spinning in libgomp). Only this module
 * runs before libgomp is loaded, so only it can choose "passive". A value the user set wins. */
#include <stdlib.h>

#include <lua.h>

int luaopen_dle_core(lua_State *L) {
  setenv("OMP_WAIT_POLICY", "passive", 0);
  lua_getglobal(L, "require");
  lua_pushstring(L, "dle.native");
  lua_call(L, 1, 1);
  return 1;
}
