/* profile.h — the op-level profiler behind dle.profile and dle.flops (engine/profile.c; the FLOP
 * rules are in engine/ops/flops.c).
 *
 * While a profiler is on, every call of dle_op_call (forward and backward alike: gradient rules
 * are written with ops), every fused optimizer step and every fused elementwise program adds one
 * call, its FLOPs, the bytes it moved and (timed mode) its self time to a counter per entry.
 * Entries are the ops of ops.def (index = op id) followed by the optimizer steps
 * (DLE_PROF_SGD_STEP...) and DLE_PROF_FUSED_ELEMENTWISE.
 *
 *   dle_profile_set_mode(DLE_PROF_TIMED);   // counters start at zero
 *   ... run ops ...
 *   const dle_profile_entry *e = dle_profile_counters();
 *   printf("%s: %lld calls\n", dle_profile_entry_name(DLE_OP_ADD), (long long)e[DLE_OP_ADD].calls);
 *   dle_profile_set_mode(DLE_PROF_OFF);
 *
 * Conventions: FLOPs as in flops.c; bytes = elements of every input read plus every output
 * written times the dtype size, where a broadcast (stride 0) dim counts once; views move no data
 * (0 bytes). Time is the op's self time on dle_time's clock: an op run inside another op (a cast
 * or copy a matmul makes) is its own entry and is not counted again in the outer one, so the
 * seconds of all entries add up to the time spent in ops.
 *
 * The state is per thread: ops of a thread count in that thread's profiler only (kernels' OpenMP
 * workers never call dle_op_call). When off, the cost per op is one test of a thread-local. */
#ifndef DLE_PROFILE_H
#define DLE_PROFILE_H

#include "dle.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DLE_PROF_OFF, DLE_PROF_COUNT, DLE_PROF_TIMED } dle_profile_mode;

/* Entries after the ops: the fused optimizer steps (optim.h) and the fused elementwise programs of
 * dle.compile (fused.h), which are not ops. */
enum {
  DLE_PROF_SGD_STEP = DLE_NUM_OPS,
  DLE_PROF_ADAGRAD_STEP,
  DLE_PROF_RMSPROP_STEP,
  DLE_PROF_ADAM_STEP,
  DLE_PROF_ADAMW_STEP,
  DLE_PROF_FUSED_ELEMENTWISE,
  DLE_PROF_NUM_ENTRIES
};

typedef struct {
  int64_t calls, flops, bytes;
  double seconds;
} dle_profile_entry;

/* Switches the calling thread's profiler: COUNT counts calls, FLOPs and bytes; TIMED also reads
 * the clock around each call. Turning it on from OFF zeroes the counters; changing between COUNT
 * and TIMED keeps them. Errors only when out of memory. */
dle_status dle_profile_set_mode(dle_profile_mode mode);
dle_profile_mode dle_profile_get_mode(void);
/* The counters, DLE_PROF_NUM_ENTRIES of them (all zero when the profiler never ran). */
const dle_profile_entry *dle_profile_counters(void);
/* "add", "adam_step"...; NULL outside 0..DLE_PROF_NUM_ENTRIES-1. */
const char *dle_profile_entry_name(int entry);

/* FLOPs of one call of op that produced outs from ins (engine/ops/flops.c). */
int64_t dle_op_flops(dle_op op, dle_tensor *const *outs, int nout, dle_tensor *const *ins, int nin,
                     const dle_attrs *attrs);
/* The name of op's FLOP rule, e.g. "per output element" (*per FLOPs each; per may be NULL),
 * "2*m*n*k per batch (+ m*n added)"; "none" when the op counts 0 FLOPs (creation, views, copies,
 * pure data movement). NULL for an invalid op. */
const char *dle_op_flops_rule(dle_op op, int *per);

/* ---- hooks (engine internals) ---- */
/* Non-NULL while this thread's profiler is on; the only thing dle_op_call tests when it is off. */
extern _Thread_local __attribute__((tls_model("initial-exec")))
struct dle_profiler *dle_profiler_on;
/* dle_op_call's body, run by the profiler between its measurements (ops.c). */
dle_status dle_op_call_unprofiled(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                                  const dle_attrs *attrs);
/* dle_op_call while profiling: runs the op and counts it. */
dle_status dle_profile_op_call(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                               const dle_attrs *attrs);
/* Around a fused optimizer step or program: t0 = dle_profile_begin(); ...; dle_profile_end(entry,
 * t0, flops, bytes). Both do nothing when the profiler is off. */
double dle_profile_begin(void);
void dle_profile_end(int entry, double t0, int64_t flops, int64_t bytes);
/* The bytes of t's data as the profiler counts them: a broadcast (stride 0) dim once; 0 for NULL. */
int64_t dle_profile_data_bytes(const dle_tensor *t);

#ifdef __cplusplus
}
#endif

#endif
