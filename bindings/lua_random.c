/* lua_random.c — placeholder until the random bindings land (being written now). */
#include "lua_util.h"
dle_generator *dle_lua_opt_generator(lua_State *L, int idx, const char *fn) { (void)L, (void)idx, (void)fn; return NULL; }
void dle_lua_open_random(lua_State *L, int module, int methods) { (void)L, (void)module, (void)methods; }
