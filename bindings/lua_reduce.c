/* lua_reduce.c — reductions and what is built on them (all, any, norm) for Lua, each as
 * dle.<name>(t, ...) and t:<name>(...). Dims are 1-based here (negative counts from the end) and
 * may be one dim, a table of dims, or nil for all; indices come back 1-based. */
#include <math.h>
#include <string.h>

#include "../engine/dle.h"
#include "lua_util.h"

typedef struct {
  bool keepdim;
  double correction; /* var/std: 1 = unbiased (the default) */
  bool has_dtype;    /* convert the input to dtype first (sum, mean, ...) */
  dle_dtype dtype;
} reduce_opts;

/* True when the value at idx is an options table rather than a list of dims. */
static bool is_options(lua_State *L, int idx) {
  if (!lua_istable(L, idx) || dle_lua_opt(L, idx) || lua_rawlen(L, idx) > 0) return false;
  lua_pushnil(L);
  if (!lua_next(L, idx)) return false; /* {}: an empty list of dims */
  lua_pop(L, 2);
  return true;
}

/* Dims at idx: nil (all: returns 0), one 1-based dim, or a table of them; 0-based into dims. */
static int get_dims(lua_State *L, int idx, const char *fn, int *dims) {
  if (lua_isnoneornil(L, idx)) return 0;
  if (!lua_istable(L, idx) || dle_lua_opt(L, idx)) {
    if (lua_type(L, idx) != LUA_TNUMBER)
      luaL_error(L, "%s: dim must be an integer or a table of integers, got %s", fn,
                 luaL_typename(L, idx));
    dims[0] = dle_lua_dim(L, idx, fn);
    return 1;
  }
  int n = (int)lua_rawlen(L, idx);
  if (n > DLE_MAX_DIMS)
    luaL_error(L, "%s: %d dims given, at most %d supported", fn, n, DLE_MAX_DIMS);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, idx, i + 1);
    dims[i] = dle_lua_dim(L, lua_gettop(L), fn);
    lua_pop(L, 1);
  }
  return n;
}

static void read_options_table(lua_State *L, int idx, const char *fn, reduce_opts *o) {
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
    if (strcmp(k, "keepdim") == 0) {
      if (!lua_isboolean(L, -1))
        luaL_error(L, "%s: keepdim must be a boolean, got %s", fn, luaL_typename(L, -1));
      o->keepdim = lua_toboolean(L, -1);
    } else if (strcmp(k, "correction") == 0) {
      if (lua_type(L, -1) != LUA_TNUMBER)
        luaL_error(L, "%s: correction must be a number, got %s", fn, luaL_typename(L, -1));
      o->correction = lua_tonumber(L, -1);
    } else if (strcmp(k, "unbiased") == 0) {
      if (!lua_isboolean(L, -1))
        luaL_error(L, "%s: unbiased must be a boolean, got %s", fn, luaL_typename(L, -1));
      o->correction = lua_toboolean(L, -1) ? 1 : 0;
    } else if (strcmp(k, "dtype") == 0) {
      o->dtype = dle_lua_check_dtype(L, -1, fn);
      o->has_dtype = true;
    } else {
      luaL_error(L, "%s: unknown option '%s' (expected keepdim, correction, unbiased or dtype)", fn,
                 lua_type(L, -2) == LUA_TSTRING ? k : luaL_typename(L, -2));
    }
    lua_pop(L, 1);
  }
}

/* keepdim (a boolean) and/or an options table, in any of the arguments from `first` on. */
static reduce_opts get_opts(lua_State *L, int first, const char *fn) {
  reduce_opts o = {.keepdim = false, .correction = 1};
  for (int i = first; i <= lua_gettop(L); i++) {
    if (lua_isnil(L, i)) continue;
    if (lua_isboolean(L, i))
      o.keepdim = lua_toboolean(L, i);
    else if (lua_istable(L, i) && !dle_lua_opt(L, i))
      read_options_table(L, i, fn, &o);
    else
      luaL_error(L, "%s: expected keepdim (a boolean) or an options table for argument #%d, got %s",
                 fn, i, luaL_typename(L, i));
  }
  return o;
}

/* t:sum(d, keepdim), mean, prod, var, std, logsumexp, amax, amin. upvalue 1: the op. */
static int l_reduce(lua_State *L) {
  dle_op op = (dle_op)lua_tointeger(L, lua_upvalueindex(1));
  const char *fn = dle_op_get_info(op)->name;
  dle_tensor *x = dle_lua_check(L, 1), *xc = NULL, *r = NULL;
  int dims[DLE_MAX_DIMS], nd = 0, first = 3;
  if (is_options(L, 2))
    first = 2; /* t:var{unbiased = false} */
  else
    nd = get_dims(L, 2, fn, dims);
  reduce_opts o = get_opts(L, first, fn);
  if (o.has_dtype) {
    DLE_LUA_TRY(L, dle_to_dtype(&xc, x, o.dtype));
  } else {
    dle_tensor_retain(x);
    xc = x;
  }
  /* an explicit dtype wins over autocast's float32, as in PyTorch */
  bool autocast = o.has_dtype && dle_autocast_set_enabled(false);
  dle_status st = dle_reduce(op, &r, xc, nd, dims, o.keepdim, o.correction);
  if (autocast) dle_autocast_set_enabled(true);
  dle_tensor_release(xc);
  if (st != DLE_OK) return dle_lua_fail(L);
  dle_lua_push(L, r);
  return 1;
}

