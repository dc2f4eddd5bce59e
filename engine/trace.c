/* trace.c — the per-thread graph tracer (trace.h): the records of the ops dle_op_call ran while
 * it was on, and the notes that make a trace unsafe to replay. */
#include "internal.h"

#include <stdarg.h>
#include <stdlib.h>

_Thread_local DLE_HOT_TLS struct dle_trace *dle_tracer_on;

dle_status dle_trace_begin(void) {
  if (dle_tracer_on) return dle_error("trace: a trace is already running on this thread");
  dle_trace *t = calloc(1, sizeof *t);
  if (!t) return dle_error("trace: out of memory");
  dle_tracer_on = t;
  return DLE_OK;
}

dle_trace *dle_trace_end(void) {
  dle_trace *t = dle_tracer_on;
  dle_tracer_on = NULL;
  return t;
}

bool dle_trace_active(void) { return dle_tracer_on != NULL; }

void dle_trace_free(dle_trace *t) {
  if (!t) return;
  for (int i = 0; i < t->n; i++) {
    dle_trace_record *r = &t->rec[i];
    for (int k = 0; k < r->nin; k++) dle_tensor_release(r->ins[k]);
    for (int k = 0; k < r->nout; k++) dle_tensor_release(r->outs[k]);
    free(r->ins);
  }
  free(t->rec);
  free(t);
}

void dle_trace_note_unsafe(const char *fmt, ...) {
  dle_trace *t = dle_tracer_on;
  if (!t || t->unsafe[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->unsafe, sizeof t->unsafe, fmt, ap);
  va_end(ap);
}

/* Appends a record holding references to ins and outs; out of memory makes the trace unsafe
 * rather than failing the op, which already ran. */
static void append(dle_trace *t, int op, const dle_attrs *attrs, dle_tensor *const *ins, int nin,
                   dle_tensor *const *outs, int nout, bool given, bool fresh) {
  if (t->n == t->cap) {
    int cap = t->cap ? 2 * t->cap : 64;
    dle_trace_record *r = realloc(t->rec, sizeof *r * (size_t)cap);
    if (!r) {
      dle_trace_note_unsafe("trace: out of memory recording %d ops", t->n);
      return;
    }
    t->rec = r, t->cap = cap;
  }
  dle_tensor **in_copy = NULL;
  if (nin > 0 && !(in_copy = malloc(sizeof *in_copy * (size_t)nin))) {
    dle_trace_note_unsafe("trace: out of memory recording %d ops", t->n);
    return;
  }
  dle_trace_record *r = &t->rec[t->n++];
  memset(r, 0, sizeof *r);
  r->op = op;
  if (attrs) r->attrs = *attrs;
  r->nin = nin, r->nout = nout, r->ins = in_copy;
  for (int i = 0; i < nin; i++) dle_tensor_retain(in_copy[i] = ins[i]);
  for (int k = 0; k < nout; k++) dle_tensor_retain(r->outs[k] = outs[k]);
  r->given = given, r->fresh = fresh;
  r->grad_enabled = dle_grad_enabled();
}

dle_status dle_trace_op_call(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                             const dle_attrs *attrs) {
  dle_trace *t = dle_tracer_on;
  const dle_op_info *info = dle_op_get_info(op);
  bool given = info && info->nout > 0 && outs[0];
  /* A buffer never written (dle.rand's own output, made empty by the binding) is a new tensor
   * for the graph, not a write into something that existed before. */
  bool fresh = given && outs[0]->storage->version == 0 && !outs[0]->grad_fn;
  for (int k = 1; info && k < info->nout; k++)
    if (outs[k])
      dle_trace_note_unsafe("%s: an output given for result %d is not traced", info->name, k + 1);
  dle_tracer_on = NULL; /* the op's own inner ops are part of it */
  dle_status st = dle_op_call(op, outs, ins, nin, attrs);
  dle_tracer_on = t;
  if (st == DLE_OK) append(t, (int)op, attrs, ins, nin, outs, info->nout, given, fresh);
  return st;
}

void dle_trace_note_detach(dle_tensor *out, dle_tensor *in) {
  dle_trace *t = dle_tracer_on;
  if (t) append(t, DLE_TRACE_DETACH, NULL, &in, 1, &out, 1, false, false);
}

void dle_trace_note_record(int op, const dle_attrs *attrs, dle_tensor *const *ins, int nin,
                           dle_tensor *out) {
  dle_trace *t = dle_tracer_on;
  if (t) append(t, op, attrs, ins, nin, &out, 1, false, false);
}
