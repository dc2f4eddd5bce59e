/* test_views.c — movement ops: the sizes, strides and offsets they produce, storage sharing,
 * writes through views, when view must refuse and reshape must copy, and their dim errors. */
#include "testutil.h"

#include <math.h>

TEST(view_of_arange24_as_1x2x3x4_has_strides_24_12_4_1) {
  dle_tensor *a = t_arange(24, DLE_F32), *v;
  MAKE(v, dle_view(&v, a, SIZES(1, 2, 3, 4)));
  CHECK_SHAPE(v, 1, 2, 3, 4);
  CHECK_STRIDES(v, 24, 12, 4, 1);
  CHECK(dle_same_storage(a, v) && v->offset == 0, "not a view of a at offset 0");
  CHECK_NEAR(dle_tensor_get(v, (const int64_t[]){0, 1, 2, 3}), 23, 0);
}

TEST(view_infers_the_size_given_as_minus_one) {
  dle_tensor *a = t_arange(24, DLE_F32), *v, *w;
  MAKE(v, dle_view(&v, a, SIZES(2, -1, 4)));
  CHECK_SHAPE(v, 2, 3, 4);
  CHECK_STRIDES(v, 12, 4, 1);
  MAKE(w, dle_view(&w, v, SIZES(-1)));
  CHECK_SHAPE(w, 24);
}

TEST(view_rejects_a_wrong_element_count_or_two_inferred_sizes) {
  dle_tensor *a = t_arange(24, DLE_F32), *v = NULL;
  CHECK_ERR(dle_view(&v, a, SIZES(5, 5)), "view", "{5,5}", "{24}");
  CHECK_ERR(dle_view(&v, a, SIZES(-1, -1)), "view", "{-1,-1}");
  CHECK_ERR(dle_view(&v, a, SIZES(7, -1)), "view", "{7,-1}", "{24}");
  CHECK_ERR(dle_view(&v, a, SIZES(-2, 12)), "view", "negative", "{-2,12}");
  CHECK(v == NULL, "output set on error");
}

TEST(view_of_a_transposed_tensor_fails_and_names_view) {
  dle_tensor *a = t_arange(6, DLE_F32), *m, *t, *v = NULL;
  MAKE(m, dle_view(&m, a, SIZES(2, 3)));
  MAKE(t, dle_transpose(&t, m, 0, 1));
  CHECK_ERR(dle_view(&v, t, SIZES(6)), "view", "{3,2}", "reshape");
  CHECK(v == NULL, "output set on error");
}

TEST(reshape_of_a_transposed_tensor_copies_in_logical_order) {
  dle_tensor *a = t_arange(6, DLE_F32), *m, *t, *r;
  MAKE(m, dle_view(&m, a, SIZES(2, 3)));
  MAKE(t, dle_transpose(&t, m, 0, 1));
  MAKE(r, dle_reshape(&r, t, SIZES(6)));
  CHECK(!dle_same_storage(r, a), "reshape of a transposed tensor shares storage");
  const double want[6] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; i++) CHECK_NEAR(at(r, i), want[i], 0);
}

TEST(reshape_of_a_contiguous_tensor_is_a_view) {
  dle_tensor *a = t_arange(24, DLE_F64), *r;
  MAKE(r, dle_reshape(&r, a, SIZES(4, -1)));
  CHECK_SHAPE(r, 4, 6);
  CHECK(dle_same_storage(a, r), "reshape copied a contiguous tensor");
}

