/* lua_core.c — the dle.core module: the tensor userdata type, its metatable, argument helpers,
 * and luaopen_dle_native, which assembles the per-family binding files. Lua code requires
 * "dle.core" (bindings/loader/), which loads this module after setting up OpenMP. */
#include <limits.h>
#include <string.h>

#include "lua_util.h"
#include "../engine/dle.h"

#define TENSOR_MT "dle.Tensor"
static const char metatable_key = 0; /* registry key of the metatable (faster than by name) */

/* ---------------------------------------------------------------- errors */

/* dle_lua_fail: lua_errors.c */

/* ---------------------------------------------------------------- memory pacing */

/* Tensors are small userdata holding big native buffers, so Lua's collector, which only sees the
 * userdata, would let garbage pile up. A full collection therefore runs whenever native memory has
 * grown by an allowance since the previous one: a quarter of what was live then, at least 64 MB
 * (Torch7 let it double; but every byte of garbage is a byte of fresh memory until the collector
 * returns it to the allocator's cache, and fresh memory costs its page faults: with a 200 MB data
 * set resident, doubling meant 400 MB of faults before the first block was reused). The threshold
 * also follows live memory down when tensors die without a collection (`<close>`, or a script's
 * own collectgarbage()), so one phase's big tensors do not set the pace of the next. */
#define GC_FLOOR ((size_t)64 << 20)
static size_t gc_threshold = GC_FLOOR;
static lua_Integer full_collections; /* run by dle (dle.core._gc_full_collections, for tests) */

static size_t gc_limit_above(size_t live) {
  return live + (live / 4 > GC_FLOOR ? live / 4 : GC_FLOOR);
}
/* Live bytes after the last full collection (or their low since): see keep_gc_generational. */
static size_t major_mark;

static void pace_gc(lua_State *L) {
  size_t now = dle_memory_allocated();
  if (now < gc_threshold) {
    size_t lower = gc_limit_above(now);
    if (lower < gc_threshold) gc_threshold = lower;
    return;
  }
  lua_gc(L, LUA_GCCOLLECT);
  full_collections++;
  gc_threshold = gc_limit_above(dle_memory_allocated());
  major_mark = dle_memory_allocated();
}

/* ---------------------------------------------------------------- collector mode */

/* Two things keep dead tensors cheap: a collector step every GC_MODE_CHECK new tensors or every
 * GC_STEP_BYTES of native growth, whichever comes first, and a check of the collector's mode
 * before each step.
 *
 * The step. Lua's own minor collections wait until the heap has grown by a fifth, and a tensor's
 * userdata is a few dozen bytes of it: beside a 9 MB heap, tens of thousands of dead tensors
 * waited and their headers were out of cache when freed (`c = a + b` on one element was several
 * times slower there than beside a 200 KB heap). Counting bytes too does the same for mid-size
 * tensors:
 * with only pace_gc's 64 MB allowance, a loop's dead results of 256 KB cycled through 64 MB, out
 * of every cache, before a collection gave their blocks back (a transposing copy of 256 x 256
 * floats ran about ten times faster with the step every 2 or 8 MB, and training steps gained a
 * little; figures in bench/RESULTS.md).
 *
 * The collector's mode. lua5.4 runs it in generational mode, which has a fallback: after a "bad"
 * major collection, one that frees less than half of what the heap grew by since the last one
 * (loading a package or building a model is exactly that), Lua makes a full collection each time
 * the heap doubles, and returns to generational mode only when a full collection marks at most
 * 1/8 more objects than the one before. Dead tensors keep it from ever returning: an object with
 * a finalizer is revived, and counted, by the collection that finds it dead. In that state
 * `c = a + b` and the tiny autograd graph were markedly slower. Asking
 * for generational mode leaves the fallback (at the cost of one full collection) and does nothing
 * in true generational mode. The answer says if the program runs the incremental collector
 * instead: dle then puts that mode back, takes no step, and asks far less often (each ask is then
 * a full collection). A stopped collector is not touched. */
