/* lua_losses.c — the fused losses for Lua (dle.nn.functional builds on these); reduction is
 * "mean" (default), "sum" or "none":
 *   dle.mse_loss(input, target, {reduction})                                   -> loss
 *   dle.nll_loss(logp {N, C}, targets {N} int64 1-based,
 *                {reduction, ignore_index = i, label_smoothing = e})           -> loss
 *   dle.binary_cross_entropy_with_logits(x, y, {reduction, pos_weight = w})    -> loss
 *       (w a tensor broadcasting to x, e.g. {C} for x {N, C}, or a number)
 *   dle.soft_cross_entropy(logits {N, C}, probabilities {N, C},
 *                          {reduction, label_smoothing = e})                   -> loss, lse {N}
 * The backward ops are tensor methods of the gradient, named like the ops:
 *   gy:mse_loss_backward(input, target, opts), gy:nll_loss_backward(targets, C, opts),
 *   gy:binary_cross_entropy_with_logits_backward(x, y, opts),
 *   gy:soft_cross_entropy_backward(logits, targets, lse, opts). */
#include "lua_nn_opts.h"
#include "../engine/dle.h"

static const char *const BCE_OPTS[] = {"pos_weight", "reduction", NULL};

static dle_reduction reduction_of(lua_State *L, int opts, const char *fn) {
  return ce_params(L, opts, fn).reduction;
}

/* opts.pos_weight as a tensor (a number becomes a scalar of x's float dtype, left on the stack so
 * Lua owns it), or NULL */
static dle_tensor *pos_weight_of(lua_State *L, int opts, const char *fn, const dle_tensor *x) {
  if (!opts) return NULL;
  lua_getfield(L, opts, "pos_weight");
  dle_tensor *w = NULL;
  if (lua_type(L, -1) == LUA_TNUMBER) {
    dle_dtype dt = dle_dtype_is_float(x->dtype) ? x->dtype : DLE_DEFAULT_FLOAT;
    double v = lua_tonumber(L, -1);
    lua_pop(L, 1);
    DLE_LUA_TRY(L, dle_full(&w, 0, NULL, v, dt));
    dle_lua_push(L, w);
    return w;
  }
  if (!lua_isnil(L, -1) && !(w = dle_lua_opt(L, -1)))
    luaL_error(L, "%s: pos_weight must be a tensor or a number, got %s", fn, luaL_typename(L, -1));
  lua_pop(L, 1); /* the options table keeps the tensor alive */
  return w;
}

/* mse_loss(input, target, opts) */
static int l_mse_loss(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *y = dle_lua_check(L, 2), *r = NULL;
  dle_reduction red =
      reduction_of(L, dle_lua_opts_at(L, 3, "mse_loss", REDUCTION_OPTS), "mse_loss");
  DLE_LUA_TRY(L, dle_mse_loss(&r, x, y, red));
  dle_lua_push(L, r);
  return 1;
}

/* gy:mse_loss_backward(input, target, opts) */
static int l_mse_loss_backward(lua_State *L) {
  dle_tensor *gy = dle_lua_check(L, 1), *x = dle_lua_check(L, 2), *y = dle_lua_check(L, 3),
             *r = NULL;
  const char *fn = "mse_loss_backward";
  dle_reduction red = reduction_of(L, dle_lua_opts_at(L, 4, fn, REDUCTION_OPTS), fn);
  DLE_LUA_TRY(L, dle_mse_loss_backward(&r, gy, x, y, red));
  dle_lua_push(L, r);
  return 1;
}

/* nll_loss(logp, targets, opts) */
static int l_nll_loss(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *t = dle_lua_check(L, 2), *r = NULL;
  dle_cross_entropy_params p =
      ce_params(L, dle_lua_opts_at(L, 3, "nll_loss", CLASS_LOSS_OPTS), "nll_loss");
  DLE_LUA_TRY(L, dle_nll_loss(&r, x, t, &p, 1));
  dle_lua_push(L, r);
  return 1;
}

