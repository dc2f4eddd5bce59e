/* lua_conv.c — 2-D convolution for Lua (pooling: lua_pool.c):
 *   dle.conv2d(x, w, bias_or_nil, {stride, padding, dilation, groups})   (also x:conv2d(w, ...))
 * Each geometry value is a number (both dims) or a table {h, w}. The gradient ops are reachable
 * through dle.core: _conv2d_grad_input(gy, w, {H, W}, opts), _conv2d_grad_weight(gy, x, {kh, kw},
 * opts), and as tensor methods of gy with the op's name. */
#include "lua_pairs.h"
#include "lua_util.h"
#include "../engine/dle.h"

static const char *const CONV_OPTS[] = {"dilation", "groups", "padding", "stride", NULL};

static dle_conv2d_params conv_params(lua_State *L, int opts, const char *fn) {
  dle_conv2d_params p;
  pair_field(L, opts, fn, "stride", 1, p.stride);
  pair_field(L, opts, fn, "padding", 0, p.padding);
  pair_field(L, opts, fn, "dilation", 1, p.dilation);
  p.groups = 1;
  if (opts) {
    lua_getfield(L, opts, "groups");
    if (!lua_isnil(L, -1)) {
      if (!lua_isinteger(L, -1)) luaL_error(L, "%s: groups must be an integer", fn);
      p.groups = lua_tointeger(L, -1);
    }
    lua_pop(L, 1);
  }
  return p;
}

/* conv2d(x, w, bias_or_nil, opts) */
static int l_conv2d(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *w = dle_lua_check(L, 2), *bias = NULL, *r = NULL;
  if (!lua_isnoneornil(L, 3) && !(bias = dle_lua_opt(L, 3)))
    return luaL_error(L, "conv2d: bias must be a tensor or nil, got %s", luaL_typename(L, 3));
  dle_conv2d_params p = conv_params(L, dle_lua_opts_at(L, 4, "conv2d", CONV_OPTS), "conv2d");
  DLE_LUA_TRY(L, dle_conv2d(&r, x, w, bias, &p));
  dle_lua_push(L, r);
  return 1;
}

/* The two conv2d gradients: name(gy, other, {a, b}, opts), {a, b} the size named by what. */
static int conv_grad(lua_State *L, const char *name, const char *what,
                     dle_status (*op)(dle_tensor **, dle_tensor *, dle_tensor *,
                                      const dle_conv2d_params *, int64_t, int64_t)) {
  dle_tensor *gy = dle_lua_check(L, 1), *other = dle_lua_check(L, 2), *r = NULL;
  int64_t ab[2];
  pair_at(L, 3, name, what, 0, ab);
  dle_conv2d_params p = conv_params(L, dle_lua_opts_at(L, 4, name, CONV_OPTS), name);
  DLE_LUA_TRY(L, op(&r, gy, other, &p, ab[0], ab[1]));
  dle_lua_push(L, r);
  return 1;
}

/* _conv2d_grad_input(gy, w, {H, W}, opts) */
static int l_conv2d_grad_input(lua_State *L) {
  return conv_grad(L, "conv2d_grad_input", "input size", dle_conv2d_grad_input);
}

/* _conv2d_grad_weight(gy, x, {kh, kw}, opts) */
static int l_conv2d_grad_weight(lua_State *L) {
  return conv_grad(L, "conv2d_grad_weight", "kernel size", dle_conv2d_grad_weight);
}

void dle_lua_open_conv(lua_State *L, int module, int methods) {
  // clang-format off
  static const luaL_Reg both[] = {{"conv2d", l_conv2d}, {NULL, NULL}};
  static const luaL_Reg internal[] = {
      {"_conv2d_grad_input", l_conv2d_grad_input}, {"_conv2d_grad_weight", l_conv2d_grad_weight},
      {NULL, NULL}};
  /* also as tensor methods named like the ops (gy:conv2d_grad_input(w, {H, W}, opts)), so every
   * op of the table is reachable from Lua (tests/ops_table_spec.lua) without a public dle.* name */
  static const luaL_Reg grads[] = {
      {"conv2d_grad_input", l_conv2d_grad_input}, {"conv2d_grad_weight", l_conv2d_grad_weight},
      {NULL, NULL}};
  // clang-format on
  dle_lua_register(L, module, methods, internal, both, grads);
}
