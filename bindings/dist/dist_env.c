/* dist_env.c — the module dle.dist_native: MPI's life in a Lua process (init, finalize at exit,
 * abort), rank and world size, the dtype table. Loaded only by lua/dle/dist/init.lua, so programs that
 * do not use dle.dist never load libmpi.
 *
 * Finalization: init returns a process-group handle kept in the registry. Its __gc finalizes MPI
 * when the Lua state closes; an atexit handler does it after os.exit() (which skips lua_close).
 * Its __close, used as `local pg <close> = dle.dist.init()`, finalizes on a normal exit from the
 * scope, but aborts the whole job when the scope exits by an error: a rank that finalizes after
 * an error would wait in MPI_Finalize for ranks that wait in a collective for it, forever. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"

MPI_Comm dle_dist_comm = MPI_COMM_NULL;

static bool we_initialized; /* MPI_Init_thread was ours: so is MPI_Finalize */
static bool atexit_set;
static const char handle_key = 0; /* registry key of the process-group handle */
#define HANDLE_MT "dle.dist.ProcessGroup"

static const dle_dist_dtype dtypes[] = {
    {"float32", MPI_FLOAT, 4, 0, 0},
    {"float64", MPI_DOUBLE, 8, 0, 0},
    {"float16", MPI_UINT16_T, 2, 1, 0},
    {"bfloat16", MPI_UINT16_T, 2, 2, 0},
    {"int32", MPI_INT32_T, 4, 0, 0},
    {"int64", MPI_INT64_T, 8, 0, 0},
    {"uint8", MPI_UINT8_T, 1, 0, 0},
    {"bool", MPI_C_BOOL, 1, 0, 1},
    {"int8", MPI_INT8_T, 1, 0, 0},
    {"int16", MPI_INT16_T, 2, 0, 0},
    {"uint16", MPI_UINT16_T, 2, 0, 0},
    {"uint32", MPI_UINT32_T, 4, 0, 0},
    {"uint64", MPI_UINT64_T, 8, 0, 0},
    {"float8_e4m3fn", MPI_UINT8_T, 1, 3, 0},
    {"float8_e5m2", MPI_UINT8_T, 1, 4, 0},
    /* MPI reduces complex with sum and prod only (max/min are an MPI error, as in PyTorch) */
    {"complex64", MPI_C_FLOAT_COMPLEX, 8, 0, 0},
    {"complex128", MPI_C_DOUBLE_COMPLEX, 16, 0, 0},
};

const dle_dist_dtype *dle_dist_check_dtype(lua_State *L, int idx, const char *fn) {
  const char *name = luaL_checkstring(L, idx);
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (strcmp(dtypes[i].name, name) == 0) return &dtypes[i];
  luaL_error(L, "%s: unsupported dtype '%s'", fn, name);
  return NULL;
}

void dle_dist_check(lua_State *L, int rc, const char *fn, const char *call) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
    snprintf(msg, sizeof msg, "error code %d", rc);
  luaL_error(L, "%s: %s failed: %s", fn, call, msg);
}

static bool finalized(void) {
  int f = 0;
  MPI_Finalized(&f);
  return f != 0;
}

MPI_Comm dle_dist_need_comm(lua_State *L, const char *fn) {
  if (dle_dist_comm == MPI_COMM_NULL)
    luaL_error(L, "%s: dle.dist is not initialized%s", fn,
               finalized() ? " (MPI was finalized)" : "; call dle.dist.init() first");
  return dle_dist_comm;
}

/* Frees what init made, then finalizes MPI if init started it. Safe to call any number of times. */
static void finalize_now(void) {
  if (finalized()) {
    dle_dist_comm = MPI_COMM_NULL;
    return;
  }
  if (dle_dist_comm != MPI_COMM_NULL) {
    dle_dist_half_ops_free();
    MPI_Comm_free(&dle_dist_comm);
    dle_dist_comm = MPI_COMM_NULL;
  }
  if (we_initialized) MPI_Finalize();
}

static void finalize_at_exit(void) { finalize_now(); }

static void push_handle(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &handle_key) != LUA_TNIL) return;
  lua_pop(L, 1);
  lua_newuserdatauv(L, 1, 0);
  luaL_setmetatable(L, HANDLE_MT);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &handle_key);
}

/** init() -> the process-group handle. Initializes MPI (MPI_THREAD_FUNNELED: only the Lua thread
 * calls MPI) unless the host program did; idempotent. */
