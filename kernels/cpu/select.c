/* select.c — CPU kernels of the select family (engine/ops/select.c): nonzero, masked_select,
 * masked_scatter, unique, bincount, searchsorted, mode, on inputs of any strides.
 *
 * nonzero, masked_select and masked_scatter walk their elements in row-major order, split into one
 * contiguous range of positions per thread: each thread counts its range's selected elements,
 * then (after a barrier) writes them from the sum of the counts before it, so the result is in
 * order without a serial pass. The count the front door asks for is the last output. */
#include "backend.h"
#include "cpu_loop.h"
#include "index_shared.h"

#include <stdlib.h>

static const char *op_name(dle_op op) { return dle_op_get_info(op)->name; }

/* ---------------------------------------------------------------- row-major walks */

/* A shape and up to three operands' byte strides over it (broadcast: stride 0). */
typedef struct {
  int nd, nops;
  int64_t sizes[DLE_MAX_DIMS];
  int64_t st[3][DLE_MAX_DIMS];
} walk;

static void walk_init(walk *w, int nd, const int64_t *sizes) {
  memset(w, 0, sizeof *w);
  w->nd = nd;
  memcpy(w->sizes, sizes, sizeof(int64_t) * (size_t)nd);
}

/* Adds t, broadcast to the walk's shape (right-aligned). */
static void walk_add(walk *w, const dle_tensor *t) {
  int k = w->nops++;
  int64_t es = cpu_esize(t->dtype);
  for (int d = 0; d < w->nd; d++) {
    int td = d - (w->nd - t->ndim);
    w->st[k][d] = td < 0 || t->sizes[td] == 1 ? 0 : t->strides[td] * es;
  }
}

/* Drops size-1 dims and merges neighbours contiguous in every operand, so a dense walk is 1-D
 * (the order of the elements is unchanged; nonzero, which reports positions, does not merge). */
static void walk_merge(walk *w) {
  int n = 0;
  for (int d = 0; d < w->nd; d++) {
    if (w->sizes[d] == 1) continue;
    bool merge = n > 0;
    for (int k = 0; k < w->nops && merge; k++) merge = w->st[k][n - 1] == w->st[k][d] * w->sizes[d];
    if (merge) {
      w->sizes[n - 1] *= w->sizes[d];
      for (int k = 0; k < w->nops; k++) w->st[k][n - 1] = w->st[k][d];
      continue;
    }
    w->sizes[n] = w->sizes[d];
    for (int k = 0; k < w->nops; k++) w->st[k][n] = w->st[k][d];
    n++;
  }
  w->nd = n;
}

/* The operands' byte offsets at row-major position i (and its coordinates in idx when given);
 * returns how many positions from i on stay in the same last-dim row. */
static int64_t walk_at(const walk *w, int64_t i, int64_t *off, int64_t *idx) {
  for (int k = 0; k < w->nops; k++) off[k] = 0;
  if (w->nd == 0) return 1;
  int64_t last = 0;
  for (int d = w->nd - 1; d >= 0; d--) {
    int64_t c = i % w->sizes[d];
    i /= w->sizes[d];
    if (idx) idx[d] = c;
    if (d == w->nd - 1) last = c;
    for (int k = 0; k < w->nops; k++) off[k] += c * w->st[k][d];
  }
  return w->sizes[w->nd - 1] - last;
}

/* A walk with its operands' data. */
typedef struct {
  walk w;
  const char *data[3];
} walk_data;

static int64_t walk_numel(const walk *w) { return dle_shape_numel(w->nd, w->sizes); }

/* Threads for a one-pass walk of n elements. */
static int team_for(int64_t n) {
#ifdef _OPENMP
  return cpu_parallel_light(n) ? omp_get_max_threads() : 1;
#else
  (void)n;
  return 1;
#endif
}

/* The positions [b, e) of thread t of nt over n. */
static void range_of(int t, int nt, int64_t n, int64_t *b, int64_t *e) {
  *b = n * t / nt;
  *e = n * (t + 1) / nt;
}

/* nz_<ID>: is the element at p nonzero (NaN is; -0.0 is not)? */
#define NZ_PRED(ID, T, CT) \
  static inline bool nz_##ID(const char *p) { return LD_##ID(*(const T *)p) != 0; }
CPU_ALL_TYPES(NZ_PRED)

