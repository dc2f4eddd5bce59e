/* bench_ref — the C reference figures of scripts/bench: raw OpenBLAS cblas_sgemm and STREAM-style
 * copy and triad loops (OpenMP, float32), timed as bench/timing.lua times dle (calibrated
 * iteration count, the calibration calls as warm-up, then repetitions whose median, min and max
 * are printed).
 *
 *   bench_ref [--threads N] [--target SECONDS] [--reps R] TASK...
 *   TASK   sgemm:M:N:K      C{M,N} = A{M,K} B{K,N}, row-major             -> GFLOP/s (2*M*N*K)
 *          sgemm_tn:M:N:K   C{M,N} = A^T B with A stored {K,M} (CblasTrans) -> GFLOP/s
 *          copy:N           c[i] = a[i]                                    -> GB/s (2*4*N bytes)
 *          triad:N          a[i] = b[i] + s*c[i]                           -> GB/s (3*4*N bytes)
 *          lua_object:1     Lua 5.4 making one userdata with a __gc finalizer from C and
 *                           leaving it to the collector (lua_floor.c)      -> us per object
 * Prints one line per task: `TASK median min max iterations UNIT` (rates: min is the slowest
 * repetition; times: min is the fastest), or `TASK error MESSAGE`. Bytes are counted as STREAM counts them (no
 * write-allocate traffic), and so are dle's bandwidth figures. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lua_floor.h"

#define MAX_REPS 101

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One benchmark: `run` performs the operation once on `state`. */
typedef struct {
  void (*run)(void *state);
  void *state;
} job;

static double time_n(job j, long n) {
  double t0 = now();
  for (long i = 0; i < n; i++) j.run(j.state);
  return now() - t0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Seconds per operation of `reps` repetitions, sorted ascending; returns the iteration count. */
static long measure(job j, double target, int reps, double *per) {
  double t = time_n(j, 1); /* first call: page faults, thread start-up */
  long n = 1;
  while (t < target / 4) {
    n *= 4;
    t = time_n(j, n);
  }
  long last = n;
  if (t < target) n = (long)(n * target / t + 0.999);
  if (n != last) time_n(j, n); /* warm-up repetition at the final count */
  for (int r = 0; r < reps; r++) per[r] = time_n(j, n) / (double)n;
  qsort(per, (size_t)reps, sizeof *per, cmp_double);
  return n;
}

/* ------------------------------------------------------------------ sgemm */

typedef struct {
  int m, n, k, trans_a;
  float *a, *b, *c;
} gemm_state;

static void run_gemm(void *p) {
  gemm_state *s = p;
  cblas_sgemm(CblasRowMajor, s->trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans, s->m, s->n, s->k,
              1.0f, s->a, s->trans_a ? s->m : s->k, s->b, s->n, 0.0f, s->c, s->n);
}

static float *filled(size_t n) {
  float *p = malloc(n * sizeof *p);
  if (!p) return NULL;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) p[i] = (float)((i * 7919u) % 1000u) * 1e-3f - 0.5f;
  return p;
}

/* ------------------------------------------------------------------ STREAM copy / triad */

typedef struct {
  size_t n;
  float *a, *b, *c;
} stream_state;

static void run_copy(void *p) {
  stream_state *s = p;
  float *restrict c = s->c;
  const float *restrict a = s->a;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < s->n; i++) c[i] = a[i];
}

static void run_triad(void *p) {
  stream_state *s = p;
  float *restrict a = s->a;
  const float *restrict b = s->b, *restrict c = s->c;
  const float q = 3.0f;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < s->n; i++) a[i] = b[i] + q * c[i];
}

/* ------------------------------------------------------------------ main */

static void report(const char *task, long iters, const double *per, int reps, double work,
                   const char *unit) {
  double med = reps % 2 ? per[reps / 2] : 0.5 * (per[reps / 2 - 1] + per[reps / 2]);
  /* rates: the slowest repetition gives the minimum */
  printf("%s %.6g %.6g %.6g %ld %s\n", task, work / med, work / per[reps - 1], work / per[0], iters,
         unit);
  fflush(stdout);
}

