/* losses.cu — CUDA kernels of the losses (engine/ops/losses.c), mirroring kernels/cpu/losses.c.
 * Inputs are contiguous float32/float64 (int64 class targets), outputs fresh and contiguous;
 * reduction ints[0]: 0 none, 1 mean, 2 sum. Targets are checked and row losses totalled by
 * nn.cu's helpers (common.cuh).
 *
 * cross_entropy  per row (one block): m = max (NaN skipped), lse = m + log(sum exp(x - m)) (-inf
 *     for an all -inf row), loss = lse - (1 - eps) x[t] - eps/C sum x; rows ignored by
 *     ignore_index give 0. The mean divides the double sum of the rows' losses by the count of
 *     rows not ignored (0/0: NaN). backward: g = w (exp(x - lse) - eps/C), minus w (1 - eps) at
 *     the target, w = gy (/ count for the mean); ignored rows are zero.
 * mse, bce with logits  elementwise, pos_weight read cyclically (w[i % wn]); a reduced forward
 *     sums the elements' losses in double (mean: / n); the backward's grad_output is gy[i] (none)
 *     or gy[0] (/ n for the mean). bce uses log1p and exp of the device's libm where the CPU's
 *     float path uses polynomials: equal within rounding.
 * nll  per row: -(1 - eps) x[t] - eps/C sum x (ignored rows 0; mean: / rows not ignored);
 *     backward: -w eps/C everywhere, plus -w (1 - eps) at the target, w = gy (/ count).
 * soft cross-entropy  per row (one block): lse by max + sum exp, loss = -(1 - eps) sum t (x - lse)
 *     - eps/C (sum x - C lse) (mean: / N); backward g = w (exp(x - lse) sq - (1 - eps) t - eps/C)
 *     with sq = (1 - eps) sum t + eps. */
#include "common.cuh"

/* ---- cross-entropy ---- */

/* Row i's loss from its log-sum-exp lse (cross_entropy; nll has none: has_lse false), its target's
 * log-probability and the row's sum (read when eps > 0): lse - (1 - eps) x[t] - eps/C sum, 0 for
 * an ignored row; stored into loss (reduction none) or rows (the row losses to total). */
template <class CT>
__device__ void ce_store_row(const ce_args &c, int64_t i, bool has_lse, double lse, const CT *row,
                             int64_t ti, double sum, CT *loss, double *rows) {
  double li = 0;
  if (!ce_ignored(&c, ti)) {
    double hit = (1 - c.eps) * (double)row[ti - c.base];
    li = has_lse ? lse - hit : -hit;
    if (c.eps > 0) li -= c.eps / (double)c.c * sum;
  }
  if (c.reduction == 0)
    loss[i] = (CT)li;
  else
    rows[i] = li;
}

template <class CT>
__global__ void ce_forward_kernel(ce_args c, const CT *x, const int64_t *t, CT *loss, CT *lse,
                                  double *row_loss) {
  __shared__ CT shm[CU_THREADS];
  __shared__ double shs[CU_THREADS];
  for (int64_t i = blockIdx.x; i < c.n; i += gridDim.x) {
    const CT *row = x + i * c.c;
    CT m = -INFINITY;
    for (int64_t j = threadIdx.x; j < c.c; j += blockDim.x) m = row[j] > m ? row[j] : m;
    m = cu_block_reduce(m, shm, [](CT a, CT b) { return b > a ? b : a; });
    double s = 0, sum = 0;
    for (int64_t j = threadIdx.x; j < c.c; j += blockDim.x)
      s += (double)cu_exp(row[j] - m), sum += row[j];
    s = cu_block_reduce(s, shs, cu_add{});
    sum = cu_block_reduce(sum, shs, cu_add{});
    if (threadIdx.x != 0) continue;
    double l = m == -INFINITY ? -INFINITY : (double)m + log(s);
    lse[i] = (CT)l;
    ce_store_row(c, i, true, l, row, t[i], sum, loss, row_loss);
  }
}

