/* tensor.c — storages and tensor headers: lifetime (refcounts), geometry helpers, element access. */
#include "kernel/fp8.h"
#include "kernel/half.h"
#include "internal.h"

#include <complex.h>

#include <stdatomic.h>
#include <stdlib.h>

/* memcpy of dims; sizes may be NULL for a 0-dim tensor, which memcpy must never see. */
static void copy_dims(int64_t *dst, const int64_t *src, int n) {
  if (n > 0) memcpy(dst, src, (size_t)n * sizeof *src);
}

/* Tensor and storage headers are small and short-lived: an op on small tensors would spend a
 * large share of its time in calloc/free for them. Freed headers go on a free list (linked
 * through their first bytes) and are handed out again zeroed; the list is as long as the most
 * headers that were ever garbage at once, which is what malloc would keep anyway. The lists are
 * per thread (tensors are made and dropped on the Lua thread), so no lock or atomic is needed;
 * a header freed on another thread simply joins that thread's list. */
typedef struct free_header {
  struct free_header *next;
} free_header;
static _Thread_local DLE_HOT_TLS free_header *tensor_headers, *storage_headers;

/* Zeroes a header with plain stores. memset (or a loop GCC recognises as one) became `rep stosq`,
 * whose start-up cost was half of dle_tensor_empty's time on this AMD machine. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
static void
zero_header(void *p, size_t size) {
  uint64_t *w = p;
  for (size_t i = 0; i < size / sizeof *w; i++) w[i] = 0;
}
_Static_assert(sizeof(dle_tensor) % 8 == 0 && sizeof(dle_storage) % 8 == 0,
               "headers are whole words");

static void *header_alloc(free_header **list, size_t size) {
  free_header *p = *list;
  if (!DLE_RECYCLE || !p) return calloc(1, size);
  *list = p->next;
  zero_header(p, size);
  return p;
}

static void header_free(free_header **list, void *p) {
  if (!p) return;
  if (!DLE_RECYCLE) {
    free(p);
    return;
  }
  free_header *h = p;
  h->next = *list;
  *list = h;
}

static dle_storage *storage_new(size_t nbytes, dle_device dev) {
  dle_storage *s = header_alloc(&storage_headers, sizeof *s);
  if (!s) {
    dle_error("out of memory allocating a storage header");
    return NULL;
  }
  if (dev.type == DLE_CPU) {
    s->data = dle_cpu_alloc(nbytes);
  } else {
    const dle_backend *b = dle_backend_get(dev.type);
    if (!b) {
      char buf[32];
      header_free(&storage_headers, s);
      dle_error("%s: %s", dle_device_str(buf, sizeof buf, dev),
                dle_backend_unavailable_reason(dev.type));
      return NULL;
    }
    s->data = b->alloc(nbytes, dev.index);
    if (!s->data) {
      char buf[32];
      header_free(&storage_headers, s);
      dle_error("%s: cannot allocate %zu bytes (out of device memory, or no such device)",
                dle_device_str(buf, sizeof buf, dev), nbytes);
      return NULL;
    }
  }
  if (!s->data) {
    header_free(&storage_headers, s);
    dle_error("out of memory");
    return NULL;
  }
  s->nbytes = nbytes;
  s->refcount = 1;
  s->device = dev;
  return s;
}

static void storage_release(dle_storage *s) {
  if (!s || --s->refcount > 0) return;
  if (s->release)
    s->release(s->release_ctx, s->data, s->nbytes);
  else if (s->device.type == DLE_CPU)
    dle_cpu_free(s->data, s->nbytes);
  else {
    const dle_backend *b = dle_backend_get(s->device.type);
    if (b) b->free(s->data, s->nbytes, s->device.index);
  }
  header_free(&storage_headers, s);
}

void dle_contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides) {
  int64_t st = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = st;
    st *= sizes[d] > 0 ? sizes[d] : 1;
  }
}

int64_t dle_shape_numel(int ndim, const int64_t *sizes) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= sizes[d];
  return n;
}

bool dle_shape_equal(int na, const int64_t *a, int nb, const int64_t *b) {
  if (na != nb) return false;
  for (int d = 0; d < na; d++) /* shapes are short: a loop beats a call to memcmp */
    if (a[d] != b[d]) return false;
  return true;
}

