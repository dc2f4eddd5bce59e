/* test_tensor.c — tensor and storage lifetime (refcounts, borrowed memory), geometry checks of
 * as_strided, contiguity, numel and element access. */
#include "testutil.h"

#include <math.h>
#include <string.h>

/* A 0-dim geometry has no sizes to point at: the engine itself passes NULL (dle_scalar_tensor),
 * so every entry point must accept it (memcpy from NULL is undefined even for 0 bytes). */
TEST(zero_dim_geometry_may_be_given_as_null_sizes) {
  dle_tensor *e, *f, *s, *v, *r, *x, *m;
  double one = 1.5;
  MAKE(e, dle_tensor_empty(&e, NO_SIZES, DLE_F32, DLE_DEVICE_CPU));
  MAKE(f, dle_full(&f, NO_SIZES, 4, DLE_F64));
  MAKE(s, dle_tensor_as_strided(&s, f, NO_SIZES, NULL, 0));
  MAKE(v, dle_view(&v, f, NO_SIZES));
  MAKE(r, dle_reshape(&r, f, NO_SIZES));
  MAKE(x, dle_expand(&x, f, NO_SIZES));
  MAKE(m, dle_tensor_from_memory(&m, &one, sizeof one, NO_SIZES, NULL, DLE_F64, NULL, NULL));
  CHECK(e->ndim == 0 && dle_tensor_numel(e) == 1, "empty: %s", shape_of(e));
  CHECK(at(s, 0) == 4 && at(v, 0) == 4 && at(r, 0) == 4 && at(x, 0) == 4, "0-dim views read wrong");
  CHECK(at(m, 0) == 1.5, "from_memory 0-dim reads %g", at(m, 0));
}

TEST(numel_is_the_product_of_sizes) {
  dle_tensor *a, *s, *e;
  MAKE(a, dle_tensor_empty(&a, SIZES(2, 3, 4), DLE_F32, DLE_DEVICE_CPU));
  MAKE(s, dle_tensor_empty(&s, NO_SIZES, DLE_F64, DLE_DEVICE_CPU));
  MAKE(e, dle_tensor_empty(&e, SIZES(3, 0, 2), DLE_I64, DLE_DEVICE_CPU));
  CHECK(dle_tensor_numel(a) == 24, "numel of {2,3,4} is %lld", (long long)dle_tensor_numel(a));
  CHECK(dle_tensor_numel(s) == 1, "numel of a 0-dim tensor is %lld",
        (long long)dle_tensor_numel(s));
  CHECK(dle_tensor_numel(e) == 0, "numel of {3,0,2} is %lld", (long long)dle_tensor_numel(e));
}

TEST(empty_is_contiguous_with_row_major_strides_and_one_reference) {
  dle_tensor *a;
  MAKE(a, dle_tensor_empty(&a, SIZES(2, 3, 4), DLE_F64, DLE_DEVICE_CPU));
  CHECK_SHAPE(a, 2, 3, 4);
  CHECK_STRIDES(a, 12, 4, 1);
  CHECK(a->offset == 0, "offset %lld", (long long)a->offset);
  CHECK(a->refcount == 1 && a->storage->refcount == 1, "refcounts %d / %d", a->refcount,
        a->storage->refcount);
  CHECK(a->storage->nbytes >= 24 * sizeof(double), "storage of %zu bytes", a->storage->nbytes);
  CHECK(dle_tensor_is_contiguous(a), "not contiguous");
  CHECK(dle_tensor_device(a).type == DLE_CPU, "not on the CPU");
}

TEST(storage_memory_is_counted_and_returned) {
  size_t before = dle_memory_allocated();
  dle_tensor *a = NULL;
  REQUIRE_OK(dle_tensor_empty(&a, SIZES(10, 10), DLE_F64, DLE_DEVICE_CPU));
  CHECK(dle_memory_allocated() == before + 800, "allocated grew by %zu, expected 800",
        dle_memory_allocated() - before);
  CHECK(dle_memory_peak() >= before + 800, "peak %zu below current", dle_memory_peak());
  dle_tensor_release(a);
  CHECK(dle_memory_allocated() == before, "allocated is %zu after release, was %zu",
        dle_memory_allocated(), before);
}

