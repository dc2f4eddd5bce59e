/* cpu_loop.c — the strided iterator of cpu_loop.h. */
#include "cpu_loop.h"

#ifdef _OPENMP
#include <omp.h>
#endif

void cpu_iter_init(cpu_iter *it, int nops, dle_tensor *const *ops) {
  const dle_tensor *out = ops[0];
  int nd = out->ndim;
  it->nops = nops;
  it->grain = CPU_PARALLEL_GRAIN_LIGHT;
  /* operand strides in bytes, right-aligned to the output, 0 on broadcast dims */
  int64_t st[CPU_MAX_OPERANDS][DLE_MAX_DIMS];
  for (int k = 0; k < nops; k++) {
    const dle_tensor *t = ops[k];
    int64_t es = cpu_esize(t->dtype);
    it->esize[k] = es;
    it->base[k] = (char *)dle_tensor_data(t);
    for (int d = 0; d < nd; d++) {
      int src = d - (nd - t->ndim);
      st[k][d] = (src < 0 || t->sizes[src] == 1) ? 0 : t->strides[src] * es;
    }
  }
  /* drop size-1 dims and merge dim d into d+1 when every operand is contiguous across them */
  int n = 0;
  int64_t sizes[DLE_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    if (out->sizes[d] == 1) continue;
    if (n > 0) {
      bool merge = true; /* the kept outer dim steps exactly over this whole dim */
      for (int k = 0; k < nops && merge; k++)
        merge = it->strides[k][n - 1] == st[k][d] * out->sizes[d];
      if (merge) {
        sizes[n - 1] *= out->sizes[d];
        for (int k = 0; k < nops; k++) it->strides[k][n - 1] = st[k][d];
        continue;
      }
    }
    sizes[n] = out->sizes[d];
    for (int k = 0; k < nops; k++) it->strides[k][n] = st[k][d];
    n++;
  }
  if (n == 0) { /* a single element */
    sizes[0] = 1;
    for (int k = 0; k < nops; k++) it->strides[k][0] = 0;
    n = 1;
  }
  it->ndim = n;
  memcpy(it->sizes, sizes, sizeof sizes);
  it->numel = dle_tensor_numel(out);
}

/* Runs elements [begin, end) of the iteration. */
static void run_range(const cpu_iter *it, cpu_loop_fn fn, const void *ctx, int64_t begin,
                      int64_t end) {
  int nd = it->ndim, last = nd - 1;
  int64_t idx[DLE_MAX_DIMS];
  int64_t rem = begin;
  for (int d = last; d >= 0; d--) {
    idx[d] = rem % it->sizes[d];
    rem /= it->sizes[d];
  }
  char *p[CPU_MAX_OPERANDS];
  int64_t inner[CPU_MAX_OPERANDS];
  for (int k = 0; k < it->nops; k++) {
    p[k] = it->base[k];
    for (int d = 0; d < nd; d++) p[k] += idx[d] * it->strides[k][d];
    inner[k] = it->strides[k][last];
  }
  int64_t pos = begin;
  while (pos < end) {
    int64_t n = it->sizes[last] - idx[last];
    if (n > end - pos) n = end - pos;
    fn(p, inner, n, ctx);
    pos += n;
    if (pos >= end) break;
    /* advance the multi-index past the run just done */
    for (int k = 0; k < it->nops; k++) p[k] += n * inner[k];
    idx[last] += n;
    for (int d = last; d > 0 && idx[d] == it->sizes[d]; d--) {
      for (int k = 0; k < it->nops; k++) p[k] += it->strides[k][d - 1] - idx[d] * it->strides[k][d];
      idx[d] = 0;
      idx[d - 1]++;
    }
  }
}

void cpu_iter_run(const cpu_iter *it, cpu_loop_fn fn, const void *ctx) {
  int64_t total = it->numel;
  if (total == 0) return;
#ifdef _OPENMP
  if (total >= it->grain && omp_get_max_threads() > 1) {
#pragma omp parallel
    {
      int nt = omp_get_num_threads(), t = omp_get_thread_num();
      int64_t chunk = (total + nt - 1) / nt;
      int64_t b = t * chunk, e = b + chunk < total ? b + chunk : total;
      if (b < e) run_range(it, fn, ctx, b, e);
    }
    return;
  }
#endif
  run_range(it, fn, ctx, 0, total);
}

/* Small single-threaded ops whose operands are all contiguous with the output's shape (the
 * common case of a training step's small tensors) skip building an iterator: one inner-loop call.
 * It saves a few hundred instructions per op, which is most of an op on a handful of elements. */
static bool run_small_contiguous(dle_tensor *out, dle_tensor *const *ins, int nin, cpu_loop_fn fn,
                                 const void *ctx, int64_t grain) {
  int64_t n = dle_tensor_numel(out);
  if (n >= grain || !dle_tensor_is_contiguous(out)) return false;
  char *p[CPU_MAX_OPERANDS];
  int64_t st[CPU_MAX_OPERANDS];
  p[0] = dle_tensor_data(out), st[0] = cpu_esize(out->dtype);
  for (int i = 0; i < nin; i++) {
    const dle_tensor *t = ins[i];
    if (!dle_shape_equal(t->ndim, t->sizes, out->ndim, out->sizes) || !dle_tensor_is_contiguous(t))
      return false;
    p[i + 1] = dle_tensor_data(t), st[i + 1] = cpu_esize(t->dtype);
  }
  if (n > 0) fn(p, st, n, ctx);
  return true;
}

static void foreach (dle_tensor *out, dle_tensor *const *ins, int nin, cpu_loop_fn fn,
                     const void *ctx, bool elementwise, int64_t grain) {
  if (run_small_contiguous(out, ins, nin, fn, ctx, grain)) return;
  dle_tensor *ops[CPU_MAX_OPERANDS] = {out};
  for (int i = 0; i < nin; i++) ops[i + 1] = ins[i];
  cpu_iter it;
  cpu_iter_init(&it, nin + 1, ops);
  it.grain = grain;
  if (elementwise)
    cpu_iter_run_elementwise(&it, fn, ctx);
  else
    cpu_iter_run(&it, fn, ctx);
}

void cpu_foreach(dle_tensor *out, dle_tensor *const *ins, int nin, cpu_loop_fn fn,
                 const void *ctx) {
  foreach (out, ins, nin, fn, ctx, false, CPU_PARALLEL_GRAIN_LIGHT)
    ;
}

void cpu_foreach_elementwise(dle_tensor *out, dle_tensor *const *ins, int nin, cpu_loop_fn fn,
                             const void *ctx, int64_t grain) {
  foreach (out, ins, nin, fn, ctx, true, grain)
    ;
}
