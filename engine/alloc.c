/* alloc.c — CPU memory for storages: 64-byte aligned blocks from a size-bucketed cache.
 *
 * Training loops free and reallocate the same sizes every step. Going to malloc each time costs
 * twice: glibc serves large blocks with fresh mmaps, so every step page-faults its whole working set
 * again (a large part of a large add's time), and small blocks churn its free lists. Freed
 * blocks therefore go to a free list per size class and are reused; the cache holds at most
 * `cache_limit` bytes (dle_set_cache_limit, dle_empty_cache). Live bytes are counted separately so
 * the Lua side can pace its garbage collector on what tensors really hold. */
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

/* Size classes: multiples of 64 bytes up to 1 KiB, then 4 classes per power of two (at most 25%
 * rounding waste). Class 0 is unused. */
#define SMALL_LIMIT 1024
#define NUM_CLASSES (SMALL_LIMIT / 64 + 4 * 64)

typedef struct block {
  struct block *next;
} block;

/* A spinlock: the critical sections are a few instructions and contention is rare. */
static atomic_flag busy = ATOMIC_FLAG_INIT;
static void lock(void) {
  while (atomic_flag_test_and_set_explicit(&busy, memory_order_acquire)) {}
}
static void unlock(void) { atomic_flag_clear_explicit(&busy, memory_order_release); }
static block *free_lists[NUM_CLASSES];
static size_t cached_bytes;
static size_t cache_limit = (size_t)1 << 30;
/* Live and peak bytes, changed under the lock (one lock round trip per call, no extra atomic
 * read-modify-writes: those cost more than the rest of a small allocation), read without it. */
static size_t allocated, peak;
/* dle_set_memory_limit: the most live bytes allowed (0: no limit). */
static size_t memory_limit;

/* Class index and rounded size for a request of n bytes. */
static int size_class(size_t n, size_t *rounded) {
  if (n <= SMALL_LIMIT) {
    size_t k = n ? (n + 63) / 64 : 1;
    *rounded = k * 64;
    return (int)k;
  }
  int p = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^p < n <= 2^(p+1) */
  size_t base = (size_t)1 << p, step = base / 4;
  size_t q = (n - base + step - 1) / step; /* 1..4 */
  *rounded = base + q * step;
  return SMALL_LIMIT / 64 + (p - 10) * 4 + (int)q;
}

/* Rounded size of the blocks in class c (the inverse of size_class). */
static size_t class_size(int c) {
  if (c <= SMALL_LIMIT / 64) return (size_t)c * 64;
  int i = c - SMALL_LIMIT / 64 - 1, p = 10 + i / 4, q = i % 4 + 1;
  size_t base = (size_t)1 << p;
  return base + (size_t)q * (base / 4);
}

/* Under the lock. */
static void count_alloc(size_t nbytes) {
  size_t now = allocated + nbytes;
  __atomic_store_n(&allocated, now, __ATOMIC_RELAXED);
  if (now > peak) __atomic_store_n(&peak, now, __ATOMIC_RELAXED);
}

/* More than any 64-bit CPU's user address space (2^48 bytes): refused up front, so such a request
 * fails the same way everywhere (sanitizer allocators abort on it instead of returning NULL). */
#define MAX_ALLOC ((size_t)1 << 48)

/* Blocks of 8 MiB and more (their size classes are whole multiples of 2 MiB) are 2 MiB aligned
 * and offered to the kernel as transparent huge pages: strided and transposed walks over large
 * tensors touch a new 4 KiB page every few elements, and TLB misses, costly under virtualisation,
 * then dominate (a transposed 4096 x 4096 copy measured faster with them). */
#define HUGE_BLOCK ((size_t)8 << 20)
static void *block_alloc(size_t rounded) {
  if (rounded < HUGE_BLOCK || rounded % (2 << 20)) return aligned_alloc(64, rounded);
  void *p = aligned_alloc((size_t)2 << 20, rounded);
#ifdef MADV_HUGEPAGE
  if (p) madvise(p, rounded, MADV_HUGEPAGE); /* advice only: failure changes nothing */
#endif
  return p;
}

