/* backend.cu — the CUDA backend's entry points and its device memory.
 *
 * dle_cuda_backend_table(host) fills the kernel table without touching a device (which ops have
 * CUDA kernels can be asked anywhere); dle_cuda_backend_init(host, why, n) also checks that a
 * device exists and returns NULL with the reason otherwise. Every CUDA call is checked and turns
 * into a dle error status; nothing here aborts.
 *
 * Memory: cudaMallocAsync/cudaFreeAsync on each device's legacy default stream, where every
 * kernel of this library runs, so a freed block is reused in stream order without a sync. The
 * device's default memory pool keeps freed memory (release threshold raised to the maximum), the
 * CUDA counterpart of the CPU allocator's size-class cache (engine/alloc.c). A device without
 * memory pools falls back to cudaMalloc/cudaFree. */
#include <pthread.h>
#include <stdio.h>

#include "common.cuh"

#define CU_MAX_DEVICES 64

dle_status cu_fail(const char *fn, const char *what, cudaError_t e) {
  cudaGetLastError(); /* clears a non-sticky error so the next call starts clean */
  return cu_error("%s: CUDA error in %s: %s (%s)", fn, what, cudaGetErrorName(e),
                  cudaGetErrorString(e));
}

/* Per device: whether it was set up, and whether it has stream-ordered memory pools. */
static struct { bool ready, pools; } devices[CU_MAX_DEVICES];
/* pthread rather than std::mutex: nothing in this library may throw across the C boundary */
static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;

/* Makes device i current, setting it up on first use. */
static cudaError_t select_device(int i) {
  if (i < 0 || i >= CU_MAX_DEVICES) return cudaErrorInvalidDevice;
  cudaError_t e = cudaSetDevice(i);
  if (e != cudaSuccess) return e;
  pthread_mutex_lock(&devices_lock);
  if (!devices[i].ready) {
    int pools = 0;
    e = cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, i);
    if (e == cudaSuccess && pools) {
      cudaMemPool_t pool;
      uint64_t keep = UINT64_MAX;
      e = cudaDeviceGetDefaultMemPool(&pool, i);
      if (e == cudaSuccess)
        e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    devices[i].pools = pools != 0;
    devices[i].ready = e == cudaSuccess;
  }
  pthread_mutex_unlock(&devices_lock);
  return e;
}

static bool has_pools(void) {
  int i = 0;
  if (cudaGetDevice(&i) != cudaSuccess || i < 0 || i >= CU_MAX_DEVICES) return false;
  pthread_mutex_lock(&devices_lock);
  bool pools = devices[i].pools;
  pthread_mutex_unlock(&devices_lock);
  return pools;
}

dle_status cu_use_device(const char *fn, const dle_tensor *t) {
  int i = t->storage->device.index;
  cudaError_t e = select_device(i);
  if (e != cudaSuccess)
    return cu_error("%s: cannot use CUDA device %d: %s", fn, i, cudaGetErrorString(e));
  return DLE_OK;
}

static cudaError_t device_alloc(void **p, size_t nbytes) {
  if (nbytes == 0) nbytes = 1; /* the engine takes NULL for a failure */
  return has_pools() ? cudaMallocAsync(p, nbytes, 0) : cudaMalloc(p, nbytes);
}

static void device_free(void *p) {
  if (p) (void)(has_pools() ? cudaFreeAsync(p, 0) : cudaFree(p));
}

dle_status cu_scratch(const char *fn, void **p, size_t nbytes) {
  *p = NULL;
  cudaError_t e = device_alloc(p, nbytes);
  if (e != cudaSuccess) {
    *p = NULL;
    return cu_fail(fn, "allocating scratch memory", e);
  }
  return DLE_OK;
}

void cu_scratch_free(void *p) { device_free(p); }

dle_status cu_read(const char *fn, void *host, const void *dev, size_t n) {
  CU_TRY(fn, cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost));
  return DLE_OK;
}

/* ---------------------------------------------------------------- the table's memory functions */

static void *cuda_alloc(size_t nbytes, int device_index) {
  void *p = NULL;
  if (select_device(device_index) != cudaSuccess || device_alloc(&p, nbytes) != cudaSuccess) {
    cudaGetLastError();
    return NULL;
  }
  return p;
}

static void cuda_free(void *p, size_t nbytes, int device_index) {
  (void)nbytes;
  if (select_device(device_index) == cudaSuccess) device_free(p);
  cudaGetLastError(); /* nobody to report it to: do not let it surface in the next op */
}

/* Synchronous copies: the legacy default stream orders them after every kernel queued before. */
static dle_status cuda_copy(const char *fn, void *dst, const void *src, size_t nbytes,
                            int device_index, cudaMemcpyKind kind) {
  if (nbytes == 0) return DLE_OK;
  cudaError_t e = select_device(device_index);
  if (e != cudaSuccess) return cu_fail(fn, "cudaSetDevice", e);
  CU_TRY(fn, cudaMemcpy(dst, src, nbytes, kind));
  return DLE_OK;
}

static dle_status cuda_to_host(void *dst, const void *src, size_t nbytes, int device_index) {
  return cuda_copy("to(cpu)", dst, src, nbytes, device_index, cudaMemcpyDeviceToHost);
}

static dle_status cuda_from_host(void *dst, const void *src, size_t nbytes, int device_index) {
  return cuda_copy("to(cuda)", dst, src, nbytes, device_index, cudaMemcpyHostToDevice);
}

/* ---------------------------------------------------------------- entry points */

static dle_backend cuda = {"cuda", cuda_alloc, cuda_free, cuda_to_host, cuda_from_host, {}, NULL};

static const dle_backend *table(const dle_backend_host *host) {
  if (!host || host->abi != DLE_BACKEND_ABI || host->num_ops != DLE_NUM_OPS) return NULL;
  cu_host = host;
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, [] {
#define DLE_FAMILY(name, grad, cpu, cuda_part, lua) cuda_part(cu_register_##name(&cuda);)
#include "../../engine/ops/families.def"
    cu_register_fp8(&cuda); /* no op of the table: dle_fp8_scaled_matmul's hook */
  });
  return &cuda;
}

extern "C" const dle_backend *dle_cuda_backend_table(const dle_backend_host *host) {
  return table(host);
}

extern "C" const dle_backend *dle_cuda_backend_init(const dle_backend_host *host, char *why,
                                                    size_t n) {
  if (!table(host)) {
    snprintf(why, n,
             "libdle_cuda.so was built for another engine (backend ABI %d with %d ops; the "
             "engine has ABI %d with %d ops): rebuild it",
             DLE_BACKEND_ABI, DLE_NUM_OPS, host ? host->abi : -1,
             host && host->abi == DLE_BACKEND_ABI ? host->num_ops : -1);
    return NULL;
  }
  int count = 0; /* without a driver the call fails and leaves count untouched */
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count <= 0) {
    if (e != cudaSuccess)
      snprintf(why, n, "no CUDA device (cudaGetDeviceCount: error %d, %s: %s)", (int)e,
               cudaGetErrorName(e), cudaGetErrorString(e));
    else
      snprintf(why, n, "no CUDA device (cudaGetDeviceCount found 0 devices)");
    cudaGetLastError();
    return NULL;
  }
  return &cuda;
}
