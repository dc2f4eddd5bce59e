/* test_errors.c — user errors: each returns DLE_ERR with a message naming the function and the
 * shapes or values at fault, leaves the output slot alone and leaks nothing (the harness checks
 * that every byte of tensor storage came back after each test). */
#include "testutil.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

TEST(negative_sizes_are_rejected_by_every_constructor) {
  dle_tensor *t = NULL;
  CHECK_ERR(dle_tensor_empty(&t, SIZES(2, -1), DLE_F32, DLE_DEVICE_CPU), "empty", "negative",
            "{2,-1}");
  CHECK_ERR(dle_zeros(&t, SIZES(-3), DLE_F32), "full", "negative", "{-3}");
  CHECK_ERR(dle_full(&t, SIZES(4, -2, 1), 1.0, DLE_I64), "full", "{4,-2,1}");
  CHECK_ERR(dle_rand(&t, SIZES(-1), DLE_F32, NULL), "rand", "{-1}");
  CHECK_ERR(dle_randn(&t, SIZES(2, -5), DLE_F32, NULL), "randn", "{2,-5}");
  CHECK_ERR(dle_randint(&t, 0, 5, SIZES(-2), DLE_I64, NULL), "randint", "{-2}");
  CHECK_ERR(dle_linspace(&t, 0, 1, -4, DLE_F32), "linspace", "-4");
  CHECK_ERR(dle_eye(&t, -1, 3, DLE_F32), "eye", "-1");
  CHECK(t == NULL, "output set on error");
}

TEST(too_many_dims_are_rejected) {
  const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  dle_tensor *t = NULL, *a = t_arange(1, DLE_F32), *eight;
  CHECK_ERR(dle_tensor_empty(&t, 9, nine, DLE_F32, DLE_DEVICE_CPU), "empty", "9 dims", "8");
  CHECK_ERR(dle_full(&t, 9, nine, 0, DLE_F32), "full", "8");
  CHECK_ERR(dle_view(&t, a, 9, nine), "view", "8");
  CHECK_ERR(dle_reshape(&t, a, 9, nine), "reshape", "8");
  CHECK_ERR(dle_expand(&t, a, 9, nine), "expand", "8");
  MAKE(eight, dle_view(&eight, a, 8, nine));
  CHECK_ERR(dle_unsqueeze(&t, eight, 0), "unsqueeze", "{1,1,1,1,1,1,1,1}", "8 dims");
  CHECK(t == NULL, "output set on error");
}

TEST(bad_dims_name_the_function_and_the_dim) {
  dle_tensor *a = t_arange(6, DLE_F32), *m, *t = NULL;
  MAKE(m, dle_view(&m, a, SIZES(2, 3)));
  CHECK_ERR(dle_transpose(&t, m, 0, 5), "transpose", "dim 6", "2-dim");
  CHECK_ERR(dle_narrow(&t, m, -3, 0, 1), "narrow", "2-dim");
  CHECK_ERR(dle_select(&t, m, 7, 0), "select", "dim 8");
  CHECK_ERR(dle_squeeze(&t, m, 9), "squeeze", "dim 10");
  CHECK_ERR(dle_flatten(&t, m, 0, 2), "flatten", "dim 3");
  CHECK_ERR(dle_wrap_dim("my_fn", 3, 3, 0, &(int){0}), "my_fn", "dim 4", "3-dim");
  CHECK(t == NULL, "output set on error");
}

TEST(shape_mismatches_name_the_function_and_both_shapes) {
  dle_tensor *a, *b, *c, *y = NULL;
  MAKE(a, dle_zeros(&a, SIZES(2, 3), DLE_F32));
  MAKE(b, dle_zeros(&b, SIZES(4, 5), DLE_F32));
  MAKE(c, dle_zeros(&c, SIZES(3, 2), DLE_F64));
  CHECK_ERR(dle_binary(DLE_OP_ADD, &y, a, b), "add", "{2,3}", "{4,5}");
  CHECK_ERR(dle_binary(DLE_OP_EQ, &y, a, c), "eq", "{2,3}", "{3,2}");
  CHECK_ERR(dle_copy_(c, a), "copy_", "{2,3}", "{3,2}");
  CHECK_ERR(dle_view(&y, a, SIZES(4)), "view", "{4}", "{2,3}");
  CHECK_ERR(dle_reshape(&y, a, SIZES(5, -1)), "reshape", "{5,-1}", "{2,3}");
  CHECK_ERR(
      dle_broadcast_shapes("my_fn", SIZES(2, 3), SIZES(2), &(int){0}, (int64_t[DLE_MAX_DIMS]){0}),
      "my_fn", "{2,3}", "{2}");
  CHECK(y == NULL, "output set on error");
}

TEST(unknown_dtype_and_device_names_are_errors) {
  dle_dtype dt = DLE_F64;
  dle_device dev = DLE_DEVICE_CPU;
  CHECK_ERR(dle_dtype_parse("float33", &dt), "unknown dtype", "float33", "float32");
  CHECK_ERR(dle_dtype_parse("", &dt), "unknown dtype");
  CHECK(dt == DLE_F64, "dtype changed on error");
  CHECK_ERR(dle_device_parse("tpu", &dev), "unknown device", "tpu");
  CHECK_ERR(dle_device_parse("cuda:x", &dev), "unknown device", "cuda:x");
  CHECK_ERR(dle_device_parse("cudax", &dev), "unknown device");
  CHECK(dle_device_parse("cuda:1", &dev) == DLE_OK && dev.type == DLE_CUDA && dev.index == 1,
        "cuda:1 parsed as %d:%d", dev.type, dev.index);
  dle_tensor *a = t_arange(3, DLE_F32), *y = NULL;
  CHECK_ERR(dle_to_dtype(&y, a, (dle_dtype)42), "to", "dtype 42");
  CHECK_ERR(dle_tensor_empty(&y, SIZES(2), (dle_dtype)42, DLE_DEVICE_CPU), "empty", "dtype 42");
}