TEST(freed_storage_is_cached_by_size_and_reused) {
  dle_set_cache_limit((size_t)1 << 20);
  dle_empty_cache();
  CHECK(dle_memory_cached() == 0, "%zu bytes cached after empty_cache", dle_memory_cached());
  dle_tensor *a = NULL, *b = NULL, *c = NULL;
  REQUIRE_OK(dle_tensor_empty(&a, SIZES(125), DLE_F64, DLE_DEVICE_CPU)); /* 1000 bytes */
  void *first = a->storage->data;
  dle_tensor_release(a);
  CHECK(dle_memory_cached() >= 1000, "%zu bytes cached after freeing 1000", dle_memory_cached());
  REQUIRE_OK(dle_tensor_empty(&b, SIZES(250), DLE_F32, DLE_DEVICE_CPU)); /* same 1000 bytes */
  CHECK(b->storage->data == first, "a block of the same size was not reused");
  CHECK(dle_memory_cached() == 0, "%zu bytes still cached after reuse", dle_memory_cached());
  CHECK(((uintptr_t)b->storage->data & 63) == 0, "reused block is not 64-byte aligned");
  REQUIRE_OK(dle_tensor_empty(&c, SIZES(3000), DLE_F64, DLE_DEVICE_CPU));
  dle_tensor_release(b);
  dle_tensor_release(c);
  CHECK(dle_memory_cached() >= 24000, "%zu bytes cached", dle_memory_cached());
  dle_empty_cache();
  CHECK(dle_memory_cached() == 0, "%zu bytes cached after empty_cache", dle_memory_cached());
  dle_set_cache_limit(CHECK_CACHE_LIMIT);
}

TEST(a_full_cache_makes_room_for_the_size_freed_last) {
  /* Fill a 64 KiB cache with 16 KiB blocks, then free one 32 KiB block: older sizes are evicted
   * so the sizes a loop uses now stay cached rather than going back to malloc every step. */
  dle_set_cache_limit((size_t)64 << 10);
  dle_empty_cache();
  dle_tensor *small[4], *big = NULL;
  for (int i = 0; i < 4; i++)
    REQUIRE_OK(dle_tensor_empty(&small[i], SIZES(4096), DLE_F32, DLE_DEVICE_CPU));
  REQUIRE_OK(dle_tensor_empty(&big, SIZES(8192), DLE_F32, DLE_DEVICE_CPU));
  void *big_data = big->storage->data;
  for (int i = 0; i < 4; i++) dle_tensor_release(small[i]);
  CHECK(dle_memory_cached() == (size_t)64 << 10, "%zu bytes cached, want the four 16 KiB blocks",
        dle_memory_cached());
  dle_tensor_release(big);
  CHECK(dle_memory_cached() == (size_t)64 << 10, "%zu bytes cached after evicting two blocks",
        dle_memory_cached());
  REQUIRE_OK(dle_tensor_empty(&big, SIZES(8192), DLE_F32, DLE_DEVICE_CPU));
  CHECK(big->storage->data == big_data, "the 32 KiB block was not kept for reuse");
  CHECK(dle_memory_cached() == (size_t)32 << 10, "%zu bytes cached after reuse",
        dle_memory_cached());
  dle_tensor_release(big);
  dle_empty_cache();
  dle_set_cache_limit(CHECK_CACHE_LIMIT);
}

