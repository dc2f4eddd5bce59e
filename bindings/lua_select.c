/* lua_select.c — the select family for Lua (also as methods of t), PyTorch's names with 1-based
 * dims and indices:
 *   dle.nonzero(t, {as_tuple = false}) -> int64 {n, t:dim()} positions, or a list of t:dim() 1-D
 *   dle.masked_select(t, mask) -> 1-D;  dle.masked_scatter(t, mask, source), t:masked_scatter_
 *   dle.core._unique(t, consecutive) -> values, inverse, counts (lua/dle/select.lua adds the options)
 *   dle.bincount(t, weights, minlength) or dle.bincount(t, {weights =, minlength =})
 *   dle.searchsorted(sorted, values, {right = false, side = "left"}) -> int64 (1-based)
 *   dle.mode(t, dim = -1, keepdim or {keepdim = false}) -> values, indices */
#include <string.h>

#include "../engine/dle.h"
#include "lua_util.h"

#define LUA_INDEX_BASE 1

/* The tensor argument at arg, or a number made a 0-dim tensor of like's dtype (kept on the
 * stack). */
static dle_tensor *tensor_or_number(lua_State *L, int arg, const char *fn, const char *what,
                                    const dle_tensor *like) {
  dle_tensor *t = dle_lua_opt(L, arg);
  if (t) return t;
  if (lua_type(L, arg) != LUA_TNUMBER)
    luaL_error(L, "%s: %s must be a tensor or a number, got %s", fn, what, luaL_typename(L, arg));
  dle_dtype dt = dle_dtype_is_float(like->dtype) || lua_isinteger(L, arg) ? like->dtype : DLE_F64;
  DLE_LUA_TRY(L, dle_scalar_tensor(&t, lua_tonumber(L, arg), dt));
  dle_lua_push(L, t);
  lua_replace(L, arg);
  return t;
}

static int l_nonzero(lua_State *L) {
  static const char *const known[] = {"as_tuple", NULL};
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  int opts = dle_lua_opts_at(L, 2, "nonzero", known);
  DLE_LUA_TRY(L, dle_nonzero(&r, x, LUA_INDEX_BASE));
  dle_lua_push(L, r);
  if (!dle_lua_opt_flag(L, opts, "nonzero", "as_tuple", false)) return 1;
  lua_createtable(L, x->ndim, 0); /* PyTorch's tuple: one 1-D tensor per dim */
  for (int d = 0; d < x->ndim; d++) {
    dle_tensor *col = NULL;
    DLE_LUA_TRY(L, dle_select(&col, r, 1, d));
    dle_lua_push(L, col);
    lua_rawseti(L, -2, d + 1);
  }
  return 1;
}

static dle_tensor *check_mask_arg(lua_State *L, int arg, const char *fn) {
  dle_tensor *m = dle_lua_opt(L, arg);
  if (!m) luaL_error(L, "%s: mask must be a bool tensor, got %s", fn, luaL_typename(L, arg));
  return m;
}

static int l_masked_select(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  dle_tensor *mask = check_mask_arg(L, 2, "masked_select");
  return dle_lua_push_new(L, dle_masked_select(&r, x, mask), &r);
}

static int masked_scatter_impl(lua_State *L, bool inplace) {
  const char *fn = inplace ? "masked_scatter_" : "masked_scatter";
  dle_tensor *x = dle_lua_check(L, 1), *r = inplace ? x : NULL;
  dle_tensor *mask = check_mask_arg(L, 2, fn), *source = dle_lua_opt(L, 3);
  if (!source) return luaL_error(L, "%s: source must be a tensor, got %s", fn, luaL_typename(L, 3));
  DLE_LUA_TRY(L, dle_masked_scatter(&r, x, mask, source));
  return dle_lua_push_result(L, r, inplace);
}
static int l_masked_scatter(lua_State *L) { return masked_scatter_impl(L, false); }
static int l_masked_scatter_(lua_State *L) { return masked_scatter_impl(L, true); }

/* _unique(t, consecutive) -> values, inverse, counts (the options are lua/dle/select.lua's). */
static int l_unique(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *r[3] = {NULL, NULL, NULL}; /* values, inverse, counts */
  dle_status st = dle_unique(&r[0], &r[1], &r[2], x, lua_toboolean(L, 2), LUA_INDEX_BASE);
  return dle_lua_push_all(L, st, r, 3);
}

