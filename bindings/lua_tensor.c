/* lua_tensor.c — tensor creation, metadata, views and copies for Lua. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/dle.h"
#include "lua_util.h"

/* ---------------------------------------------------------------- creation */

/* zeros/ones/empty(sizes..., opts) share this shape: sizes then an optional options table. */
static int create_filled(lua_State *L, const char *fn, double value, bool fill) {
  int64_t sizes[DLE_MAX_DIMS];
  dle_lua_opts o;
  int n = dle_lua_sizes_opts(L, 1, sizes, &o, fn);
  dle_tensor *t = NULL;
  if (fill)
    DLE_LUA_TRY(L, dle_full(&t, n, sizes, value, o.dtype));
  else
    DLE_LUA_TRY(L, dle_tensor_empty(&t, n, sizes, o.dtype, DLE_DEVICE_CPU));
  dle_lua_push_created(L, t, &o);
  return 1;
}

static int l_zeros(lua_State *L) { return create_filled(L, "zeros", 0, true); }
static int l_ones(lua_State *L) { return create_filled(L, "ones", 1, true); }
static int l_empty(lua_State *L) { return create_filled(L, "empty", 0, false); }

/* full(sizes, value, opts): sizes is a table (or a single number for 1-D). */
static int l_full(lua_State *L) {
  int64_t sizes[DLE_MAX_DIMS];
  int next, n;
  if (lua_type(L, 1) == LUA_TNUMBER) { /* full(n, value): only the first number is a size */
    if (!lua_isinteger(L, 1))
      return luaL_error(L, "full: sizes must be integers, got %s", lua_tostring(L, 1));
    sizes[0] = lua_tointeger(L, 1);
    if (sizes[0] < 0) return luaL_error(L, "full: negative size in {%I}", (LUAI_UACINT)sizes[0]);
    n = 1, next = 2;
  } else {
    luaL_argexpected(L, lua_istable(L, 1), 1, "table of sizes");
    n = dle_lua_sizes(L, 1, sizes, &next, "full", 0);
  }
  if (lua_type(L, next) != LUA_TNUMBER && !lua_isboolean(L, next))
    return luaL_error(L, "full: fill value must be a number, got %s", luaL_typename(L, next));
  double v = lua_isboolean(L, next) ? lua_toboolean(L, next) : lua_tonumber(L, next);
  dle_lua_opts o;
  dle_lua_parse_opts(L, next + 1, &o, "full");
  if (!o.has_dtype && lua_isboolean(L, next)) o.dtype = DLE_BOOL;
  dle_tensor *t = NULL;
  DLE_LUA_TRY(L, dle_full(&t, n, sizes, v, o.dtype));
  dle_lua_push_created(L, t, &o);
  return 1;
}

/* arange(stop) / arange(start, stop[, step]) [, opts]: half-open, like Python's range. */
static int l_arange(lua_State *L) {
  int nnum = 0;
  double v[3];
  while (nnum < 3 && lua_type(L, nnum + 1) == LUA_TNUMBER)
    v[nnum] = lua_tonumber(L, nnum + 1), nnum++;
  if (nnum == 0)
    return luaL_error(L, "arange: expected arange(stop) or arange(start, stop[, step])");
  double start = nnum == 1 ? 0 : v[0], stop = nnum == 1 ? v[0] : v[1], step = nnum == 3 ? v[2] : 1;
  dle_lua_opts o;
  dle_lua_parse_opts(L, nnum + 1, &o, "arange");
  dle_tensor *t = NULL;
  DLE_LUA_TRY(L, dle_arange(&t, start, stop, step, o.dtype));
  dle_lua_push_created(L, t, &o);
  return 1;
}

static int l_linspace(lua_State *L) {
  double a = luaL_checknumber(L, 1), b = luaL_checknumber(L, 2);
  lua_Integer n = luaL_checkinteger(L, 3);
  dle_lua_opts o;
  dle_lua_parse_opts(L, 4, &o, "linspace");
  dle_tensor *t = NULL;
  DLE_LUA_TRY(L, dle_linspace(&t, a, b, n, o.dtype));
  dle_lua_push_created(L, t, &o);
  return 1;
}