#define GC_MODE_CHECK 512u
/* The step is asked for as an allocation of this many KB, which brings the collector's debt
 * above zero for any heap below 10 GB (a minor collection sets aside a fifth of the heap). Lua
 * then takes its own step: a minor collection, or the major one once the heap has doubled.
 * (A plain "step" with 0 KB always makes a minor collection and resets the debt, so Lua's own
 * steps, where majors are decided, never came: Lua garbage that had grown old piled up.) */
#define GC_STEP_KB                (INT_MAX / 1024)
#define GC_MODE_CHECK_INCREMENTAL (1024u * 1024u)
static unsigned gc_mode_countdown = 1; /* the first new tensor checks */

#define GC_STEP_BYTES ((size_t)4 << 20) /* well inside the L3 cache (2 and 8 MB measured alike) */
static size_t step_mark;         /* live native bytes after the last step (or their low since) */
static bool program_incremental; /* what the last mode check found */
/* native growth summed over the steps since the last full collection */
static size_t growth_since_major;

/* A program found running the incremental collector gets no byte steps until the count says
 * to check again: each check is a full collection then. Every other step checks the mode too,
 * which costs nothing in generational mode and leaves its fallback (a step taken in the fallback
 * would be a full collection). */
static void keep_gc_generational(lua_State *L) {
  size_t live = dle_memory_allocated();
  if (live < step_mark) step_mark = live;
  bool by_count = --gc_mode_countdown == 0, by_bytes = live - step_mark >= GC_STEP_BYTES;
  if (!by_count && (!by_bytes || program_incremental)) return;
  if (by_count) gc_mode_countdown = GC_MODE_CHECK;
  growth_since_major += live - step_mark;
  step_mark = live;
  if (!lua_gc(L, LUA_GCISRUNNING)) return;
  program_incremental = lua_gc(L, LUA_GCGEN, 0, 0) == LUA_GCINC;
  if (program_incremental) {
    lua_gc(L, LUA_GCINC, 0, 0, 0);
    gc_mode_countdown = GC_MODE_CHECK_INCREMENTAL;
    return;
  }
  lua_gc(L, LUA_GCSTEP, GC_STEP_KB);
  step_mark = dle_memory_allocated();
  /* Old garbage. A tensor that outlived two minor collections (a gradient kept across a step
   * while collections ran) is old, and an old dead one waits for a major collection: pace_gc's,
   * after a quarter of live memory. What a minor step leaves live beyond the last full
   * collection's level is such garbage (or data the program keeps): a full collection once it
   * reaches a 64th of live memory (at least GC_STEP_BYTES). The soak test (tests/soak/) found
   * it: a compiled MLP step left about 1 KB of it per step, and RSS rose for 70,000 steps.
   * But a level above the mark is also what a training step's forward pass holds (its
   * activations), legitimately: the char-GPT step, whose live memory rises by ~150 MB there, ran
   * about 25 full collections per step, each walking the whole Lua heap. So a full collection
   * also waits until native memory has grown, step by step, by as much as was live after the
   * last one: their cost stays in proportion to the tensor work between them. */
  if (step_mark < major_mark) major_mark = step_mark;
  size_t allowance = step_mark / 64 > GC_STEP_BYTES ? step_mark / 64 : GC_STEP_BYTES;
  if (step_mark - major_mark >= allowance && growth_since_major >= major_mark) {
    lua_gc(L, LUA_GCCOLLECT);
    full_collections++;
    step_mark = major_mark = dle_memory_allocated();
    gc_threshold = gc_limit_above(major_mark);
    growth_since_major = 0;
  }
}

/* ---------------------------------------------------------------- the userdata */

static void new_userdata(lua_State *L, dle_tensor *t) {
  dle_lua_tensor *ud = lua_newuserdatauv(L, sizeof *ud, 0);
  ud->t = t;
  ud->magic = DLE_LUA_TENSOR_MAGIC;
}

/* The userdata on top gets the metatable pushed above it. */
static void finish_push(lua_State *L) {
  lua_setmetatable(L, -2);
  pace_gc(L);
  keep_gc_generational(L);
}

void dle_lua_push(lua_State *L, dle_tensor *t) {
  new_userdata(L, t);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &metatable_key);
  finish_push(L);
}

