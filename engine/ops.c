/* ops.c — the front door: the op table from ops.def, argument checks common to all ops, and
 * dispatch to the per-kind shape rules (files under engine/ops/) and the device kernels. */
#include "internal.h"
#include "autograd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const dle_op_info dle_op_table[DLE_NUM_OPS] = {
#define DLE_OP(id, nm, ni, no, k, fl) \
  [DLE_OP_##id] = {.name = nm, .nin = ni, .nout = no, .kind = k, .flags = fl},
#include "ops.def"
};

/* Each kind has one shape/dtype rule; it allocates outputs and calls dle_dispatch. */
static const dle_forward_fn forward_of_kind[DLE_NUM_KINDS] = {
#define DLE_KIND(ID, name, front) [DLE_KIND_##ID] = dle_forward_##front,
#include "ops/families.def"
};

const char *dle_op_kind_name(dle_op_kind kind) {
  static const char *const names[DLE_NUM_KINDS] = {
#define DLE_KIND(ID, name, front) [DLE_KIND_##ID] = #name,
#include "ops/families.def"
  };
  return (unsigned)kind < DLE_NUM_KINDS ? names[kind] : NULL;
}

dle_op dle_op_by_name(const char *name) {
  for (int i = 0; i < DLE_NUM_OPS; i++)
    if (strcmp(dle_op_table[i].name, name) == 0) return (dle_op)i;
  return DLE_NUM_OPS;
}

int dle_debug_level(void) {
  static int level = -1;
  if (level < 0) {
    const char *s = getenv("DLE_DEBUG");
    level = s ? atoi(s) : 0;
  }
  return level;
}

/* DLE_DEBUG >= 1: one line per op on stderr with its inputs' shapes and dtypes. */
static void trace_op(const dle_op_info *info, dle_tensor *const *ins, int nin) {
  fprintf(stderr, "[dle] %s", info->name);
  for (int i = 0; i < nin; i++)
    fprintf(stderr, " %s%s", SHAPE(ins[i]), dle_dtype_name(ins[i]->dtype));
  fputc('\n', stderr);
}

static bool is_elementwise(dle_op_kind k) {
  return k == DLE_KIND_UNARY || k == DLE_KIND_BINARY || k == DLE_KIND_COMPARE ||
         k == DLE_KIND_WHERE;
}

/* An output too large to allocate: the message names the op, not the allocator. */
static void name_allocation_failure(const dle_op_info *info) {
  if (strncmp(dle_last_error(), "empty: ", 7) != 0) return;
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", dle_last_error() + 7);
  dle_error("%s: %s", info->name, msg);
}

/* The hooks: while dle.autocast runs, autocast.c casts the inputs by its policy first (then
 * calls back here with autocast off); while dle.graph.trace runs, trace.c records the op (then
 * calls back here with the tracer off, so the op's inner ops are not recorded); while
 * dle.profile/dle.flops run, every op is measured by profile.c. When off, each is one test of a
 * thread-local. */
dle_status dle_op_call(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                       const dle_attrs *attrs) {
  if (__builtin_expect(dle_autocast_on, 0)) return dle_autocast_op_call(op, outs, ins, nin, attrs);
  if (__builtin_expect(dle_tracer_on != NULL, 0))
    return dle_trace_op_call(op, outs, ins, nin, attrs);
  if (__builtin_expect(dle_profiler_on != NULL, 0))
    return dle_profile_op_call(op, outs, ins, nin, attrs);
  return dle_op_call_unprofiled(op, outs, ins, nin, attrs);
}

/* The small-op lane: an elementwise op on contiguous CPU tensors of one float dtype and one
 * shape (a binary op's operand may also be 0-dim, as `x * 2` makes it), none needing a gradient
 * or a tangent, and no output given. That is most ops of a small model's step, and on a few
 * elements their cost is all fixed: this lane allocates the result and calls the backend's
 * small_elementwise, skipping the shape/dtype rule, the device checks and the loop iterator. A
 * float op computes in its inputs' dtype (logical_not aside, whose result is bool), so the rule
 * would agree. Returns the input whose shape the result takes, or NULL when the lane is closed. */
static const dle_tensor *small_lane_shape(dle_op op, const dle_op_info *info, dle_tensor **outs,
                                          dle_tensor *const *ins, int nin) {
  if ((info->kind != DLE_KIND_UNARY && info->kind != DLE_KIND_BINARY) || outs[0] ||
      op == DLE_OP_LOGICAL_NOT || op == DLE_OP_ISNAN || op == DLE_OP_ISINF ||
      op == DLE_OP_ISFINITE) /* bool results */
    return NULL;
  const dle_tensor *x = nin > 1 && ins[0]->ndim == 0 ? ins[1] : ins[0];
  if (!dle_dtype_is_float(x->dtype)) return NULL;
  bool grad_on = dle_grad_enabled();
  for (int i = 0; i < nin; i++) {
    const dle_tensor *t = ins[i];
    if ((grad_on && t->requires_grad) || t->tangent || t->dtype != x->dtype ||
        t->storage->device.type != DLE_CPU)
      return NULL;
    if (t != x) {
      if (t->ndim == 0) continue; /* broadcast: the kernel reads it with stride 0 */
      if (!dle_shape_equal(t->ndim, t->sizes, x->ndim, x->sizes)) return NULL;
    }
    if (!dle_tensor_is_contiguous(t)) return NULL;
  }
  return x;
}