static int l_eye(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  lua_Integer m = lua_type(L, 2) == LUA_TNUMBER ? luaL_checkinteger(L, 2) : n;
  if (n >= 0 && m >= 0) dle_lua_check_new_sizes(L, (int64_t[]){n, m}, 2, "eye");
  dle_lua_opts o;
  dle_lua_parse_opts(L, lua_type(L, 2) == LUA_TNUMBER ? 3 : 2, &o, "eye");
  dle_tensor *t = NULL;
  DLE_LUA_TRY(L, dle_eye(&t, n, m, o.dtype));
  dle_lua_push_created(L, t, &o);
  return 1;
}

/* ---- dle.tensor(nested table) ---- */

typedef struct {
  int ndim;
  int64_t sizes[DLE_MAX_DIMS];
  bool any_bool, any_number, any_float;
} nested_info;

/* Shape from the first element at each depth, checked everywhere by fill_nested. */
static void nested_shape(lua_State *L, int idx, nested_info *info) {
  lua_pushvalue(L, idx);
  while (lua_istable(L, -1) && !dle_lua_opt(L, -1)) {
    if (info->ndim == DLE_MAX_DIMS)
      luaL_error(L, "tensor: nested table deeper than %d dims", DLE_MAX_DIMS);
    int64_t n = (int64_t)lua_rawlen(L, -1);
    info->sizes[info->ndim++] = n;
    if (n == 0) break;
    lua_rawgeti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
}

/* Writes the leaves of the table at the stack top into buf (doubles, or int64 when exact ints
 * are wanted), checking that every sub-table has the length of its depth. */
static void fill_nested(lua_State *L, const nested_info *info, int depth, int64_t *pos, void *buf,
                        bool as_int, int64_t *path) {
  int64_t n = info->sizes[depth];
  if (!lua_istable(L, -1) || dle_lua_opt(L, -1) || (int64_t)lua_rawlen(L, -1) != n) {
    char where[128] = "";
    size_t used = 0;
    for (int d = 0; d < depth && used < sizeof where; d++)
      used += (size_t)snprintf(where + used, sizeof where - used, "[%lld]", (long long)path[d] + 1);
    if (lua_istable(L, -1) && !dle_lua_opt(L, -1))
      luaL_error(L, "tensor: ragged nested table: element%s has %d entries, expected %d", where,
                 (int)lua_rawlen(L, -1), (int)n);
    luaL_error(L, "tensor: ragged nested table: element%s is a %s, expected a table of %d entries",
               where, luaL_typename(L, -1), (int)n);
  }
  for (int64_t i = 0; i < n; i++) {
    path[depth] = i;
    lua_rawgeti(L, -1, (lua_Integer)i + 1);
    if (depth + 1 < info->ndim) {
      fill_nested(L, info, depth + 1, pos, buf, as_int, path);
    } else {
      int t = lua_type(L, -1);
      if (t != LUA_TNUMBER && t != LUA_TBOOLEAN) {
        char where[128] = "";
        size_t used = 0;
        for (int d = 0; d <= depth && used < sizeof where; d++)
          used +=
              (size_t)snprintf(where + used, sizeof where - used, "[%lld]", (long long)path[d] + 1);
        luaL_error(L, "tensor: element%s is a %s, expected a number or boolean", where,
                   luaL_typename(L, -1));
      }
      if (as_int)
        ((int64_t *)buf)[*pos] =
            t == LUA_TBOOLEAN
                ? lua_toboolean(L, -1)
                : (lua_isinteger(L, -1) ? lua_tointeger(L, -1) : (int64_t)lua_tonumber(L, -1));
      else
        ((double *)buf)[*pos] = t == LUA_TBOOLEAN ? lua_toboolean(L, -1) : lua_tonumber(L, -1);
      (*pos)++;
    }
    lua_pop(L, 1);
  }
}

static void free_buffer(void *ctx, void *data, size_t nbytes) {
  (void)ctx, (void)nbytes;
  free(data);
}

static int l_tensor(lua_State *L) {
  dle_lua_opts o;
  dle_lua_parse_opts(L, 2, &o, "tensor");
  dle_tensor *src = dle_lua_opt(L, 1), *t = NULL;
  if (src) { /* dle.tensor(t): a copy, converted when a dtype is given */
    if (o.has_dtype) DLE_LUA_TRY(L, dle_to_dtype(&t, src, o.dtype));
    if (t == src || !t) {
      dle_tensor_release(t);
      t = NULL;
      DLE_LUA_TRY(L, dle_clone(&t, src));
    }
    dle_lua_push_created(L, t, &o);
    return 1;
  }
  int type = lua_type(L, 1);
  if (type == LUA_TNUMBER || type == LUA_TBOOLEAN) {
    dle_dtype dt = o.has_dtype ? o.dtype : (type == LUA_TBOOLEAN ? DLE_BOOL : DLE_DEFAULT_FLOAT);
    double v = type == LUA_TBOOLEAN ? lua_toboolean(L, 1) : lua_tonumber(L, 1);
    DLE_LUA_TRY(L, dle_full(&t, 0, NULL, v, dt));
    if (lua_isinteger(L, 1) && dt == DLE_I64) *(int64_t *)dle_tensor_data(t) = lua_tointeger(L, 1);
    dle_lua_push_created(L, t, &o);
    return 1;
  }
  if (type != LUA_TTABLE)
    return luaL_error(L, "tensor: expected a number, boolean, nested table or tensor, got %s",
                      luaL_typename(L, 1));
  nested_info info = {0};
  nested_shape(L, 1, &info);
  /* leaf kinds decide the default dtype: booleans give bool, numbers float32 */
  int64_t numel = 1;
  for (int d = 0; d < info.ndim; d++) numel *= info.sizes[d];
  dle_dtype dt = o.dtype;
  if (!o.has_dtype && numel > 0) {
    lua_pushvalue(L, 1);
    for (int d = 0; d < info.ndim; d++) {
      lua_rawgeti(L, -1, 1);
      lua_remove(L, -2);
    }
    if (lua_isboolean(L, -1)) dt = DLE_BOOL;
    lua_pop(L, 1);
  }
  bool as_int = dt == DLE_I64 || dt == DLE_I32 || dt == DLE_U64; /* exact beyond 2^53 */
  void *buf = malloc((size_t)(numel ? numel : 1) * 8);
  if (!buf) return luaL_error(L, "tensor: out of memory");
  /* the buffer is owned by a tensor right away, so a Lua error below cannot leak it */
  dle_tensor *raw = NULL;
  if (dle_tensor_from_memory(&raw, buf, (size_t)numel * 8, info.ndim, info.sizes, NULL,
                             as_int ? DLE_I64 : DLE_F64, free_buffer, NULL) != DLE_OK) {
    free(buf);
    return dle_lua_fail(L);
  }
  dle_lua_push(L, raw); /* keeps raw alive (and freed) whatever happens */
  int64_t pos = 0, path[DLE_MAX_DIMS];
  lua_pushvalue(L, 1);
  if (info.ndim > 0) fill_nested(L, &info, 0, &pos, buf, as_int, path);
  lua_pop(L, 1);
  DLE_LUA_TRY(L, dle_to_dtype(&t, raw, dt));
  if (t == raw) { /* same dtype: copy out of the temporary buffer */
    dle_tensor_release(t);
    t = NULL;
    DLE_LUA_TRY(L, dle_clone(&t, raw));
  }
  dle_lua_push_created(L, t, &o);
  return 1;
}

/* zeros_like(t, opts), ones_like, empty_like, full_like(t, v, opts): same shape, dtype unless given. */
static int like(lua_State *L, const char *fn, int kind) {
  dle_tensor *src = dle_lua_check(L, 1);
  int opt = kind == 3 ? 3 : 2;
  double v = kind == 1 ? 1 : 0;
  if (kind == 3) v = luaL_checknumber(L, 2);
  dle_lua_opts o;
  dle_lua_parse_opts(L, opt, &o, fn);
  if (!o.has_dtype) o.dtype = src->dtype;
  dle_tensor *t = NULL;
  if (kind == 2)
    DLE_LUA_TRY(L, dle_tensor_empty(&t, src->ndim, src->sizes, o.dtype, DLE_DEVICE_CPU));
  else
    DLE_LUA_TRY(L, dle_full(&t, src->ndim, src->sizes, v, o.dtype));
  bool has_device = lua_istable(L, opt) && lua_getfield(L, opt, "device") != LUA_TNIL;
  if (lua_istable(L, opt)) lua_pop(L, 1);
  if (!has_device) o.device = dle_tensor_device(src);
  dle_lua_push_created(L, t, &o);
  return 1;
}
static int l_zeros_like(lua_State *L) { return like(L, "zeros_like", 0); }
static int l_ones_like(lua_State *L) { return like(L, "ones_like", 1); }
static int l_empty_like(lua_State *L) { return like(L, "empty_like", 2); }
static int l_full_like(lua_State *L) { return like(L, "full_like", 3); }

/* ---------------------------------------------------------------- metadata */

static void push_int64s(lua_State *L, int n, const int64_t *v) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushinteger(L, v[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

static int m_shape(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  push_int64s(L, t->ndim, t->sizes);
  return 1;
}

static int m_size(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  if (lua_isnoneornil(L, 2)) return m_shape(L);
  int d = dle_lua_dim(L, 2, "size"), d0;
  DLE_LUA_TRY(L, dle_wrap_dim("size", d, t->ndim, 0, &d0));
  lua_pushinteger(L, t->sizes[d0]);
  return 1;
}

static int m_stride(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  if (lua_isnoneornil(L, 2)) {
    push_int64s(L, t->ndim, t->strides);
    return 1;
  }
  int d = dle_lua_dim(L, 2, "stride"), d0;
  DLE_LUA_TRY(L, dle_wrap_dim("stride", d, t->ndim, 0, &d0));
  lua_pushinteger(L, t->strides[d0]);
  return 1;
}

static int m_dim(lua_State *L) {
  lua_pushinteger(L, dle_lua_check(L, 1)->ndim);
  return 1;
}

static int m_numel(lua_State *L) {
  lua_pushinteger(L, dle_tensor_numel(dle_lua_check(L, 1)));
  return 1;
}

static int m_storage_offset(lua_State *L) {
  lua_pushinteger(L, dle_lua_check(L, 1)->offset);
  return 1;
}

static int m_dtype(lua_State *L) {
  lua_pushstring(L, dle_dtype_name(dle_lua_check(L, 1)->dtype));
  return 1;
}

static int m_device(lua_State *L) {
  char buf[32];
  dle_device d = dle_tensor_device(dle_lua_check(L, 1));
  lua_pushstring(L, d.type == DLE_CPU ? "cpu" : dle_device_str(buf, sizeof buf, d));
  return 1;
}

static int m_is_contiguous(lua_State *L) {
  lua_pushboolean(L, dle_tensor_is_contiguous(dle_lua_check(L, 1)));
  return 1;
}

static int m_is_floating_point(lua_State *L) {
  lua_pushboolean(L, dle_dtype_is_float(dle_lua_check(L, 1)->dtype));
  return 1;
}

static int m_element_size(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)dle_dtype_size(dle_lua_check(L, 1)->dtype));
  return 1;
}

static int l_same_storage(lua_State *L) {
  lua_pushboolean(L, dle_same_storage(dle_lua_check(L, 1), dle_lua_check(L, 2)));
  return 1;
}

/* Storage version counter: bumped by every in-place write (autograd uses it). */
static int m_version(lua_State *L) {
  lua_pushinteger(L, dle_lua_check(L, 1)->storage->version);
  return 1;
}

/** dle.core._raw_buffer(t, fn, writable, on_device) -> data pointer (light userdata), element count,
 * dtype name, device index of a contiguous tensor, for a module that cannot call the engine
 * (dle.dist_native, dle.dist_nccl, loaded apart from this one): errors name fn. The pointer is
 * valid while the caller keeps t referenced. writable: the caller will write through it, so the
 * engine's in-place rules apply and the version is bumped (autograd then refuses to use a stale
 * saved copy). on_device: a CUDA tensor's device memory is accepted (else CPU tensors only). */
static int l_raw_buffer(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  const char *fn = luaL_optstring(L, 2, "raw_buffer");
  bool writable = lua_toboolean(L, 3);
  bool on_device = lua_toboolean(L, 4);
  char shape[128], strides[128];
  dle_device d = dle_tensor_device(t);
  if (d.type != DLE_CPU && !on_device) {
    char buf[32];
    return luaL_error(L, "%s: only CPU tensors are supported, got a tensor on %s", fn,
                      dle_device_str(buf, sizeof buf, d));
  }
  if (!dle_tensor_is_contiguous(t))
    return luaL_error(L, "%s: the tensor must be contiguous (shape %s, strides %s)", fn,
                      dle_shape_str(shape, sizeof shape, t->ndim, t->sizes),
                      dle_shape_str(strides, sizeof strides, t->ndim, t->strides));
  if (writable && t->grad_fn)
    return luaL_error(L,
                      "%s: cannot write in place into a tensor that is part of an autograd "
                      "graph (shape %s); use a detached tensor",
                      fn, dle_shape_str(shape, sizeof shape, t->ndim, t->sizes));
  if (writable && t->requires_grad && dle_grad_enabled())
    return luaL_error(L,
                      "%s: a leaf tensor that requires grad (shape %s) cannot be written in "
                      "place; do it under no_grad or on a detached tensor",
                      fn, dle_shape_str(shape, sizeof shape, t->ndim, t->sizes));
  if (writable) dle_tensor_bump_version(t);
  dle_trace_note_unsafe("%s: a tensor's memory was handed out of the engine", fn);
  lua_pushlightuserdata(L, dle_tensor_data(t));
  lua_pushinteger(L, dle_tensor_numel(t));
  lua_pushstring(L, dle_dtype_name(t->dtype));
  lua_pushinteger(L, d.index);
  return 4;
}

/** dle.core._dtype_names() -> every dtype's name, in the engine's order. */
static int l_dtype_names(lua_State *L) {
  lua_createtable(L, DLE_NUM_DTYPES, 0);
  for (int i = 0; i < DLE_NUM_DTYPES; i++) {
    lua_pushstring(L, dle_dtype_name((dle_dtype)i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* ---------------------------------------------------------------- views */

/* t:view(sizes...) / t:expand(sizes...): sizes given from argument 2 on (-1 allowed), or another
 * tensor's (the view_as / expand_as forms). */
static int view_or_expand(lua_State *L, bool expand) {
  const char *fn = expand ? "expand" : "view";
  dle_tensor *t = dle_lua_check(L, 1), *r = NULL, *like = dle_lua_opt(L, 2);
  int64_t sizes[DLE_MAX_DIMS];
  int next, n = like ? like->ndim : dle_lua_sizes(L, 2, sizes, &next, fn, 1);
  if (like) memcpy(sizes, like->sizes, sizeof like->sizes);
  return dle_lua_push_new(L, expand ? dle_expand(&r, t, n, sizes) : dle_view(&r, t, n, sizes), &r);
}
static int m_view(lua_State *L) { return view_or_expand(L, false); }
static int m_expand(lua_State *L) { return view_or_expand(L, true); }

static int m_reshape(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1), *r = NULL;
  int64_t sizes[DLE_MAX_DIMS];
  int next, n = dle_lua_sizes(L, 2, sizes, &next, "reshape", 1);
  return dle_lua_push_new(L, dle_reshape(&r, t, n, sizes), &r);
}

static int m_transpose(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1), *r = NULL;
  int d1 = dle_lua_dim(L, 2, "transpose"), d2 = dle_lua_dim(L, 3, "transpose");
  return dle_lua_push_new(L, dle_transpose(&r, t, d1, d2), &r);
}

static int m_t(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1), *r = NULL;
  if (t->ndim > 2)
    return luaL_error(L, "t: expects a tensor with <= 2 dims, got shape %s",
                      dle_tensor_shape_str((char[128]){0}, 128, t));
  return dle_lua_push_new(L, t->ndim < 2 ? dle_transpose(&r, t, 0, 0) : dle_transpose(&r, t, 0, 1),
                          &r);
}

static int m_permute(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1), *r = NULL;
  int64_t dims[DLE_MAX_DIMS];
  int next, n = dle_lua_sizes(L, 2, dims, &next, "permute", 2);
  if (n != t->ndim)
    return luaL_error(L, "permute: %d dims given for a tensor of shape %s", n,
                      dle_tensor_shape_str((char[128]){0}, 128, t));
  int perm[DLE_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    if (dims[i] == 0) return luaL_error(L, "permute: dim 0 is invalid (dims are 1-based)");
    perm[i] = dims[i] > 0 ? (int)dims[i] - 1 : (int)dims[i];
  }
  return dle_lua_push_new(L, dle_permute(&r, t, perm), &r);
}

/* narrow(dim, start, length) / select(dim, index): the position is 1-based (negative counts from
 * the end), and stays so for the engine (index_base 1), whose messages then say it as given. */
static int narrow_or_select(lua_State *L, bool narrow) {
  const char *fn = narrow ? "narrow" : "select";
  dle_tensor *t = dle_lua_check(L, 1), *r = NULL;
  int d = dle_lua_dim(L, 2, fn);
  lua_Integer pos = luaL_checkinteger(L, 3), len = narrow ? luaL_checkinteger(L, 4) : 0;
  if (pos == 0)
    return luaL_error(L, "%s: %s 0 is invalid (indices are 1-based)", fn,
                      narrow ? "start" : "index");
  dle_attrs a = {
      .nints = narrow ? 3 : 2, .ints = {d, pos > 0 ? pos - 1 : pos, len}, .index_base = 1};
  return dle_lua_push_new(L, dle_op_call(narrow ? DLE_OP_NARROW : DLE_OP_SELECT, &r, &t, 1, &a),
                          &r);
}
static int m_narrow(lua_State *L) { return narrow_or_select(L, true); }
static int m_select(lua_State *L) { return narrow_or_select(L, false); }

static int m_squeeze(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1), *r = NULL;
  int d = dle_lua_optdim(L, 2, "squeeze", DLE_ALL_DIMS);
  return dle_lua_push_new(L, dle_squeeze(&r, t, d), &r);
}