void *dle_cpu_alloc(size_t nbytes) {
  if (nbytes > MAX_ALLOC) return NULL;
  size_t rounded;
  int c = size_class(nbytes, &rounded);
  void *p = NULL;
  if (memory_limit) {
    lock();
    bool over = allocated + nbytes > memory_limit;
    unlock();
    /* the cache is not counted as in use, but a program hitting its limit wants the memory back */
    if (over) dle_empty_cache();
    if (over) return NULL;
  }
  lock();
  block *b = c < NUM_CLASSES ? free_lists[c] : NULL;
  if (b) {
    free_lists[c] = b->next;
    cached_bytes -= rounded;
    p = b;
    count_alloc(nbytes);
  }
  unlock();
  if (!p && (p = block_alloc(rounded))) {
    lock();
    count_alloc(nbytes);
    unlock();
  }
  if (dle_debug_level() >= 3)
    fprintf(stderr, "[dle] alloc %zu bytes (class %zu) -> %p, live %zu\n", nbytes, rounded, p,
            dle_memory_allocated());
  return p;
}

/* Under the lock: takes cached blocks of classes other than `keep_class`, largest first, off their
 * free lists until `need` more bytes fit under the limit, and returns them chained for freeing
 * outside the lock. Without this a cache filled by one phase's sizes (say 64 MB blocks) would turn
 * every block of the next phase's sizes away, and each step would page-fault fresh memory again. */
static block *evict_for(size_t need, int keep_class) {
  block *out = NULL;
  for (int c = NUM_CLASSES - 1; c > 0 && cached_bytes + need > cache_limit; c--) {
    if (c == keep_class || !free_lists[c]) continue; /* (classes past 2^48 bytes never hold any) */
    size_t csize = class_size(c);
    while (free_lists[c] && cached_bytes + need > cache_limit) {
      block *b = free_lists[c];
      free_lists[c] = b->next;
      cached_bytes -= csize;
      b->next = out;
      out = b;
    }
  }
  return out;
}

void dle_cpu_free(void *p, size_t nbytes) {
  if (!p) return;
  size_t rounded;
  int c = size_class(nbytes, &rounded);
  block *evicted = NULL;
  lock();
  __atomic_store_n(&allocated, allocated - nbytes, __ATOMIC_RELAXED);
  bool keep = c < NUM_CLASSES && rounded <= cache_limit;
  if (keep && cached_bytes + rounded > cache_limit) evicted = evict_for(rounded, c);
  keep = keep && cached_bytes + rounded <= cache_limit;
  if (keep) {
    block *b = p;
    b->next = free_lists[c];
    free_lists[c] = b;
    cached_bytes += rounded;
  }
  unlock();
  if (!keep) free(p);
  while (evicted) {
    block *next = evicted->next;
    free(evicted);
    evicted = next;
  }
}

void dle_empty_cache(void) {
  lock();
  for (int c = 0; c < NUM_CLASSES; c++) {
    while (free_lists[c]) {
      block *b = free_lists[c];
      free_lists[c] = b->next;
      free(b);
    }
  }
  cached_bytes = 0;
  unlock();
}

void dle_set_cache_limit(size_t nbytes) {
  lock();
  cache_limit = nbytes;
  unlock();
  if (cached_bytes > nbytes) dle_empty_cache();
}

void dle_set_memory_limit(size_t nbytes) {
  lock();
  memory_limit = nbytes;
  unlock();
}
size_t dle_memory_limit(void) { return __atomic_load_n(&memory_limit, __ATOMIC_RELAXED); }
bool dle_memory_over_limit(size_t nbytes) {
  size_t limit = dle_memory_limit();
  return limit && dle_memory_allocated() + nbytes > limit;
}

size_t dle_memory_allocated(void) { return __atomic_load_n(&allocated, __ATOMIC_RELAXED); }
size_t dle_memory_peak(void) { return __atomic_load_n(&peak, __ATOMIC_RELAXED); }
void dle_memory_reset_peak(void) {
  lock();
  peak = allocated;
  unlock();
}
size_t dle_memory_cached(void) {
  lock();
  size_t n = cached_bytes;
  unlock();
  return n;
}