static dle_status check_sizes(const char *fn, int ndim, const int64_t *sizes) {
  if (ndim < 0 || ndim > DLE_MAX_DIMS)
    return dle_error("%s: %d dims requested, at most %d are supported", fn, ndim, DLE_MAX_DIMS);
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) {
    if (sizes[d] < 0) {
      char buf[128];
      return dle_error("%s: negative size in %s", fn, dle_shape_str(buf, sizeof buf, ndim, sizes));
    }
    /* at most INT64_MAX / 16 elements, so byte counts of any dtype fit (no division per dim:
     * this runs for every new tensor). Zeros count as 1: an empty tensor's strides are still
     * products of its other sizes ({0, 2^40, 2^40} would overflow them). */
    if (__builtin_mul_overflow(n, sizes[d] ? sizes[d] : 1, &n) || n > INT64_MAX / 16) {
      char buf[128];
      return dle_error("%s: shape %s has too many elements", fn,
                       dle_shape_str(buf, sizeof buf, ndim, sizes));
    }
  }
  return DLE_OK;
}

static dle_tensor *header_new(void) {
  dle_tensor *t = header_alloc(&tensor_headers, sizeof *t);
  if (!t)
    dle_error("out of memory allocating a tensor header");
  else
    t->refcount = 1;
  return t;
}

dle_status dle_tensor_empty(dle_tensor **out, int ndim, const int64_t *sizes, dle_dtype dtype,
                            dle_device device) {
  DLE_TRY(check_sizes("empty", ndim, sizes));
  if ((unsigned)dtype >= DLE_NUM_DTYPES) return dle_error("empty: invalid dtype %d", (int)dtype);
  return dle_tensor_empty_checked(out, ndim, sizes, dtype, device);
}

