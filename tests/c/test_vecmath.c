/* test_vecmath.c — accuracy of the AVX2 float32 math of kernels/cpu/cpu_vecmath.h against
 * double-precision libm: ~4.3 million inputs spread over every float bit pattern, plus the edges
 * (signed zeros, infinities, NaN, denormals, overflow and underflow thresholds), and loop tails of
 * every length 0..40 (the lanes past n must not be written); softmax rows streamed vs cached, and
 * the streaming copy of cpu_stream.h. Skipped on a CPU without AVX2+FMA (the copy test runs). */
#include "testutil.h"

#include "../../kernels/cpu/cpu_stream.h"
#include "../../kernels/cpu/cpu_vecmath.h"
#ifdef CPU_VEC_X86
#include "../../kernels/cpu/cpu_vec_avx2.h"
#endif

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef double (*ref_fn)(double);
static double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double ref_silu(double x) { return x / (1 + exp(-x)); }
static double ref_gelu(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }

/* |y - ref| in units of the float spacing at ref (2^-149 in the denormal range); 0 when both are
 * the same NaN/inf/zero class, 1e9 for a class mismatch (NaN vs number, wrong infinity). */
static double ulp_err(float y, double ref) {
  if (isnan(ref) || isnan(y)) return isnan(ref) && isnan(y) ? 0 : 1e9;
  float rf = (float)ref;
  if (isinf(rf) || isinf(y)) {
    if (y == rf) return 0;
    if (isinf(y) && !isinf(rf))
      return fabs(ref) >= 3.4028234e38 * (1 - 3e-8) ? 1 : 1e9; /* at the edge */
    return fabs(rf) >= 3.4028234e38 ? 1 : 1e9;
  }
  double a = fabs(ref) < 1.17549435e-38 ? ldexp(1, -149) : ldexp(1, ilogb(ref) - 23);
  return fabs((double)y - ref) / a;
}

static const float edges[] = {
    0.0f,      -0.0f,   INFINITY,      -INFINITY,       NAN,         -NAN,     1.0f,
    -1.0f,     1e-45f,  -1e-45f,       1.17549435e-38f, 1e-39f,      -1e-39f,  88.72283f,
    88.72284f, 88.7f,   89.0f,         -87.33654f,      -87.4f,      -103.97f, -103.98f,
    -104.0f,   -110.0f, 3.4028235e38f, -3.4028235e38f,  0.625f,      -0.625f,  0.62499994f,
    9.0f,      -9.0f,   10.0f,         -10.0f,          10.5f,       -14.0f,   14.0f,
    2.0f,      -2.0f,   1.9999999f,    0.99999994f,     -0.99999994f};

/* Max ulp error of map over the sample; reports the worst input. */
static double sweep(cpu_vec_map_fn map, ref_fn ref, const char *name, float lo, float hi) {
  enum { N = 4096 };
  static float x[N], y[N];
  double worst = 0;
  float at = 0;
  uint64_t bits = 0;
  for (int done = 0; !done;) {
    int n = 0;
    for (; n < N && !done; n++) {
      uint32_t b = (uint32_t)bits;
      memcpy(&x[n], &b, 4);
      if (x[n] != x[n] || x[n] < lo || x[n] > hi) x[n] = edges[n % (sizeof edges / sizeof *edges)];
      bits += 997;
      done = bits > 0xffffffffu;
    }
    map(y, x, n);
    for (int i = 0; i < n; i++) {
      double e = ulp_err(y[i], ref(x[i]));
      if (e > worst) worst = e, at = x[i];
    }
  }
  for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) {
    if (!(edges[i] >= lo && edges[i] <= hi) && edges[i] == edges[i]) continue;
    map(y, &edges[i], 1);
    double e = ulp_err(y[0], ref(edges[i]));
    if (e > worst) worst = e, at = edges[i];
  }
  printf("# %-8s max error %.2f ulp at %.9g\n", name, worst, at);
  return worst;
}

static const cpu_vec_kernels *need_avx2(void) {
  if (!cpu_vec) SKIP("no AVX2+FMA on this CPU (or DLE_SIMD=0)");
  return cpu_vec;
}

TEST(vec_exp_log_within_2_ulp_of_libm) {
  const cpu_vec_kernels *v = need_avx2();
  CHECK(sweep(v->unary[DLE_OP_EXP], exp, "exp", -INFINITY, INFINITY) <= 2, "exp");
  CHECK(sweep(v->unary[DLE_OP_LOG], log, "log", -INFINITY, INFINITY) <= 2, "log");
}