/* Elementwise maximum/minimum with a tensor or a non-integer number on either side. */
static int elementwise_extreme(lua_State *L, dle_op op) {
  dle_tensor *a = dle_lua_opt(L, 1), *b = dle_lua_opt(L, 2), *r = NULL;
  if (a && b)
    DLE_LUA_TRY(L, dle_binary(op, &r, a, b));
  else if (a)
    DLE_LUA_TRY(L, dle_binary_scalar(op, &r, a, luaL_checknumber(L, 2), false));
  else if (b)
    DLE_LUA_TRY(L, dle_binary_scalar(op, &r, b, luaL_checknumber(L, 1), true));
  else
    return luaL_typeerror(L, 1, "dle.Tensor");
  dle_lua_push(L, r);
  return 1;
}

/* t:max() -> 0-dim maximum; t:max(d, keepdim) -> values, 1-based indices; t:max(other) with a
 * tensor (or a non-integer number) -> elementwise maximum. upvalue 1: DLE_OP_MAX or DLE_OP_MIN. */
static int l_extreme(lua_State *L) {
  dle_op op = (dle_op)lua_tointeger(L, lua_upvalueindex(1));
  const char *fn = dle_op_get_info(op)->name;
  bool is_max = op == DLE_OP_MAX;
  if (dle_lua_opt(L, 2) || !dle_lua_opt(L, 1) ||
      (lua_type(L, 2) == LUA_TNUMBER && !lua_isinteger(L, 2)))
    return elementwise_extreme(L, is_max ? DLE_OP_MAXIMUM : DLE_OP_MINIMUM);
  dle_tensor *x = dle_lua_check(L, 1), *v = NULL, *i = NULL;
  if (lua_isnoneornil(L, 2)) { /* over everything: the value only */
    reduce_opts o = get_opts(L, 3, fn);
    if (dle_tensor_numel(x) == 0)
      return luaL_error(L, "%s: cannot reduce an empty tensor (shape %s)", fn,
                        dle_tensor_shape_str((char[128]){0}, 128, x));
    DLE_LUA_TRY(L, dle_reduce(is_max ? DLE_OP_AMAX : DLE_OP_AMIN, &v, x, 0, NULL, o.keepdim, 0));
    dle_lua_push(L, v);
    return 1;
  }
  int d = dle_lua_dim(L, 2, fn);
  reduce_opts o = get_opts(L, 3, fn);
  DLE_LUA_TRY(L, dle_max_dim(op, &v, &i, x, d, o.keepdim, 1));
  dle_lua_push(L, v);
  dle_lua_push(L, i);
  return 2;
}

/* t:argmax(d, keepdim): 1-based indices along d; with no d the 1-based flat index. */
static int l_arg(lua_State *L) {
  dle_op op = (dle_op)lua_tointeger(L, lua_upvalueindex(1));
  const char *fn = dle_op_get_info(op)->name;
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  int d = dle_lua_optdim(L, 2, fn, DLE_ALL_DIMS);
  reduce_opts o = get_opts(L, 3, fn);
  DLE_LUA_TRY(L, dle_arg_reduce(op, &r, x, d, o.keepdim, 1));
  dle_lua_push(L, r);
  return 1;
}

/* any: some element is nonzero (count of nonzeros > 0); all: no element is zero. Counting keeps
 * empty slices right (any -> false, all -> true) where a max/min would have nothing to pick. */
static dle_status truth(dle_tensor **out, dle_tensor *x, bool all, int nd, const int *dims,
                        bool keepdim) {
  dle_tensor *b = NULL, *count = NULL;
  dle_status st = all ? dle_unary(DLE_OP_LOGICAL_NOT, &b, x) : dle_to_dtype(&b, x, DLE_BOOL);
  if (st == DLE_OK) st = dle_reduce(DLE_OP_SUM, &count, b, nd, dims, keepdim, 0);
  if (st == DLE_OK) st = dle_binary_scalar(all ? DLE_OP_EQ : DLE_OP_GT, out, count, 0, false);
  dle_tensor_release(b);
  dle_tensor_release(count);
  return st;
}

