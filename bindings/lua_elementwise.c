/* lua_elementwise.c — unary, binary and comparison ops for Lua, registered by walking the op
 * table: every elementwise op in ops.def becomes dle.<name>(t), t:<name>() and, where it makes
 * sense, the in-place t:<name>_(). Operators + - * / % // ^ and unary minus live here too (% is
 * remainder, // floor_divide, as in PyTorch and Lua). */
#include <math.h>
#include <string.h>

#include "lua_util.h"

/* The operand at idx as a tensor (borrowed from the stack) or a number; a Lua integer is also
 * kept exactly, since int64 values beyond 2^53 do not survive a double. */
typedef struct {
  dle_tensor *t;
  double v;
  bool is_int;
  lua_Integer i;
} operand;

/* The error for an operand that is neither a tensor nor a number (nor a boolean). */
static void bad_operand(lua_State *L, int idx) { dle_lua_typeerror(L, idx, "tensor or number"); }

/* Filled in place, not returned: the copies of a returned struct were a measurable share of
 * `c = a + b` on one element (a 16-byte load of bytes just stored separately stalls
 * store-to-load forwarding). */
static void get_operand(lua_State *L, int idx, operand *o) {
  *o = (operand){dle_lua_opt(L, idx), 0, false, 0};
  if (o->t) return;
  if (lua_isinteger(L, idx)) o->is_int = true, o->i = lua_tointeger(L, idx);
  if (lua_type(L, idx) == LUA_TNUMBER)
    o->v = lua_tonumber(L, idx);
  else if (lua_isboolean(L, idx))
    o->v = lua_toboolean(L, idx);
  else
    bad_operand(L, idx);
}

/* t op n (or n op t) for a Lua integer n and an int64 CPU tensor t, with n exact. */
static dle_status binary_int64(dle_op op, dle_tensor **out, dle_tensor *t, lua_Integer n,
                               bool n_first) {
  dle_tensor *s = NULL;
  if (dle_scalar_tensor(&s, 0, DLE_I64) != DLE_OK) return DLE_ERR;
  *(int64_t *)dle_tensor_data(s) = n;
  dle_status st = n_first ? dle_binary(op, out, s, t) : dle_binary(op, out, t, s);
  dle_tensor_release(s);
  return st;
}

/* out (NULL: new) = a op b, where either side may be a number. */
static dle_status binary(dle_op op, dle_tensor **out, const operand *a, const operand *b) {
  if (a->t && b->t) return dle_binary(op, out, a->t, b->t);
  dle_tensor *t = a->t ? a->t : b->t;
  const operand *n = a->t ? b : a;
  if (t && n->is_int && t->dtype == DLE_I64 && dle_tensor_device(t).type == DLE_CPU)
    return binary_int64(op, out, t, n->i, !a->t);
  if (a->t) return dle_binary_scalar(op, out, a->t, b->v, false);
  if (b->t) return dle_binary_scalar(op, out, b->t, a->v, true);
  return dle_error("%s: at least one operand must be a tensor", dle_op_get_info(op)->name);
}

/* The operands at 1 and 2 combined by op: into a new tensor, or in place into the first. */
static void binary_args(lua_State *L, dle_op op, bool inplace, dle_tensor **out) {
  operand a, b;
  const char *fn = dle_op_get_info(op)->name;
  get_operand(L, 1, &a);
  get_operand(L, 2, &b);
  if (inplace) {
    if (!a.t) luaL_error(L, "%s_: self must be a tensor", fn);
    *out = a.t;
  }
  DLE_LUA_TRY(L, binary(op, out, &a, &b));
}

/* add and sub take PyTorch's {alpha = s} at 3 (a + s*b): the operand at 2 is replaced by s*b
 * (kept on the stack, so an error later frees it). Any other third argument is an error rather
 * than silently dropped. */
