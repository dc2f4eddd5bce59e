/* rng.c — placeholder until the generator lands (being written now). */
#include "internal.h"
static dle_generator default_gen;
dle_generator *dle_default_generator(void) { return &default_gen; }
int64_t dle_random_blocks(dle_op op, dle_dtype dt, int64_t n) { (void)op, (void)dt; return n; }
