/* attention.cu — CUDA kernels of scaled dot-product attention and its gradients, mirroring
 * kernels/cpu/attention.c. The front door (engine/ops/attention.c) hands over q {B.., L, E},
 * k {B.., S, E}, v {B.., S, Ev} in float32 or float64 with the batch dims broadcast (stride 0 where
 * so), an optional mask expanded to {B.., L, S} (bool, or the compute type: added to the scores),
 * and outputs; every operand is read through its strides. Direct loops, sums in the compute type:
 *   sdpa             one block per query row: scores q k^T over the keys its causal block sees
 *                    (as the CPU's blocks of 64 queries), scaled, masked, softmaxed over the keys
 *                    up to the query (causal) or all (a row with no allowed key becomes zeros),
 *                    then out = P v over those keys;
 *   sdpa_score_grad  one block per row: D = gout v^T, D = scale P (D - sum(P D));
 *   sdpa_backward    the same rows of D over each row's keys into scratch, then dq = D k,
 *                    dk = D^T q and dv = P^T gout, one thread per output element, summing over
 *                    the rows whose keys include it (no atomics). */
#include "common.cuh"

#define CAUSAL_BLOCK 64 /* kernels/cpu/attention.c's */

/* A batch of matrices: element (b, i, j) at base + offset(b) + i rs + j cs (elements). */
typedef struct {
  char *base;
  int nb;
  int64_t sizes[DLE_MAX_DIMS], strides[DLE_MAX_DIMS];
  int64_t rs, cs;
} mats;

static mats mats_of(const dle_tensor *t, int nb) {
  mats m = {};
  m.base = cu_data(t), m.nb = nb;
  for (int d = 0; d < nb; d++) m.sizes[d] = t->sizes[d], m.strides[d] = t->strides[d];
  m.rs = t->strides[nb], m.cs = t->strides[nb + 1];
  return m;
}

template <class T>
__device__ __forceinline__ T *at(const mats &m, int64_t b, int64_t i, int64_t j) {
  int64_t off = 0;
  for (int d = m.nb - 1; d >= 0; d--) {
    off += (b % m.sizes[d]) * m.strides[d];
    b /= m.sizes[d];
  }
  return (T *)m.base + off + i * m.rs + j * m.cs;
}

/* The keys query i's causal block computes scores for (block_at's keys), and how many of them
 * take part in its softmax. */
__device__ __forceinline__ int64_t block_keys(int64_t i, int64_t L, int64_t S, bool causal) {
  if (!causal) return S;
  if (L <= CAUSAL_BLOCK) return L < S ? L : S;
  int64_t r1 = (i / CAUSAL_BLOCK + 1) * CAUSAL_BLOCK;
  r1 = r1 < L ? r1 : L;
  return r1 < S ? r1 : S;
}

typedef struct {
  int64_t B, L, S, E, Ev;
  bool causal, has_mask, mask_bool;
  double scale;
} att_geom;

/* One block per (b, i): the probability row into p, then out[i] = P v. */
template <class CT>
__global__ void sdpa_kernel(att_geom g, mats q, mats k, mats v, mats mask, mats p, mats o) {
  __shared__ CT sh[CU_THREADS];
  const CT scale = (CT)g.scale;
  for (int64_t r = blockIdx.x; r < g.B * g.L; r += gridDim.x) {
    int64_t b = r / g.L, i = r % g.L, keys = block_keys(i, g.L, g.S, g.causal);
    int64_t n =
        g.causal && i + 1 < keys ? i + 1 : keys; /* keys past i: weight 0, not in the softmax */
    CT m = -INFINITY;
    for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
      CT s = 0;
      for (int64_t e = 0; e < g.E; e++) s += *at<CT>(q, b, i, e) * *at<CT>(k, b, j, e);
      s *= scale;
      if (g.has_mask && g.mask_bool)
        s = *at<uint8_t>(mask, b, i, j) ? s : (CT)-INFINITY;
      else if (g.has_mask)
        s += *at<CT>(mask, b, i, j);
      *at<CT>(p, b, i, j) = s;
      if (j < n) m = s > m ? s : m; /* row_max: NaN skipped */
    }
    m = cu_block_reduce(m, sh, [](CT a, CT c) { return c > a ? c : a; });
    CT sum = 0;
    for (int64_t j = threadIdx.x; j < g.S; j += blockDim.x) {
      CT *pj = at<CT>(p, b, i, j);
      CT e = j < n && m != (CT)-INFINITY ? cu_exp(*pj - m) : (CT)0;
      *pj = e;
      sum += e;
    }
    sum = cu_block_reduce(sum, sh, cu_add{});
    CT inv = 1 / sum;
    for (int64_t j = threadIdx.x; j < n && m != (CT)-INFINITY; j += blockDim.x)
      *at<CT>(p, b, i, j) *= inv;
    __syncthreads(); /* the row is written: each thread now reads all of it */
    for (int64_t e = threadIdx.x; e < g.Ev; e += blockDim.x) {
      CT s = 0;
      for (int64_t j = 0; j < keys; j++) s += *at<CT>(p, b, i, j) * *at<CT>(v, b, j, e);
      *at<CT>(o, b, i, e) = s;
    }
    __syncthreads();
  }
}

