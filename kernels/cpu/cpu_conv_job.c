/* cpu_conv_job.c — the chunk loop of the CPU conv kernels (see cpu_conv_job.h).
 * Threads: the chunks are independent, so with several threads each OpenMP thread takes whole
 * chunks on its own buffers, as PyTorch's slow_conv2d does, instead of running the data movement
 * serially and letting OpenBLAS split every small per-chunk gemm (one thread hand-over per gemm:
 * conv2's forward + backward scaled to 2 threads at 1.5-1.8x PyTorch's time that way). A batch of
 * one chunk keeps OpenBLAS's own threading. No BLAS call runs multi-threaded inside an OpenMP
 * region. */
#include "cpu_conv_job.h"

#include <cblas.h>
#include <string.h>

#include "../../engine/internal.h"
#include "backend.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Accumulators per span take at most this much memory in all. */
#define CONV_SPAN_ACC_BYTES ((int64_t)16 << 20)

int conv_threads(void) {
#ifdef _OPENMP
  return dle_get_num_threads();
#else
  return 1;
#endif
}

/* Every chunk is its own span, except with per_span: then a sum over the chunks is accumulated
 * span by span (nacc elements per span) and the caller adds the spans up in span order; up to 4
 * spans per thread let a free thread take over work on a busy machine. Without per_span, nacc is
 * per thread. */
dle_status conv_job_init(conv_job *j, const char *fn, conv_geom q, size_t es, int64_t b, int64_t nw,
                         int64_t ncol, int64_t ntmp, int64_t nacc, bool per_span) {
  memset(j, 0, sizeof *j);
  j->q = q, j->es = es, j->b = b, j->rows = q.ho;
  int nt = conv_threads();
  int64_t chunks = (q.n + b - 1) / b;
  if (chunks < nt) nt = (int)chunks;
  j->nt = nt;
  j->spans = chunks;
  if (per_span) {
    int64_t most = CONV_SPAN_ACC_BYTES / ((int64_t)es * (nacc > 0 ? nacc : 1));
    j->spans = nt < 2 ? 1 : chunks < 4 * nt ? chunks : 4 * nt;
    if (j->spans > most) j->spans = most > nt ? most : nt;
  }
  j->nw = nw, j->ncol = ncol, j->ntmp = ntmp;
  j->nacc = nacc, j->naccs = per_span ? j->spans : nt;
  size_t n = (size_t)nt, na = (size_t)(j->nacc * j->naccs);
  j->wbuf = nw ? dle_cpu_alloc(es * (size_t)nw) : NULL;
  j->col = dle_cpu_alloc(es * n * (size_t)j->ncol + 1);
  j->tmp = dle_cpu_alloc(es * n * (size_t)j->ntmp + 1);
  j->acc = dle_cpu_alloc(es * na + 1);
  if ((nw && !j->wbuf) || !j->col || !j->tmp || !j->acc)
    return dle_error("%s: out of memory for the column buffers", fn);
  memset(j->acc, 0, es * na);
  return DLE_OK;
}

void conv_job_free(conv_job *j) {
  size_t n = (size_t)j->nt, es = j->es;
  dle_cpu_free(j->wbuf, es * (size_t)j->nw);
  dle_cpu_free(j->col, es * n * (size_t)j->ncol + 1);
  dle_cpu_free(j->tmp, es * n * (size_t)j->ntmp + 1);
  dle_cpu_free(j->acc, es * (size_t)(j->nacc * j->naccs) + 1);
}

/* Span s's chunks, in order, on thread t. */
static void run_span(const conv_job *j, conv_chunk_fn f, int64_t s, int t) {
  const int64_t n = j->q.n, b = j->b, chunks = (n + b - 1) / b;
  for (int64_t i = s * chunks / j->spans; i < (s + 1) * chunks / j->spans; i++)
    f(j, i * b, n - i * b < b ? n - i * b : b, t, s);
}

/* A free thread takes the next span (better on a busy machine than a fixed share per thread),
 * OpenBLAS set to one thread meanwhile. */
void conv_for_chunks(const conv_job *j, conv_chunk_fn f) {
  if (j->nt < 2) {
    for (int64_t s = 0; s < j->spans; s++) run_span(j, f, s, 0);
    return;
  }
#ifdef _OPENMP
  openblas_set_num_threads(1);
  _Pragma("omp parallel for schedule(dynamic) num_threads(j->nt)")
  for (int64_t s = 0; s < j->spans; s++) run_span(j, f, s, omp_get_thread_num());
  openblas_set_num_threads(dle_get_num_threads());
#endif
}

dle_status conv_job_run(conv_job *j, dle_status st, conv_chunk_fn f) {
  if (st == DLE_OK) conv_for_chunks(j, f);
  conv_job_free(j);
  return st;
}
