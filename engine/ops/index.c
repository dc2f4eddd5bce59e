/* index.c — placeholder until the index family lands (being written now). */
#include "../internal.h"
dle_status dle_forward_index(dle_op op, dle_tensor **o, dle_tensor *const *i, int n, const dle_attrs *a) { (void)o,(void)i,(void)n,(void)a; return dle_error("%s: pending", dle_op_get_info(op)->name); }
