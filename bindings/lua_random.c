/* lua_random.c — random numbers for Lua: dle.Generator objects, seeding and RNG state,
 * rand/randn/randint (and their _like forms), in-place fills (uniform_, normal_, random_,
 * bernoulli_), bernoulli and randperm. All streams come from the engine's Philox generators. */
#include <math.h>
#include <stdio.h>

#include "lua_util.h"

#define GENERATOR_MT "dle.Generator"
static const char default_key = 0; /* registry key of the default generator's userdata */

/* A generator userdata: its own state, or (for dle.default_generator) the process-wide one. */
typedef struct {
  dle_generator *g;
  dle_generator own;
} lua_generator;

/* ---------------------------------------------------------------- argument helpers */

/* An optional number argument: def when nil/absent. */
static double opt_number(lua_State *L, int idx, const char *fn, const char *what, double def) {
  if (lua_isnoneornil(L, idx)) return def;
  if (lua_type(L, idx) != LUA_TNUMBER)
    luaL_error(L, "%s: %s must be a number, got %s", fn, what, luaL_typename(L, idx));
  return lua_tonumber(L, idx);
}

/* randint bounds travel as doubles (attrs.f), exact up to 2^53. */
static lua_Integer check_bound(lua_State *L, int idx, const char *fn, const char *what) {
  lua_Integer v = dle_lua_check_int(L, idx, fn, what);
  if (v > ((lua_Integer)1 << 53) || v < -((lua_Integer)1 << 53))
    luaL_error(L, "%s: %s %I must be within +-2^53", fn, what, v);
  return v;
}

static char *shape_of(char *buf, const dle_tensor *t) { return dle_tensor_shape_str(buf, 128, t); }

/* ---------------------------------------------------------------- generators */

dle_generator *dle_lua_opt_generator(lua_State *L, int idx, const char *fn) {
  if (lua_isnoneornil(L, idx)) return NULL;
  lua_generator *ud = luaL_testudata(L, idx, GENERATOR_MT);
  if (!ud)
    luaL_error(L, "%s: generator must be a dle.Generator, got %s", fn, luaL_typename(L, idx));
  return ud->g;
}

static dle_generator *check_generator(lua_State *L, int idx, const char *fn) {
  lua_generator *ud = luaL_testudata(L, idx, GENERATOR_MT);
  if (!ud) luaL_error(L, "%s: expected a dle.Generator as self, got %s", fn, luaL_typename(L, idx));
  return ud->g;
}

/* Registry key of a weak table {light userdata g -> its userdata}: a traced op holds a
 * generator's address (attrs.generator), and the graph keeps the userdata alive through it. */
static const char by_address_key = 0;

static void push_by_address(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &by_address_key) != LUA_TNIL) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushstring(L, "v");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &by_address_key);
}

static lua_generator *push_generator(lua_State *L, dle_generator *shared, uint64_t seed) {
  lua_generator *ud = lua_newuserdatauv(L, sizeof *ud, 0);
  ud->g = shared ? shared : &ud->own; /* Lua never moves userdata, so &ud->own stays valid */
  dle_generator_seed(&ud->own, seed);
  luaL_setmetatable(L, GENERATOR_MT);
  if (!shared) {
    push_by_address(L);
    lua_pushvalue(L, -2);
    lua_rawsetp(L, -2, ud->g);
    lua_pop(L, 1);
  }
  return ud;
}

void dle_lua_push_generator(lua_State *L, dle_generator *g) {
  if (!g || g == dle_default_generator()) {
    lua_pushnil(L);
    return;
  }
  push_by_address(L);
  lua_rawgetp(L, -1, g);
  lua_remove(L, -2);
}

/* The state as a plain table {seed = int, offset = int} (dle.save can store it). Seeds are
 * unsigned 64-bit in C and travel as Lua integers with the same bits. */
