/* fused.h — the fused elementwise executor of dle.rewrite.rules.fusion (kernels/cpu/cpu_fused.c).
 *
 * A chain of elementwise ops over tensors that broadcast to one shape runs as a small program:
 * registers 0..nin-1 hold the inputs, instruction k writes register nin + k from registers a (and
 * b for binary ops), and the last register is the result. The executor walks the output in
 * blocks of DLE_FUSED_BLOCK (1024) elements on OpenMP threads; in a block, each input is read once
 * (contiguous ones in place, broadcast or strided ones gathered), the instructions run over
 * block-sized temporaries that stay in cache, and the result is written once. So a chain reads
 * its inputs and writes its output once instead of once per op.
 *
 *   dle_fused_instr prog[2] = {{DLE_OP_MUL, 0, 1}, {DLE_OP_RELU, 2, 0}};   // relu(x * y)
 *   dle_fused_run(&out, ins, 2, prog, 2, x->ndim, x->sizes, DLE_F32);
 *
 * Not an op of ops.def: nothing records it for autograd (the graph runs the unfused ops instead
 * when a gradient is needed, see lua/dle/rewrite/rules/fusion.lua). The profiler counts each run
 * as one call of its "fused_elementwise" entry: one FLOP per instruction and element, the bytes of
 * the inputs and the output once.
 * float32 and float64, CPU, every input of the result's dtype. Ops: neg abs relu exp log expm1
 * log1p sqrt rsqrt reciprocal sin cos tanh sigmoid gelu silu pow_scalar clamp (f0, f1 as the
 * op's attrs.f), add sub mul div maximum minimum pow. Expressions as cpu_elementwise.c's. */
#ifndef DLE_FUSED_H
#define DLE_FUSED_H

#include "dle.h"

#define DLE_FUSED_BLOCK 1024
#define DLE_FUSED_MAX_REGS 64

typedef struct {
  int op;        /* DLE_OP_* */
  int a, b;      /* source registers (b unused by unary ops) */
  double f0, f1; /* pow_scalar's exponent, clamp's bounds (NAN: unbounded) */
} dle_fused_instr;

/* Whether the executor runs op. */
bool dle_fused_supports(dle_op op);
/* *out (NULL on entry) receives a new contiguous tensor of the given shape and dtype. */
dle_status dle_fused_run(dle_tensor **out, dle_tensor *const *ins, int nin, const dle_fused_instr *prog,
                         int n, int ndim, const int64_t *sizes, dle_dtype dt);

#endif
