/* random.c — placeholder until the random kernels land (being written now). */
#include "cpu_backend.h"
void cpu_register_random(dle_backend *b) { (void)b; }
