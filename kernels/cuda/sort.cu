/* sort.cu — CUDA kernels of the sort family (sort, topk, kthvalue), mirroring kernels/cpu/sort.c:
 * one thread per line along the dim turns its elements into unsigned keys in the wanted order
 * (floats by their bits with NaN above +inf and -0.0 as 0.0, signed integers with the sign bit
 * flipped, complemented for descending / largest), then a stable LSD radix sort (8 bits a pass,
 * passes with a single digit skipped) or, for k at most a sixteenth of the line, a heap of the k
 * first (key, position) pairs; values are copied from x at the chosen positions. The keys and
 * positions live in scratch memory, four arrays of n per line. x may have any strides; the outputs
 * are contiguous as x's shape with the dim sized m (engine/ops/sort.c). Parallel over lines only:
 * a single long line runs on one thread. */
#include "common.cuh"

/* x's layout: sizes and element strides, the dim d, and the output geometry (see sort.c). */
struct sort_geom {
  int ndim, d;
  int64_t sizes[DLE_MAX_DIMS], strides[DLE_MAX_DIMS];
  int64_t n, m, inner, lines, k, first, base;
  bool flip;
};

__device__ __forceinline__ uint32_t key_of(float x) {
  uint32_t u = __float_as_uint(x + 0.0f); /* -0.0 + 0.0 is +0.0 */
  u = (u >> 31) ? ~u : u | 0x80000000u;
  return x != x ? 0xffffffffu : u;
}
__device__ __forceinline__ uint64_t key_of(double x) {
  uint64_t u = (uint64_t)__double_as_longlong(x + 0.0);
  u = (u >> 63) ? ~u : u | (1ull << 63);
  return x != x ? ~0ull : u;
}
__device__ __forceinline__ uint32_t key_of(int32_t x) { return (uint32_t)x ^ 0x80000000u; }
__device__ __forceinline__ uint64_t key_of(int64_t x) { return (uint64_t)x ^ (1ull << 63); }

/* The key type of dtype D and the key of one stored element. */
template <dle_dtype D>
struct sort_key {
  typedef std::conditional_t<D == DLE_F64 || D == DLE_I64 || D == DLE_U64, uint64_t, uint32_t> K;
  __device__ static K of(CU_T(D) v) {
    if constexpr (D == DLE_U8 || D == DLE_BOOL || D == DLE_U16 || D == DLE_U32 || D == DLE_U64)
      return (K)cu_load<D>(v);
    else
      return key_of(cu_load<D>(v));
  }
};

template <class K>
__device__ bool after(K a, uint32_t pa, K b, uint32_t pb) {
  return a > b || (a == b && pa > pb);
}

template <class K>
__device__ void sift(K *hk, uint32_t *hp, int64_t n, int64_t i) {
  K k = hk[i];
  uint32_t p = hp[i];
  for (;;) {
    int64_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && after(hk[c + 1], hp[c + 1], hk[c], hp[c])) c++;
    if (!after(hk[c], hp[c], k, p)) break;
    hk[i] = hk[c], hp[i] = hp[c], i = c;
  }
  hk[i] = k, hp[i] = p;
}

/* stable LSD radix sort of key/pos[0..n) with tk/tp as room; the result is left in key/pos */
template <class K>
__device__ void radix(K *key, uint32_t *pos, K *tk, uint32_t *tp, int64_t n) {
  uint32_t c[256];
  K *sk = key, *dk = tk;
  uint32_t *sp = pos, *dp = tp;
  for (int b = 0; b < (int)sizeof(K); b++) {
    for (int v = 0; v < 256; v++) c[v] = 0;
    for (int64_t i = 0; i < n; i++) c[(sk[i] >> (8 * b)) & 255]++;
    if (c[(sk[0] >> (8 * b)) & 255] == (uint32_t)n) continue;
    uint32_t sum = 0;
    for (int v = 0; v < 256; v++) {
      uint32_t t = c[v];
      c[v] = sum, sum += t;
    }
    for (int64_t i = 0; i < n; i++) {
      uint32_t at = c[(sk[i] >> (8 * b)) & 255]++;
      dk[at] = sk[i], dp[at] = sp[i];
    }
    K *t = sk;
    sk = dk, dk = t;
    uint32_t *u = sp;
    sp = dp, dp = u;
  }
  if (sk != key)
    for (int64_t i = 0; i < n; i++) key[i] = sk[i], pos[i] = sp[i];
}

/* the k first pairs of the stable order of key[0..n) (positions 0..n-1), in order, into key/pos */
template <class K>
__device__ void select_first(K *key, uint32_t *pos, K *tk, uint32_t *tp, int64_t n, int64_t k) {
  if (k == 0) return;
  if (k > n / 16 || n <= 32) {
    for (int64_t i = 0; i < n; i++) pos[i] = (uint32_t)i;
    radix(key, pos, tk, tp, n);
    return;
  }
  for (int64_t i = 0; i < k; i++) tk[i] = key[i], tp[i] = (uint32_t)i;
  for (int64_t i = k / 2; i-- > 0;) sift(tk, tp, k, i);
  for (int64_t j = k; j < n; j++)
    if (key[j] < tk[0]) tk[0] = key[j], tp[0] = (uint32_t)j, sift(tk, tp, k, 0);
  for (int64_t end = k - 1; end > 0; end--) {
    K a = tk[0];
    uint32_t p = tp[0];
    tk[0] = tk[end], tp[0] = tp[end], tk[end] = a, tp[end] = p;
    sift(tk, tp, end, 0);
  }
  for (int64_t i = 0; i < k; i++) key[i] = tk[i], pos[i] = tp[i];
}

