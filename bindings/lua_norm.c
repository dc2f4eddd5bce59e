/* lua_norm.c — the fused normalization ops for Lua:
 *   dle.layer_norm(x, normalized_shape, weight, bias, eps) -> y, stats
 *   dle.batch_norm(x, weight, bias, running_mean, running_var, training, eps) -> y, stats
 *   dle.group_norm(x, num_groups, weight, bias, eps) -> y, stats {N * num_groups, 2}
 * (also as methods of x). normalized_shape is the size of the last dim or a table of the trailing
 * sizes; weight, bias and (when training) the running statistics may be nil; eps defaults to
 * 1e-5. stats {rows or C, 2} holds the mean and biased variance used (dle.batch_norm does not
 * update running statistics: dle.nn.functional.batch_norm does, from stats). The backward ops are
 * methods of the output gradient gy, named like the ops:
 *   gy:layer_norm_grad_input(x, stats, weight_or_nil, normalized_shape, eps)
 *   gy:layer_norm_grad_affine(x, stats, normalized_shape, eps) -> gw, gb
 *   gy:batch_norm_grad_input(x, stats, weight_or_nil, eps)
 *   gy:batch_norm_grad_affine(x, stats, eps) -> gw, gb
 *   gy:group_norm_grad_input(x, stats, weight_or_nil, num_groups, eps)
 *   gy:group_norm_grad_affine(x, stats, num_groups, eps) -> gw, gb */
#include "lua_util.h"
#include "../engine/dle.h"

/* The tensor or nil at idx (NULL for nil); an error naming `what` for anything else. */
static dle_tensor *opt_tensor(lua_State *L, int idx, const char *fn, const char *what) {
  if (lua_isnoneornil(L, idx)) return NULL;
  dle_tensor *t = dle_lua_opt(L, idx);
  if (!t) luaL_error(L, "%s: %s must be a tensor or nil, got %s", fn, what, luaL_typename(L, idx));
  return t;
}

static double eps_at(lua_State *L, int idx, const char *fn) {
  if (lua_isnoneornil(L, idx)) return 1e-5;
  if (!lua_isnumber(L, idx))
    luaL_error(L, "%s: eps must be a number, got %s", fn, luaL_typename(L, idx));
  return lua_tonumber(L, idx);
}

/* The number of trailing dims of x that normalized_shape (at idx) names, after checking that
 * they match x's sizes. */
