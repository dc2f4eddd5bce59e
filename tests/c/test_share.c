/* test_share.c — cpu_share (kernels/cpu/cpu_share.h): every item runs exactly once whatever the
 * thread count and item count, nested and concurrent shares fall back to running serially, and a
 * share completes while its items are slow (helpers busy or late). */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../kernels/cpu/cpu_share.h"

#define MAX_N 70000

typedef struct {
  _Atomic int runs[MAX_N];
  int64_t n;
  int nested_threads; /* > 0: each item runs a nested share of 3 items on this many threads */
  _Atomic int nested_runs;
  long sleep_ns;      /* > 0: each item sleeps this long */
} counter;

static void count_item(void *ctx, int64_t i) {
  counter *c = ctx;
  atomic_fetch_add(&c->runs[i], 1);
  if (c->sleep_ns) nanosleep(&(struct timespec){0, c->sleep_ns}, NULL);
  if (c->nested_threads) {
    counter *inner = calloc(1, sizeof *inner);
    if (!inner) return;
    inner->n = 3;
    cpu_share(3, c->nested_threads, count_item, inner);
    for (int k = 0; k < 3; k++) atomic_fetch_add(&c->nested_runs, atomic_load(&inner->runs[k]));
    free(inner);
  }
}

/* Items of c that did not run exactly once (the first one in *first). */
static int64_t wrong_runs(counter *c, int64_t *first) {
  int64_t bad = 0;
  *first = -1;
  for (int64_t i = 0; i < c->n; i++)
    if (atomic_load(&c->runs[i]) != 1 && bad++ == 0) *first = i;
  return bad;
}

TEST(every_item_runs_once_at_any_thread_and_item_count) {
  static const int64_t ns[] = {0, 1, 2, 3, 7, 64, 1000, CPU_SHARE_MAX_ITEMS, CPU_SHARE_MAX_ITEMS + 1};
  counter *c = malloc(sizeof *c);
  REQUIRE(c != NULL, "out of memory");
  for (int nt = 1; nt <= 4; nt++)
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
      for (int rep = 0; rep < 3; rep++) { /* back to back: helpers still spinning, then not */
        memset(c, 0, sizeof *c);
        c->n = ns[k];
        cpu_share(c->n, nt, count_item, c);
        int64_t first = -1, bad = wrong_runs(c, &first);
        CHECK(bad == 0, "%d threads, %lld items: %lld items ran other than once (item %lld: %d times)", nt,
              (long long)c->n, (long long)bad, (long long)first, first >= 0 ? atomic_load(&c->runs[first]) : 0);
      }
  CHECK(cpu_share_helpers() >= 1, "no helper thread was started");
  free(c);
}

TEST(a_nested_share_runs_serially_and_completes) {
  counter *c = calloc(1, sizeof *c);
  REQUIRE(c != NULL, "out of memory");
  c->n = 16, c->nested_threads = 2;
  cpu_share(c->n, 2, count_item, c);
  int64_t first = -1;
  CHECK(wrong_runs(c, &first) == 0, "outer item %lld ran other than once", (long long)first);
  CHECK(atomic_load(&c->nested_runs) == 16 * 3, "nested items ran %d times, expected 48", atomic_load(&c->nested_runs));
  free(c);
}

static void *share_from_thread(void *arg) {
  cpu_share(((counter *)arg)->n, 2, count_item, arg);
  return NULL;
}

TEST(concurrent_shares_from_two_threads_both_complete) {
  counter *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
  REQUIRE(a != NULL && b != NULL, "out of memory");
  a->n = b->n = 5000;
  a->sleep_ns = b->sleep_ns = 1000;
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, share_from_thread, a) == 0, "pthread_create failed");
  share_from_thread(b);
  pthread_join(t, NULL);
  int64_t first = -1;
  CHECK(wrong_runs(a, &first) == 0, "first share: item %lld ran other than once", (long long)first);
  CHECK(wrong_runs(b, &first) == 0, "second share: item %lld ran other than once", (long long)first);
  free(a), free(b);
}

TEST(slow_items_after_the_helpers_went_to_sleep_complete) {
  counter *c = calloc(1, sizeof *c);
  REQUIRE(c != NULL, "out of memory");
  nanosleep(&(struct timespec){0, 5000000}, NULL); /* 5 ms: helpers are past their spin */
  c->n = 8, c->sleep_ns = 2000000;
  cpu_share(c->n, 2, count_item, c);
  int64_t first = -1;
  CHECK(wrong_runs(c, &first) == 0, "item %lld ran other than once", (long long)first);
  free(c);
}