static void scale_by_alpha(lua_State *L, dle_op op) {
  if (lua_isnoneornil(L, 3)) return;
  const char *fn = dle_op_get_info(op)->name;
  if ((op != DLE_OP_ADD && op != DLE_OP_SUB) || !lua_istable(L, 3))
    luaL_error(L, "%s: unexpected argument #3 (%s)%s", fn, luaL_typename(L, 3),
               op == DLE_OP_ADD || op == DLE_OP_SUB ? "; options are {alpha = number}" : "");
  static const char *const known[] = {"alpha", NULL};
  dle_lua_check_options(L, 3, fn, known);
  if (lua_getfield(L, 3, "alpha") == LUA_TNIL) return;
  if (lua_type(L, -1) != LUA_TNUMBER)
    luaL_error(L, "%s: alpha must be a number, got %s", fn, luaL_typename(L, -1));
  int t2 = lua_type(L, 2); /* checked first: s*b of a string or table is Lua's own error */
  if (t2 != LUA_TNUMBER && t2 != LUA_TBOOLEAN && !dle_lua_opt(L, 2)) bad_operand(L, 2);
  if (t2 == LUA_TBOOLEAN) { /* as get_operand reads it */
    lua_pushinteger(L, lua_toboolean(L, 2));
    lua_replace(L, 2);
  }
  lua_pushvalue(L, 2);
  lua_arith(L, LUA_OPMUL); /* alpha * b: tensor metamethod or plain number product */
  lua_replace(L, 2);
}

/* upvalue 1: op id; upvalue 2: in-place flag; upvalue 3: the tensor metatable */
#define MT_UPVALUE lua_upvalueindex(3)
static int l_binary(lua_State *L) {
  dle_op op = (dle_op)lua_tointeger(L, lua_upvalueindex(1));
  bool inplace = lua_toboolean(L, lua_upvalueindex(2));
  dle_tensor *r = NULL;
  scale_by_alpha(L, op);
  binary_args(L, op, inplace, &r);
  if (inplace) {
    lua_settop(L, 1);
    return 1;
  }
  dle_lua_push_mt(L, r, MT_UPVALUE);
  return 1;
}

static int l_unary(lua_State *L) {
  dle_op op = (dle_op)lua_tointeger(L, lua_upvalueindex(1));
  bool inplace = lua_toboolean(L, lua_upvalueindex(2));
  dle_tensor *t = dle_lua_check(L, 1);
  if (inplace) {
    DLE_LUA_TRY(L, dle_unary(op, &t, t));
    lua_settop(L, 1);
    return 1;
  }
  dle_tensor *r = NULL;
  DLE_LUA_TRY(L, dle_unary(op, &r, t));
  dle_lua_push_mt(L, r, MT_UPVALUE);
  return 1;
}

/* pow(p): tensor ^ number uses the scalar-exponent op (cheaper, and its own gradient rule). */
static int pow_impl(lua_State *L, bool inplace) {
  if (!dle_lua_opt(L, 1)) { /* number ^ tensor */
    dle_tensor *r = NULL;
    binary_args(L, DLE_OP_POW, false, &r);
    dle_lua_push(L, r);
    return 1;
  }
  dle_tensor *t = dle_lua_check(L, 1), *e = dle_lua_opt(L, 2), *r = inplace ? t : NULL;
  if (e)
    DLE_LUA_TRY(L, dle_binary(DLE_OP_POW, &r, t, e));
  else if (lua_type(L, 2) == LUA_TNUMBER)
    DLE_LUA_TRY(L, dle_pow_scalar(&r, t, lua_tonumber(L, 2)));
  else
    return luaL_error(L, "pow: exponent must be a number or tensor, got %s", luaL_typename(L, 2));
  return dle_lua_push_result(L, r, inplace);
}
static int l_pow(lua_State *L) { return pow_impl(L, false); }
static int l_pow_(lua_State *L) { return pow_impl(L, true); }

/* clamp(lo, hi): either bound may be nil. */
static int clamp_impl(lua_State *L, bool inplace) {
  dle_tensor *t = dle_lua_check(L, 1), *r = inplace ? t : NULL;
  double lo = lua_isnoneornil(L, 2) ? NAN : luaL_checknumber(L, 2);
  double hi = lua_isnoneornil(L, 3) ? NAN : luaL_checknumber(L, 3);
  DLE_LUA_TRY(L, dle_clamp(&r, t, lo, hi));
  return dle_lua_push_result(L, r, inplace);
}
static int l_clamp(lua_State *L) { return clamp_impl(L, false); }
static int l_clamp_(lua_State *L) { return clamp_impl(L, true); }

