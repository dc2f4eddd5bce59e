/* graph_file.c — graphs saved by dle.graph.save (lua/dle/graph/file.lua; docs/file_formats.md,
 * "Graph files"), loaded and run from C. dle_graph_load checks the whole file before anything
 * runs: every read bounded by the file's size, every node reading only earlier nodes, every op a
 * name of the op table with its attributes within their limits, every tensor inside the file.
 * dle_graph_run then calls the front door for each op node in order, as Lua's g:run does, and
 * frees each value after its last reader. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NODE_INPUT = 1, NODE_CONST = 2, NODE_OP = 3, NODE_RESULT = 4, NODE_DETACH = 5 };
enum { FLAG_INPLACE = 1, FLAG_FRESH = 2 };
#define MAX_OP_INPUTS 64
#define MAX_INPUTS    64

typedef struct {
  int kind;
  dle_op op;
  int flags, nin;
  int64_t index; /* input position (0-based), tensor number, result number (0-based) */
  uint32_t *ins;
  dle_attrs attrs;
  int ndim;
  int64_t sizes[DLE_MAX_DIMS];
  dle_dtype dtype;
  uint32_t last_use; /* the last node reading this one; n_nodes when an output reads it */
} gnode;

struct dle_graph {
  uint32_t n_nodes, n_outputs, n_tensors;
  int n_inputs;
  gnode *nodes;
  uint32_t *outputs;
  dle_tensor **tensors;
};

/* A bounded reader over the file's metadata. */
typedef struct {
  const unsigned char *p;
  size_t len, pos;
  const char *path;
} rd;

static dle_status bad(rd *r, const char *what) {
  return dle_error("dle_graph_load: %s: %s at byte %zu", r->path, what, r->pos);
}
static dle_status take(rd *r, void *dst, size_t n, const char *what) {
  if (n > r->len - r->pos) return bad(r, what);
  memcpy(dst, r->p + r->pos, n);
  r->pos += n;
  return DLE_OK;
}
/* Little-endian integers of 1, 2, 4, 8 bytes (the machines dle runs on are little-endian; the
 * file is too). */
static dle_status u8(rd *r, int *v, const char *what) {
  unsigned char b = 0;
  DLE_TRY(take(r, &b, 1, what));
  *v = b;
  return DLE_OK;
}
static dle_status u32(rd *r, uint32_t *v, const char *what) { return take(r, v, 4, what); }
static dle_status i64(rd *r, int64_t *v, const char *what) { return take(r, v, 8, what); }
/* A u16-length string into buf (at most n - 1 bytes). */
static dle_status str(rd *r, char *buf, size_t n, const char *what) {
  uint16_t len = 0;
  DLE_TRY(take(r, &len, 2, what));
  if (len >= n) return bad(r, what);
  DLE_TRY(take(r, buf, len, what));
  buf[len] = 0;
  return DLE_OK;
}
static dle_status dtype_of(rd *r, dle_dtype *dt, const char *what) {
  char name[32];
  DLE_TRY(str(r, name, sizeof name, what));
  return dle_dtype_parse(name, dt) == DLE_OK ? DLE_OK : bad(r, what);
}
static dle_status shape_of(rd *r, int *ndim, int64_t *sizes, const char *what) {
  DLE_TRY(u8(r, ndim, what));
  if (*ndim > DLE_MAX_DIMS) return bad(r, what);
  for (int d = 0; d < *ndim; d++) {
    DLE_TRY(i64(r, &sizes[d], what));
    if (sizes[d] < 0) return bad(r, what);
  }
  return DLE_OK;
}
/* A node index that must name an earlier node; its last use becomes `at`. */
static dle_status earlier(rd *r, dle_graph *g, uint32_t at, uint32_t *v, const char *what) {
  DLE_TRY(u32(r, v, what));
  if (*v >= at) return bad(r, what);
  g->nodes[*v].last_use = at;
  return DLE_OK;
}

