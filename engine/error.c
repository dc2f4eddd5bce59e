/* error.c — per-thread error messages: engine functions return DLE_ERR and leave the reason here. */
#include "internal.h"

#include <stdarg.h>

static _Thread_local char last_error[1024];

const char *dle_last_error(void) { return last_error[0] ? last_error : "unknown error"; }

dle_status dle_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return DLE_ERR;
}

char *dle_shape_str(char *buf, size_t n, int ndim, const int64_t *sizes) {
  size_t used = (size_t)snprintf(buf, n, "{");
  for (int d = 0; d < ndim && used < n; d++)
    used += (size_t)snprintf(buf + used, n - used, d ? ",%lld" : "%lld", (long long)sizes[d]);
  if (used < n) snprintf(buf + used, n - used, "}");
  return buf;
}

char *dle_tensor_shape_str(char *buf, size_t n, const dle_tensor *t) {
  return dle_shape_str(buf, n, t->ndim, t->sizes);
}

dle_status dle_wrap_dim(const char *fn, int dim, int ndim, int extra, int *out) {
  int n = ndim + extra;
  int d = dim < 0 ? dim + n : dim;
  /* Messages count dims from 1 (negative ones from the end), as the Lua API does. */
  if (n == 0)
    return dle_error("%s: dim %d out of range for a 0-dim tensor (it has no dims)", fn,
                     dim < 0 ? dim : dim + 1);
  if (d < 0 || d >= n)
    return dle_error("%s: dim %d out of range for a %d-dim tensor (valid: %d..%d, or %d..-1)", fn,
                     dim < 0 ? dim : dim + 1, ndim, n ? 1 : 0, n, -n);
  *out = d;
  return DLE_OK;
}
