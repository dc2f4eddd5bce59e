/* nn.cu — CUDA kernels of embedding and dropout, mirroring kernels/cpu/nn.c, and the checks of
 * targets and the totals of row losses that losses.cu shares. The front door (engine/ops/nn.c)
 * hands over contiguous float32 or float64 inputs, int64 contiguous indices and fresh contiguous
 * outputs.
 *
 * embedding      rows gathered (zeros at padding_idx when asked); backward adds gy's rows into
 *                a zeroed {V, D} in index order, one thread per column (no atomics).
 * dropout        element i is kept when the float32 uniform of Philox word i % 4 of block
 *                offset + i / 4 is >= p (the CPU's mask, bit for bit), scaled by 1 / (1 - p).
 * Targets and rows are checked on the device before use: a bad one gives the CPU's message. */
#include "common.cuh"
#include "philox.cuh"

/* ---- targets and totals (shared with losses.cu) ---- */

/* flags[0]: the first position whose value is out of [base, base + limit) (n when none), not
 * counting those equal to `ignore` when has_ignore; flags[1]: positions not ignored. */
__global__ void first_bad_kernel(int64_t n, const int64_t *t, int64_t base, int64_t limit,
                                 bool has_ignore, int64_t ignore, unsigned long long *flags) {
  CU_GRID_LOOP(i, n) {
    if (has_ignore && t[i] == ignore) continue;
    if (t[i] < base || t[i] - base >= limit)
      atomicMin(&flags[0], (unsigned long long)i); /* no overflow */
    else
      atomicAdd(&flags[1], 1ull);
  }
}

/* The first bad position of t[0..n) (n when none), its value, and the count of positions not
 * ignored. */
static dle_status first_bad(const char *fn, int64_t n, const int64_t *t, int64_t base,
                            int64_t limit, bool has_ignore, int64_t ignore, int64_t *bad,
                            int64_t *value, int64_t *count) {
  unsigned long long *flags = NULL, h[2] = {(unsigned long long)n, 0};
  CU_OK(cu_scratch(fn, (void **)&flags, sizeof h));
  dle_status st = DLE_OK;
  cudaError_t e = cudaMemcpy(flags, h, sizeof h, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) st = cu_fail(fn, "cudaMemcpy", e);
  if (st == DLE_OK && n > 0) {
    first_bad_kernel<<<cu_blocks(n), CU_THREADS>>>(n, t, base, limit, has_ignore, ignore, flags);
    e = cudaGetLastError();
    if (e != cudaSuccess) st = cu_fail(fn, "the index check kernel", e);
  }
  if (st == DLE_OK) st = cu_read(fn, h, flags, sizeof h);
  cu_scratch_free(flags);
  CU_OK(st);
  *bad = (int64_t)h[0], *count = (int64_t)h[1], *value = 0;
  if (*bad < n) CU_OK(cu_read(fn, value, t + *bad, sizeof *value));
  return DLE_OK;
}

dle_status cu_check_targets(const char *fn, const ce_args &c, const int64_t *t, int64_t *count) {
  int64_t bad, v;
  CU_OK(first_bad(fn, c.n, t, c.base, c.c, c.has_ignore, c.ignore, &bad, &v, count));
  if (bad < c.n)
    return cu_error("%s: target %lld (row %lld) is out of range for %lld classes (%lld..%lld)", fn,
                    (long long)v, (long long)(bad + c.base), (long long)c.c, (long long)c.base,
                    (long long)(c.base + c.c - 1));
  return DLE_OK;
}

template <class CT>
__global__ void total_kernel(int64_t n, const double *rows, double div, CT *loss) {
  __shared__ double sh[CU_THREADS];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += rows[i];
  s = cu_block_reduce(s, sh, cu_add{});
  if (threadIdx.x == 0) loss[0] = (CT)(s / div);
}

dle_status cu_store_total(const char *fn, const double *rows, int64_t n, double div, bool dbl,
                          void *loss) {
  if (dbl)
    total_kernel<double><<<1, CU_THREADS>>>(n, rows, div, (double *)loss);
  else
    total_kernel<float><<<1, CU_THREADS>>>(n, rows, div, (float *)loss);
  CU_LAUNCHED(fn);
  return DLE_OK;
}

/* ---- embedding ---- */

/* Every index must be a row base..base+V-1 (check_rows on the CPU). */
static dle_status check_rows(const char *fn, const int64_t *idx, int64_t n, int64_t v,
                             int64_t base) {
  int64_t bad, value, count;
  CU_OK(first_bad(fn, n, idx, base, v, false, 0, &bad, &value, &count));
  if (bad < n)
    return cu_error("%s: index %lld (at position %lld) is out of range for %lld rows (%lld..%lld)",
                    fn, (long long)value, (long long)(bad + base), (long long)v, (long long)base,
                    (long long)(base + v - 1));
  return DLE_OK;
}