static dle_status read_op(rd *r, dle_graph *g, uint32_t i, gnode *n) {
  char name[64];
  DLE_TRY(str(r, name, sizeof name, "op name"));
  n->op = dle_op_by_name(name);
  if (n->op == DLE_NUM_OPS) return bad(r, "unknown op");
  const dle_op_info *info = dle_op_get_info(n->op);
  DLE_TRY(u8(r, &n->flags, "op flags"));
  DLE_TRY(u8(r, &n->nin, "op inputs"));
  if (n->nin > MAX_OP_INPUTS ||
      (info->nin >= 0 && n->nin != info->nin + !!(n->flags & FLAG_INPLACE)))
    return bad(r, "op input count");
  n->ins = calloc((size_t)n->nin + 1, sizeof *n->ins);
  if (!n->ins) return dle_error("dle_graph_load: out of memory");
  for (int k = 0; k < n->nin; k++) DLE_TRY(earlier(r, g, i, &n->ins[k], "op input"));
  int nints;
  DLE_TRY(u8(r, &nints, "attr count"));
  if (nints > DLE_MAX_ATTR_INTS) return bad(r, "attr count");
  n->attrs.nints = nints;
  for (int k = 0; k < nints; k++) DLE_TRY(i64(r, &n->attrs.ints[k], "int attr"));
  DLE_TRY(take(r, n->attrs.f, 16, "float attrs"));
  char adt[32];
  DLE_TRY(str(r, adt, sizeof adt, "dtype attr"));
  if (adt[0]) {
    if (dle_dtype_parse(adt, &n->attrs.dtype) != DLE_OK) return bad(r, "dtype attr");
    n->attrs.has_dtype = true;
  }
  int keep;
  DLE_TRY(u8(r, &keep, "keepdim"));
  n->attrs.keepdim = keep != 0;
  DLE_TRY(i64(r, &n->attrs.index_base, "index base"));
  DLE_TRY(dtype_of(r, &n->dtype, "result dtype"));
  return shape_of(r, &n->ndim, n->sizes, "result shape");
}

static dle_status read_nodes(rd *r, dle_graph *g) {
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    gnode *n = &g->nodes[i];
    n->last_use = i;
    DLE_TRY(u8(r, &n->kind, "node kind"));
    uint32_t v = 0;
    int k;
    switch (n->kind) {
      case NODE_INPUT:
        DLE_TRY(u32(r, &v, "input position"));
        if (v < 1 || v > MAX_INPUTS) return bad(r, "input position");
        n->index = v - 1;
        if ((int)v > g->n_inputs) g->n_inputs = (int)v;
        DLE_TRY(dtype_of(r, &n->dtype, "input dtype"));
        DLE_TRY(shape_of(r, &n->ndim, n->sizes, "input shape"));
        break;
      case NODE_CONST:
        DLE_TRY(u32(r, &v, "constant tensor"));
        if (v >= g->n_tensors) return bad(r, "constant tensor");
        n->index = v;
        break;
      case NODE_OP: DLE_TRY(read_op(r, g, i, n)); break;
      case NODE_RESULT:
        DLE_TRY(earlier(r, g, i, &v, "result source"));
        DLE_TRY(u8(r, &k, "result number"));
        if (g->nodes[v].kind != NODE_OP || k < 2 || k > dle_op_get_info(g->nodes[v].op)->nout)
          return bad(r, "result number");
        n->ins = malloc(sizeof *n->ins);
        if (!n->ins) return dle_error("dle_graph_load: out of memory");
        n->ins[0] = v, n->nin = 1, n->index = k - 1;
        break;
      case NODE_DETACH:
        n->ins = malloc(sizeof *n->ins);
        if (!n->ins) return dle_error("dle_graph_load: out of memory");
        DLE_TRY(earlier(r, g, i, &n->ins[0], "detach source"));
        n->nin = 1;
        break;
      default: return bad(r, "unknown node kind");
    }
  }
  /* every input position 1..n_inputs is some node's */
  for (int p = 0; p < g->n_inputs; p++) {
    bool found = false;
    for (uint32_t i = 0; i < g->n_nodes && !found; i++)
      found = g->nodes[i].kind == NODE_INPUT && g->nodes[i].index == p;
    if (!found) return bad(r, "an input position without its node");
  }
  return DLE_OK;
}

void dle_graph_free(dle_graph *g) {
  if (!g) return;
  for (uint32_t i = 0; g->nodes && i < g->n_nodes; i++) free(g->nodes[i].ins);
  for (uint32_t i = 0; g->tensors && i < g->n_tensors; i++) dle_tensor_release(g->tensors[i]);
  free(g->nodes);
  free(g->outputs);
  free(g->tensors);
  free(g);
}