/* How many of the positions [b, e) of operand k are nonzero. */
#define NZ_COUNT(ID, T, CT)                                                     \
  static int64_t count_##ID(const walk_data *wd, int k, int64_t b, int64_t e) { \
    int64_t off[3], c = 0;                                                      \
    const walk *w = &wd->w;                                                     \
    int64_t s = w->nd ? w->st[k][w->nd - 1] : 0;                                \
    while (b < e) {                                                             \
      int64_t seg = walk_at(w, b, off, NULL);                                   \
      seg = seg < e - b ? seg : e - b;                                          \
      const char *p = wd->data[k] + off[k];                                     \
      for (int64_t j = 0; j < seg; j++) c += nz_##ID(p + j * s);                \
      b += seg;                                                                 \
    }                                                                           \
    return c;                                                                   \
  }
CPU_ALL_TYPES(NZ_COUNT)
typedef int64_t (*count_fn)(const walk_data *, int, int64_t, int64_t);
#define NZ_COUNT_ENTRY(ID, T, CT) [DLE_##ID] = count_##ID,
static const count_fn count_fns[DLE_NUM_DTYPES] = {CPU_ALL_TYPES(NZ_COUNT_ENTRY)};

/* Runs count (pass 1) then fill (pass 2, from each thread's start) over n positions; returns the
 * total. fill(ctx, b, e, start). A fill that must not run (too few source elements) is told by
 * check returning false on the total. */
typedef void (*fill_fn)(const void *ctx, int64_t b, int64_t e, int64_t start);
static int64_t count_then_fill(const walk_data *wd, int k, count_fn count, fill_fn fill,
                               const void *ctx, int64_t limit, bool *over) {
  int64_t n = walk_numel(&wd->w), total = 0;
  int nt = team_for(n);
  int64_t counts[DLE_MAX_THREADS + 1];
  *over = false;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    int t = 0, m = 1;
    cpu_team(&t, &m);
    int64_t b, e;
    range_of(t, m, n, &b, &e);
    counts[t] = count(wd, k, b, e);
#pragma omp barrier
    int64_t start = 0, sum = 0;
    for (int j = 0; j < m; j++) {
      if (j < t) start += counts[j];
      sum += counts[j];
    }
    if (t == 0) total = sum;
    if (sum <= limit) fill(ctx, b, e, start);
  }
  *over = total > limit;
  return total;
}

/* ---------------------------------------------------------------- nonzero */

typedef struct {
  walk_data wd;
  int64_t *out, base;
  bool (*pred)(const char *);
} nonzero_ctx;

#define NZ_PRED_FN(ID, T, CT) \
  static bool nz_fn_##ID(const char *p) { return nz_##ID(p); }
CPU_ALL_TYPES(NZ_PRED_FN)
#define NZ_PRED_ENTRY(ID, T, CT) [DLE_##ID] = nz_fn_##ID,
static bool (*const nz_fns[DLE_NUM_DTYPES])(const char *) = {CPU_ALL_TYPES(NZ_PRED_ENTRY)};

static void nonzero_fill(const void *ctx, int64_t b, int64_t e, int64_t start) {
  const nonzero_ctx *c = ctx;
  const walk *w = &c->wd.w;
  int nd = w->nd;
  int64_t off[3], idx[DLE_MAX_DIMS], s = nd ? w->st[0][nd - 1] : 0;
  int64_t *o = c->out + start * nd;
  while (b < e) {
    int64_t seg = walk_at(w, b, off, idx);
    seg = seg < e - b ? seg : e - b;
    const char *p = c->wd.data[0] + off[0];
    for (int64_t j = 0; j < seg; j++) {
      if (!c->pred(p + j * s)) continue;
      for (int d = 0; d < nd - 1; d++) o[d] = idx[d] + c->base;
      if (nd) o[nd - 1] = idx[nd - 1] + j + c->base;
      o += nd;
    }
    b += seg;
  }
}

static DLE_KERNEL(cpu_nonzero) {
  const dle_tensor *x = ins[0];
  nonzero_ctx c = {
      .out = dle_tensor_data(outs[0]), .base = a->index_base, .pred = nz_fns[x->dtype]};
  walk_init(&c.wd.w, x->ndim, x->sizes);
  walk_add(&c.wd.w, x);
  c.wd.data[0] = dle_tensor_data(x);
  bool over;
  *(int64_t *)dle_tensor_data(outs[1]) =
      count_then_fill(&c.wd, 0, count_fns[x->dtype], nonzero_fill, &c, INT64_MAX, &over);
  return DLE_OK;
}