template <class CT>
__global__ void embedding_kernel(int64_t n, int64_t d, const CT *w, const int64_t *idx,
                                 int64_t base, bool zero_pad, int64_t pad, CT *o) {
  CU_GRID_LOOP(e, n * d) {
    int64_t p = e / d, j = e % d;
    o[e] = zero_pad && idx[p] == pad ? (CT)0 : w[(idx[p] - base) * d + j];
  }
}

/* One thread per column, adding the rows in index order: the CPU's sums, bit for bit, without
 * atomics (and so the same on every run). */
template <class CT>
__global__ void embedding_backward_kernel(int64_t n, int64_t d, const CT *gy, const int64_t *idx,
                                          int64_t base, bool skip_pad, int64_t pad, CT *o) {
  CU_GRID_LOOP(j, d) {
    for (int64_t p = 0; p < n; p++) {
      if (skip_pad && idx[p] == pad) continue;
      o[(idx[p] - base) * d + j] += gy[p * d + j];
    }
  }
}

template <class CT>
static dle_status embedding(const char *fn, dle_op op, dle_tensor *out, dle_tensor *const *ins,
                            const dle_attrs *a) {
  const int64_t *idx = (const int64_t *)cu_data(ins[1]);
  int64_t n = cu_numel(ins[1]), base = a->index_base, pad = a->ints[1];
  if (op == DLE_OP_EMBEDDING) {
    int64_t v = ins[0]->sizes[0], d = ins[0]->sizes[1];
    CU_OK(check_rows(fn, idx, n, v, base));
    if (n * d == 0) return DLE_OK;
    embedding_kernel<CT><<<cu_blocks(n * d), CU_THREADS>>>(n, d, (const CT *)cu_data(ins[0]), idx,
                                                           base, a->ints[0] && a->ints[2], pad,
                                                           (CT *)cu_data(out));
  } else {
    int64_t v = out->sizes[0], d = out->sizes[1];
    CU_OK(check_rows(fn, idx, n, v, base));
    if (v * d == 0) return DLE_OK;
    CU_TRY(fn, cudaMemsetAsync(cu_data(out), 0, sizeof(CT) * (size_t)(v * d), 0));
    if (d == 0 || n == 0) return DLE_OK;
    embedding_backward_kernel<CT><<<cu_blocks(d), CU_THREADS>>>(
        n, d, (const CT *)cu_data(ins[0]), idx, base, a->ints[0] != 0, pad, (CT *)cu_data(out));
  }
  CU_LAUNCHED(fn);
  return DLE_OK;
}

/* ---- dropout ---- */

template <class CT>
__global__ void dropout_kernel(int64_t n, const CT *x, CT *y, double p, uint64_t seed,
                               uint64_t offset) {
  float thr = (float)p;
  CT scale = (CT)(1.0 / (1.0 - p));
  CU_GRID_LOOP(i, n) {
    if (p >= 1) {
      y[i] = 0;
      continue;
    }
    uint32_t w[4];
    cu_philox(seed, offset + (uint64_t)(i / 4), w);
    float u = (float)(w[i % 4] >> 8) * 0x1p-24f;
    y[i] = u >= thr ? x[i] * scale : (CT)0;
  }
}

template <class CT>
static dle_status dropout(const char *fn, dle_tensor *out, dle_tensor *in, const dle_attrs *a) {
  int64_t n = cu_numel(in);
  if (n == 0) return DLE_OK;
  dropout_kernel<CT><<<cu_blocks(n), CU_THREADS>>>(n, (const CT *)cu_data(in), (CT *)cu_data(out),
                                                   a->f[0], (uint64_t)a->ints[0],
                                                   (uint64_t)a->ints[1]);
  CU_LAUNCHED(fn);
  return DLE_OK;
}

/* ---- dispatch ---- */

dle_status cu_float_rows_ready(const char *fn, const dle_tensor *o, dle_tensor *const *ins,
                               int nin) {
  for (int i = 0; i < nin; i++)
    if ((ins[i]->dtype != o->dtype && ins[i]->dtype != DLE_I64) || !cu_contiguous(ins[i]))
      return cu_error("%s: the CUDA kernel expects contiguous %s or int64 inputs", fn,
                      cu_dtype_name(o->dtype));
  if (!cu_contiguous(o)) return cu_error("%s: the CUDA kernel expects a contiguous output", fn);
  if (o->dtype != DLE_F32 && o->dtype != DLE_F64)
    return cu_error("%s: no CUDA kernel for %s", fn, cu_dtype_name(o->dtype));
  return cu_use_device(fn, o);
}

static dle_status cu_nn(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                        const dle_attrs *a) {
  return cu_float_rows_run(op, outs, ins, nin, [&](const char *fn, auto zero) {
    using T = decltype(zero);
    if (op == DLE_OP_DROPOUT) return dropout<T>(fn, outs[0], ins[0], a);
    return embedding<T>(fn, op, outs[0], ins, a); /* embedding, embedding_backward */
  });
}

void cu_register_nn(dle_backend *b) {
  b->kernels[DLE_OP_EMBEDDING] = cu_nn;
  b->kernels[DLE_OP_EMBEDDING_BACKWARD] = cu_nn;
  b->kernels[DLE_OP_DROPOUT] = cu_nn;
}
