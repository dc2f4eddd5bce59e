/* lua_floor.h — bench_ref's "lua_object" task: Lua 5.4's own cost of one finalized userdata. */
#ifndef DLE_BENCH_LUA_FLOOR_H
#define DLE_BENCH_LUA_FLOOR_H

/* Objects made per call of lua_floor_run (the Lua loop amortises the C-to-Lua call). */
#define LUA_FLOOR_BATCH 1000
#define LUA_FLOOR_BATCH_STR "1000"

typedef struct lua_floor lua_floor;

lua_floor *lua_floor_new(void);  /* NULL when Lua cannot start */
void lua_floor_run(void *state); /* LUA_FLOOR_BATCH objects, each left to the collector */
void lua_floor_free(lua_floor *f);

#endif
