/* arrange.c — the CPU kernel of flip, roll and pad (kind ARRANGE): one strided copy for every op
 * and dtype, elements moved as bytes of their size. Along each dim, output index i reads input
 * index dle_arrange_src (engine/kernel/arrange_geom.h) or pad's fill. The dims before the last
 * become tables of byte offsets into the input; the last dim becomes runs, stretches whose source
 * index steps by a constant (+1 a plain copy, -1 a reversed one, 0 a repeated element, or the
 * fill), cut into pieces so that even one long row spreads over the threads (many rows are
 * shared out in blocks instead, each row's input offset advanced from the last). */
#include "../../engine/kernel/arrange_geom.h"
#include "backend.h"
#include "cpu_loop.h"

#include <stdlib.h>

#define ARR_PIECE 16384 /* at most this many elements of the last dim per work item */

typedef struct {
  int64_t out0, len; /* where in the output row, how many elements */
  int64_t src, step; /* the first input element's byte offset along the last dim, the step */
  bool fill;         /* pad's constant instead */
} arr_run;

/* n elements from x (byte step s) to contiguous y, or the fill value f; one loop per element
 * size, the common steps (+-1 element) written so that the compiler vectorizes them. */
#define ARR_COPY(T)                                                                                \
  static void copy_##T(char *yv, const char *xv, int64_t n, int64_t s, const void *f, bool fill) { \
    T *y = (T *)yv;                                                                                \
    if (fill) {                                                                                    \
      T v;                                                                                         \
      memcpy(&v, f, sizeof v);                                                                     \
      for (int64_t k = 0; k < n; k++) y[k] = v;                                                    \
    } else if (s == (int64_t)sizeof(T)) {                                                          \
      memcpy(y, xv, (size_t)n * sizeof(T));                                                        \
    } else if (s == -(int64_t)sizeof(T)) {                                                         \
      const T *x = (const T *)xv;                                                                  \
      for (int64_t k = 0; k < n; k++) y[k] = x[-k];                                                \
    } else {                                                                                       \
      for (int64_t k = 0; k < n; k++) memcpy(&y[k], xv + k * s, sizeof(T));                        \
    }                                                                                              \
  }
typedef struct {
  uint64_t w[2];
} arr_u128; /* 16-byte elements (complex128) */
ARR_COPY(uint8_t)
ARR_COPY(uint16_t)
ARR_COPY(uint32_t)
ARR_COPY(uint64_t)
ARR_COPY(arr_u128)

typedef void (*arr_copy_fn)(char *, const char *, int64_t, int64_t, const void *, bool);

static arr_copy_fn copy_for(int64_t es) {
  switch (es) {
    case 1: return copy_uint8_t;
    case 2: return copy_uint16_t;
    case 4: return copy_uint32_t;
    case 8: return copy_uint64_t;
    case 16: return copy_arr_u128;
    default: return NULL;
  }
}

/* The runs of the last dim d, cut into pieces of at most ARR_PIECE; *n receives their count. */
static arr_run *last_dim_runs(const dle_arrange_geom *g, int d, int64_t stride, int *n) {
  int64_t len = g->out[d], cap = 8, k = 0;
  arr_run *r = malloc((size_t)cap * sizeof *r);
  for (int64_t i = 0; r && i < len;) {
    int64_t s0 = dle_arrange_src(g, d, i), j = i + 1, step = 1;
    if (s0 < 0) {
      while (j < len && dle_arrange_src(g, d, j) < 0) j++;
    } else if (j < len && dle_arrange_src(g, d, j) >= 0) {
      step = dle_arrange_src(g, d, j) - s0;
      while (j < len && dle_arrange_src(g, d, j) == s0 + (j - i) * step) j++;
    }
    for (int64_t p = i; p < j; p += ARR_PIECE) {
      if (k == cap) {
        arr_run *m = realloc(r, (size_t)(cap *= 2) * sizeof *r);
        if (!m) {
          free(r);
          return NULL;
        }
        r = m;
      }
      int64_t pl = j - p < ARR_PIECE ? j - p : ARR_PIECE;
      r[k++] = (arr_run){p, pl, (s0 + (p - i) * step) * stride, step * stride, s0 < 0};
    }
    i = j;
  }
  *n = (int)k;
  return r;
}

