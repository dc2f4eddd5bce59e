/* lua_onnx.c — the native half of dle.onnx: ONNX protobuf messages (decoded by protobuf-c with the
 * code protoc-c generates at build time from libonnx-dev's onnx.proto, see premake5.lua) unpacked
 * into plain Lua tables and dle tensors. The graph semantics live in lua/dle/onnx/.
 *
 *   core._onnx_model(src, is_bytes, what)  -> model table (below)
 *   core._onnx_tensor(src, is_bytes, what) -> tensor, name     (a serialized TensorProto)
 *   core._onnx_sequence(src, is_bytes, what) -> {tensor...}, name   (a SequenceProto of tensors)
 *   core._onnx_optional(src, is_bytes, what) -> value, kind, name   (an OptionalProto: value is a
 *       tensor (kind "tensor"), a list of tensors ("sequence") or nil ("none"))
 *
 * src is a file path, or the message's bytes when is_bytes is true; what prefixes every error
 * ("dle.onnx.load: model.onnx"). The model table:
 *   {ir_version, producer_name, producer_version, opset_import = {[domain] = version},
 *    graph = {name, nodes = {{op_type, name, domain, inputs, outputs, attributes}},
 *             initializers = {{name, tensor}}, inputs/outputs/value_info = {{name, type}}}}
 * where an attribute is {type = "INT"|"FLOAT"|"STRING"|"TENSOR"|"GRAPH"|"INTS"|..., value}, a
 * type is {kind = "tensor", elem_type (ONNX's number), dtype (dle's name or nil), shape = {dim...}}
 * with each dim an integer (dim_value), a string (dim_param) or false (unknown); other kinds
 * ("sequence", "map", "optional", "sparse_tensor") carry no more. An empty input or output name
 * (an omitted optional argument) stays "". protobuf-c checks the wire format; this file checks
 * what it does not: tensor dims against the data's size, negative dims, data types. */
#include <lauxlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/dle.h"
#include "lua_util.h"
/* The code protoc-c generates from onnx.proto (into <build>/gen/onnx, see premake5.lua), compiled
 * as part of this file: the build (premake, LuaRocks) then only needs its include path. */
#include "onnx.pb-c.c"
/* SequenceProto and OptionalProto (bindings/onnx_data.proto): the backend tests' non-tensor values. */
#include "onnx_data.pb-c.c"
#include "onnx_dtypes.h"

/* Nested graphs (If/Loop bodies) deeper than this are rejected: a crafted file cannot exhaust
 * the C stack through our recursion. */
#define MAX_GRAPH_DEPTH 64

/* Raises "what: message" without a position: the Lua layer already names the public function. */
static int onnx_fail(lua_State *L, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int onnx_fail(lua_State *L, const char *what, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  lua_pushfstring(L, "%s: %s", what, buf);
  return lua_error(L);
}

/* ---- owned memory that a Lua error must not leak: a userdata whose __gc frees it ---- */

typedef struct {
  void *bytes;           /* file contents (malloc) */
  ProtobufCMessage *msg; /* the unpacked message */
} onnx_box;

static int box_gc(lua_State *L) {
  onnx_box *b = lua_touserdata(L, 1);
  if (b->msg) protobuf_c_message_free_unpacked(b->msg, NULL);
  free(b->bytes);
  b->msg = NULL;
  b->bytes = NULL;
  return 0;
}

static onnx_box *push_box(lua_State *L) {
  return dle_lua_new_owned(L, sizeof(onnx_box), "dle.onnx_box", box_gc);
}

/* Frees the box's message now rather than at the next collection (a model's weights would be
 * held twice until then). The box is the first value above the three arguments. */
static void release_box(lua_State *L) {
  lua_pushcfunction(L, box_gc);
  lua_pushvalue(L, 4);
  lua_call(L, 1, 0);
}

/* Unpacks the message at argument 1 (a path, or bytes when argument 2 is true) with desc; the box
 * holding it is left on the stack. *what, the name errors give, is argument 3 (what the Lua side
 * reads), or fn. */
static ProtobufCMessage *unpack_arg(lua_State *L, const ProtobufCMessageDescriptor *desc,
                                    const char *fn, const char **what_out) {
  const char *what = *what_out = luaL_optstring(L, 3, fn);
  size_t len;
  const char *src = luaL_checklstring(L, 1, &len);
  int is_bytes = lua_toboolean(L, 2);
  lua_settop(L, 3);
  onnx_box *b = push_box(L);
  const uint8_t *data = (const uint8_t *)src;
  if (!is_bytes) {
    FILE *f = fopen(src, "rb");
    if (!f) return onnx_fail(L, what, "cannot open the file"), NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
      fclose(f);
      return onnx_fail(L, what, "cannot read the file"), NULL;
    }
    b->bytes = malloc(size ? (size_t)size : 1);
    size_t got = b->bytes ? fread(b->bytes, 1, (size_t)size, f) : 0;
    fclose(f);
    if (!b->bytes) return onnx_fail(L, what, "out of memory reading %ld bytes", size), NULL;
    if (got != (size_t)size) return onnx_fail(L, what, "cannot read the file"), NULL;
    data = b->bytes;
    len = (size_t)size;
  }
  b->msg = protobuf_c_message_unpack(desc, NULL, len, data);
  if (!b->msg)
    onnx_fail(L, what, "not a valid ONNX %s (protobuf decoding failed)", desc->short_name);
  free(b->bytes); /* protobuf-c copied what it keeps */
  b->bytes = NULL;
  return b->msg;
}

