/* lua_sort.c — the sort family for Lua (also as methods of t), PyTorch's names and defaults with
 * 1-based dims and indices (dim defaults to the last one):
 *   dle.sort(t, dim, {descending = false, stable = false}) -> values, int64 indices
 *   dle.argsort(t, dim, {descending = false, stable = false}) -> indices
 *   dle.msort(t) -> sorted values along dim 1
 *   dle.topk(t, k, dim, {largest = true, sorted = true}) -> values, indices
 *   dle.kthvalue(t, k, dim, keepdim or {keepdim = false}) -> values, indices (k-th smallest)
 * The options table may stand in place of dim (t:sort{descending = true}). Every sort is stable
 * and topk's results are always sorted (the options are accepted for PyTorch's sake); ties go to
 * the lower index. */
#include "lua_util.h"
#include "../engine/dle.h"

/* Reads [dim][, options] from argument `at` on: the 0-based dim (default the last) and the index
 * of the options table (0: none), checked against `known`. */
static int dim_and_options(lua_State *L, int at, const char *fn, const char *const *known,
                           int *opts) {
  int dim = -1;
  if (lua_istable(L, at) && !dle_lua_opt(L, at)) {
    *opts = at;
  } else {
    dim = dle_lua_optdim(L, at, fn, -1);
    *opts = lua_isnoneornil(L, at + 1) ? 0 : at + 1;
  }
  if (*opts && !(lua_istable(L, *opts) && !dle_lua_opt(L, *opts)))
    luaL_error(L, "%s: expected an options table after the dim, got %s", fn,
               luaL_typename(L, *opts));
  if (*opts) dle_lua_check_options(L, *opts, fn, known);
  return dim;
}

/* Runs op on x with attrs a (1-based indices) and pushes its values and/or indices. */
static int run(lua_State *L, dle_op op, dle_tensor *x, dle_attrs *a, bool values, bool indices) {
  dle_tensor *outs[2] = {NULL, NULL};
  a->index_base = 1;
  DLE_LUA_TRY(L, dle_op_call(op, outs, &x, 1, a));
  if (values)
    dle_lua_push(L, outs[0]);
  else
    dle_tensor_release(outs[0]);
  if (indices)
    dle_lua_push(L, outs[1]);
  else
    dle_tensor_release(outs[1]);
  return (int)values + (int)indices;
}

static const char *const sort_options[] = {"descending", "stable", NULL};

/* sort and argsort: upvalue 1 is true for argsort (indices only) */
static int l_sort(lua_State *L) {
  bool arg = lua_toboolean(L, lua_upvalueindex(1));
  const char *fn = arg ? "argsort" : "sort";
  dle_tensor *x = dle_lua_check(L, 1);
  int opts = 0;
  dle_attrs a = {0};
  a.ints[0] = dim_and_options(L, 2, fn, sort_options, &opts);
  a.ints[1] = dle_lua_opt_flag(L, opts, fn, "descending", false);
  a.ints[2] = dle_lua_opt_flag(L, opts, fn, "stable", false);
  a.nints = 3;
  return run(L, DLE_OP_SORT, x, &a, !arg, true);
}

static int l_msort(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1);
  if (!lua_isnone(L, 2)) luaL_error(L, "msort: takes only the tensor (it sorts along dim 1)");
  dle_attrs a = {0};
  a.nints = 1; /* dim 0 */
  return run(L, DLE_OP_SORT, x, &a, true, false);
}

static int l_topk(lua_State *L) {
  static const char *const known[] = {"largest", "sorted", NULL};
  dle_tensor *x = dle_lua_check(L, 1);
  lua_Integer k = luaL_checkinteger(L, 2);
  int opts = 0;
  dle_attrs a = {0};
  a.ints[0] = dim_and_options(L, 3, "topk", known, &opts);
  a.ints[1] = k;
  a.ints[2] = dle_lua_opt_flag(L, opts, "topk", "largest", true);
  a.ints[3] = dle_lua_opt_flag(L, opts, "topk", "sorted", true);
  a.nints = 4;
  return run(L, DLE_OP_TOPK, x, &a, true, true);
}

static int l_kthvalue(lua_State *L) {
  static const char *const known[] = {"keepdim", NULL};
  dle_tensor *x = dle_lua_check(L, 1);
  lua_Integer k = luaL_checkinteger(L, 2);
  dle_attrs a = {0};
  int opts = 0;
  if (lua_isboolean(L, 4)) { /* t:kthvalue(k, dim, keepdim), as t:max(dim, keepdim) */
    a.ints[0] = dle_lua_optdim(L, 3, "kthvalue", -1);
    a.keepdim = lua_toboolean(L, 4);
  } else {
    a.ints[0] = dim_and_options(L, 3, "kthvalue", known, &opts);
    a.keepdim = dle_lua_opt_flag(L, opts, "kthvalue", "keepdim", false);
  }
  a.ints[1] = k;
  a.nints = 2;
  return run(L, DLE_OP_KTHVALUE, x, &a, true, true);
}

void dle_lua_open_sort(lua_State *L, int module, int methods) {
  static const luaL_Reg fns[] = {
      {"msort", l_msort}, {"topk", l_topk}, {"kthvalue", l_kthvalue}, {NULL, NULL}};
  dle_lua_setfuncs(L, module, fns);
  dle_lua_setfuncs(L, methods, fns);
  for (int arg = 0; arg < 2; arg++) {
    lua_pushboolean(L, arg);
    lua_pushcclosure(L, l_sort, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, module, arg ? "argsort" : "sort");
    lua_setfield(L, methods, arg ? "argsort" : "sort");
  }
}
