/* cpu_loop.h — strided N-d iteration shared by the CPU kernels (cpu_loop.c; the tiled traversal of
 * transposed layouts for elementwise kernels in cpu_loop_tiles.c).
 *
 * An iterator walks the elements of an output and up to three inputs that broadcast to it
 * (right-aligned, stride 0 on broadcast dims), merging dims that are contiguous with each other
 * so most loops end up 1-D. The kernel supplies an inner loop over n elements with byte strides;
 * large iterations are split across OpenMP threads. */
#ifndef DLE_CPU_LOOP_H
#define DLE_CPU_LOOP_H

#include "cpu_types.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define CPU_MAX_OPERANDS 4
/* Below this many elements an op with real work per element (a libm-class function,
 * a row of exps, a pooling window) stays on one thread: forking costs more than it saves. */
#define CPU_PARALLEL_GRAIN 32768
/* The same for light one-pass ops (copies, fills, arithmetic, comparisons, sums, optimizer steps:
 * bound by memory). Waking OpenMP's sleeping workers (dle runs them with OMP_WAIT_POLICY=passive,
 * bindings/loader) costs about as much as one core spends on 256K floats of such an op, more when
 * the other core is busy, so below that a second thread breaks even at best (the 128 x 256
 * activations of the Fashion-MNIST MLP step, 32K elements, were slower on 2 threads than on 1;
 * figures in bench/RESULTS.md, "Measurements behind design choices"). */
#define CPU_PARALLEL_GRAIN_LIGHT 262144

typedef void (*cpu_loop_fn)(char **ptrs, const int64_t *strides, int64_t n, const void *ctx);

typedef struct {
  int nops, ndim;
  int64_t numel;
  int64_t sizes[DLE_MAX_DIMS];
  int64_t strides[CPU_MAX_OPERANDS][DLE_MAX_DIMS]; /* bytes */
  int64_t esize[CPU_MAX_OPERANDS];                 /* element sizes, bytes */
  char *base[CPU_MAX_OPERANDS];
  int64_t
      grain; /* threads from this many elements on; cpu_iter_init sets CPU_PARALLEL_GRAIN_LIGHT */
} cpu_iter;

/* ops[0] is the output (its shape is the iteration shape); ops[1..] broadcast to it. */
void cpu_iter_init(cpu_iter *it, int nops, dle_tensor *const *ops);
/* Runs fn over every element (threads when numel >= it->grain). */
void cpu_iter_run(const cpu_iter *it, cpu_loop_fn fn, const void *ctx);
/* The same for an elementwise fn, one that touches exactly the n elements p[k] + i s[k] of each
 * operand and writes only the output (no addresses computed from the pointers otherwise): when an
 * input or the output is transposed against the others (denser along the second-last dim than
 * along the last), the last two dims go tile by tile through contiguous buffers. */
void cpu_iter_run_elementwise(const cpu_iter *it, cpu_loop_fn fn, const void *ctx);
/* Copies a transposed 4-byte-element input into an output contiguous along the last dim (ops[0]
 * = out, ops[1] = in, same dtype) with block transposes; false (nothing done) when that does not
 * apply or the CPU lacks AVX2. */
bool cpu_iter_copy_transposed(const cpu_iter *it);
/* Convenience: init + run over out and ins; cpu_foreach with the light grain, the elementwise
 * one with the given grain (CPU_PARALLEL_GRAIN or CPU_PARALLEL_GRAIN_LIGHT). */
void cpu_foreach(dle_tensor *out, dle_tensor *const *ins, int nin, cpu_loop_fn fn, const void *ctx);
void cpu_foreach_elementwise(dle_tensor *out, dle_tensor *const *ins, int nin, cpu_loop_fn fn,
                             const void *ctx, int64_t grain);

/* Should a loop of n elements run on several threads? (heavy and light elements) */
static inline bool cpu_parallel(int64_t n) { return n >= CPU_PARALLEL_GRAIN; }
static inline bool cpu_parallel_light(int64_t n) { return n >= CPU_PARALLEL_GRAIN_LIGHT; }

/* The calling thread's number in its OpenMP team and the team's size (0 and 1 without OpenMP). */
static inline void cpu_team(int *t, int *n) {
#ifdef _OPENMP
  *t = omp_get_thread_num();
  *n = omp_get_num_threads();
#else
  *t = 0;
  *n = 1;
#endif
}

#endif
