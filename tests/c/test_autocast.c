/* test_autocast.c — the mixed-precision policy (engine/autocast.h) through the C API: the state
 * and its checks, the rule of each op, the casts the front door makes (one per input that changes),
 * backward running in forward's dtypes, and per-thread state. Autocast is switched off before any
 * check can end a test, so a failure cannot leak the mode into the tests after it. */
#include "testutil.h"

#include "../../engine/dle.h"

#include <pthread.h>
#include <string.h>

/* c = a b under autocast in dt, autocast off again on return. */
static dle_status matmul_in(dle_dtype dt, dle_tensor **c, dle_tensor *a, dle_tensor *b) {
  dle_status st = dle_autocast_set(true, dt);
  if (st == DLE_OK) st = dle_matmul(c, a, b);
  dle_autocast_set(false, DLE_BF16);
  return st;
}

TEST(off_by_default_and_only_float16_or_bfloat16) {
  CHECK(!dle_autocast_enabled(), "autocast is on at start");
  CHECK(dle_autocast_dtype() == DLE_BF16, "default dtype %s", dle_dtype_name(dle_autocast_dtype()));
  CHECK_ERR(dle_autocast_set(true, DLE_F32), "autocast", "float32");
  CHECK_ERR(dle_autocast_set(true, DLE_I64), "autocast", "int64");
  CHECK(!dle_autocast_enabled(), "a refused dtype switched it on");
  CHECK_OK(dle_autocast_set(true, DLE_F16));
  bool on = dle_autocast_enabled();
  dle_dtype dt = dle_autocast_dtype();
  bool was = dle_autocast_set_enabled(false); /* off, dtype kept */
  dle_dtype kept = dle_autocast_dtype();
  dle_autocast_set(false, DLE_BF16);
  CHECK(on && dt == DLE_F16 && was, "set(true, F16): on %d, dtype %s", on, dle_dtype_name(dt));
  CHECK(kept == DLE_F16, "set_enabled changed the dtype to %s", dle_dtype_name(kept));
}

TEST(products_run_low_gradient_ops_are_left_alone) {
  CHECK(dle_autocast_rule_of(DLE_OP_MATMUL) == DLE_AUTOCAST_LOWER, "matmul");
  CHECK(dle_autocast_rule_of(DLE_OP_CONV2D) == DLE_AUTOCAST_LOWER, "conv2d");
  CHECK(dle_autocast_rule_of(DLE_OP_SDPA) == DLE_AUTOCAST_LOWER, "sdpa");
  const dle_op f32[] = {DLE_OP_SOFTMAX,    DLE_OP_LOG_SOFTMAX, DLE_OP_LOGSUMEXP,
                        DLE_OP_LAYER_NORM, DLE_OP_BATCH_NORM,  DLE_OP_CROSS_ENTROPY,
                        DLE_OP_NLL_LOSS,   DLE_OP_MSE_LOSS,    DLE_OP_EXP,
                        DLE_OP_LOG,        DLE_OP_POW,         DLE_OP_SUM,
                        DLE_OP_MEAN,       DLE_OP_VAR};
  for (size_t i = 0; i < sizeof f32 / sizeof f32[0]; i++)
    CHECK(dle_autocast_rule_of(f32[i]) == DLE_AUTOCAST_FLOAT32, "%s not float32",
          dle_op_table[f32[i]].name);
  CHECK(dle_autocast_rule_of(DLE_OP_ADD) == DLE_AUTOCAST_KEEP, "add");
  CHECK(dle_autocast_rule_of(DLE_OP_COPY) == DLE_AUTOCAST_KEEP, "copy (the casts themselves)");
  CHECK(dle_autocast_rule_of(DLE_NUM_OPS) == DLE_AUTOCAST_KEEP, "an invalid op");
  for (int op = 0; op < DLE_NUM_OPS; op++) {
    const char *name = dle_op_table[op].name;
    if (strstr(name, "_grad") || strstr(name, "_backward"))
      CHECK(dle_autocast_rule_of((dle_op)op) == DLE_AUTOCAST_KEEP, "gradient op %s is autocast",
            name);
  }
}

TEST(matmul_casts_float_inputs_but_not_float64_or_integers) {
  dle_tensor *a32, *b16, *a64, *ai, *c;
  MAKE(a32, dle_full(&a32, SIZES(2, 3), 1.0, DLE_F32));
  MAKE(b16, dle_full(&b16, SIZES(3, 2), 1.0, DLE_F16));
  MAKE(a64, dle_full(&a64, SIZES(2, 2), 1.0, DLE_F64));
  MAKE(ai, dle_full(&ai, SIZES(2, 2), 1.0, DLE_I64));
  MAKE(c, matmul_in(DLE_BF16, &c, a32, b16)); /* float16 too goes to bfloat16, as in PyTorch */
  CHECK(c->dtype == DLE_BF16, "float32 x float16 -> %s", dle_dtype_name(c->dtype));
  CHECK(at(c, 0) == 3.0, "value %g", at(c, 0));
  MAKE(c, matmul_in(DLE_F16, &c, a64, a64));
  CHECK(c->dtype == DLE_F64, "float64 -> %s", dle_dtype_name(c->dtype));
  MAKE(c, matmul_in(DLE_F16, &c, ai, ai));
  CHECK(c->dtype == DLE_I64, "int64 -> %s", dle_dtype_name(c->dtype));
  CHECK(!dle_autocast_enabled(), "left on");
}

