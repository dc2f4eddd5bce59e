/* lua_io.c — placeholder until the io bindings land (being written now). */
#include "lua_util.h"
void dle_lua_open_io(lua_State *L, int module, int methods) { (void)L, (void)module, (void)methods; }