static int truth_impl(lua_State *L, bool all) {
  const char *fn = all ? "all" : "any";
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  int dims[DLE_MAX_DIMS], nd = get_dims(L, 2, fn, dims);
  reduce_opts o = get_opts(L, 3, fn);
  DLE_LUA_TRY(L, truth(&r, x, all, nd, dims, o.keepdim));
  dle_lua_push(L, r);
  return 1;
}
static int l_all(lua_State *L) { return truth_impl(L, true); }
static int l_any(lua_State *L) { return truth_impl(L, false); }

/* The vector p-norm over dims: (sum |x|^p)^(1/p); p = inf / -inf: max / min of |x|; p = 0: the
 * number of nonzeros. Integer inputs are converted to the default float dtype first. */
static dle_status vector_norm(dle_tensor **out, dle_tensor *x, double p, int nd, const int *dims,
                              bool keepdim) {
  dle_tensor *xf = NULL, *a = NULL, *s = NULL;
  dle_dtype fdt = dle_dtype_is_float(x->dtype) ? x->dtype : DLE_DEFAULT_FLOAT;
  dle_status st = dle_to_dtype(&xf, x, fdt);
  if (st != DLE_OK) return st;
  if (p == 2) {
    st = dle_binary(DLE_OP_MUL, &a, xf, xf);
    if (st == DLE_OK) st = dle_reduce(DLE_OP_SUM, &s, a, nd, dims, keepdim, 0);
    if (st == DLE_OK) st = dle_unary(DLE_OP_SQRT, out, s);
  } else if (p == 0) {
    st = dle_binary_scalar(DLE_OP_NE, &a, xf, 0, false);
    if (st == DLE_OK) st = dle_reduce(DLE_OP_SUM, &s, a, nd, dims, keepdim, 0);
    if (st == DLE_OK) st = dle_to_dtype(out, s, fdt);
  } else if (isinf(p)) {
    st = dle_unary(DLE_OP_ABS, &a, xf);
    if (st == DLE_OK)
      st = dle_reduce(p > 0 ? DLE_OP_AMAX : DLE_OP_AMIN, out, a, nd, dims, keepdim, 0);
  } else if (p == 1) {
    st = dle_unary(DLE_OP_ABS, &a, xf);
    if (st == DLE_OK) st = dle_reduce(DLE_OP_SUM, out, a, nd, dims, keepdim, 0);
  } else {
    dle_tensor *ap = NULL;
    st = dle_unary(DLE_OP_ABS, &a, xf);
    if (st == DLE_OK) st = dle_pow_scalar(&ap, a, p);
    if (st == DLE_OK) st = dle_reduce(DLE_OP_SUM, &s, ap, nd, dims, keepdim, 0);
    if (st == DLE_OK) st = dle_pow_scalar(out, s, 1 / p);
    dle_tensor_release(ap);
  }
  dle_tensor_release(xf);
  dle_tensor_release(a);
  dle_tensor_release(s);
  return st;
}

/* t:norm(p, d, keepdim): p defaults to 2 ("fro" is 2 as well); d as for sum. */
static int l_norm(lua_State *L) {
  dle_tensor *x = dle_lua_check(L, 1), *r = NULL;
  double p = 2;
  if (lua_type(L, 2) == LUA_TNUMBER)
    p = lua_tonumber(L, 2);
  else if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "fro") == 0)
    p = 2;
  else if (!lua_isnoneornil(L, 2))
    return luaL_error(L, "norm: p must be a number (or \"fro\"), got %s",
                      lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : luaL_typename(L, 2));
  if (p != p) return luaL_error(L, "norm: p must not be NaN");
  int dims[DLE_MAX_DIMS], nd = get_dims(L, 3, "norm", dims);
  reduce_opts o = get_opts(L, 4, "norm");
  DLE_LUA_TRY(L, vector_norm(&r, x, p, nd, dims, o.keepdim));
  dle_lua_push(L, r);
  return 1;
}

static void set_both(lua_State *L, int module, int methods, const char *name) {
  lua_pushvalue(L, -1);
  lua_setfield(L, module, name);
  lua_setfield(L, methods, name);
}

void dle_lua_open_reduce(lua_State *L, int module, int methods) {
  for (int i = 0; i < DLE_NUM_OPS; i++) {
    const dle_op_info *info = dle_op_get_info((dle_op)i);
    lua_CFunction f;
    if (info->kind != DLE_KIND_REDUCE)
      continue;
    else if (i == DLE_OP_MAX || i == DLE_OP_MIN)
      f = l_extreme;
    else if (i == DLE_OP_ARGMAX || i == DLE_OP_ARGMIN)
      f = l_arg;
    else
      f = l_reduce;
    lua_pushinteger(L, i);
    lua_pushcclosure(L, f, 1);
    set_both(L, module, methods, info->name);
  }
  static const luaL_Reg both[] = {{"all", l_all}, {"any", l_any}, {"norm", l_norm}, {NULL, NULL}};
  dle_lua_setfuncs(L, module, both);
  dle_lua_setfuncs(L, methods, both);
}
