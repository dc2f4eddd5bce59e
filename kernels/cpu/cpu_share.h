/* cpu_share.h — work sharing in which the calling thread never waits for a helper that has not
 * started (cpu_share.c).
 *
 * Why not an OpenMP parallel for: its end barrier makes the caller wait until every worker has
 * been woken and has run. On a 2-core VM shared with other processes (or when OpenBLAS's threads
 * hold the other core) that wake-up costs 10-130 us, a whole scheduler time slice when the other
 * core is busy, and a region of a few hundred us then takes longer on 2 threads than on 1. Here
 * the items are taken one at a time by whoever comes first; the caller waits only for items a
 * helper has already taken, so a helper that arrives late only misses the work, and a share
 * costs at worst about what running the items on the caller alone would. */
#ifndef DLE_CPU_SHARE_H
#define DLE_CPU_SHARE_H

#include <stdbool.h>
#include <stdint.h>

typedef void (*cpu_share_fn)(void *ctx, int64_t item);

/* Runs fn(ctx, i) for every i in [0, n) on the calling thread and up to nthreads - 1 helper
 * threads (started on first use, then sleeping between shares after a short spin). Returns when
 * all items are done. Runs the items serially on the caller when nthreads < 2 or n < 2, when n is
 * above CPU_SHARE_MAX_ITEMS, or when a share is already running (a nested call, or another thread). */
#define CPU_SHARE_MAX_ITEMS 65535
#define CPU_SHARE_MAX_HELPERS 63
void cpu_share(int64_t n, int nthreads, cpu_share_fn fn, void *ctx);

/* Whether sharing has paid lately: false when the helpers took less than a fifth of the items of
 * recent shares (their cores busy with other processes, so the caller did nearly everything and
 * only paid for cutting the work up), except on every 8th call, which shares anyway to see
 * whether they are back. A caller with a cheaper one-thread way to do the whole work (one BLAS
 * call instead of panels) takes it when this is false. */
bool cpu_share_pays(void);

/* Helper threads started so far (for tests). */
int cpu_share_helpers(void);

#endif
