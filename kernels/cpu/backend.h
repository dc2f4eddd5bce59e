/* backend.h — how the CPU backend is assembled: each kernel family file registers its kernels. */
#ifndef DLE_CPU_BACKEND_H
#define DLE_CPU_BACKEND_H

#include "../../engine/kernel/backend.h"

/* cpu_register_<family> (kernels/cpu/<family>.c) for each family with CPU kernels in
 * engine/ops/families.def; the backend calls them in that order. */
#define DLE_FAMILY(name, grad, cpu, cuda) cpu(void cpu_register_##name(dle_backend *b);)
#include "../../engine/ops/families.def"

#endif
