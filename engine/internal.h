/* internal.h — helpers shared by the engine's own files (not part of the public API). */
#ifndef DLE_INTERNAL_H
#define DLE_INTERNAL_H

#include "dle.h"
#include "kernel/backend.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Thread-locals read by every op (grad mode, forward-AD mode). The default TLS model of a shared
 * object calls __tls_get_addr on each access; initial-exec is a single %fs-relative load. The
 * few bytes come from the static TLS surplus glibc reserves for dlopen'ed modules. */
#define DLE_HOT_TLS __attribute__((tls_model("initial-exec")))

/* Under AddressSanitizer the per-thread free lists of tensor/storage headers and graph nodes are
 * off: every header is calloc'ed and freed, so a use after release is reported instead of landing
 * in a recycled header. */
#if defined(__SANITIZE_ADDRESS__)
#define DLE_RECYCLE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DLE_RECYCLE 0
#endif
#endif
#ifndef DLE_RECYCLE
#define DLE_RECYCLE 1
#endif

/* DLE_DEBUG from the environment: 1 prints every op, 3 also allocations. */
int dle_debug_level(void);

/* Release a tensor pointer and set it to NULL (safe on NULL). */
#define DLE_RELEASE(t)     \
  do {                     \
    dle_tensor_release(t); \
    (t) = NULL;            \
  } while (0)
/* Return the status of `call` when it failed. */
#define DLE_TRY(call)                     \
  do {                                    \
    if ((call) != DLE_OK) return DLE_ERR; \
  } while (0)

/* Shape text for messages: SHAPE(t) expands to a temporary buffer holding "{2,3}". */
typedef struct {
  char s[128];
} dle_shape_buf;
#define SHAPE(t) (dle_tensor_shape_str((dle_shape_buf){{0}}.s, 128, (t)))

/* Whether nbytes more would go over the memory limit now (dle_set_memory_limit). */
bool dle_memory_over_limit(size_t nbytes);
/* An autograd node's references (dle_node_release is public: bindings drop the grad_fn they hold). */
void dle_node_retain(struct dle_node *n);
/* Records out = detach(in) in the running trace (a tensor made without an op). */
void dle_trace_note_detach(dle_tensor *out, dle_tensor *in);

/* dle_tensor_empty for a shape and dtype already known valid (another tensor's): no checks. */
dle_status dle_tensor_empty_checked(dle_tensor **out, int ndim, const int64_t *sizes,
                                    dle_dtype dtype, dle_device device);

/* Gives *out a tensor of the given shape and dtype: allocates when *out is NULL, otherwise checks
 * that the caller's tensor has exactly that shape and dtype. */
dle_status dle_prepare_out(dle_tensor **out, const char *fn, int ndim, const int64_t *sizes,
                           dle_dtype dt, dle_device dev);

/* Several elements at one address (an expanded tensor, stride 0 over a dim of size > 1): writing
 * into it would give results depending on loop order and threads, so ops refuse it as output. */
bool dle_tensor_overlaps_itself(const dle_tensor *t);
/* a and b are the same view: one storage, offset, dtype, shape and strides. */
bool dle_same_view(const dle_tensor *a, const dle_tensor *b);

/* Contiguous strides for sizes. */
void dle_contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides);
int64_t dle_shape_numel(int ndim, const int64_t *sizes);
bool dle_shape_equal(int na, const int64_t *a, int nb, const int64_t *b);

/* Runs the kernel of `op` on the device of the first output (or input), after checking that
 * every tensor lives there. */
dle_status dle_dispatch(dle_op op, dle_tensor *const *outs, int nout, dle_tensor *const *ins,
                        int nin, const dle_attrs *attrs);

/* A copy of t in dtype dt when it differs (else t retained), into *out. */
dle_status dle_cast_if_needed(dle_tensor **out, dle_tensor *t, dle_dtype dt);

/* Shape and dtype of one result of an op. */
typedef struct {
  int ndim;
  int64_t sizes[DLE_MAX_DIMS];
  dle_dtype dtype;
} dle_result_spec;

/* The last step of a front door that ran its kernel into fresh results r[0..nout) (and copied
 * them into the caller's outputs): when st is DLE_OK each empty slot outs[k] takes r[k]; every
 * other result is released. Returns st. */
