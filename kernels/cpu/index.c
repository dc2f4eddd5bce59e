/* index.c — CPU kernels of the joining and indexing ops. Ops that only move elements (cat,
 * gather, index_select, masked_fill, tril/triu) dispatch on the element size; the accumulating
 * ones (scatter_add, index_add) are instantiated per dtype. Index tensors are int64, read
 * relative to attrs.index_base, and range-checked before anything is written. */
#include "backend.h"
#include "cpu_loop.h"
#include "index_shared.h"

#include <stdlib.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* A header describing other geometry over t's memory: kernels hand such views to the iterator,
 * which only reads geometry, so no reference is taken. */
static dle_tensor geometry_of(const dle_tensor *t) { return *t; }

static const char *op_name(dle_op op) { return dle_op_get_info(op)->name; }

/* ---------------------------------------------------------------- index range checks */

/* Per-thread running bounds, padded to a cache line so threads do not share one. */
typedef struct {
  int64_t lo, hi;
  char pad[48];
} bounds_slot;

typedef struct {
  bounds_slot *slots;
  int nslots;
} bounds_ctx;

static int thread_slot(int nslots) {
#ifdef _OPENMP
  int t = omp_get_thread_num();
  return t < nslots ? t : nslots - 1;
#else
  (void)nslots;
  return 0;
#endif
}

