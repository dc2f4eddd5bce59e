/* resample.c — CPU kernels of upsample and upsample_backward (kind RESAMPLE).
 *
 * The front door (engine/ops/resample.c) hands over a contiguous input and a fresh contiguous
 * output. The spatial dims are seen as {D, H, W} (missing leading ones of size 1, one tap). Each
 * dim gets a table of taps per output index (engine/kernel/resample_geom.h: PyTorch's source
 * indices and weights), so every mode is one loop nest:
 *   upsample           per plane (n, c), per output row (od, oh): the row is the sum over the
 *                      row taps (td, th) of their weight times the input row interpolated along
 *                      W, accumulated in the compute type CT; the nearest modes copy instead
 *                      (any dtype).
 *   upsample_backward  per plane, the same taps scatter gy * weight into the input plane,
 *                      accumulated in CT (in the output itself for float32 and float64).
 * Planes go to threads (static schedule); each thread has its own accumulator. */
#include <stdlib.h>

#include "../../engine/kernel/resample_geom.h"
#include "backend.h"
#include "cpu_loop.h"

DLE_RESAMPLE_TAPS(float, taps_float)
DLE_RESAMPLE_TAPS(double, taps_double)

/* One call's geometry: planes, and per spatial dim padded to {D, H, W} upsample's input and
 * output sizes and the taps per output index. */
typedef struct {
  int64_t planes, in[3], out[3];
  int k[3], d;
} rs_geom;

static rs_geom geom_of(dle_op op, const dle_tensor *x, const dle_tensor *y, const dle_attrs *a) {
  /* upsample reads x and writes y; the backward reads gy (upsample's output side) into gx */
  const dle_tensor *small = op == DLE_OP_UPSAMPLE ? x : y, *big = op == DLE_OP_UPSAMPLE ? y : x;
  rs_geom g = {x->sizes[0] * x->sizes[1], {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, x->ndim - 2};
  for (int i = 0; i < g.d; i++) {
    int j = 3 - g.d + i;
    g.in[j] = small->sizes[2 + i], g.out[j] = big->sizes[2 + i];
    g.k[j] = dle_resample_taps(a->ints[0]);
  }
  return g;
}

/* Tap tables of the three dims in CT: idx[j], w[j] hold out[j] * k[j] entries (padded dims: one
 * tap, index 0, weight 1). RS_TABLES(CT) defines tables_CT and tables_make_CT (false: out of
 * memory; free t->mem after). */
#define RS_TABLES(CT)                                                                              \
  typedef struct {                                                                                 \
    const int64_t *idx[3];                                                                         \
    const CT *w[3];                                                                                \
    void *mem;                                                                                     \
  } tables_##CT;                                                                                   \
  static bool tables_make_##CT(tables_##CT *t, const rs_geom *g, const dle_attrs *a) {             \
    size_t n = 0;                                                                                  \
    for (int j = 0; j < 3; j++) n += (size_t)(g->out[j] * g->k[j]);                                \
    t->mem = malloc(n * (sizeof(int64_t) + sizeof(CT)) + 1);                                       \
    if (!t->mem) return false;                                                                     \
    int64_t *ip = t->mem;                                                                          \
    CT *wp = (CT *)(void *)(ip + n);                                                               \
    for (int j = 0; j < 3; j++) {                                                                  \
      t->idx[j] = ip, t->w[j] = wp;                                                                \
      int i = j - (3 - g->d); /* the spatial dim, < 0 for padding */                               \
      for (int64_t o = 0; o < g->out[j]; o++) {                                                    \
        if (i < 0)                                                                                 \
          ip[o] = 0, wp[o] = 1;                                                                    \
        else                                                                                       \
          taps_##CT(a->ints[0], a->ints[1] != 0, g->in[j], g->out[j], dle_resample_scale(a, i), o, \
                    ip + o * g->k[j], wp + o * g->k[j]);                                           \
      }                                                                                            \
      ip += g->out[j] * g->k[j], wp += g->out[j] * g->k[j];                                        \
    }                                                                                              \
    return true;                                                                                   \
  }
RS_TABLES(float)
RS_TABLES(double)
#undef RS_TABLES

/* acc[0..n) += wr * (row interpolated along W with K taps per output): K a constant after
 * inlining, so the tap loop unrolls. */
