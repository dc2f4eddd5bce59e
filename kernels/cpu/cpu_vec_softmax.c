/* cpu_vec_softmax.c — AVX2 softmax, log_softmax and logsumexp of contiguous float32 rows.
 *
 * A row's max M and S = sum exp(x - M) come from one read of the row ("online" softmax): blocks of
 * SM_BLK elements, each read twice while it sits in L1 (its max, then its exp-sum), with S
 * rescaled by exp(M_old - M_new) when a block raises the max. The output then takes one more
 * read. Semantics match the portable loops of reduce.c: a NaN or +inf in a row, or a row of
 * -inf only, gives NaN outputs (logsumexp: the max itself). Rows up to 8K elements take a
 * cheaper route for softmax (softmax_row_stored). With `stream`, y is written with streaming
 * stores (cpu_stream.h: for outputs far larger than the caches; the caller fences). */
#include "cpu_vecmath.h"

#ifdef CPU_VEC_X86
#include "cpu_vec_avx2.h"

#define SM_BLK 512 /* 2 KiB of floats */

/* Max of a block; NaN if it holds one. */
VEC_INLINE float block_max(const float *x, int64_t len) {
  __m256 m0 = V8(-INFINITY), m1 = m0, nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= len; i += 16) {
    __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    m0 = _mm256_max_ps(m0, a), m1 = _mm256_max_ps(m1, b);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
  }
  for (; i < len; i += 8) {
    __m256 a = len - i >= 8 ? _mm256_loadu_ps(x + i) : vload_part(x + i, len - i, -INFINITY);
    m0 = _mm256_max_ps(m0, a);
    nan = _mm256_or_ps(nan, visnan(a));
  }
  return _mm256_movemask_ps(nan) ? NAN : vhmax(_mm256_max_ps(m0, m1));
}

/* sum exp(x - m) of a block; prefetches the block `ahead` elements further on (the next row). */
VEC_INLINE float block_expsum(const float *x, int64_t len, float m, int64_t ahead) {
  __m256 vm = V8(m), s0 = _mm256_setzero_ps(), s1 = s0;
  int64_t i = 0;
  for (; i + 16 <= len; i += 16) {
    __builtin_prefetch(x + ahead + i, 0, 3);
    s0 = _mm256_add_ps(s0, vexp_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)));
    s1 = _mm256_add_ps(s1, vexp_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm)));
  }
  for (; i < len; i += 8) { /* the tail's missing lanes are -inf: exp gives 0 */
    __m256 a = len - i >= 8 ? _mm256_loadu_ps(x + i) : vload_part(x + i, len - i, -INFINITY);
    s0 = _mm256_add_ps(s0, vexp_nonpos(_mm256_sub_ps(a, vm)));
  }
  return vhsum(_mm256_add_ps(s0, s1));
}

VEC_TARGET static void row_stats(const float *x, int64_t n, float *pm, double *ps) {
  float M = -INFINITY;
  double S = 0;
  for (int64_t b = 0; b < n; b += SM_BLK) {
    int64_t len = n - b < SM_BLK ? n - b : SM_BLK;
    float bm = block_max(x + b, len);
    if (bm == -INFINITY) continue; /* adds exp(-inf - M) = 0 */
    if (!(bm <= M)) {              /* a new max, or a NaN */
      S *= exp((double)M - (double)bm);
      M = bm;
    }
    S += block_expsum(x + b, len, M, n);
  }
  *pm = M, *ps = S;
}

/* Softmax of a row short enough to stay in L1/L2: each block stores exp(x - M_b) into a stack
 * buffer, with M_b the running max after it, while summing; a last pass writes block b of y as the
 * buffer scaled by exp(M_b - M) / S. One exp per element instead of two, and y is written once
 * (so it can be streamed, and y may be x). */