/* Times: the median, fastest and slowest repetition of `per_op` seconds, scaled to microseconds. */
static void report_us(const char *task, long iters, const double *per, int reps,
                      double ops_per_iter) {
  double med = reps % 2 ? per[reps / 2] : 0.5 * (per[reps / 2 - 1] + per[reps / 2]);
  double k = 1e6 / ops_per_iter;
  printf("%s %.6g %.6g %.6g %ld us\n", task, med * k, per[0] * k, per[reps - 1] * k, iters);
  fflush(stdout);
}

static int run_task(const char *task, double target, int reps) {
  char kind[16];
  long x = 0, y = 0, z = 0;
  double per[MAX_REPS];
  if (sscanf(task, "%15[a-z_]:%ld:%ld:%ld", kind, &x, &y, &z) < 2 || x < 1) {
    printf(
        "%s error bad task (expected sgemm:M:N:K, sgemm_tn:M:N:K, copy:N, triad:N or lua_object:1)\n",
        task);
    return 1;
  }
  if (!strcmp(kind, "sgemm") || !strcmp(kind, "sgemm_tn")) {
    if (y < 1 || z < 1 || x > 65536 || y > 65536 || z > 65536) {
      printf("%s error bad sizes\n", task);
      return 1;
    }
    gemm_state s = {(int)x,
                    (int)y,
                    (int)z,
                    !strcmp(kind, "sgemm_tn"),
                    filled((size_t)x * z),
                    filled((size_t)z * y),
                    filled((size_t)x * y)};
    int ok = s.a && s.b && s.c;
    if (ok) {
      long it = measure((job){run_gemm, &s}, target, reps, per);
      report(task, it, per, reps, 2.0 * x * y * z * 1e-9, "GFLOP/s");
    } else {
      printf("%s error out of memory\n", task);
    }
    free(s.a), free(s.b), free(s.c);
    return !ok;
  }
  if (!strcmp(kind, "copy") || !strcmp(kind, "triad")) {
    int triad = !strcmp(kind, "triad");
    stream_state s = {(size_t)x, filled((size_t)x), filled((size_t)x), filled((size_t)x)};
    int ok = s.a && s.b && s.c;
    if (ok) {
      long it = measure((job){triad ? run_triad : run_copy, &s}, target, reps, per);
      report(task, it, per, reps, (triad ? 3.0 : 2.0) * sizeof(float) * (double)x * 1e-9, "GB/s");
    } else {
      printf("%s error out of memory\n", task);
    }
    free(s.a), free(s.b), free(s.c);
    return !ok;
  }
  if (!strcmp(kind, "lua_object")) {
    lua_floor *f = lua_floor_new();
    if (!f) {
      printf("%s error Lua failed to start\n", task);
      return 1;
    }
    long it = measure((job){lua_floor_run, f}, target, reps, per);
    report_us(task, it, per, reps, LUA_FLOOR_BATCH);
    lua_floor_free(f);
    return 0;
  }
  printf("%s error unknown task kind %s\n", task, kind);
  return 1;
}

int main(int argc, char **argv) {
  int threads = 1, reps = 9, failed = 0;
  double target = 0.1;
  int i = 1;
  for (; i < argc && !strncmp(argv[i], "--", 2); i += 2) {
    if (i + 1 >= argc) {
      fprintf(stderr, "bench_ref: %s needs a value\n", argv[i]);
      return 2;
    }
    if (!strcmp(argv[i], "--threads"))
      threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--reps"))
      reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--target"))
      target = atof(argv[i + 1]);
    else {
      fprintf(stderr, "bench_ref: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (threads < 1 || reps < 1 || reps > MAX_REPS || !(target > 0)) {
    fprintf(stderr, "bench_ref: need --threads >= 1, 1 <= --reps <= %d, --target > 0\n", MAX_REPS);
    return 2;
  }
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  printf("threads %d\n", threads);
  for (; i < argc; i++) failed |= run_task(argv[i], target, reps);
  return failed;
}
