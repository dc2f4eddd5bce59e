/* lua_quant.c — weight-only quantization for Lua, as dle.core helpers that lua/dle/quant.lua
 * builds the quantized tensor type on:
 *   core._qtype_info(kind)                        -> values per block, bytes per block (nil: unknown)
 *   core._quantize(x, kind)                       x float32 {rows, cols} -> uint8 {rows, row bytes}
 *   core._dequantize(w, kind, cols)               -> float32 {rows, cols}
 *   core._qmatmul(x, w, kind, cols, transposed)   -> x @ W^T (transposed) or x @ W
 *   core._set_qmatmul(fn)                         matmul(a, b) with a quantized operand calls fn(a, b) */
#include <string.h>

#include "lua_util.h"
#include "../engine/dle.h"

/* The registry key of lua/dle/quant.lua's product with a quantized operand (set by
 * core._set_qmatmul), which dle.matmul hands such calls to. */
#define QMATMUL_KEY "dle.qmatmul"

static bool is_quantized(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx)) return false;
  lua_getfield(L, -1, "__name");
  const char *name = lua_tostring(L, -1);
  bool yes = name && strcmp(name, "dle.QuantizedTensor") == 0;
  lua_pop(L, 2);
  return yes;
}

int dle_lua_quant_dispatch(lua_State *L) {
  if (!is_quantized(L, 1) && !is_quantized(L, 2)) return -1;
  lua_getfield(L, LUA_REGISTRYINDEX, QMATMUL_KEY);
  if (!lua_isfunction(L, -1))
    return dle_lua_error(L, "quantized tensors need lua/dle/quant.lua (require \"dle\")");
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_call(L, 2, 1);
  return 1;
}

static int l_set_qmatmul(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_pushvalue(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, QMATMUL_KEY);
  return 0;
}

static dle_qtype check_qtype(lua_State *L, int arg) {
  const char *name = dle_lua_checklstring(L, arg, NULL);
  dle_qtype q;
  if (!dle_qtype_parse(name, &q))
    dle_lua_error(L, "unknown quantization type '%s' (known: q8_0, q4_0, q4_k)", name);
  return q;
}

static int l_qtype_info(lua_State *L) {
  dle_qtype q;
  if (!dle_qtype_parse(dle_lua_checklstring(L, 1, NULL), &q)) return 0;
  lua_pushinteger(L, dle_qtype_block(q));
  lua_pushinteger(L, dle_qtype_block_bytes(q));
  return 2;
}

static int l_quantize(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *out = NULL;
  DLE_LUA_TRY(L, dle_quantize(&out, x, check_qtype(L, 2)));
  dle_lua_push(L, out);
  return 1;
}

static int l_dequantize(lua_State *L) {
  dle_tensor *w = dle_lua_check(L, 1), *out = NULL;
  dle_qtype q = check_qtype(L, 2);
  DLE_LUA_TRY(L, dle_dequantize(&out, w, q, dle_lua_check_int(L, 3, "dequantize", "cols")));
  dle_lua_push(L, out);
  return 1;
}

static int l_qmatmul(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *w = dle_lua_check(L, 2), *out = NULL;
  dle_qtype q = check_qtype(L, 3);
  int64_t cols = dle_lua_check_int(L, 4, "matmul", "cols");
  DLE_LUA_TRY(L, dle_qmatmul(&out, x, w, q, cols, lua_toboolean(L, 5)));
  dle_lua_push(L, out);
  return 1;
}

void dle_lua_open_quant(lua_State *L, int module, int methods) {
  static const luaL_Reg fns[] = {{"_qtype_info", l_qtype_info},   {"_quantize", l_quantize},
                                 {"_dequantize", l_dequantize},   {"_qmatmul", l_qmatmul},
                                 {"_set_qmatmul", l_set_qmatmul}, {NULL, NULL}};
  dle_lua_register(L, module, methods, fns, NULL, NULL);
}