template <dle_dtype D>
__global__ void sort_lines(sort_geom g, CU_T(D) * vo, int64_t *io, const CU_T(D) * x,
                           char *scratch) {
  typedef typename sort_key<D>::K K;
  size_t per_line = (sizeof(K) + sizeof(uint32_t)) * 2 * (size_t)g.n;
  CU_GRID_LOOP(l, g.lines) {
    K *key = (K *)(scratch + per_line * (size_t)l), *tk = key + g.n;
    uint32_t *pos = (uint32_t *)(tk + g.n), *tp = pos + g.n;
    int64_t off = 0, r = l;
    for (int j = g.ndim - 1; j >= 0; j--) {
      if (j == g.d) continue;
      off += (r % g.sizes[j]) * g.strides[j];
      r /= g.sizes[j];
    }
    const CU_T(D) *xl = x + off;
    int64_t sd = g.strides[g.d], at = (l / g.inner) * g.m * g.inner + l % g.inner;
    K flip = g.flip ? (K) ~(K)0 : (K)0;
    for (int64_t j = 0; j < g.n; j++) key[j] = sort_key<D>::of(xl[j * sd]) ^ flip;
    select_first(key, pos, tk, tp, g.n, g.k);
    for (int64_t j = g.first; j < g.k; j++, at += g.inner) {
      vo[at] = xl[(int64_t)pos[j] * sd];
      io[at] = (int64_t)pos[j] + g.base;
    }
  }
}

template <dle_dtype D>
static dle_status launch(const char *fn, const sort_geom &g, dle_tensor *const *outs,
                         const dle_tensor *x) {
  typedef typename sort_key<D>::K K;
  char *scratch = NULL;
  size_t bytes = (sizeof(K) + sizeof(uint32_t)) * 2 * (size_t)g.n * (size_t)g.lines;
  CU_OK(cu_scratch(fn, (void **)&scratch, bytes));
  sort_lines<D><<<cu_blocks(g.lines), CU_THREADS>>>(g, (CU_T(D) *)cu_data(outs[0]),
                                                    (int64_t *)cu_data(outs[1]),
                                                    (const CU_T(D) *)cu_data(x), scratch);
  cudaError_t e = cudaGetLastError();
  cu_scratch_free(scratch);
  return e == cudaSuccess ? DLE_OK : cu_fail(fn, "sort_lines", e);
}

static dle_status cu_sort(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                          const dle_attrs *a) {
  (void)nin;
  const char *fn = cu_op_name(op);
  const dle_tensor *x = ins[0];
  sort_geom g = {};
  g.ndim = x->ndim, g.d = (int)a->ints[0], g.n = x->sizes[g.d], g.inner = 1, g.base = a->index_base;
  for (int j = 0; j < x->ndim; j++) g.sizes[j] = x->sizes[j], g.strides[j] = x->strides[j];
  for (int j = g.d + 1; j < x->ndim; j++) g.inner *= x->sizes[j];
  g.k = op == DLE_OP_SORT ? g.n : a->ints[1];
  g.first = op == DLE_OP_KTHVALUE ? g.k - 1 : 0;
  g.m = g.k - g.first;
  g.flip = (op == DLE_OP_SORT && a->nints > 1 && a->ints[1]) ||
           (op == DLE_OP_TOPK && (a->nints <= 2 || a->ints[2]));
  g.lines = g.n ? cu_numel(x) / g.n : 0;
  if (g.lines == 0 || g.m == 0) return DLE_OK;
  CU_OK(cu_use_device(fn, x));
  switch (x->dtype) {
    case DLE_F32: return launch<DLE_F32>(fn, g, outs, x);
    case DLE_F64: return launch<DLE_F64>(fn, g, outs, x);
    case DLE_F16: return launch<DLE_F16>(fn, g, outs, x);
    case DLE_BF16: return launch<DLE_BF16>(fn, g, outs, x);
    case DLE_I32: return launch<DLE_I32>(fn, g, outs, x);
    case DLE_I64: return launch<DLE_I64>(fn, g, outs, x);
    case DLE_U8: return launch<DLE_U8>(fn, g, outs, x);
    case DLE_BOOL: return launch<DLE_BOOL>(fn, g, outs, x);
    case DLE_I8: return launch<DLE_I8>(fn, g, outs, x);
    case DLE_I16: return launch<DLE_I16>(fn, g, outs, x);
    case DLE_U16: return launch<DLE_U16>(fn, g, outs, x);
    case DLE_U32: return launch<DLE_U32>(fn, g, outs, x);
    case DLE_U64: return launch<DLE_U64>(fn, g, outs, x);
    case DLE_F8E4M3: return launch<DLE_F8E4M3>(fn, g, outs, x);
    case DLE_F8E5M2: return launch<DLE_F8E5M2>(fn, g, outs, x);
    default: return cu_error("%s: no CUDA kernel for %s", fn, cu_dtype_name(x->dtype));
  }
}

void cu_register_sort(dle_backend *b) {
  b->kernels[DLE_OP_SORT] = cu_sort;
  b->kernels[DLE_OP_TOPK] = cu_sort;
  b->kernels[DLE_OP_KTHVALUE] = cu_sort;
}