/* ---- tensors ---- */

static const char *const onnx_type_names[] = {
    "UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",  "INT16",
    "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16", "DOUBLE",
    "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
#define N_ONNX_TYPES ((int)(sizeof onnx_type_names / sizeof onnx_type_names[0]))

static const char *onnx_type_name(int32_t t) {
  return t >= 0 && t < N_ONNX_TYPES ? onnx_type_names[t] : "unknown";
}

/* Fills the n elements of dst (dtype dt) from the typed field that holds them for this data type
 * (onnx.proto: float_data for FLOAT; int32_data for INT32, INT8, INT16, UINT8, UINT16, BOOL and
 * the bit patterns of FLOAT16/BFLOAT16; int64_data for INT64; uint64_data for UINT32 and UINT64;
 * double_data for DOUBLE). Returns the field's count so
 * the caller can check it, or -1 when the field holds no data of this type. */
static int64_t typed_count(const Onnx__TensorProto *tp, dle_dtype dt) {
  switch (dt) {
    case DLE_F32: return (int64_t)tp->n_float_data;
    case DLE_F64: return (int64_t)tp->n_double_data;
    case DLE_I64: return (int64_t)tp->n_int64_data;
    case DLE_U32:
    case DLE_U64: return (int64_t)tp->n_uint64_data;
    default: return (int64_t)tp->n_int32_data;
  }
}

/* dst[i] = (T)tp->FIELD[i]: a narrower dle dtype from its wider proto field. */
#define NARROW(T, FIELD)                                           \
  for (int64_t i = 0; i < n; i++) ((T *)dst)[i] = (T)tp->FIELD[i]; \
  return

static void copy_typed(void *dst, const Onnx__TensorProto *tp, dle_dtype dt, int64_t n) {
  if (n == 0) return; /* the field's array is NULL then, which memcpy must not be given */
  switch (dt) {
    case DLE_F32: memcpy(dst, tp->float_data, (size_t)n * 4); return;
    case DLE_F64: memcpy(dst, tp->double_data, (size_t)n * 8); return;
    case DLE_I64: memcpy(dst, tp->int64_data, (size_t)n * 8); return;
    case DLE_I32: memcpy(dst, tp->int32_data, (size_t)n * 4); return;
    case DLE_U64: memcpy(dst, tp->uint64_data, (size_t)n * 8); return;
    case DLE_F16:
    case DLE_BF16:
    case DLE_U16: NARROW(uint16_t, int32_data);
    case DLE_U8: NARROW(uint8_t, int32_data);
    case DLE_I8: NARROW(int8_t, int32_data);
    case DLE_I16: NARROW(int16_t, int32_data);
    case DLE_U32: NARROW(uint32_t, uint64_data);
    case DLE_BOOL:
      for (int64_t i = 0; i < n; i++) ((bool *)dst)[i] = tp->int32_data[i] != 0;
      return;
    default: return;
  }
}
#undef NARROW

/* Pushes the TensorProto as a new CPU tensor, or raises an error naming the tensor. */
static void push_tensor(lua_State *L, const Onnx__TensorProto *tp, const char *what) {
  const char *name = tp->name && tp->name[0] ? tp->name : "(unnamed)";
  if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
    onnx_fail(L, what, "tensor '%s': external data is not supported", name);
  if (tp->segment) onnx_fail(L, what, "tensor '%s': segmented tensors are not supported", name);
  dle_dtype dt = DLE_F32;
  if (!onnx_dtype(tp->data_type, &dt))
    onnx_fail(L, what, "tensor '%s': unsupported data type %s (%d)", name,
              onnx_type_name(tp->data_type), (int)tp->data_type);
  if (tp->n_dims > DLE_MAX_DIMS)
    onnx_fail(L, what, "tensor '%s' has %d dims (at most %d supported)", name, (int)tp->n_dims,
              DLE_MAX_DIMS);
  int64_t sizes[DLE_MAX_DIMS], numel = 1;
  for (size_t d = 0; d < tp->n_dims; d++) {
    sizes[d] = tp->dims[d];
    if (sizes[d] < 0)
      onnx_fail(L, what, "tensor '%s': dim %d is negative (%lld)", name, (int)d + 1,
                (long long)sizes[d]);
    if (__builtin_mul_overflow(numel, sizes[d], &numel) || numel > INT64_MAX / 16)
      onnx_fail(L, what, "tensor '%s': too many elements", name);
  }
  size_t esize = dle_dtype_size(dt);
  int64_t count = typed_count(tp, dt);
  const char *shape = dle_shape_str((char[128]){0}, 128, (int)tp->n_dims, sizes);
  if (tp->has_raw_data) {
    if (tp->raw_data.len != (size_t)numel * esize)
      onnx_fail(L, what, "tensor '%s': raw_data has %zu bytes, shape %s of %s needs %zu", name,
                tp->raw_data.len, shape, onnx_type_name(tp->data_type), (size_t)numel * esize);
  } else if (count != numel) {
    onnx_fail(L, what, "tensor '%s': %lld values for shape %s (%s)", name, (long long)count, shape,
              onnx_type_name(tp->data_type));
  }
  dle_tensor *t = NULL;
  if (dle_tensor_empty(&t, (int)tp->n_dims, sizes, dt, DLE_DEVICE_CPU) != DLE_OK)
    onnx_fail(L, what, "tensor '%s': %s", name, dle_last_error());
  void *dst = dle_tensor_data(t);
  if (tp->has_raw_data) {
    if (numel) memcpy(dst, tp->raw_data.data, (size_t)numel * esize); /* little-endian, as dle */
    if (dt == DLE_BOOL) /* any non-zero byte is true; dle's bools must be 0 or 1 */
      for (int64_t i = 0; i < numel; i++) ((uint8_t *)dst)[i] = ((uint8_t *)dst)[i] != 0;
  } else {
    copy_typed(dst, tp, dt, numel);
  }
  dle_lua_push(L, t);
}

/* ---- types, attributes, graphs ---- */

static void set_str(lua_State *L, const char *key, const char *v) {
  lua_pushstring(L, v ? v : "");
  lua_setfield(L, -2, key);
}

/* Pushes a list of n values: `push` (a statement using the 0-based index i) pushes each. */
#define PUSH_LIST(L, n, i, push)              \
  do {                                        \
    size_t count_ = (n);                      \
    lua_createtable(L, (int)count_, 0);       \
    for (size_t i = 0; i < count_; i++) {     \
      push;                                   \
      lua_rawseti(L, -2, (lua_Integer)i + 1); \
    }                                         \
  } while (0)

static void push_strings(lua_State *L, size_t n, char **s) {
  PUSH_LIST(L, n, i, lua_pushstring(L, s[i] ? s[i] : ""));
}

/* A dim of a shape: its size, its name (dim_param), or false when it has neither. */
static void push_dim(lua_State *L, const Onnx__TensorShapeProto__Dimension *dim) {
  if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
    lua_pushinteger(L, dim->dim_value);
  else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
    lua_pushstring(L, dim->dim_param ? dim->dim_param : "");
  else
    lua_pushboolean(L, 0);
}

static void push_type(lua_State *L, const Onnx__TypeProto *tp) {
  lua_createtable(L, 0, 4);
  if (!tp) {
    set_str(L, "kind", "unknown");
    return;
  }
  switch (tp->value_case) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE: {
      const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
      set_str(L, "kind", "tensor");
      lua_pushinteger(L, tt->elem_type);
      lua_setfield(L, -2, "elem_type");
      dle_dtype dt = DLE_F32;
      if (onnx_dtype(tt->elem_type, &dt)) set_str(L, "dtype", dle_dtype_name(dt));
      set_str(L, "elem_name", onnx_type_name(tt->elem_type));
      if (tt->shape) {
        PUSH_LIST(L, tt->shape->n_dim, d, push_dim(L, tt->shape->dim[d]));
        lua_setfield(L, -2, "shape");
      }
      return;
    }
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE: set_str(L, "kind", "sequence"); return;
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE: set_str(L, "kind", "map"); return;
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: set_str(L, "kind", "optional"); return;
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE: set_str(L, "kind", "sparse_tensor"); return;
    default: set_str(L, "kind", "unknown"); return;
  }
}