static void bounds_loop(char **p, const int64_t *s, int64_t n, const void *ctx) {
  const bounds_ctx *c = ctx;
  bounds_slot *slot = &c->slots[thread_slot(c->nslots)];
  int64_t lo = slot->lo, hi = slot->hi;
  if (s[0] == 8) {
    const int64_t *v = (const int64_t *)p[0];
    for (int64_t i = 0; i < n; i++) {
      lo = v[i] < lo ? v[i] : lo;
      hi = v[i] > hi ? v[i] : hi;
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      int64_t v = *(const int64_t *)(p[0] + i * s[0]);
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
  }
  slot->lo = lo, slot->hi = hi;
}

/* Smallest and largest value of a non-empty int64 tensor. */
static dle_status index_bounds(const char *fn, const dle_tensor *index, int64_t *lo, int64_t *hi) {
#ifdef _OPENMP
  int nslots = omp_get_max_threads();
#else
  int nslots = 1;
#endif
  bounds_ctx c = {calloc((size_t)nslots, sizeof(bounds_slot)), nslots};
  if (!c.slots) return dle_error("%s: out of memory checking indices", fn);
  for (int i = 0; i < nslots; i++) c.slots[i].lo = INT64_MAX, c.slots[i].hi = INT64_MIN;
  dle_tensor view = geometry_of(index);
  cpu_foreach(&view, NULL, 0, bounds_loop, &c);
  *lo = INT64_MAX, *hi = INT64_MIN;
  for (int i = 0; i < nslots; i++) {
    *lo = c.slots[i].lo < *lo ? c.slots[i].lo : *lo;
    *hi = c.slots[i].hi > *hi ? c.slots[i].hi : *hi;
  }
  free(c.slots);
  return DLE_OK;
}

/* Every index must lie in [base, base + size) of `target`'s dim: the message gives the offending
 * value as the caller wrote it (1-based from Lua), the dim and its size. */
dle_status cpu_index_check(dle_op op, const dle_tensor *index, int64_t base, int64_t size, int dim,
                           const char *target_name, const dle_tensor *target) {
  if (dle_tensor_numel(index) == 0) return DLE_OK;
  int64_t lo = 0, hi = 0;
  DLE_TRY(index_bounds(op_name(op), index, &lo, &hi));
  if (lo >= base && hi - base < size) return DLE_OK;
  int64_t bad = lo < base ? lo : hi;
  char range[64] = "none: the dim is empty";
  if (size > 0)
    snprintf(range, sizeof range, "%lld..%lld", (long long)base, (long long)(base + size - 1));
  if (op == DLE_OP_ONE_HOT)
    return dle_error(
        "one_hot: class %lld is out of range for %lld classes (valid: %s; classes shape %s)",
        (long long)bad, (long long)size, range, SHAPE(index));
  return dle_error(
      "%s: index %lld is out of range for dim %d of size %lld (valid: %s; %s shape %s, "
      "index shape %s)",
      op_name(op), (long long)bad, dim + 1, (long long)size, range, target_name, SHAPE(target),
      SHAPE(index));
}

/* ---------------------------------------------------------------- moving elements */

/* out[i] = in[i]; an input stride of 0 repeats one element. */
#define MOVE_LOOP(B)                                                             \
  static void move_##B(char **p, const int64_t *s, int64_t n, const void *ctx) { \
    (void)ctx;                                                                   \
    if (s[0] == B && s[1] == B) {                                                \
      if (p[0] != p[1]) memcpy(p[0], p[1], (size_t)(n * B));                     \
    } else if (s[1] == 0) {                                                      \
      const word##B v = *(const word##B *)p[1];                                  \
      for (int64_t i = 0; i < n; i++) *(word##B *)(p[0] + i * s[0]) = v;         \
    } else {                                                                     \
      for (int64_t i = 0; i < n; i++)                                            \
        *(word##B *)(p[0] + i * s[0]) = *(const word##B *)(p[1] + i * s[1]);     \
    }                                                                            \
  }
WORD_SIZES(MOVE_LOOP)
static const cpu_loop_fn move_loops[4] = WORD_TABLE(move);

/* Copies src into dst (same shape and dtype) unless they are the same memory already. */
void cpu_index_move_into(dle_tensor *dst, dle_tensor *src) {
  if (dst->storage == src->storage && dst->offset == src->offset &&
      memcmp(dst->strides, src->strides, (size_t)dst->ndim * sizeof *dst->strides) == 0)
    return;
  cpu_foreach(dst, &src, 1, move_loops[SIZE_SLOT(cpu_esize(dst->dtype))], NULL);
}

/* cat: each input is moved into its slice of the output along dim. */
static DLE_KERNEL(cpu_cat) {
  dle_tensor *out = outs[0];
  int dim = (int)a->ints[0];
  int64_t start = 0;
  for (int i = 0; i < nin; i++) {
    dle_tensor slice = geometry_of(out);
    slice.sizes[dim] = ins[i]->sizes[dim];
    slice.offset += start * out->strides[dim];
    start += ins[i]->sizes[dim];
    if (dle_tensor_numel(&slice) > 0) cpu_index_move_into(&slice, ins[i]);
  }
  return DLE_OK;
}

/* ---------------------------------------------------------------- gather, index_select */

typedef struct {
  int64_t dim_stride; /* bytes between elements of src along the indexed dim */
  int64_t base;
} pick_ctx;

/* out[i] = src[i + (index[i] - base) * dim_stride], where the iterator gives src with a zero
 * stride along dim. A zero index stride (index_select along an outer dim) moves whole runs. */
#define PICK_LOOP(B)                                                                           \
  static void pick_##B(char **p, const int64_t *s, int64_t n, const void *ctx) {               \
    const pick_ctx *c = ctx;                                                                   \
    if (s[1] == 0) {                                                                           \
      char *from[2] = {p[0], p[2] + (*(const int64_t *)p[1] - c->base) * c->dim_stride};       \
      int64_t st[2] = {s[0], s[2]};                                                            \
      move_##B(from, st, n, NULL);                                                             \
      return;                                                                                  \
    }                                                                                          \
    for (int64_t i = 0; i < n; i++) {                                                          \
      int64_t k = *(const int64_t *)(p[1] + i * s[1]) - c->base;                               \
      *(word##B *)(p[0] + i * s[0]) = *(const word##B *)(p[2] + i * s[2] + k * c->dim_stride); \
    }                                                                                          \
  }
WORD_SIZES(PICK_LOOP)
static const cpu_loop_fn pick_loops[4] = WORD_TABLE(pick);

/* Runs the pick loop over out, with index and src given as views of out's shape. */
static void pick(dle_tensor *out, dle_tensor *index_view, dle_tensor *src_view, int64_t dim_stride,
                 int64_t base) {
  pick_ctx c = {dim_stride, base};
  dle_tensor *ins[2] = {index_view, src_view};
  cpu_foreach(out, ins, 2, pick_loops[SIZE_SLOT(cpu_esize(out->dtype))], &c);
}

static DLE_KERNEL(cpu_gather) {
  dle_tensor *out = outs[0], *src = ins[0], *index = ins[1];
  int dim = (int)a->ints[0];
  DLE_TRY(cpu_index_check(op, index, a->index_base, src->sizes[dim], dim, "src", src));
  dle_tensor src_view = geometry_of(src);
  memcpy(src_view.sizes, index->sizes, sizeof src_view.sizes);
  src_view.strides[dim] = 0;
  pick(out, index, &src_view, src->strides[dim] * cpu_esize(src->dtype), a->index_base);
  return DLE_OK;
}

static DLE_KERNEL(cpu_index_select) {
  dle_tensor *out = outs[0], *src = ins[0], *index = ins[1];
  int dim = (int)a->ints[0];
  DLE_TRY(cpu_index_check(op, index, a->index_base, src->sizes[dim], dim, "src", src));
  /* the 1-D index seen as a tensor of out's rank that varies only along dim */
  dle_tensor index_view = geometry_of(index);
  index_view.ndim = out->ndim;
  for (int d = 0; d < out->ndim; d++) index_view.sizes[d] = 1, index_view.strides[d] = 0;
  index_view.sizes[dim] = out->sizes[dim];
  index_view.strides[dim] = index->ndim ? index->strides[0] : 0;
  dle_tensor src_view = geometry_of(src);
  src_view.sizes[dim] = out->sizes[dim];
  src_view.strides[dim] = 0;
  pick(out, &index_view, &src_view, src->strides[dim] * cpu_esize(src->dtype), a->index_base);
  return DLE_OK;
}

/* ---------------------------------------------------------------- scatter_add, index_add */

typedef struct {
  int64_t count;                          /* indices along dim */
  int64_t index_step, src_step, out_step; /* bytes per step along dim */
  int64_t base;
} accumulate_ctx;

/* The iterator walks every position except along dim (views of size 1 there), so positions
 * that could collide in the output all land in one call and threads never race. For each step
 * k along dim, out[pos + (index - base) * out_step] += src[pos + k * src_step]. Contiguous
 * positions are swept once per step (index_add of rows); scattered ones finish their steps
 * one position at a time, walking index and src along dim (scatter_add along the last dim). */
/* integers wrap (CPU_WRAP) as the elementwise add does, without signed-overflow UB */
#define ACCUMULATE_ADD(ID, T, o, x) \
  (*(T *)(o) = ST_##ID(CPU_WRAP(LD_##ID(*(T *)(o)), LD_##ID(*(const T *)(x)), +)))
#define ACCUMULATE_LOOP(ID, T, CT)                                                                 \
  static void accumulate_##ID(char **p, const int64_t *s, int64_t n, const void *ctx) {            \
    const accumulate_ctx *c = ctx;                                                                 \
    if (s[0] != sizeof(T)) {                                                                       \
      for (int64_t i = 0; i < n; i++) {                                                            \
        char *o = p[0] + i * s[0];                                                                 \
        const char *ip = p[1] + i * s[1], *sp = p[2] + i * s[2];                                   \
        for (int64_t k = 0; k < c->count; k++)                                                     \
          ACCUMULATE_ADD(ID, T,                                                                    \
                         o + (*(const int64_t *)(ip + k * c->index_step) - c->base) * c->out_step, \
                         sp + k * c->src_step);                                                    \
      }                                                                                            \
      return;                                                                                      \
    }                                                                                              \
    for (int64_t k = 0; k < c->count; k++) {                                                       \
      const char *ip = p[1] + k * c->index_step, *sp = p[2] + k * c->src_step;                     \
      if (s[1] == 0 && s[2] == sizeof(T)) {                                                        \
        T *o = (T *)(p[0] + (*(const int64_t *)ip - c->base) * c->out_step);                       \
        const T *x = (const T *)sp;                                                                \
        _Pragma("GCC ivdep")                                                                       \
        for (int64_t i = 0; i < n; i++) o[i] = ST_##ID(CPU_WRAP(LD_##ID(o[i]), LD_##ID(x[i]), +)); \
      } else {                                                                                     \
        for (int64_t i = 0; i < n; i++)                                                            \
          ACCUMULATE_ADD(                                                                          \
              ID, T,                                                                               \
              p[0] + i * s[0] + (*(const int64_t *)(ip + i * s[1]) - c->base) * c->out_step,       \
              sp + i * s[2]);                                                                      \
      }                                                                                            \
    }                                                                                              \
  }
CPU_ALL_TYPES(ACCUMULATE_LOOP)
#define ACCUMULATE_ENTRY(ID, T, CT) [DLE_##ID] = accumulate_##ID,
static const cpu_loop_fn accumulate_loops[DLE_NUM_DTYPES] = {CPU_ALL_TYPES(ACCUMULATE_ENTRY)};

/* Too few positions for the iterator to thread, but many steps each (index_add of long rows
 * along dim 1): the positions are split among threads along their widest dim instead. */
static void accumulate_run(dle_tensor *out_view, dle_tensor *index_view, dle_tensor *src_view,
                           const accumulate_ctx *c, cpu_loop_fn fn) {
  dle_tensor *ins[2] = {index_view, src_view};
  int64_t positions = dle_tensor_numel(out_view);
  int split = 0, nt = 1;
  for (int d = 1; d < out_view->ndim; d++)
    split = out_view->sizes[d] > out_view->sizes[split] ? d : split;
#ifdef _OPENMP
  nt = omp_get_max_threads();
#endif
  if (nt < 2 || out_view->ndim == 0 || out_view->sizes[split] < 2 || cpu_parallel(positions) ||
      !cpu_parallel(positions * c->count)) {
    cpu_foreach(out_view, ins, 2, fn, c);
    return;
  }
  int64_t size = out_view->sizes[split];
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int t = 0; t < nt; t++) {
    int64_t b = size * t / nt, e = size * (t + 1) / nt;
    if (b == e) continue;
    dle_tensor o = *out_view, x = *index_view, sv = *src_view;
    o.sizes[split] = x.sizes[split] = sv.sizes[split] = e - b;
    o.offset += b * o.strides[split];
    x.offset += b * x.strides[split];
    sv.offset += b * sv.strides[split];
    dle_tensor *part[2] = {&x, &sv};
    cpu_foreach(&o, part, 2, fn, c);
  }
}

/* out = self, then the additions. scatter_add walks index's shape; index_add walks src's
 * shape with the 1-D index broadcast over every position. */
static DLE_KERNEL(cpu_accumulate) {
  dle_tensor *out = outs[0], *self = ins[0], *index = ins[1], *src = ins[2];
  int dim = (int)a->ints[0];
  DLE_TRY(cpu_index_check(op, index, a->index_base, out->sizes[dim], dim, "self", self));
  if (dle_tensor_numel(out) > 0) cpu_index_move_into(out, self);
  const dle_tensor *walk = op == DLE_OP_SCATTER_ADD ? index : src;
  if (dle_tensor_numel(walk) == 0) return DLE_OK;
  int64_t es = cpu_esize(out->dtype);
  accumulate_ctx c = {walk->sizes[dim], 0, src->strides[dim] * es, out->strides[dim] * es,
                      a->index_base};
  dle_tensor out_view = geometry_of(out), index_view = geometry_of(index),
             src_view = geometry_of(src);
  memcpy(out_view.sizes, walk->sizes, sizeof out_view.sizes);
  memcpy(src_view.sizes, walk->sizes, sizeof src_view.sizes);
  if (op == DLE_OP_SCATTER_ADD) {
    c.index_step = index->strides[dim] * 8;
  } else {
    c.index_step = index->ndim ? index->strides[0] * 8 : 0;
    index_view.ndim = out->ndim;
    memcpy(index_view.sizes, walk->sizes, sizeof index_view.sizes);
    memset(index_view.strides, 0, sizeof index_view.strides);
  }
  out_view.sizes[dim] = index_view.sizes[dim] = src_view.sizes[dim] = 1;
  accumulate_run(&out_view, &index_view, &src_view, &c, accumulate_loops[out->dtype]);
  return DLE_OK;
}

/* ---------------------------------------------------------------- masked_fill */

/* The fill value converted once to the output dtype's bits. */
static void value_bits(dle_dtype dt, double v, void *bits) {
  switch (dt) {
#define VALUE_CASE(ID, T, CT)   \
  case DLE_##ID: {              \
    T x = ST_##ID(v);           \
    memcpy(bits, &x, sizeof x); \
    break;                      \
  }
    CPU_ALL_TYPES(VALUE_CASE)
    default: break;
  }
}

