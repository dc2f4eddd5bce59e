/* lua_nn.c — the fused nn ops for Lua (dle.nn.functional builds on these):
 *   dle.cross_entropy(logits {N, C}, targets {N} int64 1-based,
 *                     {reduction = "mean"|"sum"|"none", ignore_index = i, label_smoothing = e})
 *                                                                     -> loss, lse {N}
 *   dle.embedding(weight {V, D}, indices int64 1-based, {padding_idx = i})  -> {..., D}
 *   dle.dropout(x, p, {generator = g})                 -> x * mask / (1 - p)
 * (attention: lua_attention.c). The backward ops are tensor methods of the gradient, named like
 * the ops (so every op of the table is reachable from Lua): gy:cross_entropy_backward(logits,
 * targets, lse, opts), gy:embedding_backward(indices, V, opts). */
#include <string.h>

#include "lua_util.h"
#include "../engine/dle.h"
#include "lua_nn_opts.h"

static const char *const EMBEDDING_OPTS[] = {"padding_idx", NULL};
static const char *const DROPOUT_OPTS[] = {"generator", NULL};

/* cross_entropy(logits, targets, opts) -> loss, lse */
static int l_cross_entropy(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *t = dle_lua_check(L, 2), *loss = NULL, *lse = NULL;
  dle_cross_entropy_params p =
      ce_params(L, dle_lua_opts_at(L, 3, "cross_entropy", CLASS_LOSS_OPTS), "cross_entropy");
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
  dle_cross_entropy_params p = ce_params(L, dle_lua_opts_at(L, 5, fn, CLASS_LOSS_OPTS), fn);
  DLE_LUA_TRY(L, dle_cross_entropy_backward(&r, gy, x, t, lse, &p, 1));
  dle_lua_push(L, r);
  return 1;
}

/* embedding(weight, indices, {padding_idx}) */
static int l_embedding(lua_State *L) {
  dle_tensor *w = dle_lua_check(L, 1), *idx = dle_lua_check(L, 2), *r = NULL;
  int64_t pad = 0;
  bool has_pad = int_field(L, dle_lua_opts_at(L, 3, "embedding", EMBEDDING_OPTS), "embedding",
                           "padding_idx", &pad);
  DLE_LUA_TRY(L, dle_embedding(&r, w, idx, has_pad, pad, 1));
  dle_lua_push(L, r);
  return 1;
}

/* gy:embedding_backward(indices, V, {padding_idx}) */
static int l_embedding_backward(lua_State *L) {
  dle_tensor *gy = dle_lua_check(L, 1), *idx = dle_lua_check(L, 2), *r = NULL;
  const char *fn = "embedding_backward";
  int64_t v = luaL_checkinteger(L, 3), pad = 0;
  bool has_pad = int_field(L, dle_lua_opts_at(L, 4, fn, EMBEDDING_OPTS), fn, "padding_idx", &pad);
  DLE_LUA_TRY(L, dle_embedding_backward(&r, gy, idx, v, has_pad, pad, 1));
  dle_lua_push(L, r);
  return 1;
}

/* dropout(x, p, {generator}) */
static int l_dropout(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  double p = luaL_checknumber(L, 2);
  int opts = dle_lua_opts_at(L, 3, "dropout", DROPOUT_OPTS);
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

void dle_lua_open_nn(lua_State *L, int module, int methods) {
  // clang-format off
  static const luaL_Reg both[] = {
      {"cross_entropy", l_cross_entropy}, {"embedding", l_embedding}, {"dropout", l_dropout},
      {NULL, NULL}};
  static const luaL_Reg grads[] = {
      {"cross_entropy_backward", l_cross_entropy_backward},
      {"embedding_backward", l_embedding_backward}, {NULL, NULL}};
  // clang-format on
  dle_lua_register(L, module, methods, NULL, both, grads);
}
