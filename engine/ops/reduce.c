/* reduce.c — placeholder until the reduce family lands (being written now). */
#include "../internal.h"
dle_status dle_forward_reduce(dle_op op, dle_tensor **o, dle_tensor *const *i, int n, const dle_attrs *a) { (void)o,(void)i,(void)n,(void)a; return dle_error("%s: pending", dle_op_get_info(op)->name); }
dle_status dle_forward_softmax(dle_op op, dle_tensor **o, dle_tensor *const *i, int n, const dle_attrs *a) { (void)o,(void)i,(void)n,(void)a; return dle_error("%s: pending", dle_op_get_info(op)->name); }