TEST(a_zero_cache_limit_frees_storage_at_once) {
  dle_set_cache_limit(0);
  dle_tensor *a = NULL;
  REQUIRE_OK(dle_tensor_empty(&a, SIZES(100), DLE_F32, DLE_DEVICE_CPU));
  dle_tensor_release(a);
  CHECK(dle_memory_cached() == 0, "%zu bytes cached with a zero limit", dle_memory_cached());
  dle_set_cache_limit(CHECK_CACHE_LIMIT);
}

TEST(retain_and_release_count_references_to_a_header) {
  dle_tensor *a = NULL;
  REQUIRE_OK(dle_tensor_empty(&a, SIZES(4), DLE_F32, DLE_DEVICE_CPU));
  size_t held = dle_memory_allocated();
  dle_tensor_retain(a);
  CHECK(a->refcount == 2, "refcount %d after retain", a->refcount);
  dle_tensor_release(a);
  CHECK(a->refcount == 1, "refcount %d after one release", a->refcount);
  CHECK(dle_memory_allocated() == held, "storage freed while a reference remains");
  dle_tensor_release(a);
  dle_tensor_release(NULL); /* allowed, like free(NULL) */
}

TEST(views_count_as_storage_references) {
  dle_tensor *a, *v1, *v2;
  a = t_arange(12, DLE_F32);
  MAKE(v1, dle_narrow(&v1, a, 0, 2, 5));
  MAKE(v2, dle_transpose(&v2, a, 0, 0));
  CHECK(a->storage->refcount == 3, "storage refcount %d with two views", a->storage->refcount);
  CHECK(a->refcount == 1, "a view retained the base header (refcount %d)", a->refcount);
  CHECK(dle_same_storage(a, v1) && dle_same_storage(v1, v2), "views do not share storage");
}

TEST(views_keep_storage_alive_after_the_base_is_released) {
  size_t before = dle_memory_allocated();
  dle_tensor *base = NULL, *v = NULL, *w = NULL;
  REQUIRE_OK(dle_arange(&base, 0, 24, 1, DLE_F64));
  REQUIRE_OK(dle_narrow(&v, base, 0, 10, 4));
  REQUIRE_OK(dle_view(&w, v, SIZES(2, 2)));
  dle_tensor_release(base);
  CHECK(v->storage->refcount == 2, "storage refcount %d after the base went", v->storage->refcount);
  CHECK(dle_memory_allocated() == before + 24 * 8, "storage freed with views alive");
  for (int64_t i = 0; i < 4; i++) CHECK_NEAR(at(v, i), 10 + i, 0);
  CHECK_NEAR(at(w, 3), 13, 0);
  dle_tensor_release(v);
  CHECK_NEAR(at(w, 0), 10, 0);
  dle_tensor_release(w);
  CHECK(dle_memory_allocated() == before, "storage not freed after the last view");
}

typedef struct {
  int calls;
  void *data;
  size_t nbytes;
} release_log;

static void log_release(void *ctx, void *data, size_t nbytes) {
  release_log *log = ctx;
  log->calls++;
  log->data = data;
  log->nbytes = nbytes;
}

TEST(from_memory_calls_release_once_when_the_last_view_dies) {
  float buf[6] = {1, 2, 3, 4, 5, 6};
  release_log log = {0};
  dle_tensor *a = NULL, *t = NULL, *r = NULL;
  REQUIRE_OK(
      dle_tensor_from_memory(&a, buf, sizeof buf, SIZES(2, 3), NULL, DLE_F32, log_release, &log));
  CHECK(dle_tensor_data(a) == buf, "data is not the caller's buffer");
  CHECK_NEAR(at(a, 4), 5, 0);
  REQUIRE_OK(dle_transpose(&t, a, 0, 1));
  REQUIRE_OK(dle_select(&r, t, 0, 2));
  dle_tensor_release(a);
  dle_tensor_release(t);
  CHECK(log.calls == 0, "release called %d times while a view is alive", log.calls);
  CHECK_NEAR(at(r, 1), 6, 0);
  dle_tensor_release(r);
  CHECK(log.calls == 1, "release called %d times, expected once", log.calls);
  CHECK(log.data == buf && log.nbytes == sizeof buf, "release got %p/%zu, expected %p/%zu",
        log.data, log.nbytes, (void *)buf, sizeof buf);
}

