/* profile.c — the per-thread op profiler (profile.h): counters per op and optimizer step, and
 * the measured wrapper dle_op_call switches to while a profiler is on. */
#include "internal.h"

#include <stdlib.h>

struct dle_profiler {
  dle_profile_mode mode;
  double nested; /* seconds spent in ops nested inside the op being measured */
  dle_profile_entry entry[DLE_PROF_NUM_ENTRIES];
};

_Thread_local DLE_HOT_TLS struct dle_profiler *dle_profiler_on;
/* Kept when switched off, so the counters can still be read after the run. */
static _Thread_local struct dle_profiler *last;

static const char *const step_names[DLE_PROF_NUM_ENTRIES - DLE_NUM_OPS] = {
    "sgd_step", "adagrad_step", "rmsprop_step", "adam_step", "adamw_step", "fused_elementwise"};

dle_status dle_profile_set_mode(dle_profile_mode mode) {
  if (mode != DLE_PROF_OFF && mode != DLE_PROF_COUNT && mode != DLE_PROF_TIMED)
    return dle_error("profile: invalid mode %d", (int)mode);
  if (mode == DLE_PROF_OFF) {
    dle_profiler_on = NULL;
    return DLE_OK;
  }
  if (!last && !(last = calloc(1, sizeof *last))) return dle_error("profile: out of memory");
  if (!dle_profiler_on) memset(last, 0, sizeof *last);
  last->mode = mode;
  dle_profiler_on = last;
  return DLE_OK;
}

dle_profile_mode dle_profile_get_mode(void) {
  return dle_profiler_on ? dle_profiler_on->mode : DLE_PROF_OFF;
}

const dle_profile_entry *dle_profile_counters(void) {
  static const dle_profile_entry zeros[DLE_PROF_NUM_ENTRIES];
  return last ? last->entry : zeros;
}

const char *dle_profile_entry_name(int entry) {
  if (entry >= 0 && entry < DLE_NUM_OPS) return dle_op_table[entry].name;
  if (entry >= DLE_NUM_OPS && entry < DLE_PROF_NUM_ENTRIES) return step_names[entry - DLE_NUM_OPS];
  return NULL;
}

/* Elements a tensor's data occupies: a broadcast (stride 0) dim is read once. */
static int64_t distinct_elements(const dle_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++)
    if (t->strides[d] != 0 || t->sizes[d] == 0) n *= t->sizes[d];
  return n;
}

int64_t dle_profile_data_bytes(const dle_tensor *t) {
  return t ? distinct_elements(t) * (int64_t)dle_dtype_size(t->dtype) : 0;
}

static int64_t bytes_moved(const dle_op_info *info, dle_tensor *const *outs, dle_tensor *const *ins,
                           int nin) {
  if (info->kind == DLE_KIND_VIEW) return 0;
  int64_t b = 0;
  for (int i = 0; i < nin; i++) b += dle_profile_data_bytes(ins[i]);
  for (int k = 0; k < info->nout; k++) b += dle_profile_data_bytes(outs[k]);
  return b;
}

/* Measures one entry: its time minus the time of what ran nested inside it (self time), which
 * is then added to the enclosing entry's nested time. */
double dle_profile_begin(void) {
  struct dle_profiler *p = dle_profiler_on;
  if (!p || p->mode != DLE_PROF_TIMED) return 0;
  return dle_time();
}

static void count(struct dle_profiler *p, int entry, double self, int64_t flops, int64_t bytes) {
  dle_profile_entry *e = &p->entry[entry];
  e->calls++;
  e->seconds += self;
  e->flops += flops;
  e->bytes += bytes;
}

void dle_profile_end(int entry, double t0, int64_t flops, int64_t bytes) {
  struct dle_profiler *p = dle_profiler_on;
  if (!p || entry < 0 || entry >= DLE_PROF_NUM_ENTRIES) return;
  double dt = p->mode == DLE_PROF_TIMED ? dle_time() - t0 : 0;
  count(p, entry, dt, flops, bytes);
  p->nested += dt;
}

dle_status dle_profile_op_call(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                               const dle_attrs *attrs) {
  struct dle_profiler *p = dle_profiler_on;
  bool timed = p->mode == DLE_PROF_TIMED;
  double outer_nested = p->nested, t0 = timed ? dle_time() : 0;
  p->nested = 0;
  dle_status st = dle_op_call_unprofiled(op, outs, ins, nin, attrs);
  double dt = timed ? dle_time() - t0 : 0;
  /* the op may have switched the profiler (it cannot from C ops, but stay safe) */
  if (dle_profiler_on != p) return st;
  double self = dt - p->nested;
  p->nested = outer_nested + dt;
  if (st == DLE_OK) {
    const dle_op_info *info = &dle_op_table[op];
    count(p, op, self, dle_op_flops(op, outs, info->nout, ins, nin, attrs),
          bytes_moved(info, outs, ins, nin));
  }
  return st;
}