static void push_value_info(lua_State *L, const Onnx__ValueInfoProto *v) {
  lua_createtable(L, 0, 2);
  set_str(L, "name", v->name);
  push_type(L, v->type);
  lua_setfield(L, -2, "type");
}

static void push_value_infos(lua_State *L, size_t n, Onnx__ValueInfoProto **v) {
  PUSH_LIST(L, n, i, push_value_info(L, v[i]));
}

static void push_graph(lua_State *L, const Onnx__GraphProto *g, const char *what, int depth);

static const char *attr_type_name(int t) {
  static const char *const names[] = {"UNDEFINED",      "FLOAT",      "INT",        "STRING",
                                      "TENSOR",         "GRAPH",      "FLOATS",     "INTS",
                                      "STRINGS",        "TENSORS",    "GRAPHS",     "SPARSE_TENSOR",
                                      "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"};
  return t >= 0 && t < (int)(sizeof names / sizeof names[0]) ? names[t] : "UNDEFINED";
}

/* Pushes {type = "...", value = v}; value is nil for kinds dle does not read (sparse tensors,
 * type protos). */
static void push_attribute(lua_State *L, const Onnx__AttributeProto *a, const char *what,
                           int depth) {
  lua_createtable(L, 0, 2);
  set_str(L, "type", attr_type_name(a->type));
  switch (a->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: lua_pushnumber(L, a->f); break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: lua_pushinteger(L, a->i); break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
      lua_pushlstring(L, (const char *)a->s.data, a->s.len);
      break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
      if (!a->t) onnx_fail(L, what, "attribute '%s' of type TENSOR has no tensor", a->name);
      push_tensor(L, a->t, what);
      break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
      if (!a->g) onnx_fail(L, what, "attribute '%s' of type GRAPH has no graph", a->name);
      push_graph(L, a->g, what, depth + 1);
      break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
      PUSH_LIST(L, a->n_floats, i, lua_pushnumber(L, a->floats[i]));
      break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
      PUSH_LIST(L, a->n_ints, i, lua_pushinteger(L, a->ints[i]));
      break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
      PUSH_LIST(L, a->n_strings, i,
                lua_pushlstring(L, (const char *)a->strings[i].data, a->strings[i].len));
      break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS:
      PUSH_LIST(L, a->n_tensors, i, push_tensor(L, a->tensors[i], what));
      break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
      PUSH_LIST(L, a->n_graphs, i, push_graph(L, a->graphs[i], what, depth + 1));
      break;
    default: lua_pushnil(L); break;
  }
  lua_setfield(L, -2, "value");
}