#define MASKED_FILL_LOOP(B)                                                                \
  static void masked_fill_##B(char **p, const int64_t *s, int64_t n, const void *ctx) {    \
    const word##B v = *(const word##B *)ctx;                                               \
    if (s[0] == B && s[1] == B && s[2] == 1) {                                             \
      word##B *o = (word##B *)p[0];                                                        \
      const word##B *x = (const word##B *)p[1];                                            \
      const uint8_t *m = (const uint8_t *)p[2];                                            \
      _Pragma("GCC ivdep")                                                                 \
      for (int64_t i = 0; i < n; i++) o[i] = m[i] ? v : x[i];                              \
    } else {                                                                               \
      for (int64_t i = 0; i < n; i++)                                                      \
        *(word##B *)(p[0] + i * s[0]) =                                                    \
            *(const uint8_t *)(p[2] + i * s[2]) ? v : *(const word##B *)(p[1] + i * s[1]); \
    }                                                                                      \
  }
WORD_SIZES(MASKED_FILL_LOOP)
static const cpu_loop_fn masked_fill_loops[4] = WORD_TABLE(masked_fill);

static DLE_KERNEL(cpu_masked_fill) {
  uint64_t bits = 0;
  value_bits(outs[0]->dtype, a->f[0], &bits);
  cpu_foreach(outs[0], ins, nin, masked_fill_loops[SIZE_SLOT(cpu_esize(outs[0]->dtype))], &bits);
  return DLE_OK;
}

/* ---------------------------------------------------------------- tril, triu */

/* One row: columns [keep_lo, keep_hi) are copied, the others zeroed (zero bits are 0 in every
 * dtype). In place, the kept columns are already there. */
#define TRIANGLE_ROW(B)                                                                        \
  static void triangle_row_##B(char *o, int64_t os, const char *x, int64_t xs, int64_t cols,   \
                               int64_t keep_lo, int64_t keep_hi) {                             \
    if (os == B && xs == B) {                                                                  \
      memset(o, 0, (size_t)(keep_lo * B));                                                     \
      if (o != x) memcpy(o + keep_lo * B, x + keep_lo * B, (size_t)((keep_hi - keep_lo) * B)); \
      memset(o + keep_hi * B, 0, (size_t)((cols - keep_hi) * B));                              \
      return;                                                                                  \
    }                                                                                          \
    for (int64_t j = 0; j < keep_lo; j++) *(word##B *)(o + j * os) = 0;                        \
    if (o != x)                                                                                \
      for (int64_t j = keep_lo; j < keep_hi; j++)                                              \
        *(word##B *)(o + j * os) = *(const word##B *)(x + j * xs);                             \
    for (int64_t j = keep_hi; j < cols; j++) *(word##B *)(o + j * os) = 0;                     \
  }
WORD_SIZES(TRIANGLE_ROW)
typedef void (*triangle_row_fn)(char *, int64_t, const char *, int64_t, int64_t, int64_t, int64_t);
static const triangle_row_fn triangle_rows[4] = WORD_TABLE(triangle_row);

/* Byte offset of row r (over all leading dims and the row dim) of t. */
static int64_t row_offset(const dle_tensor *t, int64_t r, int64_t es) {
  int64_t off = 0;
  for (int d = t->ndim - 2; d >= 0 && r > 0; d--) {
    off += (r % t->sizes[d]) * t->strides[d];
    r /= t->sizes[d];
  }
  return off * es;
}

static DLE_KERNEL(cpu_triangle) {
  dle_tensor *out = outs[0], *src = ins[0];
  int nd = out->ndim;
  int64_t numel = dle_tensor_numel(out);
  if (numel == 0) return DLE_OK;
  int64_t rows = out->sizes[nd - 2], cols = out->sizes[nd - 1], k = a->ints[0];
  k = k > cols ? cols : k < -rows ? -rows : k; /* same mask, and i + k cannot overflow */
  int64_t es = cpu_esize(out->dtype), nrows = numel / cols;
  int64_t os = out->strides[nd - 1] * es, xs = src->strides[nd - 1] * es;
  char *obase = dle_tensor_data(out);
  const char *xbase = dle_tensor_data(src);
  triangle_row_fn row_fn = triangle_rows[SIZE_SLOT(es)];
  bool lower = op == DLE_OP_TRIL;
#pragma omp parallel for if (cpu_parallel(numel)) schedule(static)
  for (int64_t r = 0; r < nrows; r++) {
    int64_t i = r % rows; /* tril keeps j <= i + k, triu keeps j >= i + k */
    int64_t lo = lower ? 0 : i + k, hi = lower ? i + k + 1 : cols;
    lo = lo < 0 ? 0 : lo > cols ? cols : lo;
    hi = hi < lo ? lo : hi > cols ? cols : hi;
    row_fn(obase + row_offset(out, r, es), os, xbase + row_offset(src, r, es), xs, cols, lo, hi);
  }
  return DLE_OK;
}

/* ---------------------------------------------------------------- one_hot */

typedef struct {
  int64_t class_step; /* bytes between classes in the output's last dim */
  int64_t base;
} one_hot_ctx;

static void zero_loop(char **p, const int64_t *s, int64_t n, const void *ctx) {
  (void)ctx;
  if (s[0] == 8)
    memset(p[0], 0, (size_t)n * 8);
  else
    for (int64_t i = 0; i < n; i++) *(int64_t *)(p[0] + i * s[0]) = 0;
}

static void one_hot_loop(char **p, const int64_t *s, int64_t n, const void *ctx) {
  const one_hot_ctx *c = ctx;
  for (int64_t i = 0; i < n; i++)
    *(int64_t *)(p[0] + i * s[0] +
                 (*(const int64_t *)(p[1] + i * s[1]) - c->base) * c->class_step) = 1;
}

static DLE_KERNEL(cpu_one_hot) {
  dle_tensor *out = outs[0], *classes = ins[0];
  int last = out->ndim - 1;
  DLE_TRY(cpu_index_check(op, classes, a->index_base, out->sizes[last], last, "out", out));
  cpu_foreach(out, NULL, 0, zero_loop, NULL);
  if (dle_tensor_numel(out) == 0) return DLE_OK;
  one_hot_ctx c = {out->strides[last] * 8, a->index_base};
  dle_tensor rows = geometry_of(out); /* the output without its class dim */
  rows.ndim = last;
  cpu_foreach(&rows, &classes, 1, one_hot_loop, &c);
  return DLE_OK;
}

void cpu_register_index(dle_backend *b) {
  b->kernels[DLE_OP_CAT] = cpu_cat;
  b->kernels[DLE_OP_GATHER] = cpu_gather;
  b->kernels[DLE_OP_INDEX_SELECT] = cpu_index_select;
  CPU_REGISTER(b, cpu_accumulate, DLE_OP_SCATTER_ADD, DLE_OP_INDEX_ADD);
  CPU_REGISTER(b, cpu_triangle, DLE_OP_TRIL, DLE_OP_TRIU);
  b->kernels[DLE_OP_MASKED_FILL] = cpu_masked_fill;
  b->kernels[DLE_OP_ONE_HOT] = cpu_one_hot;
  cpu_register_index_scatter(b);
}
