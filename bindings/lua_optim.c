/* lua_optim.c — the fused optimizer steps for Lua (dle.core._sgd_step, adagrad_step,
 * rmsprop_step, adam_step, adamw_step): thin wrappers over engine/optim.h taking an options
 * table, used by the optimizer classes in lua/dle/optim/. */
#include <string.h>

#include "../engine/dle.h"
#include "lua_util.h"

/* One recognised option: its name, its kind, where it goes, and whether it must be given. */
typedef enum { OPT_NUM, OPT_INT, OPT_BOOL, OPT_TENSOR } opt_kind;
typedef struct {
  const char *name;
  opt_kind kind;
  void *dst;
  bool required;
} opt_field;

/* Reads the options table at idx into fields (which hold their defaults); unknown keys, values
 * of the wrong type and missing required fields are errors naming fn. Tensors are borrowed from
 * the table, which stays on the stack for the call. */
static void parse_opts(lua_State *L, int idx, const char *fn, opt_field *fields) {
  bool seen[16] = {false};
  if (!lua_isnoneornil(L, idx)) {
    if (!lua_istable(L, idx))
      luaL_error(L, "%s: options must be a table, got %s", fn, luaL_typename(L, idx));
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      if (lua_type(L, -2) != LUA_TSTRING)
        luaL_error(L, "%s: option keys must be strings, got %s", fn, luaL_typename(L, -2));
      const char *k = lua_tostring(L, -2);
      int f = 0;
      while (fields[f].name && strcmp(fields[f].name, k) != 0) f++;
      if (!fields[f].name) luaL_error(L, "%s: unknown option '%s'", fn, k);
      seen[f] = true;
      switch (fields[f].kind) {
        case OPT_NUM:
          if (lua_type(L, -1) != LUA_TNUMBER)
            luaL_error(L, "%s: option %s must be a number, got %s", fn, k, luaL_typename(L, -1));
          *(double *)fields[f].dst = lua_tonumber(L, -1);
          break;
        case OPT_INT: {
          int ok = 0;
          lua_Integer v = lua_tointegerx(L, -1, &ok);
          if (!ok)
            luaL_error(L, "%s: option %s must be an integer, got %s", fn, k, luaL_typename(L, -1));
          *(int64_t *)fields[f].dst = (int64_t)v;
          break;
        }
        case OPT_BOOL:
          if (lua_type(L, -1) != LUA_TBOOLEAN)
            luaL_error(L, "%s: option %s must be a boolean, got %s", fn, k, luaL_typename(L, -1));
          *(bool *)fields[f].dst = lua_toboolean(L, -1);
          break;
        case OPT_TENSOR: {
          dle_tensor *t = dle_lua_opt(L, -1);
          if (!t && !lua_isnil(L, -1))
            luaL_error(L, "%s: option %s must be a tensor, got %s", fn, k, luaL_typename(L, -1));
          *(dle_tensor **)fields[f].dst = t;
          break;
        }
      }
      lua_pop(L, 1);
    }
  }
  for (int f = 0; fields[f].name; f++)
    if (fields[f].required && !seen[f])
      luaL_error(L, "%s: option %s is required", fn, fields[f].name);
}

/** dle.core._sgd_step(p, g, {lr, momentum = 0, dampening = 0, nesterov = false, weight_decay = 0,
 * momentum_buffer = t, first = false}) updates p (and the momentum buffer) in place. */
static int l_sgd_step(lua_State *L) {
  dle_tensor *p = dle_lua_check(L, 1), *g = dle_lua_check(L, 2), *buf = NULL;
  dle_sgd_opts o = {0};
  // clang-format off
  opt_field fields[] = {
      {"lr", OPT_NUM, &o.lr, true}, {"momentum", OPT_NUM, &o.momentum, false},
      {"dampening", OPT_NUM, &o.dampening, false},
      {"weight_decay", OPT_NUM, &o.weight_decay, false},
      {"nesterov", OPT_BOOL, &o.nesterov, false}, {"first", OPT_BOOL, &o.first, false},
      {"momentum_buffer", OPT_TENSOR, &buf, false}, {NULL, 0, NULL, false}};
  // clang-format on
  parse_opts(L, 3, "sgd_step", fields);
  DLE_LUA_TRY(L, dle_sgd_step(p, g, buf, &o));
  return 0;
}

