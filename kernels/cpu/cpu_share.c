/* cpu_share.c — cpu_share (see cpu_share.h): one share at a time, described by a job record and
 * one 64-bit state word {epoch:32, next:16, n:16}. The caller writes the job, then publishes a new
 * epoch in the state word; everyone takes item `next` by a compare-and-swap on the word. A helper
 * reads the job before its swap and the swap validates it: the job is rewritten only after all of
 * its epoch's items were taken, and then the word has moved on, so a swap on a stale word fails. */
#include "cpu_share.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* A helper polls this long for the next share before it sleeps: a training step's shares follow
 * each other within tens of us, and waking a sleeping thread costs about as much again. It polls
 * with sched_yield, so on a busy machine whatever else wants its core runs instead. */
#define SPIN_NS 50000

/* The current share (relaxed atomics: the swap on `state` orders and validates them). */
static _Atomic(cpu_share_fn) job_fn;
static _Atomic(void *) job_ctx;
static _Atomic int job_helpers; /* how many helpers may take items of this share */

static _Atomic uint64_t state;     /* {epoch, next, n} */
static _Atomic int64_t done;       /* items of the current share finished */
static atomic_flag running = ATOMIC_FLAG_INIT;
static _Atomic int sleepers;
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int started;                /* helpers created (only the caller holding `running` writes) */
static _Atomic int helped_pct = 50; /* helpers' share of recent shares' items, percent (an average) */
static _Atomic unsigned pays_calls;

static uint32_t epoch_of(uint64_t w) { return (uint32_t)(w >> 32); }
static int64_t next_of(uint64_t w) { return (int64_t)(w >> 16 & 0xffff); }
static int64_t n_of(uint64_t w) { return (int64_t)(w & 0xffff); }

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Takes and runs items of epoch e until none is left; returns how many this thread ran. */
static int64_t take_items(uint32_t e, int helper_id) {
  int64_t ran = 0;
  for (;;) {
    uint64_t w = atomic_load(&state);
    if (epoch_of(w) != e || next_of(w) >= n_of(w)) return ran;
    cpu_share_fn fn = atomic_load_explicit(&job_fn, memory_order_relaxed);
    void *ctx = atomic_load_explicit(&job_ctx, memory_order_relaxed);
    if (helper_id >= atomic_load_explicit(&job_helpers, memory_order_relaxed)) return ran;
    if (!atomic_compare_exchange_weak(&state, &w, w + (1u << 16))) continue;
    fn(ctx, next_of(w));
    ran++;
    if (helper_id >= 0) atomic_fetch_add(&done, 1);
  }
}

static void *helper_main(void *arg) {
  int id = (int)(intptr_t)arg;
  uint32_t seen = epoch_of(atomic_load(&state));
  for (;;) {
    uint64_t t0 = now_ns();
    int spins = 0;
    while (epoch_of(atomic_load(&state)) == seen) {
      CPU_RELAX();
      if (++spins % 16 == 0) sched_yield();
      if (spins % 64 == 0 && now_ns() - t0 > SPIN_NS) {
        /* sleep; the caller signals after publishing when it sees a sleeper (both sides use
         * sequentially consistent atomics, so one of them sees the other's write) */
        pthread_mutex_lock(&sleep_lock);
        atomic_fetch_add(&sleepers, 1);
        while (epoch_of(atomic_load(&state)) == seen) pthread_cond_wait(&wake, &sleep_lock);
        atomic_fetch_sub(&sleepers, 1);
        pthread_mutex_unlock(&sleep_lock);
      }
    }
    seen = epoch_of(atomic_load(&state));
    take_items(seen, id);
  }
  return NULL;
}

static void start_helpers(int want) {
  if (want > CPU_SHARE_MAX_HELPERS) want = CPU_SHARE_MAX_HELPERS;
  while (started < want) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, helper_main, (void *)(intptr_t)started);
    pthread_attr_destroy(&attr);
    if (rc != 0) break; /* fewer helpers: the caller does more of the items */
    started++;
  }
}

void cpu_share(int64_t n, int nthreads, cpu_share_fn fn, void *ctx) {
  if (n < 2 || nthreads < 2 || n > CPU_SHARE_MAX_ITEMS || atomic_flag_test_and_set(&running)) {
    for (int64_t i = 0; i < n; i++) fn(ctx, i);
    return;
  }
  start_helpers(nthreads - 1);
  atomic_store_explicit(&job_fn, fn, memory_order_relaxed);
  atomic_store_explicit(&job_ctx, ctx, memory_order_relaxed);
  atomic_store_explicit(&job_helpers, nthreads - 1, memory_order_relaxed);
  atomic_store(&done, 0);
  uint32_t e = epoch_of(atomic_load(&state)) + 1;
  atomic_store(&state, (uint64_t)e << 32 | (uint64_t)n);
  if (atomic_load(&sleepers) > 0) {
    pthread_mutex_lock(&sleep_lock);
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&sleep_lock);
  }
  int64_t mine = take_items(e, -1);
  int pct = (int)(100 * (n - mine) / n);
  atomic_store(&helped_pct, (3 * atomic_load(&helped_pct) + pct) / 4);
  /* only items a helper has taken are left, and they are running (or their thread lost its core:
   * then yield, in case it waits for this one) */
  for (int spins = 0; atomic_load(&done) < n - mine; spins++) {
    CPU_RELAX();
    if (spins > 4096) sched_yield();
  }
  atomic_flag_clear(&running);
}

bool cpu_share_pays(void) {
  if (atomic_load(&helped_pct) >= 20) return true;
  return atomic_fetch_add(&pays_calls, 1) % 8 == 7;
}

int cpu_share_helpers(void) { return started; }
