/* cuda_host.c — the CUDA library's link to the engine: the host table the engine passes at init
 * (dle.h: dle_backend_host), and error messages formatted here and handed to the engine's
 * dle_error, which the library cannot call directly (the core module is loaded RTLD_LOCAL). */
#include <stdarg.h>
#include <stdio.h>

#include "../../engine/dle.h"
#include "../../engine/kernel/backend.h"

const dle_backend_host *cu_host;

dle_status cu_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
dle_status cu_error(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (cu_host && cu_host->error) cu_host->error("%s", msg);
  return DLE_ERR;
}

const char *cu_op_name(dle_op op) {
  if (!cu_host || (unsigned)op >= (unsigned)cu_host->num_ops) return "?";
  return cu_host->op_table[op].name;
}
