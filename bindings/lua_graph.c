/* lua_graph.c — the native side of dle.graph and dle.compile (lua/dle/graph.lua): the tracer's
 * switch and records (engine/trace.h), and the generic op call a graph replays its nodes with. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../engine/dle.h"
#include "lua_util.h"

#define ATTRS_MT "dle.graph.attrs"

/** dle.core._trace_begin(): starts recording this thread's ops; an error when already tracing. */
static int l_trace_begin(lua_State *L) {
  DLE_LUA_TRY(L, dle_trace_begin());
  return 0;
}

static void push_ints(lua_State *L, const int64_t *v, int n) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushinteger(L, (lua_Integer)v[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

/* attrs as a table: {ints, f = {f0, f1}, dtype, keepdim, index_base, generator}, fields that
 * hold their zero value left out. */
static void push_attrs(lua_State *L, const dle_attrs *a) {
  lua_createtable(L, 0, 6);
  if (a->nints > 0) {
    push_ints(L, a->ints, a->nints);
    lua_setfield(L, -2, "ints");
  }
  if (a->f[0] != 0 || a->f[1] != 0) {
    lua_createtable(L, 2, 0);
    lua_pushnumber(L, a->f[0]), lua_rawseti(L, -2, 1);
    lua_pushnumber(L, a->f[1]), lua_rawseti(L, -2, 2);
    lua_setfield(L, -2, "f");
  }
  if (a->has_dtype) lua_pushstring(L, dle_dtype_name(a->dtype)), lua_setfield(L, -2, "dtype");
  if (a->keepdim) lua_pushboolean(L, 1), lua_setfield(L, -2, "keepdim");
  if (a->index_base)
    lua_pushinteger(L, (lua_Integer)a->index_base), lua_setfield(L, -2, "index_base");
  if (a->generator) {
    dle_lua_push_generator(L, a->generator);
    lua_setfield(L, -2, "generator");
  }
}

static void push_tensor_list(lua_State *L, dle_tensor *const *ts, int n, const char *objs,
                             const char *ids) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    dle_tensor_retain(ts[i]);
    dle_lua_push(L, ts[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, objs);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushinteger(L, (lua_Integer)(uintptr_t)ts[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, ids);
}

/** dle.core._trace_end() -> {records..., unsafe = reason or nil}: stops the tracer. Each record is
 * {op = name ("detach" for the pseudo-op), op_id, ins, in_ids, outs, out_ids, attrs, given,
 * fresh, grad}: ins/outs tensors (the same engine tensors the ops saw), *_ids their identities. */
static int l_trace_end(lua_State *L) {
  dle_trace *t = dle_trace_end();
  if (!t) return luaL_error(L, "trace_end: no trace is running");
  lua_createtable(L, t->n, 1);
  for (int i = 0; i < t->n; i++) {
    const dle_trace_record *r = &t->rec[i];
    lua_createtable(L, 0, 11);
    lua_pushstring(L, r->op == DLE_TRACE_DETACH          ? "detach"
                      : r->op == DLE_TRACE_GRAD_ACC      ? "grad_acc"
                      : r->op == DLE_TRACE_GRAD_READ     ? "grad_of"
                      : r->op == DLE_TRACE_SDPA_QKV_GRAD ? "sdpa_qkv_backward"
                                                         : dle_op_table[r->op].name);
    lua_setfield(L, -2, "op");
    lua_pushinteger(L, r->op), lua_setfield(L, -2, "op_id");
    push_tensor_list(L, r->ins, r->nin, "ins", "in_ids");
    push_tensor_list(L, r->outs, r->nout, "outs", "out_ids");
    push_attrs(L, &r->attrs);
    lua_setfield(L, -2, "attrs");
    lua_pushboolean(L, r->given), lua_setfield(L, -2, "given");
    lua_pushboolean(L, r->fresh), lua_setfield(L, -2, "fresh");
    lua_pushboolean(L, r->grad_enabled), lua_setfield(L, -2, "grad");
    lua_rawseti(L, -2, i + 1);
  }
  if (t->unsafe[0]) lua_pushstring(L, t->unsafe), lua_setfield(L, -2, "unsafe");
  dle_trace_free(t);
  return 1;
}

/** dle.core._grad_accumulate(leaf, g) -> leaf's .grad after g is accumulated into it as backward()
 * does (a replayed GRAD_ACC record). */
static int l_grad_accumulate(lua_State *L) {
  dle_tensor *leaf = dle_lua_check(L, 1), *g = dle_lua_check(L, 2);
  DLE_LUA_TRY(L, dle_grad_accumulate(leaf, g));
  dle_tensor_retain(leaf->grad);
  dle_lua_push(L, leaf->grad);
  return 1;
}

/** dle.core._trace_active() -> whether this thread is tracing. */
static int l_trace_active(lua_State *L) {
  lua_pushboolean(L, dle_trace_active());
  return 1;
}

/** dle.core._trace_note(reason): marks the running trace unsafe (nothing when none runs). */
static int l_trace_note(lua_State *L) {
  dle_trace_note_unsafe("%s", luaL_checkstring(L, 1));
  return 0;
}

/** dle.core._tensor_id(t) -> an integer naming t's engine tensor (the ids of trace_end). */
static int l_tensor_id(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)(uintptr_t)dle_lua_check(L, 1));
  return 1;
}

/** dle.core._peek_scalar(t) -> the number a one-element CPU tensor holds, read without making a
 * running trace unsafe (the graph's own bookkeeping of its constants). */
static int l_peek_scalar(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  if (dle_tensor_numel(t) != 1 || dle_tensor_device(t).type != DLE_CPU)
    return luaL_error(L, "peek_scalar: expected a one-element CPU tensor");
  int64_t zero[DLE_MAX_DIMS] = {0};
  double v = dle_tensor_get(t, zero);
  if (t->dtype == DLE_BOOL)
    lua_pushboolean(L, v != 0);
  else if (!dle_dtype_is_float(t->dtype))
    lua_pushinteger(L, (lua_Integer)v);
  else
    lua_pushnumber(L, v);
  return 1;
}

/** dle.core._tensor_view_key(t) -> a string naming t's storage, dtype and geometry: two headers
 * with the same key see the same elements (autograd saves aliases of the tensors an op used). */
static int l_tensor_view_key(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  char part[64];
  snprintf(part, sizeof part, "%p:%lld:%d:", (void *)t->storage, (long long)t->offset,
           (int)t->dtype);
  luaL_addstring(&b, part);
  for (int d = 0; d < t->ndim; d++) {
    snprintf(part, sizeof part, "%lld/%lld,", (long long)t->sizes[d], (long long)t->strides[d]);
    luaL_addstring(&b, part);
  }
  luaL_pushresult(&b);
  return 1;
}

static int64_t int_field(lua_State *L, int idx, const char *what) {
  int ok = 0;
  lua_Integer v = lua_tointegerx(L, idx, &ok);
  if (!ok) luaL_error(L, "graph_attrs: %s must be integers, got %s", what, luaL_typename(L, idx));
  return (int64_t)v;
}

/** dle.core._graph_attrs(tbl) -> the engine attrs of a node, packed once for its replays; tbl as
 * trace_end gives them (missing fields are zero). */
static int l_graph_attrs(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  dle_attrs *a = lua_newuserdatauv(L, sizeof *a, 1);
  memset(a, 0, sizeof *a);
  int ud = lua_gettop(L);
  if (lua_getfield(L, 1, "ints") == LUA_TTABLE) {
    int n = (int)lua_rawlen(L, -1);
    if (n > DLE_MAX_ATTR_INTS)
      return luaL_error(L, "graph_attrs: at most %d ints, got %d", DLE_MAX_ATTR_INTS, n);
    for (int i = 0; i < n; i++) {
      lua_rawgeti(L, -1, i + 1);
      a->ints[i] = int_field(L, -1, "ints");
      lua_pop(L, 1);
    }
    a->nints = n;
  }
  lua_pop(L, 1);
  if (lua_getfield(L, 1, "f") == LUA_TTABLE) {
    for (int i = 0; i < 2; i++) {
      lua_rawgeti(L, -1, i + 1);
      a->f[i] = lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  if (lua_getfield(L, 1, "dtype") != LUA_TNIL) {
    a->dtype = dle_lua_check_dtype(L, -1, "graph_attrs");
    a->has_dtype = true;
  }
  lua_pop(L, 1);
  lua_getfield(L, 1, "keepdim");
  a->keepdim = lua_toboolean(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, 1, "index_base");
  a->index_base = lua_isnil(L, -1) ? 0 : int_field(L, -1, "index_base");
  lua_pop(L, 1);
  lua_getfield(L, 1, "generator");
  a->generator = dle_lua_opt_generator(L, -1, "graph_attrs");
  lua_setiuservalue(L, ud, 1); /* keeps the generator alive */
  luaL_setmetatable(L, ATTRS_MT);
  return 1;
}

/** dle.core._graph_op(op_id, attrs, target, no_grad, inputs...) -> the op's outputs: one call of
 * the front door as a trace recorded it. attrs: from graph_attrs (or nil); target: the tensor
 * written as output 1 (in place; nil for a new one); no_grad: run without recording. Dropout
 * draws a new seed and offset from its generator as dle.dropout does; the pseudo-op id of
 * detach detaches its input. */
static int l_graph_op(lua_State *L) {
  lua_Integer op = luaL_checkinteger(L, 1);
  static const dle_attrs none;
  const dle_attrs *a = lua_isnil(L, 2) ? &none : luaL_checkudata(L, 2, ATTRS_MT);
  dle_tensor *target = lua_isnil(L, 3) ? NULL : dle_lua_check(L, 3);
  bool no_grad = lua_toboolean(L, 4);
  int nin = lua_gettop(L) - 4;
  if (nin > 64) return luaL_error(L, "graph_op: at most 64 inputs, got %d", nin);
  dle_tensor *ins[64];
  for (int i = 0; i < nin; i++) ins[i] = dle_lua_check(L, 5 + i);
  if (op == DLE_TRACE_DETACH) {
    if (nin != 1) return luaL_error(L, "graph_op: detach takes 1 input, got %d", nin);
    dle_tensor *r = NULL;
    DLE_LUA_TRY(L, dle_detach(&r, ins[0]));
    dle_lua_push(L, r);
    return 1;
  }
  if (op == DLE_TRACE_SDPA_QKV_GRAD) {
    if (nin != 3) return luaL_error(L, "graph_op: sdpa_qkv_backward takes 3 inputs, got %d", nin);
    dle_tensor *r = NULL;
    DLE_LUA_TRY(L, dle_sdpa_backward_packed(&r, ins[0], ins[1], ins[2], a));
    dle_lua_push(L, r);
    return 1;
  }
  const dle_op_info *info = op >= 0 && op < DLE_NUM_OPS ? dle_op_get_info((dle_op)op) : NULL;
  if (!info) return luaL_error(L, "graph_op: invalid op id %d", (int)op);
  dle_tensor *outs[DLE_MAX_OUTS] = {target};
  bool was = no_grad ? dle_set_grad_enabled(false) : false;
  dle_status st;
  if (op == DLE_OP_DROPOUT && nin == 1)
    st = dle_dropout(&outs[0], ins[0], a->f[0], a->generator);
  else
    st = dle_op_call((dle_op)op, outs, ins, nin, a);
  if (no_grad) dle_set_grad_enabled(was);
  if (st != DLE_OK) return dle_lua_fail(L);
  for (int k = 0; k < info->nout; k++) {
    if (k == 0 && target)
      lua_pushvalue(L, 3);
    else
      dle_lua_push(L, outs[k]);
  }
  return info->nout;
}

#define PROGRAM_MT "dle.graph.fused_program"

typedef struct {
  int nin, n;
  dle_fused_instr instr[DLE_FUSED_MAX_REGS];
} fused_program;

/** dle.core._fused_program(instrs, nin) -> a packed program for fused_run: instrs a list of
 * {op_id, a, b, f0, f1} (registers 1-based: 1..nin are the inputs, nin + k instruction k). */
static int l_fused_program(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer nin = luaL_checkinteger(L, 2);
  int n = (int)lua_rawlen(L, 1);
  if (nin < 0 || n < 1 || nin + n > DLE_FUSED_MAX_REGS)
    return luaL_error(L, "fused_program: %d inputs and %d instructions (at most %d registers)",
                      (int)nin, n, DLE_FUSED_MAX_REGS);
  fused_program *p = lua_newuserdatauv(L, sizeof *p, 0);
  memset(p, 0, sizeof *p);
  p->nin = (int)nin, p->n = n;
  for (int k = 0; k < n; k++) {
    lua_rawgeti(L, 1, k + 1);
    luaL_checktype(L, -1, LUA_TTABLE);
    lua_Number v[5] = {0};
    for (int j = 0; j < 5; j++) {
      lua_rawgeti(L, -1, j + 1);
      v[j] = lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    p->instr[k] = (dle_fused_instr){(int)v[0], (int)v[1] - 1, (int)v[2] - 1, v[3], v[4]};
    if (!dle_fused_supports((dle_op)p->instr[k].op))
      return luaL_error(L, "fused_program: instruction %d: op id %d cannot be fused", k + 1,
                        p->instr[k].op);
  }
  luaL_setmetatable(L, PROGRAM_MT);
  return 1;
}

/* The arguments both fused entry points share: (program, shape, dtype, [extra...,] inputs...)
 * with `extra` arguments between the dtype and the inputs. */
typedef struct {
  fused_program *p;
  int ndim, nin;
  int64_t sizes[DLE_MAX_DIMS];
  dle_dtype dt;
  dle_tensor *ins[DLE_FUSED_MAX_REGS];
} fused_args;

static void check_fused_args(lua_State *L, fused_args *a, int extra, const char *fn) {
  a->p = luaL_checkudata(L, 1, PROGRAM_MT);
  int next;
  a->ndim = dle_lua_sizes(L, 2, a->sizes, &next, fn, 0);
  a->dt = dle_lua_check_dtype(L, 3, fn);
  a->nin = lua_gettop(L) - 3 - extra;
  if (a->nin != a->p->nin)
    luaL_error(L, "%s: the program takes %d inputs, got %d", fn, a->p->nin, a->nin);
  for (int i = 0; i < a->nin; i++) a->ins[i] = dle_lua_check(L, 4 + extra + i);
}

/** dle.core._fused_run(program, shape, dtype, inputs...) -> a new tensor of shape and dtype: the
 * program run over inputs that broadcast to shape (engine/fused.h). */
static int l_fused_run(lua_State *L) {
  fused_args a;
  check_fused_args(L, &a, 0, "fused_run");
  dle_tensor *out = NULL;
  DLE_LUA_TRY(L, dle_fused_run(&out, a.ins, a.nin, a.p->instr, a.p->n, a.ndim, a.sizes, a.dt));
  dle_lua_push(L, out);
  return 1;
}

/** dle.core._fused_reduce(program, shape, dtype, reduce, last_dim, inputs...) -> the program run
 * over inputs that broadcast to shape, reduced by reduce ("sum", "mean", "amax", "amin") over
 * every element (0-dim) or over the last dim (dle.h: dle_fused_reduce). */
static int l_fused_reduce(lua_State *L) {
  fused_args a;
  check_fused_args(L, &a, 2, "fused_reduce");
  static const char *const names[] = {"sum", "mean", "amax", "amin", NULL};
  static const dle_op ops[] = {DLE_OP_SUM, DLE_OP_MEAN, DLE_OP_AMAX, DLE_OP_AMIN};
  dle_op reduce = ops[luaL_checkoption(L, 4, NULL, names)];
  bool last_dim = lua_toboolean(L, 5);
  dle_tensor *out = NULL;
  DLE_LUA_TRY(L, dle_fused_reduce(&out, a.ins, a.nin, a.p->instr, a.p->n, a.ndim, a.sizes, a.dt,
                                  reduce, last_dim));
  dle_lua_push(L, out);
  return 1;
}

#define CGRAPH_MT "dle.graph.cgraph"

static int cgraph_gc(lua_State *L) {
  dle_graph **g = luaL_checkudata(L, 1, CGRAPH_MT);
  dle_graph_free(*g);
  *g = NULL;
  return 0;
}

/** dle.core._cgraph_load(path) -> a graph file loaded by the C API (dle_graph_load), for tests
 * that compare it with dle.graph.load. */
static int l_cgraph_load(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  dle_graph **g = lua_newuserdatauv(L, sizeof *g, 0);
  *g = NULL;
  luaL_setmetatable(L, CGRAPH_MT);
  DLE_LUA_TRY(L, dle_graph_load(g, path));
  return 1;
}

/** dle.core._cgraph_run(g, inputs...) -> its outputs, run by dle_graph_run. */
static int l_cgraph_run(lua_State *L) {
  dle_graph **g = luaL_checkudata(L, 1, CGRAPH_MT);
  if (!*g) return luaL_error(L, "cgraph_run: the graph was freed");
  int nin = lua_gettop(L) - 1;
  if (nin > 64) return luaL_error(L, "cgraph_run: at most 64 inputs, got %d", nin);
  dle_tensor *ins[64];
  for (int i = 0; i < nin; i++) ins[i] = dle_lua_check(L, 2 + i);
  int nout = dle_graph_num_outputs(*g);
  luaL_checkstack(L, nout + 2, "cgraph_run");
  dle_tensor **outs = lua_newuserdatauv(L, sizeof *outs * (size_t)(nout ? nout : 1), 0);
  DLE_LUA_TRY(L, dle_graph_run(*g, ins, nin, outs, nout));
  for (int k = 0; k < nout; k++) dle_lua_push(L, outs[k]);
  return nout;
}

/** dle.core._cgraph_inputs(g) -> a list of {shape, dtype}: what dle_graph_input reports. */
static int l_cgraph_inputs(lua_State *L) {
  dle_graph **g = luaL_checkudata(L, 1, CGRAPH_MT);
  if (!*g) return luaL_error(L, "cgraph_inputs: the graph was freed");
  int n = dle_graph_num_inputs(*g);
  lua_createtable(L, n, 0);
  for (int k = 0; k < n; k++) {
    int ndim;
    int64_t sizes[DLE_MAX_DIMS];
    dle_dtype dt;
    DLE_LUA_TRY(L, dle_graph_input(*g, k, &ndim, sizes, &dt));
    lua_createtable(L, 2, 0);
    lua_createtable(L, ndim, 0);
    for (int d = 0; d < ndim; d++) {
      lua_pushinteger(L, (lua_Integer)sizes[d]);
      lua_rawseti(L, -2, d + 1);
    }
    lua_rawseti(L, -2, 1);
    lua_pushstring(L, dle_dtype_name(dt));
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, k + 1);
  }
  return 1;
}

void dle_lua_open_graph(lua_State *L, int module, int methods) {
  (void)methods;
  luaL_newmetatable(L, ATTRS_MT);
  lua_pop(L, 1);
  luaL_newmetatable(L, PROGRAM_MT);
  lua_pop(L, 1);
  luaL_newmetatable(L, CGRAPH_MT);
  lua_pushcfunction(L, cgraph_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  // clang-format off
  static const luaL_Reg fns[] = {
      {"_trace_begin", l_trace_begin}, {"_trace_end", l_trace_end},
      {"_trace_active", l_trace_active}, {"_grad_accumulate", l_grad_accumulate}, {"_trace_note", l_trace_note},
      {"_tensor_id", l_tensor_id}, {"_graph_attrs", l_graph_attrs}, {"_graph_op", l_graph_op},
      {"_peek_scalar", l_peek_scalar}, {"_tensor_view_key", l_tensor_view_key},
      {"_fused_program", l_fused_program}, {"_fused_run", l_fused_run},
      {"_fused_reduce", l_fused_reduce}, {"_cgraph_load", l_cgraph_load},
      {"_cgraph_run", l_cgraph_run}, {"_cgraph_inputs", l_cgraph_inputs}, {NULL, NULL}};
  // clang-format on
  dle_lua_setfuncs(L, module, fns);
}