static int m_unsqueeze(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1), *r = NULL;
  int d = dle_lua_dim(L, 2, "unsqueeze");
  return dle_lua_push_new(L, dle_unsqueeze(&r, t, d), &r);
}

static int m_flatten(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1), *r = NULL;
  int d1 = dle_lua_optdim(L, 2, "flatten", 0), d2 = dle_lua_optdim(L, 3, "flatten", -1);
  return dle_lua_push_new(L, dle_flatten(&r, t, d1, d2), &r);
}

static int m_contiguous(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1), *r = NULL;
  bool already =
      dle_tensor_is_contiguous(t); /* then the same Lua object, as PyTorch returns self */
  if (!already) DLE_LUA_TRY(L, dle_contiguous(&r, t));
  return dle_lua_push_result(L, r, already);
}

/* ---------------------------------------------------------------- copies and conversion */

/* Returns r, or the argument itself (the same Lua object, as PyTorch returns self) when a
 * conversion had nothing to do and gave back t. */
static int push_or_self(lua_State *L, dle_tensor *t, dle_tensor *r) {
  if (r == t) {
    dle_tensor_release(r);
    lua_settop(L, 1);
    return 1;
  }
  dle_lua_push(L, r);
  return 1;
}

static int m_clone(lua_State *L) { return dle_lua_apply(L, dle_clone); }