TEST(view_splits_a_dim_of_a_column_slice_but_cannot_merge_across_the_gap) {
  dle_tensor *a = t_arange(24, DLE_F32), *m, *c, *s, *bad = NULL, *r;
  MAKE(m, dle_view(&m, a, SIZES(4, 6)));
  MAKE(c, dle_narrow(&c, m, 1, 0, 4)); /* {4,4} strides {6,1} */
  MAKE(s, dle_view(&s, c, SIZES(4, 2, 2)));
  CHECK_STRIDES(s, 6, 2, 1);
  CHECK_NEAR(dle_tensor_get(s, (const int64_t[]){2, 1, 0}), 14, 0);
  CHECK_ERR(dle_view(&bad, c, SIZES(16)), "view", "{4,4}");
  MAKE(r, dle_reshape(&r, c, SIZES(16)));
  CHECK(!dle_same_storage(r, a), "reshape across a gap did not copy");
  CHECK_NEAR(at(r, 4), 6, 0);
  CHECK_NEAR(at(r, 15), 21, 0);
}

TEST(view_of_a_narrowed_block_of_rows_is_allowed) {
  dle_tensor *a = t_arange(24, DLE_F32), *m, *rows, *flat;
  MAKE(m, dle_view(&m, a, SIZES(4, 6)));
  MAKE(rows, dle_narrow(&rows, m, 0, 1, 2));
  MAKE(flat, dle_view(&flat, rows, SIZES(-1)));
  CHECK_SHAPE(flat, 12);
  CHECK(flat->offset == 6, "offset %lld", (long long)flat->offset);
  CHECK_NEAR(at(flat, 11), 17, 0);
}

TEST(view_of_an_expanded_tensor_keeps_zero_strides) {
  dle_tensor *a = t_arange(3, DLE_F32), *col, *e, *v, *bad = NULL;
  MAKE(col, dle_view(&col, a, SIZES(3, 1)));
  MAKE(e, dle_expand(&e, col, SIZES(3, 4)));
  MAKE(v, dle_view(&v, e, SIZES(3, 2, 2)));
  CHECK_STRIDES(v, 1, 0, 0);
  CHECK_ERR(dle_view(&bad, e, SIZES(12)), "view", "{3,4}");
  dle_tensor *r;
  MAKE(r, dle_reshape(&r, e, SIZES(12)));
  CHECK(!dle_same_storage(r, a) && at(r, 5) == 1 && at(r, 11) == 2,
        "reshape of an expanded tensor: %g %g", at(r, 5), at(r, 11));
}

TEST(view_handles_0dim_and_empty_tensors) {
  dle_tensor *s, *one, *back, *e, *ev;
  MAKE(s, dle_full(&s, NO_SIZES, 7, DLE_F32));
  MAKE(one, dle_view(&one, s, SIZES(1, 1)));
  MAKE(back, dle_view(&back, one, NO_SIZES));
  CHECK(back->ndim == 0 && at(back, 0) == 7, "0-dim round trip gave %s", shape_of(back));
  MAKE(e, dle_zeros(&e, SIZES(0, 3), DLE_F32));
  MAKE(ev, dle_view(&ev, e, SIZES(3, 0)));
  CHECK_SHAPE(ev, 3, 0);
}

TEST(transpose_swaps_sizes_and_strides_and_shares_storage) {
  dle_tensor *a = t_arange(24, DLE_F32), *m, *t, *n;
  MAKE(m, dle_view(&m, a, SIZES(2, 3, 4)));
  MAKE(t, dle_transpose(&t, m, 0, 2));
  CHECK_SHAPE(t, 4, 3, 2);
  CHECK_STRIDES(t, 1, 4, 12);
  CHECK(dle_same_storage(t, a) && t->offset == 0, "not a view");
  CHECK_NEAR(dle_tensor_get(t, (const int64_t[]){3, 1, 1}), 12 + 4 + 3, 0);
  MAKE(n, dle_transpose(&n, m, -1, -2));
  CHECK_SHAPE(n, 2, 4, 3);
  CHECK_STRIDES(n, 12, 1, 4);
}