/** dle.core._adagrad_step(p, g, sum, {lr, step, lr_decay = 0, weight_decay = 0, eps = 1e-10}). */
static int l_adagrad_step(lua_State *L) {
  dle_tensor *p = dle_lua_check(L, 1), *g = dle_lua_check(L, 2), *sum = dle_lua_check(L, 3);
  dle_adagrad_opts o = {.eps = 1e-10};
  // clang-format off
  opt_field fields[] = {
      {"lr", OPT_NUM, &o.lr, true}, {"step", OPT_INT, &o.step, true},
      {"lr_decay", OPT_NUM, &o.lr_decay, false}, {"weight_decay", OPT_NUM, &o.weight_decay, false},
      {"eps", OPT_NUM, &o.eps, false}, {NULL, 0, NULL, false}};
  // clang-format on
  parse_opts(L, 4, "adagrad_step", fields);
  DLE_LUA_TRY(L, dle_adagrad_step(p, g, sum, &o));
  return 0;
}

/** dle.core._rmsprop_step(p, g, square_avg, {lr, alpha = 0.99, eps = 1e-8, weight_decay = 0,
 * momentum = 0, centered = false, momentum_buffer = t, grad_avg = t}). */
static int l_rmsprop_step(lua_State *L) {
  dle_tensor *p = dle_lua_check(L, 1), *g = dle_lua_check(L, 2), *sq = dle_lua_check(L, 3);
  dle_tensor *buf = NULL, *gavg = NULL;
  dle_rmsprop_opts o = {.alpha = 0.99, .eps = 1e-8};
  // clang-format off
  opt_field fields[] = {
      {"lr", OPT_NUM, &o.lr, true}, {"alpha", OPT_NUM, &o.alpha, false},
      {"eps", OPT_NUM, &o.eps, false}, {"weight_decay", OPT_NUM, &o.weight_decay, false},
      {"momentum", OPT_NUM, &o.momentum, false}, {"centered", OPT_BOOL, &o.centered, false},
      {"momentum_buffer", OPT_TENSOR, &buf, false}, {"grad_avg", OPT_TENSOR, &gavg, false},
      {NULL, 0, NULL, false}};
  // clang-format on
  parse_opts(L, 4, "rmsprop_step", fields);
  DLE_LUA_TRY(L, dle_rmsprop_step(p, g, sq, buf, gavg, &o));
  return 0;
}

/* adam_step and adamw_step differ only in the default of `decoupled`. */
static int adam_common(lua_State *L, bool decoupled, const char *fn) {
  dle_tensor *p = dle_lua_check(L, 1), *g = dle_lua_check(L, 2);
  dle_tensor *m = dle_lua_check(L, 3), *v = dle_lua_check(L, 4), *vmax = NULL;
  dle_adam_opts o = {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .decoupled = decoupled};
  // clang-format off
  opt_field fields[] = {
      {"lr", OPT_NUM, &o.lr, true}, {"step", OPT_INT, &o.step, true},
      {"beta1", OPT_NUM, &o.beta1, false}, {"beta2", OPT_NUM, &o.beta2, false},
      {"eps", OPT_NUM, &o.eps, false}, {"weight_decay", OPT_NUM, &o.weight_decay, false},
      {"decoupled", OPT_BOOL, &o.decoupled, false}, {"amsgrad", OPT_BOOL, &o.amsgrad, false},
      {"max_exp_avg_sq", OPT_TENSOR, &vmax, false}, {NULL, 0, NULL, false}};
  // clang-format on
  parse_opts(L, 5, fn, fields);
  DLE_LUA_TRY(L, dle_adam_step(p, g, m, v, vmax, &o));
  return 0;
}

/** dle.core._adam_step(p, g, exp_avg, exp_avg_sq, {lr, step, beta1 = 0.9, beta2 = 0.999,
 * eps = 1e-8, weight_decay = 0, decoupled = false, amsgrad = false, max_exp_avg_sq = t}). */
static int l_adam_step(lua_State *L) { return adam_common(L, false, "adam_step"); }
/** dle.core._adamw_step(...): adam_step with decoupled weight decay (decoupled = true). */
static int l_adamw_step(lua_State *L) { return adam_common(L, true, "adamw_step"); }

void dle_lua_open_optim(lua_State *L, int module, int methods) {
  (void)methods;
  static const luaL_Reg fns[] = {
      {"_sgd_step", l_sgd_step},         {"_adagrad_step", l_adagrad_step},
      {"_rmsprop_step", l_rmsprop_step}, {"_adam_step", l_adam_step},
      {"_adamw_step", l_adamw_step},     {NULL, NULL}};
  dle_lua_setfuncs(L, module, fns);
}