/* ---------------------------------------------------------------- masked_select, masked_scatter */

/* masked_select: operands x (0) and mask (1); out is 1-D contiguous. masked_scatter: operands
 * out (0), self (1), mask (2); src contiguous, read from `start` on. */
typedef struct {
  walk_data wd;
  char *out;
  const char *src;
} masked_ctx;

#define MASKED_FILLS(B)                                                                         \
  static void select_fill_##B(const void *ctx, int64_t b, int64_t e, int64_t start) {           \
    const masked_ctx *c = ctx;                                                                  \
    const walk *w = &c->wd.w;                                                                   \
    int64_t off[3], sx = w->nd ? w->st[0][w->nd - 1] : 0, sm = w->nd ? w->st[1][w->nd - 1] : 0; \
    word##B *o = (word##B *)c->out + start;                                                     \
    while (b < e) {                                                                             \
      int64_t seg = walk_at(w, b, off, NULL);                                                   \
      seg = seg < e - b ? seg : e - b;                                                          \
      const char *x = c->wd.data[0] + off[0], *m = c->wd.data[1] + off[1];                      \
      for (int64_t j = 0; j < seg; j++)                                                         \
        if (m[j * sm]) *o++ = *(const word##B *)(x + j * sx);                                   \
      b += seg;                                                                                 \
    }                                                                                           \
  }                                                                                             \
  static void scatter_fill_##B(const void *ctx, int64_t b, int64_t e, int64_t start) {          \
    const masked_ctx *c = ctx;                                                                  \
    const walk *w = &c->wd.w;                                                                   \
    int last = w->nd - 1;                                                                       \
    int64_t off[3], so = w->nd ? w->st[0][last] : 0, ss = w->nd ? w->st[1][last] : 0;           \
    int64_t sm = w->nd ? w->st[2][last] : 0;                                                    \
    const word##B *src = (const word##B *)c->src + start;                                       \
    while (b < e) {                                                                             \
      int64_t seg = walk_at(w, b, off, NULL);                                                   \
      seg = seg < e - b ? seg : e - b;                                                          \
      char *o = c->out + off[0];                                                                \
      const char *x = c->wd.data[1] + off[1], *m = c->wd.data[2] + off[2];                      \
      for (int64_t j = 0; j < seg; j++)                                                         \
        *(word##B *)(o + j * so) = m[j * sm] ? *src++ : *(const word##B *)(x + j * ss);         \
      b += seg;                                                                                 \
    }                                                                                           \
  }
WORD_SIZES(MASKED_FILLS)
static const fill_fn select_fills[4] = WORD_TABLE(select_fill);
static const fill_fn scatter_fills[4] = WORD_TABLE(scatter_fill);

/* The broadcast shape from the front door's attrs. */
static void walk_from_attrs(walk *w, const dle_attrs *a) { walk_init(w, (int)a->nints, a->ints); }

static DLE_KERNEL(cpu_masked_select) {
  masked_ctx c = {.out = dle_tensor_data(outs[0])};
  walk_from_attrs(&c.wd.w, a);
  for (int k = 0; k < 2; k++) walk_add(&c.wd.w, ins[k]), c.wd.data[k] = dle_tensor_data(ins[k]);
  walk_merge(&c.wd.w);
  bool over;
  *(int64_t *)dle_tensor_data(outs[1]) =
      count_then_fill(&c.wd, 1, count_fns[DLE_BOOL],
                      select_fills[SIZE_SLOT(cpu_esize(ins[0]->dtype))], &c, INT64_MAX, &over);
  return DLE_OK;
}

static DLE_KERNEL(cpu_masked_scatter) {
  dle_tensor *out = outs[0], *src = ins[2];
  int64_t avail = dle_tensor_numel(src);
  if (!dle_tensor_is_contiguous(src))
    return dle_error("masked_scatter: source must be contiguous here (shape %s)", SHAPE(src));
  masked_ctx c = {.out = dle_tensor_data(out), .src = dle_tensor_data(src)};
  walk_from_attrs(&c.wd.w, a);
  walk_add(&c.wd.w, out);
  walk_add(&c.wd.w, ins[0]), c.wd.data[1] = dle_tensor_data(ins[0]);
  walk_add(&c.wd.w, ins[1]), c.wd.data[2] = dle_tensor_data(ins[1]);
  walk_merge(&c.wd.w);
  bool over;
  int64_t need = count_then_fill(&c.wd, 2, count_fns[DLE_BOOL],
                                 scatter_fills[SIZE_SLOT(cpu_esize(out->dtype))], &c, avail, &over);
  if (over)
    return dle_error(
        "masked_scatter: mask (shape %s) selects %lld elements but source (shape %s) has only %lld",
        SHAPE(ins[1]), (long long)need, SHAPE(src), (long long)avail);
  return DLE_OK;
}

