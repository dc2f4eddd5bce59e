/* lua_onnx_save.c — the writing half of dle.onnx: a ModelProto described by plain Lua tables (as
 * lua/dle/onnx/export.lua builds it) packed by protobuf-c's generated code (onnx.pb-c.c, compiled
 * into lua_onnx.c; this file uses its header) and written to a file.
 *
 *   core._onnx_save(path, model)
 *
 * model = {ir_version, producer_name, producer_version, opset_import = {{domain, version}},
 *          graph = G}
 * G = {name, nodes = {{op_type, name, domain, inputs = {...}, outputs = {...},
 *                     attributes = {{name, type = "INT"|"FLOAT"|"STRING"|"INTS"|"FLOATS"|"TENSOR"|
 *                                    "GRAPH", value}}}},
 *      initializers = {{name, tensor}}, inputs/outputs/value_info = {{name, elem_type,
 *      shape = {dim...}}}}  (a dim is an integer, or a string: dim_param)
 * A tensor's elements are written as raw_data straight from its storage (it must be a
 * contiguous CPU tensor: the Lua side makes it so); the bytes are little-endian, as dle's.
 * Every struct lives in an arena owned by a userdata, so a Lua error while reading the tables
 * frees everything. */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/dle.h"
#include "lua_util.h"
#include "onnx.pb-c.h"
#include "onnx_dtypes.h"

/* ---- the arena: a list of malloc'd blocks freed together by the userdata's __gc ---- */

typedef struct block {
  struct block *next;
  max_align_t data[];
} block;

typedef struct {
  block *head;
  FILE *f;
} arena;

static int arena_gc(lua_State *L) {
  arena *a = lua_touserdata(L, 1);
  while (a->head) {
    block *b = a->head;
    a->head = b->next;
    free(b);
  }
  if (a->f) fclose(a->f);
  a->f = NULL;
  return 0;
}

static void *alloc(lua_State *L, arena *a, size_t n) {
  block *b = calloc(1, sizeof(block) + (n ? n : 1));
  if (!b) luaL_error(L, "dle.onnx.save: out of memory");
  b->next = a->head;
  a->head = b;
  return b->data;
}

/* A new message of the type desc describes, holding its defaults. */
static void *new_message(lua_State *L, arena *a, const ProtobufCMessageDescriptor *desc) {
  void *m = alloc(L, a, desc->sizeof_message);
  protobuf_c_message_init(desc, m);
  return m;
}

/* A copy of the string at idx ("" when the value there is not a string); *len, when len is not
 * NULL, receives its length. */
static char *copy_string(lua_State *L, arena *a, int idx, size_t *len) {
  size_t n = 0;
  const char *s = lua_isstring(L, idx) ? lua_tolstring(L, idx, &n) : "";
  char *out = alloc(L, a, n + 1);
  memcpy(out, s, n);
  if (len) *len = n;
  return out;
}

static char *str_field(lua_State *L, arena *a, int idx, const char *key) {
  lua_getfield(L, idx, key);
  char *out = copy_string(L, a, -1, NULL);
  lua_pop(L, 1);
  return out;
}

static lua_Integer int_field(lua_State *L, int idx, const char *key) {
  lua_getfield(L, idx, key);
  lua_Integer v = lua_tointeger(L, -1);
  lua_pop(L, 1);
  return v;
}

/* The elements made by f from each value of the list at idx[key] (f gets the value's absolute
 * index); *n is set to their count. */
typedef void *(*elem_fn)(lua_State *L, arena *a, int idx, int depth);
static void **list_field(lua_State *L, arena *a, int idx, const char *key, size_t *n, elem_fn f,
                         int depth) {
  lua_getfield(L, idx, key);
  int list = lua_gettop(L);
  *n = lua_istable(L, list) ? lua_rawlen(L, list) : 0;
  void **out = alloc(L, a, *n * sizeof *out);
  for (size_t i = 0; i < *n; i++) {
    lua_rawgeti(L, list, (lua_Integer)i + 1);
    out[i] = f(L, a, lua_gettop(L), depth);
    lua_settop(L, list);
  }
  lua_pop(L, 1);
  return out;
}

static void *string_elem(lua_State *L, arena *a, int idx, int depth) {
  (void)depth;
  return copy_string(L, a, idx, NULL);
}

/* The strings of the list at idx[key]. */
static char **strings_field(lua_State *L, arena *a, int idx, const char *key, size_t *n) {
  return (char **)list_field(L, a, idx, key, n, string_elem, 0);
}

