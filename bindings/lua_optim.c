/* lua_optim.c — placeholder until the optim bindings land (being written now). */
#include "lua_util.h"
void dle_lua_open_optim(lua_State *L, int module, int methods) { (void)L, (void)module, (void)methods; }
