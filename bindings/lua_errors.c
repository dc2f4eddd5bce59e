/* lua_errors.c — how the bindings raise errors: every message starts with the dle function's
 * name ("matmul: ...") and is reported at the user's line.
 *
 * The name comes from the function itself, not from the call site: luaL_argerror asks the call
 * site, which knows no name under pcall(dle.matmul, ...) and the alias's name for
 * `local mm = dle.matmul` (giving "bad argument #1 to 'mm'" or "to '?'"). A registry table maps
 * each registered C function to its name (dle_lua_register_names); it is read only when an error
 * is raised, so calls that succeed pay nothing.
 *
 * The position is that of the first caller outside dle: a C function called from dle's own Lua
 * code (lua/dle/, whose directory init.lua tells us) would otherwise blame dle's line. */
#include <stdarg.h>
#include <string.h>

#include "lua_util.h"

static const char names_key = 0; /* registry: function -> its dle name */
static const char root_key = 0;  /* registry: "@/path/to/lua/dle/", the sources to skip */

/* Records name for every function in the table at `table` not named yet; "__add" is "add". */
void dle_lua_register_names(lua_State *L, int table) {
  table = lua_absindex(L, table);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &names_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &names_key);
  }
  int names = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, table)) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_iscfunction(L, -1)) {
      lua_pushvalue(L, -1);
      /* a public name wins over an internal one ("_conv2d_grad_input", also a method) */
      int t = lua_rawget(L, names);
      if (t == LUA_TNIL ||
          (t == LUA_TSTRING && lua_tostring(L, -1)[0] == '_' && lua_tostring(L, -3)[0] != '_')) {
        const char *k = lua_tostring(L, -3);
        lua_pushvalue(L, -2);
        lua_pushstring(L, strncmp(k, "__", 2) == 0 ? k + 2 : k);
        lua_rawset(L, names);
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* dle.core._set_source_root(dir, internal, core): the directory of dle's Lua sources, and the set
 * (names as keys) of dle.core's functions that only dle's Lua code calls (set by init.lua). An internal function's
 * messages already name the public function it serves ("idx: ..." from read_idx): they are not
 * prefixed with its own name. */
static int set_source_root(lua_State *L) {
  luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TTABLE);
  lua_pushfstring(L, "@%s", lua_tostring(L, 1));
  lua_rawsetp(L, LUA_REGISTRYINDEX, &root_key);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &names_key);
  int names = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, 2)) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, 3) == LUA_TFUNCTION) {
      lua_pushboolean(L, 0);
      lua_rawset(L, names);
    } else {
      lua_pop(L, 1);
    }
  }
  return 0;
}

/* The running C function's name; *internal is set for the functions of set_source_root's set. */
static const char *fname(lua_State *L, bool *internal) {
  lua_Debug ar;
  const char *name = NULL;
  *internal = false;
  if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "nf", &ar)) {
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &names_key) == LUA_TTABLE) {
      lua_pushvalue(L, -2);
      int t = lua_rawget(L, -2);
      if (t == LUA_TBOOLEAN)
        *internal = true;
      else
        name = lua_tostring(L, -1); /* stays valid: the names table holds the string */
      lua_pop(L, 1);
    }
    lua_pop(L, 2);
    if (!name) name = ar.name;
  }
  return name ? name : "dle";
}

const char *dle_lua_fname(lua_State *L) {
  bool internal;
  return fname(L, &internal);
}

/* Whether msg already names fn: its head (the text before the first ':') is fn, or ends with a
 * space and fn ("Function backward: ..." from a custom Function's backward, for fn backward). */
static bool names_fn(const char *msg, const char *fn) {
  const char *colon = strchr(msg, ':');
  size_t head = colon ? (size_t)(colon - msg) : 0, n = strlen(fn);
  if (!colon || head < n || strncmp(colon - n, fn, n) != 0) return false;
  return head == n || colon[-(ptrdiff_t)n - 1] == ' ';
}

int dle_lua_fail(lua_State *L) {
  bool internal;
  const char *fn = fname(L, &internal), *msg = dle_last_error();
  if (internal || names_fn(msg, fn)) return dle_lua_error(L, "%s", msg);
  return dle_lua_error(L, "%s: %s", fn, msg);
}

/* True when the function at level 0 was called as a method (t:f(...)): argument 1 is then self. */
static bool called_as_method(lua_State *L) {
  lua_Debug ar;
  return lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.namewhat &&
         strcmp(ar.namewhat, "method") == 0;
}

/* Whether the frame at level is dle's: a Lua function of dle's sources, or a C function (pcall,
 * dle.no_grad) called by one. Mirrors check.raise in lua/dle/check.lua. */
static bool dle_frame(lua_State *L, int level, const char *root, size_t rootlen) {
  lua_Debug ar;
  if (!root || !lua_getstack(L, level, &ar)) return false;
  lua_getinfo(L, "S", &ar);
  if (strcmp(ar.what, "C") == 0) return dle_frame(L, level + 1, root, rootlen);
  return strncmp(ar.source, root, rootlen) == 0;
}

