/* lua_index.c — joining and indexing for Lua: cat/stack, split/chunk (views), gather,
 * scatter_add, scatter, scatter_reduce, index_select, index_add, masked_fill, tril/triu and
 * one_hot. Dims and index values are 1-based: index tensors go to the engine unchanged with
 * index_base = 1. */
#include <string.h>

#include "../engine/dle.h"
#include "lua_util.h"

#define LUA_INDEX_BASE 1

/* ---------------------------------------------------------------- arguments */

/* The tensors of the list at arg, in a scratch userdata left on the stack (so a Lua error
 * cannot leak it); the tensors themselves stay owned by the list. */
static dle_tensor **check_list(lua_State *L, int arg, const char *fn, int *n) {
  if (!lua_istable(L, arg) || dle_lua_opt(L, arg))
    luaL_error(
        L, "%s: expected a list of tensors, got %s", fn,
        dle_lua_opt(L, arg) ? "a tensor (wrap the tensors in a table)" : luaL_typename(L, arg));
  lua_Unsigned len = lua_rawlen(L, arg);
  if (len == 0) luaL_error(L, "%s: expected a non-empty list of tensors", fn);
  if (len > 1u << 24) luaL_error(L, "%s: too many tensors (%d)", fn, (int)len);
  dle_tensor **ts = lua_newuserdatauv(L, (size_t)len * sizeof *ts, 0);
  for (lua_Unsigned i = 0; i < len; i++) {
    lua_rawgeti(L, arg, (lua_Integer)i + 1);
    ts[i] = dle_lua_opt(L, -1);
    if (!ts[i])
      luaL_error(L, "%s: element %d of the list is a %s, expected a tensor", fn, (int)i + 1,
                 luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  *n = (int)len;
  return ts;
}

/* An index argument: an int64 tensor, or (allow_table) a Lua list of integers turned into one,
 * kept alive on the stack. Values stay 1-based either way. */
static dle_tensor *check_index(lua_State *L, int arg, const char *fn, bool allow_table) {
  dle_tensor *t = dle_lua_opt(L, arg);
  if (t) return t;
  if (!allow_table || !lua_istable(L, arg))
    luaL_error(L, "%s: index must be an int64 tensor%s, got %s", fn,
               allow_table ? " or a table of integers" : "", luaL_typename(L, arg));
  int64_t n = (int64_t)lua_rawlen(L, arg);
  DLE_LUA_TRY(L, dle_tensor_empty(&t, 1, &n, DLE_I64, DLE_DEVICE_CPU));
  dle_lua_push(L, t); /* owned by Lua from here on */
  int64_t *v = dle_tensor_data(t);
  for (int64_t i = 0; i < n; i++) {
    lua_rawgeti(L, arg, (lua_Integer)i + 1);
    int isint = 0;
    v[i] = (int64_t)lua_tointegerx(L, -1, &isint);
    if (!isint)
      luaL_error(L, "%s: index table entry %d is %s, expected an integer", fn, (int)i + 1,
                 lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  return t;
}

/* A fill value: number, boolean or one-element tensor. */
static double check_value(lua_State *L, int arg, const char *fn) {
  if (lua_isboolean(L, arg)) return lua_toboolean(L, arg);
  if (lua_type(L, arg) == LUA_TNUMBER) return lua_tonumber(L, arg);
  dle_tensor *t = dle_lua_opt(L, arg);
  if (!t)
    luaL_error(L, "%s: value must be a number, boolean or one-element tensor, got %s", fn,
               luaL_typename(L, arg));
  if (dle_tensor_numel(t) != 1)
    luaL_error(L, "%s: a tensor value must have one element, got shape %s", fn,
               dle_tensor_shape_str((char[128]){0}, 128, t));
  dle_trace_note_unsafe("%s: a tensor's value was read as a number", fn);
  dle_tensor *host = NULL;
  DLE_LUA_TRY(L, dle_to_device(&host, t, DLE_DEVICE_CPU));
  int64_t zero[DLE_MAX_DIMS] = {0};
  double v = dle_tensor_get(host, zero);
  dle_tensor_release(host);
  return v;
}

/* ---------------------------------------------------------------- cat, stack */

/* name(list, dim = 0) for the ops that join a list of tensors along a dim. */
static int join(lua_State *L, const char *name,
                dle_status (*op)(dle_tensor **, dle_tensor *const *, int, int)) {
  lua_settop(L, 2); /* check_list's scratch goes above the arguments */
  int n;
  dle_tensor **ts = check_list(L, 1, name, &n);
  int d = dle_lua_optdim(L, 2, name, 0);
  dle_tensor *r = NULL;
  DLE_LUA_TRY(L, op(&r, ts, n, d));
  dle_lua_push(L, r);
  return 1;
}

static int l_cat(lua_State *L) { return join(L, "cat", dle_cat); }
static int l_stack(lua_State *L) { return join(L, "stack", dle_stack); }

/* ---------------------------------------------------------------- split, chunk */

/* ceil(a / b) for a >= 0, b > 0, without the overflow of (a + b - 1) / b when b is huge. */
static int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

/* Pushes a list of views of t along dim: pieces of `step` elements, the last one possibly
 * shorter, `count` pieces in all. */
static int push_pieces(lua_State *L, dle_tensor *t, int dim, int64_t step, int64_t count) {
  int64_t size = t->sizes[dim];
  lua_createtable(L, count < 1 << 20 ? (int)count : 0, 0);
  for (int64_t i = 0, start = 0; i < count; i++, start += step) {
    int64_t len = size - start < step ? size - start : step;
    dle_tensor *v = NULL;
    DLE_LUA_TRY(L, dle_narrow(&v, t, dim, start, len < 0 ? 0 : len));
    dle_lua_push(L, v);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

/* split(t, size, d): views of `size` elements along d (the last may be smaller);
 * split(t, {s1, s2, ...}, d): views of those sizes, which must add up to the dim's size. */
static int l_split(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  int dim;
  DLE_LUA_TRY(L, dle_wrap_dim("split", dle_lua_optdim(L, 3, "split", 0), t->ndim, 0, &dim));
  int64_t size = t->sizes[dim];
  if (!lua_istable(L, 2)) {
    int64_t step = dle_lua_check_int(L, 2, "split", "split size");
    if (step < 0 || (step == 0 && size > 0))
      return luaL_error(L, "split: split size must be positive, got %I (dim %d of shape %s)",
                        (LUAI_UACINT)step, dim + 1, dle_tensor_shape_str((char[128]){0}, 128, t));
    return push_pieces(L, t, dim, step, size == 0 ? 1 : ceil_div(size, step));
  }
  int n = (int)lua_rawlen(L, 2);
  int64_t total = 0;
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, 2, i);
    int64_t len = dle_lua_check_int(L, -1, "split", "each size");
    lua_pop(L, 1);
    if (len < 0)
      return luaL_error(L, "split: size %d of the list is negative (%I)", i, (LUAI_UACINT)len);
    if (len > size - total) /* checked before adding: a sum of huge sizes would overflow */
      return luaL_error(L, "split: sizes add up to more than dim %d of shape %s (size %I)", dim + 1,
                        dle_tensor_shape_str((char[128]){0}, 128, t), (LUAI_UACINT)size);
    total += len;
  }
  if (total != size)
    return luaL_error(L, "split: sizes add up to %I but dim %d of shape %s has size %I",
                      (LUAI_UACINT)total, dim + 1, dle_tensor_shape_str((char[128]){0}, 128, t),
                      (LUAI_UACINT)size);
  lua_createtable(L, n, 0);
  int64_t start = 0;
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, 2, i);
    int64_t len = lua_tointeger(L, -1);
    lua_pop(L, 1);
    dle_tensor *v = NULL;
    DLE_LUA_TRY(L, dle_narrow(&v, t, dim, start, len));
    dle_lua_push(L, v);
    lua_rawseti(L, -2, i);
    start += len;
  }
  return 1;
}

/* chunk(t, n, d): at most n views of equal size (the last may be smaller), as PyTorch. */
static int l_chunk(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  int64_t n = dle_lua_check_int(L, 2, "chunk", "number of chunks");
  if (n < 1)
    return luaL_error(L, "chunk: number of chunks must be positive, got %I", (LUAI_UACINT)n);
  int dim;
  DLE_LUA_TRY(L, dle_wrap_dim("chunk", dle_lua_optdim(L, 3, "chunk", 0), t->ndim, 0, &dim));
  /* An empty dim gives one empty chunk (like split; chunk may return fewer than n chunks, as in
   * PyTorch): n empty views would be a hang for a huge n. */
  int64_t size = t->sizes[dim];
  if (size == 0) return push_pieces(L, t, dim, 0, 1);
  int64_t step = ceil_div(size, n);
  return push_pieces(L, t, dim, step, ceil_div(size, step));
}

/* ---------------------------------------------------------------- gather and scatter */

/* gather(t, d, index) / index_select(t, d, index): index of t's rank / a 1-D index. */
static int pick(lua_State *L, bool select) {
  const char *fn = select ? "index_select" : "gather";
  dle_tensor *t = dle_lua_check(L, 1), *r = NULL;
  int d = dle_lua_dim(L, 2, fn);
  dle_tensor *index = check_index(L, 3, fn, select);
  DLE_LUA_TRY(L, select ? dle_index_select(&r, t, d, index, LUA_INDEX_BASE)
                        : dle_gather(&r, t, d, index, LUA_INDEX_BASE));
  dle_lua_push(L, r);
  return 1;
}
static int l_gather(lua_State *L) { return pick(L, false); }
static int l_index_select(lua_State *L) { return pick(L, true); }

/* scatter_add / index_add (self, d, index, src), and their in-place forms. */
static int accumulate(lua_State *L, dle_op op, bool inplace) {
  const char *fn = op == DLE_OP_SCATTER_ADD ? (inplace ? "scatter_add_" : "scatter_add")
                                            : (inplace ? "index_add_" : "index_add");
  dle_tensor *self = dle_lua_check(L, 1);
  int d = dle_lua_dim(L, 2, fn);
  dle_tensor *index = check_index(L, 3, fn, op == DLE_OP_INDEX_ADD);
  dle_tensor *src = dle_lua_opt(L, 4);
  if (!src) return luaL_error(L, "%s: src must be a tensor, got %s", fn, luaL_typename(L, 4));
  dle_tensor *r = inplace ? self : NULL;
  if (op == DLE_OP_SCATTER_ADD)
    DLE_LUA_TRY(L, dle_scatter_add(&r, self, d, index, src, LUA_INDEX_BASE));
  else
    DLE_LUA_TRY(L, dle_index_add(&r, self, d, index, src, LUA_INDEX_BASE));
  return dle_lua_push_result(L, r, inplace);
}
static int l_scatter_add(lua_State *L) { return accumulate(L, DLE_OP_SCATTER_ADD, false); }
static int l_scatter_add_(lua_State *L) { return accumulate(L, DLE_OP_SCATTER_ADD, true); }
static int l_index_add(lua_State *L) { return accumulate(L, DLE_OP_INDEX_ADD, false); }
static int l_index_add_(lua_State *L) { return accumulate(L, DLE_OP_INDEX_ADD, true); }

/* ---------------------------------------------------------------- scatter, scatter_reduce */

static const char *const reductions[] = {"sum", "prod", "mean", "amax", "amin", NULL};

/* src at arg 4: a tensor, or a number filled into index's shape in self's dtype (kept on the
 * stack). */
static dle_tensor *scatter_src(lua_State *L, const char *fn, dle_tensor *self, dle_tensor *index) {
  dle_tensor *src = dle_lua_opt(L, 4);
  if (src) return src;
  if (lua_type(L, 4) != LUA_TNUMBER && !lua_isboolean(L, 4))
    luaL_error(L, "%s: src must be a tensor or a number (value), got %s", fn, luaL_typename(L, 4));
  double v = check_value(L, 4, fn);
  DLE_LUA_TRY(L, dle_full(&src, index->ndim, index->sizes, v, self->dtype));
  dle_lua_push(L, src);
  lua_replace(L, 4);
  return src;
}

/* The arguments scatter and scatter_reduce (and their in-place forms) begin with: self, the dim d
 * and the index; r is the result (self when in place). */
typedef struct {
  dle_tensor *self, *r, *index;
  int d;
} scatter_head;

static scatter_head check_scatter_head(lua_State *L, const char *fn, bool inplace) {
  scatter_head h;
  h.self = dle_lua_check(L, 1);
  h.r = inplace ? h.self : NULL;
  h.d = dle_lua_dim(L, 2, fn);
  h.index = check_index(L, 3, fn, false);
  return h;
}

/* scatter(self, d, index, src_or_value, {reduce = "add" | "multiply"}) and scatter_ */
static int scatter_impl(lua_State *L, bool inplace) {
  static const char *const known[] = {"reduce", NULL};
  const char *fn = inplace ? "scatter_" : "scatter";
  scatter_head h = check_scatter_head(L, fn, inplace);
  dle_tensor *src = scatter_src(L, fn, h.self, h.index);
  int opts = dle_lua_opts_at(L, 5, fn, known);
  int reduce = 0;
  if (opts && lua_getfield(L, opts, "reduce") != LUA_TNIL) {
    static const char *const modes[] = {"add", "multiply", NULL};
    const char *m = lua_tostring(L, -1);
    for (int i = 0; modes[i] && m; i++)
      if (strcmp(m, modes[i]) == 0) reduce = i == 0 ? DLE_SCATTER_SUM : DLE_SCATTER_PROD;
    if (!reduce)
      return luaL_error(L, "%s: reduce must be \"add\" or \"multiply\", got %s", fn,
                        m ? m : luaL_typename(L, -1));
  }
  if (reduce)
    DLE_LUA_TRY(L,
                dle_scatter_reduce(&h.r, h.self, h.d, h.index, src, reduce, true, LUA_INDEX_BASE));
  else
    DLE_LUA_TRY(L, dle_scatter(&h.r, h.self, h.d, h.index, src, LUA_INDEX_BASE));
  return dle_lua_push_result(L, h.r, inplace);
}
static int l_scatter(lua_State *L) { return scatter_impl(L, false); }
static int l_scatter_(lua_State *L) { return scatter_impl(L, true); }

/* scatter_reduce(self, d, index, src, reduce, {include_self = true}) and scatter_reduce_ */
static int scatter_reduce_impl(lua_State *L, bool inplace) {
  static const char *const known[] = {"include_self", NULL};
  const char *fn = inplace ? "scatter_reduce_" : "scatter_reduce";
  scatter_head h = check_scatter_head(L, fn, inplace);
  dle_tensor *src = dle_lua_opt(L, 4);
  if (!src) return luaL_error(L, "%s: src must be a tensor, got %s", fn, luaL_typename(L, 4));
  const char *m = lua_type(L, 5) == LUA_TSTRING ? lua_tostring(L, 5) : NULL;
  int reduce = 0;
  for (int i = 0; reductions[i] && m; i++)
    if (strcmp(m, reductions[i]) == 0) reduce = DLE_SCATTER_SUM + i;
  if (!reduce)
    return luaL_error(L,
                      "%s: reduce must be one of \"sum\", \"prod\", \"mean\", \"amax\", "
                      "\"amin\", got %s",
                      fn, m ? m : luaL_typename(L, 5));
  int opts = dle_lua_opts_at(L, 6, fn, known);
  bool include_self = true;
  if (opts && lua_getfield(L, opts, "include_self") != LUA_TNIL) {
    if (!lua_isboolean(L, -1))
      return luaL_error(L, "%s: option 'include_self' must be a boolean, got %s", fn,
                        luaL_typename(L, -1));
    include_self = lua_toboolean(L, -1);
  }
  DLE_LUA_TRY(
      L, dle_scatter_reduce(&h.r, h.self, h.d, h.index, src, reduce, include_self, LUA_INDEX_BASE));
  return dle_lua_push_result(L, h.r, inplace);
}
static int l_scatter_reduce(lua_State *L) { return scatter_reduce_impl(L, false); }
static int l_scatter_reduce_(lua_State *L) { return scatter_reduce_impl(L, true); }

/* ---------------------------------------------------------------- masks and triangles */

static int masked_fill_impl(lua_State *L, bool inplace) {
  const char *fn = inplace ? "masked_fill_" : "masked_fill";
  dle_tensor *t = dle_lua_check(L, 1), *mask = dle_lua_opt(L, 2);
  if (!mask)
    return luaL_error(L, "%s: mask must be a bool tensor, got %s", fn, luaL_typename(L, 2));
  double v = check_value(L, 3, fn);
  dle_tensor *r = inplace ? t : NULL;
  DLE_LUA_TRY(L, dle_masked_fill(&r, t, mask, v));
  return dle_lua_push_result(L, r, inplace);
}
static int l_masked_fill(lua_State *L) { return masked_fill_impl(L, false); }
static int l_masked_fill_(lua_State *L) { return masked_fill_impl(L, true); }

static int triangle(lua_State *L, dle_op op, bool inplace) {
  const char *fn = op == DLE_OP_TRIL ? "tril" : "triu";
  dle_tensor *t = dle_lua_check(L, 1), *r = inplace ? t : NULL;
  int64_t k = lua_isnoneornil(L, 2) ? 0 : dle_lua_check_int(L, 2, fn, "diagonal k");
  DLE_LUA_TRY(L, op == DLE_OP_TRIL ? dle_tril(&r, t, k) : dle_triu(&r, t, k));
  return dle_lua_push_result(L, r, inplace);
}
static int l_tril(lua_State *L) { return triangle(L, DLE_OP_TRIL, false); }
static int l_tril_(lua_State *L) { return triangle(L, DLE_OP_TRIL, true); }
static int l_triu(lua_State *L) { return triangle(L, DLE_OP_TRIU, false); }
static int l_triu_(lua_State *L) { return triangle(L, DLE_OP_TRIU, true); }

/* one_hot(classes, n): classes are 1-based; n omitted means the largest class. */
static int l_one_hot(lua_State *L) {
  dle_tensor *classes = dle_lua_check(L, 1), *r = NULL;
  int64_t n = -1;
  if (!lua_isnoneornil(L, 2)) {
    n = dle_lua_check_int(L, 2, "one_hot", "number of classes");
    if (n < 0)
      return luaL_error(L, "one_hot: number of classes must not be negative, got %I",
                        (LUAI_UACINT)n);
  }
  DLE_LUA_TRY(L, dle_one_hot(&r, classes, n, LUA_INDEX_BASE));
  dle_lua_push(L, r);
  return 1;
}

void dle_lua_open_index(lua_State *L, int module, int methods) {
  // clang-format off
  static const luaL_Reg module_only[] = {
      {"cat", l_cat}, {"concat", l_cat}, {"stack", l_stack}, {NULL, NULL}};
  static const luaL_Reg both[] = {
      {"split", l_split}, {"chunk", l_chunk}, {"gather", l_gather}, {"scatter_add", l_scatter_add},
      {"index_select", l_index_select}, {"index_add", l_index_add}, {"masked_fill", l_masked_fill},
      {"tril", l_tril}, {"triu", l_triu}, {"one_hot", l_one_hot}, {"scatter", l_scatter},
      {"scatter_reduce", l_scatter_reduce}, {NULL, NULL}};
  static const luaL_Reg methods_only[] = {
      {"scatter_add_", l_scatter_add_}, {"index_add_", l_index_add_},
      {"masked_fill_", l_masked_fill_}, {"tril_", l_tril_}, {"triu_", l_triu_},
      {"scatter_", l_scatter_}, {"scatter_reduce_", l_scatter_reduce_}, {NULL, NULL}};
  // clang-format on
  dle_lua_register(L, module, methods, module_only, both, methods_only);
}
