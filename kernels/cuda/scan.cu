/* scan.cu — CUDA kernels of the scan ops (cumsum, cumprod, logcumsumexp, cummax, cummin), mirroring
 * kernels/cpu/scan.c: the input is a strided block {outer, n, inner} (engine/kernel/scan_geom.h),
 * the outputs contiguous; states are double for float dtypes, uint64 for uint64 and int64 for the
 * other integer ones (wrapping); cummax/cummin keep the last position of the extreme on ties and let a NaN stay.
 *   lines    one thread per line (outer x inner of them; neighbouring threads take neighbouring
 *            columns, so reads and writes coalesce when inner > 1);
 *   blocked  few long lines (not cumprod, kept sequential as on the CPU): chunk totals (one
 *            thread per chunk), then per line the exclusive prefix of its chunk totals, then each
 *            chunk scanned from its carry. */
#include "../../engine/kernel/scan_geom.h"
#include "common.cuh"

enum { K_SUM, K_PROD, K_LSE, K_MAX, K_MIN };
#define SCAN_CHUNK    1024
#define SCAN_NO_INDEX INT64_MIN

template <class AT>
struct scan_state {
  AT v;
  int64_t idx;
};

template <int K, class AT>
__device__ __forceinline__ scan_state<AT> scan_ident() {
  if constexpr (K == K_SUM)
    return {(AT)0, SCAN_NO_INDEX};
  else if constexpr (K == K_PROD)
    return {(AT)1, SCAN_NO_INDEX};
  else if constexpr (K == K_LSE)
    return {(AT)-INFINITY, SCAN_NO_INDEX};
  else
    return {(AT)0, SCAN_NO_INDEX};
}

__device__ __forceinline__ double scan_lae(double a, double b) {
  if (a != a || b != b) return a + b;
  double hi = a > b ? a : b, lo = a > b ? b : a;
  if (lo == -INFINITY || hi == INFINITY) return hi;
  return hi + log1p(exp(lo - hi));
}

template <int K, class AT>
__device__ __forceinline__ bool scan_better(AT v, AT a) {
  if constexpr (K == K_MAX)
    return v != v || (a == a && v >= a);
  else
    return v != v || (a == a && v <= a);
}

/* s takes element v at index i */
template <int K, class AT>
__device__ __forceinline__ void scan_step(scan_state<AT> &s, AT v, int64_t i) {
  constexpr bool fl = std::is_floating_point<AT>::value;
  if constexpr (K == K_SUM)
    s.v = fl ? s.v + v : cu_wrap_add(s.v, v);
  else if constexpr (K == K_PROD)
    s.v = fl ? s.v * v : cu_wrap_mul(s.v, v);
  else if constexpr (K == K_LSE)
    s.v = scan_lae((double)s.v, (double)v);
  else if (s.idx == SCAN_NO_INDEX || scan_better<K>(v, s.v))
    s.v = v, s.idx = i;
}

/* c followed by a run whose total is t */
template <int K, class AT>
__device__ __forceinline__ void scan_combine(scan_state<AT> &c, const scan_state<AT> &t) {
  if constexpr (K == K_MAX || K == K_MIN) {
    if (t.idx != SCAN_NO_INDEX && (c.idx == SCAN_NO_INDEX || scan_better<K>(t.v, c.v))) c = t;
  } else {
    scan_step<K>(c, t.v, 0);
  }
}

/* x, y, ix at the first element scanned (the last one of the dim for a reversed scan); the steps
 * along the dim (negative when reversed) and the index of the first element. */
struct scan_args {
  dle_scan_geom g;
  const char *x;
  char *y;
  int64_t *ix;
  int64_t sn, yn, i0, di;
};

template <int K, dle_dtype D, class AT>
__device__ void scan_run(const scan_args &a, int64_t line, int64_t j0, int64_t m, scan_state<AT> &s,
                         bool write) {
  typedef CU_T(D) T;
  int64_t o = line / a.g.inner, k = line % a.g.inner;
  const T *x = (const T *)a.x + o * a.g.so + k * a.g.si;
  int64_t yo = o * a.g.n * a.g.inner + k;
  T *y = (T *)a.y + yo;
  for (int64_t j = j0; j < j0 + m; j++) {
    scan_step<K>(s, (AT)cu_load<D>(x[j * a.sn]), a.i0 + j * a.di);
    if (write) {
      y[j * a.yn] = cu_store<D>(s.v);
      if (a.ix) a.ix[yo + j * a.yn] = s.idx;
    }
  }
}

template <int K, dle_dtype D, class AT>
__global__ void scan_lines(scan_args a, int64_t lines) {
  CU_GRID_LOOP(l, lines) {
    scan_state<AT> s = scan_ident<K, AT>();
    scan_run<K, D, AT>(a, l, 0, a.g.n, s, true);
  }
}

/* pass 1 (write false): tot[t] = total of chunk t; pass 2 (write true): scan chunk t from tot[t] */
template <int K, dle_dtype D, class AT>
__global__ void scan_chunks(scan_args a, int64_t lines, int64_t nch, scan_state<AT> *tot,
                            bool write) {
  CU_GRID_LOOP(t, lines * nch) {
    int64_t l = t / nch, j0 = (t % nch) * SCAN_CHUNK;
    int64_t m = a.g.n - j0 < SCAN_CHUNK ? a.g.n - j0 : SCAN_CHUNK;
    scan_state<AT> s = write ? tot[t] : scan_ident<K, AT>();
    scan_run<K, D, AT>(a, l, j0, m, s, write);
    if (!write) tot[t] = s;
  }
}

