/* quant.c — the entry points of weight-only quantization (dle.h, "weight-only quantization"):
 * the block formats' sizes, argument checks, then one call into the device backend's kernels. */
#include "internal.h"

static const struct {
  const char *name;
  int64_t block, bytes;
} formats[DLE_NUM_QTYPES] = {
    [DLE_Q8_0] = {"q8_0", 32, 2 + 32},
    [DLE_Q4_0] = {"q4_0", 32, 2 + 16},
    [DLE_Q4_K] = {"q4_k", 256, 2 + 2 + 12 + 128},
};

static bool valid(dle_qtype q) { return (unsigned)q < DLE_NUM_QTYPES; }

const char *dle_qtype_name(dle_qtype q) { return valid(q) ? formats[q].name : "?"; }
int64_t dle_qtype_block(dle_qtype q) { return valid(q) ? formats[q].block : 0; }
int64_t dle_qtype_block_bytes(dle_qtype q) { return valid(q) ? formats[q].bytes : 0; }

bool dle_qtype_parse(const char *name, dle_qtype *q) {
  for (int i = 0; i < DLE_NUM_QTYPES; i++)
    if (name && strcmp(name, formats[i].name) == 0) {
      *q = (dle_qtype)i;
      return true;
    }
  return false;
}

/* The CPU's quantization kernels for a tensor on device d, or an error naming fn. */
static dle_status kernels_for(const char *fn, const dle_tensor *t, const dle_quant_kernels **k) {
  char buf[32];
  dle_device d = dle_tensor_device(t);
  const dle_backend *b = d.type == DLE_CPU ? dle_backend_get(DLE_CPU) : NULL;
  if (!b || !b->quant)
    return dle_error(
        "%s: quantized tensors are computed on the CPU only, got a tensor on %s "
        "(move it with :cpu())",
        fn, dle_device_str(buf, sizeof buf, d));
  *k = b->quant;
  return DLE_OK;
}

/* A float32, contiguous, 2-D CPU matrix that does not require grad (the Lua layer prepares it). */
static dle_status check_matrix(const char *fn, const char *what, const dle_tensor *t) {
  if (!t) return dle_error("%s: %s is missing", fn, what);
  if (t->ndim != 2 || t->dtype != DLE_F32 || !dle_tensor_is_contiguous(t))
    return dle_error("%s: %s must be a contiguous 2-D float32 tensor, got %s %s", fn, what,
                     dle_dtype_name(t->dtype), SHAPE(t));
  return DLE_OK;
}

/* The quantized matrix w: contiguous uint8 {rows, cols / block * block bytes}. */
static dle_status check_blocks(const char *fn, const dle_tensor *w, dle_qtype q, int64_t cols) {
  if (!valid(q)) return dle_error("%s: unknown quantization type %d", fn, (int)q);
  if (!w) return dle_error("%s: the quantized data is missing", fn);
  int64_t blk = formats[q].block;
  if (cols <= 0 || cols % blk != 0)
    return dle_error(
        "%s: %s rows of %lld values: the row length must be a positive multiple of %lld", fn,
        formats[q].name, (long long)cols, (long long)blk);
  int64_t rb = cols / blk * formats[q].bytes;
  if (w->ndim != 2 || w->dtype != DLE_U8 || !dle_tensor_is_contiguous(w) || w->sizes[1] != rb)
    return dle_error(
        "%s: %s data for rows of %lld values must be contiguous uint8 {rows, %lld}, "
        "got %s %s",
        fn, formats[q].name, (long long)cols, (long long)rb, dle_dtype_name(w->dtype), SHAPE(w));
  return DLE_OK;
}

dle_status dle_quantize(dle_tensor **out, dle_tensor *x, dle_qtype q) {
  const char *fn = "quantize";
  *out = NULL;
  if (!valid(q)) return dle_error("%s: unknown quantization type %d", fn, (int)q);
  DLE_TRY(check_matrix(fn, "input", x));
  const dle_quant_kernels *k = NULL;
  DLE_TRY(kernels_for(fn, x, &k));
  int64_t rows = x->sizes[0], cols = x->sizes[1], blk = formats[q].block;
  if (cols == 0 || cols % blk != 0)
    return dle_error("%s: %s needs the last dimension to be a multiple of %lld, got shape %s", fn,
                     formats[q].name, (long long)blk, SHAPE(x));
  int64_t sizes[2] = {rows, cols / blk * formats[q].bytes};
  DLE_TRY(dle_tensor_empty(out, 2, sizes, DLE_U8, DLE_DEVICE_CPU));
  k->quantize(q, rows, cols, dle_tensor_data(x), dle_tensor_data(*out));
  return DLE_OK;
}

dle_status dle_dequantize(dle_tensor **out, dle_tensor *w, dle_qtype q, int64_t cols) {
  const char *fn = "dequantize";
  *out = NULL;
  DLE_TRY(check_blocks(fn, w, q, cols));
  const dle_quant_kernels *k = NULL;
  DLE_TRY(kernels_for(fn, w, &k));
  int64_t sizes[2] = {w->sizes[0], cols};
  DLE_TRY(dle_tensor_empty(out, 2, sizes, DLE_F32, DLE_DEVICE_CPU));
  k->dequantize(q, w->sizes[0], cols, dle_tensor_data(w), dle_tensor_data(*out));
  return DLE_OK;
}

dle_status dle_qmatmul(dle_tensor **out, dle_tensor *x, dle_tensor *w, dle_qtype q, int64_t cols,
                       bool transposed) {
  const char *fn = "matmul";
  *out = NULL;
  DLE_TRY(check_blocks(fn, w, q, cols));
  DLE_TRY(check_matrix(fn, "input", x));
  const dle_quant_kernels *k = NULL;
  DLE_TRY(kernels_for(fn, x, &k));
  int64_t m = x->sizes[0], n = w->sizes[0], inner = transposed ? cols : n;
  if (x->sizes[1] != inner)
    return dle_error("%s: shapes %s and %s{%lld,%lld}%s cannot be multiplied", fn, SHAPE(x),
                     formats[q].name, (long long)n, (long long)cols, transposed ? "^T" : "");
  dle_trace_note_unsafe("%s: a product with a quantized weight is not recorded in the graph", fn);
  int64_t sizes[2] = {m, transposed ? n : cols};
  DLE_TRY(dle_tensor_empty(out, 2, sizes, DLE_F32, DLE_DEVICE_CPU));
  if (m == 0 || sizes[1] == 0) return DLE_OK;
  if (transposed)
    k->matmul_nt(q, m, n, cols, dle_tensor_data(x), dle_tensor_data(w), dle_tensor_data(*out));
  else
    k->matmul_nn(q, m, n, cols, dle_tensor_data(x), dle_tensor_data(w), dle_tensor_data(*out));
  return DLE_OK;
}
