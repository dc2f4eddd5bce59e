/* lua_matmul.c — matrix products for Lua: matmul, mm, bmm, mv, dot and outer, each both as
 * dle.<name>(a, b) and a:<name>(b), with an optional {out = t} to write into t; and addmm,
 * c + a b in one product. (einsum is Lua code: lua/dle/einsum.lua.) */
#include "lua_util.h"

typedef dle_status (*product_fn)(dle_tensor **out, dle_tensor *a, dle_tensor *b);

/* f(a, b) [, {out = t}]: a new tensor, or the result written into t (which is returned). */
static int push_product(lua_State *L, const char *fn, product_fn f) {
  dle_tensor *a = dle_lua_check(L, 1), *b = dle_lua_check(L, 2), *r = NULL;
  if (!lua_isnoneornil(L, 3)) {
    if (!lua_istable(L, 3))
      return luaL_error(L, "%s: options must be a table, got %s", fn, luaL_typename(L, 3));
    static const char *const known[] = {"out", NULL};
    dle_lua_check_options(L, 3, fn, known);
    lua_getfield(L, 3, "out");
    if (!lua_isnil(L, -1)) {
      r = dle_lua_opt(L, -1);
      if (!r)
        return luaL_error(L, "%s: option 'out' must be a tensor, got %s", fn, luaL_typename(L, -1));
      DLE_LUA_TRY(L, f(&r, a, b));
      return 1; /* the out tensor, still on top of the stack */
    }
    lua_pop(L, 1);
  }
  DLE_LUA_TRY(L, f(&r, a, b));
  dle_lua_push(L, r);
  return 1;
}

/* Checks that a has rank ra and b rank rb, else an error naming fn and both shapes. */
static dle_status check_ranks(const char *fn, const char *what, dle_tensor *a, int ra,
                              dle_tensor *b, int rb) {
  if (a->ndim == ra && b->ndim == rb) return DLE_OK;
  char sa[128], sb[128];
  return dle_error("%s: expected %s, got shapes %s and %s", fn, what,
                   dle_tensor_shape_str(sa, sizeof sa, a), dle_tensor_shape_str(sb, sizeof sb, b));
}

/* The error when a's size ia and b's size ib differ: "fn: shapes {..} and {..} <how> (m vs n)". */
static dle_status check_sizes(const char *fn, const char *how, dle_tensor *a, int ia, dle_tensor *b,
                              int ib) {
  if (a->sizes[ia] == b->sizes[ib]) return DLE_OK;
  char sa[128], sb[128];
  return dle_error("%s: shapes %s and %s %s (%lld vs %lld)", fn,
                   dle_tensor_shape_str(sa, sizeof sa, a), dle_tensor_shape_str(sb, sizeof sb, b),
                   how, (long long)a->sizes[ia], (long long)b->sizes[ib]);
}

static dle_status mv(dle_tensor **out, dle_tensor *a, dle_tensor *v) {
  if (check_ranks("mv", "a 2-D matrix and a 1-D vector", a, 2, v, 1) != DLE_OK) return DLE_ERR;
  if (check_sizes("mv", "are not aligned", a, 1, v, 0) != DLE_OK) return DLE_ERR;
  return dle_matmul(out, a, v);
}

static dle_status dot(dle_tensor **out, dle_tensor *a, dle_tensor *b) {
  if (check_ranks("dot", "two 1-D tensors", a, 1, b, 1) != DLE_OK) return DLE_ERR;
  if (check_sizes("dot", "have different lengths", a, 0, b, 0) != DLE_OK) return DLE_ERR;
  return dle_matmul(out, a, b);
}

/* outer(a, b)[i][j] = a[i] * b[j]: a broadcast multiply of a column by a row (exact, no K sum). */
static dle_status outer(dle_tensor **out, dle_tensor *a, dle_tensor *b) {
  if (check_ranks("outer", "two 1-D tensors", a, 1, b, 1) != DLE_OK) return DLE_ERR;
  dle_tensor *col = NULL, *row = NULL;
  dle_status st = dle_unsqueeze(&col, a, 1);
  if (st == DLE_OK) st = dle_unsqueeze(&row, b, 0);
  if (st == DLE_OK) st = dle_binary(DLE_OP_MUL, out, col, row);
  dle_tensor_release(col);
  dle_tensor_release(row);
  return st;
}

static int l_matmul(lua_State *L) {
  int n = dle_lua_quant_dispatch(L); /* a quantized weight: lua/dle/quant.lua's product */
  return n >= 0 ? n : push_product(L, "matmul", dle_matmul);
}

/* dle.addmm(c, a, b) or c:addmm(a, b): matmul(a, b) + c with c broadcast to the product (as
 * PyTorch's addmm, for any shapes matmul takes); float32/64 accumulate into c inside gemm. */
static int l_addmm(lua_State *L) {
  dle_tensor *ins[3] = {dle_lua_check(L, 2), dle_lua_check(L, 3), dle_lua_check(L, 1)}, *r = NULL;
  DLE_LUA_TRY(L, dle_op_call(DLE_OP_MATMUL, &r, ins, 3, NULL));
  dle_lua_push(L, r);
  return 1;
}
static int l_mm(lua_State *L) { return push_product(L, "mm", dle_mm); }
static int l_bmm(lua_State *L) { return push_product(L, "bmm", dle_bmm); }
static int l_mv(lua_State *L) { return push_product(L, "mv", mv); }
static int l_dot(lua_State *L) { return push_product(L, "dot", dot); }
static int l_outer(lua_State *L) { return push_product(L, "outer", outer); }

/* core._fp8_scaled_matmul(a, b, a_scale, b_scale, out_dtype): dle.fp8.scaled_matmul's engine
 * call (lua/dle/fp8.lua checks the options). */
static int l_fp8_scaled_matmul(lua_State *L) {
  const char *fn = "dle.fp8.scaled_matmul";
  dle_tensor *a = dle_lua_check(L, 1), *b = dle_lua_check(L, 2), *sa = dle_lua_check(L, 3),
             *sb = dle_lua_check(L, 4), *out = NULL;
  dle_dtype dt = dle_lua_check_dtype(L, 5, fn);
  DLE_LUA_TRY(L, dle_fp8_scaled_matmul(&out, a, b, sa, sb, dt));
  dle_lua_push(L, out);
  return 1;
}

void dle_lua_open_matmul(lua_State *L, int module, int methods) {
  static const luaL_Reg module_only[] = {{"_fp8_scaled_matmul", l_fp8_scaled_matmul}, {NULL, NULL}};
  static const luaL_Reg both[] = {{"matmul", l_matmul}, {"mm", l_mm},       {"bmm", l_bmm},
                                  {"mv", l_mv},         {"dot", l_dot},     {"outer", l_outer},
                                  {"ger", l_outer},     {"addmm", l_addmm}, {NULL, NULL}};
  dle_lua_register(L, module, methods, module_only, both, NULL);
}
