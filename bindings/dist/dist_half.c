/* dist_half.c — sum, prod, max and min over float16 and bfloat16 buffers as MPI user-defined
 * ops: MPI has no 16-bit float type, so each element pair is widened to float32, combined and
 * rounded back (to nearest even), the way NCCL reduces half precision in place. No extra buffer,
 * no second pass; with two ranks the result equals reducing in float32 and converting once. */
#include <stdint.h>

#include "../../engine/kernel/half.h"
#include "dist.h"

/* NaN wins in max and min, as in dle's own reductions (and PyTorch's). */
static inline float f_sum(float a, float b) { return a + b; }
static inline float f_prod(float a, float b) { return a * b; }
static inline float f_max(float a, float b) { return (a != a || a > b) ? a : b; }
static inline float f_min(float a, float b) { return (a != a || a < b) ? a : b; }

#define HALF_OP(name, to_f, from_f, combine)                                       \
  static void name(void *in, void *inout, int *len, MPI_Datatype *type) {          \
    (void)type;                                                                    \
    const uint16_t *a = in;                                                        \
    uint16_t *b = inout;                                                           \
    for (int i = 0; i < *len; i++) b[i] = from_f(combine(to_f(a[i]), to_f(b[i]))); \
  }

HALF_OP(f16_sum, dle_half_to_float, dle_float_to_half, f_sum)
HALF_OP(f16_prod, dle_half_to_float, dle_float_to_half, f_prod)
HALF_OP(f16_max, dle_half_to_float, dle_float_to_half, f_max)
HALF_OP(f16_min, dle_half_to_float, dle_float_to_half, f_min)
HALF_OP(bf16_sum, dle_bfloat_to_float, dle_float_to_bfloat, f_sum)
HALF_OP(bf16_prod, dle_bfloat_to_float, dle_float_to_bfloat, f_prod)
HALF_OP(bf16_max, dle_bfloat_to_float, dle_float_to_bfloat, f_max)
HALF_OP(bf16_min, dle_bfloat_to_float, dle_float_to_bfloat, f_min)

static MPI_User_function *const functions[2][4] = {
    {f16_sum, f16_prod, f16_max, f16_min},
    {bf16_sum, bf16_prod, bf16_max, bf16_min},
};
static MPI_Op ops[2][4] = {{MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL},
                           {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}};

int dle_dist_half_ops_create(void) {
  for (int h = 0; h < 2; h++)
    for (int o = 0; o < 4; o++) {
      if (ops[h][o] != MPI_OP_NULL) continue;
      int rc = MPI_Op_create(functions[h][o], 1, &ops[h][o]); /* 1: commutative */
      if (rc != MPI_SUCCESS) return rc;
    }
  return MPI_SUCCESS;
}

void dle_dist_half_ops_free(void) {
  for (int h = 0; h < 2; h++)
    for (int o = 0; o < 4; o++)
      if (ops[h][o] != MPI_OP_NULL) MPI_Op_free(&ops[h][o]);
}

MPI_Op dle_dist_half_op(int half, int op) { return ops[half - 1][op]; }
