/* iter.cu — not an op family: the strided N-d iterator (index) of the elementwise kernels (common.cuh: cu_index), built on the
 * host from the tensors' geometry. */
#include "common.cuh"

void cu_index_make(cu_index *ix, int nops, dle_tensor *const *ops) {
  const dle_tensor *out = ops[0];
  int nd = out->ndim, m = 0;
  *ix = cu_index{};
  ix->nops = nops;
  ix->n = cu_numel(out);
  for (int k = 0; k < nops; k++) ix->base[k] = cu_data(ops[k]);
  for (int d = 0; d < nd; d++) {
    int64_t size = out->sizes[d];
    if (size == 1) continue;
    int64_t st[CU_MAX_OPS];
    for (int k = 0; k < nops; k++) {
      const dle_tensor *t = ops[k];
      int td = d - (nd - t->ndim); /* inputs are right-aligned to the output */
      st[k] = (td < 0 || t->sizes[td] == 1) ? 0 : t->strides[td] * cu_esize(t->dtype);
    }
    bool merge = m > 0;
    for (int k = 0; k < nops && merge; k++) merge = ix->strides[k][m - 1] == st[k] * size;
    if (merge) {
      ix->sizes[m - 1] *= size;
      for (int k = 0; k < nops; k++) ix->strides[k][m - 1] = st[k];
    } else {
      ix->sizes[m] = size;
      for (int k = 0; k < nops; k++) ix->strides[k][m] = st[k];
      m++;
    }
  }
  ix->ndim = m;
}

void cu_red_geom_make(cu_red_geom *g, const dle_tensor *x, const bool *red, const dle_tensor *y) {
  *g = cu_red_geom{};
  g->nout = g->nred = 1;
  int64_t es = cu_esize(x->dtype), ey = y ? cu_esize(y->dtype) : 0;
  for (int d = 0; d < x->ndim; d++) {
    int64_t size = x->sizes[d];
    *(red[d] ? &g->nred : &g->nout) *= size;
    if (size == 1) continue;
    int64_t sx = x->strides[d] * es, sy = y ? y->strides[d] * ey : 0;
    if (red[d])
      g->rs[g->nr] = size, g->rx[g->nr] = sx, g->ry[g->nr++] = sy;
    else
      g->ks[g->nk] = size, g->kx[g->nk] = sx, g->ky[g->nk++] = sy;
  }
}