static DLE_KERNEL(cpu_arrange) {
  const char *fn = dle_op_get_info(op)->name;
  dle_tensor *x = ins[0], *y = outs[0];
  int64_t es = (int64_t)dle_dtype_size(x->dtype), total = dle_tensor_numel(y);
  arr_copy_fn copy = copy_for(es);
  if (!copy) return dle_error("%s: no CPU kernel for %s", fn, dle_dtype_name(x->dtype));
  if (total == 0) return DLE_OK;
  const char *xd = dle_tensor_data(x);
  char *yd = dle_tensor_data(y);
  if (x->ndim == 0) {
    memcpy(yd, xd, (size_t)es);
    return DLE_OK;
  }
  unsigned char fillv[16] = {0};
  if (op == DLE_OP_PAD) switch (x->dtype) {
#define FILL_BYTES(ID, T, CT)    \
  case DLE_##ID: {               \
    T v = ST_##ID(a->f[0]);      \
    memcpy(fillv, &v, sizeof v); \
    break;                       \
  }
      CPU_ALL_TYPES(FILL_BYTES)
      default: break;
    }
  dle_arrange_geom g;
  dle_arrange_geom_of(&g, op, a, x->ndim, x->sizes);
  int nd = x->ndim, last = nd - 1, npieces = 0;
  /* byte offsets of the outer dims' output indices into the input (-1: fill), one table each */
  int64_t nofs = 0, *off[DLE_MAX_DIMS], outer = 1;
  for (int d = 0; d < last; d++) nofs += g.out[d], outer *= g.out[d];
  int64_t *ofs = malloc((size_t)(nofs ? nofs : 1) * sizeof *ofs);
  arr_run *runs = last_dim_runs(&g, last, x->strides[last] * es, &npieces);
  if (!ofs || !runs) {
    free(ofs);
    free(runs);
    return dle_error("%s: out of memory", fn);
  }
  for (int d = 0, at = 0; d < last; at += (int)g.out[d], d++) {
    off[d] = ofs + at;
    for (int64_t i = 0; i < g.out[d]; i++) {
      int64_t s = dle_arrange_src(&g, d, i);
      off[d][i] = s < 0 ? -1 : s * x->strides[d] * es;
    }
  }
  int64_t row = g.out[last];
  bool threads = total >= CPU_PARALLEL_GRAIN_LIGHT;
  if (outer >= 64 || npieces == 1) {
    /* many rows: each thread a block of them, their offsets advanced like an odometer */
#pragma omp parallel if (threads && outer > 1)
    {
      int64_t r0 = 0, r1 = outer;
#ifdef _OPENMP
      int nt = omp_get_num_threads(), t = omp_get_thread_num();
      r0 = outer * t / nt, r1 = outer * (t + 1) / nt;
#endif
      int64_t idx[DLE_MAX_DIMS] = {0};
      for (int64_t d = last - 1, rem = r0; d >= 0; d--) idx[d] = rem % g.out[d], rem /= g.out[d];
      for (int64_t r = r0; r < r1; r++) {
        int64_t base = 0;
        bool fill = false;
        for (int d = 0; d < last; d++) {
          int64_t o = off[d][idx[d]];
          fill |= o < 0;
          base += o;
        }
        char *yr = yd + r * row * es;
        for (int k = 0; k < npieces; k++) {
          const arr_run *p = &runs[k];
          bool f = fill || p->fill;
          copy(yr + p->out0 * es, f ? xd : xd + base + p->src, p->len, p->step, fillv, f);
        }
        for (int d = last - 1; d >= 0 && ++idx[d] == g.out[d]; d--) idx[d] = 0;
      }
    }
  } else {
    /* few long rows: every piece of every row is a work item */
    int64_t items = outer * npieces;
#pragma omp parallel for schedule(static) if (threads)
    for (int64_t it = 0; it < items; it++) {
      int64_t r = it / npieces, rem = r, base = 0;
      const arr_run *p = &runs[it % npieces];
      bool fill = p->fill;
      for (int d = last - 1; d >= 0; d--) {
        int64_t o = off[d][rem % g.out[d]];
        rem /= g.out[d];
        fill |= o < 0;
        base += o;
      }
      copy(yd + (r * row + p->out0) * es, fill ? xd : xd + base + p->src, p->len, p->step, fillv,
           fill);
    }
  }
  free(ofs);
  free(runs);
  return DLE_OK;
}

void cpu_register_arrange(dle_backend *b) {
  CPU_REGISTER(b, cpu_arrange, DLE_OP_FLIP, DLE_OP_ROLL, DLE_OP_PAD);
}
