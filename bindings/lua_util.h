/* lua_util.h — glue shared by the binding files: the tensor userdata, argument parsing
 * (1-based dims and indices become 0-based here and only here), errors as Lua errors. */
#ifndef DLE_LUA_UTIL_H
#define DLE_LUA_UTIL_H

#include <lauxlib.h>
#include <lua.h>

#include "../engine/dle.h"

/* A tensor userdata holds one reference; t is NULL once the tensor was closed. `magic` tells our
 * userdata from anyone else's without a metatable lookup (see dle_lua_opt). */
typedef struct {
  dle_tensor *t;
  uint64_t magic;
} dle_lua_tensor;
#define DLE_LUA_TENSOR_MAGIC UINT64_C(0x646c652e54656e73) /* "dle.Tens" */

/* The tensor at idx, or a Lua error naming the function and the argument ("add: argument #1 must
 * be a tensor, got nil"). */
dle_tensor *dle_lua_check(lua_State *L, int idx);
/* The tensor at idx, or NULL when the value there is not a tensor. */
dle_tensor *dle_lua_opt(lua_State *L, int idx);
/* Pushes a userdata owning the caller's reference to t (t is not retained again). */
void dle_lua_push(lua_State *L, dle_tensor *t);
/* Same, with the tensor metatable found at index mt (an upvalue index, or an absolute one): the
 * elementwise ops and operators keep it as an upvalue, a fetch about 100 instructions cheaper
 * than the registry lookup (callgrind, `c = a + b` on one element). */
void dle_lua_push_mt(lua_State *L, dle_tensor *t, int mt);
/* Raises dle_last_error() as a Lua error, prefixed with the running function's name unless the
 * message already starts with it. Release C temporaries before calling. */
int dle_lua_fail(lua_State *L);
#define DLE_LUA_TRY(L, call)               \
  do {                                     \
    if ((call) != DLE_OK) dle_lua_fail(L); \
  } while (0)

/* A 1-based dim argument (negative counts from the end) as a 0-based dim for the engine, which
 * still range-checks it; extra = 1 where one past the end is valid (unsqueeze). */
int dle_lua_dim(lua_State *L, int arg, const char *fn);
/* Same, for an optional dim: returns def when the argument is nil/absent. */
int dle_lua_optdim(lua_State *L, int arg, const char *fn, int def);
/* An integer argument (floats with an integer value accepted), or an error naming fn and what. */
lua_Integer dle_lua_check_int(lua_State *L, int arg, const char *fn, const char *what);

/* Reads sizes given as varargs (numbers from index first) or as one table at first.
 * Returns the number of dims; *next receives the index after the sizes (an options table may
 * follow). Sizes must be integers; allow_neg1 = 1 admits -1 (view, reshape, expand), 2 any integer
 * (lists of dims). */
int dle_lua_sizes(lua_State *L, int first, int64_t *sizes, int *next, const char *fn,
                  int allow_neg1);

/* Sizes of a new tensor within the engine's limit (the product of its non-zero sizes at most
 * INT64_MAX / 16), or a Lua error naming fn (the engine's own error would name its allocator). */
void dle_lua_check_new_sizes(lua_State *L, const int64_t *sizes, int n, const char *fn);

/* An options table at idx (nil: none) may hold only the names in known (a NULL-terminated list):
 * any other key is the error "fn: unknown option 'k' (known: a, b)", as in the Lua layer
 * (dle.check.options). */
void dle_lua_check_options(lua_State *L, int idx, const char *fn, const char *const *known);
/* The options table at idx (0 when nil), holding only the names in known; or an error. */
int dle_lua_opts_at(lua_State *L, int idx, const char *fn, const char *const *known);
/* The boolean option `name` of the options table at idx (def when absent or idx is 0: none). */
bool dle_lua_opt_flag(lua_State *L, int idx, const char *fn, const char *name, bool def);

/* Options table: {dtype = "float64", device = "cpu", requires_grad = true, generator = g}; no
 * other keys. */
typedef struct {
  dle_dtype dtype;
  bool has_dtype;
  dle_device device;
  bool requires_grad;
  dle_generator *generator;
  const char *fn; /* the function they were given to, for messages */
} dle_lua_opts;
void dle_lua_parse_opts(lua_State *L, int idx, dle_lua_opts *o, const char *fn);
/* Sizes from index first (as dle_lua_sizes, no -1) followed by an options table: the arguments of
 * the creation functions (zeros, rand, randint...). Returns the number of dims. */
int dle_lua_sizes_opts(lua_State *L, int first, int64_t *sizes, dle_lua_opts *o, const char *fn);
dle_dtype dle_lua_check_dtype(lua_State *L, int idx, const char *fn);

/* The generator userdata at idx (or NULL for nil): defined by lua_random.c. */
dle_generator *dle_lua_opt_generator(lua_State *L, int idx, const char *fn);
/* Pushes the dle.Generator userdata whose generator is g (nil for NULL or the default one). */
void dle_lua_push_generator(lua_State *L, dle_generator *g);

/* Applies the creation options (device move, requires_grad) to a new CPU tensor, then pushes it. */
void dle_lua_push_created(lua_State *L, dle_tensor *t, const dle_lua_opts *o);
/* Pushes the new tensor r (owned by Lua from then on), or self (argument 1) for an in-place form;
 * returns 1. */
int dle_lua_push_result(lua_State *L, dle_tensor *r, bool inplace);
/* Pushes the n results r of an engine call that returned st, and returns n; or, when st is an
 * error, releases whatever results the call left and raises its error. */