#ifdef CPU_VEC_X86
/* softmax's exp of x <= 0 (vexp_nonpos), tried on -|x| for every sampled x */
static double ref_exp_nonpos(double x) { return exp(-fabs(x)); }
VEC_TARGET static void map_exp_nonpos(float *o, const float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(o + i, vexp_nonpos(vabs(_mm256_loadu_ps(x + i)) * -1.0f));
  if (i < n) vstore_part(o + i, n - i, vexp_nonpos(vabs(vload_part(x + i, n - i, 0)) * -1.0f));
}

TEST(vec_exp_of_nonpositive_within_2_ulp_of_libm) {
  need_avx2();
  CHECK(sweep(map_exp_nonpos, ref_exp_nonpos, "exp(-|x|)", -INFINITY, INFINITY) <= 2,
        "softmax's exp");
}
#endif

TEST(vec_tanh_sigmoid_silu_within_3_ulp_of_libm) {
  const cpu_vec_kernels *v = need_avx2();
  CHECK(sweep(v->unary[DLE_OP_TANH], tanh, "tanh", -INFINITY, INFINITY) <= 2, "tanh");
  CHECK(sweep(v->unary[DLE_OP_SIGMOID], ref_sigmoid, "sigmoid", -INFINITY, INFINITY) <= 3,
        "sigmoid");
  /* silu(-inf) is NaN (-inf * 0) in both the reference and the portable loop */
  CHECK(sweep(v->unary[DLE_OP_SILU], ref_silu, "silu", -INFINITY, INFINITY) <= 3, "silu");
}

TEST(vec_erf_erfc_gelu_within_6_ulp_of_libm) {
  const cpu_vec_kernels *v = need_avx2();
  CHECK(sweep(v->erf, erf, "erf", -INFINITY, INFINITY) <= 3, "erf");
  CHECK(sweep(v->erfc, erfc, "erfc", -INFINITY, INFINITY) <= 5, "erfc");
  CHECK(sweep(v->unary[DLE_OP_GELU], ref_gelu, "gelu", -INFINITY, INFINITY) <= 6, "gelu");
}

TEST(vec_special_values_follow_c99) {
  const cpu_vec_kernels *v = need_avx2();
  float x[6] = {-0.0f, 0.0f, INFINITY, -INFINITY, NAN, -1.0f}, y[6];
  v->unary[DLE_OP_EXP](y, x, 6);
  CHECK(y[0] == 1 && y[1] == 1 && y[2] == INFINITY && y[3] == 0 && isnan(y[4]), "exp specials");
  v->unary[DLE_OP_LOG](y, x, 6);
  CHECK(y[0] == -INFINITY && y[1] == -INFINITY && y[2] == INFINITY && isnan(y[3]) && isnan(y[4]) &&
            isnan(y[5]),
        "log specials");
  v->unary[DLE_OP_TANH](y, x, 6);
  CHECK(y[0] == 0 && signbit(y[0]) && y[2] == 1 && y[3] == -1 && isnan(y[4]), "tanh specials");
  v->unary[DLE_OP_SIGMOID](y, x, 6);
  CHECK(y[0] == 0.5f && y[2] == 1 && y[3] == 0 && isnan(y[4]), "sigmoid specials");
  v->unary[DLE_OP_GELU](y, x, 6);
  CHECK(y[0] == 0 && y[2] == INFINITY && isnan(y[4]), "gelu specials");
  v->erf(y, x, 6);
  CHECK(y[0] == 0 && signbit(y[0]) && y[2] == 1 && y[3] == -1 && isnan(y[4]), "erf specials");
}

/* Tails: lengths 0..40 map exactly like element-by-element calls and leave o[n] untouched. */
TEST(vec_maps_handle_every_tail_length) {
  const cpu_vec_kernels *v = need_avx2();
  float x[48], y[48], one;
  for (int i = 0; i < 48; i++) x[i] = (float)i * 0.37f - 7.0f;
  for (int n = 0; n <= 40; n++) {
    for (int i = 0; i < 48; i++) y[i] = 12345.0f;
    v->unary[DLE_OP_TANH](y, x, n);
    bool ok = true;
    for (int i = 0; i < n; i++) {
      v->unary[DLE_OP_TANH](&one, &x[i], 1);
      ok = ok && y[i] == one;
    }
    for (int i = n; i < 48; i++) ok = ok && y[i] == 12345.0f;
    CHECK(ok, "tanh over %d elements", n);
  }
}

