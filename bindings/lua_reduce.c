/* lua_reduce.c — placeholder until the reduce bindings land (being written now). */
#include "lua_util.h"
void dle_lua_open_reduce(lua_State *L, int module, int methods) { (void)L, (void)module, (void)methods; }