template <class CT>
__global__ void ce_backward_kernel(ce_args c, const CT *gy, const CT *x, const int64_t *t,
                                   const CT *lse, double inv, CT *g) {
  CT off = (CT)(c.eps / (double)c.c), hit = (CT)(1 - c.eps);
  CU_GRID_LOOP(e, c.n * c.c) {
    int64_t i = e / c.c, j = e % c.c;
    if (ce_ignored(&c, t[i])) {
      g[e] = 0;
      continue;
    }
    CT w = (CT)((double)gy[c.reduction == 0 ? i : 0] * inv);
    CT v = w * (cu_exp(x[e] - lse[i]) - off);
    if (j == t[i] - c.base) v -= w * hit;
    g[e] = v;
  }
}

template <class CT>
static dle_status ce_forward(const char *fn, dle_tensor *const *outs, dle_tensor *const *ins,
                             const dle_attrs *a) {
  ce_args c = ce_args_of(a, ins[0]);
  const int64_t *t = (const int64_t *)cu_data(ins[1]);
  int64_t count = 0;
  CU_OK(cu_check_targets(fn, c, t, &count));
  CT *loss = (CT *)cu_data(outs[0]);
  double *rows = NULL;
  if (c.reduction != 0)
    CU_OK(cu_scratch(fn, (void **)&rows, sizeof(double) * (size_t)(c.n > 0 ? c.n : 1)));
  dle_status st = DLE_OK;
  if (c.n > 0) {
    unsigned blocks = (unsigned)(c.n < 65535 * 16 ? c.n : 65535 * 16);
    ce_forward_kernel<CT><<<blocks, cu_row_threads(c.c)>>>(c, (const CT *)cu_data(ins[0]), t, loss,
                                                           (CT *)cu_data(outs[1]), rows);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) st = cu_fail(fn, "the forward kernel", e);
  }
  if (st == DLE_OK && c.reduction != 0)
    st = cu_store_total(fn, rows, c.n, c.reduction == 1 ? (double)count : 1.0, sizeof(CT) == 8,
                        loss);
  cu_scratch_free(rows);
  return st;
}

template <class CT>
static dle_status ce_backward(const char *fn, dle_tensor *out, dle_tensor *const *ins,
                              const dle_attrs *a) {
  ce_args c = ce_args_of(a, ins[1]);
  const int64_t *t = (const int64_t *)cu_data(ins[2]);
  int64_t count = 0;
  CU_OK(cu_check_targets(fn, c, t, &count));
  if (c.n * c.c == 0) return DLE_OK;
  double inv = c.reduction == 1 ? 1.0 / (double)count : 1.0;
  ce_backward_kernel<CT><<<cu_blocks(c.n * c.c), CU_THREADS>>>(
      c, (const CT *)cu_data(ins[0]), (const CT *)cu_data(ins[1]), t, (const CT *)cu_data(ins[3]),
      inv, (CT *)cu_data(out));
  CU_LAUNCHED(fn);
  return DLE_OK;
}

/* ---- mse and bce with logits ---- */

template <class CT>
struct loss_in {
  const CT *gy, *x, *y, *w;
  int64_t n, wn;
  int64_t reduction;
};

template <bool MSE, class CT>
__device__ __forceinline__ CT loss_fwd(CT xv, CT yv, CT wv) {
  if constexpr (MSE)
    return (xv - yv) * (xv - yv);
  else {
    CT ax = cu_fabs(xv);
    CT softplus_neg = cu_log1p(cu_exp(-ax)) + (ax - xv) * (CT)0.5; /* softplus(-x) */
    return ((CT)1 - yv) * xv + ((CT)1 + (wv - (CT)1) * yv) * softplus_neg;
  }
}

