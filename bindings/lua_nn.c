/* lua_nn.c — the fused nn ops for Lua (dle.nn.functional builds on these):
 *   dle.cross_entropy(logits {N, C}, targets {N} int64 1-based,
 *                     {reduction = "mean"|"sum"|"none", ignore_index = i, label_smoothing = e})
 *                                                                     -> loss, lse {N}
 *   dle.embedding(weight {V, D}, indices int64 1-based, {padding_idx = i})  -> {..., D}
 *   dle.dropout(x, p, {generator = g})                 -> x * mask / (1 - p)
 *   dle.sdpa(q, k, v, {mask = m, causal = false, scale = 1/sqrt(E)})  -> out, probs
 * The backward ops are tensor methods of the gradient, named like the ops (so every op of the
 * table is reachable from Lua): gy:cross_entropy_backward(logits, targets, lse, opts),
 * gy:embedding_backward(indices, V, opts), gout:sdpa_score_grad(v, probs, scale),
 * gout:sdpa_backward(q, k, v, probs, scale) -> dq, dk, dv. */
#include <math.h>
#include <string.h>

#include "lua_util.h"
#include "../engine/dle.h"
#include "lua_nn_opts.h"

static const char *const EMBEDDING_OPTS[] = {"padding_idx", NULL};
static const char *const DROPOUT_OPTS[] = {"generator", NULL};
static const char *const SDPA_OPTS[] = {"causal", "mask", "scale", NULL};

/* cross_entropy(logits, targets, opts) -> loss, lse */
static int l_cross_entropy(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *t = dle_lua_check(L, 2), *loss = NULL, *lse = NULL;
  dle_cross_entropy_params p =
      ce_params(L, opts_at(L, 3, "cross_entropy", CLASS_LOSS_OPTS), "cross_entropy");
  DLE_LUA_TRY(L, dle_cross_entropy(&loss, &lse, x, t, &p, 1));
  dle_lua_push(L, loss);
  dle_lua_push(L, lse);
  return 2;
}

/* gy:cross_entropy_backward(logits, targets, lse, opts) */
static int l_cross_entropy_backward(lua_State *L) {
  dle_tensor *gy = dle_lua_check(L, 1), *x = dle_lua_check(L, 2), *t = dle_lua_check(L, 3);
  dle_tensor *lse = dle_lua_check(L, 4), *r = NULL;
  const char *fn = "cross_entropy_backward";
  dle_cross_entropy_params p = ce_params(L, opts_at(L, 5, fn, CLASS_LOSS_OPTS), fn);
  DLE_LUA_TRY(L, dle_cross_entropy_backward(&r, gy, x, t, lse, &p, 1));
  dle_lua_push(L, r);
  return 1;
}

/* embedding(weight, indices, {padding_idx}) */
static int l_embedding(lua_State *L) {
  dle_tensor *w = dle_lua_check(L, 1), *idx = dle_lua_check(L, 2), *r = NULL;
  int64_t pad = 0;
  bool has_pad =
      int_field(L, opts_at(L, 3, "embedding", EMBEDDING_OPTS), "embedding", "padding_idx", &pad);
  DLE_LUA_TRY(L, dle_embedding(&r, w, idx, has_pad, pad, 1));
  dle_lua_push(L, r);
  return 1;
}

/* gy:embedding_backward(indices, V, {padding_idx}) */
static int l_embedding_backward(lua_State *L) {
  dle_tensor *gy = dle_lua_check(L, 1), *idx = dle_lua_check(L, 2), *r = NULL;
  const char *fn = "embedding_backward";
  int64_t v = luaL_checkinteger(L, 3), pad = 0;
  bool has_pad = int_field(L, opts_at(L, 4, fn, EMBEDDING_OPTS), fn, "padding_idx", &pad);
  DLE_LUA_TRY(L, dle_embedding_backward(&r, gy, idx, v, has_pad, pad, 1));
  dle_lua_push(L, r);
  return 1;
}

/* dropout(x, p, {generator}) */
static int l_dropout(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  double p = luaL_checknumber(L, 2);
  int opts = opts_at(L, 3, "dropout", DROPOUT_OPTS);
  dle_generator *g = NULL;
  if (opts) {
    lua_getfield(L, opts, "generator");
    g = dle_lua_opt_generator(L, -1, "dropout");
    lua_pop(L, 1);
  }
  DLE_LUA_TRY(L, dle_dropout(&r, x, p, g));
  dle_lua_push(L, r);
  return 1;
}

/* sdpa(q, k, v, {mask, causal, scale}) -> out, probs; or sdpa(qkv, {...}) with q, k, v packed in
 * one tensor {3, ..., T, E} */
static int l_sdpa(lua_State *L) {
  dle_tensor *q = dle_lua_check(L, 1), *k = NULL, *v = NULL;
  dle_tensor *mask = NULL, *out = NULL, *probs = NULL;
  bool packed = !dle_lua_opt(L, 2);
  if (!packed) k = dle_lua_check(L, 2), v = dle_lua_check(L, 3);
  int opts = opts_at(L, packed ? 2 : 4, "sdpa", SDPA_OPTS);
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

void dle_lua_open_nn(lua_State *L, int module, int methods) {
  // clang-format off
  static const luaL_Reg both[] = {
      {"cross_entropy", l_cross_entropy}, {"embedding", l_embedding}, {"dropout", l_dropout},
      {"sdpa", l_sdpa}, {NULL, NULL}};
  static const luaL_Reg grads[] = {
      {"cross_entropy_backward", l_cross_entropy_backward},
      {"embedding_backward", l_embedding_backward}, {"sdpa_score_grad", l_sdpa_score_grad},
      {"sdpa_backward", l_sdpa_backward}, {NULL, NULL}};
  // clang-format on
  dle_lua_register(L, module, methods, NULL, both, grads);
}