static int m_copy_(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1), *src = dle_lua_check(L, 2);
  DLE_LUA_TRY(L, dle_copy_(t, src));
  lua_settop(L, 1);
  return 1;
}

static int m_fill_(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  double v;
  if (lua_isboolean(L, 2))
    v = lua_toboolean(L, 2);
  else if (lua_type(L, 2) == LUA_TNUMBER)
    v = lua_tonumber(L, 2);
  else
    return luaL_error(L, "fill_: value must be a number or boolean, got %s", luaL_typename(L, 2));
  DLE_LUA_TRY(L, dle_fill_(t, v));
  lua_settop(L, 1);
  return 1;
}

static int m_zero_(lua_State *L) {
  DLE_LUA_TRY(L, dle_fill_(dle_lua_check(L, 1), 0));
  lua_settop(L, 1);
  return 1;
}

/* A complex element is the pair {re, im} (a new table), as item() and totable() document. */
static void push_element(lua_State *L, const dle_tensor *t, const int64_t *idx) {
  if (dle_dtype_is_complex(t->dtype)) {
    double re, im;
    dle_tensor_get_complex(t, idx, &re, &im);
    lua_createtable(L, 2, 0);
    lua_pushnumber(L, re);
    lua_rawseti(L, -2, 1);
    lua_pushnumber(L, im);
    lua_rawseti(L, -2, 2);
    return;
  }
  double v = dle_tensor_get(t, idx);
  if (t->dtype == DLE_BOOL)
    lua_pushboolean(L, v != 0);
  else if (t->dtype == DLE_I64 || t->dtype == DLE_U64) { /* exact, not through a double */
    int64_t off = t->offset;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
    int64_t i = ((const int64_t *)t->storage->data)[off];
    if (t->dtype == DLE_U64 && i < 0) /* above Lua's largest integer: a float of that value */
      lua_pushnumber(L, (double)(uint64_t)i);
    else
      lua_pushinteger(L, i);
  } else if (!dle_dtype_is_float(t->dtype))
    lua_pushinteger(L, (lua_Integer)v);
  else
    lua_pushnumber(L, v);
}

