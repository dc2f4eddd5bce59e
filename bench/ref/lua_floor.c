/* lua_floor.c — the floor under any dle op that returns a new tensor to Lua: a C function that
 * makes a userdata with a __gc finalizer (which frees a small native block, as a tensor's frees
 * its header), called from a Lua loop, with the object left to Lua's collector. No engine work at
 * all, so dle's `c = a + b` can be no cheaper than this in Lua 5.4. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdlib.h>

#include "lua_floor.h"

typedef struct {
  void *native;
} object;

static int object_gc(lua_State *L) {
  object *o = lua_touserdata(L, 1);
  free(o->native);
  o->native = NULL;
  return 0;
}

/* new_object(): the userdata, its metatable taken from an upvalue (as cheap as a lookup gets). */
static int new_object(lua_State *L) {
  object *o = lua_newuserdatauv(L, sizeof *o, 0);
  o->native = malloc(64);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_setmetatable(L, -2);
  return 1;
}

struct lua_floor {
  lua_State *L;
  int loop_ref; /* registry reference of `function() for i = 1, N do local o = new_object() end end` */
};

lua_floor *lua_floor_new(void) {
  lua_floor *f = malloc(sizeof *f);
  lua_State *L = luaL_newstate();
  if (!f || !L) {
    free(f);
    if (L) lua_close(L);
    return NULL;
  }
  luaL_openlibs(L);
  lua_gc(L, LUA_GCGEN, 0, 0); /* the collector lua5.4 (and so scripts/dle) runs */
  lua_newtable(L);
  lua_pushcfunction(L, object_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcclosure(L, new_object, 1);
  lua_setglobal(L, "new_object");
  static const char chunk[] =
      "local new_object = new_object\n"
      "return function() for _ = 1, " LUA_FLOOR_BATCH_STR " do local o = new_object() end end";
  if (luaL_loadstring(L, chunk) != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK) {
    lua_close(L);
    free(f);
    return NULL;
  }
  f->L = L;
  f->loop_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return f;
}

void lua_floor_run(void *state) {
  lua_floor *f = state;
  lua_rawgeti(f->L, LUA_REGISTRYINDEX, f->loop_ref);
  lua_call(f->L, 0, 0);
}

void lua_floor_free(lua_floor *f) {
  if (!f) return;
  lua_close(f->L);
  free(f);
}
