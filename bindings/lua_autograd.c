/* lua_autograd.c — autodiff for Lua: t:backward, dle.grad, detach, grad mode, custom Lua ops
 * (the C side of dle.autograd.Function), forward-mode tangents (the C side of dle.jvp) and the
 * autocast mode (the C side of dle.autocast). */
#include <stdlib.h>
#include <string.h>

#include "../engine/dle.h"
#include "lua_util.h"

/* The Lua thread running the current backward pass: custom Lua rules are called on it. */
static _Thread_local lua_State *backward_L;

/* Registry references of custom nodes whose graph died: released on the next call that has a
 * Lua state at hand (a node can die inside a C function or a finalizer, where touching the
 * registry from C is not safe). */
static int *dead_refs;
static int ndead, capdead;

static void drain_dead_refs(lua_State *L) {
  for (int i = 0; i < ndead; i++) luaL_unref(L, LUA_REGISTRYINDEX, dead_refs[i]);
  ndead = 0;
}

/* Reads a tensor or a list of tensors at idx into an array owned by a userdata pushed on the
 * stack (so a Lua error on the way cannot leak it). */
static dle_tensor **tensor_list(lua_State *L, int idx, int *n, const char *fn, const char *what) {
  idx = lua_absindex(L, idx);
  dle_tensor *one = dle_lua_opt(L, idx);
  if (!one && !lua_istable(L, idx))
    luaL_error(L, "%s: %s must be a tensor or a list of tensors, got %s", fn, what,
               luaL_typename(L, idx));
  int len = one ? 1 : (int)lua_rawlen(L, idx);
  dle_tensor **v = lua_newuserdatauv(L, sizeof *v * (size_t)(len ? len : 1), 0);
  if (one) v[0] = one;
  for (int i = 0; !one && i < len; i++) {
    lua_rawgeti(L, idx, i + 1);
    v[i] = dle_lua_opt(L, -1);
    lua_pop(L, 1);
    if (!v[i]) luaL_error(L, "%s: %s[%d] is not a tensor", fn, what, i + 1);
  }
  *n = len;
  return v;
}

