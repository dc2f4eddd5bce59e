/* lua_arrange.c — flip, roll and pad for Lua, PyTorch's names with 1-based dims (negative from the
 * end):
 *   dle.flip(t, dims), t:flip(dims): dims an integer or a list;
 *   dle.roll(t, shifts, dims), t:roll(...): shifts and dims integers or lists of one length;
 *     without dims, over the flattened tensor (shape kept);
 *   dle.diagonal(t, offset = 0, dim1 = 1, dim2 = 2), t:diagonal(...): a view (engine/ops/view.c);
 *   dle.diag_embed(t, offset = 0, dim1 = -2, dim2 = -1): t's last dim on a diagonal of zeros;
 *   dle.core._pad(t, pads, {mode = "constant", value = 0}): dle.nn.functional.pad's op (pads of
 *     the last dims, last dim first). */
#include "../engine/dle.h"
#include "lua_util.h"

#include <string.h>

/* An integer or a list of integers at arg (at most DLE_MAX_DIMS) into v; returns the count.
 * dims: 1-based dims turned 0-based (0 is an error). */
static int int_list(lua_State *L, int arg, const char *fn, const char *what, bool dims,
                    int64_t *v) {
  int n = 0;
  if (lua_type(L, arg) == LUA_TNUMBER) {
    v[n++] = dle_lua_check_int(L, arg, fn, what);
  } else if (lua_istable(L, arg) && !dle_lua_opt(L, arg)) {
    int len = (int)lua_rawlen(L, arg);
    if (len > DLE_MAX_DIMS)
      luaL_error(L, "%s: %d %s given, at most %d", fn, len, what, DLE_MAX_DIMS);
    for (int i = 1; i <= len; i++) {
      lua_rawgeti(L, arg, i);
      v[n++] = dle_lua_check_int(L, -1, fn, what);
      lua_pop(L, 1);
    }
  } else {
    luaL_error(L, "%s: %s must be an integer or a list of integers, got %s", fn, what,
               luaL_typename(L, arg));
  }
  for (int i = 0; dims && i < n; i++) {
    if (v[i] == 0) luaL_error(L, "%s: dim 0 is invalid (dims are 1-based; -1 is the last)", fn);
    if (v[i] > 0) v[i]--;
  }
  return n;
}

static int l_flip(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  int64_t v[DLE_MAX_DIMS];
  int dims[DLE_MAX_DIMS], n = int_list(L, 2, "flip", "dims", true, v);
  for (int i = 0; i < n; i++) dims[i] = (int)v[i];
  return dle_lua_push_new(L, dle_flip(&r, x, n, dims), &r);
}

static int l_roll(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  int64_t shifts[DLE_MAX_DIMS], v[DLE_MAX_DIMS];
  int dims[DLE_MAX_DIMS], ns = int_list(L, 2, "roll", "shifts", false, shifts);
  if (lua_isnoneornil(L, 3)) { /* the flattened tensor, rolled, in x's shape again */
    if (ns != 1) luaL_error(L, "roll: without dims, shifts must be one integer (got %d)", ns);
    int64_t all = -1;
    dle_tensor *flat = NULL, *rolled = NULL;
    int d0 = 0;
    dle_status st = dle_reshape(&flat, x, 1, &all);
    if (st == DLE_OK) st = dle_roll(&rolled, flat, 1, &d0, shifts);
    if (st == DLE_OK) st = dle_reshape(&r, rolled, x->ndim, x->sizes);
    dle_tensor_release(flat);
    dle_tensor_release(rolled);
    if (st != DLE_OK) return dle_lua_fail(L);
    dle_lua_push(L, r);
    return 1;
  }
  int nd = int_list(L, 3, "roll", "dims", true, v);
  if (nd != ns) luaL_error(L, "roll: %d shifts for %d dims (one each)", ns, nd);
  for (int i = 0; i < nd; i++) dims[i] = (int)v[i];
  return dle_lua_push_new(L, dle_roll(&r, x, nd, dims, shifts), &r);
}