TEST(cuda_tensors_without_a_cuda_backend_give_a_clear_message) {
  if (dle_backend_get(DLE_CUDA)) SKIP("a CUDA backend is loaded");
  dle_tensor *t = NULL, *a = t_arange(4, DLE_F32);
  const dle_device cuda = {DLE_CUDA, 0};
  CHECK_ERR(dle_tensor_empty(&t, SIZES(2, 2), DLE_F32, cuda), "CUDA backend not available",
            "cuda:0");
  CHECK_ERR(dle_to_device(&t, a, cuda), "CUDA backend not available", "to(cuda:0)");
  CHECK(t == NULL, "output set on error");
  CHECK(strstr(dle_backend_unavailable_reason(DLE_CUDA), "CUDA backend not available") != NULL,
        "reason is \"%s\"", dle_backend_unavailable_reason(DLE_CUDA));
}

TEST(op_call_checks_arity_and_missing_inputs) {
  dle_tensor *a = t_arange(3, DLE_F32), *y = NULL;
  CHECK_ERR(dle_op_call(DLE_OP_ADD, &y, &a, 1, NULL), "add", "expected 2", "got 1");
  CHECK_ERR(dle_op_call(DLE_OP_EXP, &y, (dle_tensor *const[]){NULL}, 1, NULL), "exp", "input 1",
            "missing");
  CHECK_ERR(dle_op_call(DLE_NUM_OPS, &y, &a, 1, NULL), "op_call", "invalid op");
  CHECK_ERR(dle_op_call((dle_op)-1, &y, &a, 1, NULL), "op_call", "invalid op");
  CHECK(y == NULL, "output set on error");
}

TEST(value_errors_name_the_function_and_the_values) {
  dle_tensor *a = t_arange(3, DLE_F32), *i = t_arange(3, DLE_I64), *y = NULL;
  CHECK_ERR(dle_clamp(&y, a, 2, 1), "clamp", "2", "1");
  CHECK_ERR(dle_where(&y, i, a, a), "where", "bool", "int64");
  CHECK_ERR(dle_arange(&y, 0, 5, 0, DLE_F32), "arange", "step");
  CHECK_ERR(dle_arange(&y, 0, 5, NAN, DLE_F32), "arange", "step");
  CHECK_ERR(dle_arange(&y, 0, 1e300, 1, DLE_F32), "arange", "elements");
  CHECK_ERR(dle_rand(&y, SIZES(2), DLE_I64, NULL), "rand", "float", "int64");
  CHECK_ERR(dle_randn(&y, SIZES(2), DLE_BOOL, NULL), "randn", "float", "bool");
  CHECK_ERR(dle_randint(&y, 5, 5, SIZES(2), DLE_I64, NULL), "randint", "5");
  CHECK_ERR(dle_tensor_empty(&y, SIZES(INT64_MAX / 4, 8), DLE_F32, DLE_DEVICE_CPU), "empty",
            "{2305843009213693951,8}");
  CHECK(y == NULL, "output set on error");
}

TEST(errors_on_given_outputs_leave_them_untouched) {
  dle_tensor *a = t_make(LAYOUT_CONTIGUOUS, DLE_F32, SIZES(2, 3), DOM_ANY, 0), *out, *keep;
  MAKE(out, dle_full(&out, SIZES(3, 3), 5, DLE_F32));
  keep = out;
  CHECK_ERR(dle_binary(DLE_OP_ADD, &out, a, a), "add", "{2,3}", "{3,3}");
  CHECK(out == keep && out->refcount == 1, "output slot or refcount changed");
  for (int64_t i = 0; i < 9; i++)
    CHECK(at(out, i) == 5, "element %lld became %g", (long long)i, at(out, i));
}

TEST(error_messages_are_per_thread) {
  dle_error("main thread: first");
#ifdef _OPENMP
  bool other_saw_its_own = false;
#pragma omp parallel num_threads(2)
  {
    if (omp_get_thread_num() == 1) {
      dle_error("worker thread: second");
      other_saw_its_own = strcmp(dle_last_error(), "worker thread: second") == 0;
    }
  }
  CHECK(omp_get_max_threads() < 2 || other_saw_its_own, "the worker did not read its own message");
#endif
  CHECK(strcmp(dle_last_error(), "main thread: first") == 0, "main thread reads \"%s\"",
        dle_last_error());
}

TEST(long_messages_are_truncated_not_overflowed) {
  char big[3000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  CHECK(dle_error("fn: %s", big) == DLE_ERR, "dle_error does not return DLE_ERR");
  CHECK(strncmp(dle_last_error(), "fn: xxx", 7) == 0 && strlen(dle_last_error()) < sizeof big,
        "message of length %zu", strlen(dle_last_error()));
}