static dle_tensor *on_cpu(lua_State *L, dle_tensor *t) {
  if (dle_tensor_device(t).type == DLE_CPU) {
    dle_tensor_retain(t);
    return t;
  }
  dle_tensor *c = NULL;
  DLE_LUA_TRY(L, dle_to_device(&c, t, DLE_DEVICE_CPU));
  return c;
}

static int m_item(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  dle_trace_note_unsafe("item: a tensor's value was read into Lua");
  if (dle_tensor_numel(t) != 1)
    return luaL_error(L, "item: only a one-element tensor converts to a number, got shape %s",
                      dle_tensor_shape_str((char[128]){0}, 128, t));
  dle_tensor *c = on_cpu(L, t);
  int64_t idx[DLE_MAX_DIMS] = {0};
  push_element(L, c, idx);
  dle_tensor_release(c);
  return 1;
}

static void totable_rec(lua_State *L, const dle_tensor *t, int d, int64_t *idx) {
  if (d == t->ndim) {
    push_element(L, t, idx);
    return;
  }
  lua_createtable(L, (int)t->sizes[d], 0);
  for (int64_t i = 0; i < t->sizes[d]; i++) {
    idx[d] = i;
    totable_rec(L, t, d + 1, idx);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

static int m_totable(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  dle_trace_note_unsafe("totable: a tensor's values were read into Lua");
  dle_tensor *c = on_cpu(L, t);
  int64_t idx[DLE_MAX_DIMS] = {0};
  lua_checkstack(L, DLE_MAX_DIMS + 4);
  totable_rec(L, c, 0, idx);
  dle_tensor_release(c);
  return 1;
}

/* to(dtype_or_device) */
static int m_to(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1), *r = NULL;
  if (lua_gettop(L) != 2)
    return luaL_error(L, "to: takes one dtype or device name, got %d arguments", lua_gettop(L) - 1);
  const char *s = luaL_checkstring(L, 2);
  dle_dtype dt;
  dle_device dev;
  if (dle_dtype_parse(s, &dt) == DLE_OK) {
    DLE_LUA_TRY(L, dle_to_dtype(&r, t, dt));
  } else if (dle_device_parse(s, &dev) == DLE_OK) {
    DLE_LUA_TRY(L, dle_to_device(&r, t, dev));
  } else {
    return luaL_error(L, "to: '%s' is neither a dtype nor a device", s);
  }
  return push_or_self(L, t, r);
}

/* t:float(), t:long() ... (see conversions below): upvalue 1 is the dtype. */
static int m_convert(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1), *r = NULL;
  DLE_LUA_TRY(L, dle_to_dtype(&r, t, (dle_dtype)lua_tointeger(L, lua_upvalueindex(1))));
  return push_or_self(L, t, r);
}

