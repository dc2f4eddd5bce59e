/* trace.h — the graph tracer behind dle.graph.trace and dle.compile (engine/trace.c).
 *
 * While a thread's tracer is on, every op called from outside the engine (dle_op_call at depth 0:
 * bindings, Lua layers, gradient rules run by dle_backward) is appended to a list of records with
 * its inputs, outputs (all retained), attrs and the grad mode it ran in. Ops an op runs inside
 * itself (its casts, copies, views) are not recorded: the outer record replays them. The Lua side
 * (lua/dle/graph.lua) turns the records into a graph by tensor identity.
 *
 *   dle_trace_begin();
 *   ... run ops ...
 *   dle_trace *t = dle_trace_end();      // t->rec[0..n-1], t->unsafe[0] != 0 when unsafe
 *   dle_trace_free(t);
 *
 * Besides ops, the tracer hears of things a replay could not repeat: a tensor's values read into
 * Lua (item, totable, printing), optimizer steps, gradients stored into .grad, custom autograd
 * functions, tangents. Each marks the trace unsafe with a reason (the first one is kept). detach
 * makes a tensor without an op, so it is recorded as the pseudo-op DLE_TRACE_DETACH.
 *
 * The state is per thread; when off, the cost per op is one test of a thread-local. */
#ifndef DLE_TRACE_H
#define DLE_TRACE_H

#include "dle.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Pseudo-ops after the op table's ids. */
enum { DLE_TRACE_DETACH = DLE_NUM_OPS };

typedef struct {
  int op;                          /* an op id, or DLE_TRACE_DETACH */
  dle_attrs attrs;
  int nin, nout;
  dle_tensor **ins;                /* nin, retained */
  dle_tensor *outs[DLE_MAX_OUTS];  /* nout, retained */
  bool given;                      /* outs[0] was the caller's (in place, out=, a random fill) */
  bool fresh;                      /* ...and a never written buffer (version 0): a new tensor */
  bool grad_enabled;               /* grad mode the op ran in */
} dle_trace_record;

typedef struct dle_trace {
  dle_trace_record *rec;
  int n, cap;
  char unsafe[256];                /* why a replay would differ; empty when safe */
} dle_trace;

/* Starts tracing on this thread; an error when a trace is already running here. */
dle_status dle_trace_begin(void);
/* Stops and hands the records over (NULL when no trace was running). */
dle_trace *dle_trace_end(void);
void dle_trace_free(dle_trace *t);
bool dle_trace_active(void);
/* Marks the running trace unsafe (printf-style reason); nothing when no trace runs. */
void dle_trace_note_unsafe(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Records out = detach(in) (a tensor made without an op). */
void dle_trace_note_detach(dle_tensor *out, dle_tensor *in);

/* ---- hooks (engine internals) ---- */
/* Non-NULL while this thread traces; the only thing dle_op_call tests when it is off. */
extern _Thread_local __attribute__((tls_model("initial-exec"))) struct dle_trace *dle_tracer_on;
/* dle_op_call while tracing: runs the op with the tracer off, then records it. */
dle_status dle_trace_op_call(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                             const dle_attrs *attrs);

#ifdef __cplusplus
}
#endif

#endif