#define RS_ROW(ID, T, CT)                                                                \
  static inline __attribute__((always_inline)) void row_##ID(                            \
      CT *acc, const T *row, int64_t n, int K, const int64_t *idx, const CT *w, CT wr) { \
    for (int64_t o = 0; o < n; o++) {                                                    \
      CT s = 0;                                                                          \
      for (int t = 0; t < K; t++) s += w[o * K + t] * (CT)LD_##ID(row[idx[o * K + t]]);  \
      acc[o] += wr * s;                                                                  \
    }                                                                                    \
  }

#define RS_FLOAT_KERNELS(ID, T, CT)                                                             \
  RS_ROW(ID, T, CT)                                                                             \
  static bool forward_##ID(const rs_geom *g, const tables_##CT *tb, T *y, const T *x) {         \
    int64_t IH = g->in[1], IW = g->in[2], OD = g->out[0], OH = g->out[1], OW = g->out[2];       \
    int64_t inplane = g->in[0] * IH * IW, outplane = OD * OH * OW;                              \
    int KD = g->k[0], KH = g->k[1], KW = g->k[2];                                               \
    bool ok = true;                                                                             \
    _Pragma("omp parallel if (g->planes > 1 && cpu_parallel(g->planes * outplane))")            \
    {                                                                                           \
      CT *acc = malloc(sizeof(CT) * (size_t)(OW > 0 ? OW : 1));                                 \
      if (!acc) ok = false;                                                                     \
      _Pragma("omp for schedule(static)")                                                       \
      for (int64_t p = 0; p < g->planes; p++) {                                                 \
        if (!acc) continue;                                                                     \
        const T *xp = x + p * inplane;                                                          \
        for (int64_t od = 0; od < OD; od++)                                                     \
          for (int64_t oh = 0; oh < OH; oh++) {                                                 \
            for (int64_t o = 0; o < OW; o++) acc[o] = 0;                                        \
            for (int td = 0; td < KD; td++)                                                     \
              for (int th = 0; th < KH; th++) {                                                 \
                CT wr = tb->w[0][od * KD + td] * tb->w[1][oh * KH + th];                        \
                const T *row =                                                                  \
                    xp + (tb->idx[0][od * KD + td] * IH + tb->idx[1][oh * KH + th]) * IW;       \
                if (KW == 2)                                                                    \
                  row_##ID(acc, row, OW, 2, tb->idx[2], tb->w[2], wr);                          \
                else if (KW == 4)                                                               \
                  row_##ID(acc, row, OW, 4, tb->idx[2], tb->w[2], wr);                          \
                else                                                                            \
                  row_##ID(acc, row, OW, 1, tb->idx[2], tb->w[2], wr);                          \
              }                                                                                 \
            T *yr = y + p * outplane + (od * OH + oh) * OW;                                     \
            for (int64_t o = 0; o < OW; o++) yr[o] = ST_##ID(acc[o]);                           \
          }                                                                                     \
      }                                                                                         \
      free(acc);                                                                                \
    }                                                                                           \
    return ok;                                                                                  \
  }                                                                                             \
  static bool backward_##ID(const rs_geom *g, const tables_##CT *tb, T *gx, const T *gy) {      \
    int64_t IH = g->in[1], IW = g->in[2], OD = g->out[0], OH = g->out[1], OW = g->out[2];       \
    int64_t inplane = g->in[0] * IH * IW, outplane = OD * OH * OW;                              \
    int KD = g->k[0], KH = g->k[1], KW = g->k[2];                                               \
    bool direct = sizeof(T) == sizeof(CT), ok = true;                                           \
    _Pragma("omp parallel if (g->planes > 1 && cpu_parallel(g->planes * outplane))")            \
    {                                                                                           \
      CT *buf = direct ? NULL : malloc(sizeof(CT) * (size_t)(inplane > 0 ? inplane : 1));       \
      if (!direct && !buf) ok = false;                                                          \
      _Pragma("omp for schedule(static)")                                                       \
      for (int64_t p = 0; p < g->planes; p++) {                                                 \
        if (!direct && !buf) continue;                                                          \
        CT *acc = direct ? (CT *)(void *)(gx + p * inplane) : buf;                              \
        for (int64_t i = 0; i < inplane; i++) acc[i] = 0;                                       \
        const T *gp = gy + p * outplane;                                                        \
        for (int64_t od = 0; od < OD; od++)                                                     \
          for (int64_t oh = 0; oh < OH; oh++) {                                                 \
            const T *gr = gp + (od * OH + oh) * OW;                                             \
            for (int td = 0; td < KD; td++)                                                     \
              for (int th = 0; th < KH; th++) {                                                 \
                CT wr = tb->w[0][od * KD + td] * tb->w[1][oh * KH + th];                        \
                CT *ar = acc + (tb->idx[0][od * KD + td] * IH + tb->idx[1][oh * KH + th]) * IW; \
                const int64_t *iw = tb->idx[2];                                                 \
                const CT *ww = tb->w[2];                                                        \
                for (int64_t o = 0; o < OW; o++) {                                              \
                  CT v = wr * (CT)LD_##ID(gr[o]);                                               \
                  for (int t = 0; t < KW; t++) ar[iw[o * KW + t]] += ww[o * KW + t] * v;        \
                }                                                                               \
              }                                                                                 \
          }                                                                                     \
        if (!direct)                                                                            \
          for (int64_t i = 0; i < inplane; i++) gx[p * inplane + i] = ST_##ID(acc[i]);          \
      }                                                                                         \
      free(buf);                                                                                \
    }                                                                                           \
    return ok;                                                                                  \
  }