static int push_state(lua_State *L, const dle_generator *g) {
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, (lua_Integer)g->seed);
  lua_setfield(L, -2, "seed");
  lua_pushinteger(L, (lua_Integer)g->offset);
  lua_setfield(L, -2, "offset");
  return 1;
}

static void read_state(lua_State *L, int idx, dle_generator *g, const char *fn) {
  if (!lua_istable(L, idx))
    luaL_error(L, "%s: state must be a table {seed = int, offset = int}, got %s", fn,
               luaL_typename(L, idx));
  lua_getfield(L, idx, "seed");
  lua_getfield(L, idx, "offset");
  lua_Integer seed = dle_lua_check_int(L, -2, fn, "state.seed"),
              offset = dle_lua_check_int(L, -1, fn, "state.offset");
  if (offset < 0) luaL_error(L, "%s: state.offset must be >= 0, got %I", fn, offset);
  lua_pop(L, 2);
  g->seed = (uint64_t)seed;
  g->offset = (uint64_t)offset;
}

/** dle.Generator([seed]) -> a new generator (seed defaults to the default seed, as an unseeded
 * default generator has, so unseeded streams are reproducible). Pass it as {generator = g}. */
static int l_generator(lua_State *L) {
  uint64_t seed = lua_isnoneornil(L, 1) ? DLE_DEFAULT_SEED
                                        : (uint64_t)dle_lua_check_int(L, 1, "Generator", "seed");
  push_generator(L, NULL, seed);
  return 1;
}

/** g:manual_seed(n) -> g: restarts the stream of seed n. */
static int g_manual_seed(lua_State *L) {
  dle_generator *g = check_generator(L, 1, "manual_seed");
  dle_generator_seed(g, (uint64_t)dle_lua_check_int(L, 2, "manual_seed", "seed"));
  lua_settop(L, 1);
  return 1;
}

/** g:initial_seed() -> the seed the stream started from. */
static int g_initial_seed(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)check_generator(L, 1, "initial_seed")->seed);
  return 1;
}

/** g:get_state() -> {seed = int, offset = int} */
static int g_get_state(lua_State *L) { return push_state(L, check_generator(L, 1, "get_state")); }

/** g:set_state(s) -> g: continues exactly where the state was taken. */
static int g_set_state(lua_State *L) {
  dle_generator *g = check_generator(L, 1, "set_state");
  read_state(L, 2, g, "set_state");
  lua_settop(L, 1);
  return 1;
}

static int g_tostring(lua_State *L) {
  lua_generator *ud = luaL_checkudata(L, 1, GENERATOR_MT);
  lua_pushfstring(L, "dle.Generator(%sseed=%I, offset=%I)", ud->g == &ud->own ? "" : "default, ",
                  (lua_Integer)ud->g->seed, (lua_Integer)ud->g->offset);
  return 1;
}

/** dle.is_generator(v) -> whether v is a dle.Generator. */
static int l_is_generator(lua_State *L) {
  lua_pushboolean(L, luaL_testudata(L, 1, GENERATOR_MT) != NULL);
  return 1;
}

static int push_default_generator(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &default_key);
  return 1;
}

/** dle.manual_seed(n) -> dle.default_generator, reseeded: the same numbers follow on every run. */
static int l_manual_seed(lua_State *L) {
  dle_generator_seed(dle_default_generator(),
                     (uint64_t)dle_lua_check_int(L, 1, "manual_seed", "seed"));
  return push_default_generator(L);
}

/** dle.initial_seed() -> the default generator's seed. */
static int l_initial_seed(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)dle_default_generator()->seed);
  return 1;
}