void dle_lua_push_mt(lua_State *L, dle_tensor *t, int mt) {
  new_userdata(L, t);
  lua_pushvalue(L, mt);
  finish_push(L);
}

/* Our userdata, told apart by size and magic rather than by comparing metatables: this runs for
 * every operand of every op, and the metatable check costs three registry/stack operations. A
 * light userdata has raw length 0, so it never passes. */
static dle_lua_tensor *to_ud(lua_State *L, int idx) {
  dle_lua_tensor *ud = lua_touserdata(L, idx);
  if (!ud || lua_rawlen(L, idx) != sizeof *ud || ud->magic != DLE_LUA_TENSOR_MAGIC) return NULL;
  return ud;
}

dle_tensor *dle_lua_opt(lua_State *L, int idx) {
  dle_lua_tensor *ud = to_ud(L, idx);
  if (!ud) return NULL;
  if (!ud->t) luaL_error(L, "%s: a tensor used after it was closed", dle_lua_fname(L));
  return ud->t;
}

dle_tensor *dle_lua_check(lua_State *L, int idx) {
  dle_tensor *t = dle_lua_opt(L, idx);
  if (!t) luaL_typeerror(L, idx, "tensor");
  return t;
}

/* __gc and __close. Called from Lua as getmetatable(t).__close(x), x may be any value: to_ud, not
 * lua_touserdata, so another library's userdata (an io file) is never written to. */
static int tensor_gc(lua_State *L) {
  dle_lua_tensor *ud = to_ud(L, 1);
  if (ud && ud->t) {
    dle_tensor_release(ud->t);
    ud->t = NULL;
  }
  return 0;
}

static int tensor_eq(lua_State *L) {
  dle_lua_tensor *a = to_ud(L, 1), *b = to_ud(L, 2);
  lua_pushboolean(L, a && b && a->t == b->t);
  return 1;
}

static int tensor_len(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  if (t->ndim == 0) return luaL_error(L, "len: a 0-dim tensor has no length");
  lua_pushinteger(L, t->sizes[0]);
  return 1;
}

/* The 0-based row for the key t[i] (1-based, negative from the end), or a Lua error. */
static int64_t row_index(lua_State *L, const dle_tensor *t) {
  if (!lua_isinteger(L, 2)) {
    if (lua_type(L, 2) == LUA_TNUMBER)
      luaL_error(L, "index: index %s is not an integer", lua_tostring(L, 2));
    luaL_error(L, "index: cannot index a tensor with a %s", luaL_typename(L, 2));
  }
  lua_Integer i = lua_tointeger(L, 2);
  if (t->ndim == 0) luaL_error(L, "index: cannot index a 0-dim tensor");
  if (i == 0 || i > t->sizes[0] || i < -t->sizes[0])
    luaL_error(L, "index: index %I out of range for dim 1 of size %I (shape %s)", (LUAI_UACINT)i,
               (LUAI_UACINT)t->sizes[0], dle_tensor_shape_str((char[128]){0}, 128, t));
  return i > 0 ? i - 1 : i + t->sizes[0];
}

/* t[key] / t[key] = v with a tensor key (a bool mask, integer indices): the Lua methods
 * _getitem / _setitem of lua/dle/select.lua, found in the methods table at `methods`, with the
 * arguments t, key (, v); returns their results. */
static int tensor_key(lua_State *L, int methods, const char *name, int nres) {
  int top = lua_gettop(L);
  lua_getfield(L, methods, name);
  if (lua_isnil(L, -1)) return luaL_error(L, "index: tensor keys need require \"dle\"");
  for (int i = 1; i <= top; i++) lua_pushvalue(L, i);
  lua_call(L, top, nres);
  return nres;
}

/* t[i] selects along dim 1 (a number when t is 1-D), t[tensor] indexes with a mask or indices;
 * strings are methods and fields. */
