/* autocast.c — the mixed-precision policy of dle_op_call (autocast.h): the per-thread state, the
 * rule of each op, and the casts made before an op runs. */
#include "internal.h"

#include "autograd.h"

#include <stdlib.h>

_Thread_local DLE_HOT_TLS bool dle_autocast_on;
static _Thread_local dle_dtype autocast_dtype = DLE_BF16;
static _Thread_local int region_depth;   /* dle_autocast_enter calls not yet exited */
static _Thread_local bool cache_enabled; /* set by the innermost region */
static _Thread_local bool cache_paused;  /* by dle_backward */

/* PyTorch's lists, restricted to dle's ops. Lower precision: the products, where float16/
 * bfloat16 halve the bytes moved and the kernels still accumulate in float32. Float32: ops whose
 * result loses too much in 16 bits (exp/log/pow ranges, sums over many elements, normalizations,
 * losses). Gradient ops (*_grad*, *_backward) are absent on purpose: they run in the dtypes their
 * forward recorded. */
#define L DLE_AUTOCAST_LOWER
#define F DLE_AUTOCAST_FLOAT32
static const unsigned char rules[DLE_NUM_OPS] = {
    [DLE_OP_MATMUL] = L,
    [DLE_OP_CONV2D] = L,
    [DLE_OP_SDPA] = L,

    [DLE_OP_EXP] = F,
    [DLE_OP_LOG] = F,
    [DLE_OP_EXPM1] = F,
    [DLE_OP_LOG1P] = F,
    [DLE_OP_RSQRT] = F,
    [DLE_OP_RECIPROCAL] = F,
    [DLE_OP_POW] = F,
    [DLE_OP_POW_SCALAR] = F,
    [DLE_OP_SUM] = F,
    [DLE_OP_PROD] = F,
    [DLE_OP_MEAN] = F,
    [DLE_OP_VAR] = F,
    [DLE_OP_STD] = F,
    [DLE_OP_LOGSUMEXP] = F,
    [DLE_OP_SOFTMAX] = F,
    [DLE_OP_LOG_SOFTMAX] = F,
    [DLE_OP_LAYER_NORM] = F,
    [DLE_OP_BATCH_NORM] = F,
    [DLE_OP_CROSS_ENTROPY] = F,
    [DLE_OP_SOFT_CROSS_ENTROPY] = F,
    [DLE_OP_NLL_LOSS] = F,
    [DLE_OP_MSE_LOSS] = F,
    [DLE_OP_BCE_WITH_LOGITS] = F,
};
#undef L
#undef F

dle_autocast_rule dle_autocast_rule_of(dle_op op) {
  return (unsigned)op < DLE_NUM_OPS ? (dle_autocast_rule)rules[op] : DLE_AUTOCAST_KEEP;
}

dle_status dle_autocast_set(bool on, dle_dtype dt) {
  if (dt != DLE_F16 && dt != DLE_BF16)
    return dle_error("autocast: dtype must be float16 or bfloat16, got %s", dle_dtype_name(dt));
  autocast_dtype = dt;
  dle_autocast_on = on;
  return DLE_OK;
}

bool dle_autocast_enabled(void) { return dle_autocast_on; }

dle_dtype dle_autocast_dtype(void) { return autocast_dtype; }

bool dle_autocast_set_enabled(bool on) {
  bool was = dle_autocast_on;
  dle_autocast_on = on;
  return was;
}

/* ---------------------------------------------------------------- the cast cache */

/* One cached cast: src cast to dtype in grad mode grad_on, while src's storage was at src_version
 * and the cast's at cast_version. The cache holds a reference to both tensors: src cannot die and
 * have its address reused by another tensor while its entry lives. */
typedef struct {
  dle_tensor *src, *cast;
  dle_dtype dtype;
  bool grad_on;
  uint32_t src_version, cast_version;
} cached_cast;

/* A region touches tens to hundreds of parameters: a linear scan is as fast as hashing there. */
static _Thread_local struct {
  cached_cast *at;
  int n, cap;
} cache;

/* Casts of parameters only, as PyTorch: float32 leaves that require grad, cast down. A tensor
 * carrying a forward-mode tangent is left out (its cast carries a cast tangent, which a new tangent
 * would make stale), and so is everything a trace sees (the trace must record the cast from the
 * live parameter, not hold a cast made before it began). */
static bool cacheable(const dle_tensor *t, dle_autocast_rule r) {
  return r == DLE_AUTOCAST_LOWER && t->dtype == DLE_F32 && t->requires_grad && !t->grad_fn &&
         !t->tangent && cache_enabled && !cache_paused && !dle_tracer_on;
}

/* Grad mode is part of the key: a cast made under no_grad has no grad_fn, and served to an op that
 * records it would cut the parameter out of the graph. Keying on it (rather than caching with grad
 * mode on only) also lets a no_grad loop inside a region, such as generation, reuse its casts. */
static cached_cast *cache_find(const dle_tensor *src, dle_dtype dt, bool grad_on) {
  for (int i = 0; i < cache.n; i++) {
    cached_cast *e = &cache.at[i];
    if (e->src == src && e->dtype == dt && e->grad_on == grad_on) return e;
  }
  return NULL;
}

/* False once src was written (an optimizer step inside the region), or the cast was (through a
 * view of it that escaped into an in-place op), or a backward without retain_graph went through
 * the cast's node (a second one through it would fail): then it must be made again. */