/* each line's chunk totals into the exclusive prefix of them (the carry into each chunk) */
template <int K, class AT>
__global__ void scan_carries(int64_t lines, int64_t nch, scan_state<AT> *tot) {
  CU_GRID_LOOP(l, lines) {
    scan_state<AT> c = scan_ident<K, AT>();
    for (int64_t t = l * nch; t < (l + 1) * nch; t++) {
      scan_state<AT> here = tot[t];
      tot[t] = c;
      scan_combine<K>(c, here);
    }
  }
}

template <int K, dle_dtype D>
static dle_status scan_launch(const char *fn, const scan_args &a) {
  typedef std::conditional_t<(cu_float_v<D>), double,
                             std::conditional_t<D == DLE_U64, uint64_t, int64_t>>
      AT;
  int64_t lines = a.g.outer * a.g.inner, nch = (a.g.n + SCAN_CHUNK - 1) / SCAN_CHUNK;
  /* a product regrouped by chunks could overflow where the running one does not (the CPU keeps
   * cumprod sequential for the same reason) */
  if (lines >= 4096 || nch < 4 || K == K_PROD) {
    scan_lines<K, D, AT><<<cu_blocks(lines), CU_THREADS>>>(a, lines);
    CU_LAUNCHED(fn);
    return DLE_OK;
  }
  scan_state<AT> *tot = NULL;
  CU_OK(cu_scratch(fn, (void **)&tot, sizeof *tot * (size_t)(lines * nch)));
  scan_chunks<K, D, AT><<<cu_blocks(lines * nch), CU_THREADS>>>(a, lines, nch, tot, false);
  scan_carries<K, AT><<<cu_blocks(lines), CU_THREADS>>>(lines, nch, tot);
  scan_chunks<K, D, AT><<<cu_blocks(lines * nch), CU_THREADS>>>(a, lines, nch, tot, true);
  cudaError_t e = cudaGetLastError();
  cu_scratch_free(tot);
  if (e != cudaSuccess) return cu_fail(fn, "scan kernels", e);
  return DLE_OK;
}

template <int K>
static dle_status scan_typed(const char *fn, dle_dtype dt, const scan_args &a) {
  return cu_with_dtype(dt, [&](auto tag) -> dle_status {
    constexpr dle_dtype D = decltype(tag)::value;
    /* the front door gives cumsum/cumprod int64, uint64 or floats, logcumsumexp floats */
    if constexpr ((K == K_SUM || K == K_PROD) && D != DLE_I64 && D != DLE_U64 && !cu_float_v<D>)
      return cu_error("%s: no CUDA kernel for dtype %s", fn, cu_dtype_name(D));
    else if constexpr (K == K_LSE && !cu_float_v<D>)
      return cu_error("%s: no CUDA kernel for dtype %s", fn, cu_dtype_name(D));
    else
      return scan_launch<K, D>(fn, a);
  });
}

static dle_status cu_scan(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                          const dle_attrs *at) {
  (void)nin;
  const char *fn = cu_op_name(op);
  dle_tensor *x = ins[0];
  scan_args a;
  if (!dle_scan_geom_of(x, (int)at->ints[0], &a.g))
    return cu_error("%s: the input's strides do not form a scan block", fn);
  if (a.g.outer * a.g.n * a.g.inner == 0) return DLE_OK;
  CU_OK(cu_use_device(fn, outs[0]));
  bool rev = at->ints[1] != 0;
  int64_t es = cu_esize(x->dtype), first = rev ? a.g.n - 1 : 0;
  a.sn = rev ? -a.g.sn : a.g.sn;
  a.yn = rev ? -a.g.inner : a.g.inner;
  a.i0 = at->index_base + first;
  a.di = rev ? -1 : 1;
  /* the chunk scans index from the line's first element scanned: shift the bases there */
  a.x = cu_data(x) + first * a.g.sn * es;
  a.y = cu_data(outs[0]) + first * a.g.inner * es;
  a.ix = op == DLE_OP_CUMMAX || op == DLE_OP_CUMMIN
             ? (int64_t *)cu_data(outs[1]) + first * a.g.inner
             : NULL;
  switch (op) {
    case DLE_OP_CUMSUM: return scan_typed<K_SUM>(fn, x->dtype, a);
    case DLE_OP_CUMPROD: return scan_typed<K_PROD>(fn, x->dtype, a);
    case DLE_OP_LOGCUMSUMEXP: return scan_typed<K_LSE>(fn, x->dtype, a);
    case DLE_OP_CUMMAX: return scan_typed<K_MAX>(fn, x->dtype, a);
    default: return scan_typed<K_MIN>(fn, x->dtype, a);
  }
}

void cu_register_scan(dle_backend *b) {
  static const dle_op ops[] = {DLE_OP_CUMSUM, DLE_OP_CUMPROD, DLE_OP_LOGCUMSUMEXP, DLE_OP_CUMMAX,
                               DLE_OP_CUMMIN};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) b->kernels[ops[i]] = cu_scan;
}