/* A TensorProto of the tensor at the top of the stack (not popped), named name. */
static Onnx__TensorProto *tensor_proto(lua_State *L, arena *a, const char *name) {
  dle_tensor *t = dle_lua_check(L, -1);
  Onnx__TensorProto *tp = new_message(L, a, &onnx__tensor_proto__descriptor);
  int et = onnx_elem_type(t->dtype);
  if (et < 0)
    luaL_error(L, "dle.onnx.save: tensor '%s' has dtype %s, which ONNX export does not support",
               name, dle_dtype_name(t->dtype));
  if (!dle_tensor_is_contiguous(t) || dle_tensor_device(t).type != DLE_CPU)
    luaL_error(L, "dle.onnx.save: tensor '%s' must be a contiguous CPU tensor", name);
  tp->name = (char *)name;
  tp->data_type = et;
  tp->has_data_type = 1;
  int nd = t->ndim;
  tp->n_dims = (size_t)nd;
  tp->dims = alloc(L, a, (size_t)nd * sizeof(int64_t));
  int64_t numel = 1;
  for (int d = 0; d < nd; d++) {
    tp->dims[d] = t->sizes[d];
    numel *= tp->dims[d];
  }
  tp->has_raw_data = 1;
  tp->raw_data.len = (size_t)numel * dle_dtype_size(t->dtype);
  tp->raw_data.data = dle_tensor_data(t); /* the tensor stays referenced by the Lua tables */
  return tp;
}