/* 63 unpredictable bits (a non-negative Lua integer): /dev/urandom, else the clock. */
static uint64_t fresh_seed(void) {
  uint64_t s = 0;
  FILE *f = fopen("/dev/urandom", "rb");
  bool ok = f && fread(&s, sizeof s, 1, f) == 1;
  if (f) fclose(f);
  if (!ok) {
    double t = dle_time() * 1e9;
    s = (uint64_t)t ^ (uint64_t)(uintptr_t)&s;
    uint32_t w[4];
    dle_philox(s, 0, w); /* mix the clock bits */
    s = (uint64_t)w[0] << 32 | w[1];
  }
  return s & (UINT64_MAX >> 1);
}

/** dle.seed() -> a fresh non-deterministic seed, also given to the default generator. */
static int l_seed(lua_State *L) {
  uint64_t s = fresh_seed();
  dle_generator_seed(dle_default_generator(), s);
  lua_pushinteger(L, (lua_Integer)s);
  return 1;
}

/** dle.get_rng_state() -> {seed = int, offset = int} of the default generator. */
static int l_get_rng_state(lua_State *L) { return push_state(L, dle_default_generator()); }

/** dle.set_rng_state(s): the default generator resumes from state s. */
static int l_set_rng_state(lua_State *L) {
  read_state(L, 1, dle_default_generator(), "set_rng_state");
  return 0;
}

/** dle.core._philox(seed, block[, block_hi]) -> four 32-bit words of Philox4x32-10 with key = seed
 * and 128-bit counter (block, block_hi): for known-answer tests. */
static int l_philox(lua_State *L) {
  uint64_t seed = (uint64_t)dle_lua_check_int(L, 1, "_philox", "seed");
  uint64_t lo = (uint64_t)dle_lua_check_int(L, 2, "_philox", "block");
  uint64_t hi =
      lua_isnoneornil(L, 3) ? 0 : (uint64_t)dle_lua_check_int(L, 3, "_philox", "block_hi");
  uint32_t w[4];
  dle_philox_counter(seed, lo, hi, w);
  for (int k = 0; k < 4; k++) lua_pushinteger(L, w[k]);
  return 4;
}

/* ---------------------------------------------------------------- creation */

/* Writes op's values into t, whatever its layout (the kernel copies views from a contiguous
 * temporary), in t's dtype. */
static dle_status fill_random(dle_tensor *t, dle_op op, double f0, double f1, dle_generator *g) {
  dle_attrs a = {0};
  a.dtype = t->dtype, a.has_dtype = true;
  a.f[0] = f0, a.f[1] = f1;
  a.generator = g;
  return dle_op_call(op, &t, NULL, 0, &a);
}

/* A new CPU tensor of op's values. The bindings allocate it themselves (rather than through
 * dle_rand & co.) so that a failing kernel cannot leave it behind: it is released here. */
static dle_status random_tensor(dle_tensor **out, dle_op op, int ndim, const int64_t *sizes,
                                dle_dtype dt, double f0, double f1, dle_generator *g) {
  *out = NULL;
  if (dle_tensor_empty(out, ndim, sizes, dt, DLE_DEVICE_CPU) != DLE_OK) return DLE_ERR;
  if (fill_random(*out, op, f0, f1, g) == DLE_OK) return DLE_OK;
  dle_tensor_release(*out);
  *out = NULL;
  return DLE_ERR;
}

/** dle.rand(sizes..., opts) / dle.randn(sizes..., opts) -> uniform [0, 1) / standard normal
 * values; opts {dtype (a float type, float32 default), generator, device, requires_grad}. */
static int create_random(lua_State *L, dle_op op, const char *fn) {
  int64_t sizes[DLE_MAX_DIMS];
  dle_lua_opts o;
  int n = dle_lua_sizes_opts(L, 1, sizes, &o, fn);
  dle_tensor *t = NULL;
  DLE_LUA_TRY(L, random_tensor(&t, op, n, sizes, o.dtype, 0, 0, o.generator));
  dle_lua_push_created(L, t, &o);
  return 1;
}
static int l_rand(lua_State *L) { return create_random(L, DLE_OP_RAND, "rand"); }
static int l_randn(lua_State *L) { return create_random(L, DLE_OP_RANDN, "randn"); }