/* One block per (b, i): d[i, j] = scale p (D - sum(p D)), D = gout v^T, over the first `keys`
 * keys of the row (all for the score gradient, the causal block's for the backward); zeros past
 * them. */
template <class CT>
__global__ void score_grad_kernel(att_geom g, mats gy, mats v, mats p, mats d, bool blocked) {
  __shared__ CT sh[CU_THREADS];
  const CT scale = (CT)g.scale;
  for (int64_t r = blockIdx.x; r < g.B * g.L; r += gridDim.x) {
    int64_t b = r / g.L, i = r % g.L, keys = blocked ? block_keys(i, g.L, g.S, g.causal) : g.S;
    CT dot = 0;
    for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
      CT s = 0;
      for (int64_t e = 0; e < g.Ev; e++) s += *at<CT>(gy, b, i, e) * *at<CT>(v, b, j, e);
      *at<CT>(d, b, i, j) = s;
      dot += *at<CT>(p, b, i, j) * s;
    }
    dot = cu_block_reduce(dot, sh, cu_add{});
    for (int64_t j = threadIdx.x; j < g.S; j += blockDim.x) {
      CT *dj = at<CT>(d, b, i, j);
      *dj = j < keys ? scale * *at<CT>(p, b, i, j) * (*dj - dot) : (CT)0;
    }
  }
}

/* dq[b, i, e] = sum over the row's keys of ds[i, j] k[j, e] */
template <class CT>
__global__ void grad_q_kernel(att_geom g, mats ds, mats k, mats dq) {
  CU_GRID_LOOP(x, g.B * g.L * g.E) {
    int64_t e = x % g.E, i = (x / g.E) % g.L, b = x / (g.E * g.L),
            keys = block_keys(i, g.L, g.S, g.causal);
    CT s = 0;
    for (int64_t j = 0; j < keys; j++) s += *at<CT>(ds, b, i, j) * *at<CT>(k, b, j, e);
    *at<CT>(dq, b, i, e) = s;
  }
}

/* dk[b, j, e] = sum of ds[i, j] q[i, e] (a = ds, c = q), or dv[b, j, e] = sum of p[i, j] gout[i, e]
 * (a = p, c = gout), over the rows i whose keys include j; n columns (E or Ev). */
template <class CT>
__global__ void grad_kv_kernel(att_geom g, int64_t n, mats a, mats c, mats out) {
  CU_GRID_LOOP(x, g.B * g.S * n) {
    int64_t e = x % n, j = (x / n) % g.S, b = x / (n * g.S);
    CT s = 0;
    for (int64_t i = 0; i < g.L; i++)
      if (j < block_keys(i, g.L, g.S, g.causal)) s += *at<CT>(a, b, i, j) * *at<CT>(c, b, i, e);
    *at<CT>(out, b, j, e) = s;
  }
}

template <class T>
struct zero_fn {
  __device__ void operator()(char *const *p, int64_t) const { *(T *)p[0] = 0; }
};