/* A ValueInfoProto {name, elem_type, shape = {dim...}} (no shape: one of unknown rank). */
static void *value_info_proto(lua_State *L, arena *a, int v, int depth) {
  (void)depth;
  Onnx__ValueInfoProto *vi = new_message(L, a, &onnx__value_info_proto__descriptor);
  vi->name = str_field(L, a, v, "name");
  Onnx__TypeProto *tp = vi->type = new_message(L, a, &onnx__type_proto__descriptor);
  Onnx__TypeProto__Tensor *tt = new_message(L, a, &onnx__type_proto__tensor__descriptor);
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  tt->elem_type = (int32_t)int_field(L, v, "elem_type");
  tt->has_elem_type = 1;
  lua_getfield(L, v, "shape");
  if (lua_istable(L, -1)) {
    Onnx__TensorShapeProto *sp = tt->shape =
        new_message(L, a, &onnx__tensor_shape_proto__descriptor);
    sp->n_dim = lua_rawlen(L, -1);
    sp->dim = alloc(L, a, sp->n_dim * sizeof *sp->dim);
    for (size_t d = 0; d < sp->n_dim; d++) {
      Onnx__TensorShapeProto__Dimension *dm = sp->dim[d] =
          new_message(L, a, &onnx__tensor_shape_proto__dimension__descriptor);
      lua_rawgeti(L, -1, (lua_Integer)d + 1);
      if (lua_type(L, -1) == LUA_TSTRING) {
        dm->dim_param = copy_string(L, a, -1, NULL);
        dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      } else {
        dm->dim_value = lua_tointeger(L, -1);
        dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      }
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  return vi;
}

static Onnx__ValueInfoProto **value_infos(lua_State *L, arena *a, int idx, const char *key,
                                          size_t *n) {
  return (Onnx__ValueInfoProto **)list_field(L, a, idx, key, n, value_info_proto, 0);
}

static Onnx__GraphProto *graph_proto(lua_State *L, arena *a, int idx, int depth);

static void *attribute_proto(lua_State *L, arena *a, int idx, int depth) {
  Onnx__AttributeProto *at = new_message(L, a, &onnx__attribute_proto__descriptor);
  at->name = str_field(L, a, idx, "name");
  lua_getfield(L, idx, "type");
  const char *type = lua_isstring(L, -1) ? lua_tostring(L, -1) : "";
  lua_getfield(L, idx, "value");
  int v = lua_gettop(L);
  at->has_type = 1;
  if (!strcmp(type, "INT")) {
    at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    at->i = lua_tointeger(L, v);
    at->has_i = 1;
  } else if (!strcmp(type, "FLOAT")) {
    at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    at->f = (float)lua_tonumber(L, v);
    at->has_f = 1;
  } else if (!strcmp(type, "STRING")) {
    at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    at->s.data = (uint8_t *)copy_string(L, a, v, &at->s.len);
    at->has_s = 1;
  } else if (!strcmp(type, "INTS") || !strcmp(type, "FLOATS")) {
    int ints = type[0] == 'I';
    size_t n = lua_istable(L, v) ? lua_rawlen(L, v) : 0;
    at->type = ints ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS
                    : ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    if (ints) {
      at->n_ints = n;
      at->ints = alloc(L, a, n * sizeof(int64_t));
    } else {
      at->n_floats = n;
      at->floats = alloc(L, a, n * sizeof(float));
    }
    for (size_t i = 0; i < n; i++) {
      lua_rawgeti(L, v, (lua_Integer)i + 1);
      if (ints)
        at->ints[i] = lua_tointeger(L, -1);
      else
        at->floats[i] = (float)lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
  } else if (!strcmp(type, "TENSOR")) {
    at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    at->t = tensor_proto(L, a, "");
  } else if (!strcmp(type, "GRAPH")) {
    at->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    at->g = graph_proto(L, a, v, depth + 1);
  } else {
    luaL_error(L, "dle.onnx.save: attribute '%s' has unknown type '%s'", at->name, type);
  }
  lua_pop(L, 2);
  return at;
}

static void *node_proto(lua_State *L, arena *a, int idx, int depth) {
  Onnx__NodeProto *n = new_message(L, a, &onnx__node_proto__descriptor);
  n->op_type = str_field(L, a, idx, "op_type");
  n->name = str_field(L, a, idx, "name");
  n->domain = str_field(L, a, idx, "domain");
  n->input = strings_field(L, a, idx, "inputs", &n->n_input);
  n->output = strings_field(L, a, idx, "outputs", &n->n_output);
  n->attribute = (Onnx__AttributeProto **)list_field(L, a, idx, "attributes", &n->n_attribute,
                                                     attribute_proto, depth);
  return n;
}

/* An initializer {name, tensor}. */
static void *initializer_proto(lua_State *L, arena *a, int idx, int depth) {
  (void)depth;
  char *name = str_field(L, a, idx, "name");
  lua_getfield(L, idx, "tensor");
  return tensor_proto(L, a, name);
}

static Onnx__GraphProto *graph_proto(lua_State *L, arena *a, int idx, int depth) {
  if (depth > 64) luaL_error(L, "dle.onnx.save: graphs nested deeper than 64 levels");
  luaL_checkstack(L, 16, "dle.onnx.save");
  idx = lua_absindex(L, idx);
  Onnx__GraphProto *g = new_message(L, a, &onnx__graph_proto__descriptor);
  g->name = str_field(L, a, idx, "name");
  g->node = (Onnx__NodeProto **)list_field(L, a, idx, "nodes", &g->n_node, node_proto, depth);
  g->initializer = (Onnx__TensorProto **)list_field(L, a, idx, "initializers", &g->n_initializer,
                                                    initializer_proto, depth);
  g->input = value_infos(L, a, idx, "inputs", &g->n_input);
  g->output = value_infos(L, a, idx, "outputs", &g->n_output);
  g->value_info = value_infos(L, a, idx, "value_info", &g->n_value_info);
  return g;
}

/* An opset import {domain, version}. */
static void *opset_proto(lua_State *L, arena *a, int idx, int depth) {
  (void)depth;
  Onnx__OperatorSetIdProto *o = new_message(L, a, &onnx__operator_set_id_proto__descriptor);
  o->domain = str_field(L, a, idx, "domain");
  o->version = int_field(L, idx, "version");
  o->has_version = 1;
  return o;
}

/* A protobuf-c output buffer that writes through to a FILE. */
typedef struct {
  ProtobufCBuffer base;
  FILE *f;
  int failed;
} file_buffer;

static void file_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
  file_buffer *fb = (file_buffer *)b;
  if (!fb->failed && len && fwrite(data, 1, len, fb->f) != len) fb->failed = 1;
}

static int l_onnx_save(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  arena *a = dle_lua_new_owned(L, sizeof *a, "dle.onnx_arena", arena_gc);

  Onnx__ModelProto *m = new_message(L, a, &onnx__model_proto__descriptor);
  m->ir_version = int_field(L, 2, "ir_version");
  m->has_ir_version = 1;
  m->producer_name = str_field(L, a, 2, "producer_name");
  m->producer_version = str_field(L, a, 2, "producer_version");
  m->opset_import = (Onnx__OperatorSetIdProto **)list_field(L, a, 2, "opset_import",
                                                            &m->n_opset_import, opset_proto, 0);
  lua_getfield(L, 2, "graph");
  m->graph = graph_proto(L, a, -1, 0);
  lua_pop(L, 1);

  a->f = fopen(path, "wb");
  if (!a->f) return luaL_error(L, "dle.onnx.save: cannot open '%s' for writing", path);
  file_buffer fb = {{file_append}, a->f, 0};
  protobuf_c_message_pack_to_buffer(&m->base, &fb.base);
  int closed = fclose(a->f);
  a->f = NULL;
  if (fb.failed || closed != 0) return luaL_error(L, "dle.onnx.save: cannot write '%s'", path);
  lua_pushinteger(L, (lua_Integer)protobuf_c_message_get_packed_size(&m->base));
  return 1;
}

void dle_lua_open_onnx_save(lua_State *L, int module, int methods) {
  static const luaL_Reg fns[] = {{"_onnx_save", l_onnx_save}, {NULL, NULL}};
  dle_lua_register(L, module, methods, fns, NULL, NULL);
}
