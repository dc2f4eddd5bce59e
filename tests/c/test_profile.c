/* test_profile.c — the engine's profiler (engine/profile.h) through its C API: what one op
 * counts, modes and zeroing, self time of nested ops, per-thread state, and the FLOP rules. */
#include "testutil.h"

#include "../../engine/dle.h"

#include <pthread.h>
#include <string.h>

TEST(an_add_counts_one_call_its_flops_and_bytes) {
  dle_tensor *a, *b, *c;
  MAKE(a, dle_full(&a, SIZES(3, 5), 1.0, DLE_F32));
  MAKE(b, dle_full(&b, SIZES(5), 2.0, DLE_F64)); /* broadcast, promoted: the result is float64 */
  REQUIRE_OK(dle_profile_set_mode(DLE_PROF_COUNT));
  CHECK(dle_profile_get_mode() == DLE_PROF_COUNT, "mode %d", (int)dle_profile_get_mode());
  MAKE(c, dle_binary(DLE_OP_ADD, &c, a, b));
  REQUIRE_OK(dle_profile_set_mode(DLE_PROF_OFF));
  const dle_profile_entry *e = dle_profile_counters();
  /* add reads a as given (float32) and b once per element, writes 15 float64; the cast of a to
   * float64 inside add is a copy op of its own */
  int64_t add_bytes = 15 * 4 + 5 * 8 + 15 * 8;
  CHECK(e[DLE_OP_ADD].calls == 1, "add calls %lld", (long long)e[DLE_OP_ADD].calls);
  CHECK(e[DLE_OP_ADD].flops == 15, "add flops %lld", (long long)e[DLE_OP_ADD].flops);
  CHECK(e[DLE_OP_ADD].bytes == add_bytes, "add bytes %lld, expected %lld",
        (long long)e[DLE_OP_ADD].bytes, (long long)add_bytes);
  CHECK(e[DLE_OP_COPY].calls == 1 && e[DLE_OP_COPY].bytes == 15 * 4 + 15 * 8 &&
            e[DLE_OP_COPY].flops == 0,
        "copy: %lld calls, %lld bytes, %lld flops", (long long)e[DLE_OP_COPY].calls,
        (long long)e[DLE_OP_COPY].bytes, (long long)e[DLE_OP_COPY].flops);
  CHECK(e[DLE_OP_ADD].seconds == 0, "count mode read the clock: %g s", e[DLE_OP_ADD].seconds);
  CHECK(e[DLE_OP_MATMUL].calls == 0, "matmul counted %lld calls",
        (long long)e[DLE_OP_MATMUL].calls);
  /* off: nothing more is counted, and the counters stay readable */
  dle_tensor *d;
  MAKE(d, dle_binary(DLE_OP_ADD, &d, a, b));
  CHECK(dle_profile_counters()[DLE_OP_ADD].calls == 1, "counted while off");
}

TEST(switching_on_zeroes_the_counters_and_switching_modes_keeps_them) {
  dle_tensor *a, *b, *c;
  MAKE(a, dle_full(&a, SIZES(4), 1.0, DLE_F32));
  REQUIRE_OK(dle_profile_set_mode(DLE_PROF_TIMED));
  MAKE(b, dle_binary(DLE_OP_ADD, &b, a, a));
  REQUIRE_OK(dle_profile_set_mode(DLE_PROF_COUNT));
  MAKE(c, dle_binary(DLE_OP_ADD, &c, a, a));
  CHECK(dle_profile_counters()[DLE_OP_ADD].calls == 2, "calls %lld",
        (long long)dle_profile_counters()[DLE_OP_ADD].calls);
  CHECK(dle_profile_counters()[DLE_OP_ADD].seconds >= 0, "negative time");
  REQUIRE_OK(dle_profile_set_mode(DLE_PROF_OFF));
  REQUIRE_OK(dle_profile_set_mode(DLE_PROF_TIMED));
  CHECK(dle_profile_counters()[DLE_OP_ADD].calls == 0, "not zeroed when switched on");
  REQUIRE_OK(dle_profile_set_mode(DLE_PROF_OFF));
  CHECK_ERR(dle_profile_set_mode((dle_profile_mode)7), "profile", "invalid mode 7");
  CHECK(dle_profile_get_mode() == DLE_PROF_OFF, "an invalid mode switched it on");
}