static int tensor_index(lua_State *L) {
  if (lua_type(L, 2) == LUA_TSTRING) {
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
    const char *k = lua_tostring(L, 2);
    dle_tensor *t = dle_lua_check(L, 1);
    if (strcmp(k, "requires_grad") == 0) {
      lua_pushboolean(L, t->requires_grad);
      return 1;
    }
    if (strcmp(k, "grad") == 0) {
      if (!t->grad) return 0;
      dle_trace_note_record(DLE_TRACE_GRAD_READ, NULL, &t, 1, t->grad);
      dle_tensor_retain(t->grad);
      dle_lua_push(L, t->grad);
      return 1;
    }
    if (strcmp(k, "grad_fn") == 0) { /* the name of the op that made t, nil for a leaf */
      if (!t->grad_fn) return 0;
      lua_pushstring(L, dle_node_name(t->grad_fn));
      return 1;
    }
    if (strcmp(k, "is_leaf") == 0) {
      lua_pushboolean(L, t->grad_fn == NULL);
      return 1;
    }
    return 0;
  }
  dle_tensor *t = dle_lua_check(L, 1);
  if (dle_lua_opt(L, 2)) return tensor_key(L, lua_upvalueindex(1), "_getitem", 1);
  int64_t i0 = row_index(L, t);
  dle_tensor *r = NULL;
  DLE_LUA_TRY(L, dle_select(&r, t, 0, i0));
  if (t->ndim == 1) { /* an element: its value, exactly (item() reads int64 without a double) */
    dle_lua_push(L, r);
    lua_replace(L, 1);
    lua_settop(L, 1);
    lua_getfield(L, lua_upvalueindex(1), "item");
    lua_insert(L, 1);
    lua_call(L, 1, 1);
    return 1;
  }
  dle_lua_push(L, r);
  return 1;
}

/* t[i] = number | tensor writes into the slice (t[tensor] = v: tensor_key); fields requires_grad
 * and grad are settable. */
static int tensor_newindex(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  if (lua_type(L, 2) == LUA_TSTRING) {
    const char *k = lua_tostring(L, 2);
    if (strcmp(k, "requires_grad") == 0) {
      DLE_LUA_TRY(L, dle_set_requires_grad(t, lua_toboolean(L, 3)));
      return 0;
    }
    if (strcmp(k, "grad") == 0) {
      DLE_LUA_TRY(L, dle_set_grad(t, lua_isnil(L, 3) ? NULL : dle_lua_check(L, 3)));
      return 0;
    }
    return luaL_error(
        L, "index: cannot set field '%s' of a tensor (only requires_grad and grad can be set)", k);
  }
  if (dle_lua_opt(L, 2)) return tensor_key(L, lua_upvalueindex(1), "_setitem", 0);
  int64_t i0 = row_index(L, t);
  dle_tensor *src = dle_lua_opt(L, 3);
  if (!src && !lua_isnumber(L, 3) && !lua_isboolean(L, 3))
    return luaL_error(L, "index: cannot assign a %s to a tensor element", luaL_typename(L, 3));
  dle_tensor *row = NULL;
  DLE_LUA_TRY(L, dle_select(&row, t, 0, i0));
  dle_status st =
      src ? dle_copy_(row, src)
          : dle_fill_(row, lua_isboolean(L, 3) ? lua_toboolean(L, 3) : lua_tonumber(L, 3));
  dle_tensor_release(row);
  if (st != DLE_OK) dle_lua_fail(L);
  return 0;
}

/* ---------------------------------------------------------------- argument helpers */

int dle_lua_dim(lua_State *L, int arg, const char *fn) {
  if (!lua_isinteger(L, arg)) {
    if (lua_isnoneornil(L, arg)) luaL_error(L, "%s: dim argument #%d is missing", fn, arg);
    luaL_error(L, "%s: dim must be an integer, got %s", fn, luaL_typename(L, arg));
  }
  lua_Integer d = lua_tointeger(L, arg);
  if (d == 0) luaL_error(L, "%s: dim 0 is invalid (dims are 1-based; -1 is the last)", fn);
  if (d > 64 || d < -64) luaL_error(L, "%s: dim %I out of range", fn, (LUAI_UACINT)d);
  return d > 0 ? (int)d - 1 : (int)d;
}