static inline dle_status dle_hand_over(dle_tensor **outs, dle_tensor **r, int nout, dle_status st) {
  for (int k = 0; k < nout; k++) {
    if (st == DLE_OK && !outs[k])
      outs[k] = r[k];
    else
      dle_tensor_release(r[k]);
  }
  return st;
}

/* The end of a front door whose kernels want contiguous inputs and fresh contiguous outputs
 * (conv, norm): checks the shapes of the caller's outputs against res (one per output of op),
 * gives the kernel input i cast to in_dt[i] and contiguous (at most 8 inputs), then copies the
 * results into the caller's outputs or hands the fresh ones over. */
dle_status dle_dispatch_contiguous(dle_op op, dle_tensor **outs, const dle_result_spec *res,
                                   dle_tensor *const *ins, int nin, const dle_dtype *in_dt,
                                   const dle_attrs *a);

/* FLOP rules (conventions and dispatch: engine/ops/flops.c). A rule counts one call from its
 * tensors' shapes (count NULL: 0 FLOPs); `per` is its constant per element where it has one. */
typedef struct {
  dle_tensor *const *outs, *const *ins;
  int nout, nin;
  const dle_attrs *a;
} dle_flops_call;
typedef struct {
  const char *name; /* how it counts, for dle.core._op_flops_rule ("none" for 0) */
  int64_t (*count)(const dle_flops_call *c, int per);
  int per;
} dle_flops_rule;
/* The shared rules: nothing (data movement), per element of the first output or input. */
dle_flops_rule dle_flops_none(void);
dle_flops_rule dle_flops_per_out(int per);
dle_flops_rule dle_flops_per_in(int per);
/* Elements of t (0 for NULL), and its last dim (1 for a 0-dim tensor). */
int64_t dle_flops_numel(const dle_tensor *t);
int64_t dle_flops_last_dim(const dle_tensor *t);
/* Each kind's rule, dle_flops_<front> beside its front door (families.def): a kind whose family
 * lacks one fails to link. */
#define DLE_KIND(ID, name, front) dle_flops_rule dle_flops_##front(dle_op op);
#include "ops/families.def"

/* Per-kind front doors (shape rule + dtype rule + dispatch), one file each under engine/ops/. */
typedef dle_status (*dle_forward_fn)(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                                     const dle_attrs *attrs);
/* Declares, and in the family's file defines (`DLE_FORWARD_RULE(reduce) { ... }`), the front door
 * dle_forward_<front> with dle_forward_fn's parameters, named as above but attrs as `a`. A front
 * door may leave any of them unused (the build passes -Wno-unused-parameter). */
#define DLE_FORWARD_RULE(front)                                                                 \
  dle_status dle_forward_##front(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin, \
                                 const dle_attrs *a)
#define DLE_KIND(ID, name, front) DLE_FORWARD_RULE(front);
#include "ops/families.def"

/* 128-bit Philox blocks a random op consumes for n elements of dt (rng.c); the kernels map
 * element i to its block with the same rule. */
int64_t dle_random_blocks(dle_op op, dle_dtype dt, int64_t n);
/* A call of the creation op (full, arange, a random fill) with the sizes, dtype, values f0, f1 and
 * generator in its attrs, into a new tensor *out (engine/ops/copy.c). */
dle_status dle_create_call(dle_op op, dle_tensor **out, int ndim, const int64_t *sizes,
                           dle_dtype dt, double f0, double f1, dle_generator *g);

/* The CPU backend's table (kernels/cpu/backend.c), filled on first use: the engine's one
 * reference into the kernels (backend.c registers it; everything else goes through
 * dle_backend_get). */
const dle_backend *dle_cpu_backend(void);

/* CPU storage allocation with accounting (alloc.c). 64-byte aligned. */
void *dle_cpu_alloc(size_t nbytes);
void dle_cpu_free(void *p, size_t nbytes);

/* ---- hooks of the front door (dle_op_call tests a thread-local each, then hands over) ---- */
/* autocast (engine/autocast.c) */
/* True while this thread's autocast is on; the only thing dle_op_call tests when it is off. */
extern _Thread_local __attribute__((tls_model("initial-exec"))) bool dle_autocast_on;
/* dle_op_call while autocast is on: casts the inputs by the policy, then runs the op with
 * autocast off (so nothing inside it is cast again). */
dle_status dle_autocast_op_call(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                                const dle_attrs *attrs);
/* Pauses the cache (no lookups, no new entries) or resumes it; returns whether it was paused.
 * dle_backward pauses it: a recomputation inside backward (dle.checkpoint) must record its own
 * casts, not reuse nodes of the graph being differentiated. */
