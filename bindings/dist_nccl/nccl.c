/* nccl.c — the module dle.dist_nccl: dle.dist's collectives on CUDA tensors through NCCL.
 * lua/dle/dist/nccl.lua drives it: it makes one communicator per group (and device) from an
 * ncclUniqueId that the group's first rank creates and MPI broadcasts (dle.dist_native), and hands
 * it raw device buffers from dle.core._raw_buffer. Every call is enqueued on the legacy default
 * stream of the communicator's device, where the CUDA backend (kernels/cuda/backend.cu) runs all
 * its kernels and copies: a collective is ordered after the kernels that wrote its input and
 * before those that read its output, without a host synchronization (as PyTorch's NCCL backend).
 * Built only where nvcc and nccl.h are found (premake5.lua); loaded only for CUDA tensors, so CPU
 * users never load libnccl. Every failure is a Lua error naming the dle function. */
#include <string.h>

#include <cuda_runtime.h>
#include <lauxlib.h>
#include <lua.h>
#include <nccl.h>

#include "../raw_buffer.h"

#define COMM_MT "dle.dist.NcclComm"

/* One dle dtype as NCCL sees it: `per` NCCL elements of `type` per dle element. bool goes as
 * ncclUint8 holding 0 or 1, reduced with max for sum and max (logical or) and min for min and prod
 * (logical and), as the MPI path does. NCCL has no 16-bit integers and no complex type: int16 and
 * uint16 move as bytes (broadcast, gather, send, recv) and cannot be reduced; complex moves as its
 * float pairs, which sum (and so mean) reduces part by part, and nothing else does. */
enum { REDUCE_ANY, REDUCE_SUM_ONLY, REDUCE_NONE };
typedef struct {
  const char *name, *nccl_name;
  ncclDataType_t type;
  int per, boolean, reduce;
} nccl_dtype;

static const nccl_dtype dtypes[] = {
    {"float32", "ncclFloat32", ncclFloat32, 1, 0, REDUCE_ANY},
    {"float64", "ncclFloat64", ncclFloat64, 1, 0, REDUCE_ANY},
    {"float16", "ncclFloat16", ncclFloat16, 1, 0, REDUCE_ANY},
    {"bfloat16", "ncclBfloat16", ncclBfloat16, 1, 0, REDUCE_ANY},
    {"int32", "ncclInt32", ncclInt32, 1, 0, REDUCE_ANY},
    {"int64", "ncclInt64", ncclInt64, 1, 0, REDUCE_ANY},
    {"uint8", "ncclUint8", ncclUint8, 1, 0, REDUCE_ANY},
    {"bool", "ncclUint8", ncclUint8, 1, 1, REDUCE_ANY},
    {"int8", "ncclInt8", ncclInt8, 1, 0, REDUCE_ANY},
    {"uint32", "ncclUint32", ncclUint32, 1, 0, REDUCE_ANY},
    {"uint64", "ncclUint64", ncclUint64, 1, 0, REDUCE_ANY},
    {"int16", "ncclUint8", ncclUint8, 2, 0, REDUCE_NONE},
    {"uint16", "ncclUint8", ncclUint8, 2, 0, REDUCE_NONE},
    {"complex64", "ncclFloat32", ncclFloat32, 2, 0, REDUCE_SUM_ONLY},
    {"complex128", "ncclFloat64", ncclFloat64, 2, 0, REDUCE_SUM_ONLY},
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
    /* NCCL reduces fp8 on sm_90 and newer */
    {"float8_e4m3fn", "ncclFloat8e4m3", ncclFloat8e4m3, 1, 0, REDUCE_ANY},
    {"float8_e5m2", "ncclFloat8e5m2", ncclFloat8e5m2, 1, 0, REDUCE_ANY},
#else
    {"float8_e4m3fn", "ncclUint8", ncclUint8, 1, 0, REDUCE_NONE},
    {"float8_e5m2", "ncclUint8", ncclUint8, 1, 0, REDUCE_NONE},
#endif
};
#define NUM_DTYPES (sizeof dtypes / sizeof dtypes[0])

static const nccl_dtype *check_dtype(lua_State *L, int idx, const char *fn) {
  const char *name = luaL_checkstring(L, idx);
  for (size_t i = 0; i < NUM_DTYPES; i++)
    if (strcmp(dtypes[i].name, name) == 0) return &dtypes[i];
  luaL_error(L, "%s: dtype %s has no NCCL type", fn, name);
  return NULL;
}

static const char *const op_names[] = {"sum", "prod", "max", "min", NULL};

/* The NCCL op of the op-th of op_names on dtype d, or a Lua error naming fn when NCCL cannot
 * reduce d with it. */