/* ---------------------------------------------------------------- unique */

/* ins[0]: the elements in order (contiguous), ins[1]: their 0-based positions in x (sorted case).
 * A run of equal elements (==: each NaN its own run) becomes one value and one count. */
#define UNIQUE_KERNEL(ID, T, CT)                                                   \
  static int64_t unique_##ID(const T *v, const int64_t *pos, int64_t n, T *values, \
                             int64_t *inverse, int64_t *counts, int64_t base) {    \
    int64_t g = -1;                                                                \
    for (int64_t i = 0; i < n; i++) {                                              \
      if (i == 0 || !(LD_##ID(v[i]) == LD_##ID(v[i - 1]))) {                       \
        values[++g] = v[i];                                                        \
        counts[g] = 0;                                                             \
      }                                                                            \
      counts[g]++;                                                                 \
      inverse[pos ? pos[i] : i] = g + base;                                        \
    }                                                                              \
    return g + 1;                                                                  \
  }
CPU_ALL_TYPES(UNIQUE_KERNEL)

static DLE_KERNEL(cpu_unique) {
  const dle_tensor *v = ins[0];
  const int64_t *pos = nin > 1 ? dle_tensor_data(ins[1]) : NULL;
  int64_t n = dle_tensor_numel(v), *inv = dle_tensor_data(outs[1]),
          *counts = dle_tensor_data(outs[2]), groups = 0;
  switch (v->dtype) {
#define UNIQUE_CASE(ID, T, CT)                                                              \
  case DLE_##ID:                                                                            \
    groups = unique_##ID(dle_tensor_data(v), pos, n, dle_tensor_data(outs[0]), inv, counts, \
                         a->index_base);                                                    \
    break;
    CPU_ALL_TYPES(UNIQUE_CASE)
    default: return dle_error("%s: no CPU kernel for %s", op_name(op), dle_dtype_name(v->dtype));
  }
  *(int64_t *)dle_tensor_data(outs[3]) = groups;
  return DLE_OK;
}

/* ---------------------------------------------------------------- bincount */

/* x int64 (the front door casts), weights in the output's dtype or none (counts in int64). */
#define BINCOUNT_ADD(ID, T, CT)                                                              \
  static void bincount_##ID(T *out, const int64_t *x, int64_t sx, const char *w, int64_t sw, \
                            int64_t n) {                                                     \
    for (int64_t i = 0; i < n; i++) {                                                        \
      T *o = out + x[i * sx];                                                                \
      *o = ST_##ID(LD_##ID(*o) + (w ? LD_##ID(*(const T *)(w + i * sw)) : 1));               \
    }                                                                                        \
  }
CPU_NUMERIC_TYPES(BINCOUNT_ADD)

static DLE_KERNEL(cpu_bincount) {
  dle_tensor *out = outs[0];
  const dle_tensor *x = ins[0], *w = nin > 1 ? ins[1] : NULL;
  const int64_t *xv = dle_tensor_data(x);
  int64_t n = x->sizes[0], sx = x->strides[0], len = out->sizes[0];
  for (int64_t i = 0; i < n; i++)
    if (xv[i * sx] < 0 || xv[i * sx] >= len)
      return dle_error("bincount: x must hold non-negative integers, got %lld (shape %s)",
                       (long long)xv[i * sx], SHAPE(x));
  if (!dle_tensor_is_contiguous(out))
    return dle_error("bincount: the output must be contiguous (shape %s)", SHAPE(out));
  memset(dle_tensor_data(out), 0, (size_t)(len * cpu_esize(out->dtype)));
  const char *wv = w ? dle_tensor_data(w) : NULL;
  int64_t sw = w ? w->strides[0] * cpu_esize(w->dtype) : 0;
  switch (out->dtype) {
#define BINCOUNT_CASE(ID, T, CT) \
  case DLE_##ID: bincount_##ID(dle_tensor_data(out), xv, sx, wv, sw, n); return DLE_OK;
    CPU_NUMERIC_TYPES(BINCOUNT_CASE)
    default: break;
  }
  return dle_error("%s: no CPU kernel for %s", op_name(op), dle_dtype_name(out->dtype));
}

