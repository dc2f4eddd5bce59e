/* nn.c — CPU kernels of embedding (row gather and its index-add backward) and dropout (softmax
 * cross-entropy is with the other losses, losses.c).
 *
 * The front door (engine/ops/nn.c) hands over contiguous float32 or float64 inputs, int64
 * contiguous indices and fresh contiguous outputs. Each body is written once and instantiated
 * for both float types by NN_TYPES. Indices are checked here (where their values are read), so a
 * bad row gives an error naming the op instead of a stray memory access.
 *
 * dropout        element i keeps its value when the float32 uniform of Philox word i % 4 of block
 *                offset + i / 4 is >= p (the numbers dle.rand would give), so the mask is the same
 *                for any thread count, and the gradient regenerates it from (seed, offset). */
#include "../../engine/internal.h"
#include "backend.h"
#include "cpu_loop.h"
#include "cpu_nn_common.h"

#define NN_TYPES(X) X(F32, float) X(F64, double)

/* ---- embedding ---- */

/* Every index must be a row base..base+V-1. */
static dle_status check_rows(const char *fn, const int64_t *idx, int64_t n, int64_t v,
                             int64_t base) {
  for (int64_t p = 0; p < n; p++)
    if (idx[p] < base || idx[p] - base >= v) /* not idx - base < 0: overflows for INT64_MIN */
      return dle_error(
          "%s: index %lld (at position %lld) is out of range for %lld rows (%lld..%lld)", fn,
          (long long)idx[p], (long long)(p + base), (long long)v, (long long)base,
          (long long)(base + v - 1));
  return DLE_OK;
}

#define EMB_COLS 64 /* columns per task of the backward's index-add */

#define EMBEDDING_KERNELS(ID, CT)                                                               \
  static dle_status emb_fwd_##ID(dle_tensor *out, dle_tensor *const *ins, const dle_attrs *a) { \
    const CT *w = dle_tensor_data(ins[0]);                                                      \
    const int64_t *idx = dle_tensor_data(ins[1]);                                               \
    int64_t n = dle_tensor_numel(ins[1]), v = ins[0]->sizes[0], d = ins[0]->sizes[1];           \
    int64_t base = a->index_base, pad = a->ints[1];                                             \
    bool zero_pad = a->ints[0] && a->ints[2];                                                   \
    CT *o = dle_tensor_data(out);                                                               \
    DLE_TRY(check_rows("embedding", idx, n, v, base));                                          \
    _Pragma("omp parallel for schedule(static) if (n * d >= CPU_PARALLEL_GRAIN)")               \
    for (int64_t p = 0; p < n; p++) {                                                           \
      if (zero_pad && idx[p] == pad)                                                            \
        memset(o + p * d, 0, sizeof(CT) * (size_t)d);                                           \
      else                                                                                      \
        memcpy(o + p * d, w + (idx[p] - base) * d, sizeof(CT) * (size_t)d);                     \
    }                                                                                           \
    return DLE_OK;                                                                              \
  }                                                                                             \
  /* Columns are split between threads, so no two threads add into the same element. */         \
  static dle_status emb_bwd_##ID(dle_tensor *out, dle_tensor *const *ins, const dle_attrs *a) { \
    const CT *gy = dle_tensor_data(ins[0]);                                                     \
    const int64_t *idx = dle_tensor_data(ins[1]);                                               \
    int64_t n = dle_tensor_numel(ins[1]), v = out->sizes[0], d = out->sizes[1];                 \
    int64_t base = a->index_base, pad = a->ints[1];                                             \
    bool skip_pad = a->ints[0] != 0;                                                            \
    CT *o = dle_tensor_data(out);                                                               \
    DLE_TRY(check_rows("embedding_backward", idx, n, v, base));                                 \
    memset(o, 0, sizeof(CT) * (size_t)(v * d));                                                 \
    int64_t tasks = (d + EMB_COLS - 1) / EMB_COLS;                                              \
    bool parallel = tasks > 1 && n * d >= CPU_PARALLEL_GRAIN;                                   \
    _Pragma("omp parallel for schedule(static) if (parallel)")                                  \
    for (int64_t k = 0; k < tasks; k++) {                                                       \
      int64_t c0 = k * EMB_COLS, c1 = c0 + EMB_COLS < d ? c0 + EMB_COLS : d;                    \
      for (int64_t p = 0; p < n; p++) {                                                         \
        if (skip_pad && idx[p] == pad) continue;                                                \
        CT *dst = o + (idx[p] - base) * d;                                                      \
        const CT *src = gy + p * d;                                                             \
        for (int64_t j = c0; j < c1; j++) dst[j] += src[j];                                     \
      }                                                                                         \
    }                                                                                           \
    return DLE_OK;                                                                              \
  }