/** dle.randint(lo, hi, sizes..., opts) or dle.randint(hi, sizes, opts) -> integers in [lo, hi)
 * (lo = 0 in the short form); int64 unless opts.dtype says otherwise. */
static int l_randint(lua_State *L) {
  bool short_form = lua_type(L, 2) != LUA_TNUMBER;
  lua_Integer lo = short_form ? 0 : check_bound(L, 1, "randint", "low");
  lua_Integer hi = check_bound(L, short_form ? 1 : 2, "randint", "high");
  int64_t sizes[DLE_MAX_DIMS];
  dle_lua_opts o;
  int n = dle_lua_sizes_opts(L, short_form ? 2 : 3, sizes, &o, "randint");
  dle_tensor *t = NULL;
  DLE_LUA_TRY(L, random_tensor(&t, DLE_OP_RANDINT, n, sizes, o.has_dtype ? o.dtype : DLE_I64,
                               (double)lo, (double)hi, o.generator));
  dle_lua_push_created(L, t, &o);
  return 1;
}

/* Options of a _like function: dtype and device default to the source tensor's. */
static void like_opts(lua_State *L, int idx, const dle_tensor *src, dle_lua_opts *o,
                      const char *fn) {
  dle_lua_parse_opts(L, idx, o, fn);
  if (!o->has_dtype) o->dtype = src->dtype;
  bool has_device = false;
  if (lua_istable(L, idx)) {
    has_device = lua_getfield(L, idx, "device") != LUA_TNIL;
    lua_pop(L, 1);
  }
  if (!has_device) o->device = dle_tensor_device(src);
}

/** dle.rand_like(t, opts) / dle.randn_like(t, opts): same shape, dtype and device as t. */
static int random_like(lua_State *L, dle_op op, const char *fn) {
  dle_tensor *src = dle_lua_check(L, 1);
  dle_lua_opts o;
  like_opts(L, 2, src, &o, fn);
  if (!dle_dtype_is_float(o.dtype))
    return luaL_error(L, "%s: dtype must be a float type, got %s (tensor of shape %s)", fn,
                      dle_dtype_name(o.dtype), shape_of((char[128]){0}, src));
  dle_tensor *t = NULL;
  DLE_LUA_TRY(L, random_tensor(&t, op, src->ndim, src->sizes, o.dtype, 0, 0, o.generator));
  dle_lua_push_created(L, t, &o);
  return 1;
}
static int l_rand_like(lua_State *L) { return random_like(L, DLE_OP_RAND, "rand_like"); }
static int l_randn_like(lua_State *L) { return random_like(L, DLE_OP_RANDN, "randn_like"); }

/** dle.randint_like(t, [lo,] hi, opts): integers in [lo, hi) (lo = 0 when omitted) shaped like t,
 * in t's dtype unless opts.dtype says otherwise. */
static int l_randint_like(lua_State *L) {
  dle_tensor *src = dle_lua_check(L, 1);
  bool two = lua_type(L, 3) == LUA_TNUMBER;
  lua_Integer lo = two ? check_bound(L, 2, "randint_like", "low") : 0;
  lua_Integer hi = check_bound(L, two ? 3 : 2, "randint_like", "high");
  dle_lua_opts o;
  like_opts(L, two ? 4 : 3, src, &o, "randint_like");
  dle_tensor *t = NULL;
  DLE_LUA_TRY(L, random_tensor(&t, DLE_OP_RANDINT, src->ndim, src->sizes, o.dtype, (double)lo,
                               (double)hi, o.generator));
  dle_lua_push_created(L, t, &o);
  return 1;
}

/** dle.randperm(n, opts) -> a random permutation of 1..n. The values are 1-based (unlike
 * PyTorch's 0..n-1) because their use is indexing (index_select, gather) from Lua, where indices
 * are 1-based. int64 unless opts.dtype says otherwise; Fisher-Yates driven by the generator. */