/* gy:nll_loss_backward(targets, C, opts) */
static int l_nll_loss_backward(lua_State *L) {
  dle_tensor *gy = dle_lua_check(L, 1), *t = dle_lua_check(L, 2), *r = NULL;
  const char *fn = "nll_loss_backward";
  int64_t c = luaL_checkinteger(L, 3);
  dle_cross_entropy_params p = ce_params(L, dle_lua_opts_at(L, 4, fn, CLASS_LOSS_OPTS), fn);
  DLE_LUA_TRY(L, dle_nll_loss_backward(&r, gy, t, c, &p, 1));
  dle_lua_push(L, r);
  return 1;
}

/* binary_cross_entropy_with_logits(x, y, opts) */
static int l_bce(lua_State *L) {
  const char *fn = "binary_cross_entropy_with_logits";
  dle_tensor *x = dle_lua_check(L, 1), *y = dle_lua_check(L, 2), *r = NULL;
  int opts = dle_lua_opts_at(L, 3, fn, BCE_OPTS);
  dle_reduction red = reduction_of(L, opts, fn);
  dle_tensor *w = pos_weight_of(L, opts, fn, x);
  DLE_LUA_TRY(L, dle_bce_with_logits(&r, x, y, w, red));
  dle_lua_push(L, r);
  return 1;
}

/* gy:binary_cross_entropy_with_logits_backward(x, y, opts) */
static int l_bce_backward(lua_State *L) {
  const char *fn = "binary_cross_entropy_with_logits_backward";
  dle_tensor *gy = dle_lua_check(L, 1), *x = dle_lua_check(L, 2), *y = dle_lua_check(L, 3),
             *r = NULL;
  int opts = dle_lua_opts_at(L, 4, fn, BCE_OPTS);
  dle_reduction red = reduction_of(L, opts, fn);
  dle_tensor *w = pos_weight_of(L, opts, fn, x);
  DLE_LUA_TRY(L, dle_bce_with_logits_backward(&r, gy, x, y, w, red));
  dle_lua_push(L, r);
  return 1;
}

/* soft_cross_entropy(logits, targets, opts) -> loss, lse */
static int l_soft_ce(lua_State *L) {
  const char *fn = "soft_cross_entropy";
  dle_tensor *x = dle_lua_check(L, 1), *t = dle_lua_check(L, 2), *loss = NULL, *lse = NULL;
  dle_cross_entropy_params p = ce_params(L, dle_lua_opts_at(L, 3, fn, SOFT_CE_OPTS), fn);
  DLE_LUA_TRY(L, dle_soft_cross_entropy(&loss, &lse, x, t, p.reduction, p.label_smoothing));
  dle_lua_push(L, loss);
  dle_lua_push(L, lse);
  return 2;
}

/* gy:soft_cross_entropy_backward(logits, targets, lse, opts) */
static int l_soft_ce_backward(lua_State *L) {
  const char *fn = "soft_cross_entropy_backward";
  dle_tensor *gy = dle_lua_check(L, 1), *x = dle_lua_check(L, 2), *t = dle_lua_check(L, 3);
  dle_tensor *lse = dle_lua_check(L, 4), *r = NULL;
  dle_cross_entropy_params p = ce_params(L, dle_lua_opts_at(L, 5, fn, SOFT_CE_OPTS), fn);
  DLE_LUA_TRY(L,
              dle_soft_cross_entropy_backward(&r, gy, x, t, lse, p.reduction, p.label_smoothing));
  dle_lua_push(L, r);
  return 1;
}

void dle_lua_open_losses(lua_State *L, int module, int methods) {
  // clang-format off
  static const luaL_Reg both[] = {
      {"mse_loss", l_mse_loss}, {"nll_loss", l_nll_loss},
      {"binary_cross_entropy_with_logits", l_bce}, {"soft_cross_entropy", l_soft_ce}, {NULL, NULL}};
  static const luaL_Reg grads[] = {
      {"mse_loss_backward", l_mse_loss_backward}, {"nll_loss_backward", l_nll_loss_backward},
      {"binary_cross_entropy_with_logits_backward", l_bce_backward},
      {"soft_cross_entropy_backward", l_soft_ce_backward}, {NULL, NULL}};
  // clang-format on
  dle_lua_register(L, module, methods, NULL, both, grads);
}
