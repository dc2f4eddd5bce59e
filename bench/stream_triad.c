/* stream_triad.c — the STREAM-style reference of bench/bandwidth.lua: a[i] = b[i] + 3 c[i] over
 * 16M float32 (3 x 64 MiB counted), OpenMP, 2 MiB-aligned huge-page arrays like dle's allocator.
 * Prints GB/s from the best wall time and from process CPU time / threads (the figure that stays
 * meaningful when other jobs share the cores). Build and run:
 *   gcc -O3 -march=native -fopenmp bench/stream_triad.c -o /tmp/triad && OMP_WAIT_POLICY=passive /tmp/triad */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define N (16L * 1024 * 1024)

static double cpu_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
  size_t bytes = N * sizeof(float);
  float *a = aligned_alloc(2 << 20, bytes), *b = aligned_alloc(2 << 20, bytes), *c = aligned_alloc(2 << 20, bytes);
  if (!a || !b || !c) return 1;
  madvise(a, bytes, MADV_HUGEPAGE), madvise(b, bytes, MADV_HUGEPAGE), madvise(c, bytes, MADV_HUGEPAGE);
#pragma omp parallel for
  for (long i = 0; i < N; i++) a[i] = 1, b[i] = 2, c[i] = 3;
  double wall = 1e9, cpu = 1e9;
  for (int r = 0; r < 9; r++) {
    double w0 = omp_get_wtime(), c0 = cpu_seconds();
#pragma omp parallel for
    for (long i = 0; i < N; i++) a[i] = b[i] + 3.0f * c[i];
    double w = omp_get_wtime() - w0, cc = cpu_seconds() - c0;
    wall = w < wall ? w : wall, cpu = cc < cpu ? cc : cpu;
  }
  int nt = omp_get_max_threads();
  printf("triad %d threads: %.1f GB/s wall, %.1f GB/s cpu-time (a[0] = %g)\n", nt, 3.0 * bytes / wall / 1e9,
         3.0 * bytes / (cpu / nt) / 1e9, a[0]);
  return 0;
}
