/* lua_attention.c — scaled dot-product attention for Lua (dle.nn.functional builds on it):
 *   dle.sdpa(q, k, v, {mask = m, causal = false, scale = 1/sqrt(E)})  -> out, probs
 *   dle.sdpa(qkv, {...}) with q, k, v packed in one tensor {3, ..., T, E}
 * The backward ops are tensor methods of the gradient, named like the ops (so every op of the
 * table is reachable from Lua): gout:sdpa_score_grad(v, probs, scale),
 * gout:sdpa_backward(q, k, v, probs, scale) -> dq, dk, dv. */
#include <math.h>

#include "lua_util.h"
#include "../engine/dle.h"
#include "lua_nn_opts.h"

static const char *const SDPA_OPTS[] = {"causal", "mask", "scale", NULL};

/* sdpa(q, k, v, {mask, causal, scale}) -> out, probs; or sdpa(qkv, {...}) with q, k, v packed in
 * one tensor {3, ..., T, E} */
static int l_sdpa(lua_State *L) {
  dle_tensor *q = dle_lua_check(L, 1), *k = NULL, *v = NULL;
  dle_tensor *mask = NULL, *out = NULL, *probs = NULL;
  bool packed = !dle_lua_opt(L, 2);
  if (!packed) k = dle_lua_check(L, 2), v = dle_lua_check(L, 3);
  int opts = dle_lua_opts_at(L, packed ? 2 : 4, "sdpa", SDPA_OPTS);
  bool causal = false;
  double scale =
      q->ndim > 0 && q->sizes[q->ndim - 1] > 0 ? 1 / sqrt((double)q->sizes[q->ndim - 1]) : 1;
  if (opts) {
    lua_getfield(L, opts, "mask");
    if (!lua_isnil(L, -1) && !(mask = dle_lua_opt(L, -1)))
      luaL_error(L, "sdpa: mask must be a tensor, got %s", luaL_typename(L, -1));
    lua_pop(L, 1); /* the options table keeps the mask alive */
    lua_getfield(L, opts, "causal");
    causal = lua_toboolean(L, -1);
    lua_pop(L, 1);
    scale = num_field(L, opts, "sdpa", "scale", scale);
  }
  if (packed)
    DLE_LUA_TRY(L, dle_sdpa_packed(&out, &probs, q, mask, causal, scale));
  else
    DLE_LUA_TRY(L, dle_sdpa(&out, &probs, q, k, v, mask, causal, scale));
  dle_lua_push(L, out);
  dle_lua_push(L, probs);
  return 2;
}

/* gout:sdpa_score_grad(v, probs, scale) */
static int l_sdpa_score_grad(lua_State *L) {
  dle_tensor *g = dle_lua_check(L, 1), *v = dle_lua_check(L, 2), *p = dle_lua_check(L, 3),
             *r = NULL;
  DLE_LUA_TRY(L, dle_sdpa_score_grad(&r, g, v, p, luaL_checknumber(L, 4)));
  dle_lua_push(L, r);
  return 1;
}

/* gout:sdpa_backward(q, k, v, probs, scale) -> dq, dk, dv */
static int l_sdpa_backward(lua_State *L) {
  dle_tensor *g = dle_lua_check(L, 1), *q = dle_lua_check(L, 2), *k = dle_lua_check(L, 3);
  dle_tensor *v = dle_lua_check(L, 4), *p = dle_lua_check(L, 5), *dq = NULL, *dk = NULL, *dv = NULL;
  DLE_LUA_TRY(L, dle_sdpa_backward(&dq, &dk, &dv, g, q, k, v, p, luaL_checknumber(L, 6)));
  dle_lua_push(L, dq);
  dle_lua_push(L, dk);
  dle_lua_push(L, dv);
  return 3;
}

void dle_lua_open_attention(lua_State *L, int module, int methods) {
  static const luaL_Reg both[] = {{"sdpa", l_sdpa}, {NULL, NULL}};
  static const luaL_Reg grads[] = {
      {"sdpa_score_grad", l_sdpa_score_grad}, {"sdpa_backward", l_sdpa_backward}, {NULL, NULL}};
  dle_lua_register(L, module, methods, NULL, both, grads);
}