template <bool MSE, class CT>
__device__ __forceinline__ CT loss_bwd(CT xv, CT yv, CT wv, CT gv) {
  if constexpr (MSE)
    return (CT)2 * gv * (xv - yv);
  else
    return gv * (((CT)1 - yv) - ((CT)1 + (wv - (CT)1) * yv) / ((CT)1 + cu_exp(xv)));
}

/* out: the losses (none), or each element's loss in double into rows (reduced) */
template <bool MSE, class CT>
__global__ void loss_fwd_kernel(loss_in<CT> in, CT *out, double *rows) {
  CU_GRID_LOOP(i, in.n) {
    CT v = loss_fwd<MSE>(in.x[i], in.y[i], in.w ? in.w[i % in.wn] : (CT)1);
    if (in.reduction == 0)
      out[i] = v;
    else
      rows[i] = v;
  }
}

template <bool MSE, class CT>
__global__ void loss_bwd_kernel(loss_in<CT> in, CT *out) {
  double inv = in.reduction == 1 ? 1.0 / (double)in.n : 1.0;
  CU_GRID_LOOP(i, in.n) {
    CT gv = in.reduction == 0 ? in.gy[i] : (CT)((double)in.gy[0] * inv);
    out[i] = loss_bwd<MSE>(in.x[i], in.y[i], in.w ? in.w[i % in.wn] : (CT)1, gv);
  }
}

template <class CT>
static dle_status elementwise_loss(const char *fn, dle_op op, dle_tensor *out,
                                   dle_tensor *const *ins, int nin, const dle_attrs *a) {
  bool back = op == DLE_OP_MSE_LOSS_BACKWARD || op == DLE_OP_BCE_WITH_LOGITS_BACKWARD;
  bool mse = op == DLE_OP_MSE_LOSS || op == DLE_OP_MSE_LOSS_BACKWARD;
  int k = back;
  loss_in<CT> in = {back ? (const CT *)cu_data(ins[0]) : NULL,
                    (const CT *)cu_data(ins[k]),
                    (const CT *)cu_data(ins[k + 1]),
                    nin > k + 2 ? (const CT *)cu_data(ins[k + 2]) : NULL,
                    cu_numel(ins[k]),
                    nin > k + 2 ? cu_numel(ins[k + 2]) : 1,
                    a->ints[0]};
  if (in.w && in.wn == 0 && in.n > 0) return cu_error("%s: empty pos_weight", fn);
  CT *o = (CT *)cu_data(out);
  if (back) {
    if (in.n == 0) return DLE_OK;
    if (mse)
      loss_bwd_kernel<true><<<cu_blocks(in.n), CU_THREADS>>>(in, o);
    else
      loss_bwd_kernel<false><<<cu_blocks(in.n), CU_THREADS>>>(in, o);
    CU_LAUNCHED(fn);
    return DLE_OK;
  }
  double *rows = NULL;
  if (in.reduction != 0)
    CU_OK(cu_scratch(fn, (void **)&rows, sizeof(double) * (size_t)(in.n > 0 ? in.n : 1)));
  dle_status st = DLE_OK;
  if (in.n > 0) {
    if (mse)
      loss_fwd_kernel<true><<<cu_blocks(in.n), CU_THREADS>>>(in, o, rows);
    else
      loss_fwd_kernel<false><<<cu_blocks(in.n), CU_THREADS>>>(in, o, rows);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) st = cu_fail(fn, "the loss kernel", e);
  }
  if (st == DLE_OK && in.reduction != 0)
    st = cu_store_total(fn, rows, in.n, in.reduction == 1 ? (double)in.n : 1.0, sizeof(CT) == 8, o);
  cu_scratch_free(rows);
  return st;
}

/* ---- nll ---- */