static int l_init(lua_State *L) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return luaL_error(L, "init: MPI_Init_thread failed (error code %d)", rc);
    we_initialized = true;
  } else if (finalized()) {
    return luaL_error(L, "init: MPI was finalized; it cannot be initialized again in this process");
  }
  if (dle_dist_comm == MPI_COMM_NULL) {
    MPI_Comm comm;
    dle_dist_check(L, MPI_Comm_dup(MPI_COMM_WORLD, &comm), "init", "MPI_Comm_dup");
    dle_dist_check(L, MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "init",
                   "MPI_Comm_set_errhandler");
    dle_dist_check(L, dle_dist_half_ops_create(), "init", "MPI_Op_create");
    dle_dist_comm = comm;
  }
  if (we_initialized && !atexit_set) atexit_set = atexit(finalize_at_exit) == 0;
  push_handle(L);
  return 1;
}

/** finalize(): frees dle's communicator and finalizes MPI (if init started it); idempotent. */
static int l_finalize(lua_State *L) {
  finalize_now();
  return 0;
}

static int l_is_initialized(lua_State *L) {
  lua_pushboolean(L, dle_dist_comm != MPI_COMM_NULL);
  return 1;
}

static int l_rank(lua_State *L) {
  int r;
  dle_dist_check(L, MPI_Comm_rank(dle_dist_need_comm(L, "rank"), &r), "rank", "MPI_Comm_rank");
  lua_pushinteger(L, r);
  return 1;
}

static int l_world_size(lua_State *L) {
  int n;
  dle_dist_check(L, MPI_Comm_size(dle_dist_need_comm(L, "world_size"), &n), "world_size",
                 "MPI_Comm_size");
  lua_pushinteger(L, n);
  return 1;
}

/** abort(code): ends every rank of the job now (MPI_Abort), with exit status code. */
static int l_abort(lua_State *L) {
  int code = (int)luaL_optinteger(L, 1, 1);
  fflush(stdout);
  fflush(stderr);
  MPI_Abort(dle_dist_comm != MPI_COMM_NULL ? dle_dist_comm : MPI_COMM_WORLD, code);
  return 0;
}

/* handle:__close(err): a normal scope exit finalizes; an error aborts every rank (see the top). */
static int handle_close(lua_State *L) {
  if (lua_isnoneornil(L, 2) || dle_dist_comm == MPI_COMM_NULL) {
    finalize_now();
    return 0;
  }
  int rank = -1;
  MPI_Comm_rank(dle_dist_comm, &rank);
  const char *msg = luaL_tolstring(L, 2, NULL);
  fflush(stdout);
  fprintf(stderr, "dle.dist: rank %d failed, aborting every rank: %s\n", rank, msg);
  fflush(stderr);
  MPI_Abort(dle_dist_comm, 1);
  return 0;
}

static int handle_gc(lua_State *L) {
  finalize_now();
  return 0;
}

static int handle_tostring(lua_State *L) {
  int r = -1, n = 0;
  if (dle_dist_comm != MPI_COMM_NULL) {
    MPI_Comm_rank(dle_dist_comm, &r);
    MPI_Comm_size(dle_dist_comm, &n);
    lua_pushfstring(L, "dle.dist process group (MPI, rank %d of %d)", r, n);
  } else {
    lua_pushstring(L, "dle.dist process group (finalized)");
  }
  return 1;
}

int luaopen_dle_dist_native(lua_State *L) {
  static const luaL_Reg fns[] = {
      {"init", l_init}, {"finalize", l_finalize},     {"is_initialized", l_is_initialized},
      {"rank", l_rank}, {"world_size", l_world_size}, {"abort", l_abort},
      {NULL, NULL}};
  static const luaL_Reg handle_meta[] = {{"__close", handle_close},
                                         {"__gc", handle_gc},
                                         {"__tostring", handle_tostring},
                                         {NULL, NULL}};
  if (luaL_newmetatable(L, HANDLE_MT)) luaL_setfuncs(L, handle_meta, 0);
  lua_pop(L, 1);
  luaL_newlib(L, fns);
  dle_dist_open_collectives(L, lua_gettop(L));
  dle_dist_open_exchange(L, lua_gettop(L));
  dle_dist_open_groups(L, lua_gettop(L));
  int version, subversion;
  MPI_Get_version(&version, &subversion);
  lua_pushfstring(L, "MPI %d.%d", version, subversion);
  lua_setfield(L, -2, "mpi_version");
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(lib, &len);
  lua_pushlstring(L, lib, strcspn(lib, "\n,"));
  lua_setfield(L, -2, "library");
  return 1;
}