/* Pushes "source:line: " of the first caller outside dle ("" when that caller is C, such as the
 * user's pcall, as Lua itself does). */
static void push_where(lua_State *L) {
  const char *root = NULL;
  size_t rootlen = 0;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &root_key);
  if (lua_type(L, -1) == LUA_TSTRING) root = lua_tolstring(L, -1, &rootlen);
  int level = 1;
  while (dle_frame(L, level, root, rootlen)) level++;
  lua_Debug ar;
  lua_pop(L, 1);
  if (lua_getstack(L, level, &ar) && lua_getinfo(L, "Sl", &ar) && ar.currentline > 0)
    lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
  else
    lua_pushliteral(L, "");
}

int dle_lua_error(lua_State *L, const char *fmt, ...) {
  va_list ap;
  push_where(L);
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_concat(L, 2);
  return lua_error(L);
}

/* "argument #2" (or "self", "argument #1" for t:f(x)): numbered as the user wrote the call. */
static void push_arg_name(lua_State *L, int arg) {
  if (called_as_method(L)) arg--;
  if (arg == 0)
    lua_pushliteral(L, "self");
  else
    lua_pushfstring(L, "argument #%d", arg);
}

int dle_lua_argerror(lua_State *L, int arg, const char *msg) {
  const char *fn = dle_lua_fname(L);
  push_arg_name(L, arg);
  return dle_lua_error(L, "%s: %s: %s", fn, lua_tostring(L, -1), msg);
}

/* "a number" / "an integer": expected names read as in the rest of dle's messages. */
static const char *article(const char *what) { return strchr("aeiou", what[0]) ? "an" : "a"; }

int dle_lua_typeerror(lua_State *L, int arg, const char *expected) {
  const char *fn = dle_lua_fname(L);
  const char *got = lua_type(L, arg) == LUA_TNUMBER
                        ? lua_pushfstring(L, "number %s", luaL_tolstring(L, arg, NULL))
                        : luaL_typename(L, arg);
  if (luaL_getmetafield(L, arg, "__name") == LUA_TSTRING) got = lua_tostring(L, -1);
  push_arg_name(L, arg);
  return dle_lua_error(L, "%s: %s must be %s %s, got %s", fn, lua_tostring(L, -1),
                       article(expected), expected, got);
}

lua_Number dle_lua_checknumber(lua_State *L, int arg) {
  int isnum;
  lua_Number v = lua_tonumberx(L, arg, &isnum);
  if (!isnum || lua_type(L, arg) != LUA_TNUMBER) dle_lua_typeerror(L, arg, "number");
  return v;
}

lua_Integer dle_lua_checkinteger(lua_State *L, int arg) {
  int isnum;
  lua_Integer v = lua_tointegerx(L, arg, &isnum);
  if (!isnum || lua_type(L, arg) != LUA_TNUMBER) dle_lua_typeerror(L, arg, "integer");
  return v;
}

const char *dle_lua_checklstring(lua_State *L, int arg, size_t *len) {
  if (lua_type(L, arg) != LUA_TSTRING) dle_lua_typeerror(L, arg, "string");
  return lua_tolstring(L, arg, len);
}

lua_Number dle_lua_optnumber(lua_State *L, int arg, lua_Number def) {
  return lua_isnoneornil(L, arg) ? def : dle_lua_checknumber(L, arg);
}
lua_Integer dle_lua_optinteger(lua_State *L, int arg, lua_Integer def) {
  return lua_isnoneornil(L, arg) ? def : dle_lua_checkinteger(L, arg);
}
const char *dle_lua_optlstring(lua_State *L, int arg, const char *def, size_t *len) {
  if (!lua_isnoneornil(L, arg)) return dle_lua_checklstring(L, arg, len);
  if (len) *len = def ? strlen(def) : 0;
  return def;
}

void dle_lua_checktype(lua_State *L, int arg, int t) {
  if (lua_type(L, arg) != t) dle_lua_typeerror(L, arg, lua_typename(L, t));
}

void *dle_lua_checkudata(lua_State *L, int arg, const char *tname) {
  void *p = luaL_testudata(L, arg, tname);
  if (!p) dle_lua_typeerror(L, arg, tname);
  return p;
}

int dle_lua_checkoption(lua_State *L, int arg, const char *def, const char *const lst[]) {
  const char *name =
      def ? dle_lua_optlstring(L, arg, def, NULL) : dle_lua_checklstring(L, arg, NULL);
  for (int i = 0; lst[i]; i++)
    if (strcmp(lst[i], name) == 0) return i;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 0; lst[i]; i++) {
    luaL_addstring(&b, i ? ", " : "");
    luaL_addstring(&b, lst[i]);
  }
  luaL_pushresult(&b);
  return dle_lua_argerror(
      L, arg, lua_pushfstring(L, "invalid option '%s' (one of %s)", name, lua_tostring(L, -1)));
}

void dle_lua_open_errors(lua_State *L, int module) {
  lua_pushcfunction(L, set_source_root);
  lua_setfield(L, module, "_set_source_root");
}
