/* lua_scan.c — the scan ops for Lua, each as dle.<name>(t, dim, ...) and t:<name>(dim, ...):
 *   cumsum(t, dim, {dtype = }), cumprod(t, dim, {dtype = }): the input converted to dtype first
 *     (integers and bool otherwise give int64, as in PyTorch);
 *   logcumsumexp(t, dim);
 *   cummax(t, dim), cummin(t, dim) -> values, 1-based int64 indices.
 * dim is 1-based (negative counts from the end); a 0-dim tensor takes 1 or -1. */
#include "../engine/dle.h"
#include "lua_util.h"

/* Argument 3 may only be an options table holding the names in known. */
static void check_opts(lua_State *L, const char *fn, const char *const *known) {
  if (!lua_isnoneornil(L, 3) && !lua_istable(L, 3))
    luaL_error(L, "%s: expected an options table for argument #3, got %s", fn, luaL_typename(L, 3));
  dle_lua_check_options(L, 3, fn, known);
}

/* t:cumsum(dim, opts), cumprod, logcumsumexp. upvalue 1: the op; upvalue 2: it takes a dtype. */
static int l_scan(lua_State *L) {
  dle_op op = (dle_op)lua_tointeger(L, lua_upvalueindex(1));
  bool takes_dtype = lua_toboolean(L, lua_upvalueindex(2));
  const char *fn = dle_op_get_info(op)->name;
  dle_tensor *x = dle_lua_check(L, 1), *xc = x, *r = NULL;
  int d = dle_lua_dim(L, 2, fn);
  static const char *const with_dtype[] = {"dtype", NULL}, *const none[] = {NULL};
  check_opts(L, fn, takes_dtype ? with_dtype : none);
  if (lua_istable(L, 3) && lua_getfield(L, 3, "dtype") != LUA_TNIL)
    DLE_LUA_TRY(L, dle_to_dtype(&xc, x, dle_lua_check_dtype(L, -1, fn)));
  else
    dle_tensor_retain(x);
  dle_status st = dle_scan(op, &r, NULL, xc, d, false, 0);
  dle_tensor_release(xc);
  if (st != DLE_OK) return dle_lua_fail(L);
  dle_lua_push(L, r);
  return 1;
}

/* t:cummax(dim), t:cummin(dim) -> values, 1-based indices. upvalue 1: the op. */
static int l_scan_indexed(lua_State *L) {
  dle_op op = (dle_op)lua_tointeger(L, lua_upvalueindex(1));
  const char *fn = dle_op_get_info(op)->name;
  dle_tensor *x = dle_lua_check(L, 1), *v = NULL, *i = NULL;
  int d = dle_lua_dim(L, 2, fn);
  static const char *const none[] = {NULL};
  check_opts(L, fn, none);
  DLE_LUA_TRY(L, dle_scan(op, &v, &i, x, d, false, 1));
  dle_lua_push(L, v);
  dle_lua_push(L, i);
  return 2;
}

void dle_lua_open_scan(lua_State *L, int module, int methods) {
  static const struct {
    const char *name;
    dle_op op;
    bool indexed, dtype;
  } fns[] = {{"cumsum", DLE_OP_CUMSUM, false, true},
             {"cumprod", DLE_OP_CUMPROD, false, true},
             {"logcumsumexp", DLE_OP_LOGCUMSUMEXP, false, false},
             {"cummax", DLE_OP_CUMMAX, true, false},
             {"cummin", DLE_OP_CUMMIN, true, false}};
  for (size_t k = 0; k < sizeof fns / sizeof *fns; k++) {
    lua_pushinteger(L, fns[k].op);
    lua_pushboolean(L, fns[k].dtype);
    lua_pushcclosure(L, fns[k].indexed ? l_scan_indexed : l_scan, 2);
    lua_pushvalue(L, -1); /* one function under both names: dle.cumsum is Tensor.cumsum */
    lua_setfield(L, module, fns[k].name);
    lua_setfield(L, methods, fns[k].name);
  }
}
