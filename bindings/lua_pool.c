/* lua_pool.c — 2-D pooling for Lua:
 *   dle.max_pool2d(x, k, {stride = k, padding = 0}) -> values, indices (int64, 1-based h*W + w)
 *   dle.avg_pool2d(x, k, {stride = k, padding = 0, count_include_pad = true})
 * Each geometry value is a number (both dims) or a table {h, w}. The gradient op is reachable
 * through dle.core: _avg_pool2d_grad(gy, {H, W}, k, opts), and as the tensor method
 * gy:avg_pool2d_grad(...). */
#include "lua_pairs.h"
#include "lua_util.h"
#include "../engine/dle.h"

static const char *const MAX_POOL_OPTS[] = {"padding", "stride", NULL};
static const char *const AVG_POOL_OPTS[] = {"count_include_pad", "padding", "stride", NULL};

/* k at kidx, stride (default k), padding and count_include_pad from the options at opts. */
static dle_pool2d_params pool_params(lua_State *L, int kidx, int opts, const char *fn) {
  dle_pool2d_params p;
  if (lua_isnoneornil(L, kidx)) luaL_error(L, "%s: kernel size is missing", fn);
  pair_at(L, kidx, fn, "kernel size", 0, p.kernel);
  p.stride[0] = p.kernel[0], p.stride[1] = p.kernel[1];
  if (opts) {
    lua_getfield(L, opts, "stride");
    if (!lua_isnil(L, -1)) pair_at(L, lua_gettop(L), fn, "stride", 0, p.stride);
    lua_pop(L, 1);
  }
  pair_field(L, opts, fn, "padding", 0, p.padding);
  p.count_include_pad = true;
  if (opts) {
    lua_getfield(L, opts, "count_include_pad");
    if (!lua_isnil(L, -1)) p.count_include_pad = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  return p;
}

static int l_max_pool2d(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *v = NULL, *i = NULL;
  dle_pool2d_params p =
      pool_params(L, 2, dle_lua_opts_at(L, 3, "max_pool2d", MAX_POOL_OPTS), "max_pool2d");
  DLE_LUA_TRY(L, dle_max_pool2d(&v, &i, x, &p, 1));
  dle_lua_push(L, v);
  dle_lua_push(L, i);
  return 2;
}

static int l_avg_pool2d(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  dle_pool2d_params p =
      pool_params(L, 2, dle_lua_opts_at(L, 3, "avg_pool2d", AVG_POOL_OPTS), "avg_pool2d");
  DLE_LUA_TRY(L, dle_avg_pool2d(&r, x, &p));
  dle_lua_push(L, r);
  return 1;
}

/* _avg_pool2d_grad(gy, {H, W}, k, opts) */
static int l_avg_pool2d_grad(lua_State *L) {
  dle_tensor *gy = dle_lua_check(L, 1), *r = NULL;
  int64_t hw[2];
  pair_at(L, 2, "avg_pool2d_grad", "input size", 0, hw);
  dle_pool2d_params p =
      pool_params(L, 3, dle_lua_opts_at(L, 4, "avg_pool2d_grad", AVG_POOL_OPTS), "avg_pool2d_grad");
  DLE_LUA_TRY(L, dle_avg_pool2d_grad(&r, gy, &p, hw[0], hw[1]));
  dle_lua_push(L, r);
  return 1;
}

void dle_lua_open_pool(lua_State *L, int module, int methods) {
  // clang-format off
  static const luaL_Reg both[] = {
      {"max_pool2d", l_max_pool2d}, {"avg_pool2d", l_avg_pool2d}, {NULL, NULL}};
  static const luaL_Reg internal[] = {{"_avg_pool2d_grad", l_avg_pool2d_grad}, {NULL, NULL}};
  /* also as a tensor method named like the op (gy:avg_pool2d_grad({H, W}, k, opts)), so every op
   * of the table is reachable from Lua (tests/ops_table_spec.lua) without a public dle.* name */
  static const luaL_Reg grads[] = {{"avg_pool2d_grad", l_avg_pool2d_grad}, {NULL, NULL}};
  // clang-format on
  dle_lua_register(L, module, methods, internal, both, grads);
}