TEST(from_memory_with_strides_reads_a_column_major_buffer) {
  double buf[6] = {1, 2, 3, 4, 5, 6}; /* 2x3 stored column by column */
  dle_tensor *a = NULL;
  REQUIRE_OK(dle_tensor_from_memory(&a, buf, sizeof buf, SIZES(2, 3), (const int64_t[]){1, 2},
                                    DLE_F64, NULL, NULL));
  track(a);
  CHECK(!dle_tensor_is_contiguous(a), "column-major tensor claims to be contiguous");
  const double want[6] = {1, 3, 5, 2, 4, 6};
  for (int i = 0; i < 6; i++) CHECK_NEAR(at(a, i), want[i], 0);
  dle_tensor *c;
  MAKE(c, dle_contiguous(&c, a));
  for (int i = 0; i < 6; i++) CHECK_NEAR(((double *)dle_tensor_data(c))[i], want[i], 0);
}

TEST(from_memory_rejects_a_buffer_too_small_and_does_not_release_it) {
  float buf[5];
  release_log log = {0};
  dle_tensor *a = NULL;
  CHECK_ERR(
      dle_tensor_from_memory(&a, buf, sizeof buf, SIZES(2, 3), NULL, DLE_F32, log_release, &log),
      "from_memory", "{2,3}", "20 bytes");
  CHECK(a == NULL, "output set on error");
  CHECK(log.calls == 0, "release called %d times for a rejected buffer", log.calls);
}

TEST(as_strided_builds_overlapping_windows_inside_the_storage) {
  dle_tensor *a = t_arange(10, DLE_I64), *w;
  MAKE(w, dle_tensor_as_strided(&w, a, SIZES(4, 3), (const int64_t[]){2, 1}, 1));
  CHECK_SHAPE(w, 4, 3);
  CHECK(w->offset == 1 && w->dtype == DLE_I64, "offset %lld dtype %s", (long long)w->offset,
        dle_dtype_name(w->dtype));
  for (int64_t r = 0; r < 4; r++)
    for (int64_t c = 0; c < 3; c++) CHECK_NEAR(at(w, r * 3 + c), 1 + 2 * r + c, 0);
}

TEST(as_strided_accepts_negative_strides_that_stay_in_bounds) {
  dle_tensor *a = t_arange(5, DLE_F32), *r;
  MAKE(r, dle_tensor_as_strided(&r, a, SIZES(5), (const int64_t[]){-1}, 4));
  for (int i = 0; i < 5; i++) CHECK_NEAR(at(r, i), 4 - i, 0);
  CHECK(!dle_tensor_is_contiguous(r), "reversed view claims to be contiguous");
}

TEST(as_strided_rejects_geometry_outside_the_storage) {
  dle_tensor *a = t_arange(10, DLE_F32), *w = NULL;
  CHECK_ERR(dle_tensor_as_strided(&w, a, SIZES(4, 3), (const int64_t[]){3, 1}, 0), "as_strided",
            "{4,3}", "outside");
  CHECK_ERR(dle_tensor_as_strided(&w, a, SIZES(10), (const int64_t[]){1}, 1), "as_strided", "{10}");
  CHECK_ERR(dle_tensor_as_strided(&w, a, SIZES(2), (const int64_t[]){1}, -1), "as_strided",
            "offset -1");
  CHECK_ERR(dle_tensor_as_strided(&w, a, SIZES(5), (const int64_t[]){-1}, 3), "as_strided", "{5}");
  CHECK_ERR(dle_tensor_as_strided(&w, a, SIZES(2, -2), (const int64_t[]){1, 1}, 0), "as_strided",
            "negative size", "{2,-2}");
  CHECK(w == NULL, "output set on error");
}

