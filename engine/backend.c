/* backend.c — the per-device kernel tables, threads and the clock.
 * CPU is linked in; CUDA lives in a separate shared library (libdle_cuda.so, next to the core
 * module) loaded on first use, so CPU users never pay for cuBLAS at require time. */
#define _GNU_SOURCE 1 /* dladdr */
#include <dlfcn.h>

#include "internal.h"

#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <cblas.h>

static const dle_backend *backends[DLE_NUM_DEVICE_TYPES];
static char unavailable[DLE_NUM_DEVICE_TYPES][256];
static bool cuda_tried;

void dle_backend_register(dle_device_type type, const dle_backend *b) { backends[type] = b; }

/* The CUDA library exports dle_cuda_backend_init(char *why, size_t n): the backend, or NULL with
 * the reason (e.g. no device). It is looked for beside this library, then on the loader path. */
static void load_cuda(void) {
  cuda_tried = true;
  snprintf(unavailable[DLE_CUDA], sizeof unavailable[DLE_CUDA],
           "CUDA backend not available: libdle_cuda.so was not built or could not be loaded");
  Dl_info self;
  char path[4096] = "libdle_cuda.so";
  if (dladdr((void *)load_cuda, &self) && self.dli_fname) {
    const char *slash = strrchr(self.dli_fname, '/');
    if (slash) snprintf(path, sizeof path, "%.*s/libdle_cuda.so", (int)(slash - self.dli_fname), self.dli_fname);
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) h = dlopen("libdle_cuda.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  typedef const dle_backend *(*init_fn)(char *, size_t);
  init_fn init = (init_fn)dlsym(h, "dle_cuda_backend_init");
  if (!init) return;
  const dle_backend *b = init(unavailable[DLE_CUDA], sizeof unavailable[DLE_CUDA]);
  if (b) backends[DLE_CUDA] = b;
}

const dle_backend *dle_backend_get(dle_device_type type) {
  if ((unsigned)type >= DLE_NUM_DEVICE_TYPES) return NULL;
  if (type == DLE_CPU && !backends[DLE_CPU]) backends[DLE_CPU] = dle_cpu_backend();
  if (type == DLE_CUDA && !backends[DLE_CUDA] && !cuda_tried) load_cuda();
  return backends[type];
}

const char *dle_backend_unavailable_reason(dle_device_type type) {
  return unavailable[type][0] ? unavailable[type] : "backend not available";
}

/* Threads: OpenMP kernels and OpenBLAS share the same count so they never oversubscribe. */
static int num_threads;

void dle_set_num_threads(int n) {
  /* OpenMP crashes when it cannot create the threads asked for (100000 segfaulted on Linux) */
  if (n > DLE_MAX_THREADS) n = DLE_MAX_THREADS;
#ifdef _OPENMP
  if (n < 1) n = omp_get_num_procs();
  omp_set_num_threads(n);
#else
  if (n < 1) n = 1;
#endif
  num_threads = n;
  openblas_set_num_threads(n);
}

int dle_get_num_threads(void) {
#ifdef _OPENMP
  return num_threads ? num_threads : omp_get_max_threads();
#else
  return num_threads ? num_threads : 1;
#endif
}

double dle_time(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
