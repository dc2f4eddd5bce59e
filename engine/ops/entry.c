/* entry.c — the named C entry points of ops.def's DLE_OP_PLAIN ops (declared in dle.h):
 * dle_add(&out, a, b), dle_exp(&out, x), ... each the front door of its op with no attrs. */
#include "../internal.h"

#define DLE_OP(id, name, nin, nout, kind, flags)
#define DLE_OP_PLAIN(id, name, nin, nout, kind, flags) DLE_ENTRY_DEF_##nin(id, name)
#define DLE_ENTRY_DEF_1(id, name) \
  dle_status dle_##name(dle_tensor **out, dle_tensor *x) { return dle_unary(DLE_OP_##id, out, x); }
#define DLE_ENTRY_DEF_2(id, name)                                         \
  dle_status dle_##name(dle_tensor **out, dle_tensor *a, dle_tensor *b) { \
    return dle_binary(DLE_OP_##id, out, a, b);                            \
  }
#include "../ops.def"