/* nan_to_num(nan, posinf, neginf) or nan_to_num{nan =, posinf =, neginf =}: NaN becomes nan
 * (default 0), +inf posinf and -inf neginf (default: the dtype's largest and lowest finite value). */
static int nan_to_num_impl(lua_State *L, bool inplace) {
  static const char *const names[] = {"nan", "posinf", "neginf", NULL};
  const char *fn = inplace ? "nan_to_num_" : "nan_to_num";
  dle_tensor *t = dle_lua_check(L, 1), *r = inplace ? t : NULL;
  double v[3] = {0, NAN, NAN};
  bool opts = lua_istable(L, 2);
  if (opts) {
    if (!lua_isnoneornil(L, 3))
      return luaL_error(L, "%s: unexpected argument #3 after the options table", fn);
    dle_lua_check_options(L, 2, fn, names);
  }
  for (int i = 0; i < 3; i++) {
    int idx = 2 + i;
    if (opts) {
      lua_getfield(L, 2, names[i]);
      idx = lua_gettop(L);
    }
    if (lua_isnil(L, idx) || lua_isnone(L, idx)) continue;
    if (lua_type(L, idx) != LUA_TNUMBER)
      return luaL_error(L, "%s: %s must be a number, got %s", fn, names[i], luaL_typename(L, idx));
    v[i] = lua_tonumber(L, idx);
  }
  DLE_LUA_TRY(L, dle_nan_to_num(&r, t, v[0], v[1], v[2]));
  return dle_lua_push_result(L, r, inplace);
}
static int l_nan_to_num(lua_State *L) { return nan_to_num_impl(L, false); }
static int l_nan_to_num_(lua_State *L) { return nan_to_num_impl(L, true); }

/* where(cond, a, b): a and b may be numbers (they take the other side's dtype). */
static int l_where(lua_State *L) {
  dle_tensor *cond = dle_lua_check(L, 1);
  dle_tensor *a = dle_lua_opt(L, 2), *b = dle_lua_opt(L, 3);
  dle_tensor *tmp[2] = {NULL, NULL};
  for (int i = 0; i < 2; i++) {
    dle_tensor *mine = i ? b : a, *other = i ? a : b;
    if (mine) continue;
    if (lua_type(L, 2 + i) != LUA_TNUMBER) {
      dle_tensor_release(tmp[0]);
      return luaL_error(L, "where: argument #%d must be a tensor or a number, got %s", 2 + i,
                        luaL_typename(L, 2 + i));
    }
    double v = lua_tonumber(L, 2 + i);
    dle_dtype dt = other ? other->dtype : DLE_DEFAULT_FLOAT;
    if (!dle_dtype_is_float(dt) && !lua_isinteger(L, 2 + i)) dt = DLE_DEFAULT_FLOAT;
    if (dle_scalar_tensor(&tmp[i], v, dt) != DLE_OK) {
      dle_tensor_release(tmp[0]);
      return dle_lua_fail(L);
    }
  }
  dle_tensor *r = NULL;
  dle_status st = dle_where(&r, cond, a ? a : tmp[0], b ? b : tmp[1]);
  dle_tensor_release(tmp[0]);
  dle_tensor_release(tmp[1]);
  if (st != DLE_OK) return dle_lua_fail(L);
  dle_lua_push(L, r);
  return 1;
}

/* x:where(cond, y) is PyTorch's method form: x where cond is true, else y, i.e. where(cond, x, y). */
static int m_where(lua_State *L) {
  if (lua_gettop(L) != 3)
    return luaL_error(
        L,
        "where: x:where(cond, other) takes a condition and another tensor or number, got %d "
        "arguments",
        lua_gettop(L) - 1);
  lua_pushvalue(L, 2); /* (x, cond, y) -> (x, cond, y, cond) */
  lua_remove(L, 2);    /* -> (x, y, cond) */
  lua_insert(L, 1);    /* -> (cond, x, y) */
  return l_where(L);
}