int dle_lua_push_all(lua_State *L, dle_status st, dle_tensor **r, int n);
/* Same, for a call with one result. */
static inline int dle_lua_push_new(lua_State *L, dle_status st, dle_tensor **r) {
  return dle_lua_push_all(L, st, r, 1);
}
/* Pushes f(t), t the tensor at argument 1 (the tensor-to-tensor methods: clone, detach); returns 1. */
int dle_lua_apply(lua_State *L, dle_status (*f)(dle_tensor **out, dle_tensor *t));

/* Pushes a new zero-filled userdata of `size` bytes whose metatable `tname` (made on first use)
 * has `gc` as __gc, and returns it: memory a binding owns that is freed even when a Lua error
 * unwinds past it. */
void *dle_lua_new_owned(lua_State *L, size_t size, const char *tname, lua_CFunction gc);
/* Registers functions into the table at index `table` (absolute index). */
void dle_lua_setfuncs(lua_State *L, int table, const luaL_Reg *fns);
/* A binding file's functions: module_only into the module table, both into it and the tensor
 * methods, methods_only into the methods (any of the three may be NULL). */
void dle_lua_register(lua_State *L, int module, int methods, const luaL_Reg *module_only,
                      const luaL_Reg *both, const luaL_Reg *methods_only);

/* Each binding file adds its functions to the module table and methods to the tensor methods
 * table (both absolute stack indices): bindings/lua_<family>.c for each family with the lua
 * column of engine/ops/families.def (lua_core.c calls them in that order), and the files that
 * bind no op family. */
#define DLE_FAMILY(name, grad, cpu, cuda, lua) \
  lua(void dle_lua_open_##name(lua_State *L, int module, int methods);)
#include "../engine/ops/families.def"
void dle_lua_open_tensor(lua_State *L, int module, int methods);
void dle_lua_open_complex(lua_State *L, int module, int methods);
void dle_lua_open_autograd(lua_State *L, int module, int methods);
void dle_lua_open_data(lua_State *L, int module, int methods);
void dle_lua_open_io(lua_State *L, int module, int methods);
void dle_lua_open_profile(lua_State *L, int module, int methods);
void dle_lua_open_memory(lua_State *L, int module, int methods);
void dle_lua_open_graph(lua_State *L, int module, int methods);
void dle_lua_open_onnx(lua_State *L, int module, int methods);
void dle_lua_open_onnx_save(lua_State *L, int module, int methods);

/* matmul with a quantized operand at index 1 or 2 (lua_quant.c): the Lua handler's result pushed
 * (returns 1), or -1 when neither operand is a quantized tensor. */
int dle_lua_quant_dispatch(lua_State *L);

/* ---- errors (lua_errors.c) ----
 * Every error the bindings raise names the dle function and is reported at the user's line, the
 * first caller outside dle. The function's name is that it was registered under (see
 * dle_lua_register_names), whatever the call path: pcall(dle.matmul, ...), a local alias, t:mm().
 * Arguments are numbered as the user wrote the call (t:f(x): x is argument #1, t is self). */
const char *dle_lua_fname(lua_State *L);
int dle_lua_error(lua_State *L, const char *fmt, ...);
int dle_lua_argerror(lua_State *L, int arg, const char *msg);
int dle_lua_typeerror(lua_State *L, int arg, const char *expected);
lua_Number dle_lua_checknumber(lua_State *L, int arg);
lua_Integer dle_lua_checkinteger(lua_State *L, int arg);
const char *dle_lua_checklstring(lua_State *L, int arg, size_t *len);
lua_Number dle_lua_optnumber(lua_State *L, int arg, lua_Number def);
lua_Integer dle_lua_optinteger(lua_State *L, int arg, lua_Integer def);
const char *dle_lua_optlstring(lua_State *L, int arg, const char *def, size_t *len);
void dle_lua_checktype(lua_State *L, int arg, int t);
void *dle_lua_checkudata(lua_State *L, int arg, const char *tname);
int dle_lua_checkoption(lua_State *L, int arg, const char *def, const char *const lst[]);
/* Maps each C function in the table at idx to its key, for dle_lua_fname. */
void dle_lua_register_names(lua_State *L, int idx);
void dle_lua_open_errors(lua_State *L, int module);

/* The bindings call lauxlib's checks and luaL_error by their usual names; these route them
 * through the helpers above, whose messages read "name: argument #2 must be a number, got nil"
 * where lauxlib's read "bad argument #2 to 'f' (number expected, got nil)". (luaL_argcheck and
 * luaL_argexpected are lauxlib macros over luaL_argerror and luaL_typeerror: covered too.) */
#undef luaL_checkstring
#undef luaL_optstring
#define luaL_error                dle_lua_error
#define luaL_argerror             dle_lua_argerror
#define luaL_typeerror            dle_lua_typeerror
#define luaL_checknumber          dle_lua_checknumber
#define luaL_checkinteger         dle_lua_checkinteger
#define luaL_checklstring         dle_lua_checklstring
#define luaL_checkstring(L, arg)  dle_lua_checklstring(L, (arg), NULL)
#define luaL_optnumber            dle_lua_optnumber
#define luaL_optinteger           dle_lua_optinteger
#define luaL_optlstring           dle_lua_optlstring
#define luaL_optstring(L, arg, d) dle_lua_optlstring(L, (arg), (d), NULL)
#define luaL_checktype            dle_lua_checktype
#define luaL_checkudata           dle_lua_checkudata
#define luaL_checkoption          dle_lua_checkoption

#endif