static int l_randperm(lua_State *L) {
  lua_Integer n = dle_lua_check_int(L, 1, "randperm", "n");
  if (n > 0) dle_lua_check_new_sizes(L, (int64_t[]){n}, 1, "randperm");
  dle_lua_opts o;
  dle_lua_parse_opts(L, 2, &o, "randperm");
  dle_tensor *t = NULL;
  DLE_LUA_TRY(L, dle_randperm(&t, n, 1, o.generator));
  if (o.has_dtype && o.dtype != DLE_I64) {
    dle_tensor *c = NULL;
    dle_status st = dle_to_dtype(&c, t, o.dtype);
    dle_tensor_release(t);
    if (st != DLE_OK) return dle_lua_fail(L);
    t = c;
  }
  dle_lua_push_created(L, t, &o);
  return 1;
}

/* ---------------------------------------------------------------- in-place fills */

/* t = t * scale + shift, in place (skipped when it is the identity). */
static dle_status affine_(dle_tensor *t, double scale, double shift) {
  if (scale != 1 && dle_binary_scalar(DLE_OP_MUL, &t, t, scale, false) != DLE_OK) return DLE_ERR;
  if (shift != 0 && dle_binary_scalar(DLE_OP_ADD, &t, t, shift, false) != DLE_OK) return DLE_ERR;
  return DLE_OK;
}

/* Leading number arguments from index 2 (at most max); returns how many, opts index in *next. */
static int number_args(lua_State *L, double *v, int max, int *next) {
  int n = 0;
  while (n < max && lua_type(L, 2 + n) == LUA_TNUMBER) v[n] = lua_tonumber(L, 2 + n), n++;
  *next = 2 + n;
  return n;
}

static dle_tensor *check_float_self(lua_State *L, const char *fn) {
  dle_tensor *t = dle_lua_check(L, 1);
  if (!dle_dtype_is_float(t->dtype))
    luaL_error(L, "%s: tensor must have a float dtype, got %s (shape %s)", fn,
               dle_dtype_name(t->dtype), shape_of((char[128]){0}, t));
  return t;
}

/** t:uniform_(a = 0, b = 1, opts) -> t filled with uniform values in [a, b) (opts.generator);
 * any layout. In float16/bfloat16 the scaled values may round up to b. */
static int m_uniform_(lua_State *L) {
  dle_tensor *t = check_float_self(L, "uniform_");
  double v[2] = {0, 1};
  int next, n = number_args(L, v, 2, &next);
  if (n == 1) return luaL_error(L, "uniform_: expected uniform_(a, b), got only a = %f", v[0]);
  if (!(v[0] <= v[1]) || !isfinite(v[1] - v[0]))
    return luaL_error(L, "uniform_: need finite a <= b, got a = %f, b = %f (shape %s)", v[0], v[1],
                      shape_of((char[128]){0}, t));
  dle_lua_opts o;
  dle_lua_parse_opts(L, next, &o, "uniform_");
  DLE_LUA_TRY(L, fill_random(t, DLE_OP_RAND, 0, 0, o.generator));
  DLE_LUA_TRY(L, affine_(t, v[1] - v[0], v[0]));
  lua_settop(L, 1);
  return 1;
}

/** t:normal_(mean = 0, std = 1, opts) -> t filled with normal values (opts.generator). */
static int m_normal_(lua_State *L) {
  dle_tensor *t = check_float_self(L, "normal_");
  double v[2] = {0, 1};
  int next;
  number_args(L, v, 2, &next);
  if (!(v[1] >= 0) || !isfinite(v[1]) || !isfinite(v[0]))
    return luaL_error(
        L, "normal_: need a finite mean and std >= 0, got mean = %f, std = %f (shape %s)", v[0],
        v[1], shape_of((char[128]){0}, t));
  dle_lua_opts o;
  dle_lua_parse_opts(L, next, &o, "normal_");
  DLE_LUA_TRY(L, fill_random(t, DLE_OP_RANDN, 0, 0, o.generator));
  DLE_LUA_TRY(L, affine_(t, v[1], v[0]));
  lua_settop(L, 1);
  return 1;
}