/* "40.0 GB": decimal units, as the DLE_MAX_MEMORY suffixes. */
static char *format_bytes(char *buf, size_t n, size_t bytes) {
  static const char *units[] = {"bytes", "KB", "MB", "GB", "TB", "PB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1000 && u < 5) v /= 1000, u++;
  if (u == 0)
    snprintf(buf, n, "%zu bytes", bytes);
  else
    snprintf(buf, n, "%.1f %s", v, units[u]);
  return buf;
}

dle_status dle_tensor_empty_checked(dle_tensor **out, int ndim, const int64_t *sizes,
                                    dle_dtype dtype, dle_device device) {
  dle_tensor *t = header_new();
  if (!t) return DLE_ERR;
  size_t nbytes = (size_t)dle_shape_numel(ndim, sizes) * dle_dtype_size(dtype);
  t->storage = storage_new(nbytes, device);
  if (!t->storage) {
    header_free(&tensor_headers, t);
    /* no function name: the binding puts the user's function before it ("randn: allocating ...") */
    char buf[128], why[256], size[32], limit[32], used[32];
    snprintf(why, sizeof why, "%s", dle_last_error()); /* dle_error overwrites it */
    dle_shape_str(buf, sizeof buf, ndim, sizes);
    format_bytes(size, sizeof size, nbytes);
    if (device.type == DLE_CPU && dle_memory_over_limit(nbytes))
      return dle_error("allocating %s %s (%s) would exceed the memory limit of %s (in use %s)", buf,
                       dle_dtype_name(dtype), size,
                       format_bytes(limit, sizeof limit, dle_memory_limit()),
                       format_bytes(used, sizeof used, dle_memory_allocated()));
    return dle_error("cannot allocate %s %s (%s): %s", buf, dle_dtype_name(dtype), size, why);
  }
  t->ndim = ndim;
  t->dtype = dtype;
  copy_dims(t->sizes, sizes, ndim);
  dle_contiguous_strides(ndim, sizes, t->strides);
  *out = t;
  return DLE_OK;
}

/* Smallest and one-past-largest element offsets a geometry touches (empty: lo = hi). */
static void extent(int ndim, const int64_t *sizes, const int64_t *strides, int64_t offset,
                   int64_t *lo, int64_t *hi) {
  *lo = *hi = offset;
  for (int d = 0; d < ndim; d++) {
    if (sizes[d] == 0) {
      *hi = *lo;
      return;
    }
    int64_t span = (sizes[d] - 1) * strides[d];
    if (span < 0)
      *lo += span;
    else
      *hi += span;
  }
  *hi += 1;
}

static dle_status check_in_storage(const char *fn, size_t nbytes, dle_dtype dt, int ndim,
                                   const int64_t *sizes, const int64_t *strides, int64_t offset) {
  int64_t lo, hi;
  extent(ndim, sizes, strides, offset, &lo, &hi);
  if (lo == hi) return DLE_OK;
  if (lo < 0 || (uint64_t)hi * dle_dtype_size(dt) > nbytes) {
    char buf[128];
    return dle_error("%s: geometry %s with offset %lld reaches outside its storage of %zu bytes",
                     fn, dle_shape_str(buf, sizeof buf, ndim, sizes), (long long)offset, nbytes);
  }
  return DLE_OK;
}

static void release_nothing(void *ctx, void *data, size_t nbytes) {
  (void)ctx, (void)data, (void)nbytes;
}

dle_status dle_tensor_from_memory(dle_tensor **out, void *data, size_t nbytes, int ndim,
                                  const int64_t *sizes, const int64_t *strides, dle_dtype dtype,
                                  void (*release)(void *, void *, size_t), void *release_ctx) {
  DLE_TRY(check_sizes("from_memory", ndim, sizes));
  int64_t st[DLE_MAX_DIMS];
  if (!strides)
    dle_contiguous_strides(ndim, sizes, st);
  else
    copy_dims(st, strides, ndim);
  DLE_TRY(check_in_storage("from_memory", nbytes, dtype, ndim, sizes, st, 0));
  dle_tensor *t = header_new();
  dle_storage *s = header_alloc(&storage_headers, sizeof *s);
  if (!t || !s) {
    header_free(&tensor_headers, t);
    header_free(&storage_headers, s);
    return dle_error("out of memory");
  }
  /* A NULL release means "never freed by dle": a no-op keeps storage_release from free()ing. */
  *s = (dle_storage){.data = data,
                     .nbytes = nbytes,
                     .refcount = 1,
                     .device = DLE_DEVICE_CPU,
                     .release = release ? release : release_nothing,
                     .release_ctx = release_ctx};
  t->storage = s;
  t->ndim = ndim;
  t->dtype = dtype;
  copy_dims(t->sizes, sizes, ndim);
  copy_dims(t->strides, st, ndim);
  *out = t;
  return DLE_OK;
}

dle_status dle_tensor_as_strided(dle_tensor **out, const dle_tensor *src, int ndim,
                                 const int64_t *sizes, const int64_t *strides, int64_t offset) {
  DLE_TRY(check_sizes("as_strided", ndim, sizes));
  DLE_TRY(check_in_storage("as_strided", src->storage->nbytes, src->dtype, ndim, sizes, strides,
                           offset));
  dle_tensor *t = header_new();
  if (!t) return DLE_ERR;
  t->storage = src->storage;
  t->storage->refcount++;
  t->offset = offset;
  t->ndim = ndim;
  t->dtype = src->dtype;
  copy_dims(t->sizes, sizes, ndim);
  copy_dims(t->strides, strides, ndim);
  *out = t;
  return DLE_OK;
}

void dle_tensor_retain(dle_tensor *t) {
  if (t) t->refcount++;
}

void dle_tensor_release(dle_tensor *t) {
  if (!t || --t->refcount > 0) return;
  storage_release(t->storage);
  dle_tensor_release(t->grad);
  dle_tensor_release(t->tangent);
  dle_node_release(t->grad_fn);
  header_free(&tensor_headers, t);
}

int64_t dle_tensor_numel(const dle_tensor *t) { return dle_shape_numel(t->ndim, t->sizes); }

bool dle_tensor_is_contiguous(const dle_tensor *t) {
  int64_t st = 1;
  bool dense = true;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t n = t->sizes[d];
    if (n == 0) return true;                          /* no element to be out of place */
    if (n != 1 && t->strides[d] != st) dense = false; /* a size-1 dim's stride is irrelevant */
    st *= n;
  }
  return dense;
}

bool dle_same_view(const dle_tensor *a, const dle_tensor *b) {
  return a->storage == b->storage && a->offset == b->offset && a->dtype == b->dtype &&
         dle_shape_equal(a->ndim, a->sizes, b->ndim, b->sizes) &&
         memcmp(a->strides, b->strides, (size_t)a->ndim * sizeof *a->strides) == 0;
}

bool dle_tensor_overlaps_itself(const dle_tensor *t) {
  for (int d = 0; d < t->ndim; d++)
    if (t->strides[d] == 0 && t->sizes[d] > 1) return true;
  return false;
}

bool dle_same_storage(const dle_tensor *a, const dle_tensor *b) { return a->storage == b->storage; }

static void *element_ptr(const dle_tensor *t, const int64_t *index) {
  int64_t off = t->offset;
  for (int d = 0; d < t->ndim; d++) off += index[d] * t->strides[d];
  return (char *)t->storage->data + off * (int64_t)dle_dtype_size(t->dtype);
}