TEST(transpose_of_a_1d_or_0dim_tensor_is_the_same_geometry) {
  dle_tensor *a = t_arange(5, DLE_F32), *t, *s, *st;
  MAKE(t, dle_transpose(&t, a, 0, -1));
  CHECK_SHAPE(t, 5);
  CHECK_STRIDES(t, 1);
  MAKE(s, dle_full(&s, NO_SIZES, 2, DLE_F32));
  MAKE(st, dle_transpose(&st, s, 0, -1));
  CHECK(st->ndim == 0, "0-dim transpose has shape %s", shape_of(st));
}

TEST(permute_reorders_sizes_and_strides) {
  dle_tensor *a = t_arange(24, DLE_F32), *m, *p;
  MAKE(m, dle_view(&m, a, SIZES(2, 3, 4)));
  MAKE(p, dle_permute(&p, m, (const int[]){2, 0, 1}));
  CHECK_SHAPE(p, 4, 2, 3);
  CHECK_STRIDES(p, 1, 12, 4);
  CHECK_NEAR(dle_tensor_get(p, (const int64_t[]){1, 1, 2}), 12 + 8 + 1, 0);
  dle_tensor *q;
  MAKE(q, dle_permute(&q, m, (const int[]){-1, -3, -2}));
  CHECK_STRIDES(q, 1, 12, 4);
}

TEST(narrow_moves_the_offset_and_keeps_the_strides) {
  dle_tensor *a = t_arange(12, DLE_F32), *m, *n, *neg;
  MAKE(m, dle_view(&m, a, SIZES(3, 4)));
  MAKE(n, dle_narrow(&n, m, 1, 1, 2));
  CHECK_SHAPE(n, 3, 2);
  CHECK_STRIDES(n, 4, 1);
  CHECK(n->offset == 1, "offset %lld", (long long)n->offset);
  CHECK_NEAR(at(n, 5), 10, 0);
  MAKE(neg, dle_narrow(&neg, m, 0, -2, 2)); /* start -2: the last two rows */
  CHECK(neg->offset == 4, "offset %lld for start -2", (long long)neg->offset);
}

TEST(select_drops_the_dim_and_moves_the_offset) {
  dle_tensor *a = t_arange(12, DLE_F32), *m, *c, *last;
  MAKE(m, dle_view(&m, a, SIZES(3, 4)));
  MAKE(c, dle_select(&c, m, 1, 2));
  CHECK_SHAPE(c, 3);
  CHECK_STRIDES(c, 4);
  CHECK(c->offset == 2, "offset %lld", (long long)c->offset);
  CHECK_NEAR(at(c, 2), 10, 0);
  MAKE(last, dle_select(&last, m, -2, -1)); /* dim -2 is dim 0; index -1 the last row */
  CHECK_SHAPE(last, 4);
  CHECK(last->offset == 8, "offset %lld", (long long)last->offset);
}

TEST(expand_sets_zero_strides_on_broadcast_dims) {
  dle_tensor *a = t_arange(3, DLE_F32), *col, *e, *k;
  MAKE(col, dle_view(&col, a, SIZES(3, 1)));
  MAKE(e, dle_expand(&e, col, SIZES(2, 3, 4)));
  CHECK_SHAPE(e, 2, 3, 4);
  CHECK_STRIDES(e, 0, 1, 0);
  CHECK_NEAR(dle_tensor_get(e, (const int64_t[]){1, 2, 3}), 2, 0);
  MAKE(k, dle_expand(&k, col, SIZES(-1, 5)));
  CHECK_SHAPE(k, 3, 5);
  dle_tensor *bad = NULL;
  CHECK_ERR(dle_expand(&bad, col, SIZES(4, 4)), "expand", "{3,1}", "{4,4}");
  CHECK_ERR(dle_expand(&bad, col, SIZES(3)), "expand", "{3,1}");
}