static void push_node(lua_State *L, const Onnx__NodeProto *n, const char *what, int depth) {
  lua_createtable(L, 0, 6);
  set_str(L, "op_type", n->op_type);
  set_str(L, "name", n->name);
  set_str(L, "domain", n->domain);
  push_strings(L, n->n_input, n->input);
  lua_setfield(L, -2, "inputs");
  push_strings(L, n->n_output, n->output);
  lua_setfield(L, -2, "outputs");
  lua_createtable(L, 0, (int)n->n_attribute);
  for (size_t i = 0; i < n->n_attribute; i++) {
    const Onnx__AttributeProto *a = n->attribute[i];
    if (!a->name || !a->name[0])
      onnx_fail(L, what, "node '%s' (%s) has an attribute without a name", n->name ? n->name : "",
                n->op_type ? n->op_type : "");
    push_attribute(L, a, what, depth);
    lua_setfield(L, -2, a->name);
  }
  lua_setfield(L, -2, "attributes");
}

/* An initializer {name, tensor}. */
static void push_initializer(lua_State *L, const Onnx__TensorProto *t, const char *what) {
  lua_createtable(L, 0, 2);
  set_str(L, "name", t->name);
  push_tensor(L, t, what);
  lua_setfield(L, -2, "tensor");
}

static void push_graph(lua_State *L, const Onnx__GraphProto *g, const char *what, int depth) {
  if (depth > MAX_GRAPH_DEPTH)
    onnx_fail(L, what, "graphs nested deeper than %d levels", MAX_GRAPH_DEPTH);
  luaL_checkstack(L, 8, what);
  lua_createtable(L, 0, 7);
  set_str(L, "name", g->name);
  PUSH_LIST(L, g->n_node, i, push_node(L, g->node[i], what, depth));
  lua_setfield(L, -2, "nodes");
  PUSH_LIST(L, g->n_initializer, i, push_initializer(L, g->initializer[i], what));
  lua_setfield(L, -2, "initializers");
  if (g->n_sparse_initializer) onnx_fail(L, what, "sparse initializers are not supported");
  push_value_infos(L, g->n_input, g->input);
  lua_setfield(L, -2, "inputs");
  push_value_infos(L, g->n_output, g->output);
  lua_setfield(L, -2, "outputs");
  push_value_infos(L, g->n_value_info, g->value_info);
  lua_setfield(L, -2, "value_info");
}

