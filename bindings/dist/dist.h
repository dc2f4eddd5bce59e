/* dist.h — what the files of dle.dist_native (the MPI side of dle.dist) share: the private
 * communicator, the dtype table and MPI error reporting. This module never calls the engine (the
 * core module is loaded RTLD_LOCAL): lua/dle/dist/init.lua hands it raw buffers from
 * dle.core._raw_buffer. */
#ifndef DLE_DIST_H
#define DLE_DIST_H

#include <stddef.h>

#include <lauxlib.h>
#include <lua.h>
#include <mpi.h>

/* The communicator of every collective: a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN,
 * so dle's traffic never matches a user's own MPI calls and failures come back as codes.
 * MPI_COMM_NULL before init and after finalize. */
extern MPI_Comm dle_dist_comm;

/* One dle dtype as MPI sees it: its type, element size and whether it is a 16-bit float that
 * MPI cannot reduce itself (float16, bfloat16, float8: user-defined ops, see dist_half.c). */
typedef struct {
  const char *name;
  MPI_Datatype type;
  size_t size;
  int half;    /* 0, or 1 for float16, 2 for bfloat16, 3 for float8_e4m3fn, 4 for float8_e5m2 */
  int boolean; /* bool: sum/max reduce with logical or, min/prod with logical and */
} dle_dist_dtype;

/* The dtype named at stack index idx (a Lua error naming fn for an unknown name). */
const dle_dist_dtype *dle_dist_check_dtype(lua_State *L, int idx, const char *fn);

/* Raises "fn: call failed: <MPI's message>" when rc is not MPI_SUCCESS. */
void dle_dist_check(lua_State *L, int rc, const char *fn, const char *call);

/* The communicator, or a Lua error naming fn when dle.dist is not initialized (or finalized). */
MPI_Comm dle_dist_need_comm(lua_State *L, const char *fn);

/* Reduction ops over float16 and bfloat16 (created by init, freed by finalize). op: 0 sum,
 * 1 prod, 2 max, 3 min; half: 1 float16, 2 bfloat16. */
int dle_dist_half_ops_create(void);
void dle_dist_half_ops_free(void);
MPI_Op dle_dist_half_op(int half, int op);

/* The communicator of a call: the group (dist_groups.c) at stack index idx, or the world one when
 * that argument is nil; a Lua error naming fn before init or on a rank outside the group. */
MPI_Comm dle_dist_comm_at(lua_State *L, int idx, const char *fn);

/* The reduction ops' names ("sum", "prod", "max", "min"; NULL-terminated for luaL_checkoption)
 * and the MPI op of the op-th on dtype d. */
extern const char *const dle_dist_op_names[];
MPI_Op dle_dist_pick_op(const dle_dist_dtype *d, int op);

/* Register their functions into the table at index t: all_reduce, broadcast, barrier
 * (dist_collectives.c); all_gather, reduce_scatter, send, recv, group_rank, group_size
 * (dist_exchange.c); new_group, group_is_member (dist_groups.c). */
void dle_dist_open_collectives(lua_State *L, int t);
void dle_dist_open_exchange(lua_State *L, int t);
void dle_dist_open_groups(lua_State *L, int t);

#endif
