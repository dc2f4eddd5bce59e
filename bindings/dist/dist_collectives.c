/* dist_collectives.c — all_reduce, broadcast and barrier over raw buffers (pointer, element
 * count, dtype name) that lua/dle/dist/init.lua takes from contiguous CPU tensors (through
 * dle.core._raw_buffer). A buffer of more elements than an MPI count (an int) holds goes in several
 * calls. */
#include <limits.h>
#include <stdint.h>

#include "dist.h"

/* Elements per MPI call: well inside an int. */
#define CHUNK ((int64_t)1 << 30)

/* The buffer argument: a light userdata (NULL only for an empty buffer) and its element count. */
static void *check_buffer(lua_State *L, const char *fn, int64_t *count) {
  if (!lua_islightuserdata(L, 1))
    luaL_error(L, "%s: expected a raw buffer (light userdata), got %s", fn, luaL_typename(L, 1));
  void *p = lua_touserdata(L, 1);
  *count = luaL_checkinteger(L, 2);
  if (*count < 0) luaL_error(L, "%s: negative element count %I", fn, (LUAI_UACINT)*count);
  if (!p && *count > 0) luaL_error(L, "%s: NULL buffer of %I elements", fn, (LUAI_UACINT)*count);
  return p;
}

const char *const dle_dist_op_names[] = {"sum", "prod", "max", "min", NULL};

MPI_Op dle_dist_pick_op(const dle_dist_dtype *d, int op) {
  if (d->half) return dle_dist_half_op(d->half, op);
  if (d->boolean) return (op == 0 || op == 2) ? MPI_LOR : MPI_LAND;
  static const MPI_Op builtin[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
  return builtin[op];
}

/** all_reduce(buffer, count, dtype, op, group): reduces in place across every rank (of the group);
 * op is one of "sum", "prod", "max", "min" (mean is sum then a division, done in Lua). */
static int l_all_reduce(lua_State *L) {
  int64_t count;
  char *p = check_buffer(L, "all_reduce", &count);
  const dle_dist_dtype *d = dle_dist_check_dtype(L, 3, "all_reduce");
  int op = luaL_checkoption(L, 4, NULL, dle_dist_op_names);
  MPI_Comm comm = dle_dist_comm_at(L, 5, "all_reduce");
  MPI_Op mop = dle_dist_pick_op(d, op);
  for (int64_t done = 0; done < count; done += CHUNK) {
    int n = (int)(count - done < CHUNK ? count - done : CHUNK);
    dle_dist_check(L,
                   MPI_Allreduce(MPI_IN_PLACE, p + done * (int64_t)d->size, n, d->type, mop, comm),
                   "all_reduce", "MPI_Allreduce");
  }
  return 0;
}

/** broadcast(buffer, count, dtype, root, group): root's buffer (0-based rank in the group) into
 * every rank's. */
static int l_broadcast(lua_State *L) {
  int64_t count;
  char *p = check_buffer(L, "broadcast", &count);
  const dle_dist_dtype *d = dle_dist_check_dtype(L, 3, "broadcast");
  lua_Integer root = luaL_checkinteger(L, 4);
  MPI_Comm comm = dle_dist_comm_at(L, 5, "broadcast");
  int size;
  dle_dist_check(L, MPI_Comm_size(comm, &size), "broadcast", "MPI_Comm_size");
  if (root < 0 || root >= size)
    return luaL_error(L, "broadcast: root %I is not a rank (ranks are 0..%d)", (LUAI_UACINT)root,
                      size - 1);
  for (int64_t done = 0; done < count; done += CHUNK) {
    int n = (int)(count - done < CHUNK ? count - done : CHUNK);
    dle_dist_check(L, MPI_Bcast(p + done * (int64_t)d->size, n, d->type, (int)root, comm),
                   "broadcast", "MPI_Bcast");
  }
  return 0;
}

/** barrier(group): returns once every rank (of the group) has called it. */
static int l_barrier(lua_State *L) {
  dle_dist_check(L, MPI_Barrier(dle_dist_comm_at(L, 1, "barrier")), "barrier", "MPI_Barrier");
  return 0;
}

void dle_dist_open_collectives(lua_State *L, int t) {
  static const luaL_Reg fns[] = {{"all_reduce", l_all_reduce},
                                 {"broadcast", l_broadcast},
                                 {"barrier", l_barrier},
                                 {NULL, NULL}};
  lua_pushvalue(L, t);
  luaL_setfuncs(L, fns, 0);
  lua_pop(L, 1);
}
