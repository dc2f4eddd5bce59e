/* test_optable.c — the op table (ops.def) as seen through the public API: names round-trip, the
 * arities fit each kind, and the CPU backend has a kernel for every op that needs one. The kernel
 * check fails while a kernel family is missing: that is its purpose. */
#include "testutil.h"
#include "../../engine/internal.h" /* dle_cpu_backend */

#include <stdio.h>
#include <string.h>

TEST(every_op_has_a_cpu_kernel_except_views) {
  const dle_backend *cpu = dle_cpu_backend();
  REQUIRE(cpu != NULL, "no CPU backend");
  CHECK(dle_backend_get(DLE_CPU) == cpu, "dle_backend_get(DLE_CPU) is not the CPU backend");
  char missing[2048] = "";
  size_t used = 0;
  int nmissing = 0;
  for (int op = 0; op < DLE_NUM_OPS; op++) {
    const dle_op_info *info = dle_op_get_info(op);
    if (info->kind == DLE_KIND_VIEW) {
      CHECK(cpu->kernels[op] == NULL, "view op %s has a kernel: views never run one", info->name);
      continue;
    }
    if (cpu->kernels[op]) continue;
    nmissing++;
    if (used < sizeof missing)
      used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%s", used ? " " : "",
                               info->name);
  }
  CHECK(nmissing == 0, "%d ops have no CPU kernel: %s", nmissing, missing);
}

TEST(op_names_round_trip_through_op_by_name) {
  for (int op = 0; op < DLE_NUM_OPS; op++) {
    const dle_op_info *info = dle_op_get_info(op);
    REQUIRE(info && info->name && info->name[0], "op %d has no name", op);
    CHECK(dle_op_by_name(info->name) == (dle_op)op, "op_by_name(%s) = %d, expected %d", info->name,
          dle_op_by_name(info->name), op);
  }
  CHECK(dle_op_by_name("no_such_op") == DLE_NUM_OPS, "unknown name gave %d",
        dle_op_by_name("no_such_op"));
  CHECK(dle_op_by_name("") == DLE_NUM_OPS, "empty name gave %d", dle_op_by_name(""));
}

TEST(op_info_is_null_outside_the_table) {
  CHECK(dle_op_get_info(DLE_NUM_OPS) == NULL, "info for DLE_NUM_OPS");
  CHECK(dle_op_get_info((dle_op)-1) == NULL, "info for -1");
}

TEST(op_arities_fit_their_kinds) {
  for (int op = 0; op < DLE_NUM_OPS; op++) {
    const dle_op_info *i = dle_op_get_info(op);
    int want_in = -2;
    switch (i->kind) {
      case DLE_KIND_CREATE:
      case DLE_KIND_RANDOM: want_in = 0; break;
      case DLE_KIND_VIEW:
      case DLE_KIND_COPY:
      case DLE_KIND_UNARY:
      case DLE_KIND_SOFTMAX: want_in = 1; break;
      case DLE_KIND_BINARY:
      case DLE_KIND_COMPARE: want_in = 2; break;
      case DLE_KIND_MATMUL: want_in = -1; break; /* a, b[, c] */
      case DLE_KIND_WHERE: want_in = 3; break;
      default: break; /* reductions and index ops vary */
    }
    if (want_in != -2)
      CHECK(i->nin == want_in, "%s takes %d inputs, its kind takes %d", i->name, i->nin, want_in);
    CHECK(i->nout == 1 ||
              (i->nout == 2 && (i->kind == DLE_KIND_REDUCE || i->kind == DLE_KIND_POOL ||
                                i->kind == DLE_KIND_NORM || i->kind == DLE_KIND_LOSS ||
                                i->kind == DLE_KIND_ATTENTION || i->kind == DLE_KIND_SCAN)) ||
              (i->nout == 3 && i->kind == DLE_KIND_ATTENTION && i->nout <= DLE_MAX_OUTS),
          "%s has %d outputs", i->name, i->nout);
    CHECK((unsigned)i->kind < DLE_NUM_KINDS, "%s has kind %d", i->name, i->kind);
    CHECK((i->flags & ~(unsigned)(DLE_DIFF | DLE_FLOATOUT)) == 0, "%s has unknown flags %#x",
          i->name, i->flags);
  }
}

TEST(op_names_are_unique) {
  for (int a = 0; a < DLE_NUM_OPS; a++)
    for (int b = a + 1; b < DLE_NUM_OPS; b++)
      CHECK(strcmp(dle_op_get_info(a)->name, dle_op_get_info(b)->name) != 0,
            "ops %d and %d are both %s", a, b, dle_op_get_info(a)->name);
}
