/* dist_groups.c — process groups: a subset of the ranks with a communicator of its own
 * (new_group), and the communicator a collective runs on (a group's, or dle's world one). */
#include "dist.h"

#define GROUP_MT "dle.dist.Group"

typedef struct {
  MPI_Comm comm; /* MPI_COMM_NULL on ranks outside the group, and once freed */
} dist_group;

static void free_group(dist_group *g) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g->comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&g->comm);
  g->comm = MPI_COMM_NULL;
}

static int group_gc(lua_State *L) {
  free_group(luaL_checkudata(L, 1, GROUP_MT));
  return 0;
}

/** new_group(ranks): a group of the given world ranks (0-based, distinct, in the order given: the
 * group rank of ranks[i] is i - 1). Every rank of the world must call it (MPI_Comm_create), as in
 * PyTorch; ranks outside the group get a group object they cannot communicate on. */
static int l_new_group(lua_State *L) {
  MPI_Comm world = dle_dist_need_comm(L, "new_group");
  luaL_checktype(L, 1, LUA_TTABLE);
  int n = (int)luaL_len(L, 1), size;
  dle_dist_check(L, MPI_Comm_size(world, &size), "new_group", "MPI_Comm_size");
  if (n < 1 || n > size)
    return luaL_error(L, "new_group: a group holds 1 to %d ranks, got %d", size, n);
  int *ranks = lua_newuserdatauv(L, sizeof(int) * (size_t)n, 0);
  for (int i = 0; i < n; i++) {
    lua_geti(L, 1, i + 1);
    lua_Integer r = lua_tointeger(L, -1);
    if (!lua_isinteger(L, -1) || r < 0 || r >= size)
      return luaL_error(L, "new_group: ranks[%d] is not a rank (ranks are 0..%d)", i + 1, size - 1);
    for (int j = 0; j < i; j++)
      if (ranks[j] == r) return luaL_error(L, "new_group: rank %d is listed twice", (int)r);
    ranks[i] = (int)r;
    lua_pop(L, 1);
  }
  MPI_Group world_group, sub;
  dle_dist_check(L, MPI_Comm_group(world, &world_group), "new_group", "MPI_Comm_group");
  int rc = MPI_Group_incl(world_group, n, ranks, &sub);
  MPI_Group_free(&world_group);
  dle_dist_check(L, rc, "new_group", "MPI_Group_incl");
  dist_group *g = lua_newuserdatauv(L, sizeof *g, 0);
  g->comm = MPI_COMM_NULL;
  luaL_setmetatable(L, GROUP_MT);
  rc = MPI_Comm_create(world, sub, &g->comm);
  MPI_Group_free(&sub);
  dle_dist_check(L, rc, "new_group", "MPI_Comm_create");
  if (g->comm != MPI_COMM_NULL) MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
  return 1;
}

/** group_is_member(g): whether this rank belongs to g. */
static int l_group_is_member(lua_State *L) {
  dist_group *g = luaL_checkudata(L, 1, GROUP_MT);
  lua_pushboolean(L, g->comm != MPI_COMM_NULL);
  return 1;
}

MPI_Comm dle_dist_comm_at(lua_State *L, int idx, const char *fn) {
  MPI_Comm world = dle_dist_need_comm(L, fn);
  if (lua_isnoneornil(L, idx)) return world;
  dist_group *g = luaL_testudata(L, idx, GROUP_MT);
  if (!g)
    luaL_error(L, "%s: group must be a group from dle.dist.new_group, got %s", fn,
               luaL_typename(L, idx));
  if (g->comm == MPI_COMM_NULL) luaL_error(L, "%s: this rank is not a member of the group", fn);
  return g->comm;
}

void dle_dist_open_groups(lua_State *L, int t) {
  if (luaL_newmetatable(L, GROUP_MT)) {
    lua_pushcfunction(L, group_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, l_new_group);
  lua_setfield(L, t, "new_group");
  lua_pushcfunction(L, l_group_is_member);
  lua_setfield(L, t, "group_is_member");
}