NN_TYPES(EMBEDDING_KERNELS)

/* ---- dropout ---- */

#define DROPOUT_CHUNK 64 /* Philox blocks generated at once (256 elements) */

#define DROPOUT_KERNEL(ID, CT)                                                           \
  static void dropout_##ID(dle_tensor *out, const dle_tensor *in, const dle_attrs *a) {  \
    const CT *x = dle_tensor_data(in);                                                   \
    CT *y = dle_tensor_data(out);                                                        \
    int64_t n = dle_tensor_numel(in);                                                    \
    double p = a->f[0];                                                                  \
    if (p >= 1) {                                                                        \
      memset(y, 0, sizeof(CT) * (size_t)n);                                              \
      return;                                                                            \
    }                                                                                    \
    uint64_t seed = (uint64_t)a->ints[0], offset = (uint64_t)a->ints[1];                 \
    float thr = (float)p;                                                                \
    CT scale = (CT)(1.0 / (1.0 - p));                                                    \
    int64_t blocks = (n + 3) / 4, chunks = (blocks + DROPOUT_CHUNK - 1) / DROPOUT_CHUNK; \
    _Pragma("omp parallel for schedule(static) if (n >= CPU_PARALLEL_GRAIN)")            \
    for (int64_t ch = 0; ch < chunks; ch++) {                                            \
      uint32_t w[DROPOUT_CHUNK][4];                                                      \
      int64_t b0 = ch * DROPOUT_CHUNK;                                                   \
      int64_t nb = blocks - b0 < DROPOUT_CHUNK ? blocks - b0 : DROPOUT_CHUNK;            \
      dle_philox_blocks(seed, offset + (uint64_t)b0, nb, w);                             \
      int64_t i0 = b0 * 4, i1 = i0 + nb * 4 < n ? i0 + nb * 4 : n;                       \
      for (int64_t i = i0; i < i1; i++) {                                                \
        float u = (float)(w[(i - i0) / 4][i % 4] >> 8) * 0x1p-24f;                       \
        y[i] = u >= thr ? x[i] * scale : (CT)0;                                          \
      }                                                                                  \
    }                                                                                    \
  }
NN_TYPES(DROPOUT_KERNEL)

/* ---- dispatch over dtypes ---- */

#define NN_OPS(ID, CT)                                                                           \
  static dle_status nn_##ID(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin, \
                            const dle_attrs *a) {                                                \
    (void)nin;                                                                                   \
    switch (op) {                                                                                \
      case DLE_OP_EMBEDDING: return emb_fwd_##ID(outs[0], ins, a);                               \
      case DLE_OP_EMBEDDING_BACKWARD: return emb_bwd_##ID(outs[0], ins, a);                      \
      default: dropout_##ID(outs[0], ins[0], a); return DLE_OK; /* DROPOUT */                    \
    }                                                                                            \
  }
NN_TYPES(NN_OPS)

CPU_FLOAT_FAMILY(nn)

void cpu_register_nn(dle_backend *b) {
  CPU_REGISTER(b, cpu_nn, DLE_OP_EMBEDDING, DLE_OP_EMBEDDING_BACKWARD, DLE_OP_DROPOUT);
}
