/* backend.c — the per-device kernel tables, threads and the clock.
 * CPU is linked in; CUDA lives in a separate shared library (libdle_cuda.so, next to the core
 * module, kernels/cuda/) loaded on first use, so CPU users never pay for cuBLAS at require time.
 * That library sees no engine symbol (we are loaded RTLD_LOCAL): it gets what it needs through
 * the dle_backend_host table below. */
#define _GNU_SOURCE 1 /* dladdr */
#include <dlfcn.h>

#include "internal.h"

#include <time.h>
#include <unistd.h> /* access */
#ifdef _OPENMP
#include <omp.h>
#endif
#include <cblas.h>

static const dle_backend *backends[DLE_NUM_DEVICE_TYPES];
static char unavailable[DLE_NUM_DEVICE_TYPES][256];
static bool cuda_tried;

void dle_backend_register(dle_device_type type, const dle_backend *b) { backends[type] = b; }

#define CUDA_MISSING \
  "CUDA backend not available: libdle_cuda.so was not built or could not be loaded"

/* The engine functions a backend library may call (dle.h: dle_backend_host). */
static const dle_backend_host host = {DLE_BACKEND_ABI, DLE_NUM_OPS, dle_op_table, dle_error};

/* libdle_cuda.so, looked for beside this library, then on the loader path; NULL when absent.
 * dlopen's own message goes to `why` (a missing cudart, an unresolved symbol). Opened once and
 * never closed: its kernels stay registered for the life of the process. */
static void *cuda_library(char *why, size_t n) {
  static void *h;
  static bool tried;
  static char err[200];
  if (!tried) {
    tried = true;
    Dl_info self;
    char path[4096] = "libdle_cuda.so";
    if (dladdr((void *)cuda_library, &self) && self.dli_fname) {
      const char *slash = strrchr(self.dli_fname, '/');
      if (slash)
        snprintf(path, sizeof path, "%.*s/libdle_cuda.so", (int)(slash - self.dli_fname),
                 self.dli_fname);
    }
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const char *e = h ? NULL : dlerror();
    if (!h) h = dlopen("libdle_cuda.so", RTLD_NOW | RTLD_LOCAL);
    /* the first attempt's reason: the second only says it is not on the path */
    if (!h && e && access(path, F_OK) == 0) snprintf(err, sizeof err, " (%s)", e);
  }
  if (!h) snprintf(why, n, "%s%s", CUDA_MISSING, err);
  return h;
}

/* The library's dle_cuda_backend_init(host, why, n): the backend, or NULL with the reason (e.g.
 * no device), which is kept prefixed so every message says the backend is not available. */
static void load_cuda(void) {
  cuda_tried = true;
  char *why = unavailable[DLE_CUDA];
  size_t n = sizeof unavailable[DLE_CUDA];
  void *h = cuda_library(why, n);
  if (!h) return;
  typedef const dle_backend *(*init_fn)(const dle_backend_host *, char *, size_t);
  init_fn init = (init_fn)dlsym(h, "dle_cuda_backend_init");
  if (!init) {
    snprintf(why, n, "%s (no dle_cuda_backend_init in it)", CUDA_MISSING);
    return;
  }
  char reason[200] = "unknown reason";
  const dle_backend *b = init(&host, reason, sizeof reason);
  if (b)
    backends[DLE_CUDA] = b;
  else
    snprintf(why, n, "CUDA backend not available: %s", reason);
}

const dle_backend *dle_backend_library_table(dle_device_type type, const char **why) {
  static char reason[256];
  *why = "backend not available";
  if (type == DLE_CPU) return dle_cpu_backend();
  if (type != DLE_CUDA) return NULL;
  void *h = cuda_library(reason, sizeof reason);
  *why = reason;
  if (!h) return NULL;
  typedef const dle_backend *(*table_fn)(const dle_backend_host *);
  table_fn table = (table_fn)dlsym(h, "dle_cuda_backend_table");
  const dle_backend *b = table ? table(&host) : NULL;
  if (!b)
    snprintf(reason, sizeof reason, "%s (no usable dle_cuda_backend_table in it)", CUDA_MISSING);
  return b;
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

bool dle_backend_has_kernel(const dle_backend *b, dle_op op) {
  return b && (unsigned)op < DLE_NUM_OPS && b->kernels[op] != NULL;
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

/* the defaults; kernels/cpu/cpu_conv_winograd.c says why 160 tiles (WINO_MIN_TILES), cpu_spin_pool.h
 * why polling */
#define TUNING_DEFAULTS                                                       \
  {                                                                           \
    [DLE_TUNE_WINOGRAD_MIN_TILES] = 160, [DLE_TUNE_SPIN_POOL_POLL_US] = 1000, \
    [DLE_TUNE_CONV1D_DIRECT] = 1                                              \
  }
static const int64_t tuning_default[DLE_NUM_TUNINGS] = TUNING_DEFAULTS;
static int64_t tuning[DLE_NUM_TUNINGS] = TUNING_DEFAULTS;

int64_t dle_tuning_get(dle_tuning knob) {
  return knob >= 0 && knob < DLE_NUM_TUNINGS ? tuning[knob] : 0;
}

int64_t dle_tuning_set(dle_tuning knob, int64_t value) {
  if (knob < 0 || knob >= DLE_NUM_TUNINGS) return 0;
  int64_t old = tuning[knob];
  tuning[knob] = value < 0 ? tuning_default[knob] : value;
  return old;
}

double dle_time(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
