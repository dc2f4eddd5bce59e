/* cpu_spin_pool.h — a small pool of worker threads for runs of many short parallel loops in a row
 * (the matrix-vector products of token-by-token decoding), whose workers keep polling for the next
 * loop for a moment after each one instead of going to sleep at once.
 *
 * Why not OpenMP: dle runs libgomp with the passive wait policy (workers sleep at the end of every
 * parallel region, so that training steps do not lose cores to spinning threads). A decoded token
 * runs some 170 small products back to back, and waking a sleeping worker for each costs more
 * than the second thread saves. This pool polls (yielding the core to any other runnable thread
 * on each poll) for DLE_SPIN_POOL_POLL_NS after a loop and then sleeps, so only such runs pay for
 * the polling, and a loop's results do not depend on how it was split: every part is computed by
 * the same code, whichever thread runs it. */
#ifndef DLE_CPU_SPIN_POOL_H
#define DLE_CPU_SPIN_POOL_H

#include <stdint.h>

/* One part of a loop: fn(ctx, part, parts) handles part `part` of `parts` (0-based). */
typedef void (*cpu_spin_pool_fn)(void *ctx, int part, int parts);

/* Runs fn(ctx, p, parts) for p = 0 .. parts-1, part 0 on the calling thread and the others on the
 * pool's workers, and returns when all are done. Runs every part on the calling thread when parts
 * is 1, when called from inside an OpenMP region or another pool run (nested), when the pool is in
 * use by another thread, or when threads cannot be started. */
void cpu_spin_pool_run(int parts, cpu_spin_pool_fn fn, void *ctx);

/* The range [*lo, *hi) of part `part` of `parts` equal shares of n items (the first n % parts
 * parts get one more). */
static inline void cpu_spin_pool_share(int64_t n, int part, int parts, int64_t *lo, int64_t *hi) {
  int64_t q = n / parts, r = n % parts;
  *lo = part * q + (part < r ? part : r);
  *hi = *lo + q + (part < r);
}

#endif
