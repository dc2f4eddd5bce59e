/* test_cuda.c — the CUDA backend library (libdle_cuda.so) as the engine sees it: it loads with
 * RTLD_NOW | RTLD_LOCAL (no engine symbol left unresolved), exports its two entry points, builds
 * its kernel table without a device, and its init either returns the backend (a GPU is there) or
 * NULL with the reason (no CUDA device), refusing an engine of another ABI. Skipped when the build
 * found no nvcc (DLE_CUDA_BUILT undefined). */
#define _GNU_SOURCE 1
#include "testutil.h"

#include "../../engine/internal.h" /* dle_cpu_backend */

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef const dle_backend *(*table_fn)(const dle_backend_host *);
typedef const dle_backend *(*init_fn)(const dle_backend_host *, char *, size_t);

/* build/bin/test_engine -> build/lib/dle/libdle_cuda.so */
static void library_path(char *buf, size_t n) {
  char exe[PATH_MAX] = "";
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[len > 0 ? len : 0] = 0;
  snprintf(buf, n, "%s/../lib/dle/libdle_cuda.so", dirname(exe));
}

static void *open_library(void) {
#ifndef DLE_CUDA_BUILT
  SKIP("nvcc was not found at build time: no CUDA library to test");
#endif
  char path[PATH_MAX + 64];
  library_path(path, sizeof path);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h != NULL, "dlopen(%s): %s", path, dlerror());
  return h;
}

static const dle_backend_host host = {DLE_BACKEND_ABI, DLE_NUM_OPS, dle_op_table, dle_error};

TEST(cuda_library_loads_and_exports_its_entry_points) {
  void *h = open_library();
  CHECK(dlsym(h, "dle_cuda_backend_init") != NULL, "no dle_cuda_backend_init");
  CHECK(dlsym(h, "dle_cuda_backend_table") != NULL, "no dle_cuda_backend_table");
  CHECK(dlsym(h, "dle_error") == NULL, "the library defines or exports an engine symbol");
}

TEST(cuda_kernel_table_is_built_without_a_device) {
  void *h = open_library();
  table_fn table = (table_fn)dlsym(h, "dle_cuda_backend_table");
  REQUIRE(table != NULL, "no dle_cuda_backend_table");
  const dle_backend *b = table(&host);
  REQUIRE(b != NULL, "the table was refused");
  CHECK(strcmp(b->name, "cuda") == 0, "backend named %s", b->name);
  CHECK(b->alloc && b->free && b->to_host && b->from_host, "memory functions missing");
  static const dle_op must[] = {DLE_OP_COPY,   DLE_OP_FULL,       DLE_OP_ADD,
                                DLE_OP_EXP,    DLE_OP_EQ,         DLE_OP_WHERE,
                                DLE_OP_SUM,    DLE_OP_ARGMAX,     DLE_OP_SOFTMAX,
                                DLE_OP_MATMUL, DLE_OP_LAYER_NORM, DLE_OP_CROSS_ENTROPY_BACKWARD,
                                DLE_OP_RANDN};
  for (size_t i = 0; i < sizeof must / sizeof *must; i++)
    CHECK(b->kernels[must[i]] != NULL, "no CUDA kernel for %s", dle_op_get_info(must[i])->name);
  const dle_backend *cpu = dle_cpu_backend();
  for (int op = 0; op < DLE_NUM_OPS; op++)
    CHECK(!b->kernels[op] || cpu->kernels[op], "%s has a CUDA kernel but no CPU reference",
          dle_op_get_info(op)->name);
  CHECK(b->kernels[DLE_OP_VIEW] == NULL, "a view op has a kernel");
  CHECK(b->optim && b->optim->sgd && b->optim->adagrad && b->optim->rmsprop && b->optim->adam,
        "fused optimizer steps missing");
}

TEST(cuda_init_reports_no_device_or_returns_the_backend) {
  void *h = open_library();
  init_fn init = (init_fn)dlsym(h, "dle_cuda_backend_init");
  REQUIRE(init != NULL, "no dle_cuda_backend_init");
  char why[256] = "";
  const dle_backend *b = init(&host, why, sizeof why);
  if (b) {
    CHECK(strcmp(b->name, "cuda") == 0, "backend named %s", b->name);
    SKIP("a CUDA device is present: the no-device path cannot be checked here");
  }
  CHECK(strstr(why, "no CUDA device") != NULL && strstr(why, "cudaGetDeviceCount") != NULL,
        "reason \"%s\"", why);
}

TEST(cuda_init_refuses_an_engine_of_another_abi) {
  void *h = open_library();
  init_fn init = (init_fn)dlsym(h, "dle_cuda_backend_init");
  table_fn table = (table_fn)dlsym(h, "dle_cuda_backend_table");
  REQUIRE(init && table, "entry points missing");
  dle_backend_host other = host;
  other.num_ops = DLE_NUM_OPS + 1;
  char why[256] = "";
  CHECK(init(&other, why, sizeof why) == NULL, "a host with another op count was accepted");
  CHECK(strstr(why, "another engine") != NULL, "reason \"%s\"", why);
  other = host;
  other.abi = DLE_BACKEND_ABI + 1;
  CHECK(table(&other) == NULL, "a host of another ABI was accepted");
  CHECK(init(NULL, why, sizeof why) == NULL, "a NULL host was accepted");
}

TEST(the_engine_lists_the_cpu_kernels_and_names_a_missing_cuda_library) {
  const char *why = NULL;
  CHECK(dle_backend_library_table(DLE_CPU, &why) == dle_cpu_backend(), "CPU table");
  /* test_engine lives in bin/, where the engine does not look for the library */
  const dle_backend *b = dle_backend_library_table(DLE_CUDA, &why);
  CHECK(b || (why && strstr(why, "libdle_cuda.so")), "reason \"%s\"", why ? why : "(null)");
}

TEST(full_on_fills_on_the_given_device_or_says_why_it_cannot) {
  dle_tensor *t = NULL, *c = NULL;
  MAKE(t, dle_full_on(&t, SIZES(2, 3), 7, DLE_F64, DLE_DEVICE_CPU));
  CHECK(t->ndim == 2 && t->sizes[1] == 3 && t->dtype == DLE_F64, "shape or dtype");
  CHECK(dle_tensor_get(t, (int64_t[]){1, 2}) == 7, "value %g",
        dle_tensor_get(t, (int64_t[]){1, 2}));
  if (dle_backend_get(DLE_CUDA)) SKIP("a CUDA backend is loaded");
  CHECK_ERR(dle_full_on(&c, SIZES(2), 1, DLE_F32, (dle_device){DLE_CUDA, 0}),
            "CUDA backend not available");
  CHECK(c == NULL, "output set on error");
}