TEST(the_casts_are_copy_ops_one_per_input_that_changes) {
  dle_tensor *a, *b, *c, *x, *s;
  MAKE(a, dle_full(&a, SIZES(4, 5), 0.5, DLE_F32));
  MAKE(b, dle_full(&b, SIZES(5, 3), 0.5, DLE_F32));
  MAKE(x, dle_full(&x, SIZES(2, 3), 0.5, DLE_BF16));
  REQUIRE_OK(dle_profile_set_mode(DLE_PROF_COUNT));
  dle_autocast_set(true, DLE_BF16);
  c = NULL, s = NULL;
  dle_status st1 = dle_matmul(&c, a, b), st2 = dle_softmax(DLE_OP_SOFTMAX, &s, x, 1);
  dle_autocast_set(false, DLE_BF16);
  dle_profile_set_mode(DLE_PROF_OFF);
  track(c), track(s);
  REQUIRE(st1 == DLE_OK && st2 == DLE_OK, "%s", dle_last_error());
  const dle_profile_entry *e = dle_profile_counters();
  /* two casts down for matmul, one up for softmax */
  CHECK(e[DLE_OP_COPY].calls == 3, "%lld copies", (long long)e[DLE_OP_COPY].calls);
  CHECK(e[DLE_OP_MATMUL].calls == 1 && e[DLE_OP_SOFTMAX].calls == 1, "matmul %lld, softmax %lld",
        (long long)e[DLE_OP_MATMUL].calls, (long long)e[DLE_OP_SOFTMAX].calls);
  CHECK(c->dtype == DLE_BF16 && s->dtype == DLE_F32, "matmul %s, softmax %s",
        dle_dtype_name(c->dtype), dle_dtype_name(s->dtype));
}

TEST(a_float32_leaf_gets_a_float32_gradient_through_the_casts) {
  dle_tensor *a, *b, *c, *g;
  MAKE(a, dle_full(&a, SIZES(2, 3), 1.0, DLE_F32));
  MAKE(b, dle_full(&b, SIZES(3, 4), 0.25, DLE_F32));
  REQUIRE_OK(dle_set_requires_grad(a, true));
  MAKE(c, matmul_in(DLE_BF16, &c, a, b));
  MAKE(g, dle_full(&g, SIZES(2, 4), 1.0, DLE_BF16));
  REQUIRE_OK(dle_backward(1, &c, &g, 0, NULL, NULL, false, false));
  REQUIRE(a->grad != NULL, "no gradient");
  CHECK(a->grad->dtype == DLE_F32, "gradient dtype %s", dle_dtype_name(a->grad->dtype));
  CHECK(at(a->grad, 0) == 1.0, "gradient %g", at(a->grad, 0)); /* 4 * 0.25 */
}

TEST(backward_runs_in_forwards_dtypes_with_autocast_on_around_it) {
  dle_tensor *a, *b, *c, *g, *ref, *bt;
  MAKE(a, dle_full(&a, SIZES(3, 16), 1.0, DLE_F32));
  MAKE(b, dle_full(&b, SIZES(16, 2), 1.0 / 3.0, DLE_F32)); /* not a bfloat16 */
  MAKE(g, dle_full(&g, SIZES(3, 2), 1.0 / 7.0, DLE_F32));
  REQUIRE_OK(dle_set_requires_grad(a, true));
  MAKE(c, dle_matmul(&c, a, b)); /* recorded in float32 */
  dle_autocast_set(true, DLE_BF16);
  dle_status st = dle_backward(1, &c, &g, 0, NULL, NULL, false, false);
  bool still_on = dle_autocast_enabled();
  dle_autocast_set(false, DLE_BF16);
  REQUIRE(st == DLE_OK, "%s", dle_last_error());
  CHECK(still_on, "backward did not restore autocast");
  MAKE(bt, dle_transpose(&bt, b, 0, 1));
  MAKE(ref, dle_matmul(&ref, g, bt));
  REQUIRE(a->grad && a->grad->dtype == DLE_F32, "gradient missing or not float32");
  CHECK_NEAR(at(a->grad, 0), at(ref, 0), 1e-7); /* bfloat16 would be ~1e-3 off */
}

/* exp (a float32 op under autocast) of a bfloat16 tensor: bfloat16 unless autocast casts it up.
 * Returns its result to be released by the main thread: one released here would go to this
 * thread's pool of free tensor headers, which is not returned when the thread ends. */
static void *exp_in_a_thread(void *arg) {
  dle_tensor *a = arg, *c = NULL;
  return dle_unary(DLE_OP_EXP, &c, a) == DLE_OK ? c : NULL;
}

TEST(another_thread_is_not_autocast) {
  dle_tensor *a;
  MAKE(a, dle_full(&a, SIZES(2, 2), 1.0, DLE_BF16));
  dle_autocast_set(true, DLE_BF16);
  pthread_t th;
  int rc = pthread_create(&th, NULL, exp_in_a_thread, a);
  void *c = NULL;
  if (rc == 0) pthread_join(th, &c);
  dle_tensor *here = NULL;
  dle_status st = dle_unary(DLE_OP_EXP, &here, a);
  dle_autocast_set(false, DLE_BF16);
  track(here);
  REQUIRE(rc == 0, "pthread_create failed");
  REQUIRE(track(c) != NULL && st == DLE_OK, "an exp failed");
  CHECK(((dle_tensor *)c)->dtype == DLE_BF16, "the other thread's exp is %s",
        dle_dtype_name(((dle_tensor *)c)->dtype));
  CHECK(here->dtype == DLE_F32, "this thread's exp is %s", dle_dtype_name(here->dtype));
}