/* The readers' last result, the message's name; then the message is freed. Returns nres. */
static int push_name_and_free(lua_State *L, const char *name, int nres) {
  lua_pushstring(L, name ? name : "");
  release_box(L);
  return nres;
}

static int l_onnx_model(lua_State *L) {
  const char *what;
  const Onnx__ModelProto *m =
      (const Onnx__ModelProto *)unpack_arg(L, &onnx__model_proto__descriptor, "_onnx_model", &what);
  if (!m->graph) return onnx_fail(L, what, "the model has no graph");
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, m->has_ir_version ? m->ir_version : 0);
  lua_setfield(L, -2, "ir_version");
  set_str(L, "producer_name", m->producer_name);
  set_str(L, "producer_version", m->producer_version);
  lua_createtable(L, 0, (int)m->n_opset_import);
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = m->opset_import[i];
    lua_pushinteger(L, o->has_version ? o->version : 0);
    lua_setfield(L, -2, o->domain ? o->domain : "");
  }
  lua_setfield(L, -2, "opset_import");
  push_graph(L, m->graph, what, 0);
  lua_setfield(L, -2, "graph");
  release_box(L);
  return 1;
}

static int l_onnx_tensor(lua_State *L) {
  const char *what;
  const Onnx__TensorProto *tp = (const Onnx__TensorProto *)unpack_arg(
      L, &onnx__tensor_proto__descriptor, "_onnx_tensor", &what);
  push_tensor(L, tp, what);
  return push_name_and_free(L, tp->name, 2);
}

/* Pushes the SequenceProto's tensors as a list; sequences of other values are refused. */
static void push_sequence(lua_State *L, const Onnx__SequenceProto *sp, const char *what) {
  const char *name = sp->name && sp->name[0] ? sp->name : "(unnamed)";
  if (sp->n_sparse_tensor_values || sp->n_sequence_values || sp->n_map_values ||
      sp->n_optional_values ||
      (sp->has_elem_type && sp->elem_type != ONNX__SEQUENCE_PROTO__DATA_TYPE__TENSOR &&
       sp->elem_type != ONNX__SEQUENCE_PROTO__DATA_TYPE__UNDEFINED))
    onnx_fail(L, what, "sequence '%s': only sequences of tensors are supported", name);
  luaL_checkstack(L, 4, what);
  PUSH_LIST(L, sp->n_tensor_values, i, push_tensor(L, sp->tensor_values[i], what));
}

static int l_onnx_sequence(lua_State *L) {
  const char *what;
  const Onnx__SequenceProto *sp = (const Onnx__SequenceProto *)unpack_arg(
      L, &onnx__sequence_proto__descriptor, "_onnx_sequence", &what);
  push_sequence(L, sp, what);
  return push_name_and_free(L, sp->name, 2);
}

static int l_onnx_optional(lua_State *L) {
  const char *what;
  const Onnx__OptionalProto *op = (const Onnx__OptionalProto *)unpack_arg(
      L, &onnx__optional_proto__descriptor, "_onnx_optional", &what);
  const char *name = op->name && op->name[0] ? op->name : "(unnamed)";
  if (op->sparse_tensor_value || op->map_value || op->optional_value)
    onnx_fail(L, what, "optional '%s': only optional tensors and sequences are supported", name);
  if (op->tensor_value) {
    push_tensor(L, op->tensor_value, what);
    lua_pushstring(L, "tensor");
  } else if (op->sequence_value) {
    push_sequence(L, op->sequence_value, what);
    lua_pushstring(L, "sequence");
  } else {
    lua_pushnil(L);
    lua_pushstring(L, "none");
  }
  return push_name_and_free(L, op->name, 3);
}

void dle_lua_open_onnx(lua_State *L, int module, int methods) {
  static const luaL_Reg fns[] = {{"_onnx_model", l_onnx_model},
                                 {"_onnx_tensor", l_onnx_tensor},
                                 {"_onnx_sequence", l_onnx_sequence},
                                 {"_onnx_optional", l_onnx_optional},
                                 {NULL, NULL}};
  dle_lua_register(L, module, methods, fns, NULL, NULL);
}