/** t:random_(hi, opts) / t:random_(lo, hi, opts) -> t filled with integers in [lo, hi) (lo = 0),
 * any dtype whose values hold that range exactly. */
static int m_random_(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1);
  bool two = lua_type(L, 3) == LUA_TNUMBER;
  if (lua_type(L, 2) != LUA_TNUMBER)
    return luaL_error(L, "random_: expected random_(hi) or random_(lo, hi), got %s",
                      luaL_typename(L, 2));
  lua_Integer lo = two ? check_bound(L, 2, "random_", "low") : 0;
  lua_Integer hi = check_bound(L, two ? 3 : 2, "random_", "high");
  if (lo >= hi)
    return luaL_error(L, "random_: low (%I) must be less than high (%I) (shape %s)", lo, hi,
                      shape_of((char[128]){0}, t));
  dle_lua_opts o;
  dle_lua_parse_opts(L, two ? 4 : 3, &o, "random_");
  DLE_LUA_TRY(L, fill_random(t, DLE_OP_RANDINT, (double)lo, (double)hi, o.generator));
  lua_settop(L, 1);
  return 1;
}

/* dst = (u < p) as 0/1 in dst's dtype, u uniform of dst's shape; p a tensor (broadcast to dst)
 * or the number pv. The uniforms are float64 when anything is float64, else float32. */
static dle_status bernoulli_into(dle_tensor *dst, dle_tensor *p, double pv, dle_generator *g,
                                 const char *fn) {
  char bp[128], bd[128];
  if (p) {
    if (!dle_dtype_is_float(p->dtype))
      return dle_error("%s: p must be a float tensor, got %s of shape %s", fn,
                       dle_dtype_name(p->dtype), shape_of(bp, p));
    /* p may have fewer or size-1 dims, never a size dst lacks */
    bool fits = p->ndim <= dst->ndim;
    for (int d = 0; fits && d < p->ndim; d++) {
      int64_t ps = p->sizes[p->ndim - 1 - d];
      fits = ps == 1 || ps == dst->sizes[dst->ndim - 1 - d];
    }
    if (!fits)
      return dle_error("%s: p of shape %s does not broadcast to the tensor's shape %s", fn,
                       shape_of(bp, p), shape_of(bd, dst));
  } else if (!(pv >= 0 && pv <= 1)) {
    return dle_error("%s: p must be in [0, 1], got %g (shape %s)", fn, pv, shape_of(bd, dst));
  }
  bool wide = dst->dtype == DLE_F64 || (p && p->dtype == DLE_F64);
  dle_tensor *u = NULL, *mask = NULL;
  dle_status st =
      random_tensor(&u, DLE_OP_RAND, dst->ndim, dst->sizes, wide ? DLE_F64 : DLE_F32, 0, 0, g);
  if (st == DLE_OK)
    st = p ? dle_binary(DLE_OP_LT, &mask, u, p) : dle_binary_scalar(DLE_OP_LT, &mask, u, pv, false);
  if (st == DLE_OK) st = dle_copy_(dst, mask);
  dle_tensor_release(u);
  dle_tensor_release(mask);
  return st;
}

/** t:bernoulli_(p = 0.5, opts) -> t filled with 1 with probability p, else 0; p a number or a
 * float tensor broadcastable to t. */