template <class CT>
__global__ void nll_fwd_kernel(ce_args c, const CT *x, const int64_t *t, CT *loss, double *rows) {
  __shared__ double sh[CU_THREADS];
  for (int64_t i = blockIdx.x; i < c.n; i += gridDim.x) {
    const CT *row = x + i * c.c;
    double sum = 0;
    if (c.eps > 0)
      for (int64_t j = threadIdx.x; j < c.c; j += blockDim.x) sum += row[j];
    sum = cu_block_reduce(sum, sh, cu_add{});
    if (threadIdx.x != 0) continue;
    ce_store_row(c, i, false, 0, row, t[i], sum, loss, rows);
  }
}

template <class CT>
__global__ void nll_bwd_kernel(ce_args c, const CT *gy, const int64_t *t, double inv, CT *g) {
  CU_GRID_LOOP(e, c.n * c.c) {
    int64_t i = e / c.c, j = e % c.c;
    bool skip = ce_ignored(&c, t[i]);
    CT w = skip ? (CT)0 : (CT)(-(double)gy[c.reduction == 0 ? i : 0] * inv),
       off = w * (CT)(c.eps / (double)c.c);
    g[e] = !skip && j == t[i] - c.base ? off + w * (CT)(1 - c.eps) : off;
  }
}

/* ---- soft cross-entropy ---- */

template <class CT>
__global__ void soft_ce_fwd_kernel(int64_t n, int64_t c, double eps, int64_t red, const CT *x,
                                   const CT *t, CT *loss, CT *lse, double *rows) {
  __shared__ CT shm[CU_THREADS];
  __shared__ double shs[CU_THREADS];
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const CT *row = x + i * c, *tr = t + i * c;
    CT m = -INFINITY;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
      m = row[j] > m ? row[j] : m; /* NaN skipped */
    m = cu_block_reduce(m, shm, [](CT a, CT b) { return b > a ? b : a; });
    double s = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) s += (double)cu_exp(row[j] - m);
    s = cu_block_reduce(s, shs, cu_add{});
    CT l = (CT)(m == -INFINITY ? -INFINITY : (double)m + log(s));
    double dot = 0, sum = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
      dot += (double)(tr[j] * (row[j] - l)), sum += row[j];
    dot = cu_block_reduce(dot, shs, cu_add{});
    sum = cu_block_reduce(sum, shs, cu_add{});
    if (threadIdx.x != 0) continue;
    lse[i] = l;
    double li = -(1 - eps) * dot;
    if (eps > 0) li -= eps / (double)c * (sum - (double)c * (double)l);
    if (red == 0)
      loss[i] = (CT)li;
    else
      rows[i] = li;
  }
}

template <class CT>
__global__ void soft_ce_bwd_kernel(int64_t n, int64_t c, double eps, int64_t red, const CT *gy,
                                   const CT *x, const CT *t, const CT *lse, CT *g) {
  __shared__ double sh[CU_THREADS];
  double inv = red == 1 ? 1.0 / (double)n : 1.0;
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const CT *tr = t + i * c;
    double st = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) st += tr[j];
    st = cu_block_reduce(st, sh, cu_add{});
    CT sq = (CT)((1 - eps) * st + eps), w = (CT)((double)gy[red == 0 ? i : 0] * inv);
    CT a = (CT)(1 - eps), b = (CT)(eps / (double)c);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
      g[i * c + j] = w * (cu_exp(x[i * c + j] - lse[i]) * sq - a * tr[j] - b);
  }
}