TEST(a_failed_op_is_not_counted) {
  dle_tensor *a, *b, *c = NULL;
  MAKE(a, dle_full(&a, SIZES(2, 3), 1.0, DLE_F32));
  MAKE(b, dle_full(&b, SIZES(2, 3), 1.0, DLE_F32));
  REQUIRE_OK(dle_profile_set_mode(DLE_PROF_TIMED));
  CHECK_ERR(dle_matmul(&c, a, b), "matmul", "{2,3}");
  REQUIRE_OK(dle_profile_set_mode(DLE_PROF_OFF));
  CHECK(dle_profile_counters()[DLE_OP_MATMUL].calls == 0, "a failed matmul was counted");
}

/* Returns its result to be released by the main thread: a tensor released here would go to this
 * thread's pool of free tensor headers, which is not returned when the thread ends. */
static void *add_in_a_thread(void *arg) {
  dle_tensor *a = arg, *b = NULL;
  return dle_binary(DLE_OP_ADD, &b, a, a) == DLE_OK ? b : NULL;
}

TEST(another_threads_ops_are_not_counted) {
  dle_tensor *a;
  MAKE(a, dle_full(&a, SIZES(4), 1.0, DLE_F32));
  REQUIRE_OK(dle_profile_set_mode(DLE_PROF_COUNT));
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, add_in_a_thread, a) == 0, "pthread_create failed");
  void *sum = NULL;
  pthread_join(th, &sum);
  REQUIRE_OK(dle_profile_set_mode(DLE_PROF_OFF));
  REQUIRE(track(sum) != NULL, "the add in the other thread failed");
  CHECK(dle_profile_counters()[DLE_OP_ADD].calls == 0, "the other thread's add was counted");
}

TEST(flop_rules_of_products_and_names_of_entries) {
  dle_tensor *a, *b, *c;
  MAKE(a, dle_full(&a, SIZES(2, 3, 4), 1.0, DLE_F32));
  MAKE(b, dle_full(&b, SIZES(4, 5), 1.0, DLE_F32));
  MAKE(c, dle_matmul(&c, a, b));
  dle_tensor *ins[2] = {a, b}, *outs[1] = {c};
  int64_t f = dle_op_flops(DLE_OP_MATMUL, outs, 1, ins, 2, NULL);
  CHECK(f == 2 * 2 * 3 * 5 * 4, "matmul flops %lld", (long long)f);
  int per = -1;
  CHECK(strcmp(dle_op_flops_rule(DLE_OP_VIEW, &per), "none") == 0, "view has a FLOP rule");
  CHECK(strcmp(dle_op_flops_rule(DLE_OP_SOFTMAX, &per), "per input element") == 0 && per == 5,
        "softmax rule %s, %d", dle_op_flops_rule(DLE_OP_SOFTMAX, NULL), per);
  CHECK(dle_op_flops_rule(DLE_NUM_OPS, NULL) == NULL, "a rule for an invalid op");
  CHECK(strcmp(dle_profile_entry_name(DLE_OP_ADD), "add") == 0, "entry name of add");
  CHECK(strcmp(dle_profile_entry_name(DLE_PROF_ADAMW_STEP), "adamw_step") == 0, "adamw entry");
  CHECK(dle_profile_entry_name(DLE_PROF_NUM_ENTRIES) == NULL, "a name past the last entry");
  CHECK(dle_profile_entry_name(-1) == NULL, "a name before the first entry");
}