#define SM_STORE_BLOCKS 16
VEC_TARGET static void softmax_row_stored(float *y, const float *x, int64_t n, bool stream) {
  _Alignas(32) float e[SM_BLK * SM_STORE_BLOCKS];
  float M = -INFINITY, bmax[SM_STORE_BLOCKS];
  double S = 0;
  for (int64_t b = 0, k = 0; b < n; b += SM_BLK, k++) {
    int64_t len = n - b < SM_BLK ? n - b : SM_BLK, i = 0;
    float bm = block_max(x + b, len);
    if (!(bm <= M)) {
      S *= exp((double)M - (double)bm);
      M = bm;
    }
    bmax[k] = M;
    if (M == -INFINITY) { /* -inf only so far: zeros, unless the whole row is (then NaN, below) */
      memset(e + b, 0, (size_t)len * sizeof(float));
      continue;
    }
    __m256 vm = V8(M), s0 = _mm256_setzero_ps(), s1 = s0;
    for (; i + 16 <= len; i += 16) { /* two vectors, two sums: independent chains */
      /* rows usually follow each other: fetch the next one while this one computes */
      __builtin_prefetch(x + n + b + i, 0, 3);
      if (!stream) __builtin_prefetch(y + n + b + i, 1, 3);
      __m256 v = vexp_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + b + i), vm));
      __m256 w = vexp_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + b + i + 8), vm));
      _mm256_store_ps(e + b + i, v);
      _mm256_store_ps(e + b + i + 8, w);
      s0 = _mm256_add_ps(s0, v), s1 = _mm256_add_ps(s1, w);
    }
    s0 = _mm256_add_ps(s0, s1);
    for (; i + 8 <= len; i += 8) {
      __m256 v = vexp_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + b + i), vm));
      _mm256_store_ps(e + b + i, v);
      s0 = _mm256_add_ps(s0, v);
    }
    if (i < len) {
      __m256 v = vexp_nonpos(_mm256_sub_ps(vload_part(x + b + i, len - i, -INFINITY), vm));
      _mm256_store_ps(e + b + i, v); /* the buffer has room for whole vectors */
      s0 = _mm256_add_ps(s0, v);
    }
    S += vhsum(s0);
  }
  if (M == -INFINITY) S = NAN; /* as exp(-inf - -inf) in the portable loop */
  for (int64_t b = 0, k = 0; b < n; b += SM_BLK, k++) {
    int64_t len = n - b < SM_BLK ? n - b : SM_BLK;
    __m256 f = V8((float)(exp((double)bmax[k] - (double)M) / S));
    const float *eb = e + b;
#define SM_SCALED(i, l) _mm256_mul_ps(vload_n(eb + (i), l, 0), f)
    VEC_WRITE_ROW(y + b, len, stream, SM_SCALED);
#undef SM_SCALED
  }
}

VEC_TARGET void cpu_vec_softmax_row_avx2(float *y, const float *x, int64_t n, bool lg,
                                         bool stream) {
  if (!lg && n <= SM_BLK * SM_STORE_BLOCKS) {
    softmax_row_stored(y, x, n, stream);
    return;
  }
  float M;
  double S;
  row_stats(x, n, &M, &S);
  __m256 vm = V8(M);
  if (lg) {
    __m256 k = V8((float)log(S)); /* y = x - M - log S, rounded as the portable loop does */
#define LSM_OUT(i, l) _mm256_sub_ps(_mm256_sub_ps(vload_n(x + (i), l, 0), vm), k)
    VEC_WRITE_ROW(y, n, stream, LSM_OUT);
#undef LSM_OUT
  } else {
    __m256 k = V8((float)(1 / S));
#define SM_OUT(i, l) _mm256_mul_ps(vexp_nonpos(_mm256_sub_ps(vload_n(x + (i), l, 0), vm)), k)
    VEC_WRITE_ROW(y, n, stream, SM_OUT);
#undef SM_OUT
  }
}

VEC_TARGET float cpu_vec_logsumexp_row_avx2(const float *x, int64_t n) {
  float M;
  double S;
  row_stats(x, n, &M, &S);
  return isfinite(M) ? (float)((double)M + log(S)) : M;
}

#endif /* CPU_VEC_X86 */
