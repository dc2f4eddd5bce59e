/* lua_nn_opts.h — reading the options tables of the nn ops, losses and attention (lua_nn.c,
 * lua_losses.c, lua_attention.c): {reduction = "mean"|"sum"|"none", ignore_index = i, label_smoothing = e, ...}. */
#ifndef DLE_LUA_NN_OPTS_H
#define DLE_LUA_NN_OPTS_H

#include <string.h>

#include "lua_util.h"
#include "../engine/dle.h"

/* The options of each kind of op, sorted as messages list them. */
static const char *const REDUCTION_OPTS[] = {"reduction", NULL};
static const char *const CLASS_LOSS_OPTS[] = {"ignore_index", "label_smoothing", "reduction", NULL};
static const char *const SOFT_CE_OPTS[] = {"label_smoothing", "reduction", NULL};

/* opts[field] as an integer; false when absent. */
static inline bool int_field(lua_State *L, int opts, const char *fn, const char *field,
                             int64_t *out) {
  if (!opts) return false;
  lua_getfield(L, opts, field);
  bool present = !lua_isnil(L, -1);
  if (present) {
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, -1, &isint); /* 3 and 3.0 alike */
    if (!isint)
      luaL_error(L, "%s: %s must be an integer, got %s", fn, field, luaL_tolstring(L, -1, NULL));
    *out = v;
  }
  lua_pop(L, 1);
  return present;
}

static inline double num_field(lua_State *L, int opts, const char *fn, const char *field,
                               double def) {
  if (!opts) return def;
  lua_getfield(L, opts, field);
  double v = def;
  if (!lua_isnil(L, -1)) {
    if (!lua_isnumber(L, -1))
      luaL_error(L, "%s: %s must be a number, got %s", fn, field, luaL_typename(L, -1));
    v = lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

static inline dle_cross_entropy_params ce_params(lua_State *L, int opts, const char *fn) {
  dle_cross_entropy_params p = DLE_CROSS_ENTROPY_DEFAULTS;
  if (!opts) return p;
  lua_getfield(L, opts, "reduction");
  if (!lua_isnil(L, -1)) {
    const char *r = lua_isstring(L, -1) ? lua_tostring(L, -1) : "?";
    if (strcmp(r, "mean") == 0)
      p.reduction = DLE_REDUCTION_MEAN;
    else if (strcmp(r, "sum") == 0)
      p.reduction = DLE_REDUCTION_SUM;
    else if (strcmp(r, "none") == 0)
      p.reduction = DLE_REDUCTION_NONE;
    else
      luaL_error(L, "%s: reduction must be 'mean', 'sum' or 'none', got '%s'", fn,
                 luaL_tolstring(L, -1, NULL));
  }
  lua_pop(L, 1);
  p.has_ignore_index = int_field(L, opts, fn, "ignore_index", &p.ignore_index);
  p.label_smoothing = num_field(L, opts, fn, "label_smoothing", 0.0);
  return p;
}

#endif