bool dle_lua_opt_flag(lua_State *L, int idx, const char *fn, const char *name, bool def) {
  if (idx == 0) return def;
  lua_getfield(L, idx, name);
  bool v = def;
  if (lua_isboolean(L, -1))
    v = lua_toboolean(L, -1);
  else if (!lua_isnil(L, -1))
    luaL_error(L, "%s: option '%s' must be a boolean, got %s", fn, name, luaL_typename(L, -1));
  lua_pop(L, 1);
  return v;
}

int dle_lua_optdim(lua_State *L, int arg, const char *fn, int def) {
  return lua_isnoneornil(L, arg) ? def : dle_lua_dim(L, arg, fn);
}

lua_Integer dle_lua_check_int(lua_State *L, int arg, const char *fn, const char *what) {
  int ok = 0;
  lua_Integer v = lua_tointegerx(L, arg, &ok);
  if (!ok)
    luaL_error(L, "%s: %s must be an integer, got %s", fn, what,
               lua_type(L, arg) == LUA_TNUMBER ? lua_tostring(L, arg) : luaL_typename(L, arg));
  return v;
}

static int64_t check_size(lua_State *L, int idx, const char *fn, int allow_neg1) {
  int isint = 0;
  lua_Integer v = lua_tointegerx(L, idx, &isint);
  if (!isint)
    luaL_error(L, "%s: sizes must be integers, got %s", fn,
               lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx) : luaL_typename(L, idx));
  if (v < 0 && !(allow_neg1 == 2 || (allow_neg1 && v == -1)))
    luaL_error(L, "%s: negative size %I", fn, (LUAI_UACINT)v);
  return (int64_t)v;
}

void dle_lua_check_new_sizes(lua_State *L, const int64_t *sizes, int n, const char *fn) {
  int64_t p = 1;
  for (int d = 0; d < n; d++)
    if (__builtin_mul_overflow(p, sizes[d] ? sizes[d] : 1, &p) || p > INT64_MAX / 16)
      luaL_error(L, "%s: shape %s has too many elements", fn,
                 dle_shape_str((char[128]){0}, 128, n, sizes));
}

static int new_sizes(lua_State *L, const int64_t *sizes, int n, const char *fn, int allow_neg1) {
  if (!allow_neg1) dle_lua_check_new_sizes(L, sizes, n, fn);
  return n;
}

int dle_lua_sizes(lua_State *L, int first, int64_t *sizes, int *next, const char *fn,
                  int allow_neg1) {
  int n = 0;
  if (lua_istable(L, first) && !dle_lua_opt(L, first) && lua_rawlen(L, first) > 0) {
    int len = (int)lua_rawlen(L, first);
    if (len > DLE_MAX_DIMS)
      luaL_error(L, "%s: %d dims given, at most %d supported", fn, len, DLE_MAX_DIMS);
    for (int i = 1; i <= len; i++) {
      lua_rawgeti(L, first, i);
      sizes[n++] = check_size(L, -1, fn, allow_neg1);
      lua_pop(L, 1);
    }
    *next = first + 1;
    return new_sizes(L, sizes, n, fn, allow_neg1);
  }
  /* an empty table {} means zero dims only when it is not an options table (has no keys) */
  if (lua_istable(L, first) && !dle_lua_opt(L, first)) {
    lua_pushnil(L);
    if (!lua_next(L, first)) {
      *next = first + 1;
      return 0;
    }
    lua_pop(L, 2);
  }
  int i = first;
  while (lua_type(L, i) == LUA_TNUMBER) {
    if (n == DLE_MAX_DIMS) luaL_error(L, "%s: more than %d dims given", fn, DLE_MAX_DIMS);
    sizes[n++] = check_size(L, i, fn, allow_neg1);
    i++;
  }
  *next = i;
  return new_sizes(L, sizes, n, fn, allow_neg1);
}

dle_dtype dle_lua_check_dtype(lua_State *L, int idx, const char *fn) {
  if (lua_type(L, idx) != LUA_TSTRING)
    luaL_error(L, "%s: dtype must be a string, got %s", fn, luaL_typename(L, idx));
  dle_dtype dt;
  if (dle_dtype_parse(lua_tostring(L, idx), &dt) != DLE_OK)
    luaL_error(L, "%s: %s", fn, dle_last_error());
  return dt;
}

