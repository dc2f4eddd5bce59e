/* dist_exchange.c — all_gather, reduce_scatter, send and recv (and the non-blocking isend and
 * all_reduce, with wait and test) over raw buffers (as
 * dist_collectives.c's), on dle's world communicator or a group's (the last argument). Each call
 * moves at most an MPI count (an int) of elements per rank: lua/dle/dist/init.lua says so first. */
#include <limits.h>
#include <stdint.h>

#include "../raw_buffer.h"
#include "dist.h"

static int count_at(lua_State *L, int idx, const char *fn) {
  lua_Integer n = luaL_checkinteger(L, idx);
  if (n < 0 || n > INT_MAX)
    luaL_error(L, "%s: %I elements per rank (at most %d in one call)", fn, n, INT_MAX);
  return (int)n;
}

/** all_gather(send, n, dtype, recv, group): recv (n * group size elements) gets every rank's n
 * elements of send, in rank order. */
static int l_all_gather(lua_State *L) {
  int n = count_at(L, 2, "all_gather");
  const dle_dist_dtype *d = dle_dist_check_dtype(L, 3, "all_gather");
  void *send = dle_raw_buffer_at(L, 1, n, "all_gather"),
       *recv = dle_raw_buffer_at(L, 4, n, "all_gather");
  MPI_Comm comm = dle_dist_comm_at(L, 5, "all_gather");
  dle_dist_check(L, MPI_Allgather(send, n, d->type, recv, n, d->type, comm), "all_gather",
                 "MPI_Allgather");
  return 0;
}

/** reduce_scatter(send, n, dtype, op, recv, group): send holds group size blocks of n elements;
 * recv (n elements) gets the reduction over the ranks of their block number rank. */
static int l_reduce_scatter(lua_State *L) {
  int n = count_at(L, 2, "reduce_scatter");
  const dle_dist_dtype *d = dle_dist_check_dtype(L, 3, "reduce_scatter");
  int op = luaL_checkoption(L, 4, NULL, dle_dist_op_names);
  void *send = dle_raw_buffer_at(L, 1, n, "reduce_scatter"),
       *recv = dle_raw_buffer_at(L, 5, n, "reduce_scatter");
  MPI_Comm comm = dle_dist_comm_at(L, 6, "reduce_scatter");
  dle_dist_check(L, MPI_Reduce_scatter_block(send, recv, n, d->type, dle_dist_pick_op(d, op), comm),
                 "reduce_scatter", "MPI_Reduce_scatter_block");
  return 0;
}

/* send's and recv's arguments after the buffer: (n, dtype, rank, tag, group). */
typedef struct {
  int n, rank, tag;
  const dle_dist_dtype *d;
  MPI_Comm comm;
} p2p_args;

static p2p_args p2p_args_at(lua_State *L, const char *fn) {
  p2p_args p;
  p.n = count_at(L, 2, fn);
  p.d = dle_dist_check_dtype(L, 3, fn);
  p.rank = (int)luaL_checkinteger(L, 4);
  p.tag = (int)luaL_checkinteger(L, 5);
  p.comm = dle_dist_comm_at(L, 6, fn);
  return p;
}

/** send(buffer, n, dtype, dst, tag, group): n elements to rank dst of the group (blocking). */
static int l_send(lua_State *L) {
  p2p_args p = p2p_args_at(L, "send");
  dle_dist_check(
      L, MPI_Send(dle_raw_buffer_at(L, 1, p.n, "send"), p.n, p.d->type, p.rank, p.tag, p.comm),
      "send", "MPI_Send");
  return 0;
}

#define REQUEST_MT "dle.dist.Request"

/* A send or an all_reduce in flight: its buffer must stay alive until it is waited for
 * (lua/dle/dist keeps the tensor beside it). Collecting one still in flight waits for it first. */
typedef struct {
  MPI_Request req;
} dist_request;

static int request_wait(lua_State *L) {
  dist_request *r = luaL_checkudata(L, 1, REQUEST_MT);
  if (r->req != MPI_REQUEST_NULL)
    dle_dist_check(L, MPI_Wait(&r->req, MPI_STATUS_IGNORE), "wait", "MPI_Wait");
  return 0;
}

static int request_gc(lua_State *L) {
  dist_request *r = luaL_checkudata(L, 1, REQUEST_MT);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (r->req != MPI_REQUEST_NULL && !finalized) MPI_Wait(&r->req, MPI_STATUS_IGNORE);
  return 0;
}

/** isend(buffer, n, dtype, dst, tag, group) -> a request: send's non-blocking form; wait(request)
 * returns once MPI is done with the buffer. */
static int l_isend(lua_State *L) {
  int n = count_at(L, 2, "isend");
  const dle_dist_dtype *d = dle_dist_check_dtype(L, 3, "isend");
  int dst = (int)luaL_checkinteger(L, 4), tag = (int)luaL_checkinteger(L, 5);
  MPI_Comm comm = dle_dist_comm_at(L, 6, "isend");
  void *p = dle_raw_buffer_at(L, 1, n, "isend");
  dist_request *r = lua_newuserdatauv(L, sizeof *r, 0);
  r->req = MPI_REQUEST_NULL;
  luaL_setmetatable(L, REQUEST_MT);
  dle_dist_check(L, MPI_Isend(p, n, d->type, dst, tag, comm, &r->req), "isend", "MPI_Isend");
  return 1;
}

