/* index_shared.h — what the CPU kernels of the index family share (kernels/cpu/index.c,
 * index_scatter.c; select.c moves elements the same way). */
#ifndef DLE_CPU_INDEX_SHARED_H
#define DLE_CPU_INDEX_SHARED_H

#include "backend.h"

/* Elements moved by their size, whatever the dtype, as raw words: may_alias because a float's
 * bits travel as a uint32_t. */
typedef uint8_t __attribute__((may_alias)) word1;
typedef uint16_t __attribute__((may_alias)) word2;
typedef uint32_t __attribute__((may_alias)) word4;
typedef uint64_t __attribute__((may_alias)) word8;
#define WORD_SIZES(X) X(1) X(2) X(4) X(8)
#define SIZE_SLOT(B)  ((B) == 1 ? 0 : (B) == 2 ? 1 : (B) == 4 ? 2 : 3)
/* The initializer of a table, indexed by SIZE_SLOT, of the functions name_1 .. name_8 that a
 * WORD_SIZES expansion defined. */
#define WORD_TABLE(name) \
  { name##_1, name##_2, name##_4, name##_8 }

/* Every index must lie in [base, base + size) of `target`'s dim: else an error giving the
 * offending value as the caller wrote it (1-based from Lua), the dim and its size. */
dle_status cpu_index_check(dle_op op, const dle_tensor *index, int64_t base, int64_t size, int dim,
                           const char *target_name, const dle_tensor *target);
/* Copies src into dst (same shape and dtype) unless they are the same memory already. */
void cpu_index_move_into(dle_tensor *dst, dle_tensor *src);
/* scatter and scatter_reduce (kernels/cpu/index_scatter.c), registered by cpu_register_index. */
void cpu_register_index_scatter(dle_backend *b);

#endif
