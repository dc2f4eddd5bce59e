/* lua_conv.c — 2-D convolution and pooling for Lua:
 *   dle.conv2d(x, w, bias_or_nil, {stride, padding, dilation, groups})   (also x:conv2d(w, ...))
 *   dle.max_pool2d(x, k, {stride = k, padding = 0}) -> values, indices (int64, 1-based h*W + w)
 *   dle.avg_pool2d(x, k, {stride = k, padding = 0, count_include_pad = true})
 * Each geometry value is a number (both dims) or a table {h, w}. The gradient ops are reachable
 * through dle.core: _conv2d_grad_input(gy, w, {H, W}, opts), _conv2d_grad_weight(gy, x, {kh, kw},
 * opts), _avg_pool2d_grad(gy, {H, W}, k, opts), and as tensor methods of gy with the op's name. */
#include "lua_util.h"
#include "../engine/dle.h"

/* A number or a {h, w} table at idx into out[0..1]; def when nil. */
static void pair_at(lua_State *L, int idx, const char *fn, const char *what, int64_t def,
                    int64_t *out) {
  if (lua_isnoneornil(L, idx)) {
    out[0] = out[1] = def;
    return;
  }
  if (lua_isinteger(L, idx)) {
    out[0] = out[1] = lua_tointeger(L, idx);
    return;
  }
  if (lua_istable(L, idx) && lua_rawlen(L, idx) == 2) {
    for (int i = 0; i < 2; i++) {
      lua_rawgeti(L, idx, i + 1);
      if (!lua_isinteger(L, -1))
        luaL_error(L, "%s: %s must be an integer or a table {h, w} of integers", fn, what);
      out[i] = lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
    return;
  }
  luaL_error(L, "%s: %s must be an integer or a table {h, w} of integers, got %s", fn, what,
             luaL_typename(L, idx));
}

/* opts[field] as a pair (def when absent). */
static void pair_field(lua_State *L, int opts, const char *fn, const char *field, int64_t def,
                       int64_t *out) {
  if (!opts) {
    out[0] = out[1] = def;
    return;
  }
  lua_getfield(L, opts, field);
  pair_at(L, lua_gettop(L), fn, field, def, out);
  lua_pop(L, 1);
}

/* The options table at idx (0 when nil), holding only the names in known; or an error. */
static int opts_at(lua_State *L, int idx, const char *fn, const char *const *known) {
  if (lua_isnoneornil(L, idx)) return 0;
  if (!lua_istable(L, idx))
    luaL_error(L, "%s: options must be a table, got %s", fn, luaL_typename(L, idx));
  dle_lua_check_options(L, idx, fn, known);
  return lua_absindex(L, idx);
}

static const char *const CONV_OPTS[] = {"dilation", "groups", "padding", "stride", NULL};
static const char *const MAX_POOL_OPTS[] = {"padding", "stride", NULL};
static const char *const AVG_POOL_OPTS[] = {"count_include_pad", "padding", "stride", NULL};

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

/* conv2d(x, w, bias_or_nil, opts) */
static int l_conv2d(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *w = dle_lua_check(L, 2), *bias = NULL, *r = NULL;
  if (!lua_isnoneornil(L, 3) && !(bias = dle_lua_opt(L, 3)))
    return luaL_error(L, "conv2d: bias must be a tensor or nil, got %s", luaL_typename(L, 3));
  dle_conv2d_params p = conv_params(L, opts_at(L, 4, "conv2d", CONV_OPTS), "conv2d");
  DLE_LUA_TRY(L, dle_conv2d(&r, x, w, bias, &p));
  dle_lua_push(L, r);
  return 1;
}

static int l_max_pool2d(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *v = NULL, *i = NULL;
  dle_pool2d_params p = pool_params(L, 2, opts_at(L, 3, "max_pool2d", MAX_POOL_OPTS), "max_pool2d");
  DLE_LUA_TRY(L, dle_max_pool2d(&v, &i, x, &p, 1));
  dle_lua_push(L, v);
  dle_lua_push(L, i);
  return 2;
}

static int l_avg_pool2d(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  dle_pool2d_params p = pool_params(L, 2, opts_at(L, 3, "avg_pool2d", AVG_POOL_OPTS), "avg_pool2d");
  DLE_LUA_TRY(L, dle_avg_pool2d(&r, x, &p));
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
  dle_conv2d_params p = conv_params(L, opts_at(L, 4, name, CONV_OPTS), name);
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

/* _avg_pool2d_grad(gy, {H, W}, k, opts) */
static int l_avg_pool2d_grad(lua_State *L) {
  dle_tensor *gy = dle_lua_check(L, 1), *r = NULL;
  int64_t hw[2];
  pair_at(L, 2, "avg_pool2d_grad", "input size", 0, hw);
  dle_pool2d_params p =
      pool_params(L, 3, opts_at(L, 4, "avg_pool2d_grad", AVG_POOL_OPTS), "avg_pool2d_grad");
  DLE_LUA_TRY(L, dle_avg_pool2d_grad(&r, gy, &p, hw[0], hw[1]));
  dle_lua_push(L, r);
  return 1;
}

void dle_lua_open_conv(lua_State *L, int module, int methods) {
  // clang-format off
  static const luaL_Reg both[] = {
      {"conv2d", l_conv2d}, {"max_pool2d", l_max_pool2d}, {"avg_pool2d", l_avg_pool2d},
      {NULL, NULL}};
  static const luaL_Reg internal[] = {
      {"_conv2d_grad_input", l_conv2d_grad_input}, {"_conv2d_grad_weight", l_conv2d_grad_weight},
      {"_avg_pool2d_grad", l_avg_pool2d_grad}, {NULL, NULL}};
  /* also as tensor methods named like the ops (gy:conv2d_grad_input(w, {H, W}, opts)), so every
   * op of the table is reachable from Lua (tests/ops_table_spec.lua) without a public dle.* name */
  static const luaL_Reg grads[] = {
      {"conv2d_grad_input", l_conv2d_grad_input}, {"conv2d_grad_weight", l_conv2d_grad_weight},
      {"avg_pool2d_grad", l_avg_pool2d_grad}, {NULL, NULL}};
  // clang-format on
  dle_lua_register(L, module, methods, internal, both, grads);
}
