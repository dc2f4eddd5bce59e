/* test_norm.c — the normalization ops through the C interface (engine/norm.h): values of a small
 * layer_norm and batch_norm, and user errors (arity, shapes, missing running statistics), each
 * returning DLE_ERR with a message and leaking nothing (the harness checks storage after each
 * test). */
#include "testutil.h"

#include <math.h>

#include "../../engine/dle.h"

TEST(layer_norm_and_batch_norm_values_and_stats) {
  const double xv[6] = {1, 2, 3, 2, 2, 2};
  dle_tensor *x = t_values(DLE_F64, SIZES(2, 3), xv), *y = NULL, *st = NULL;
  CHECK_OK(dle_layer_norm(&y, &st, x, 1, NULL, NULL, 0.0));
  CHECK_SHAPE(st, 2, 2);
  double s = sqrt(2.0 / 3.0);
  CHECK(fabs(at(y, 0) + 1 / s) < 1e-12 && fabs(at(y, 1)) < 1e-12 && fabs(at(y, 2) - 1 / s) < 1e-12,
        "layer_norm row 1: %g %g %g", at(y, 0), at(y, 1), at(y, 2));
  CHECK(at(st, 0) == 2 && fabs(at(st, 1) - 2.0 / 3.0) < 1e-15 && at(st, 2) == 2 && at(st, 3) == 0,
        "stats %g %g %g %g", at(st, 0), at(st, 1), at(st, 2), at(st, 3));
  dle_tensor_release(y), dle_tensor_release(st);
  y = st = NULL;
  /* per channel of {2, 3}: column 1 is {1, 2}: mean 1.5, var 0.25 */
  CHECK_OK(dle_batch_norm(&y, &st, x, NULL, NULL, NULL, NULL, true, 0.0));
  CHECK_SHAPE(st, 3, 2);
  CHECK(at(st, 0) == 1.5 && at(st, 1) == 0.25 && fabs(at(y, 0) + 1) < 1e-12, "batch_norm %g %g %g",
        at(st, 0), at(st, 1), at(y, 0));
  dle_tensor_release(y), dle_tensor_release(st);
}

TEST(normalization_errors_name_the_op_and_shapes) {
  dle_tensor *x = t_arange(6, DLE_F32), *y = NULL, *st = NULL, *w = t_arange(4, DLE_F32);
  dle_tensor *x2 = NULL;
  CHECK_OK(dle_reshape(&x2, x, SIZES(2, 3)));
  CHECK_ERR(dle_layer_norm(&y, &st, x2, 3, NULL, NULL, 1e-5), "layer_norm", "1 to 2", "{2,3}");
  CHECK_ERR(dle_layer_norm(&y, &st, x2, 1, w, NULL, 1e-5), "layer_norm", "weight", "{4}", "{3}");
  CHECK_ERR(dle_batch_norm(&y, &st, x, NULL, NULL, NULL, NULL, true, 1e-5), "batch_norm", "{6}");
  CHECK_ERR(dle_batch_norm(&y, &st, x2, NULL, NULL, NULL, NULL, false, 1e-5), "batch_norm",
            "running_mean");
  CHECK_ERR(dle_batch_norm(&y, &st, x2, NULL, NULL, w, w, false, 1e-5), "batch_norm",
            "running_mean", "{4}");
  dle_attrs a = {0};
  a.ints[0] = 1, a.ints[1] = 1;
  dle_tensor *outs[2] = {NULL, NULL};
  CHECK_ERR(dle_op_call(DLE_OP_LAYER_NORM, outs, (dle_tensor *[]){x2}, 1, &a), "layer_norm",
            "expected 2", "weight");
  CHECK_ERR(dle_op_call(DLE_OP_LAYER_NORM_GRAD_AFFINE, outs, (dle_tensor *[]){x2, x2}, 2, &a),
            "layer_norm_grad_affine", "3");
  CHECK_ERR(dle_layer_norm_grad_input(&y, x2, x2, x2, NULL, 1, 1e-5), "layer_norm_grad_input",
            "stats", "{2,3}");
  CHECK(y == NULL && st == NULL && !outs[0] && !outs[1], "outputs set on error");
  dle_tensor_release(x2);
}