int dle_lua_opts_at(lua_State *L, int idx, const char *fn, const char *const *known) {
  if (lua_isnoneornil(L, idx)) return 0;
  if (!lua_istable(L, idx))
    luaL_error(L, "%s: options must be a table, got %s", fn, luaL_typename(L, idx));
  dle_lua_check_options(L, idx, fn, known);
  return lua_absindex(L, idx);
}

void dle_lua_check_options(lua_State *L, int idx, const char *fn, const char *const *known) {
  if (!lua_istable(L, idx)) return;
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    bool ok = false;
    for (int i = 0; k && known[i] && !ok; i++) ok = strcmp(k, known[i]) == 0;
    if (!ok) {
      const char *name = luaL_tolstring(L, -1, NULL);
      luaL_Buffer b;
      luaL_buffinit(L, &b);
      for (int i = 0; known[i]; i++) {
        if (i) luaL_addstring(&b, ", ");
        luaL_addstring(&b, known[i]);
      }
      luaL_pushresult(&b);
      luaL_error(L, "%s: unknown option '%s' (known: %s)", fn, name, lua_tostring(L, -1));
    }
  }
}

/* What a creation function's options may hold (one list for all of them, sorted as messages show it). */
static const char *const creation_options[] = {"device", "dtype", "generator", "requires_grad",
                                               NULL};

void dle_lua_parse_opts(lua_State *L, int idx, dle_lua_opts *o, const char *fn) {
  memset(o, 0, sizeof *o);
  o->fn = fn;
  o->dtype = DLE_DEFAULT_FLOAT;
  o->device = DLE_DEVICE_CPU;
  if (lua_isnoneornil(L, idx)) return;
  if (!lua_istable(L, idx))
    luaL_error(L, "%s: options must be a table, got %s", fn, luaL_typename(L, idx));
  idx = lua_absindex(L, idx);
  dle_lua_check_options(L, idx, fn, creation_options);
  if (lua_getfield(L, idx, "dtype") != LUA_TNIL) {
    o->dtype = dle_lua_check_dtype(L, -1, fn);
    o->has_dtype = true;
  }
  lua_pop(L, 1);
  if (lua_getfield(L, idx, "device") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING ||
        dle_device_parse(lua_tostring(L, -1), &o->device) != DLE_OK)
      luaL_error(L, "%s: %s", fn,
                 lua_type(L, -1) == LUA_TSTRING ? dle_last_error() : "device must be a string");
  }
  lua_pop(L, 1);
  lua_getfield(L, idx, "requires_grad");
  o->requires_grad = lua_toboolean(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, idx, "generator");
  o->generator = dle_lua_opt_generator(L, -1, fn);
  lua_pop(L, 1);
}

int dle_lua_sizes_opts(lua_State *L, int first, int64_t *sizes, dle_lua_opts *o, const char *fn) {
  int next, n = dle_lua_sizes(L, first, sizes, &next, fn, 0);
  dle_lua_parse_opts(L, next, o, fn);
  return n;
}

void dle_lua_push_created(lua_State *L, dle_tensor *t, const dle_lua_opts *o) {
  if (o->device.type != DLE_CPU) {
    dle_tensor *moved = NULL;
    dle_status st = dle_to_device(&moved, t, o->device);
    dle_tensor_release(t);
    if (st != DLE_OK) luaL_error(L, "%s: %s", o->fn ? o->fn : "to", dle_last_error());
    t = moved;
  }
  if (o->requires_grad) {
    if (!dle_dtype_is_float(t->dtype)) {
      dle_tensor_release(t);
      luaL_error(L, "requires_grad: only float tensors can require grad, got %s",
                 dle_dtype_name(o->dtype));
    }
    t->requires_grad = true;
  }
  dle_lua_push(L, t);
}

int dle_lua_push_result(lua_State *L, dle_tensor *r, bool inplace) {
  if (inplace)
    lua_settop(L, 1);
  else
    dle_lua_push(L, r);
  return 1;
}

int dle_lua_push_all(lua_State *L, dle_status st, dle_tensor **r, int n) {
  if (st != DLE_OK) {
    for (int k = 0; k < n; k++) dle_tensor_release(r[k]);
    return dle_lua_fail(L);
  }
  for (int k = 0; k < n; k++) dle_lua_push(L, r[k]);
  return n;
}