static int l_bincount(lua_State *L) {
  static const char *const known[] = {"weights", "minlength", NULL};
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  int wi = 2, mi = 3;
  if (lua_istable(L, 2) && !dle_lua_opt(L, 2)) { /* bincount(t, {weights =, minlength =}) */
    int opts = dle_lua_opts_at(L, 2, "bincount", known);
    lua_getfield(L, opts, "weights");
    lua_getfield(L, opts, "minlength");
    wi = lua_gettop(L) - 1, mi = lua_gettop(L);
  }
  dle_tensor *w = NULL;
  if (!lua_isnoneornil(L, wi) && !(w = dle_lua_opt(L, wi)))
    return luaL_error(L, "bincount: weights must be a tensor, got %s", luaL_typename(L, wi));
  int64_t minlength =
      lua_isnoneornil(L, mi) ? 0 : dle_lua_check_int(L, mi, "bincount", "minlength");
  return dle_lua_push_new(L, dle_bincount(&r, x, w, minlength), &r);
}

static int l_searchsorted(lua_State *L) {
  static const char *const known[] = {"right", "side", NULL};
  dle_tensor *seq = dle_lua_check(L, 1), *r = NULL;
  dle_tensor *v = tensor_or_number(L, 2, "searchsorted", "values", seq);
  int opts = dle_lua_opts_at(L, 3, "searchsorted", known);
  bool right = dle_lua_opt_flag(L, opts, "searchsorted", "right", false);
  if (opts) {
    lua_getfield(L, opts, "side");
    if (!lua_isnil(L, -1)) {
      const char *side = lua_tostring(L, -1);
      bool is_right = side && strcmp(side, "right") == 0;
      if (!is_right && !(side && strcmp(side, "left") == 0))
        return luaL_error(L, "searchsorted: side must be \"left\" or \"right\", got %s",
                          side ? side : luaL_typename(L, -1));
      if (lua_getfield(L, opts, "right") != LUA_TNIL && right != is_right)
        return luaL_error(L, "searchsorted: side \"%s\" contradicts right = %s", side,
                          right ? "true" : "false");
      right = is_right;
    }
  }
  return dle_lua_push_new(L, dle_searchsorted(&r, seq, v, right, LUA_INDEX_BASE), &r);
}

static int l_mode(lua_State *L) {
  static const char *const known[] = {"keepdim", NULL};
  dle_tensor *x = dle_lua_check(L, 1), *r[2] = {NULL, NULL}; /* values, indices */
  bool keepdim = false;
  int dim = -1;
  if (lua_istable(L, 2) && !dle_lua_opt(L, 2)) { /* t:mode{keepdim = true} */
    keepdim = dle_lua_opt_flag(L, dle_lua_opts_at(L, 2, "mode", known), "mode", "keepdim", false);
  } else {
    dim = dle_lua_optdim(L, 2, "mode", -1);
    if (lua_isboolean(L, 3))
      keepdim = lua_toboolean(L, 3);
    else
      keepdim = dle_lua_opt_flag(L, dle_lua_opts_at(L, 3, "mode", known), "mode", "keepdim", false);
  }
  return dle_lua_push_all(L, dle_mode(&r[0], &r[1], x, dim, keepdim, LUA_INDEX_BASE), r, 2);
}

void dle_lua_open_select(lua_State *L, int module, int methods) {
  // clang-format off
  static const luaL_Reg module_only[] = {{"_unique", l_unique}, {NULL, NULL}};
  static const luaL_Reg both[] = {
      {"nonzero", l_nonzero}, {"masked_select", l_masked_select},
      {"masked_scatter", l_masked_scatter}, {"bincount", l_bincount},
      {"searchsorted", l_searchsorted}, {"mode", l_mode}, {NULL, NULL}};
  static const luaL_Reg methods_only[] = {{"masked_scatter_", l_masked_scatter_}, {NULL, NULL}};
  // clang-format on
  dle_lua_register(L, module, methods, module_only, both, methods_only);
}