static bool opt_bool(lua_State *L, int idx, const char *key, bool def) {
  if (!lua_istable(L, idx)) return def;
  lua_getfield(L, idx, key);
  bool v = lua_isnil(L, -1) ? def : lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* Whether the innermost backward pass on this thread returns its gradients (dle.grad) instead of
 * accumulating them into .grad (t:backward, dle.backward): dle.checkpoint's rule, which can only
 * accumulate, must refuse the former. */
static _Thread_local bool capturing;

/* Runs dle_backward with this thread as the one custom rules run on. */
static dle_status run_backward(lua_State *L, int nroots, dle_tensor **roots, dle_tensor **gouts,
                               int ninputs, dle_tensor **inputs, dle_tensor **grads, bool retain,
                               bool create) {
  lua_State *outer = backward_L;
  bool outer_capturing = capturing;
  backward_L = L;
  capturing = ninputs > 0;
  dle_status st = dle_backward(nroots, roots, gouts, ninputs, inputs, grads, retain, create);
  backward_L = outer;
  capturing = outer_capturing;
  return st;
}

static const char *const BACKWARD_OPTS[] = {"create_graph", "retain_graph", NULL};

/** t:backward(grad_or_nil, {retain_graph, create_graph}) accumulates into the leaves' .grad. */
static int m_backward(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  dle_tensor *g = dle_lua_opt(L, 2);
  if (!g && !lua_isnoneornil(L, 2) && !lua_istable(L, 2))
    return luaL_error(L, "backward: gradient must be a tensor or nil, got %s", luaL_typename(L, 2));
  int opts = lua_istable(L, 2) && !g ? 2 : 3;
  dle_lua_check_options(L, opts, "backward", BACKWARD_OPTS);
  bool create = opt_bool(L, opts, "create_graph", false);
  bool retain = opt_bool(L, opts, "retain_graph", create);
  drain_dead_refs(L);
  DLE_LUA_TRY(L, run_backward(L, 1, &t, &g, 0, NULL, NULL, retain, create));
  return 0;
}

/** dle.backward(outputs, grad_outputs, {retain_graph, create_graph}) backpropagates from several
 * outputs in one pass (torch.autograd.backward): their gradients sum into the leaves' .grad.
 * grad_outputs: a tensor or a list matching outputs, or nil (ones, for one-element outputs). */
static int l_backward(lua_State *L) {
  lua_settop(L, 3); /* the lists' arrays go above the arguments */
  int nout, ngo = 0;
  dle_tensor **outs = tensor_list(L, 1, &nout, "backward", "outputs");
  if (nout == 0) return luaL_error(L, "backward: outputs is an empty list");
  dle_tensor **gos = NULL;
  if (!lua_isnoneornil(L, 2)) {
    gos = tensor_list(L, 2, &ngo, "backward", "grad_outputs");
    if (ngo != nout) return luaL_error(L, "backward: %d grad_outputs for %d outputs", ngo, nout);
  }
  dle_lua_check_options(L, 3, "backward", BACKWARD_OPTS);
  bool create = opt_bool(L, 3, "create_graph", false);
  bool retain = opt_bool(L, 3, "retain_graph", create);
  drain_dead_refs(L);
  DLE_LUA_TRY(L, run_backward(L, nout, outs, gos, 0, NULL, NULL, retain, create));
  return 0;
}

/** dle.core._backward_captures() -> true inside a dle.grad pass (gradients returned, not
 * accumulated into .grad). */
static int l_backward_captures(lua_State *L) {
  lua_pushboolean(L, backward_L != NULL && capturing);
  return 1;
}

/** dle.grad(outputs, inputs, {create_graph, retain_graph, grad_outputs, allow_unused}) returns
 * the list of gradients of the outputs with respect to each input (.grad is left alone). */
static int l_grad(lua_State *L) {
  lua_settop(L, 3); /* the lists' arrays go above the arguments */
  int nout, nin, ngo = 0;
  dle_tensor **outs = tensor_list(L, 1, &nout, "grad", "outputs");
  dle_tensor **ins = tensor_list(L, 2, &nin, "grad", "inputs");
  static const char *const grad_opts[] = {"allow_unused", "create_graph", "grad_outputs",
                                          "retain_graph", NULL};
  dle_lua_check_options(L, 3, "grad", grad_opts);
  bool create = opt_bool(L, 3, "create_graph", false);
  bool retain = opt_bool(L, 3, "retain_graph", create);
  bool allow_unused = opt_bool(L, 3, "allow_unused", false);
  dle_tensor **gos = NULL;
  if (lua_istable(L, 3) && lua_getfield(L, 3, "grad_outputs") != LUA_TNIL) {
    gos = tensor_list(L, lua_gettop(L), &ngo, "grad", "grad_outputs");
    if (ngo != nout) return luaL_error(L, "grad: %d grad_outputs for %d outputs", ngo, nout);
  }
  dle_tensor **grads = lua_newuserdatauv(L, sizeof *grads * (size_t)(nin ? nin : 1), 0);
  drain_dead_refs(L);
  DLE_LUA_TRY(L, run_backward(L, nout, outs, gos, nin, ins, grads, retain, create));
  lua_createtable(L, nin, 0);
  int unused = 0;
  for (int j = 0; j < nin; j++) {
    if (!grads[j]) {
      if (!unused) unused = j + 1;
      continue;
    }
    dle_lua_push(L, grads[j]);
    lua_rawseti(L, -2, j + 1);
  }
  if (unused && !allow_unused)
    return luaL_error(L,
                      "grad: input %d is not used to compute the outputs (pass allow_unused = "
                      "true to get nil for it)",
                      unused);
  return 1;
}

static int m_detach(lua_State *L) { return dle_lua_apply(L, dle_detach); }

/** t:detach_() cuts t from the graph in place. */
static int m_detach_(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  dle_trace_note_unsafe("detach_: cutting a tensor's history in place is not part of the graph");
  if (t->grad_fn) {
    dle_node_release(t->grad_fn);
    t->grad_fn = NULL;
  }
  t->requires_grad = false;
  lua_settop(L, 1);
  return 1;
}

static int m_requires_grad_(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  DLE_LUA_TRY(L, dle_set_requires_grad(t, lua_isnone(L, 2) ? true : lua_toboolean(L, 2)));
  lua_settop(L, 1);
  return 1;
}

static int l_is_grad_enabled(lua_State *L) {
  lua_pushboolean(L, dle_grad_enabled());
  return 1;
}

/** dle.set_grad_enabled(on) returns the previous mode. */
static int l_set_grad_enabled(lua_State *L) {
  luaL_checktype(L, 1, LUA_TBOOLEAN);
  lua_pushboolean(L, dle_set_grad_enabled(lua_toboolean(L, 1)));
  return 1;
}

/* Calls fn(...) (argument 1) with grad mode set to `on`, restoring the mode even on error. */
static int with_grad_mode(lua_State *L, bool on, const char *fn) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  (void)fn;
  bool was = dle_set_grad_enabled(on);
  int nargs = lua_gettop(L) - 1;
  int st = lua_pcall(L, nargs, LUA_MULTRET, 0);
  dle_set_grad_enabled(was);
  if (st != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

/** dle.no_grad(fn, ...) runs fn(...) without recording and returns its results. */
static int l_no_grad(lua_State *L) { return with_grad_mode(L, false, "no_grad"); }
/** dle.enable_grad(fn, ...) runs fn(...) with recording on (inside a no_grad). */
static int l_enable_grad(lua_State *L) { return with_grad_mode(L, true, "enable_grad"); }

/* ---------------------------------------------------------------- custom Lua ops */

typedef struct {
  int ref; /* registry reference to the Lua backward closure */
} custom_ctx;

static void custom_free(void *p) {
  custom_ctx *c = p;
  if (ndead == capdead) {
    int cap = capdead ? capdead * 2 : 64;
    int *v = realloc(dead_refs, sizeof *v * (size_t)cap);
    if (!v) {
      free(c);
      return;
    } /* out of memory: the closure stays referenced */
    dead_refs = v, capdead = cap;
  }
  dead_refs[ndead++] = c->ref;
  free(c);
}

/* Calls the Lua backward closure with the output gradients (nil for none); it returns one
 * gradient (or nil) per input. */
static dle_status custom_vjp(void *p, dle_tensor *const *gout, int nout, dle_tensor **gin,
                             int nin) {
  custom_ctx *c = p;
  lua_State *L = backward_L;
  if (!L) return dle_error("autograd.Function: backward ran outside a Lua backward call");
  if (!lua_checkstack(L, nout + nin + 4)) return dle_error("autograd.Function: Lua stack overflow");
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->ref);
  for (int k = 0; k < nout; k++) {
    if (gout[k]) {
      dle_tensor_retain(gout[k]);
      dle_lua_push(L, gout[k]);
    } else {
      lua_pushnil(L);
    }
  }
  if (lua_pcall(L, nout, nin, 0) != LUA_OK) {
    /* the closure (lua/dle/autograd.lua) already names the Function and says "backward" */
    dle_status st = dle_error("%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    return st;
  }
  dle_status st = DLE_OK;
  for (int i = 0; i < nin; i++) {
    int idx = lua_gettop(L) - nin + 1 + i;
    dle_tensor *g = dle_lua_opt(L, idx);
    if (!g && !lua_isnil(L, idx) && st == DLE_OK)
      st = dle_error("autograd.Function backward: result %d must be a tensor or nil, got %s", i + 1,
                     luaL_typename(L, idx));
    if (g && st == DLE_OK) {
      dle_tensor_retain(g);
      gin[i] = g;
    }
  }
  lua_pop(L, nin);
  return st;
}

/** dle.core._record_custom(name, outputs, inputs, backward) makes the outputs (already computed
 * without recording) depend on the inputs through the Lua function backward(grads...). */
static int l_record_custom(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  luaL_checktype(L, 4, LUA_TFUNCTION);
  drain_dead_refs(L);
  int nout, nin;
  dle_tensor **outs = tensor_list(L, 2, &nout, name, "outputs");
  dle_tensor **ins = tensor_list(L, 3, &nin, name, "inputs");
  custom_ctx *c = malloc(sizeof *c);
  if (!c) return luaL_error(L, "%s: out of memory", name);
  lua_pushvalue(L, 4);
  c->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  dle_status st =
      dle_autograd_record_custom(name, outs, nout, ins, nin, custom_vjp, c, custom_free);
  if (st != DLE_OK) {
    drain_dead_refs(L);
    return dle_lua_fail(L);
  }
  return 0;
}

/* ---------------------------------------------------------------- forward mode */

/** dle.core._set_tangent(t, tangent_or_nil) */
static int l_set_tangent(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  dle_tensor *g = lua_isnoneornil(L, 2) ? NULL : dle_lua_check(L, 2);
  DLE_LUA_TRY(L, dle_set_tangent(t, g));
  return 0;
}

/** dle.core._tangent(t) -> the tangent t carries, or nil */
static int l_tangent(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  if (!t->tangent) return 0;
  dle_tensor_retain(t->tangent);
  dle_lua_push(L, t->tangent);
  return 1;
}

/* ---------------------------------------------------------------- autocast */

/* The autocast dtype named at idx: float16 or bfloat16 by any name dle_dtype_parse knows (half,
 * fp16, bf16); anything else is an error naming autocast and the value. */
static dle_dtype autocast_dtype_arg(lua_State *L, int idx) {
  dle_dtype dt;
  int type = lua_type(L, idx);
  if (type == LUA_TSTRING && dle_dtype_parse(lua_tostring(L, idx), &dt) == DLE_OK &&
      (dt == DLE_F16 || dt == DLE_BF16))
    return dt;
  const char *got = type == LUA_TSTRING ? lua_pushfstring(L, "\"%s\"", lua_tostring(L, idx))
                    : type == LUA_TNUMBER
                        ? lua_pushfstring(L, "number %s", luaL_tolstring(L, idx, NULL))
                        : luaL_typename(L, idx);
  return (dle_dtype)luaL_error(L,
                               "autocast: dtype must be \"bfloat16\" or \"float16\" (or bf16, "
                               "half, fp16), got %s",
                               got);
}

/* dle.autocast's first argument: a dtype, or {dtype = ..., cache_enabled = true|false} (PyTorch's
 * knob; true by default). */
static dle_dtype autocast_region_arg(lua_State *L, int idx, bool *cache) {
  *cache = true;
  if (!lua_istable(L, idx)) return autocast_dtype_arg(L, idx);
  static const char *const known[] = {"cache_enabled", "dtype", NULL};
  dle_lua_check_options(L, idx, "autocast", known);
  if (lua_getfield(L, idx, "cache_enabled") != LUA_TNIL) {
    if (!lua_isboolean(L, -1))
      luaL_error(L, "autocast: cache_enabled must be a boolean, got %s", luaL_typename(L, -1));
    *cache = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  lua_getfield(L, idx, "dtype");
  dle_dtype dt = autocast_dtype_arg(L, lua_gettop(L));
  lua_pop(L, 1);
  return dt;
}

/** dle.core._autocast_set(on[, dtype]) switches this thread's autocast (dtype nil: the current
 * one) and returns the previous on and dtype, for dle.autocast to restore. */
static int l_autocast_set(lua_State *L) {
  bool on = lua_toboolean(L, 1);
  dle_dtype dt = lua_isnoneornil(L, 2) ? dle_autocast_dtype() : autocast_dtype_arg(L, 2);
  lua_pushboolean(L, dle_autocast_enabled());
  lua_pushstring(L, dle_dtype_name(dle_autocast_dtype()));
  DLE_LUA_TRY(L, dle_autocast_set(on, dt));
  return 2;
}

/** dle.autocast(dtype, fn, ...) runs fn(...) in mixed precision and returns its results.
 * dtype: "bfloat16" or "float16" (or an alias), or {dtype = ..., cache_enabled = false}. While fn
 * runs, matmul, conv2d and attention take their float inputs in dtype (accumulating in float32),
 * softmax, norms, losses, sums and exp/log-like ops theirs in float32 (the lists:
 * engine/autocast.h); casts are recorded, so float32 parameters get float32 gradients, and
 * backward runs in the dtypes forward used. A parameter's cast is made once and reused until the
 * outermost region ends (unless cache_enabled is false). Nests (the inner dtype wins); the
 * previous mode comes back when fn returns or raises (the error is raised again). Per thread,
 * like no_grad. */
static int l_autocast(lua_State *L) {
  bool cache;
  dle_dtype dt = autocast_region_arg(L, 1, &cache);
  bool callable = lua_type(L, 2) == LUA_TFUNCTION;
  if (!callable && luaL_getmetafield(L, 2, "__call") != LUA_TNIL) { /* a callable table: a Module */
    lua_pop(L, 1);
    callable = true;
  }
  if (!callable)
    return luaL_error(L, "autocast: fn must be a function, got %s", luaL_typename(L, 2));
  lua_remove(L, 1);
  dle_autocast_mode prev;
  DLE_LUA_TRY(L, dle_autocast_enter(dt, cache, &prev));
  int st = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  dle_autocast_exit(&prev); /* before the error goes on: the cache is emptied either way */
  if (st != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

/** dle.core._autocast_lower(t) -> t as autocast's lower-precision ops take it: cast to the autocast
 * dtype (through the cast cache, for a parameter) when a float tensor other than float64, else t.
 * For ops that apply the policy in Lua (dle.einsum). */
static int l_autocast_lower(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1), *out = NULL;
  DLE_LUA_TRY(L, dle_autocast_cast(&out, t, DLE_AUTOCAST_LOWER));
  dle_lua_push(L, out);
  return 1;
}

/** dle.is_autocast_enabled() */
static int l_is_autocast_enabled(lua_State *L) {
  lua_pushboolean(L, dle_autocast_enabled());
  return 1;
}

/** dle.get_autocast_dtype() -> "bfloat16" or "float16": the dtype autocast uses (as PyTorch's
 * torch.get_autocast_dtype, also when autocast is off: then the one it would use). */
static int l_get_autocast_dtype(lua_State *L) {
  lua_pushstring(L, dle_dtype_name(dle_autocast_dtype()));
  return 1;
}

void dle_lua_open_autograd(lua_State *L, int module, int methods) {
  // clang-format off
  static const luaL_Reg fns[] = {
      {"grad", l_grad}, {"backward", l_backward}, {"_backward_captures", l_backward_captures},
      {"no_grad", l_no_grad}, {"enable_grad", l_enable_grad}, {"is_grad_enabled", l_is_grad_enabled},
      {"set_grad_enabled", l_set_grad_enabled}, {"_record_custom", l_record_custom},
      {"_set_tangent", l_set_tangent}, {"_tangent", l_tangent}, {"autocast", l_autocast},
      {"_autocast_set", l_autocast_set}, {"_autocast_lower", l_autocast_lower},
      {"is_autocast_enabled", l_is_autocast_enabled}, {"get_autocast_dtype", l_get_autocast_dtype},
      {NULL, NULL}};
  static const luaL_Reg both[] = {{"detach", m_detach}, {NULL, NULL}};
  static const luaL_Reg meths[] = {
      {"backward", m_backward}, {"detach_", m_detach_}, {"requires_grad_", m_requires_grad_},
      {NULL, NULL}};
  // clang-format on
  dle_lua_register(L, module, methods, fns, both, meths);
}
