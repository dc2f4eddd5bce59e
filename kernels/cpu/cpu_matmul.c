/* matmul.c — placeholder until the matmul kernels land (being written now). */
#include "cpu_backend.h"
void cpu_register_matmul(dle_backend *b) { (void)b; }
