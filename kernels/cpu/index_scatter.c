/* index_scatter.c — CPU kernels of scatter and scatter_reduce (engine/ops/index.c), every dtype,
 * any strides.
 *
 * out = self, then for each position p of index (src is read at the same positions):
 * out[p with dim replaced by index[p]] = src[p] (scatter) or combined with it (scatter_reduce: sum,
 * prod, mean, amax, amin; NaN wins amax and amin). As for scatter_add, the iterator walks every
 * position except along dim, so the positions that can collide are handled by one call and
 * threads never race. Without include_self, and for mean, a count per output element (int64, out's
 * shape) says whether an element was reached already: the first src value replaces self's, and
 * mean divides by the count (plus one for self; integers round down, as PyTorch). */
#include "cpu_loop.h"
#include "index_shared.h"

typedef struct {
  int64_t count;                                    /* positions along dim */
  int64_t index_step, src_step, out_step, cnt_step; /* bytes per step along dim */
  int64_t base, size; /* size: the output's dim, for the checks made while writing */
  bool counted, include_self, checked;
  int *bad; /* set when a checked index is out of range */
} scatter_ctx;

/* How a reduction combines the element a with a new value b (compute type). */
#define COMBINE_SET(a, b)  (b)
#define COMBINE_SUM(a, b)  CPU_WRAP(a, b, +)
#define COMBINE_MEAN(a, b) CPU_WRAP(a, b, +)
#define COMBINE_PROD(a, b) CPU_WRAP(a, b, *)
#define COMBINE_AMAX(a, b) ((b) != (b) || (b) > (a) ? (b) : (a))
#define COMBINE_AMIN(a, b) ((b) != (b) || (b) < (a) ? (b) : (a))
/* the reductions in the order of dle_scatter_reduction, SET (scatter) first */
// clang-format off
#define SCATTER_MODES(X, ...)                                                        \
  X(SET, __VA_ARGS__) X(SUM, __VA_ARGS__) X(PROD, __VA_ARGS__) X(MEAN, __VA_ARGS__) \
  X(AMAX, __VA_ARGS__) X(AMIN, __VA_ARGS__)
// clang-format on

/* The counted walk (first-touch and mean counts) and the plain one are separate loops, so the
 * common plain one carries no per-element test. */
#define SCATTER_LOOP(MODE, ID, T, CT)                                                         \
  static void scatter_##MODE##_##ID(char **p, const int64_t *s, int64_t n, const void *ctx) { \
    const scatter_ctx *c = ctx;                                                               \
    int64_t is = c->index_step, ss = c->src_step, os = c->out_step, base = c->base;           \
    for (int64_t i = 0; i < n; i++) {                                                         \
      char *o = p[0] + i * s[0];                                                              \
      const char *ip = p[1] + i * s[1], *sp = p[2] + i * s[2];                                \
      if (!c->counted) {                                                                      \
        for (int64_t k = 0; k < c->count; k++) {                                              \
          int64_t at = *(const int64_t *)(ip + k * is) - base;                                \
          if (!c->checked && (uint64_t)at >= (uint64_t)c->size) {                             \
            __atomic_store_n(c->bad, 1, __ATOMIC_RELAXED);                                    \
            continue;                                                                         \
          }                                                                                   \
          T *dst = (T *)(o + at * os);                                                        \
          *dst = ST_##ID(COMBINE_##MODE(LD_##ID(*dst), LD_##ID(*(const T *)(sp + k * ss))));  \
        }                                                                                     \
        continue;                                                                             \
      }                                                                                       \
      char *cp = p[3] + i * s[3];                                                             \
      for (int64_t k = 0; k < c->count; k++) {                                                \
        int64_t at = *(const int64_t *)(ip + k * is) - base;                                  \
        T *dst = (T *)(o + at * os);                                                          \
        CT v = LD_##ID(*(const T *)(sp + k * ss));                                            \
        if ((*(int64_t *)(cp + at * c->cnt_step))++ == 0 && !c->include_self)                 \
          *dst = ST_##ID(v);                                                                  \
        else                                                                                  \
          *dst = ST_##ID(COMBINE_##MODE(LD_##ID(*dst), v));                                   \
      }                                                                                       \
    }                                                                                         \
  }
#define SCATTER_LOOPS_OF(MODE, X) CPU_ALL_TYPES_WITH(SCATTER_LOOP, MODE)
SCATTER_MODES(SCATTER_LOOPS_OF, 0)
#define SCATTER_ENTRY(MODE, ID, T, CT) [DLE_##ID] = scatter_##MODE##_##ID,
#define SCATTER_ROW(MODE, X)           {CPU_ALL_TYPES_WITH(SCATTER_ENTRY, MODE)},
static const cpu_loop_fn scatter_loops[6][DLE_NUM_DTYPES] = {SCATTER_MODES(SCATTER_ROW, 0)};