/** iall_reduce(buffer, n, dtype, op, group) -> a request: all_reduce's non-blocking form
 * (MPI_Iallreduce, in place); the buffer is the result once wait(request) returns. */
static int l_iall_reduce(lua_State *L) {
  int n = count_at(L, 2, "all_reduce");
  const dle_dist_dtype *d = dle_dist_check_dtype(L, 3, "all_reduce");
  int op = luaL_checkoption(L, 4, NULL, dle_dist_op_names);
  MPI_Comm comm = dle_dist_comm_at(L, 5, "all_reduce");
  void *p = dle_raw_buffer_at(L, 1, n, "all_reduce");
  dist_request *r = lua_newuserdatauv(L, sizeof *r, 0);
  r->req = MPI_REQUEST_NULL;
  luaL_setmetatable(L, REQUEST_MT);
  dle_dist_check(
      L, MPI_Iallreduce(MPI_IN_PLACE, p, n, d->type, dle_dist_pick_op(d, op), comm, &r->req),
      "all_reduce", "MPI_Iallreduce");
  return 1;
}

/** test(request) -> whether it is done (MPI_Test: also lets MPI progress the requests in flight,
 * which Open MPI otherwise moves only inside MPI calls). */
static int l_test(lua_State *L) {
  dist_request *r = luaL_checkudata(L, 1, REQUEST_MT);
  int done = 1;
  if (r->req != MPI_REQUEST_NULL)
    dle_dist_check(L, MPI_Test(&r->req, &done, MPI_STATUS_IGNORE), "test", "MPI_Test");
  lua_pushboolean(L, done);
  return 1;
}

/** recv(buffer, n, dtype, src, tag, group) -> the sender's rank in the group: n elements from
 * rank src (-1: any rank); a message of another length is an error. */
static int l_recv(lua_State *L) {
  p2p_args p = p2p_args_at(L, "recv");
  MPI_Status st;
  dle_dist_check(L, MPI_Probe(p.rank < 0 ? MPI_ANY_SOURCE : p.rank, p.tag, p.comm, &st), "recv",
                 "MPI_Probe");
  int got;
  dle_dist_check(L, MPI_Get_count(&st, p.d->type, &got), "recv", "MPI_Get_count");
  if (got != p.n) {
    /* take the message off the queue (a truncated receive, its error ignored) before failing, so
     * it cannot match a later recv */
    MPI_Recv(NULL, 0, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, p.comm, MPI_STATUS_IGNORE);
    return luaL_error(L, "recv: rank %d sent %d elements, the tensor holds %d", st.MPI_SOURCE, got,
                      p.n);
  }
  dle_dist_check(L,
                 MPI_Recv(dle_raw_buffer_at(L, 1, p.n, "recv"), p.n, p.d->type, st.MPI_SOURCE,
                          st.MPI_TAG, p.comm, &st),
                 "recv", "MPI_Recv");
  lua_pushinteger(L, st.MPI_SOURCE);
  return 1;
}

/** probe(src, tag, group) -> the source rank and the element count (of dtype) of the next
 * matching message, without receiving it (blocking). */
static int l_probe(lua_State *L) {
  int src = (int)luaL_checkinteger(L, 1), tag = (int)luaL_checkinteger(L, 2);
  const dle_dist_dtype *d = dle_dist_check_dtype(L, 3, "probe");
  MPI_Comm comm = dle_dist_comm_at(L, 4, "probe");
  MPI_Status st;
  dle_dist_check(L, MPI_Probe(src < 0 ? MPI_ANY_SOURCE : src, tag, comm, &st), "probe",
                 "MPI_Probe");
  int got;
  dle_dist_check(L, MPI_Get_count(&st, d->type, &got), "probe", "MPI_Get_count");
  lua_pushinteger(L, st.MPI_SOURCE);
  lua_pushinteger(L, got);
  return 2;
}

/** group_rank(group), group_size(group): this rank's place in the group, and its size. */
static int l_group_rank(lua_State *L) {
  int r;
  dle_dist_check(L, MPI_Comm_rank(dle_dist_comm_at(L, 1, "rank"), &r), "rank", "MPI_Comm_rank");
  lua_pushinteger(L, r);
  return 1;
}

static int l_group_size(lua_State *L) {
  int n;
  dle_dist_check(L, MPI_Comm_size(dle_dist_comm_at(L, 1, "world_size"), &n), "world_size",
                 "MPI_Comm_size");
  lua_pushinteger(L, n);
  return 1;
}

void dle_dist_open_exchange(lua_State *L, int t) {
  if (luaL_newmetatable(L, REQUEST_MT)) {
    lua_pushcfunction(L, request_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  static const luaL_Reg fns[] = {{"isend", l_isend},
                                 {"wait", request_wait},
                                 {"iall_reduce", l_iall_reduce},
                                 {"test", l_test},
                                 {"probe", l_probe},
                                 {"all_gather", l_all_gather},
                                 {"reduce_scatter", l_reduce_scatter},
                                 {"send", l_send},
                                 {"recv", l_recv},
                                 {"group_rank", l_group_rank},
                                 {"group_size", l_group_size},
                                 {NULL, NULL}};
  lua_pushvalue(L, t);
  luaL_setfuncs(L, fns, 0);
  lua_pop(L, 1);
}