static dle_status load(dle_graph *g, FILE *f, const char *path) {
  uint64_t size;
  DLE_TRY(dle_serialize_file_size(f, &size, "dle_graph_load"));
  unsigned char head[32];
  if (size < 32 || fread(head, 1, 32, f) != 32 || memcmp(head, "DLEGRAPH", 8) != 0)
    return dle_error("dle_graph_load: %s is not a dle graph file", path);
  uint32_t version;
  uint64_t data_start;
  memcpy(&version, head + 8, 4);
  memcpy(&g->n_tensors, head + 12, 4);
  memcpy(&g->n_nodes, head + 16, 4);
  memcpy(&g->n_outputs, head + 20, 4);
  memcpy(&data_start, head + 24, 8);
  if (version != 1)
    return dle_error("dle_graph_load: %s: version %u (this dle reads 1)", path, version);
  if (data_start < 32 || data_start > size || data_start > ((uint64_t)1 << 30))
    return dle_error("dle_graph_load: %s: data start %llu is outside the file", path,
                     (unsigned long long)data_start);
  size_t meta_len = (size_t)data_start - 32;
  /* each record takes at least a byte: counts beyond the metadata's length are corrupt */
  if (g->n_nodes > meta_len || g->n_tensors > meta_len || g->n_outputs > meta_len)
    return dle_error("dle_graph_load: %s: counts beyond the file's metadata", path);
  unsigned char *meta = malloc(meta_len ? meta_len : 1);
  g->nodes = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *g->nodes);
  g->outputs = calloc(g->n_outputs ? g->n_outputs : 1, sizeof *g->outputs);
  g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
  if (!meta || !g->nodes || !g->outputs || !g->tensors) {
    free(meta);
    return dle_error("dle_graph_load: out of memory");
  }
  char what[512];
  snprintf(what, sizeof what, "dle_graph_load: %s", path);
  dle_status st = fread(meta, 1, meta_len, f) == meta_len
                      ? DLE_OK
                      : dle_error("dle_graph_load: %s: cannot read its metadata", path);
  rd r = {meta, meta_len, 0, path};
  for (uint32_t t = 0; st == DLE_OK && t < g->n_tensors; t++) {
    dle_dtype dt;
    int ndim = 0, flag = 0;
    int64_t sizes[DLE_MAX_DIMS];
    uint64_t off = 0;
    st = dtype_of(&r, &dt, "tensor dtype");
    if (st == DLE_OK) st = shape_of(&r, &ndim, sizes, "tensor shape");
    if (st == DLE_OK) st = take(&r, &off, 8, "tensor offset");
    if (st == DLE_OK) st = u8(&r, &flag, "tensor flag");
    if (st == DLE_OK && off > size - data_start) st = bad(&r, "tensor offset");
    /* dle_serialize_read checks that the elements fit in the file */
    if (st == DLE_OK)
      st = dle_serialize_read(&g->tensors[t], f, data_start + off, ndim, sizes, dt, 0, what);
  }
  if (st == DLE_OK) st = read_nodes(&r, g);
  for (uint32_t k = 0; st == DLE_OK && k < g->n_outputs; k++) {
    st = u32(&r, &g->outputs[k], "output");
    if (st == DLE_OK && g->outputs[k] >= g->n_nodes) st = bad(&r, "output");
    if (st == DLE_OK) g->nodes[g->outputs[k]].last_use = g->n_nodes;
  }
  free(meta);
  return st;
}

dle_status dle_graph_load(dle_graph **out, const char *path) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return dle_error("dle_graph_load: cannot open %s", path);
  dle_graph *g = calloc(1, sizeof *g);
  dle_status st = g ? load(g, f, path) : dle_error("dle_graph_load: out of memory");
  fclose(f);
  if (st != DLE_OK) {
    dle_graph_free(g);
    return st;
  }
  *out = g;
  return DLE_OK;
}

int dle_graph_num_inputs(const dle_graph *g) { return g->n_inputs; }
int dle_graph_num_outputs(const dle_graph *g) { return (int)g->n_outputs; }

dle_status dle_graph_input(const dle_graph *g, int k, int *ndim, int64_t *sizes, dle_dtype *dtype) {
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const gnode *n = &g->nodes[i];
    if (n->kind == NODE_INPUT && n->index == k) {
      *ndim = n->ndim, *dtype = n->dtype;
      memcpy(sizes, n->sizes, sizeof(int64_t) * (size_t)n->ndim);
      return DLE_OK;
    }
  }
  return dle_error("dle_graph_input: the graph has no input %d (0-based; %d inputs)", k,
                   g->n_inputs);
}