static ncclRedOp_t pick_op(lua_State *L, const nccl_dtype *d, int op, const char *fn) {
  if (d->reduce == REDUCE_NONE || (d->reduce == REDUCE_SUM_ONLY && op != 0))
    luaL_error(L, "%s: NCCL cannot reduce %s with %s%s", fn, d->name, op_names[op],
               d->reduce == REDUCE_SUM_ONLY ? " (only sum and mean)" : "");
  if (d->boolean) return (op == 0 || op == 2) ? ncclMax : ncclMin;
  static const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin};
  return ops[op];
}

typedef struct {
  ncclComm_t comm; /* NULL once destroyed */
  int device, rank, size;
} nccl_comm;

static void check_nccl(lua_State *L, ncclResult_t rc, const char *fn, const char *call) {
  if (rc != ncclSuccess) luaL_error(L, "%s: %s failed: %s", fn, call, ncclGetErrorString(rc));
}

static void check_cuda(lua_State *L, cudaError_t e, const char *fn, const char *call) {
  if (e == cudaSuccess) return;
  cudaGetLastError(); /* clears a non-sticky error for the next call */
  luaL_error(L, "%s: %s failed: %s (%s)", fn, call, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* The communicator at idx, made current on its device. */
static nccl_comm *comm_at(lua_State *L, int idx, const char *fn) {
  nccl_comm *c = luaL_checkudata(L, idx, COMM_MT);
  if (!c->comm) luaL_error(L, "%s: the NCCL communicator was destroyed", fn);
  check_cuda(L, cudaSetDevice(c->device), fn, "cudaSetDevice");
  return c;
}

static size_t count_at(lua_State *L, int idx, const char *fn) {
  lua_Integer n = luaL_checkinteger(L, idx);
  if (n < 0) luaL_error(L, "%s: negative element count %I", fn, (LUAI_UACINT)n);
  return (size_t)n;
}

/* A peer or root rank of communicator c. */
static int rank_at(lua_State *L, int idx, const nccl_comm *c, const char *fn, const char *what) {
  lua_Integer r = luaL_checkinteger(L, idx);
  if (r < 0 || r >= c->size)
    luaL_error(L, "%s: %s %I is not a rank of the communicator (ranks are 0..%d)", fn, what,
               (LUAI_UACINT)r, c->size - 1);
  return (int)r;
}

/** unique_id(buffer, fn): writes a new ncclUniqueId (128 bytes) into the CPU buffer; errors name
 * fn, the collective that needed the communicator. */
static int l_unique_id(lua_State *L) {
  const char *fn = luaL_optstring(L, 2, "unique_id");
  void *p = dle_raw_buffer_at(L, 1, NCCL_UNIQUE_ID_BYTES, fn);
  ncclUniqueId id;
  check_nccl(L, ncclGetUniqueId(&id), fn, "ncclGetUniqueId");
  memcpy(p, &id, sizeof id);
  return 0;
}

static int comm_gc(lua_State *L) {
  nccl_comm *c = luaL_checkudata(L, 1, COMM_MT);
  if (c->comm) ncclCommDestroy(c->comm);
  c->comm = NULL;
  return 0;
}

/** comm_init(id_buffer, nranks, rank, device, fn) -> a communicator of nranks ranks on CUDA device
 * `device`, this process being `rank`: every rank calls it with the same id (ncclCommInitRank). */
static int l_comm_init(lua_State *L) {
  const char *fn = luaL_optstring(L, 5, "comm_init");
  const void *p = dle_raw_buffer_at(L, 1, NCCL_UNIQUE_ID_BYTES, fn);
  lua_Integer n = luaL_checkinteger(L, 2), r = luaL_checkinteger(L, 3);
  lua_Integer dev = luaL_checkinteger(L, 4);
  if (n < 1 || r < 0 || r >= n)
    return luaL_error(L, "%s: rank %I of %I ranks", fn, (LUAI_UACINT)r, (LUAI_UACINT)n);
  if (dev < 0 || dev > 1023)
    return luaL_error(L, "%s: device index %I out of range", fn, (LUAI_UACINT)dev);
  ncclUniqueId id;
  memcpy(&id, p, sizeof id);
  nccl_comm *c = lua_newuserdatauv(L, sizeof *c, 0);
  c->comm = NULL;
  c->device = (int)dev;
  c->rank = (int)r;
  c->size = (int)n;
  luaL_setmetatable(L, COMM_MT);
  check_cuda(L, cudaSetDevice(c->device), fn, "cudaSetDevice");
  check_nccl(L, ncclCommInitRank(&c->comm, c->size, id, c->rank), fn, "ncclCommInitRank");
  return 1;
}

/* The arguments every call starts with: (comm, buffer, n, dtype), the communicator made current. */
typedef struct {
  nccl_comm *c;
  void *p;
  size_t n;
  const nccl_dtype *d;
} call_args;

static call_args args_at(lua_State *L, const char *fn) {
  call_args a;
  a.c = comm_at(L, 1, fn);
  a.n = count_at(L, 3, fn);
  a.p = dle_raw_buffer_at(L, 2, (lua_Integer)a.n, fn);
  a.d = check_dtype(L, 4, fn);
  a.n *= (size_t)a.d->per; /* from here on, a count of NCCL elements */
  return a;
}

/** all_reduce(comm, buffer, n, dtype, op): in place; op one of sum, prod, max, min. */
static int l_all_reduce(lua_State *L) {
  call_args a = args_at(L, "all_reduce");
  ncclRedOp_t op = pick_op(L, a.d, luaL_checkoption(L, 5, NULL, op_names), "all_reduce");
  check_nccl(L, ncclAllReduce(a.p, a.p, a.n, a.d->type, op, a.c->comm, cudaStreamLegacy),
             "all_reduce", "ncclAllReduce");
  return 0;
}

/** broadcast(comm, buffer, n, dtype, root): root's buffer into every rank's, in place. */
static int l_broadcast(lua_State *L) {
  call_args a = args_at(L, "broadcast");
  int root = rank_at(L, 5, a.c, "broadcast", "root");
  check_nccl(L, ncclBroadcast(a.p, a.p, a.n, a.d->type, root, a.c->comm, cudaStreamLegacy),
             "broadcast", "ncclBroadcast");
  return 0;
}

/** all_gather(comm, send, n, dtype, recv): recv (n * size elements) gets every rank's n. */
static int l_all_gather(lua_State *L) {
  call_args a = args_at(L, "all_gather");
  void *recv = dle_raw_buffer_at(L, 5, (lua_Integer)a.n, "all_gather");
  check_nccl(L, ncclAllGather(a.p, recv, a.n, a.d->type, a.c->comm, cudaStreamLegacy), "all_gather",
             "ncclAllGather");
  return 0;
}

/** reduce_scatter(comm, send, n, dtype, op, recv): send holds size blocks of n elements; recv
 * gets the reduction over the ranks of their block number rank. */
static int l_reduce_scatter(lua_State *L) {
  call_args a = args_at(L, "reduce_scatter");
  ncclRedOp_t op = pick_op(L, a.d, luaL_checkoption(L, 5, NULL, op_names), "reduce_scatter");
  void *recv = dle_raw_buffer_at(L, 6, (lua_Integer)a.n, "reduce_scatter");
  check_nccl(L, ncclReduceScatter(a.p, recv, a.n, a.d->type, op, a.c->comm, cudaStreamLegacy),
             "reduce_scatter", "ncclReduceScatter");
  return 0;
}

/** send(comm, buffer, n, dtype, peer) / recv(comm, buffer, n, dtype, peer): point to point. */
static int p2p(lua_State *L, const char *fn, int sending) {
  call_args a = args_at(L, fn);
  int peer = rank_at(L, 5, a.c, fn, sending ? "dst" : "src");
  if (sending)
    check_nccl(L, ncclSend(a.p, a.n, a.d->type, peer, a.c->comm, cudaStreamLegacy), fn, "ncclSend");
  else
    check_nccl(L, ncclRecv(a.p, a.n, a.d->type, peer, a.c->comm, cudaStreamLegacy), fn, "ncclRecv");
  return 0;
}
static int l_send(lua_State *L) { return p2p(L, "send", 1); }
static int l_recv(lua_State *L) { return p2p(L, "recv", 0); }

/** dtypes() -> {dle dtype name = NCCL type name}: the map above. */
static int l_dtypes(lua_State *L) {
  lua_createtable(L, 0, (int)NUM_DTYPES);
  for (size_t i = 0; i < NUM_DTYPES; i++) {
    lua_pushstring(L, dtypes[i].nccl_name);
    lua_setfield(L, -2, dtypes[i].name);
  }
  return 1;
}

int luaopen_dle_dist_nccl(lua_State *L) {
  static const luaL_Reg fns[] = {{"unique_id", l_unique_id},
                                 {"comm_init", l_comm_init},
                                 {"all_reduce", l_all_reduce},
                                 {"broadcast", l_broadcast},
                                 {"all_gather", l_all_gather},
                                 {"reduce_scatter", l_reduce_scatter},
                                 {"send", l_send},
                                 {"recv", l_recv},
                                 {"dtypes", l_dtypes},
                                 {NULL, NULL}};
  if (luaL_newmetatable(L, COMM_MT)) {
    lua_pushcfunction(L, comm_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  luaL_newlib(L, fns);
  /* the version compiled against, and the one loaded (a library older than the header is named) */
  int loaded = 0;
  ncclGetVersion(&loaded);
  lua_pushfstring(L, "NCCL %d.%d.%d", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  lua_setfield(L, -2, "version");
  lua_pushinteger(L, loaded);
  lua_setfield(L, -2, "loaded_version_code");
  lua_pushinteger(L, NCCL_UNIQUE_ID_BYTES);
  lua_setfield(L, -2, "unique_id_bytes");
  return 1;
}
