/* testutil.c — the tensor helpers of testutil.h. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

const char *const layout_names[NUM_LAYOUTS] = {"contiguous", "transposed", "sliced", "stepped"};

static char *next_buf(void) {
  static char bufs[8][160];
  static int k;
  return bufs[k++ & 7];
}

const char *shape_of(const dle_tensor *t) { return dle_tensor_shape_str(next_buf(), 160, t); }

const char *strides_of(const dle_tensor *t) {
  return dle_shape_str(next_buf(), 160, t->ndim, t->strides);
}

bool shape_is(const dle_tensor *t, int ndim, const int64_t *sizes) {
  return t->ndim == ndim &&
         (ndim == 0 || memcmp(t->sizes, sizes, (size_t)ndim * sizeof *sizes) == 0);
}

bool strides_are(const dle_tensor *t, int ndim, const int64_t *strides) {
  return t->ndim == ndim &&
         (ndim == 0 || memcmp(t->strides, strides, (size_t)ndim * sizeof *strides) == 0);
}

bool index_next(int ndim, const int64_t *sizes, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    if (++idx[d] < sizes[d]) return true;
    idx[d] = 0;
  }
  return false;
}

double at(const dle_tensor *t, int64_t flat) {
  int64_t idx[DLE_MAX_DIMS];
  for (int d = t->ndim - 1; d >= 0; d--) {
    idx[d] = flat % t->sizes[d];
    flat /= t->sizes[d];
  }
  return dle_tensor_get(t, idx);
}

double at_broadcast(const dle_tensor *t, int ndim, const int64_t *idx) {
  int64_t own[DLE_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) {
    int from = d + ndim - t->ndim;
    own[d] = t->sizes[d] == 1 ? 0 : idx[from];
  }
  return dle_tensor_get(t, own);
}

double domain_value(value_domain d, int64_t i, int salt) {
  /* multipliers coprime to every modulus below, different per salt so that two operands
   * still meet (comparisons need ties) */
  static const int64_t mult[3] = {37, 41, 43};
  int64_t k = i * mult[salt % 3] + 11 + salt * 23;
  switch (d) {
    case DOM_ANY: return (double)(k % 49 - 24) / 8.0;
    case DOM_POS: return (double)(k % 49 + 1) / 16.0;
    case DOM_INT: return (double)(k % 15 - 7);
    case DOM_INT_POS: return (double)(k % 7 + 1);
    case DOM_SMALL_INT: return (double)(k % 7 - 3);
    case DOM_EXPONENT: return (double)(k % 4);
    case DOM_BOOL: return (double)(k % 3 == 0);
  }
  return 0;
}

static dle_tensor *base_tensor(dle_dtype dt, int ndim, const int64_t *sizes) {
  dle_tensor *t;
  MAKE(t, dle_tensor_empty(&t, ndim, sizes, dt, DLE_DEVICE_CPU));
  REQUIRE_OK(dle_fill_(t, 77)); /* a sentinel in the gaps a wrong stride would read */
  return t;
}

static dle_tensor *layout_view(memory_layout layout, dle_dtype dt, int ndim, const int64_t *sizes) {
  int64_t big[DLE_MAX_DIMS];
  memcpy(big, sizes, (size_t)ndim * sizeof *sizes);
  dle_tensor *t;
  switch (layout) {
    case LAYOUT_TRANSPOSED:
      if (ndim < 2) return base_tensor(dt, ndim, sizes);
      big[ndim - 1] = sizes[ndim - 2], big[ndim - 2] = sizes[ndim - 1];
      MAKE(t, dle_transpose(&t, base_tensor(dt, ndim, big), -1, -2));
      return t;
    case LAYOUT_SLICED:
      if (ndim == 0) {
        MAKE(t, dle_select(&t, base_tensor(dt, SIZES(3)), 0, 1));
        return t;
      }
      for (int d = 0; d < ndim; d++) big[d] += 3;
      t = base_tensor(dt, ndim, big);
      for (int d = 0; d < ndim; d++) {
        dle_tensor *from = t;
        MAKE(t, dle_narrow(&t, from, d, 1, sizes[d]));
      }
      return t;
    case LAYOUT_STEPPED:
      big[ndim] = 2;
      MAKE(t, dle_select(&t, base_tensor(dt, ndim + 1, big), ndim, 1));
      return t;
    default: return base_tensor(dt, ndim, sizes);
  }
}

dle_tensor *t_make(memory_layout layout, dle_dtype dt, int ndim, const int64_t *sizes,
                   value_domain d, int salt) {
  dle_tensor *t = layout_view(layout, dt, ndim, sizes);
  if (dle_tensor_numel(t) == 0) return t;
  int64_t idx[DLE_MAX_DIMS] = {0}, i = 0;
  do dle_tensor_set(t, idx, domain_value(d, i++, salt));
  while (index_next(ndim, sizes, idx));
  return t;
}

dle_tensor *t_values(dle_dtype dt, int ndim, const int64_t *sizes, const double *vals) {
  dle_tensor *t;
  MAKE(t, dle_tensor_empty(&t, ndim, sizes, dt, DLE_DEVICE_CPU));
  if (dle_tensor_numel(t) == 0) return t;
  int64_t idx[DLE_MAX_DIMS] = {0}, i = 0;
  do dle_tensor_set(t, idx, vals[i++]);
  while (index_next(ndim, sizes, idx));
  return t;
}

dle_tensor *t_arange(int64_t n, dle_dtype dt) {
  dle_tensor *t;
  MAKE(t, dle_arange(&t, 0, (double)n, 1, dt));
  return t;
}
