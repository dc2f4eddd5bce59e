/* alloc.c — CPU memory for storages: 64-byte aligned, counted so the Lua side can pace its GC. */
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>

static atomic_size_t allocated, peak;

void *dle_cpu_alloc(size_t nbytes) {
  size_t rounded = (nbytes + 63) & ~(size_t)63;     /* aligned_alloc wants a multiple */
  void *p = aligned_alloc(64, rounded ? rounded : 64);
  if (!p) return NULL;
  size_t now = atomic_fetch_add(&allocated, nbytes) + nbytes;
  size_t old = atomic_load(&peak);
  while (now > old && !atomic_compare_exchange_weak(&peak, &old, now)) {}
  return p;
}

void dle_cpu_free(void *p, size_t nbytes) {
  if (!p) return;
  atomic_fetch_sub(&allocated, nbytes);
  free(p);
}

size_t dle_memory_allocated(void) { return atomic_load(&allocated); }
size_t dle_memory_peak(void) { return atomic_load(&peak); }