/* ---- metamethods (upvalue 1: the tensor metatable; the binary ones' upvalue 2: the op) ---- */
static int mt_binary(lua_State *L) {
  dle_tensor *r = NULL;
  binary_args(L, (dle_op)lua_tointeger(L, lua_upvalueindex(2)), false, &r);
  dle_lua_push_mt(L, r, lua_upvalueindex(1));
  return 1;
}
static int mt_unm(lua_State *L) {
  dle_tensor *r = NULL;
  DLE_LUA_TRY(L, dle_unary(DLE_OP_NEG, &r, dle_lua_check(L, 1)));
  dle_lua_push_mt(L, r, lua_upvalueindex(1));
  return 1;
}

static void push_op_closure(lua_State *L, lua_CFunction f, dle_op op, bool inplace, int mt) {
  lua_pushinteger(L, op);
  lua_pushboolean(L, inplace);
  lua_pushvalue(L, mt);
  lua_pushcclosure(L, f, 3);
}

void dle_lua_open_elementwise(lua_State *L, int module, int methods) {
  char name[64];
  luaL_getmetatable(L, "dle.Tensor");
  int mt = lua_gettop(L);
  for (int i = 0; i < DLE_NUM_OPS; i++) {
    dle_op op = (dle_op)i;
    const dle_op_info *info = dle_op_get_info(op);
    lua_CFunction f;
    if (info->kind == DLE_KIND_UNARY && op != DLE_OP_POW_SCALAR && op != DLE_OP_CLAMP &&
        op != DLE_OP_NAN_TO_NUM)
      f = l_unary;
    else if ((info->kind == DLE_KIND_BINARY && op != DLE_OP_POW) || info->kind == DLE_KIND_COMPARE)
      f = l_binary;
    else
      continue;
    push_op_closure(L, f, op, false, mt);
    lua_pushvalue(L, -1);
    lua_setfield(L, module, info->name);
    lua_setfield(L, methods, info->name);
    if (info->kind == DLE_KIND_COMPARE || op == DLE_OP_LOGICAL_NOT || op == DLE_OP_ISNAN ||
        op == DLE_OP_ISINF || op == DLE_OP_ISFINITE)
      continue; /* bool results */
    snprintf(name, sizeof name, "%s_", info->name);
    push_op_closure(L, f, op, true, mt);
    lua_setfield(L, methods, name);
  }
  static const luaL_Reg both[] = {
      {"pow", l_pow}, {"clamp", l_clamp}, {"nan_to_num", l_nan_to_num}, {NULL, NULL}};
  static const luaL_Reg meths[] = {{"pow_", l_pow_},
                                   {"clamp_", l_clamp_},
                                   {"nan_to_num_", l_nan_to_num_},
                                   {"where", m_where},
                                   {NULL, NULL}};
  dle_lua_register(L, module, methods, NULL, both, meths);
  lua_pushcfunction(L, l_where);
  lua_setfield(L, module, "where");
  lua_pushcfunction(L, l_clamp);
  lua_setfield(L, methods, "clip");

  static const struct {
    const char *name;
    dle_op op;
  } meta[] = {{"__add", DLE_OP_ADD}, {"__sub", DLE_OP_SUB},       {"__mul", DLE_OP_MUL},
              {"__div", DLE_OP_DIV}, {"__mod", DLE_OP_REMAINDER}, {"__idiv", DLE_OP_FLOOR_DIVIDE}};
  for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) {
    lua_pushvalue(L, mt);
    lua_pushinteger(L, meta[i].op);
    lua_pushcclosure(L, mt_binary, 2);
    lua_setfield(L, mt, meta[i].name);
  }
  lua_pushvalue(L, mt);
  lua_pushcclosure(L, mt_unm, 1);
  lua_setfield(L, mt, "__unm");
  lua_pushcfunction(L, l_pow);
  lua_setfield(L, mt, "__pow");
  lua_pop(L, 1);
}