TEST(squeeze_removes_size_one_dims) {
  dle_tensor *a = t_arange(6, DLE_F32), *m, *all, *one, *kept;
  MAKE(m, dle_view(&m, a, SIZES(1, 3, 1, 2)));
  MAKE(all, dle_squeeze(&all, m, DLE_ALL_DIMS));
  CHECK_SHAPE(all, 3, 2);
  MAKE(one, dle_squeeze(&one, m, 2));
  CHECK_SHAPE(one, 1, 3, 2);
  MAKE(kept, dle_squeeze(&kept, m, 1)); /* size 3: unchanged */
  CHECK_SHAPE(kept, 1, 3, 1, 2);
  CHECK(dle_same_storage(all, a), "squeeze copied");
}

TEST(unsqueeze_inserts_a_size_one_dim_anywhere_including_the_end) {
  dle_tensor *a = t_arange(6, DLE_F32), *m, *front, *end, *neg;
  MAKE(m, dle_view(&m, a, SIZES(3, 2)));
  MAKE(front, dle_unsqueeze(&front, m, 0));
  CHECK_SHAPE(front, 1, 3, 2);
  MAKE(end, dle_unsqueeze(&end, m, 2));
  CHECK_SHAPE(end, 3, 2, 1);
  MAKE(neg, dle_unsqueeze(&neg, m, -1));
  CHECK_SHAPE(neg, 3, 2, 1);
  CHECK(dle_same_storage(neg, a), "unsqueeze copied");
}

TEST(flatten_merges_a_range_of_dims) {
  dle_tensor *a = t_arange(24, DLE_F32), *m, *f12, *all, *t, *ft, *s, *fs;
  MAKE(m, dle_view(&m, a, SIZES(2, 3, 4)));
  MAKE(f12, dle_flatten(&f12, m, 1, 2));
  CHECK_SHAPE(f12, 2, 12);
  CHECK(dle_same_storage(f12, a), "flatten of a contiguous tensor copied");
  MAKE(all, dle_flatten(&all, m, 0, -1));
  CHECK_SHAPE(all, 24);
  MAKE(t, dle_transpose(&t, m, 0, 2));
  MAKE(ft, dle_flatten(&ft, t, 0, 1)); /* {4,3,2} -> {12,2}: needs a copy */
  CHECK_SHAPE(ft, 12, 2);
  CHECK_NEAR(dle_tensor_get(ft, (const int64_t[]){5, 1}),
             dle_tensor_get(t, (const int64_t[]){1, 2, 1}), 0);
  MAKE(s, dle_full(&s, NO_SIZES, 3, DLE_F32));
  MAKE(fs, dle_flatten(&fs, s, 0, -1));
  CHECK_SHAPE(fs, 1);
}

TEST(writes_through_a_view_are_seen_by_the_base) {
  dle_tensor *a = t_arange(12, DLE_F32), *m, *t, *row;
  MAKE(m, dle_view(&m, a, SIZES(3, 4)));
  MAKE(t, dle_transpose(&t, m, 0, 1));
  MAKE(row, dle_select(&row, t, 0, 1)); /* column 1 of m */
  uint32_t v0 = a->storage->version;
  dle_tensor_set(row, (const int64_t[]){2}, -5);
  CHECK_NEAR(at(a, 9), -5, 0);
  REQUIRE_OK(dle_fill_(row, 8));
  CHECK_NEAR(at(a, 1), 8, 0);
  CHECK_NEAR(at(a, 5), 8, 0);
  CHECK_NEAR(at(a, 9), 8, 0);
  CHECK_NEAR(at(a, 2), 2, 0);
  CHECK(a->storage->version > v0, "writes through a view did not bump the shared version");
}

TEST(fill_of_a_narrowed_view_touches_only_that_region) {
  dle_tensor *a, *n;
  MAKE(a, dle_zeros(&a, SIZES(4, 5), DLE_F64));
  MAKE(n, dle_narrow(&n, a, 1, 1, 3));
  REQUIRE_OK(dle_fill_(n, 1));
  for (int64_t i = 0; i < 20; i++) {
    int64_t c = i % 5;
    CHECK_NEAR(at(a, i), c >= 1 && c <= 3 ? 1 : 0, 0);
  }
}