CPU_FLOAT_TYPES(RS_FLOAT_KERNELS)
#undef RS_FLOAT_KERNELS

/* The nearest modes copy: any dtype, one tap per dim (tables in float). */
#define RS_NEAREST(ID, T, CT)                                                                          \
  static void nearest_##ID(const rs_geom *g, const tables_float *tb, T *y, const T *x) {               \
    int64_t IH = g->in[1], IW = g->in[2], OD = g->out[0], OH = g->out[1], OW = g->out[2];              \
    int64_t inplane = g->in[0] * IH * IW, outplane = OD * OH * OW;                                     \
    _Pragma(                                                                                           \
        "omp parallel for collapse(2) schedule(static) if (cpu_parallel_light(g->planes * outplane))") \
    for (int64_t p = 0; p < g->planes; p++)                                                            \
      for (int64_t od = 0; od < OD; od++)                                                              \
        for (int64_t oh = 0; oh < OH; oh++) {                                                          \
          const T *row = x + p * inplane + (tb->idx[0][od] * IH + tb->idx[1][oh]) * IW;                \
          T *yr = y + p * outplane + (od * OH + oh) * OW;                                              \
          for (int64_t o = 0; o < OW; o++) yr[o] = row[tb->idx[2][o]];                                 \
        }                                                                                              \
  }
CPU_ALL_TYPES(RS_NEAREST)
#undef RS_NEAREST

static DLE_KERNEL(cpu_resample) {
  const char *fn = dle_op_get_info(op)->name;
  if (!dle_tensor_is_contiguous(ins[0]) || !dle_tensor_is_contiguous(outs[0]))
    return dle_error("%s: the CPU kernel expects a contiguous input and output", fn);
  rs_geom g = geom_of(op, ins[0], outs[0], a);
  void *y = dle_tensor_data(outs[0]);
  const void *x = dle_tensor_data(ins[0]);
  bool ok = true;
  if (op == DLE_OP_UPSAMPLE && g.k[2] == 1) {
    tables_float tb;
    if (!tables_make_float(&tb, &g, a)) return dle_error("%s: out of memory", fn);
#define CASE(ID, T, CT) \
  case DLE_##ID: nearest_##ID(&g, &tb, y, x); break;
    switch (ins[0]->dtype) {
      CPU_ALL_TYPES(CASE)
      default: ok = false;
    }
#undef CASE
    free(tb.mem);
    return ok ? DLE_OK
              : dle_error("%s: no CPU kernel for dtype %s", fn, dle_dtype_name(ins[0]->dtype));
  }
#define CASE(ID, T, CT)                                                                      \
  case DLE_##ID: {                                                                           \
    tables_##CT tb;                                                                          \
    if (!tables_make_##CT(&tb, &g, a)) return dle_error("%s: out of memory", fn);            \
    ok = op == DLE_OP_UPSAMPLE ? forward_##ID(&g, &tb, y, x) : backward_##ID(&g, &tb, y, x); \
    free(tb.mem);                                                                            \
    return ok ? DLE_OK : dle_error("%s: out of memory", fn);                                 \
  }
  CPU_DTYPE_SWITCH(fn, outs[0]->dtype, CPU_FLOAT_TYPES, CASE);
#undef CASE
}

void cpu_register_resample(dle_backend *b) {
  CPU_REGISTER(b, cpu_resample, DLE_OP_UPSAMPLE, DLE_OP_UPSAMPLE_BACKWARD);
}