template <class CT>
static dle_status row_loss(const char *fn, dle_op op, dle_tensor *const *outs,
                           dle_tensor *const *ins, const dle_attrs *a) {
  dle_tensor *o = outs[0];
  bool dbl = sizeof(CT) == 8;
  if (op == DLE_OP_NLL_LOSS_BACKWARD) {
    ce_args c = ce_args_of(a, o);
    const int64_t *t = (const int64_t *)cu_data(ins[1]);
    int64_t count = 0;
    CU_OK(cu_check_targets(fn, c, t, &count));
    if (c.n * c.c == 0) return DLE_OK;
    double inv = c.reduction == 1 ? 1.0 / (double)count : 1.0;
    nll_bwd_kernel<CT><<<cu_blocks(c.n * c.c), CU_THREADS>>>(c, (const CT *)cu_data(ins[0]), t, inv,
                                                             (CT *)cu_data(o));
    CU_LAUNCHED(fn);
    return DLE_OK;
  }
  if (op == DLE_OP_SOFT_CROSS_ENTROPY_BACKWARD) {
    int64_t n = ins[1]->sizes[0], c = ins[1]->sizes[1];
    if (n == 0) return DLE_OK;
    soft_ce_bwd_kernel<CT><<<(unsigned)(n < 65535 * 16 ? n : 65535 * 16), cu_row_threads(c)>>>(
        n, c, a->f[0], a->ints[0], (const CT *)cu_data(ins[0]), (const CT *)cu_data(ins[1]),
        (const CT *)cu_data(ins[2]), (const CT *)cu_data(ins[3]), (CT *)cu_data(o));
    CU_LAUNCHED(fn);
    return DLE_OK;
  }
  /* forwards: per-row losses, then the reduction */
  int64_t n = ins[0]->sizes[0], c = ins[0]->sizes[1], red = a->ints[0];
  double div = 1;
  ce_args tg = ce_args_of(a, ins[0]);
  if (op == DLE_OP_NLL_LOSS) {
    int64_t count = 0;
    CU_OK(cu_check_targets(fn, tg, (const int64_t *)cu_data(ins[1]), &count));
    div = red == 1 ? (double)count : 1.0;
  } else {
    div = red == 1 ? (double)n : 1.0;
  }
  double *rows = NULL;
  if (red != 0) CU_OK(cu_scratch(fn, (void **)&rows, sizeof(double) * (size_t)(n > 0 ? n : 1)));
  dle_status st = DLE_OK;
  if (n > 0) {
    unsigned blocks = (unsigned)(n < 65535 * 16 ? n : 65535 * 16), threads = cu_row_threads(c);
    if (op == DLE_OP_NLL_LOSS)
      nll_fwd_kernel<CT><<<blocks, threads>>>(tg, (const CT *)cu_data(ins[0]),
                                              (const int64_t *)cu_data(ins[1]), (CT *)cu_data(o),
                                              rows);
    else
      soft_ce_fwd_kernel<CT><<<blocks, threads>>>(n, c, a->f[0], red, (const CT *)cu_data(ins[0]),
                                                  (const CT *)cu_data(ins[1]), (CT *)cu_data(o),
                                                  (CT *)cu_data(outs[1]), rows);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) st = cu_fail(fn, "the loss kernel", e);
  }
  if (st == DLE_OK && red != 0) st = cu_store_total(fn, rows, n, div, dbl, cu_data(o));
  cu_scratch_free(rows);
  return st;
}

static dle_status cu_losses(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                            const dle_attrs *a) {
  return cu_float_rows_run(op, outs, ins, nin, [&](const char *fn, auto zero) {
    using T = decltype(zero);
    switch (op) {
      case DLE_OP_CROSS_ENTROPY: return ce_forward<T>(fn, outs, ins, a);
      case DLE_OP_CROSS_ENTROPY_BACKWARD: return ce_backward<T>(fn, outs[0], ins, a);
      case DLE_OP_MSE_LOSS:
      case DLE_OP_MSE_LOSS_BACKWARD:
      case DLE_OP_BCE_WITH_LOGITS:
      case DLE_OP_BCE_WITH_LOGITS_BACKWARD:
        return elementwise_loss<T>(fn, op, outs[0], ins, nin, a);
      default: return row_loss<T>(fn, op, outs, ins, a);
    }
  });
}

void cu_register_losses(dle_backend *b) {
#define REGISTER(OP) b->kernels[DLE_OP_##OP] = cu_losses;
  REGISTER(CROSS_ENTROPY) REGISTER(CROSS_ENTROPY_BACKWARD) DLE_FUSED_LOSS_OPS(REGISTER)
#undef REGISTER
}
