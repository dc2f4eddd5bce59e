/* index.c — placeholder until the index kernels land (being written now). */
#include "cpu_backend.h"
void cpu_register_index(dle_backend *b) { (void)b; }
