/* lua_io.c — the native half of dle.io: raw tensor bytes between Lua file handles (io.open)
 * and tensor memory, fsync, and the process id for temp-file names. The file formats
 * themselves (dle.save/load, .npy, safetensors headers) live in lua/dle/io.lua.
 *
 *   core._io_write(file, t)                       -> bytes written (C order, contiguous)
 *   core._io_read(file, offset, dtype, sizes, swap, what) -> new CPU tensor
 *   core._io_file_size(file, what)                -> size in bytes
 *   core._io_sync(file, what)                     -- fflush + fsync
 *   core._io_pid()                                -> process id
 *   core._io_sync_dir(dir, what)                  -- fsync of a directory (after a rename)
 *   core._io_remove_stale(path, what)             -> number of dead processes' temp files removed
 *   core._io_storage(t)                           -> storage identity (light userdata), its bytes
 *   core._io_view(base, sizes, strides, offset, what) -> a view of base's storage (dle.load) */
#define _POSIX_C_SOURCE 200809L
#include <lauxlib.h>
#include <lualib.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
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

/* Raises a message as is: luaL_error would put the Lua caller's line in front of it, and the
 * file formats' errors begin with the public function's name. */
static int io_fail(lua_State *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int io_fail(lua_State *L, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  lua_pushstring(L, buf);
  return lua_error(L);
}

/* DLE_LUA_TRY without the position: engine errors here already name the dle function. */
#define IO_TRY(L, call)                                       \
  do {                                                        \
    if ((call) != DLE_OK) io_fail(L, "%s", dle_last_error()); \
  } while (0)

/* Sizes of a new tensor read from a file: at most INT64_MAX / 16 elements (as the engine wants). */
static void check_file_sizes(lua_State *L, const int64_t *sizes, int n, const char *what) {
  int64_t p = 1;
  for (int d = 0; d < n; d++)
    if (__builtin_mul_overflow(p, sizes[d] ? sizes[d] : 1, &p) || p > INT64_MAX / 16)
      io_fail(L, "%s: shape %s has too many elements", what,
              dle_shape_str((char[128]){0}, 128, n, sizes));
}

static int l_io_write(lua_State *L) {
  FILE *f = check_file(L, 1, "_io_write");
  dle_tensor *t = dle_lua_check(L, 2);
  const char *what = luaL_optstring(L, 3, "_io_write");
  uint64_t n = 0;
  IO_TRY(L, dle_serialize_write(f, t, &n, what));
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
    return io_fail(L, "%s: tensor has %d dims (at most %d supported)", what, (int)n, DLE_MAX_DIMS);
  if (offset < 0) return io_fail(L, "%s: negative data offset", what);
  int64_t sizes[DLE_MAX_DIMS];
  for (lua_Integer i = 0; i < n; i++) {
    lua_geti(L, 4, i + 1);
    int ok = 0;
    sizes[i] = (int64_t)lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok) return io_fail(L, "%s: tensor size %d is not an integer", what, (int)(i + 1));
    if (sizes[i] < 0) return io_fail(L, "%s: tensor size %d is negative", what, (int)(i + 1));
  }
  check_file_sizes(L, sizes, (int)n, what);
  dle_tensor *t = NULL;
  IO_TRY(L, dle_serialize_read(&t, f, (uint64_t)offset, (int)n, sizes, dt, swap, what));
  dle_lua_push(L, t);
  return 1;
}

static int l_io_file_size(lua_State *L) {
  FILE *f = check_file(L, 1, "_io_file_size");
  const char *what = luaL_optstring(L, 2, "_io_file_size");
  uint64_t size = 0;
  IO_TRY(L, dle_serialize_file_size(f, &size, what));
  lua_pushinteger(L, (lua_Integer)size);
  return 1;
}

static int l_io_sync(lua_State *L) {
  FILE *f = check_file(L, 1, "_io_sync");
  const char *what = luaL_optstring(L, 2, "_io_sync");
  IO_TRY(L, dle_serialize_sync(f, what));
  return 0;
}

static int l_io_pid(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)getpid());
  return 1;
}

static int l_io_sync_dir(lua_State *L) {
  const char *dir = luaL_checkstring(L, 1);
  const char *what = luaL_optstring(L, 2, "_io_sync_dir");
  IO_TRY(L, dle_serialize_sync_dir(dir, what));
  return 0;
}