static dle_status small_lane(dle_op op, const dle_op_info *info, const dle_tensor *x,
                             dle_tensor **out, dle_tensor *const *ins, int nin,
                             const dle_attrs *attrs) {
  dle_status st =
      dle_tensor_empty_checked(out, x->ndim, x->sizes, x->dtype, (dle_device){DLE_CPU, 0});
  if (st != DLE_OK) {
    name_allocation_failure(info);
    return st;
  }
  dle_tensor_bump_version(*out); /* as dle_dispatch does for every output */
  const dle_backend *b = dle_backend_get(DLE_CPU);
  if (b->small_elementwise && b->small_elementwise(op, *out, ins, nin, attrs)) return DLE_OK;
  st = dle_dispatch(op, out, 1, ins, nin, attrs);
  if (st != DLE_OK) DLE_RELEASE(*out);
  return st;
}

dle_status dle_op_call_unprofiled(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                                  const dle_attrs *attrs) {
  const dle_op_info *info = dle_op_get_info(op);
  if (!info) return dle_error("op_call: invalid op id %d", (int)op);
  if (info->nin >= 0 ? nin != info->nin : nin < 1)
    return dle_error("%s: expected %d tensor inputs, got %d", info->name, info->nin, nin);
  for (int i = 0; i < nin; i++)
    if (!ins[i]) return dle_error("%s: input %d is missing", info->name, i + 1);
  if (dle_debug_level() >= 1) trace_op(info, ins, nin);
  static const dle_attrs no_attrs;
  if (!attrs) attrs = &no_attrs;
  DLE_TRY(dle_complex_gate(op, ins, nin, attrs));
  const dle_tensor *lane = small_lane_shape(op, info, outs, ins, nin);
  if (lane) return small_lane(op, info, lane, outs, ins, nin, attrs);
  int nout = info->nout;
  bool given[DLE_MAX_OUTS] = {false};
  for (int k = 0; k < nout; k++) given[k] = outs[k] != NULL;
  bool grad_on = dle_grad_enabled();
  for (int k = 0; k < nout; k++)
    if (given[k] && grad_on && outs[k]->requires_grad && !outs[k]->grad_fn)
      return dle_error(
          "%s: a leaf tensor that requires grad (shape %s) cannot be written in place; "
          "do it under no_grad or on a detached tensor",
          info->name, SHAPE(outs[k]));
  bool record = dle_autograd_wants(op, ins, nin);
  for (int k = 0; k < nout; k++)
    if (given[k] && grad_on && (record || outs[k]->requires_grad) &&
        (outs[k]->storage->grad_views || (record && outs[k]->is_view)))
      return dle_error(
          "%s: recording an in-place write into a view, or into a tensor whose "
          "storage a recorded view shares (shape %s), is not supported: the other "
          "views' gradients would be wrong; write into a clone or under no_grad",
          info->name, SHAPE(outs[k]));
  bool tangents = dle_forward_ad_wants(ins, nin);
  if (!record && !tangents && nout == 1 && !given[0] && is_elementwise(info->kind)) {
    /* The commonest call, kept short: with nothing to record and no tangent, an elementwise
     * op's forward is all there is. Its inner calls (casts, copies) only see tensors made from
     * these inputs, which record nothing either, so grad mode need not be switched off. */
    dle_status st = forward_of_kind[info->kind](op, outs, ins, nin, attrs);
    if (st != DLE_OK) name_allocation_failure(info);
    return st;
  }
  uint32_t small[8], *versions = small;
  if (record && nin > 8 && !(versions = malloc(sizeof *versions * (size_t)nin)))
    return dle_error("%s: out of memory", info->name);
  for (int i = 0; record && i < nin; i++) versions[i] = ins[i]->storage->version;

  /* An op's own forward computation (casts, copies, views inside it) is not recorded: its
   * gradient rule covers the whole op. */
  bool was_grad = dle_set_grad_enabled(false), was_fwd = dle_forward_ad_set_enabled(false);
  dle_status st = forward_of_kind[info->kind](op, outs, ins, nin, attrs);
  dle_set_grad_enabled(was_grad);
  dle_forward_ad_set_enabled(was_fwd);
  if (st != DLE_OK) name_allocation_failure(info);

  if (st == DLE_OK && record) {
    st = dle_autograd_record(op, attrs, outs, nout, ins, nin, versions);
  } else if (st == DLE_OK && grad_on) {
    /* written in place by something without gradient: its old history no longer applies */
    for (int k = 0; k < nout; k++)
      if (given[k] && outs[k]->grad_fn) {
        dle_node_release(outs[k]->grad_fn);
        outs[k]->grad_fn = NULL;
        outs[k]->requires_grad = false;
      }
  }
  if (st == DLE_OK && tangents) st = dle_forward_ad_apply(op, attrs, ins, nin, outs, nout);
  if (versions != small) free(versions);
  if (st != DLE_OK)
    for (int k = 0; k < nout; k++)
      if (!given[k]) DLE_RELEASE(outs[k]);
  return st;
}