/* ---------------------------------------------------------------- searchsorted */

/* a before b in the sort order (NaN after every number). */
#define SS_LESS(a, b) ((a) < (b) || ((b) != (b) && (a) == (a)))

typedef struct {
  walk_data wd;          /* operands: out (0), values (1) over values' shape */
  const dle_tensor *seq; /* {..., n} */
  int64_t m;             /* values per row (values' last dim; 1 for 0-dim values) */
  bool right;
  int64_t base;
} search_ctx;

/* Byte offset of row r of seq (its leading dims), 0 when seq is 1-D (one row for all). */
static int64_t seq_row(const dle_tensor *seq, int64_t r) {
  int64_t off = 0;
  for (int d = seq->ndim - 2; d >= 0; d--) {
    off += (r % seq->sizes[d]) * seq->strides[d];
    r /= seq->sizes[d];
  }
  return off * cpu_esize(seq->dtype);
}

#define SEARCH_KERNEL(ID, T, CT)                                                        \
  static void search_##ID(const search_ctx *c, int64_t b, int64_t e) {                  \
    const walk *w = &c->wd.w;                                                           \
    const dle_tensor *seq = c->seq;                                                     \
    int64_t n = seq->sizes[seq->ndim - 1], ss = seq->strides[seq->ndim - 1], off[3];    \
    const char *sbase = dle_tensor_data(seq);                                           \
    for (int64_t i = b; i < e; i++) {                                                   \
      walk_at(w, i, off, NULL);                                                         \
      const T *row = (const T *)(sbase + (seq->ndim > 1 ? seq_row(seq, i / c->m) : 0)); \
      CT v = LD_##ID(*(const T *)(c->wd.data[1] + off[1]));                             \
      int64_t lo = 0, hi = n;                                                           \
      while (lo < hi) {                                                                 \
        int64_t mid = lo + (hi - lo) / 2;                                               \
        CT s = LD_##ID(row[mid * ss]);                                                  \
        bool go_right = c->right ? !SS_LESS(v, s) : SS_LESS(s, v);                      \
        if (go_right)                                                                   \
          lo = mid + 1;                                                                 \
        else                                                                            \
          hi = mid;                                                                     \
      }                                                                                 \
      *(int64_t *)((char *)c->wd.data[0] + off[0]) = lo + c->base;                      \
    }                                                                                   \
  }
CPU_NUMERIC_TYPES(SEARCH_KERNEL)
typedef void (*search_fn)(const search_ctx *, int64_t, int64_t);
#define SEARCH_ENTRY(ID, T, CT) [DLE_##ID] = search_##ID,
static const search_fn search_fns[DLE_NUM_DTYPES] = {CPU_NUMERIC_TYPES(SEARCH_ENTRY)};

static DLE_KERNEL(cpu_searchsorted) {
  const dle_tensor *v = ins[1];
  search_fn fn = search_fns[v->dtype];
  if (!fn) return dle_error("%s: no CPU kernel for %s", op_name(op), dle_dtype_name(v->dtype));
  search_ctx c = {.seq = ins[0],
                  .m = v->ndim ? v->sizes[v->ndim - 1] : 1,
                  .right = a->nints > 0 && a->ints[0],
                  .base = a->index_base};
  walk_init(&c.wd.w, v->ndim, v->sizes);
  walk_add(&c.wd.w, outs[0]), c.wd.data[0] = dle_tensor_data(outs[0]);
  walk_add(&c.wd.w, v), c.wd.data[1] = dle_tensor_data(v);
  int64_t n = dle_tensor_numel(v);
  if (n == 0 || c.m == 0) return DLE_OK;
  int nt = team_for(n * 8); /* a binary search per element */
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    int t = 0, m = 1;
    cpu_team(&t, &m);
    int64_t b, e;
    range_of(t, m, n, &b, &e);
    fn(&c, b, e);
  }
  return DLE_OK;
}

/* ---------------------------------------------------------------- mode */

/* Each line's (value, position) pairs are sorted by value (NaN last, NaNs equal), then by
 * position; the longest run wins, the first (smallest) among equally long ones, and its last
 * position is reported (PyTorch's choice). */