TEST(fill_of_a_large_transposed_view_reaches_every_element) {
  dle_tensor *a, *t;
  MAKE(a, dle_zeros(&a, SIZES(259, 131), DLE_F64));
  MAKE(t, dle_transpose(&t, a, 0, 1));
  REQUIRE_OK(dle_fill_(t, 2.5));
  int64_t wrong = 0;
  for (int64_t i = 0; i < 259 * 131; i++) wrong += at(a, i) != 2.5;
  CHECK(wrong == 0, "%lld of %d elements not filled", (long long)wrong, 259 * 131);
}

TEST(copy_broadcasts_the_source_and_converts_its_dtype) {
  dle_tensor *base, *dst, *row = t_values(DLE_I64, SIZES(3), (const double[]){-1, 5, 7});
  MAKE(base, dle_zeros(&base, SIZES(3, 4), DLE_F32));
  MAKE(dst, dle_transpose(&dst, base, 0, 1)); /* {4,3} */
  REQUIRE_OK(dle_copy_(dst, row));
  for (int64_t r = 0; r < 4; r++)
    for (int64_t c = 0; c < 3; c++)
      CHECK_NEAR(dle_tensor_get(dst, (const int64_t[]){r, c}), at(row, c), 0);
  dle_tensor *bad = t_values(DLE_F32, SIZES(4), (const double[]){1, 2, 3, 4});
  CHECK_ERR(dle_copy_(dst, bad), "copy_", "{4}", "{4,3}");
}

TEST(copy_into_an_expanded_destination_is_refused) {
  /* several destination elements share one location: which source value lands there would depend
   * on the loop order (and on threads), so like an expanded output of add it is an error */
  dle_tensor *col, *dst, *src = t_make(LAYOUT_CONTIGUOUS, DLE_F32, SIZES(3, 4), DOM_ANY, 0);
  MAKE(col, dle_zeros(&col, SIZES(3, 1), DLE_F32));
  MAKE(dst, dle_expand(&dst, col, SIZES(3, 4)));
  CHECK_ERR(dle_copy_(dst, src), "copy_", "{3,4}");
}

TEST(copy_into_a_transposed_view_writes_the_base_transposed) {
  dle_tensor *a, *t, *src = t_arange(6, DLE_F32), *s;
  MAKE(a, dle_zeros(&a, SIZES(3, 2), DLE_F32));
  MAKE(t, dle_transpose(&t, a, 0, 1));
  MAKE(s, dle_view(&s, src, SIZES(2, 3)));
  REQUIRE_OK(dle_copy_(t, s));
  const double want[6] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; i++) CHECK_NEAR(at(a, i), want[i], 0);
}

TEST(copy_between_overlapping_views_of_one_storage_reads_the_old_values) {
  dle_tensor *a = t_arange(10, DLE_F32), *dst, *src;
  MAKE(dst, dle_narrow(&dst, a, 0, 1, 9));
  MAKE(src, dle_narrow(&src, a, 0, 0, 9));
  REQUIRE_OK(dle_copy_(dst, src)); /* shift right by one */
  CHECK_NEAR(at(a, 0), 0, 0);
  for (int64_t i = 1; i < 10; i++) CHECK_NEAR(at(a, i), i - 1, 0);
}

TEST(chained_views_address_the_right_elements) {
  /* a[i][j][k] = 20 i + 5 j + k; t = a.permute(2,0,1).narrow(1,1,2).select(2,3) -> t[k][i'] */
  dle_tensor *a = t_arange(60, DLE_F64), *m, *p, *n, *s, *e;
  MAKE(m, dle_view(&m, a, SIZES(3, 4, 5)));
  MAKE(p, dle_permute(&p, m, (const int[]){2, 0, 1}));
  MAKE(n, dle_narrow(&n, p, 1, 1, 2));
  MAKE(s, dle_select(&s, n, 2, 3));
  CHECK_SHAPE(s, 5, 2);
  for (int64_t k = 0; k < 5; k++)
    for (int64_t i = 0; i < 2; i++)
      CHECK_NEAR(dle_tensor_get(s, (const int64_t[]){k, i}), 20 * (i + 1) + 5 * 3 + k, 0);
  MAKE(e, dle_unsqueeze(&e, s, 1));
  CHECK_SHAPE(e, 5, 1, 2);
  CHECK_NEAR(dle_tensor_get(e, (const int64_t[]){4, 0, 1}), 40 + 15 + 4, 0);
}