double dle_tensor_get(const dle_tensor *t, const int64_t *index) {
  const void *p = element_ptr(t, index);
  switch (t->dtype) {
    case DLE_F32: return *(const float *)p;
    case DLE_F64: return *(const double *)p;
    case DLE_F16: return dle_half_to_float(*(const uint16_t *)p);
    case DLE_BF16: return dle_bfloat_to_float(*(const uint16_t *)p);
    case DLE_I32: return *(const int32_t *)p;
    case DLE_I64: return (double)*(const int64_t *)p;
    case DLE_U8: return *(const uint8_t *)p;
    case DLE_BOOL: return *(const uint8_t *)p != 0;
    case DLE_C64: return crealf(*(const float _Complex *)p); /* the real part */
    case DLE_C128: return creal(*(const double _Complex *)p);
    case DLE_I8: return *(const int8_t *)p;
    case DLE_I16: return *(const int16_t *)p;
    case DLE_U16: return *(const uint16_t *)p;
    case DLE_U32: return *(const uint32_t *)p;
    case DLE_U64: return (double)*(const uint64_t *)p;
    case DLE_F8E4M3: return dle_f8e4m3_to_float(*(const uint8_t *)p);
    case DLE_F8E5M2: return dle_f8e5m2_to_float(*(const uint8_t *)p);
    default: return 0;
  }
}

/* Float to integer without undefined behaviour: NaN gives 0, out-of-range saturates. */
static int64_t saturate(double v, double lo, double hi) {
  if (v != v) return 0;
  if (v <= lo) return (int64_t)lo;
  if (v >= hi) return (int64_t)hi;
  return (int64_t)v;
}

void dle_tensor_set(dle_tensor *t, const int64_t *index, double v) {
  void *p = element_ptr(t, index);
  switch (t->dtype) {
    case DLE_F32: *(float *)p = (float)v; break;
    case DLE_F64: *(double *)p = v; break;
    case DLE_F16: *(uint16_t *)p = dle_float_to_half((float)v); break;
    case DLE_BF16: *(uint16_t *)p = dle_float_to_bfloat((float)v); break;
    case DLE_I32: *(int32_t *)p = (int32_t)saturate(v, INT32_MIN, INT32_MAX); break;
    case DLE_I64: *(int64_t *)p = saturate(v, -9223372036854775808.0, 9223372036854774784.0); break;
    case DLE_U8: *(uint8_t *)p = (uint8_t)saturate(v, 0, 255); break;
    case DLE_BOOL: *(uint8_t *)p = v != 0; break;
    case DLE_C64: *(float _Complex *)p = (float)v; break; /* imaginary part 0 */
    case DLE_C128: *(double _Complex *)p = v; break;
    case DLE_I8: *(int8_t *)p = (int8_t)saturate(v, INT8_MIN, INT8_MAX); break;
    case DLE_I16: *(int16_t *)p = (int16_t)saturate(v, INT16_MIN, INT16_MAX); break;
    case DLE_U16: *(uint16_t *)p = (uint16_t)saturate(v, 0, UINT16_MAX); break;
    case DLE_U32: *(uint32_t *)p = (uint32_t)saturate(v, 0, UINT32_MAX); break;
    case DLE_U64: /* above int64's range by hand: saturate() returns int64 */
      *(uint64_t *)p = v >= 18446744073709551615.0 ? UINT64_MAX
                       : v >= 9223372036854775808.0
                           ? (uint64_t)v
                           : (uint64_t)saturate(v, 0, 9223372036854774784.0);
      break;
    case DLE_F8E4M3: *(uint8_t *)p = dle_float_to_f8e4m3((float)v); break;
    case DLE_F8E5M2: *(uint8_t *)p = dle_float_to_f8e5m2((float)v); break;
    default: break;
  }
  t->storage->version++;
}

dle_status dle_prepare_out(dle_tensor **out, const char *fn, int ndim, const int64_t *sizes,
                           dle_dtype dt, dle_device dev) {
  if (!*out) return dle_tensor_empty(out, ndim, sizes, dt, dev);
  dle_tensor *o = *out;
  if (!dle_shape_equal(o->ndim, o->sizes, ndim, sizes)) {
    char buf[128];
    return dle_error("%s: output has shape %s but the result has shape %s", fn, SHAPE(o),
                     dle_shape_str(buf, sizeof buf, ndim, sizes));
  }
  if (o->dtype != dt)
    return dle_error("%s: output is %s but the result is %s", fn, dle_dtype_name(o->dtype),
                     dle_dtype_name(dt));
  return DLE_OK;
}