/* mean: each reached element divided by its count (+ 1 for self when included). */
#define MEAN_FINISH(ID, T, CT)                                                           \
  static void mean_finish_##ID(char **p, const int64_t *s, int64_t n, const void *ctx) { \
    int64_t extra = *(const bool *)ctx;                                                  \
    for (int64_t i = 0; i < n; i++) {                                                    \
      int64_t cnt = *(const int64_t *)(p[1] + i * s[1]);                                 \
      if (cnt == 0) continue;                                                            \
      T *o = (T *)(p[0] + i * s[0]);                                                     \
      CT v = LD_##ID(*o), d = (CT)(cnt + extra);                                         \
      *o = ST_##ID(CPU_FLOORDIV(CT, v, d));                                              \
    }                                                                                    \
  }
/* floats divide; integers round down (toward -inf) */
static inline int64_t floor_div(int64_t v, int64_t d) {
  return v / d - (v % d != 0 && (v < 0) != (d < 0));
}
#define CPU_FLOORDIV(CT, v, d)   \
  _Generic((v), float            \
           : (v) / (d), double   \
           : (v) / (d), uint64_t \
           : (v) / (d), default  \
           : (CT)floor_div(v, d))
CPU_ALL_TYPES(MEAN_FINISH)
#define MEAN_ENTRY(ID, T, CT) [DLE_##ID] = mean_finish_##ID,
static const cpu_loop_fn mean_loops[DLE_NUM_DTYPES] = {CPU_ALL_TYPES(MEAN_ENTRY)};

static DLE_KERNEL(cpu_scatter) {
  dle_tensor *out = outs[0], *self = ins[0], *index = ins[1], *src = ins[2];
  int dim = (int)a->ints[0];
  int mode = op == DLE_OP_SCATTER ? 0 : (int)a->ints[1];
  bool include_self = op == DLE_OP_SCATTER || a->ints[2];
  bool counted = mode != 0 && (mode == DLE_SCATTER_MEAN || !include_self);
  /* Indices are checked before anything is written when writing in place (an error must leave
   * self as it was) or counting; a fresh output is checked while written (one pass fewer). */
  bool checked = counted || out->storage == self->storage;
  if (checked)
    DLE_TRY(cpu_index_check(op, index, a->index_base, out->sizes[dim], dim, "self", self));
  if (dle_tensor_numel(out) > 0) cpu_index_move_into(out, self);
  if (dle_tensor_numel(index) == 0) return DLE_OK;
  dle_tensor *cnt = NULL;
  int bad = 0;
  if (counted) {
    DLE_TRY(dle_tensor_empty(&cnt, out->ndim, out->sizes, DLE_I64, (dle_device){DLE_CPU, 0}));
    memset(dle_tensor_data(cnt), 0, (size_t)dle_tensor_numel(cnt) * 8);
  }
  int64_t es = cpu_esize(out->dtype);
  scatter_ctx c = {index->sizes[dim],
                   index->strides[dim] * 8,
                   src->strides[dim] * es,
                   out->strides[dim] * es,
                   cnt ? cnt->strides[dim] * 8 : 0,
                   a->index_base,
                   out->sizes[dim],
                   counted,
                   include_self,
                   checked,
                   &bad};
  dle_tensor out_view = *out, index_view = *index, src_view = *src, cnt_view;
  memcpy(out_view.sizes, index->sizes, sizeof out_view.sizes);
  memcpy(src_view.sizes, index->sizes, sizeof src_view.sizes);
  out_view.sizes[dim] = index_view.sizes[dim] = src_view.sizes[dim] = 1;
  dle_tensor *views[3] = {&index_view, &src_view, NULL};
  if (cnt) {
    cnt_view = *cnt;
    memcpy(cnt_view.sizes, out_view.sizes, sizeof cnt_view.sizes);
    views[2] = &cnt_view;
  }
  cpu_foreach(&out_view, views, cnt ? 3 : 2, scatter_loops[mode][out->dtype], &c);
  if (mode == DLE_SCATTER_MEAN) cpu_foreach(out, &cnt, 1, mean_loops[out->dtype], &include_self);
  dle_tensor_release(cnt);
  if (bad) /* the check finds the offending value and words the error */
    return cpu_index_check(op, index, a->index_base, out->sizes[dim], dim, "self", self);
  return DLE_OK;
}

void cpu_register_index_scatter(dle_backend *b) {
  b->kernels[DLE_OP_SCATTER] = cpu_scatter;
  b->kernels[DLE_OP_SCATTER_REDUCE] = cpu_scatter;
}