/* Softmax and logsumexp rows against double references, including a max that rises late in a
 * long row (the online rescaling), -inf entries and the all -inf / NaN rows. */
TEST(vec_softmax_rows_match_double_reference) {
  const cpu_vec_kernels *v = need_avx2();
  enum { N = 20000 };
  static float x[N], y[N];
  /* up to 8192 elements softmax stores exp while summing; longer rows recompute it */
  for (int n = 1; n <= N; n += n < 40 ? 1 : n < 3000 ? 997 : 8000) {
    for (int i = 0; i < n; i++) x[i] = (float)sin(i * 0.7) * 20 + (float)i * 0.01f;
    if (n > 5) x[2] = -INFINITY;
    double m = -INFINITY, s = 0;
    for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    for (int i = 0; i < n; i++) s += exp(x[i] - m);
    double worst = 0, worst_lg = 0;
    v->softmax_row(y, x, n, false, false);
    for (int i = 0; i < n; i++)
      worst = fmax(worst, fabs(y[i] - exp(x[i] - m) / s) / (exp(x[i] - m) / s + 1e-30));
    v->softmax_row(y, x, n, true, false);
    for (int i = 0; i < n; i++)
      if (isfinite(x[i])) worst_lg = fmax(worst_lg, fabs(y[i] - (x[i] - m - log(s))));
    CHECK(worst < 1e-5 && worst_lg < 1e-4, "softmax rel err %g, log_softmax abs err %g over %d",
          worst, worst_lg, n);
    CHECK_NEAR(v->logsumexp_row(x, n), m + log(s), 1e-5 * fabs(m + log(s)) + 1e-6);
  }
  float ninf[3] = {-INFINITY, -INFINITY, -INFINITY}, withnan[3] = {1, NAN, 2};
  v->softmax_row(y, ninf, 3, false, false);
  CHECK(isnan(y[0]), "softmax of -inf only is NaN (as the portable loop)");
  CHECK(v->logsumexp_row(ninf, 3) == -INFINITY, "logsumexp of -inf only is -inf");
  v->softmax_row(y, withnan, 3, false, false);
  CHECK(isnan(y[0]) && isnan(y[2]), "a NaN makes the row NaN");
  CHECK(isnan(v->logsumexp_row(withnan, 3)), "logsumexp with NaN");
}

/* The streaming-store route (large outputs) writes the same bits as the cached one, at every
 * alignment of the destination, and nothing outside the row; in place (y = x) too. */
TEST(vec_softmax_rows_streamed_equal_cached) {
  const cpu_vec_kernels *v = need_avx2();
  enum { N = 9000, PAD = 16 };
  static float x[N], want[N], buf[N + 2 * PAD], inplace[N];
  const int sizes[] = {1, 7, 8, 9, 15, 17, 31, 513, 1023, 1024, 8192, 8193, N};
  for (int lg = 0; lg <= 1; lg++)
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
      int n = sizes[k];
      for (int i = 0; i < n; i++) x[i] = (float)sin(i * 1.3) * 30;
      v->softmax_row(want, x, n, lg, false);
      for (int off = 0; off < 8; off++) { /* y at every float offset from a 32-byte boundary */
        float *y = (float *)(((uintptr_t)(buf + PAD) & ~(uintptr_t)31)) + off;
        for (int i = 0; i < N + 2 * PAD; i++) buf[i] = 777.0f;
        v->softmax_row(y, x, n, lg, true);
        cpu_stream_fence();
        bool same = memcmp(y, want, (size_t)n * sizeof(float)) == 0, guard = true;
        for (float *p = buf; p < buf + N + 2 * PAD; p++)
          if (p < y || p >= y + n) guard = guard && *p == 777.0f;
        CHECK(same && guard, "%s over %d at float offset %d: %s", lg ? "log_softmax" : "softmax", n,
              off, same ? "wrote outside the row" : "differs from the cached route");
      }
      memcpy(inplace, x, (size_t)n * sizeof(float));
      v->softmax_row(inplace, inplace, n, lg, true);
      cpu_stream_fence();
      CHECK(memcmp(inplace, want, (size_t)n * sizeof(float)) == 0, "%s in place over %d",
            lg ? "log_softmax" : "softmax", n);
    }
}