static int l_io_remove_stale(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  const char *what = luaL_optstring(L, 2, "_io_remove_stale");
  int removed = 0;
  IO_TRY(L, dle_serialize_remove_stale(path, &removed, what));
  lua_pushinteger(L, removed);
  return 1;
}

/* Tensors with the same identity share their memory (dle.save stores that memory once). */
static int l_io_storage(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  lua_pushlightuserdata(L, t->storage);
  lua_pushinteger(L, (lua_Integer)t->storage->nbytes);
  return 2;
}

/* Reads a table of ndim integers at idx into out; errors name what. */
static void int64_list(lua_State *L, int idx, int ndim, int64_t *out, const char *what,
                       const char *name) {
  if (!lua_istable(L, idx) || (lua_Integer)lua_rawlen(L, idx) != ndim)
    luaL_error(L, "%s: %s must be a table of %d integers", what, name, ndim);
  for (int i = 0; i < ndim; i++) {
    lua_rawgeti(L, idx, i + 1);
    int ok = 0;
    out[i] = (int64_t)lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok) luaL_error(L, "%s: %s[%d] is not an integer", what, name, i + 1);
  }
}

static int l_io_view(lua_State *L) {
  dle_tensor *base = dle_lua_check(L, 1);
  const char *what = luaL_optstring(L, 5, "_io_view");
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_Integer n = (lua_Integer)lua_rawlen(L, 2);
  if (n > DLE_MAX_DIMS)
    return io_fail(L, "%s: a view of %d dims (at most %d)", what, (int)n, DLE_MAX_DIMS);
  int64_t sizes[DLE_MAX_DIMS], strides[DLE_MAX_DIMS];
  int64_list(L, 2, (int)n, sizes, what, "sizes");
  int64_list(L, 3, (int)n, strides, what, "strides");
  int ok = 0;
  lua_Integer offset = lua_tointegerx(L, 4, &ok);
  if (!ok || offset < 0)
    return io_fail(L, "%s: the view offset must be a non-negative integer", what);
  /* The extent is checked here with overflow checks: a file's numbers can be anything, and the
   * engine's own check assumes geometries that real tensors have. */
  int64_t lo = offset, hi = offset, span;
  int empty = 0;
  for (int d = 0; d < n; d++) {
    if (sizes[d] < 0) return io_fail(L, "%s: negative size in a view", what);
    /* A stride of a size-1 dim addresses nothing, but kernels still scale it to bytes: keep it
     * within what a dle tensor can have (at most INT64_MAX / 16 elements). */
    if (strides[d] > INT64_MAX / 16 || strides[d] < -(INT64_MAX / 16))
      return io_fail(L, "%s: view stride %lld out of range", what, (long long)strides[d]);
    if (sizes[d] == 0)
      empty = 1;
    else if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &span) ||
             (span < 0 ? __builtin_add_overflow(lo, span, &lo)
                       : __builtin_add_overflow(hi, span, &hi)))
      return io_fail(L, "%s: view geometry overflows (size %lld, stride %lld)", what,
                     (long long)sizes[d], (long long)strides[d]);
  }
  int64_t elems = (int64_t)(base->storage->nbytes / dle_dtype_size(base->dtype));
  /* even an empty view's offset is scaled to a data pointer: it must lie in the storage */
  if (offset > elems)
    return io_fail(L, "%s: view offset %lld past a storage of %lld elements", what,
                   (long long)offset, (long long)elems);
  if (!empty && (lo < 0 || hi >= elems))
    return io_fail(L, "%s: a view reaches elements %lld..%lld of a storage of %lld", what,
                   (long long)lo, (long long)hi, (long long)elems);
  check_file_sizes(L, sizes, (int)n, what);
  dle_tensor *t = NULL;
  if (dle_tensor_as_strided(&t, base, (int)n, sizes, strides, (int64_t)offset) != DLE_OK)
    return io_fail(L, "%s: %s", what, dle_last_error());
  dle_lua_push(L, t);
  return 1;
}

void dle_lua_open_io(lua_State *L, int module, int methods) {
  (void)methods;
  static const luaL_Reg fns[] = {
      {"_io_write", l_io_write},
      {"_io_read", l_io_read},
      {"_io_file_size", l_io_file_size},
      {"_io_sync", l_io_sync},
      {"_io_pid", l_io_pid},
      {"_io_sync_dir", l_io_sync_dir},
      {"_io_remove_stale", l_io_remove_stale},
      {"_io_storage", l_io_storage},
      {"_io_view", l_io_view},
      {NULL, NULL},
  };
  dle_lua_setfuncs(L, module, fns);
}
