/* lua_resample.c — the resample family for Lua (also as methods of x):
 *   dle.upsample(x, sizes, {mode = "nearest", align_corners = false, scales = nil}) -> y
 *   gy:upsample_backward(input_sizes, {mode, align_corners, scales}) -> gx
 * sizes: the d = x:dim() - 2 output sizes (a table, or a number for d = 1); mode "nearest",
 * "nearest-exact", "linear" (n-linear over the d dims) or "cubic"; scales: d scale factors the
 * source indices use instead of in / out (PyTorch's scale_factor). dle.nn.functional.interpolate
 * is the PyTorch-shaped entry (size or scale_factor, mode names, checks per mode). */
#include "lua_util.h"
#include "../engine/dle.h"

static const char *const modes[] = {"nearest", "nearest-exact", "linear", "cubic", NULL};
static const char *const known[] = {"mode", "align_corners", "scales", NULL};

/* Reads d numbers from the table (or a number when d = 1) at idx into out. */
static void numbers(lua_State *L, int idx, const char *fn, const char *what, int d, double *out) {
  if (lua_isnumber(L, idx) && d == 1) {
    out[0] = lua_tonumber(L, idx);
    return;
  }
  if (!lua_istable(L, idx) || (int)lua_rawlen(L, idx) != d)
    luaL_error(L, "%s: %s must be a table of %d numbers (one per spatial dim), got %s", fn, what, d,
               luaL_typename(L, idx));
  for (int i = 0; i < d; i++) {
    lua_rawgeti(L, idx, i + 1);
    if (!lua_isnumber(L, -1))
      luaL_error(L, "%s: %s must hold numbers, got %s", fn, what, luaL_typename(L, -1));
    out[i] = lua_tonumber(L, -1);
    lua_pop(L, 1);
  }
}

static int l_resample(lua_State *L, bool backward) {
  const char *fn = backward ? "upsample_backward" : "upsample";
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  int d = x->ndim - 2;
  if (d < 1 || d > 3)
    luaL_error(L, "%s: expected an input of 3 to 5 dims {N, C, d1[, d2[, d3]]}, got %d dims", fn,
               x->ndim);
  double sz[3];
  int64_t sizes[3];
  numbers(L, 2, fn, backward ? "input_sizes" : "sizes", d, sz);
  for (int i = 0; i < d; i++) {
    if (sz[i] != (double)(int64_t)sz[i]) luaL_error(L, "%s: sizes must be integers", fn);
    sizes[i] = (int64_t)sz[i];
  }
  int opts = dle_lua_opts_at(L, 3, fn, known);
  int mode = 0;
  bool align = false, has_scales = false;
  double scales[3] = {0, 0, 0};
  if (opts) {
    lua_getfield(L, opts, "mode");
    if (!lua_isnil(L, -1)) mode = dle_lua_checkoption(L, lua_gettop(L), NULL, modes);
    lua_getfield(L, opts, "align_corners");
    align = lua_toboolean(L, -1);
    lua_getfield(L, opts, "scales");
    if (!lua_isnil(L, -1)) numbers(L, lua_gettop(L), fn, "scales", d, scales), has_scales = true;
    lua_pop(L, 3);
  }
  const double *sc = has_scales ? scales : NULL;
  DLE_LUA_TRY(L, backward ? dle_upsample_backward(&r, x, d, sizes, mode, align, sc)
                          : dle_upsample(&r, x, d, sizes, mode, align, sc));
  dle_lua_push(L, r);
  return 1;
}

static int l_upsample(lua_State *L) { return l_resample(L, false); }
static int l_upsample_backward(lua_State *L) { return l_resample(L, true); }

void dle_lua_open_resample(lua_State *L, int module, int methods) {
  static const luaL_Reg both[] = {
      {"upsample", l_upsample}, {"upsample_backward", l_upsample_backward}, {NULL, NULL}};
  dle_lua_register(L, module, methods, NULL, both, NULL);
}
