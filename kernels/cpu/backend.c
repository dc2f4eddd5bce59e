/* backend.c — the CPU backend's function table. */
#include "backend.h"

#include "../../engine/internal.h"

static void *cpu_alloc(size_t nbytes, int device_index) {
  (void)device_index;
  return dle_cpu_alloc(nbytes);
}

static void cpu_free(void *p, size_t nbytes, int device_index) {
  (void)device_index;
  dle_cpu_free(p, nbytes);
}

static dle_status cpu_memcpy(void *dst, const void *src, size_t nbytes, int device_index) {
  (void)device_index;
  memcpy(dst, src, nbytes);
  return DLE_OK;
}

static dle_backend cpu = {.name = "cpu", .alloc = cpu_alloc, .free = cpu_free,
                          .to_host = cpu_memcpy, .from_host = cpu_memcpy};

const dle_backend *dle_cpu_backend(void) {
  static bool ready;
  if (!ready) {
    cpu_register_copy(&cpu);
    cpu_register_elementwise(&cpu);
    cpu_register_random(&cpu);
    cpu_register_reduce(&cpu);
    cpu_register_softmax(&cpu);
    cpu_register_matmul(&cpu);
    cpu_register_index(&cpu);
    cpu_register_conv(&cpu);
    cpu_register_norm(&cpu);
    cpu_register_nn(&cpu);
    cpu_register_losses(&cpu);
    cpu_register_attention(&cpu);
    cpu_register_pool(&cpu);
    cpu_register_optim(&cpu);
    cpu_register_fused(&cpu);
    ready = true;
  }
  return &cpu;
}
