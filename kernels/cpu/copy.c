/* copy.c — CPU kernels that move or produce values: copy with dtype conversion (every pair of
 * dtypes, generated), full (fill) and arange. */
#include "cpu_loop.h"

#define COPY_LOOP(S, ST, SCT, D, DT, DCT)                                              \
  static void copy_##S##_##D(char **p, const int64_t *s, int64_t n, const void *ctx) { \
    (void)ctx;                                                                         \
    if (s[0] == sizeof(DT) && s[1] == sizeof(ST)) {                                    \
      DT *o = (DT *)p[0];                                                              \
      const ST *in = (const ST *)p[1];                                                 \
      _Pragma("GCC ivdep")                                                             \
      for (int64_t i = 0; i < n; i++) o[i] = ST_##D(LD_##S(in[i]));                    \
    } else {                                                                           \
      for (int64_t i = 0; i < n; i++)                                                  \
        *(DT *)(p[0] + i * s[0]) = ST_##D(LD_##S(*(const ST *)(p[1] + i * s[1])));     \
    }                                                                                  \
  }
#define COPY_FROM(S, ST, SCT) CPU_ALL_TYPES_WITH(COPY_LOOP, S, ST, SCT)
CPU_ALL_TYPES(COPY_FROM)
/* into complex from every dtype (the imaginary part of a real is 0); complex into a real dtype
 * has no loop: the copy front door refuses it (the imaginary part would be dropped) */
#define COPY_TO_COMPLEX(S, ST, SCT) CPU_COMPLEX_TYPES_WITH(COPY_LOOP, S, ST, SCT)
CPU_ALL_TYPES(COPY_TO_COMPLEX)
CPU_COMPLEX_TYPES(COPY_TO_COMPLEX)

#define COPY_ENTRY(S, ST, SCT, D, DT, DCT)  [DLE_##S][DLE_##D] = copy_##S##_##D,
#define COPY_ENTRIES_FROM(S, ST, SCT)       CPU_ALL_TYPES_WITH(COPY_ENTRY, S, ST, SCT)
#define COPY_ENTRIES_TO_COMPLEX(S, ST, SCT) CPU_COMPLEX_TYPES_WITH(COPY_ENTRY, S, ST, SCT)
static const cpu_loop_fn copy_loops[DLE_NUM_DTYPES][DLE_NUM_DTYPES] = {
    CPU_ALL_TYPES(COPY_ENTRIES_FROM) CPU_ALL_TYPES(COPY_ENTRIES_TO_COMPLEX)
        CPU_COMPLEX_TYPES(COPY_ENTRIES_TO_COMPLEX)};

/* Same dtype, same bytes: a raw byte copy per run; strided runs move whole elements as integers
 * of the element's size (a memcpy call per element would cost more than the copy). */
#define COPY_STRIDED(T) \
  for (int64_t i = 0; i < n; i++) *(T *)(p[0] + i * s[0]) = *(const T *)(p[1] + i * s[1])
static void copy_bytes(char **p, const int64_t *s, int64_t n, const void *ctx) {
  int64_t es = *(const int64_t *)ctx;
  if (s[0] == es && s[1] == es)
    memcpy(p[0], p[1], (size_t)(n * es));
  else if (es == 4)
    COPY_STRIDED(uint32_t);
  else if (es == 8)
    COPY_STRIDED(uint64_t);
  else if (es == 2)
    COPY_STRIDED(uint16_t);
  else if (es == 1)
    COPY_STRIDED(uint8_t);
  else
    for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * s[0], p[1] + i * s[1], (size_t)es);
}

static DLE_KERNEL(cpu_copy) {
  dle_tensor *dst = outs[0], *src = ins[0];
  if (dst->dtype == src->dtype && dst->dtype != DLE_BOOL) {
    int64_t es = cpu_esize(dst->dtype);
    dle_tensor *ops[2] = {dst, src};
    cpu_iter it;
    cpu_iter_init(&it, 2, ops);
    if (!cpu_iter_copy_transposed(&it)) cpu_iter_run_elementwise(&it, copy_bytes, &es);
  } else {
    if (!copy_loops[src->dtype][dst->dtype])
      return dle_error("copy: no CPU conversion from %s to %s", dle_dtype_name(src->dtype),
                       dle_dtype_name(dst->dtype));
    cpu_foreach_elementwise(dst, ins, 1, copy_loops[src->dtype][dst->dtype], NULL,
                            CPU_PARALLEL_GRAIN_LIGHT);
  }
  return DLE_OK;
}

/* full: the value is converted once, then stored (any strides: fill_ writes into views). */
#define FILL_LOOP(ID, T, CT)                                                      \
  static void fill_##ID(char **p, const int64_t *s, int64_t n, const void *ctx) { \
    const T v = ST_##ID(*(const double *)ctx);                                    \
    if (s[0] == sizeof(T)) {                                                      \
      T *o = (T *)p[0];                                                           \
      for (int64_t i = 0; i < n; i++) o[i] = v;                                   \
    } else {                                                                      \
      for (int64_t i = 0; i < n; i++) *(T *)(p[0] + i * s[0]) = v;                \
    }                                                                             \
  }
CPU_ALL_TYPES(FILL_LOOP)
CPU_COMPLEX_TYPES(FILL_LOOP)
#define FILL_ENTRY(ID, T, CT) [DLE_##ID] = fill_##ID,
static const cpu_loop_fn fill_loops[DLE_NUM_DTYPES] = {CPU_ALL_TYPES(FILL_ENTRY)
                                                           CPU_COMPLEX_TYPES(FILL_ENTRY)};

static DLE_KERNEL(cpu_full) {
  cpu_foreach(outs[0], NULL, 0, fill_loops[outs[0]->dtype], &a->f[0]);
  return DLE_OK;
}

/* arange: element i is start + i * step, computed in double then converted. */
#define ARANGE_LOOP(ID, T, CT)                                                \
  static void arange_##ID(T *o, int64_t n, double start, double step) {       \
    for (int64_t i = 0; i < n; i++) o[i] = ST_##ID(start + (double)i * step); \
  }
CPU_ALL_TYPES(ARANGE_LOOP)

static DLE_KERNEL(cpu_arange) {
  dle_tensor *o = outs[0];
  int64_t n = dle_tensor_numel(o);
  void *d = dle_tensor_data(o);
  switch (o->dtype) {
#define ARANGE_CASE(ID, T, CT) \
  case DLE_##ID: arange_##ID((T *)d, n, a->f[0], a->f[1]); break;
    CPU_ALL_TYPES(ARANGE_CASE)
    default: return dle_error("arange: bad dtype");
  }
  return DLE_OK;
}

void cpu_register_copy(dle_backend *b) {
  b->kernels[DLE_OP_COPY] = cpu_copy;
  b->kernels[DLE_OP_FULL] = cpu_full;
  b->kernels[DLE_OP_ARANGE] = cpu_arange;
}