template <class CT>
static dle_status attention(const char *fn, dle_op op, dle_tensor *const *outs,
                            dle_tensor *const *ins, int nin, const dle_attrs *a) {
  const dle_tensor *x = op == DLE_OP_SDPA_SCORE_GRAD ? ins[2] : op == DLE_OP_SDPA ? ins[0] : ins[1];
  int nb = x->ndim - 2;
  att_geom g = {1, 0, 0, 0, 0, a->ints[0] != 0, false, false, a->f[0]};
  for (int d = 0; d < nb; d++) g.B *= x->sizes[d];
  unsigned threads = 0, blocks = 0;
  if (op == DLE_OP_SDPA) {
    g.L = ins[0]->sizes[nb], g.E = ins[0]->sizes[nb + 1], g.S = ins[1]->sizes[nb],
    g.Ev = ins[2]->sizes[nb + 1];
    g.has_mask = nin > 3, g.mask_bool = nin > 3 && ins[3]->dtype == DLE_BOOL;
    mats mask = g.has_mask ? mats_of(ins[3], nb) : mats{};
    if (g.B * g.L == 0) return DLE_OK;
    threads = cu_row_threads(g.S > g.Ev ? g.S : g.Ev);
    blocks = (unsigned)(g.B * g.L < 65535 * 16 ? g.B * g.L : 65535 * 16);
    sdpa_kernel<CT><<<blocks, threads>>>(g, mats_of(ins[0], nb), mats_of(ins[1], nb),
                                         mats_of(ins[2], nb), mask, mats_of(outs[1], nb),
                                         mats_of(outs[0], nb));
    CU_LAUNCHED(fn);
    return DLE_OK;
  }
  if (op == DLE_OP_SDPA_SCORE_GRAD) { /* gout, v, probs */
    g.L = ins[2]->sizes[nb], g.S = ins[2]->sizes[nb + 1], g.Ev = ins[1]->sizes[nb + 1];
    if (g.B * g.L * g.S == 0) return DLE_OK;
    blocks = (unsigned)(g.B * g.L < 65535 * 16 ? g.B * g.L : 65535 * 16);
    score_grad_kernel<CT><<<blocks, cu_row_threads(g.S)>>>(g, mats_of(ins[0], nb),
                                                           mats_of(ins[1], nb), mats_of(ins[2], nb),
                                                           mats_of(outs[0], nb), false);
    CU_LAUNCHED(fn);
    return DLE_OK;
  }
  /* backward: gout, q, k, v, probs -> dq, dk, dv */
  g.L = ins[1]->sizes[nb], g.E = ins[1]->sizes[nb + 1], g.S = ins[2]->sizes[nb],
  g.Ev = ins[3]->sizes[nb + 1];
  mats gy = mats_of(ins[0], nb), q = mats_of(ins[1], nb), k = mats_of(ins[2], nb),
       p = mats_of(ins[4], nb);
  mats dq = mats_of(outs[0], nb), dk = mats_of(outs[1], nb), dv = mats_of(outs[2], nb);
  CT *ds = NULL;
  if (g.B * g.L * g.S > 0) {
    CU_OK(cu_scratch(fn, (void **)&ds, sizeof(CT) * (size_t)(g.B * g.L * g.S)));
    dle_storage s;
    dle_tensor t;
    int64_t sizes[3] = {g.B, g.L, g.S};
    cu_wrap_scratch(&t, &s, ds, sizeof(CT) * (size_t)(g.B * g.L * g.S), outs[0]->dtype, 3, sizes,
                    outs[0]->storage->device);
    mats dsm = mats_of(&t, 1);
    blocks = (unsigned)(g.B * g.L < 65535 * 16 ? g.B * g.L : 65535 * 16);
    score_grad_kernel<CT>
        <<<blocks, cu_row_threads(g.S)>>>(g, gy, mats_of(ins[3], nb), p, dsm, true);
    if (g.E > 0) {
      grad_q_kernel<CT><<<cu_blocks(g.B * g.L * g.E), CU_THREADS>>>(g, dsm, k, dq);
      grad_kv_kernel<CT><<<cu_blocks(g.B * g.S * g.E), CU_THREADS>>>(g, g.E, dsm, q, dk);
    }
    if (g.Ev > 0)
      grad_kv_kernel<CT><<<cu_blocks(g.B * g.S * g.Ev), CU_THREADS>>>(g, g.Ev, p, gy, dv);
  } else { /* a sum over nothing: zeros, in whatever layout the outputs have */
    for (int kk = 0; kk < 3; kk++) CU_OK(cu_map(fn, outs[kk], NULL, 0, zero_fn<CT>{}));
  }
  cudaError_t e = cudaGetLastError();
  cu_scratch_free(ds);
  if (e != cudaSuccess) return cu_fail(fn, "the attention kernels", e);
  return DLE_OK;
}

static dle_status cu_attention(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                               const dle_attrs *a) {
  const char *fn = cu_op_name(op);
  dle_tensor *o = outs[0];
  int nmat = op == DLE_OP_SDPA ? 3 : nin; /* the mask (4th input) has any strides */
  int nb = ins[0]->ndim - 2;
  if (nb < 0) return cu_error("%s: expects matrices", fn);
  for (int i = 0; i < nmat; i++)
    if (ins[i]->dtype != o->dtype || ins[i]->ndim != nb + 2)
      return cu_error("%s: the CUDA kernel expects %s inputs of %d dims", fn,
                      cu_dtype_name(o->dtype), nb + 2);
  if (nin > nmat &&
      (ins[3]->ndim != nb + 2 || (ins[3]->dtype != DLE_BOOL && ins[3]->dtype != o->dtype)))
    return cu_error("%s: the CUDA kernel expects a bool or %s mask", fn, cu_dtype_name(o->dtype));
  if (o->dtype != DLE_F32 && o->dtype != DLE_F64)
    return cu_error("%s: no CUDA kernel for %s", fn, cu_dtype_name(o->dtype));
  CU_OK(cu_use_device(fn, o));
  return o->dtype == DLE_F64 ? attention<double>(fn, op, outs, ins, nin, a)
                             : attention<float>(fn, op, outs, ins, nin, a);
}

void cu_register_attention(dle_backend *b) {
  b->kernels[DLE_OP_SDPA] = cu_attention;
  b->kernels[DLE_OP_SDPA_SCORE_GRAD] = cu_attention;
  b->kernels[DLE_OP_SDPA_BACKWARD] = cu_attention;
}