/* cpu_stream_copy (kernels/cpu/cpu_stream.c) copies exactly [dst, dst + bytes) at every alignment
 * of both ends and every length around the vector and cache-line sizes. */
TEST(stream_copy_exact_at_every_alignment) {
  static unsigned char src[600], dst[700];
  for (int i = 0; i < 600; i++) src[i] = (unsigned char)(i * 7 + 1);
  bool ok = true;
  for (int off = 0; off < 64 && ok; off++)
    for (int len = 0; len <= 300 && ok; len += len < 70 ? 1 : 37) {
      memset(dst, 0xAB, sizeof dst);
      cpu_stream_copy(dst + off, src + (off * 3) % 64, (size_t)len);
      cpu_stream_fence();
      ok = memcmp(dst + off, src + (off * 3) % 64, (size_t)len) == 0;
      for (int i = 0; i < (int)sizeof dst && ok; i++)
        if (i < off || i >= off + len) ok = dst[i] == 0xAB;
      CHECK(ok, "copy of %d bytes to offset %d", len, off);
    }
}

/* sgemm_nn against a double-precision triple loop on every row tail (m % 4) and column tail
 * (n % 24, n % 8), with leading dimensions wider than the operands, overwriting c and adding to
 * it; c's padding stays untouched. */
TEST(vec_sgemm_nn_matches_reference_on_every_tail) {
  const cpu_vec_kernels *v = need_avx2();
  enum { LD_PAD = 3 };
  static float a[9 * (40 + LD_PAD)], b[40 * (53 + LD_PAD)], c[9 * (53 + LD_PAD)];
  bool ok = true;
  for (int add = 0; add <= 1; add++)
    for (int64_t m = 1; m <= 9 && ok; m++)
      for (int64_t n = 1; n <= 53 && ok; n += n < 26 ? 1 : 9)
        for (int64_t k = 1; k <= 40 && ok; k += 13) {
          const int64_t lda = k + LD_PAD, ldb = n + LD_PAD, ldc = n + LD_PAD;
          for (int64_t i = 0; i < m * lda; i++) a[i] = (float)((i * 37 % 19) - 9) / 8;
          for (int64_t i = 0; i < k * ldb; i++) b[i] = (float)((i * 11 % 23) - 11) / 16;
          for (int64_t i = 0; i < m * ldc; i++) c[i] = 1234.5f;
          v->sgemm_nn(m, n, k, a, lda, b, ldb, c, ldc, add);
          for (int64_t i = 0; i < m && ok; i++)
            for (int64_t j = 0; j < ldc && ok; j++) {
              double want = 1234.5;
              if (j < n) {
                want = add ? 1234.5 : 0;
                for (int64_t p = 0; p < k; p++) want += (double)a[i * lda + p] * b[p * ldb + j];
              }
              ok = fabs(c[i * ldc + j] - want) <= 1e-4 * (1 + fabs(want));
              CHECK(ok, "m %lld n %lld k %lld add %d: c[%lld][%lld] = %g, want %g", (long long)m,
                    (long long)n, (long long)k, add, (long long)i, (long long)j, c[i * ldc + j],
                    want);
            }
        }
}

/* wino_rows against the scalar row pass for every row length up to 3 blocks of 8 tiles; the
 * outputs past tw are slack it may write, the ones before must be exact */
TEST(vec_wino_rows_match_scalar_row_pass) {
  const cpu_vec_kernels *v = need_avx2();
  static float row[2 * 24 + 2], h[4][24];
  bool ok = true;
  for (int64_t tw = 1; tw <= 24 && ok; tw++) {
    for (int i = 0; i < 2 * 24 + 2; i++) row[i] = (float)((i * 29 % 17) - 8) / 4;
    v->wino_rows(row, tw, h[0], h[1], h[2], h[3]);
    for (int64_t tx = 0; tx < tw && ok; tx++) {
      const float *d = row + 2 * tx;
      const float want[4] = {d[0] - d[2], d[1] + d[2], d[2] - d[1], d[1] - d[3]};
      for (int j = 0; j < 4 && ok; j++) {
        ok = h[j][tx] == want[j];
        CHECK(ok, "tw %lld: h%d[%lld] = %g, want %g", (long long)tw, j, (long long)tx, h[j][tx],
              want[j]);
      }
    }
  }
}
