/* lua_matmul.c — placeholder until the matmul bindings land (being written now). */
#include "lua_util.h"
void dle_lua_open_matmul(lua_State *L, int module, int methods) { (void)L, (void)module, (void)methods; }
