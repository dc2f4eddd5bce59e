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
  dle_tensor *mask = NULL, *r[2] = {NULL, NULL}; /* out, probs */
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
  dle_status st = packed ? dle_sdpa_packed(&r[0], &r[1], q, mask, causal, scale)
                         : dle_sdpa(&r[0], &r[1], q, k, v, mask, causal, scale);
  return dle_lua_push_all(L, st, r, 2);
}

/* gout:sdpa_score_grad(v, probs, scale) */
static int l_sdpa_score_grad(lua_State *L) {
  dle_tensor *g = dle_lua_check(L, 1), *v = dle_lua_check(L, 2), *p = dle_lua_check(L, 3),
             *r = NULL;
  return dle_lua_push_new(L, dle_sdpa_score_grad(&r, g, v, p, luaL_checknumber(L, 4)), &r);
}

/* gout:sdpa_backward(q, k, v, probs, scale) -> dq, dk, dv */
static int l_sdpa_backward(lua_State *L) {
  dle_tensor *g = dle_lua_check(L, 1), *q = dle_lua_check(L, 2), *k = dle_lua_check(L, 3);
  dle_tensor *v = dle_lua_check(L, 4), *p = dle_lua_check(L, 5), *d[3] = {NULL, NULL, NULL};
  lua_Number scale = luaL_checknumber(L, 6);
  return dle_lua_push_all(L, dle_sdpa_backward(&d[0], &d[1], &d[2], g, q, k, v, p, scale), d, 3);
}

void dle_lua_open_attention(lua_State *L, int module, int methods) {
  static const luaL_Reg both[] = {{"sdpa", l_sdpa}, {NULL, NULL}};
  static const luaL_Reg grads[] = {
      {"sdpa_score_grad", l_sdpa_score_grad}, {"sdpa_backward", l_sdpa_backward}, {NULL, NULL}};
  dle_lua_register(L, module, methods, NULL, both, grads);
}
