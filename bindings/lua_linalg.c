/* lua_linalg.c — the linalg family's ops for Lua, as dle.core helpers that lua/dle/linalg.lua
 * builds the public dle.linalg on (options, broadcasting, vector right-hand sides, compositions):
 *   core._linalg_solve(A, B)              B {*,n,k} with A's batch dims -> X
 *   core._linalg_inv(A), _linalg_det(A), _linalg_cholesky(A) -> one tensor
 *   core._linalg_slogdet(A)               -> sign, logabsdet
 *   core._linalg_qr(A, complete)          -> Q, R
 *   core._linalg_svd(A, full_matrices)    -> U, S, Vh
 *   core._linalg_eigh(A, upper)           -> eigenvalues, eigenvectors */
#include "lua_util.h"
#include "../engine/dle.h"

/* upvalue 1: the op; its inputs are the first tensor arguments, a boolean after them the op's
 * ints[0] */
static int l_linalg(lua_State *L) {
  dle_op op = (dle_op)lua_tointeger(L, lua_upvalueindex(1));
  const dle_op_info *info = dle_op_get_info(op);
  dle_tensor *ins[2] = {NULL, NULL};
  for (int i = 0; i < info->nin; i++) ins[i] = dle_lua_check(L, i + 1);
  dle_attrs a = {0};
  a.ints[0] = lua_toboolean(L, info->nin + 1);
  a.nints = 1;
  dle_tensor *outs[3] = {NULL, NULL, NULL};
  DLE_LUA_TRY(L, dle_op_call(op, outs, ins, info->nin, &a));
  for (int k = 0; k < info->nout; k++) dle_lua_push(L, outs[k]);
  return info->nout;
}

void dle_lua_open_linalg(lua_State *L, int module, int methods) {
  (void)methods;
  static const dle_op ops[] = {DLE_OP_LINALG_SOLVE,   DLE_OP_LINALG_INV,      DLE_OP_LINALG_DET,
                               DLE_OP_LINALG_SLOGDET, DLE_OP_LINALG_CHOLESKY, DLE_OP_LINALG_QR,
                               DLE_OP_LINALG_SVD,     DLE_OP_LINALG_EIGH};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    lua_pushinteger(L, ops[i]);
    lua_pushcclosure(L, l_linalg, 1);
    lua_pushfstring(L, "_%s", dle_op_get_info(ops[i])->name);
    lua_insert(L, -2);
    lua_settable(L, module);
  }
}