/* Node i's value, from its inputs' values: one front-door call (or a view for detach). */
static dle_status run_node(const dle_graph *g, uint32_t i, dle_tensor **vals,
                           dle_tensor *const *inputs) {
  const gnode *n = &g->nodes[i];
  switch (n->kind) {
    case NODE_INPUT:
      vals[i] = inputs[n->index];
      dle_tensor_retain(vals[i]);
      return DLE_OK;
    case NODE_CONST:
      vals[i] = g->tensors[n->index];
      dle_tensor_retain(vals[i]);
      return DLE_OK;
    case NODE_DETACH: return dle_detach(&vals[i], vals[n->ins[0]]);
    case NODE_RESULT: return DLE_OK; /* filled by its op */
    default: break;
  }
  dle_tensor *ins[MAX_OP_INPUTS];
  int first = n->flags & FLAG_INPLACE ? 1 : 0;
  for (int k = first; k < n->nin; k++) ins[k - first] = vals[n->ins[k]];
  dle_tensor *outs[DLE_MAX_OUTS] = {NULL};
  if (first) outs[0] = vals[n->ins[0]];
  if (n->flags & FLAG_FRESH)
    DLE_TRY(dle_tensor_empty(&outs[0], n->ndim, n->sizes, n->dtype, DLE_DEVICE_CPU));
  dle_status st = n->op == DLE_OP_DROPOUT && n->nin == 1
                      ? dle_dropout(&outs[0], ins[0], n->attrs.f[0], NULL)
                      : dle_op_call(n->op, outs, ins, n->nin - first, &n->attrs);
  if (st != DLE_OK) {
    if (n->flags & FLAG_FRESH) dle_tensor_release(outs[0]);
    return st;
  }
  if (first) dle_tensor_retain(outs[0]);
  vals[i] = outs[0];
  /* results 2.. go to the nodes that name them (they follow their op); the rest are dropped */
  int nout = dle_op_get_info(n->op)->nout;
  for (int k = 1; k < nout; k++) {
    bool taken = false;
    for (uint32_t j = i + 1; j < g->n_nodes && !taken; j++) {
      const gnode *m = &g->nodes[j];
      if (m->kind == NODE_RESULT && m->ins[0] == i && m->index == k) {
        vals[j] = outs[k];
        taken = true;
      }
    }
    if (!taken) dle_tensor_release(outs[k]);
  }
  return DLE_OK;
}

dle_status dle_graph_run(const dle_graph *g, dle_tensor *const *inputs, int nin,
                         dle_tensor **outputs, int nout) {
  if (nin != g->n_inputs)
    return dle_error("dle_graph_run: the graph takes %d inputs, got %d", g->n_inputs, nin);
  if (nout != (int)g->n_outputs)
    return dle_error("dle_graph_run: the graph has %u outputs, %d slots given", g->n_outputs, nout);
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const gnode *n = &g->nodes[i];
    if (n->kind != NODE_INPUT) continue;
    const dle_tensor *x = inputs[n->index];
    if (!x || x->dtype != n->dtype || !dle_shape_equal(x->ndim, x->sizes, n->ndim, n->sizes)) {
      char want[128];
      return dle_error("dle_graph_run: input %lld must be %s %s, got %s %s",
                       (long long)n->index + 1, dle_dtype_name(n->dtype),
                       dle_shape_str(want, sizeof want, n->ndim, n->sizes),
                       x ? dle_dtype_name(x->dtype) : "NULL", x ? SHAPE(x) : "");
    }
  }
  dle_tensor **vals = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *vals);
  if (!vals) return dle_error("dle_graph_run: out of memory");
  bool was = dle_set_grad_enabled(false);
  dle_status st = DLE_OK;
  for (uint32_t i = 0; st == DLE_OK && i < g->n_nodes; i++) {
    st = run_node(g, i, vals, inputs);
    if (st != DLE_OK) { /* name the node: the op's own message follows */
      char msg[512];
      snprintf(msg, sizeof msg, "%s", dle_last_error());
      const dle_op_info *info = dle_op_get_info(g->nodes[i].op);
      st = dle_error("dle_graph_run: node %u (%s): %s", i + 1,
                     g->nodes[i].kind == NODE_OP && info ? info->name : "value", msg);
    }
    /* values whose last reader was node i */
    for (int k = 0; k < g->nodes[i].nin; k++) {
      uint32_t u = g->nodes[i].ins[k];
      if (g->nodes[u].last_use == i) DLE_RELEASE(vals[u]);
    }
    if (st == DLE_OK && g->nodes[i].last_use == i && g->nodes[i].kind != NODE_RESULT)
      DLE_RELEASE(vals[i]);
  }
  dle_set_grad_enabled(was);
  for (uint32_t k = 0; k < g->n_outputs; k++) {
    outputs[k] = NULL;
    if (st == DLE_OK) {
      outputs[k] = vals[g->outputs[k]];
      dle_tensor_retain(outputs[k]);
    }
  }
  for (uint32_t i = 0; i < g->n_nodes; i++) dle_tensor_release(vals[i]);
  free(vals);
  return st;
}