static int move(lua_State *L, dle_device dev) {
  dle_tensor *t = dle_lua_check(L, 1), *r = NULL;
  DLE_LUA_TRY(L, dle_to_device(&r, t, dev));
  return push_or_self(L, t, r);
}
static int m_cpu(lua_State *L) { return move(L, DLE_DEVICE_CPU); }
static int m_cuda(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1), *r = NULL;
  lua_Integer i = luaL_optinteger(L, 2, 0);
  if (i < 0 || i > 1023) return luaL_error(L, "cuda: device index %I out of range", (LUAI_UACINT)i);
  if (dle_to_device(&r, t, (dle_device){DLE_CUDA, (int)i}) != DLE_OK)
    return luaL_error(L, "cuda: %s", dle_last_error());
  return push_or_self(L, t, r);
}

void dle_lua_open_tensor(lua_State *L, int module, int methods) {
  // clang-format off
  static const luaL_Reg fns[] = {
      {"zeros", l_zeros}, {"ones", l_ones}, {"empty", l_empty}, {"full", l_full},
      {"arange", l_arange}, {"linspace", l_linspace}, {"eye", l_eye}, {"tensor", l_tensor},
      {"zeros_like", l_zeros_like}, {"ones_like", l_ones_like}, {"empty_like", l_empty_like},
      {"full_like", l_full_like}, {"same_storage", l_same_storage}, {"_raw_buffer", l_raw_buffer},
      {"_dtype_names", l_dtype_names},
      {NULL, NULL}};
  static const luaL_Reg meths[] = {
      {"shape", m_shape}, {"size", m_size}, {"stride", m_stride}, {"dim", m_dim},
      {"ndimension", m_dim}, {"numel", m_numel}, {"nelement", m_numel},
      {"storage_offset", m_storage_offset}, {"dtype", m_dtype}, {"device", m_device},
      {"is_contiguous", m_is_contiguous}, {"is_floating_point", m_is_floating_point},
      {"element_size", m_element_size}, {"_version", m_version}, {"view", m_view},
      {"view_as", m_view}, {"reshape", m_reshape}, {"transpose", m_transpose}, {"t", m_t},
      {"permute", m_permute}, {"narrow", m_narrow}, {"select", m_select}, {"expand", m_expand},
      {"expand_as", m_expand}, {"squeeze", m_squeeze}, {"unsqueeze", m_unsqueeze},
      {"flatten", m_flatten}, {"contiguous", m_contiguous}, {"clone", m_clone}, {"copy_", m_copy_},
      {"fill_", m_fill_}, {"zero_", m_zero_}, {"item", m_item}, {"totable", m_totable},
      {"to", m_to}, {"cpu", m_cpu}, {"cuda", m_cuda}, {NULL, NULL}};
  static const struct {
    const char *name;
    dle_dtype dtype;
  } conversions[] = {{"float", DLE_F32}, {"double", DLE_F64}, {"half", DLE_F16},
                     {"bfloat16", DLE_BF16}, {"long", DLE_I64}, {"int", DLE_I32},
                     {"byte", DLE_U8}, {"bool", DLE_BOOL}};
  // clang-format on
  /* module-level forms of the view functions: dle.transpose(t, 1, 2) etc. */
  static const luaL_Reg both[] = {{"reshape", m_reshape},     {"transpose", m_transpose},
                                  {"permute", m_permute},     {"narrow", m_narrow},
                                  {"select", m_select},       {"squeeze", m_squeeze},
                                  {"unsqueeze", m_unsqueeze}, {"flatten", m_flatten},
                                  {"clone", m_clone},         {NULL, NULL}};
  dle_lua_setfuncs(L, module, both);
  dle_lua_register(L, module, methods, fns, NULL, meths);
  for (size_t i = 0; i < sizeof conversions / sizeof conversions[0]; i++) {
    lua_pushinteger(L, conversions[i].dtype);
    lua_pushcclosure(L, m_convert, 1);
    lua_setfield(L, methods, conversions[i].name);
  }
}