bool dle_autocast_pause_cache(bool paused);
/* profile (engine/profile.c) */
/* Non-NULL while this thread's profiler is on; the only thing dle_op_call tests when it is off. */
extern _Thread_local
    __attribute__((tls_model("initial-exec"))) struct dle_profiler *dle_profiler_on;
/* dle_op_call's body, run by the profiler between its measurements (ops.c). */
/* engine/complex.c: an error unless op takes complex operands (or dtype attrs). */
dle_status dle_complex_gate(dle_op op, dle_tensor *const *ins, int nin, const dle_attrs *a);
/* VIEW's front door when attrs carry a dtype: t viewed as its complex or real counterpart
 * (view_as_complex / view_as_real), sharing storage. */
dle_status dle_complex_retype(dle_tensor **out, dle_tensor *t, dle_dtype dt);
/* Differentiable helpers (dle ops, so gradients and tangents flow through them):
 * view_as_complex after a contiguous copy when x's layout needs one; the real / imaginary part as
 * a view (real of a real tensor: itself; imag of one: an error); complex(re, im) of two real
 * tensors of one shape and dtype (dle_conj, the conjugate, is in dle.h). */
dle_status dle_view_as_complex_any(dle_tensor **out, dle_tensor *x);
dle_status dle_real_part(dle_tensor **out, dle_tensor *z);
dle_status dle_imag_part(dle_tensor **out, dle_tensor *z);
dle_status dle_complex_from_parts(dle_tensor **out, dle_tensor *re, dle_tensor *im);
/* A gradient or tangent g cast to dtype dt; complex to real keeps the real part (PyTorch's rule
 * for a real input of an op with a complex result: the imaginary part is not a direction the
 * input can move in). */
dle_status dle_grad_cast(dle_tensor **out, dle_tensor *g, dle_dtype dt);
/* Can a tensor of this dtype require grad or carry a tangent? floats and complex. */
static inline bool dle_dtype_is_differentiable(dle_dtype t) {
  return dle_dtype_is_float(t) || dle_dtype_is_complex(t);
}
/* A front door's complex result computed on the (re, im) view: r (a float {.., 2}, taken over)
 * viewed as complex into outs[0] (copied when given); st is the status so far. */
dle_status dle_complex_result(dle_tensor **outs, dle_tensor *r, dle_status st);
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
/* trace (engine/trace.c) */
/* Non-NULL while this thread traces; the only thing dle_op_call tests when it is off. */
extern _Thread_local __attribute__((tls_model("initial-exec"))) struct dle_trace *dle_tracer_on;
/* dle_op_call while tracing: runs the op with the tracer off, then records it. */
dle_status dle_trace_op_call(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                             const dle_attrs *attrs);

/* ---- matrices, attention (engine/ops/attention.c; the CPU attention kernel reads them too) ---- */
/* Leading dimension of the matrices in t's last two dims (nb batch dims before them) as BLAS takes
 * it: the row stride, or the row length for a single row (BLAS wants ld >= max(1, columns) even
 * where it is never used). */
static inline int64_t dle_matrix_ld(const dle_tensor *t, int nb) {
  int64_t cols = t->sizes[nb + 1] > 1 ? t->sizes[nb + 1] : 1;
  return t->sizes[nb] > 1 ? t->strides[nb] : cols;
}
/* Whether attention's kernel reads or writes t's matrices where they lie: rows contiguous, rows
 * at least a row apart, batch strides not negative (stride 0 where broadcast is fine). The front
 * door copies other operands; the kernel refuses them. */
static inline bool dle_matrices_in_place(const dle_tensor *t, int nb) {
  int64_t cols = t->sizes[nb + 1];
  if (cols > 1 && t->strides[nb + 1] != 1) return false;
  for (int d = 0; d < nb; d++)
    if (t->strides[d] < 0) return false;
  return dle_matrix_ld(t, nb) >= (cols > 1 ? cols : 1);
}
/* A new tensor of like's shape and dims ordered in memory as like's are (see nn_front.h). */
dle_status dle_empty_laid_out_like(dle_tensor **out, const dle_tensor *like, dle_dtype dt);
/* q, k, v: new views of a packed qkv {3, ...} (fn names the caller in the error for other shapes). */
dle_status dle_sdpa_unpack(const char *fn, dle_tensor *qkv, dle_tensor **parts);

#endif