static int normalized_dims(lua_State *L, int idx, const dle_tensor *x, const char *fn) {
  int64_t sizes[DLE_MAX_DIMS];
  int k = 0;
  if (lua_isinteger(L, idx)) {
    sizes[k++] = lua_tointeger(L, idx);
  } else if (lua_istable(L, idx)) {
    int n = (int)lua_rawlen(L, idx);
    if (n < 1 || n > DLE_MAX_DIMS)
      luaL_error(L, "%s: normalized_shape must have 1 to %d sizes, got %d", fn, DLE_MAX_DIMS, n);
    for (int i = 1; i <= n; i++) {
      lua_rawgeti(L, idx, i);
      if (!lua_isinteger(L, -1)) luaL_error(L, "%s: normalized_shape must hold integers", fn);
      sizes[k++] = lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
  } else {
    luaL_error(L, "%s: normalized_shape must be an integer or a table of sizes, got %s", fn,
               luaL_typename(L, idx));
  }
  bool ok = k <= x->ndim;
  for (int i = 0; ok && i < k; i++) ok = x->sizes[x->ndim - k + i] == sizes[i];
  if (!ok) {
    char b1[128], b2[128];
    luaL_error(L, "%s: input of shape %s does not end with normalized_shape %s", fn,
               dle_tensor_shape_str(b1, sizeof b1, x), dle_shape_str(b2, sizeof b2, k, sizes));
  }
  return k;
}

static int push2(lua_State *L, dle_tensor *a, dle_tensor *b) {
  dle_lua_push(L, a);
  dle_lua_push(L, b);
  return 2;
}

static int l_layer_norm(lua_State *L) {
  const char *fn = "layer_norm";
  dle_tensor *x = dle_lua_check(L, 1), *y = NULL, *stats = NULL;
  int k = normalized_dims(L, 2, x, fn);
  dle_tensor *w = opt_tensor(L, 3, fn, "weight"), *b = opt_tensor(L, 4, fn, "bias");
  DLE_LUA_TRY(L, dle_layer_norm(&y, &stats, x, k, w, b, eps_at(L, 5, fn)));
  return push2(L, y, stats);
}

static int l_batch_norm(lua_State *L) {
  const char *fn = "batch_norm";
  dle_tensor *x = dle_lua_check(L, 1), *y = NULL, *stats = NULL;
  dle_tensor *w = opt_tensor(L, 2, fn, "weight"), *b = opt_tensor(L, 3, fn, "bias");
  dle_tensor *rm = opt_tensor(L, 4, fn, "running_mean"), *rv = opt_tensor(L, 5, fn, "running_var");
  bool training = lua_toboolean(L, 6);
  DLE_LUA_TRY(L, dle_batch_norm(&y, &stats, x, w, b, rm, rv, training, eps_at(L, 7, fn)));
  return push2(L, y, stats);
}

static int l_group_norm(lua_State *L) {
  const char *fn = "group_norm";
  dle_tensor *x = dle_lua_check(L, 1), *y = NULL, *stats = NULL;
  lua_Integer groups = luaL_checkinteger(L, 2);
  dle_tensor *w = opt_tensor(L, 3, fn, "weight"), *b = opt_tensor(L, 4, fn, "bias");
  DLE_LUA_TRY(L, dle_group_norm(&y, &stats, x, groups, w, b, eps_at(L, 5, fn)));
  return push2(L, y, stats);
}

static int group_norm_grad(lua_State *L, bool affine) {
  const char *fn = affine ? "group_norm_grad_affine" : "group_norm_grad_input";
  dle_tensor *gy = dle_lua_check(L, 1), *x = dle_lua_check(L, 2), *stats = dle_lua_check(L, 3);
  dle_tensor *w = affine ? NULL : opt_tensor(L, 4, fn, "weight"), *r = NULL, *gb = NULL;
  int arg = affine ? 4 : 5;
  lua_Integer groups = luaL_checkinteger(L, arg);
  double eps = eps_at(L, arg + 1, fn);
  if (affine) {
    DLE_LUA_TRY(L, dle_group_norm_grad_affine(&r, &gb, gy, x, stats, groups, eps));
    return push2(L, r, gb);
  }
  DLE_LUA_TRY(L, dle_group_norm_grad_input(&r, gy, x, stats, w, groups, eps));
  dle_lua_push(L, r);
  return 1;
}
static int l_group_norm_grad_input(lua_State *L) { return group_norm_grad(L, false); }
static int l_group_norm_grad_affine(lua_State *L) { return group_norm_grad(L, true); }

/* The normalization layers' gradients, methods of gy: (x, stats, w, k, eps) for layer_norm's input,
 * (x, stats, k, eps) for its weight and bias; batch_norm's take no k. */
static int norm_grad(lua_State *L, bool layer, bool affine) {
  const char *fn = layer ? (affine ? "layer_norm_grad_affine" : "layer_norm_grad_input")
                         : (affine ? "batch_norm_grad_affine" : "batch_norm_grad_input");
  dle_tensor *gy = dle_lua_check(L, 1), *x = dle_lua_check(L, 2), *stats = dle_lua_check(L, 3);
  dle_tensor *w = affine ? NULL : opt_tensor(L, 4, fn, "weight"), *r = NULL, *gb = NULL;
  int arg = affine ? 4 : 5; /* after the weight of the input gradients */
  int k = layer ? normalized_dims(L, arg++, x, fn) : 0;
  double eps = eps_at(L, arg, fn);
  if (affine) {
    DLE_LUA_TRY(L, layer ? dle_layer_norm_grad_affine(&r, &gb, gy, x, stats, k, eps)
                         : dle_batch_norm_grad_affine(&r, &gb, gy, x, stats, eps));
    return push2(L, r, gb);
  }
  DLE_LUA_TRY(L, layer ? dle_layer_norm_grad_input(&r, gy, x, stats, w, k, eps)
                       : dle_batch_norm_grad_input(&r, gy, x, stats, w, eps));
  dle_lua_push(L, r);
  return 1;
}
static int l_layer_norm_grad_input(lua_State *L) { return norm_grad(L, true, false); }
static int l_layer_norm_grad_affine(lua_State *L) { return norm_grad(L, true, true); }
static int l_batch_norm_grad_input(lua_State *L) { return norm_grad(L, false, false); }
static int l_batch_norm_grad_affine(lua_State *L) { return norm_grad(L, false, true); }

void dle_lua_open_norm(lua_State *L, int module, int methods) {
  // clang-format off
  static const luaL_Reg both[] = {
      {"layer_norm", l_layer_norm}, {"batch_norm", l_batch_norm},
      {"group_norm", l_group_norm}, {NULL, NULL}};
  static const luaL_Reg grads[] = {
      {"layer_norm_grad_input", l_layer_norm_grad_input},
      {"layer_norm_grad_affine", l_layer_norm_grad_affine},
      {"batch_norm_grad_input", l_batch_norm_grad_input},
      {"batch_norm_grad_affine", l_batch_norm_grad_affine},
      {"group_norm_grad_input", l_group_norm_grad_input},
      {"group_norm_grad_affine", l_group_norm_grad_affine}, {NULL, NULL}};
  // clang-format on
  dle_lua_register(L, module, methods, NULL, both, grads);
}