TEST(as_strided_allows_an_empty_geometry_anywhere) {
  dle_tensor *a = t_arange(4, DLE_F32), *e;
  MAKE(e, dle_tensor_as_strided(&e, a, SIZES(0, 3), (const int64_t[]){100, 1}, 50));
  CHECK(dle_tensor_numel(e) == 0, "numel %lld", (long long)dle_tensor_numel(e));
}

TEST(is_contiguous_follows_the_strides) {
  dle_tensor *a = t_arange(24, DLE_F32), *v, *t, *rows, *cols, *row, *col, *ex, *one, *trow, *s;
  MAKE(v, dle_view(&v, a, SIZES(4, 6)));
  MAKE(t, dle_transpose(&t, v, 0, 1));
  MAKE(rows, dle_narrow(&rows, v, 0, 1, 2));
  MAKE(cols, dle_narrow(&cols, v, 1, 1, 2));
  MAKE(row, dle_select(&row, v, 0, 2));
  MAKE(col, dle_select(&col, v, 1, 2));
  MAKE(ex, dle_expand(&ex, row, SIZES(3, 6)));
  MAKE(one, dle_narrow(&one, v, 1, 3, 1));   /* {4,1} column, strides {6,1} */
  MAKE(trow, dle_narrow(&trow, t, 1, 3, 1)); /* {6,1} column of the transpose: a row in memory */
  MAKE(s, dle_tensor_as_strided(&s, a, NO_SIZES, NULL, 5));
  CHECK(dle_tensor_is_contiguous(v), "{4,6} view");
  CHECK(!dle_tensor_is_contiguous(t), "transposed");
  CHECK(dle_tensor_is_contiguous(rows), "narrowed rows");
  CHECK(!dle_tensor_is_contiguous(cols), "narrowed columns");
  CHECK(dle_tensor_is_contiguous(row), "selected row");
  CHECK(!dle_tensor_is_contiguous(col), "selected column (stride 6)");
  CHECK(!dle_tensor_is_contiguous(ex), "expanded");
  CHECK(!dle_tensor_is_contiguous(one), "column {4,1} with strides %s", strides_of(one));
  CHECK(dle_tensor_is_contiguous(trow), "{6,1} with strides %s", strides_of(trow));
  CHECK(dle_tensor_is_contiguous(s), "0-dim");
}

TEST(a_size_one_dim_with_any_stride_is_still_contiguous) {
  dle_tensor *a = t_arange(6, DLE_F32), *w;
  MAKE(w, dle_tensor_as_strided(&w, a, SIZES(2, 1, 3), (const int64_t[]){3, 99, 1}, 0));
  CHECK(dle_tensor_is_contiguous(w), "{2,1,3} with strides %s", strides_of(w));
}

TEST(tensor_data_points_at_the_first_element_of_the_view) {
  dle_tensor *a = t_arange(12, DLE_F64), *v, *n;
  MAKE(v, dle_view(&v, a, SIZES(3, 4)));
  MAKE(n, dle_narrow(&n, v, 0, 1, 2));
  CHECK((char *)dle_tensor_data(n) == (char *)dle_tensor_data(a) + 4 * sizeof(double),
        "offset %lld", (long long)n->offset);
  CHECK(*(double *)dle_tensor_data(n) == 4, "first element %g", *(double *)dle_tensor_data(n));
}

TEST(clone_owns_new_storage) {
  dle_tensor *a = t_arange(6, DLE_F32), *c;
  MAKE(c, dle_clone(&c, a));
  CHECK(!dle_same_storage(a, c), "clone shares storage");
  dle_tensor_set(c, (const int64_t[]){0}, 42);
  CHECK_NEAR(at(a, 0), 0, 0);
}

