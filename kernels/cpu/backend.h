/* backend.h — how the CPU backend is assembled: each kernel family file registers its kernels. */
#ifndef DLE_CPU_BACKEND_H
#define DLE_CPU_BACKEND_H

#include "../../engine/kernel/backend.h"

/* cpu_register_<family> (kernels/cpu/<family>.c) for each family with CPU kernels in
 * engine/ops/families.def; the backend calls them in that order. */
#define DLE_FAMILY(name, grad, cpu, cuda, lua) cpu(void cpu_register_##name(dle_backend *b);)
#include "../../engine/ops/families.def"

/* Registers kernel k for each op listed (DLE_OP_ ids). */
#define CPU_REGISTER(b, k, ...)                             \
  cpu_register_ops((b), (k), (const dle_op[]){__VA_ARGS__}, \
                   (int)(sizeof((const dle_op[]){__VA_ARGS__}) / sizeof(dle_op)))
static inline void cpu_register_ops(dle_backend *b, dle_kernel_fn k, const dle_op *ops, int n) {
  for (int i = 0; i < n; i++) b->kernels[ops[i]] = k;
}

/* The end of a family's kernel: the case of dtype dt among TYPES (CASE(ID, ...) returns), or an
 * error naming fn and the dtype. */
#define CPU_DTYPE_SWITCH(fn, dt, TYPES, CASE) \
  switch (dt) {                               \
    TYPES(CASE)                               \
    default: break;                           \
  }                                           \
  return dle_error("%s: no CPU kernel for %s", fn, dle_dtype_name(dt))

#endif
