/* cpu_spin_pool.c — see cpu_spin_pool.h. One pool per process, its workers started on first use
 * and kept (the module is never unloaded). A run publishes (fn, ctx, parts) and bumps a generation
 * counter; each worker polls the counter, runs its part and counts itself done. A worker that has
 * seen no new generation for the poll time sleeps on a condition variable; the generation is bumped
 * under the mutex, so a worker going to sleep never misses a run. */
#include "cpu_spin_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "../../engine/dle.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define MAX_WORKERS 63

static struct {
  pthread_mutex_t mu;
  pthread_cond_t wake;
  atomic_uint gen;     /* bumped once per run */
  atomic_int pending;  /* workers that have not finished this run's part */
  atomic_flag busy;    /* a run is in progress (one caller at a time) */
  cpu_spin_pool_fn fn; /* this run's loop, written before gen is bumped */
  void *ctx;
  int parts;
  int workers; /* started so far; worker w runs part w + 1 */
} pool = {
    .mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, .busy = ATOMIC_FLAG_INIT};

static _Thread_local bool in_run; /* this thread is running a part (nested runs go serial) */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waits for a generation other than seen: polls (yielding the core each time) for the poll time,
 * then sleeps. Returns the new generation. */
static unsigned wait_for_run(unsigned seen) {
  int64_t poll_ns = dle_tuning_get(DLE_TUNE_SPIN_POOL_POLL_US) * 1000, start = now_ns();
  for (unsigned polls = 1;; polls++) {
    unsigned g = atomic_load_explicit(&pool.gen, memory_order_acquire);
    if (g != seen) return g;
    if ((polls & 63) == 0 && now_ns() - start > poll_ns) break;
    sched_yield();
  }
  pthread_mutex_lock(&pool.mu);
  unsigned g;
  while ((g = atomic_load_explicit(&pool.gen, memory_order_acquire)) == seen)
    pthread_cond_wait(&pool.wake, &pool.mu);
  pthread_mutex_unlock(&pool.mu);
  return g;
}

/* A worker's argument: its part, and the generation current when it was started (a worker whose
 * thread starts late must still run the run that follows its creation). */
#define WORKER_ARG(part, gen) ((void *)(uintptr_t)((uint64_t)(gen) << 8 | (unsigned)(part)))

static void *worker(void *arg) {
  int part = (int)((uintptr_t)arg & 0xff);
  unsigned seen = (unsigned)((uint64_t)(uintptr_t)arg >> 8);
  in_run = true;
  for (;;) {
    seen = wait_for_run(seen);
    if (part < pool.parts) pool.fn(pool.ctx, part, pool.parts);
    atomic_fetch_sub_explicit(&pool.pending, 1, memory_order_release);
  }
  return NULL;
}

/* A child process of fork() has none of the parent's workers: it starts its own. */
static void forget_workers(void) {
  pool.workers = 0;
  atomic_flag_clear(&pool.busy);
  pthread_mutex_init(&pool.mu, NULL);
  pthread_cond_init(&pool.wake, NULL);
}

static void register_fork_handler(void) { pthread_atfork(NULL, NULL, forget_workers); }

/* Starts workers until there are `want`; returns how many there are. Called by the run's owner
 * only, while no run is in flight, so a new worker starts from the current generation. */
static int start_workers(int want) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, register_fork_handler);
  if (want > MAX_WORKERS) want = MAX_WORKERS;
  while (pool.workers < want) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    unsigned gen = atomic_load_explicit(&pool.gen, memory_order_relaxed);
    int err = pthread_create(&t, &attr, worker, WORKER_ARG(pool.workers + 1, gen));
    pthread_attr_destroy(&attr);
    if (err) break;
    pool.workers++;
  }
  return pool.workers;
}

static void run_serial(int parts, cpu_spin_pool_fn fn, void *ctx) {
  for (int p = 0; p < parts; p++) fn(ctx, p, parts);
}

void cpu_spin_pool_run(int parts, cpu_spin_pool_fn fn, void *ctx) {
  bool nested = in_run;
#ifdef _OPENMP
  nested = nested || omp_in_parallel();
#endif
  if (parts <= 1 || nested || atomic_flag_test_and_set(&pool.busy)) {
    run_serial(parts, fn, ctx);
    return;
  }
  int workers = start_workers(parts - 1);
  if (workers < parts - 1) parts = workers + 1; /* fewer threads than asked: fewer, larger parts */
  pool.fn = fn;
  pool.ctx = ctx;
  pool.parts = parts;
  atomic_store_explicit(&pool.pending, workers, memory_order_relaxed);
  pthread_mutex_lock(&pool.mu);
  atomic_fetch_add_explicit(&pool.gen, 1, memory_order_release);
  pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.mu);
  in_run = true;
  fn(ctx, 0, parts);
  in_run = false;
  while (atomic_load_explicit(&pool.pending, memory_order_acquire) > 0) sched_yield();
  atomic_flag_clear(&pool.busy);
}