static bool on_device(const dle_tensor *t, dle_device dev) {
  dle_device d = dle_tensor_device(t);
  return d.type == dev.type && d.index == dev.index;
}

static __attribute__((noinline, cold)) dle_status device_mismatch(const char *fn, dle_tensor *t,
                                                                  dle_device dev) {
  char b1[32], b2[32];
  return dle_error("%s: expected all tensors on %s, but one is on %s", fn,
                   dle_device_str(b1, sizeof b1, dev),
                   dle_device_str(b2, sizeof b2, dle_tensor_device(t)));
}

dle_status dle_dispatch(dle_op op, dle_tensor *const *outs, int nout, dle_tensor *const *ins,
                        int nin, const dle_attrs *attrs) {
  const char *fn = dle_op_table[op].name;
  dle_device dev = nout ? dle_tensor_device(outs[0]) : dle_tensor_device(ins[0]);
  for (int i = 0; i < nout; i++)
    if (!on_device(outs[i], dev)) return device_mismatch(fn, outs[i], dev);
  for (int i = 0; i < nin; i++)
    if (!on_device(ins[i], dev)) return device_mismatch(fn, ins[i], dev);
  const dle_backend *b = dle_backend_get(dev.type);
  if (!b) return dle_error("%s: %s", fn, dle_backend_unavailable_reason(dev.type));
  if (!b->kernels[op]) {
    char buf[32];
    return dle_error(
        "%s: not supported on device %s (the %s backend has no kernel for this op; "
        "move the tensors to the CPU with :cpu())",
        fn, dle_device_str(buf, sizeof buf, dev), b->name);
  }
  for (int i = 0; i < nout; i++) dle_tensor_bump_version(outs[i]);
  return b->kernels[op](op, outs, ins, nin, attrs);
}

dle_status dle_dispatch_contiguous(dle_op op, dle_tensor **outs, const dle_result_spec *res,
                                   dle_tensor *const *ins, int nin, const dle_dtype *in_dt,
                                   const dle_attrs *a) {
  const char *fn = dle_op_table[op].name;
  int nout = dle_op_table[op].nout;
  if (nin > 8) return dle_error("%s: too many inputs (%d) for a contiguous kernel", fn, nin);
  for (int k = 0; k < nout; k++)
    if (outs[k] && !dle_shape_equal(outs[k]->ndim, outs[k]->sizes, res[k].ndim, res[k].sizes)) {
      char buf[128];
      return dle_error("%s: result of shape %s cannot be written into an output of shape %s", fn,
                       dle_shape_str(buf, sizeof buf, res[k].ndim, res[k].sizes), SHAPE(outs[k]));
    }
  dle_tensor *cin[8] = {NULL}, *r[DLE_MAX_OUTS] = {NULL};
  dle_status st = DLE_OK;
  for (int i = 0; i < nin && st == DLE_OK; i++) {
    dle_tensor *c = NULL;
    st = dle_cast_if_needed(&c, ins[i], in_dt[i]);
    if (st == DLE_OK) st = dle_contiguous(&cin[i], c);
    dle_tensor_release(c);
  }
  for (int k = 0; k < nout && st == DLE_OK; k++)
    st =
        dle_tensor_empty(&r[k], res[k].ndim, res[k].sizes, res[k].dtype, dle_tensor_device(ins[0]));
  if (st == DLE_OK) st = dle_dispatch(op, r, nout, cin, nin, a);
  for (int k = 0; k < nout && st == DLE_OK; k++)
    if (outs[k]) st = dle_copy_(outs[k], r[k]);
  for (int i = 0; i < nin; i++) dle_tensor_release(cin[i]);
  return dle_hand_over(outs, r, nout, st);
}

dle_status dle_cast_if_needed(dle_tensor **out, dle_tensor *t, dle_dtype dt) {
  if (t->dtype == dt) {
    dle_tensor_retain(t);
    *out = t;
    return DLE_OK;
  }
  *out = NULL;
  return dle_to_dtype(out, t, dt);
}
