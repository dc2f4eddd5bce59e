/* lua_index.c — placeholder until the index bindings land (being written now). */
#include "lua_util.h"
void dle_lua_open_index(lua_State *L, int module, int methods) { (void)L, (void)module, (void)methods; }