int dle_lua_apply(lua_State *L, dle_status (*f)(dle_tensor **out, dle_tensor *t)) {
  dle_tensor *t = dle_lua_check(L, 1), *r = NULL;
  return dle_lua_push_new(L, f(&r, t), &r);
}

void *dle_lua_new_owned(lua_State *L, size_t size, const char *tname, lua_CFunction gc) {
  void *p = lua_newuserdatauv(L, size, 0);
  memset(p, 0, size);
  if (luaL_newmetatable(L, tname)) {
    lua_pushcfunction(L, gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return p;
}

void dle_lua_setfuncs(lua_State *L, int table, const luaL_Reg *fns) {
  for (; fns->name; fns++) {
    lua_pushcfunction(L, fns->func);
    lua_setfield(L, table, fns->name);
  }
}

void dle_lua_register(lua_State *L, int module, int methods, const luaL_Reg *module_only,
                      const luaL_Reg *both, const luaL_Reg *methods_only) {
  if (module_only) dle_lua_setfuncs(L, module, module_only);
  if (both) {
    dle_lua_setfuncs(L, module, both);
    dle_lua_setfuncs(L, methods, both);
  }
  if (methods_only) dle_lua_setfuncs(L, methods, methods_only);
}

/* ---------------------------------------------------------------- module */

static int core_op_names(lua_State *L) {
  lua_createtable(L, DLE_NUM_OPS, 0);
  for (int i = 0; i < DLE_NUM_OPS; i++) {
    const dle_op_info *info = dle_op_get_info((dle_op)i);
    lua_createtable(L, 0, 5);
    lua_pushstring(L, info->name), lua_setfield(L, -2, "name");
    lua_pushinteger(L, info->nin), lua_setfield(L, -2, "inputs");
    lua_pushinteger(L, info->nout), lua_setfield(L, -2, "outputs");
    lua_pushboolean(L, (info->flags & DLE_DIFF) != 0), lua_setfield(L, -2, "differentiable");
    lua_pushstring(L, dle_op_kind_name(info->kind)), lua_setfield(L, -2, "kind");
    bool has_vjp, has_jvp;
    dle_op_grad_rules((dle_op)i, &has_vjp, &has_jvp);
    lua_pushboolean(L, has_vjp), lua_setfield(L, -2, "has_vjp");
    lua_pushboolean(L, has_jvp), lua_setfield(L, -2, "has_jvp");
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* dle.core._gc_full_collections(): how many full collections dle's memory pacing has run. */
static int core_gc_full_collections(lua_State *L) {
  lua_pushinteger(L, full_collections);
  return 1;
}

/* core._tuning(name[, value]) -> the old value: reads, or sets (value < 0: the default), one of
 * the engine's algorithm thresholds (dle_tuning; for tests). */
static int core_tuning(lua_State *L) {
  static const char *const names[] = {"winograd_min_tiles", "spin_pool_poll_us", "conv1d_direct",
                                      NULL};
  dle_tuning knob = (dle_tuning)luaL_checkoption(L, 1, NULL, names);
  if (lua_isnoneornil(L, 2)) {
    lua_pushinteger(L, dle_tuning_get(knob));
  } else {
    lua_pushinteger(L, dle_tuning_set(knob, luaL_checkinteger(L, 2)));
  }
  return 1;
}

static int core_time(lua_State *L) {
  lua_pushnumber(L, dle_time());
  return 1;
}

static int core_set_num_threads(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  if (n > DLE_MAX_THREADS)
    return luaL_error(L, "set_num_threads: %I threads requested, at most %d are supported",
                      (LUAI_UACINT)n, DLE_MAX_THREADS);
  dle_set_num_threads(n < 1 ? 0
                            : (int)n); /* n < 1: all cores (no int truncation of huge negatives) */
  return 0;
}

static int core_get_num_threads(lua_State *L) {
  lua_pushinteger(L, dle_get_num_threads());
  return 1;
}

static int core_is_tensor(lua_State *L) {
  lua_pushboolean(L, to_ud(L, 1) != NULL);
  return 1;
}

static int core_cuda_available(lua_State *L) {
  bool ok = dle_backend_get(DLE_CUDA) != NULL;
  lua_pushboolean(L, ok);
  if (ok) return 1;
  lua_pushstring(L, dle_backend_unavailable_reason(DLE_CUDA));
  return 2;
}

/* dle.core._kernel_ops(device): the names of the ops a device type's backend has kernels for ("cpu",
 * or "cuda": read from the CUDA library's table without touching a device), or nil and the reason
 * when that library cannot be loaded. */
static int core_kernel_ops(lua_State *L) {
  dle_device dev;
  if (dle_device_parse(luaL_checkstring(L, 1), &dev) != DLE_OK)
    return luaL_error(L, "kernel_ops: %s", dle_last_error());
  const char *why = NULL;
  const dle_backend *b = dle_backend_library_table(dev.type, &why);
  if (!b) {
    lua_pushnil(L);
    lua_pushstring(L, why);
    return 2;
  }
  lua_newtable(L);
  for (int i = 0, n = 0; i < DLE_NUM_OPS; i++)
    if (dle_backend_has_kernel(b, (dle_op)i)) {
      lua_pushstring(L, dle_op_get_info((dle_op)i)->name);
      lua_rawseti(L, -2, ++n);
    }
  return 1;
}

int luaopen_dle_native(lua_State *L) {
  static const luaL_Reg module_fns[] = {
      {"op_table", core_op_names},
      {"_tuning", core_tuning},
      {"_gc_full_collections", core_gc_full_collections},
      {"time", core_time},
      {"set_num_threads", core_set_num_threads},
      {"get_num_threads", core_get_num_threads},
      {"is_tensor", core_is_tensor},
      {"cuda_available", core_cuda_available},
      {"_kernel_ops", core_kernel_ops},
      {NULL, NULL},
  };
  lua_newtable(L); /* module */
  int module = lua_gettop(L);
  dle_lua_setfuncs(L, module, module_fns);
  lua_newtable(L); /* methods */
  int methods = lua_gettop(L);
  dle_lua_open_memory(L, module, methods); /* first: it applies DLE_MAX_MEMORY */

  luaL_newmetatable(L, TENSOR_MT);
  int mt = lua_gettop(L);
  lua_pushvalue(L, mt);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &metatable_key);
  lua_pushvalue(L, methods);
  lua_pushcclosure(L, tensor_index, 1);
  lua_setfield(L, mt, "__index");
  lua_pushvalue(L, methods);
  lua_pushcclosure(L, tensor_newindex, 1);
  lua_setfield(L, mt, "__newindex");
  static const luaL_Reg meta[] = {{"__gc", tensor_gc},
                                  {"__close", tensor_gc},
                                  {"__eq", tensor_eq},
                                  {"__len", tensor_len},
                                  {NULL, NULL}};
  dle_lua_setfuncs(L, mt, meta);
  lua_pushstring(L, "dle.Tensor");
  lua_setfield(L, mt, "__name");

  dle_lua_open_tensor(L, module, methods);
  dle_lua_open_complex(L, module, methods);
#define DLE_FAMILY(name, grad, cpu, cuda, lua) lua(dle_lua_open_##name(L, module, methods);)
#include "../engine/ops/families.def"
  dle_lua_open_autograd(L, module, methods);
  dle_lua_open_data(L, module, methods);
  dle_lua_open_io(L, module, methods);
  dle_lua_open_profile(L, module, methods);
  dle_lua_open_graph(L, module, methods);
  dle_lua_open_onnx(L, module, methods);
  dle_lua_open_onnx_save(L, module, methods);

  dle_lua_open_errors(L, module);
  dle_lua_register_names(L, module);
  dle_lua_register_names(L, methods);
  dle_lua_register_names(L, mt);
  lua_pushvalue(L, methods);
  lua_setfield(L, module, "Tensor"); /* methods table: Lua code adds methods here */
  lua_pushvalue(L, mt);
  lua_setfield(L, module, "metatable"); /* Lua sets __tostring and friends */
  lua_settop(L, module);
  return 1;
}