static int m_bernoulli_(lua_State *L) {
  dle_tensor *t = dle_lua_check(L, 1), *p = dle_lua_opt(L, 2);
  bool opts_only = !p && lua_istable(L, 2); /* t:bernoulli_{generator = g} */
  double pv = p || opts_only ? 0.5 : opt_number(L, 2, "bernoulli_", "p", 0.5);
  dle_lua_opts o;
  dle_lua_parse_opts(L, opts_only ? 2 : 3, &o, "bernoulli_");
  DLE_LUA_TRY(L, bernoulli_into(t, p, pv, o.generator, "bernoulli_"));
  lua_settop(L, 1);
  return 1;
}

/** dle.bernoulli(p_tensor, opts) -> 0/1 tensor of p's shape and dtype, 1 with probability p;
 * dle.bernoulli(p_number, sizes..., opts) -> the same with one p (float32 unless opts.dtype).
 * Also the method p:bernoulli(opts). */
static int l_bernoulli(lua_State *L) {
  dle_tensor *p = dle_lua_opt(L, 1), *t = NULL;
  dle_lua_opts o;
  if (p) {
    dle_lua_parse_opts(L, 2, &o, "bernoulli");
    DLE_LUA_TRY(L, dle_tensor_empty(&t, p->ndim, p->sizes, o.has_dtype ? o.dtype : p->dtype,
                                    DLE_DEVICE_CPU));
  } else {
    if (lua_type(L, 1) != LUA_TNUMBER)
      return luaL_error(L, "bernoulli: p must be a number or a tensor, got %s",
                        luaL_typename(L, 1));
    int64_t sizes[DLE_MAX_DIMS];
    int next, n = dle_lua_sizes(L, 2, sizes, &next, "bernoulli", 0);
    dle_lua_parse_opts(L, next, &o, "bernoulli");
    DLE_LUA_TRY(L, dle_tensor_empty(&t, n, sizes, o.dtype, DLE_DEVICE_CPU));
  }
  if (bernoulli_into(t, p, p ? 0 : lua_tonumber(L, 1), o.generator, "bernoulli") != DLE_OK) {
    dle_tensor_release(t);
    return dle_lua_fail(L);
  }
  dle_lua_push_created(L, t, &o);
  return 1;
}

/* ---------------------------------------------------------------- registration */

void dle_lua_open_random(lua_State *L, int module, int methods) {
  // clang-format off
  static const luaL_Reg gen_methods[] = {
      {"manual_seed", g_manual_seed}, {"initial_seed", g_initial_seed}, {"get_state", g_get_state},
      {"set_state", g_set_state}, {NULL, NULL}};
  // clang-format on
  luaL_newmetatable(L, GENERATOR_MT);
  int mt = lua_gettop(L);
  lua_newtable(L);
  dle_lua_setfuncs(L, lua_gettop(L), gen_methods);
  lua_setfield(L, mt, "__index");
  lua_pushcfunction(L, g_tostring);
  lua_setfield(L, mt, "__tostring");
  lua_pop(L, 1);

  push_generator(L, dle_default_generator(), 0);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &default_key);
  lua_setfield(L, module, "default_generator");

  // clang-format off
  static const luaL_Reg fns[] = {
      {"Generator", l_generator}, {"is_generator", l_is_generator}, {"manual_seed", l_manual_seed},
      {"initial_seed", l_initial_seed}, {"seed", l_seed}, {"get_rng_state", l_get_rng_state},
      {"set_rng_state", l_set_rng_state}, {"_philox", l_philox}, {"rand", l_rand},
      {"randn", l_randn}, {"randint", l_randint}, {"rand_like", l_rand_like},
      {"randn_like", l_randn_like}, {"randint_like", l_randint_like}, {"randperm", l_randperm},
      {"bernoulli", l_bernoulli}, {NULL, NULL}};
  static const luaL_Reg meths[] = {
      {"uniform_", m_uniform_}, {"normal_", m_normal_}, {"random_", m_random_},
      {"bernoulli_", m_bernoulli_}, {"bernoulli", l_bernoulli}, {NULL, NULL}};
  // clang-format on
  dle_lua_register(L, module, methods, fns, NULL, meths);
}
