/* autocast.h — mixed precision (dle.autocast): a per-thread autocast dtype and the policy the
 * front door applies while it is on (engine/autocast.c). As PyTorch's autocast:
 *
 *   lower precision  matmul (mm, bmm, linear, addmm, einsum's products), conv2d, sdpa: their
 *                    float inputs (float64 aside) are cast to the autocast dtype; the kernels
 *                    accumulate in float32 and round once.
 *   float32          softmax, log_softmax, logsumexp, layer_norm, batch_norm, the losses,
 *                    exp/log/pow-like unary ops, sum/prod/mean/var/std: float16/bfloat16 inputs
 *                    are cast up to float32.
 *   anything else    unchanged (the usual promotion: a bfloat16 + float32 add is float32).
 *
 * The casts are ordinary recorded copy ops, so gradients flow back through them in the dtypes
 * forward saw (a float32 parameter of a bfloat16 matmul gets a float32 .grad). The policy applies
 * to calls made from outside the engine only: an op's own inner ops, the policy's casts and
 * everything a backward pass runs (dle_backward switches autocast off) are left as they are.
 * Ops given an output (in-place and out= forms) are not autocast either, as in PyTorch.
 *
 *   dle_autocast_set(true, DLE_BF16);
 *   dle_matmul(&y, x, w);               // y is bfloat16
 *   dle_autocast_set(false, DLE_BF16);
 *
 * The state is per thread, like grad mode. When off, the cost per op is one test of a
 * thread-local.
 *
 * Regions and the cast cache (PyTorch's autocast cache): dle.autocast runs its function between
 * dle_autocast_enter and dle_autocast_exit. Inside a region, the lower-precision cast of a float32
 * leaf that requires grad (a parameter) is made once and served to every op that needs it again
 * (a layer applied at every step of an unrolled RNN, tied embeddings), unless the weight was
 * written since (its storage version is part of the key). The cached cast is the recorded copy, so
 * its uses' gradients meet there and reach the float32 leaf summed. The outermost exit releases
 * everything cached. Activations, non-leaves, float64 and integer tensors are cast at each use. */
#ifndef DLE_AUTOCAST_H
#define DLE_AUTOCAST_H

#include "dle.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Turns this thread's autocast on in dtype dt (DLE_F16 or DLE_BF16), or off (on false: dt is
 * still checked and kept as the dtype a later dle_autocast_set_enabled(true) uses). Any other
 * dtype is an error naming autocast and the dtype; the state is then unchanged. */
dle_status dle_autocast_set(bool on, dle_dtype dt);
bool dle_autocast_enabled(void);
/* The autocast dtype (bfloat16 until set, as PyTorch's CPU autocast), also while off. */
dle_dtype dle_autocast_dtype(void);
/* Switches autocast off or back on without changing its dtype; returns the previous state. For
 * passes that must run in the dtypes forward recorded (dle_backward). */
bool dle_autocast_set_enabled(bool on);

/* The mode a region changes, for dle_autocast_exit to put back. */
typedef struct {
  bool on;
  dle_dtype dtype;
  bool cache;
} dle_autocast_mode;

/* Enters a region: autocast on in dt (checked as dle_autocast_set; on an error nothing changes),
 * its float32 parameters' casts cached when cache is true. *prev gets the mode to restore. */
dle_status dle_autocast_enter(dle_dtype dt, bool cache, dle_autocast_mode *prev);
/* Leaves the region entered with prev: its mode comes back; leaving the outermost region empties
 * the cache. Called however the region ends (an error included). */
void dle_autocast_exit(const dle_autocast_mode *prev);

/* What the policy does to op's inputs. */
typedef enum { DLE_AUTOCAST_KEEP, DLE_AUTOCAST_LOWER, DLE_AUTOCAST_FLOAT32 } dle_autocast_rule;
dle_autocast_rule dle_autocast_rule_of(dle_op op);

/* ---- hooks (engine internals) ---- */
/* True while this thread's autocast is on; the only thing dle_op_call tests when it is off. */
extern _Thread_local __attribute__((tls_model("initial-exec"))) bool dle_autocast_on;
/* dle_op_call while autocast is on: casts the inputs by the policy, then runs the op with
 * autocast off (so nothing inside it is cast again). */
dle_status dle_autocast_op_call(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                                const dle_attrs *attrs);
/* *out = t as rule r wants it under this thread's autocast dtype (t itself, retained, when left
 * alone), through the cache when t qualifies. For ops that apply the policy themselves (einsum). */
dle_status dle_autocast_cast(dle_tensor **out, dle_tensor *t, dle_autocast_rule r);
/* Pauses the cache (no lookups, no new entries) or resumes it; returns whether it was paused.
 * dle_backward pauses it: a recomputation inside backward (dle.checkpoint) must record its own
 * casts, not reuse nodes of the graph being differentiated. */
bool dle_autocast_pause_cache(bool paused);

#ifdef __cplusplus
}
#endif

#endif
