/* testutil.h — tensor helpers shared by the C tests: tensors with known values in several memory
 * layouts, element access by logical index, shape text for messages. Every tensor these helpers
 * return is tracked (released when the test ends); a failed creation ends the test. */
#ifndef DLE_TESTUTIL_H
#define DLE_TESTUTIL_H

#include "check.h"

/* SIZES(2, 3) expands to the (ndim, sizes) argument pair of the engine's functions. */
#define SIZES(...) \
  (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]) { __VA_ARGS__ }
#define NO_SIZES 0, (const int64_t *)NULL

/* Shape or strides of t as text, e.g. "{2,3}"; valid until eight more calls. */
const char *shape_of(const dle_tensor *t);
const char *strides_of(const dle_tensor *t);
bool shape_is(const dle_tensor *t, int ndim, const int64_t *sizes);
bool strides_are(const dle_tensor *t, int ndim, const int64_t *strides);
#define CHECK_SHAPE(t, ...) \
  CHECK(shape_is((t), SIZES(__VA_ARGS__)), "shape of %s is %s", #t, shape_of(t))
#define CHECK_STRIDES(t, ...) \
  CHECK(strides_are((t), SIZES(__VA_ARGS__)), "strides of %s are %s", #t, strides_of(t))

/* Steps a row-major multi-index through sizes; false after the last element. */
bool index_next(int ndim, const int64_t *sizes, int64_t *idx);
/* Element number `flat` (row-major over t's logical shape), as double. */
double at(const dle_tensor *t, int64_t flat);
/* Element of t at an index of a broadcast shape of ndim dims (right-aligned, size-1 dims read 0). */
double at_broadcast(const dle_tensor *t, int ndim, const int64_t *idx);

/* Value sequences: element i of a test input, salted so two operands differ. */
typedef enum {
  DOM_ANY,       /* -3 .. 3 in steps of 1/8 (exact in every float type), halves included */
  DOM_POS,       /* 1/16 .. 49/16 */
  DOM_INT,       /* whole numbers -7 .. 7 */
  DOM_INT_POS,   /* 1 .. 7 */
  DOM_SMALL_INT, /* -3 .. 3: many equal pairs for comparisons */
  DOM_EXPONENT,  /* 0 .. 3 */
  DOM_BOOL       /* 0 or 1 */
} value_domain;
double domain_value(value_domain d, int64_t i, int salt);

/* Memory layouts a test input can have; the logical values are the same in each. */
typedef enum {
  LAYOUT_CONTIGUOUS,
  LAYOUT_TRANSPOSED, /* last two dims swapped in memory, then transposed back (non-contiguous) */
  LAYOUT_SLICED,     /* narrowed out of a larger tensor on every dim (offset, gaps) */
  LAYOUT_STEPPED,    /* select of a trailing dim of 2: every stride doubled, inner stride 2 */
  NUM_LAYOUTS
} memory_layout;
extern const char *const layout_names[NUM_LAYOUTS];

/* A tensor of the given logical shape and layout whose element i is domain_value(d, i, salt). */
dle_tensor *t_make(memory_layout layout, dle_dtype dt, int ndim, const int64_t *sizes,
                   value_domain d, int salt);
/* A contiguous tensor holding vals (row-major). */
dle_tensor *t_values(dle_dtype dt, int ndim, const int64_t *sizes, const double *vals);
/* arange(0, n) of dtype dt, contiguous. */
dle_tensor *t_arange(int64_t n, dle_dtype dt);

#endif