TEST(get_and_set_round_trip_in_every_dtype) {
  for (int dt = 0; dt < DLE_NUM_DTYPES; dt++) {
    dle_tensor *t;
    MAKE(t, dle_zeros(&t, SIZES(2, 3), (dle_dtype)dt));
    uint32_t v0 = t->storage->version;
    dle_tensor_set(t, (const int64_t[]){1, 2}, 1);
    dle_tensor_set(t, (const int64_t[]){0, 1}, dt == DLE_BOOL ? 1 : 3);
    CHECK(dle_tensor_get(t, (const int64_t[]){1, 2}) == 1, "%s", dle_dtype_name(dt));
    CHECK(dle_tensor_get(t, (const int64_t[]){0, 1}) == (dt == DLE_BOOL ? 1 : 3), "%s",
          dle_dtype_name(dt));
    CHECK(dle_tensor_get(t, (const int64_t[]){1, 1}) == 0, "%s", dle_dtype_name(dt));
    CHECK(t->storage->version == v0 + 2, "%s: version %u after two sets from %u",
          dle_dtype_name(dt), t->storage->version, v0);
  }
}

TEST(set_saturates_into_integer_dtypes_and_maps_nan_to_zero) {
  dle_tensor *u8, *i32, *i64, *b;
  MAKE(u8, dle_zeros(&u8, SIZES(1), DLE_U8));
  MAKE(i32, dle_zeros(&i32, SIZES(1), DLE_I32));
  MAKE(i64, dle_zeros(&i64, SIZES(1), DLE_I64));
  MAKE(b, dle_zeros(&b, SIZES(1), DLE_BOOL));
  const int64_t i0[1] = {0};
  dle_tensor_set(u8, i0, 300),
      CHECK(dle_tensor_get(u8, i0) == 255, "300 -> %g", dle_tensor_get(u8, i0));
  dle_tensor_set(u8, i0, -5),
      CHECK(dle_tensor_get(u8, i0) == 0, "-5 -> %g", dle_tensor_get(u8, i0));
  dle_tensor_set(u8, i0, NAN),
      CHECK(dle_tensor_get(u8, i0) == 0, "NaN -> %g", dle_tensor_get(u8, i0));
  dle_tensor_set(i32, i0, 1e12),
      CHECK(dle_tensor_get(i32, i0) == 2147483647.0, "1e12 -> %g", dle_tensor_get(i32, i0));
  dle_tensor_set(i32, i0, -2.7),
      CHECK(dle_tensor_get(i32, i0) == -2, "-2.7 -> %g", dle_tensor_get(i32, i0));
  dle_tensor_set(i64, i0, -INFINITY);
  CHECK(*(int64_t *)dle_tensor_data(i64) == INT64_MIN, "-inf -> %lld",
        (long long)*(int64_t *)dle_tensor_data(i64));
  dle_tensor_set(b, i0, 0.25),
      CHECK(dle_tensor_get(b, i0) == 1, "0.25 -> %g", dle_tensor_get(b, i0));
}

TEST(shape_str_formats_sizes_in_braces) {
  char buf[64];
  CHECK(strcmp(dle_shape_str(buf, sizeof buf, 3, (const int64_t[]){2, 3, 4}), "{2,3,4}") == 0, "%s",
        buf);
  CHECK(strcmp(dle_shape_str(buf, sizeof buf, 0, NULL), "{}") == 0, "%s", buf);
  char tiny[4];
  dle_shape_str(tiny, sizeof tiny, 3, (const int64_t[]){200, 300, 4});
  CHECK(strlen(tiny) < sizeof tiny, "overflowed a small buffer");
}

TEST(zero_sized_tensors_allocate_and_release_cleanly) {
  dle_tensor *e, *c;
  MAKE(e, dle_zeros(&e, SIZES(0, 4), DLE_F32));
  MAKE(c, dle_clone(&c, e));
  CHECK_SHAPE(c, 0, 4);
  CHECK(dle_tensor_numel(c) == 0, "numel %lld", (long long)dle_tensor_numel(c));
}