static int l_pad(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  if (!lua_istable(L, 2) || dle_lua_opt(L, 2))
    luaL_error(L, "pad: pads must be a list of integers, got %s", luaL_typename(L, 2));
  int n = (int)lua_rawlen(L, 2);
  if (n > 8) luaL_error(L, "pad: %d pads given, at most 8 (4 trailing dims)", n);
  int64_t pads[8];
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 2, i + 1);
    pads[i] = dle_lua_check_int(L, -1, "pad", "pads");
    lua_pop(L, 1);
  }
  static const char *const known[] = {"mode", "value", NULL};
  int o = dle_lua_opts_at(L, 3, "pad", known);
  dle_pad_mode mode = DLE_PAD_CONSTANT;
  double value = 0;
  if (o) {
    static const char *const modes[] = {"constant", "reflect", "replicate", "circular", NULL};
    if (lua_getfield(L, o, "mode") != LUA_TNIL) {
      const char *m = lua_tostring(L, -1);
      int k = 0;
      while (m && modes[k] && strcmp(modes[k], m)) k++;
      if (!m || !modes[k])
        luaL_error(L,
                   "pad: mode must be \"constant\", \"reflect\", \"replicate\" or "
                   "\"circular\", got %s",
                   m ? m : luaL_typename(L, -1));
      mode = (dle_pad_mode)k;
    }
    if (lua_getfield(L, o, "value") != LUA_TNIL) {
      if (!lua_isnumber(L, -1))
        luaL_error(L, "pad: value must be a number, got %s", luaL_typename(L, -1));
      if (mode != DLE_PAD_CONSTANT) luaL_error(L, "pad: value is for mode \"constant\" only");
      value = lua_tonumber(L, -1);
    }
    lua_pop(L, 2);
  }
  return dle_lua_push_new(L, dle_pad(&r, x, n, pads, mode, value), &r);
}

/* dle.diagonal(t, offset = 0, dim1 = 1, dim2 = 2): a view (the op lives in engine/ops/view.c) */
static int l_diagonal(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  lua_Integer off = lua_isnoneornil(L, 2) ? 0 : dle_lua_check_int(L, 2, "diagonal", "offset");
  int d1 = dle_lua_optdim(L, 3, "diagonal", 0), d2 = dle_lua_optdim(L, 4, "diagonal", 1);
  return dle_lua_push_new(L, dle_diagonal(&r, x, off, d1, d2), &r);
}

/* dle.diag_embed(t, offset = 0, dim1 = -2, dim2 = -1) */
static int l_diag_embed(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  lua_Integer off = lua_isnoneornil(L, 2) ? 0 : dle_lua_check_int(L, 2, "diag_embed", "offset");
  int d1 = dle_lua_optdim(L, 3, "diag_embed", -2), d2 = dle_lua_optdim(L, 4, "diag_embed", -1);
  if (x->ndim < 1) luaL_error(L, "diag_embed: expected at least 1 dim, got a 0-dim tensor");
  /* the matrices are n x n, n = size + |offset|: refused before n or n * n overflows */
  int64_t size = x->sizes[x->ndim - 1];
  uint64_t mag = off < 0 ? 0 - (uint64_t)off : (uint64_t)off;
  if (mag > (uint64_t)(INT64_MAX - size) ||
      (size + (int64_t)mag) > INT64_MAX / (size + (int64_t)mag + 1))
    luaL_error(L, "diag_embed: offset %I makes %I + |offset| rows, too many", off,
               (lua_Integer)size);
  int64_t n = size + (int64_t)mag;
  return dle_lua_push_new(L, dle_diag_embed(&r, x, off, d1, d2, n, n), &r);
}

void dle_lua_open_arrange(lua_State *L, int module, int methods) {
  static const luaL_Reg both[] = {{"flip", l_flip},
                                  {"roll", l_roll},
                                  {"diagonal", l_diagonal},
                                  {"diag_embed", l_diag_embed},
                                  {NULL, NULL}};
  static const luaL_Reg module_only[] = {{"_pad", l_pad}, {NULL, NULL}};
  dle_lua_register(L, module, methods, module_only, both, NULL);
}