TEST(contiguous_returns_the_tensor_itself_or_a_packed_copy) {
  dle_tensor *a = t_arange(6, DLE_F32), *m, *same, *t, *packed;
  MAKE(m, dle_view(&m, a, SIZES(2, 3)));
  MAKE(same, dle_contiguous(&same, m));
  CHECK(same == m && m->refcount == 2, "contiguous of a contiguous tensor is not itself retained");
  MAKE(t, dle_transpose(&t, m, 0, 1));
  MAKE(packed, dle_contiguous(&packed, t));
  CHECK(packed != t && !dle_same_storage(packed, a), "no copy of a transposed tensor");
  CHECK_STRIDES(packed, 2, 1);
  const double want[6] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; i++) CHECK_NEAR(((float *)dle_tensor_data(packed))[i], want[i], 0);
}

TEST(bad_dims_are_errors_naming_the_function_and_the_shape) {
  dle_tensor *a = t_arange(6, DLE_F32), *m, *s, *o = NULL;
  MAKE(m, dle_view(&m, a, SIZES(2, 3)));
  MAKE(s, dle_full(&s, NO_SIZES, 1, DLE_F32));
  CHECK_ERR(dle_transpose(&o, m, 0, 2), "transpose", "dim 3", "2-dim");
  CHECK_ERR(dle_transpose(&o, m, -3, 0), "transpose", "dim -3"); /* negative dims print as given */
  CHECK_ERR(dle_permute(&o, m, (const int[]){0, 0}), "permute", "repeated", "{2,3}");
  CHECK_ERR(dle_permute(&o, m, (const int[]){0, 5}), "permute", "dim 6");
  CHECK_ERR(dle_narrow(&o, m, 2, 0, 1), "narrow", "dim 3");
  CHECK_ERR(dle_narrow(&o, m, 1, 2, 2), "narrow", "{2,3}", "length 2");
  CHECK_ERR(dle_narrow(&o, m, 1, 0, -1), "narrow", "{2,3}");
  CHECK_ERR(dle_narrow(&o, m, 1, 1, INT64_MAX), "narrow", "{2,3}"); /* start + length overflows */
  CHECK_ERR(dle_select(&o, m, 0, 2), "select", "index", "{2,3}");
  CHECK_ERR(dle_select(&o, m, 1, -4), "select", "{2,3}");
  CHECK_ERR(dle_select(&o, s, 0, 0), "select", "0-dim");
  CHECK_ERR(dle_squeeze(&o, m, 2), "squeeze", "dim 3");
  CHECK_ERR(dle_unsqueeze(&o, m, 3), "unsqueeze", "dim 4");
  CHECK_ERR(dle_unsqueeze(&o, m, -4), "unsqueeze", "dim -4");
  CHECK_ERR(dle_flatten(&o, m, 1, 0), "flatten", "start dim 2", "end dim 1");
  CHECK_ERR(dle_flatten(&o, m, 0, 4), "flatten", "dim 5");
  CHECK(o == NULL, "output set on error");
}

TEST(views_refuse_to_write_into_a_given_output) {
  dle_tensor *a = t_arange(6, DLE_F32), *out = t_arange(6, DLE_F32);
  dle_attrs attrs = {.nints = 2, .ints = {2, 3}};
  CHECK_ERR(dle_op_call(DLE_OP_VIEW, &out, &a, 1, &attrs), "view", "output");
}
