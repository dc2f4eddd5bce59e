/* lua_io.c — the native half of dle.io: raw tensor bytes between Lua file handles (io.open)
 * and tensor memory, fsync, and the process id for temp-file names. The file formats
 * themselves (dle.save/load, .npy, safetensors headers) live in lua/dle/io.lua.
 *
 *   core._io_write(file, t)                       -> bytes written (C order, contiguous)
 *   core._io_read(file, offset, dtype, sizes, swap, what) -> new CPU tensor
 *   core._io_file_size(file, what)                -> size in bytes
 *   core._io_sync(file, what)                     -- fflush + fsync
 *   core._io_pid()                                -> process id */
#define _POSIX_C_SOURCE 200809L
#include <lauxlib.h>
#include <lualib.h>
#include <unistd.h>

#include "../engine/dle.h"
#include "lua_util.h"

/* The FILE* of an open Lua file handle at idx, or a Lua error naming fn. */
static FILE *check_file(lua_State *L, int idx, const char *fn) {
  luaL_Stream *p = luaL_testudata(L, idx, LUA_FILEHANDLE);
  if (!p) luaL_error(L, "%s: expected a file handle, got %s", fn, luaL_typename(L, idx));
  if (p->closef == NULL || p->f == NULL) luaL_error(L, "%s: the file is closed", fn);
  return p->f;
}

static int l_io_write(lua_State *L) {
  FILE *f = check_file(L, 1, "_io_write");
  dle_tensor *t = dle_lua_check(L, 2);
  const char *what = luaL_optstring(L, 3, "_io_write");
  uint64_t n = 0;
  DLE_LUA_TRY(L, dle_serialize_write(f, t, &n, what));
  lua_pushinteger(L, (lua_Integer)n);
  return 1;
}

static int l_io_read(lua_State *L) {
  FILE *f = check_file(L, 1, "_io_read");
  lua_Integer offset = luaL_checkinteger(L, 2);
  dle_dtype dt = dle_lua_check_dtype(L, 3, "_io_read");
  luaL_checktype(L, 4, LUA_TTABLE);
  int swap = lua_toboolean(L, 5);
  const char *what = luaL_optstring(L, 6, "_io_read");
  lua_Integer n = luaL_len(L, 4);
  if (n < 0 || n > DLE_MAX_DIMS)
    return luaL_error(L, "%s: tensor has %d dims (at most %d supported)", what, (int)n, DLE_MAX_DIMS);
  if (offset < 0) return luaL_error(L, "%s: negative data offset", what);
  int64_t sizes[DLE_MAX_DIMS];
  for (lua_Integer i = 0; i < n; i++) {
    lua_geti(L, 4, i + 1);
    int ok = 0;
    sizes[i] = (int64_t)lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok) return luaL_error(L, "%s: tensor size %d is not an integer", what, (int)(i + 1));
    if (sizes[i] < 0) return luaL_error(L, "%s: tensor size %d is negative", what, (int)(i + 1));
  }
  dle_lua_check_new_sizes(L, sizes, (int)n, what);
  dle_tensor *t = NULL;
  DLE_LUA_TRY(L, dle_serialize_read(&t, f, (uint64_t)offset, (int)n, sizes, dt, swap, what));
  dle_lua_push(L, t);
  return 1;
}

static int l_io_file_size(lua_State *L) {
  FILE *f = check_file(L, 1, "_io_file_size");
  const char *what = luaL_optstring(L, 2, "_io_file_size");
  uint64_t size = 0;
  DLE_LUA_TRY(L, dle_serialize_file_size(f, &size, what));
  lua_pushinteger(L, (lua_Integer)size);
  return 1;
}

static int l_io_sync(lua_State *L) {
  FILE *f = check_file(L, 1, "_io_sync");
  const char *what = luaL_optstring(L, 2, "_io_sync");
  DLE_LUA_TRY(L, dle_serialize_sync(f, what));
  return 0;
}

static int l_io_pid(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)getpid());
  return 1;
}

void dle_lua_open_io(lua_State *L, int module, int methods) {
  (void)methods;
  static const luaL_Reg fns[] = {
    {"_io_write", l_io_write},   {"_io_read", l_io_read}, {"_io_file_size", l_io_file_size},
    {"_io_sync", l_io_sync},     {"_io_pid", l_io_pid},   {NULL, NULL},
  };
  dle_lua_setfuncs(L, module, fns);
}
