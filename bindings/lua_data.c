/* lua_data.c — placeholder until the data bindings land (being written now). */
#include "lua_util.h"
void dle_lua_open_data(lua_State *L, int module, int methods) { (void)L, (void)module, (void)methods; }
