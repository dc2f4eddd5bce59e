/* dist_half.c — sum, prod, max and min over float16, bfloat16 and the two float8 buffers as MPI
 * user-defined ops: MPI has no such float types, so each element pair is widened to float32, combined and
 * rounded back (to nearest even), the way NCCL reduces half precision in place. No extra buffer,
 * no second pass; with two ranks the result equals reducing in float32 and converting once. */
#include <stdint.h>

#include "../../engine/kernel/fp8.h"
#include "../../engine/kernel/half.h"
#include "dist.h"

/* NaN wins in max and min, as in dle's own reductions (and PyTorch's). */
static inline float f_sum(float a, float b) { return a + b; }
static inline float f_prod(float a, float b) { return a * b; }
static inline float f_max(float a, float b) { return (a != a || a > b) ? a : b; }
static inline float f_min(float a, float b) { return (a != a || a < b) ? a : b; }

#define HALF_OP(name, T, to_f, from_f, combine)                                    \
  static void name(void *in, void *inout, int *len, MPI_Datatype *type) {          \
    (void)type;                                                                    \
    const T *a = in;                                                               \
    T *b = inout;                                                                  \
    for (int i = 0; i < *len; i++) b[i] = from_f(combine(to_f(a[i]), to_f(b[i]))); \
  }
/* The four reductions of one format: name_sum, name_prod, name_max, name_min. */
#define HALF_OPS(name, T, to_f, from_f)         \
  HALF_OP(name##_sum, T, to_f, from_f, f_sum)   \
  HALF_OP(name##_prod, T, to_f, from_f, f_prod) \
  HALF_OP(name##_max, T, to_f, from_f, f_max)   \
  HALF_OP(name##_min, T, to_f, from_f, f_min)

HALF_OPS(f16, uint16_t, dle_half_to_float, dle_float_to_half)
HALF_OPS(bf16, uint16_t, dle_bfloat_to_float, dle_float_to_bfloat)
HALF_OPS(e4m3, uint8_t, dle_f8e4m3_to_float, dle_float_to_f8e4m3)
HALF_OPS(e5m2, uint8_t, dle_f8e5m2_to_float, dle_float_to_f8e5m2)

#define FORMATS 4 /* dle_dist_dtype.half: 1 float16, 2 bfloat16, 3 float8_e4m3fn, 4 float8_e5m2 */
static MPI_User_function *const functions[FORMATS][4] = {
    {f16_sum, f16_prod, f16_max, f16_min},
    {bf16_sum, bf16_prod, bf16_max, bf16_min},
    {e4m3_sum, e4m3_prod, e4m3_max, e4m3_min},
    {e5m2_sum, e5m2_prod, e5m2_max, e5m2_min},
};
static MPI_Op ops[FORMATS]
                 [4]; /* created on first use; zero (never created) or MPI_OP_NULL (freed) */

int dle_dist_half_ops_create(void) {
  for (int h = 0; h < FORMATS; h++)
    for (int o = 0; o < 4; o++) {
      if (ops[h][o] != MPI_OP_NULL && ops[h][o] != (MPI_Op)0) continue;
      int rc = MPI_Op_create(functions[h][o], 1, &ops[h][o]); /* 1: commutative */
      if (rc != MPI_SUCCESS) return rc;
    }
  return MPI_SUCCESS;
}

void dle_dist_half_ops_free(void) {
  for (int h = 0; h < FORMATS; h++)
    for (int o = 0; o < 4; o++)
      if (ops[h][o] != MPI_OP_NULL && ops[h][o] != (MPI_Op)0) MPI_Op_free(&ops[h][o]);
}

MPI_Op dle_dist_half_op(int half, int op) { return ops[half - 1][op]; }