static bool cache_entry_current(const cached_cast *e) {
  return e->src_version == e->src->storage->version &&
         e->cast_version == e->cast->storage->version &&
         !(e->cast->grad_fn && dle_node_freed(e->cast->grad_fn));
}

static void cache_entry_release(cached_cast *e) {
  dle_tensor_release(e->src);
  dle_tensor_release(e->cast);
}

/* Stores cast as src's cast into e, or into a new entry; keeps nothing when memory runs out (the
 * cast is still good for this use). */
static void cache_store(cached_cast *e, dle_tensor *src, dle_tensor *cast, bool grad_on) {
  if (e) {
    cache_entry_release(e);
  } else {
    if (cache.n == cache.cap) {
      int cap = cache.cap ? 2 * cache.cap : 16;
      cached_cast *at = realloc(cache.at, sizeof *at * (size_t)cap);
      if (!at) return;
      cache.at = at, cache.cap = cap;
    }
    e = &cache.at[cache.n++];
  }
  dle_tensor_retain(src);
  dle_tensor_retain(cast);
  *e =
      (cached_cast){src, cast, cast->dtype, grad_on, src->storage->version, cast->storage->version};
}

static void cache_clear(void) {
  for (int i = 0; i < cache.n; i++) cache_entry_release(&cache.at[i]);
  free(cache.at);
  cache.at = NULL, cache.n = cache.cap = 0;
}

/* *out = src cast to dt, from the cache when a current cast is there, else made and stored. */
static dle_status cast_through_cache(dle_tensor **out, dle_tensor *src, dle_dtype dt) {
  bool grad_on = dle_grad_enabled();
  cached_cast *e = cache_find(src, dt, grad_on);
  if (e && cache_entry_current(e)) {
    dle_tensor_retain(e->cast);
    *out = e->cast;
    return DLE_OK;
  }
  *out = NULL;
  DLE_TRY(dle_to_dtype(out, src, dt));
  cache_store(e, src, *out, grad_on);
  return DLE_OK;
}

/* ---------------------------------------------------------------- regions */

dle_status dle_autocast_enter(dle_dtype dt, bool cache, dle_autocast_mode *prev) {
  *prev = (dle_autocast_mode){dle_autocast_on, autocast_dtype, cache_enabled};
  DLE_TRY(dle_autocast_set(true, dt));
  cache_enabled = cache;
  region_depth++;
  return DLE_OK;
}

void dle_autocast_exit(const dle_autocast_mode *prev) {
  dle_autocast_on = prev->on;
  autocast_dtype = prev->dtype;
  cache_enabled = prev->cache;
  if (region_depth > 0 && --region_depth == 0) cache_clear();
}

bool dle_autocast_pause_cache(bool paused) {
  bool was = cache_paused;
  cache_paused = paused;
  return was;
}

/* The dtype an input of dtype have takes under rule r (have itself when it is left alone). As in
 * PyTorch, float64 and non-float inputs are never cast. */
static dle_dtype cast_to(dle_autocast_rule r, dle_dtype have) {
  if (r == DLE_AUTOCAST_LOWER && dle_dtype_is_float(have) && have != DLE_F64) return autocast_dtype;
  if (r == DLE_AUTOCAST_FLOAT32 && (have == DLE_F16 || have == DLE_BF16)) return DLE_F32;
  return have;
}

dle_status dle_autocast_cast(dle_tensor **out, dle_tensor *t, dle_autocast_rule r) {
  dle_dtype dt = cast_to(r, t->dtype);
  if (cacheable(t, r) && dt != t->dtype) return cast_through_cache(out, t, dt);
  return dle_cast_if_needed(out, t, dt);
}

static dle_status call_with_policy(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                                   const dle_attrs *attrs) {
  const dle_op_info *info = dle_op_get_info(op);
  dle_autocast_rule r = dle_autocast_rule_of(op);
  bool given = false; /* out= and in-place forms keep their output's dtype: not autocast */
  for (int k = 0; info && k < info->nout; k++) given = given || outs[k];
  bool any = false;
  for (int i = 0; r != DLE_AUTOCAST_KEEP && !given && i < nin && !any; i++)
    any = ins[i] && cast_to(r, ins[i]->dtype) != ins[i]->dtype;
  if (!any) return dle_op_call(op, outs, ins, nin, attrs);

  dle_tensor *small[8] = {NULL}, **cast = small;
  if (nin > 8 && !(cast = calloc((size_t)nin, sizeof *cast)))
    return dle_error("%s: out of memory", info->name);
  dle_status st = DLE_OK;
  /* a missing input stays NULL: the front door names it */
  for (int i = 0; i < nin && st == DLE_OK; i++)
    if (ins[i]) st = dle_autocast_cast(&cast[i], ins[i], r);
  if (st == DLE_OK) st = dle_op_call(op, outs, cast, nin, attrs);
  for (int i = 0; i < nin; i++) dle_tensor_release(cast[i]);
  if (cast != small) free(cast);
  return st;
}

dle_status dle_autocast_op_call(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                                const dle_attrs *attrs) {
  /* Off while the casts and the op run: neither they nor the ops the op makes inside (its own
   * casts, copies, views, forward-mode rules) are autocast again. */
  dle_autocast_on = false;
  dle_status st = call_with_policy(op, outs, ins, nin, attrs);
  dle_autocast_on = true;
  return st;
}
