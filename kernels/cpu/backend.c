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

static dle_backend cpu = {.name = "cpu",
                          .alloc = cpu_alloc,
                          .free = cpu_free,
                          .to_host = cpu_memcpy,
                          .from_host = cpu_memcpy};

const dle_backend *dle_cpu_backend(void) {
  static bool ready;
  if (!ready) {
#define DLE_FAMILY(name, grad, cpu_part, cuda, lua) cpu_part(cpu_register_##name(&cpu);)
#include "../../engine/ops/families.def"
    ready = true;
  }
  return &cpu;
}