#define MODE_KERNEL(ID, T, CT)                                                              \
  typedef struct {                                                                          \
    CT v;                                                                                   \
    int64_t p;                                                                              \
  } mode_pair_##ID;                                                                         \
  static int mode_cmp_##ID(const void *pa, const void *pb) {                                \
    const mode_pair_##ID *a = pa, *b = pb;                                                  \
    if (SS_LESS(a->v, b->v)) return -1;                                                     \
    if (SS_LESS(b->v, a->v)) return 1;                                                      \
    return (a->p > b->p) - (a->p < b->p);                                                   \
  }                                                                                         \
  static void mode_line_##ID(const T *x, int64_t sd, int64_t n, mode_pair_##ID *buf, T *vo, \
                             int64_t *io, int64_t base) {                                   \
    for (int64_t j = 0; j < n; j++) buf[j].v = LD_##ID(x[j * sd]), buf[j].p = j;            \
    qsort(buf, (size_t)n, sizeof *buf, mode_cmp_##ID);                                      \
    int64_t best = 0, best_len = 0;                                                         \
    for (int64_t j = 0; j < n;) {                                                           \
      int64_t k = j + 1;                                                                    \
      while (k < n && !SS_LESS(buf[j].v, buf[k].v)) k++;                                    \
      if (k - j > best_len) best = k - 1, best_len = k - j;                                 \
      j = k;                                                                                \
    }                                                                                       \
    *vo = x[buf[best].p * sd];                                                              \
    *io = buf[best].p + base;                                                               \
  }                                                                                         \
  static bool mode_##ID(const dle_tensor *x, int d, T *vo, int64_t *io, int64_t base) {     \
    int64_t n = x->sizes[d], lines = dle_tensor_numel(x) / n;                               \
    bool failed = false;                                                                    \
    const T *xb = dle_tensor_data(x);                                                       \
    _Pragma("omp parallel if (lines > 1 && cpu_parallel(lines * n))")                       \
    {                                                                                       \
      mode_pair_##ID *buf = malloc(sizeof *buf * (size_t)n);                                \
      if (!buf) {                                                                           \
        _Pragma("omp atomic write")                                                         \
        failed = true;                                                                      \
      } else {                                                                              \
        _Pragma("omp for schedule(dynamic, 16)")                                            \
        for (int64_t l = 0; l < lines; l++) {                                               \
          int64_t off = 0, r = l;                                                           \
          for (int j = x->ndim - 1; j >= 0; j--) {                                          \
            if (j == d) continue;                                                           \
            off += (r % x->sizes[j]) * x->strides[j];                                       \
            r /= x->sizes[j];                                                               \
          }                                                                                 \
          mode_line_##ID(xb + off, x->strides[d], n, buf, vo + l, io + l, base);            \
        }                                                                                   \
        free(buf);                                                                          \
      }                                                                                     \
    }                                                                                       \
    return !failed;                                                                         \
  }
CPU_ALL_TYPES(MODE_KERNEL)

static DLE_KERNEL(cpu_mode) {
  const dle_tensor *x = ins[0];
  int d = (int)a->ints[0];
  if (dle_tensor_numel(x) == 0) return DLE_OK;
  bool ok = false;
  switch (x->dtype) {
#define MODE_CASE(ID, T, CT)                                                                 \
  case DLE_##ID:                                                                             \
    ok = mode_##ID(x, d, dle_tensor_data(outs[0]), dle_tensor_data(outs[1]), a->index_base); \
    break;
    CPU_ALL_TYPES(MODE_CASE)
    default: return dle_error("%s: no CPU kernel for %s", op_name(op), dle_dtype_name(x->dtype));
  }
  return ok ? DLE_OK
            : dle_error("mode: out of memory for lines of %lld elements", (long long)x->sizes[d]);
}

void cpu_register_select(dle_backend *b) {
  b->kernels[DLE_OP_NONZERO] = cpu_nonzero;
  b->kernels[DLE_OP_MASKED_SELECT] = cpu_masked_select;
  b->kernels[DLE_OP_MASKED_SCATTER] = cpu_masked_scatter;
  b->kernels[DLE_OP_UNIQUE] = cpu_unique;
  b->kernels[DLE_OP_BINCOUNT] = cpu_bincount;
  b->kernels[DLE_OP_SEARCHSORTED] = cpu_searchsorted;
  b->kernels[DLE_OP_MODE] = cpu_mode;
}
