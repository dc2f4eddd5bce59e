/* matmul.c — CPU kernel of matmul: float32/float64 through OpenBLAS (transposed operands
 * passed as flags, not copied), complex64/complex128 through cgemm/zgemm the same way,
 * float16/bfloat16 through sgemm on float32 copies, integers by a triple loop. The front door (engine/ops/matmul.c) hands over out {batch..., M, N},
 * a {batch..., M, K} and b {batch..., K, N} in one dtype, batch dims already broadcast (stride 0). */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>

#include "backend.h"
#include "cpu_loop.h"

/* One matrix of a batch: rows x cols elements at p with element strides rs, cs. */
typedef struct {
  char *p;
  int64_t rows, cols, rs, cs;
} cpu_mat;

/* What BLAS is given for an operand: the matrix itself or a packed copy. */
typedef struct {
  const void *p;
  bool trans; /* stored column-major (a transposed view of a row-major matrix) */
  int64_t ld;
} blas_mat;

/* A reusable packing buffer; `src` remembers which matrix it holds, so an operand broadcast over
 * the batch (same address every time) is packed once per call. */
typedef struct {
  void *buf;
  size_t cap;
  const char *src;
} scratch;

static int64_t max1(int64_t v) { return v > 1 ? v : 1; }

/* Layouts BLAS reads directly: rows of contiguous elements (row-major) or columns of them
 * (column-major = transposed). Size-1 dims make their stride irrelevant. */
static bool row_major(const cpu_mat *m, int64_t *ld) {
  if (!(m->cols <= 1 || m->cs == 1) || !(m->rows <= 1 || m->rs >= max1(m->cols))) return false;
  *ld = m->rows <= 1 ? max1(m->cols) : m->rs;
  return *ld <= INT_MAX;
}

static bool col_major(const cpu_mat *m, int64_t *ld) {
  if (!(m->rows <= 1 || m->rs == 1) || !(m->cols <= 1 || m->cs >= max1(m->rows))) return false;
  *ld = m->cols <= 1 ? max1(m->rows) : m->cs;
  return *ld <= INT_MAX;
}

/* ---- packing: strided storage <-> contiguous row-major compute type, one body per dtype ---- */
#define PACK_LOOPS(ID, T, CT)                                                 \
  static void pack_##ID(void *dst, const cpu_mat *m) {                        \
    for (int64_t i = 0; i < m->rows; i++) {                                   \
      const T *row = (const T *)m->p + i * m->rs;                             \
      CT *o = (CT *)dst + i * m->cols;                                        \
      if (m->cs == 1)                                                         \
        for (int64_t j = 0; j < m->cols; j++) o[j] = LD_##ID(row[j]);         \
      else                                                                    \
        for (int64_t j = 0; j < m->cols; j++) o[j] = LD_##ID(row[j * m->cs]); \
    }                                                                         \
  }                                                                           \
  static void unpack_##ID(const cpu_mat *m, const void *src, int64_t ld) {    \
    for (int64_t i = 0; i < m->rows; i++) {                                   \
      T *row = (T *)m->p + i * m->rs;                                         \
      const CT *s = (const CT *)src + i * ld;                                 \
      if (m->cs == 1)                                                         \
        for (int64_t j = 0; j < m->cols; j++) row[j] = ST_##ID(s[j]);         \
      else                                                                    \
        for (int64_t j = 0; j < m->cols; j++) row[j * m->cs] = ST_##ID(s[j]); \
    }                                                                         \
  }
CPU_FLOAT_TYPES(PACK_LOOPS)
CPU_COMPLEX_TYPES(PACK_LOOPS)

typedef void (*pack_fn)(void *dst, const cpu_mat *m);
typedef void (*unpack_fn)(const cpu_mat *m, const void *src, int64_t ld);
#define PACK_ENTRY(ID, T, CT)   [DLE_##ID] = pack_##ID,
#define UNPACK_ENTRY(ID, T, CT) [DLE_##ID] = unpack_##ID,
static const pack_fn pack_of[DLE_NUM_DTYPES] = {CPU_FLOAT_TYPES(PACK_ENTRY)
                                                    CPU_COMPLEX_TYPES(PACK_ENTRY)};
static const unpack_fn unpack_of[DLE_NUM_DTYPES] = {CPU_FLOAT_TYPES(UNPACK_ENTRY)
                                                        CPU_COMPLEX_TYPES(UNPACK_ENTRY)};

static void *scratch_get(scratch *s, size_t nbytes) {
  if (nbytes <= s->cap) return s->buf;
  dle_cpu_free(s->buf, s->cap);
  s->src = NULL;
  s->cap = 0;
  s->buf = dle_cpu_alloc(nbytes ? nbytes : 1);
  if (s->buf) s->cap = nbytes ? nbytes : 1;
  return s->buf;
}

static void scratch_free(scratch *s) { dle_cpu_free(s->buf, s->cap); }

/* The operand as BLAS sees it: itself when `native` (its dtype is the BLAS type) and its layout
 * allows, else a packed row-major copy in the compute type (esize bytes per element). */
static dle_status blas_operand(blas_mat *out, const cpu_mat *m, dle_dtype dt, bool native,
                               size_t esize, scratch *s) {
  int64_t ld;
  if (native && row_major(m, &ld)) {
    *out = (blas_mat){m->p, false, ld};
    return DLE_OK;
  }
  if (native && col_major(m, &ld)) {
    *out = (blas_mat){m->p, true, ld};
    return DLE_OK;
  }
  if (s->src != m->p) {
    void *buf = scratch_get(s, (size_t)(m->rows * m->cols) * esize);
    if (!buf)
      return dle_error("matmul: out of memory packing a %lldx%lld operand", (long long)m->rows,
                       (long long)m->cols);
    pack_of[dt](buf, m);
    s->src = m->p;
  }
  *out = (blas_mat){s->buf, false, max1(m->cols)};
  return DLE_OK;
}

/* ---- gemm on dle's threads ----
 * A large real gemm runs on dle's OpenMP threads, each a single-threaded BLAS call on one slab of
 * C (whole rows, or whole columns when C has more of them), instead of on OpenBLAS's own threads.
 * Why: after a threaded gemm, OpenBLAS's (pthreads) workers keep spinning in sched_yield for 2^28
 * cycles before they sleep, on the cores that dle's OpenMP threads need for the elementwise, norm
 * and attention ops that come next: in the char-GPT training step at 2 threads those ops took as
 * long as at 1 thread (bench/RESULTS.md, 2026-11-28 19:54). dle's idle threads sleep instead
 * (OMP_WAIT_POLICY=passive, bindings/loader). Products below SPLIT_MNK multiply-adds keep
 * OpenBLAS's threads: there the wake-up of a sleeping thread is a real part of the product (the
 * Fashion-MNIST MLP's 128x784x256 ones ran near 1-thread speed split this way, and its step got
 * slower), and a step made of such products gains from OpenBLAS's workers staying awake. The
 * char-GPT's products of a layer (4096 rows by 128 to 512) are all above it. Each element of C is still one
 * BLAS dot product over the whole k; only which call computes it changes. Slabs start at
 * multiples of 16 (whole vectors for the BLAS kernels). */
#define SPLIT_MNK   ((int64_t)1 << 26)
#define SPLIT_ALIGN 16

static int gemm_threads(int64_t m, int64_t n, int64_t k) {
  int nt = dle_get_num_threads();
  int64_t len = m > n ? m : n;
#ifdef _OPENMP
  if (omp_in_parallel()) return 1; /* a caller's parallel loop: its threads are taken */
#endif
  if (nt < 2 || m * n * k < SPLIT_MNK || len < 2 * SPLIT_ALIGN) return 1;
  if (len < (int64_t)nt * SPLIT_ALIGN) nt = (int)(len / SPLIT_ALIGN);
  return nt;
}

/* Start of slab t of nt over len rows or columns (a multiple of SPLIT_ALIGN but the end). */
static int64_t slab_start(int64_t len, int t, int nt) {
  if (t == nt) return len;
  return (len * t / nt) & ~(int64_t)(SPLIT_ALIGN - 1);
}

#define GEMM_SPLIT(P, CT)                                                                         \
  static void gemm_slab_##P(const blas_mat *a, const blas_mat *b, CT *c, int64_t ldc, int64_t i0, \
                            int64_t m, int64_t j0, int64_t n, int64_t k, CT beta) {               \
    const CT *ap = (const CT *)a->p + (a->trans ? i0 : i0 * a->ld);                               \
    const CT *bp = (const CT *)b->p + (b->trans ? j0 * b->ld : j0);                               \
    cblas_##P##gemm(CblasRowMajor, a->trans ? CblasTrans : CblasNoTrans,                          \
                    b->trans ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, 1, ap,          \
                    (int)a->ld, bp, (int)b->ld, beta, c + i0 * ldc + j0, (int)ldc);               \
  }                                                                                               \
  static void gemm_on_dle_threads_##P(const blas_mat *a, const blas_mat *b, CT *c, int64_t ldc,   \
                                      int64_t m, int64_t n, int64_t k, CT beta) {                 \
    int nt = gemm_threads(m, n, k);                                                               \
    if (nt == 1) {                                                                                \
      gemm_slab_##P(a, b, c, ldc, 0, m, 0, n, k, beta);                                           \
      return;                                                                                     \
    }                                                                                             \
    bool by_rows = m >= n;                                                                        \
    int64_t len = by_rows ? m : n;                                                                \
    openblas_set_num_threads(1);                                                                  \
    _Pragma("omp parallel for schedule(static, 1) num_threads(nt)")                               \
    for (int t = 0; t < nt; t++) {                                                                \
      int64_t lo = slab_start(len, t, nt), hi = slab_start(len, t + 1, nt);                       \
      if (by_rows)                                                                                \
        gemm_slab_##P(a, b, c, ldc, lo, hi - lo, 0, n, k, beta);                                  \
      else                                                                                        \
        gemm_slab_##P(a, b, c, ldc, 0, m, lo, hi - lo, k, beta);                                  \
    }                                                                                             \
    openblas_set_num_threads(dle_get_num_threads());                                              \
  }
GEMM_SPLIT(s, float)
GEMM_SPLIT(d, double)

/* ---- BLAS calls: gemm, or gemv when one side is a vector (OpenBLAS 0.3.21 does not forward) ---- */
#define BLAS_CALLS(P, CT)                                                                       \
  static void blas_##P(const blas_mat *a, const blas_mat *b, CT *c, int64_t ldc, int64_t m,     \
                       int64_t n, int64_t k, CT beta) {                                         \
    if (n == 1) { /* c[:, 0] = A x, x = column of b, y = column of c */                         \
      int incx = b->trans ? 1 : (int)b->ld;                                                     \
      if (a->trans)                                                                             \
        cblas_##P##gemv(CblasRowMajor, CblasTrans, (int)k, (int)m, 1, a->p, (int)a->ld, b->p,   \
                        incx, beta, c, (int)ldc);                                               \
      else                                                                                      \
        cblas_##P##gemv(CblasRowMajor, CblasNoTrans, (int)m, (int)k, 1, a->p, (int)a->ld, b->p, \
                        incx, beta, c, (int)ldc);                                               \
    } else if (m == 1) { /* c[0, :] = B^T x, x = row of a */                                    \
      int incx = a->trans ? (int)a->ld : 1;                                                     \
      if (b->trans)                                                                             \
        cblas_##P##gemv(CblasRowMajor, CblasNoTrans, (int)n, (int)k, 1, b->p, (int)b->ld, a->p, \
                        incx, beta, c, 1);                                                      \
      else                                                                                      \
        cblas_##P##gemv(CblasRowMajor, CblasTrans, (int)k, (int)n, 1, b->p, (int)b->ld, a->p,   \
                        incx, beta, c, 1);                                                      \
    } else {                                                                                    \
      gemm_on_dle_threads_##P(a, b, c, ldc, m, n, k, beta);                                     \
    }                                                                                           \
  }
BLAS_CALLS(s, float)
BLAS_CALLS(d, double)

/* complex: cgemm/zgemm take alpha and beta by address; always gemm (no gemv shortcut) */
#define BLAS_COMPLEX_CALLS(P, CT)                                                             \
  static void blas_##P(const blas_mat *a, const blas_mat *b, CT *c, int64_t ldc, int64_t m,   \
                       int64_t n, int64_t k, CT beta) {                                       \
    const CT one = 1;                                                                         \
    cblas_##P##gemm(CblasRowMajor, a->trans ? CblasTrans : CblasNoTrans,                      \
                    b->trans ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, &one, a->p, \
                    (int)a->ld, b->p, (int)b->ld, &beta, c, (int)ldc);                        \
  }
BLAS_COMPLEX_CALLS(c, float _Complex)
BLAS_COMPLEX_CALLS(z, double _Complex)

/* State of one kernel call, shared by the matrices of the batch. accumulate: c += a b (BLAS's
 * beta = 1; the front door has put the addend in c), float dtypes only. */
typedef struct {
  dle_dtype dt;
  bool accumulate;
  scratch sa, sb, sc;
} mm_ctx;

/* c = a b for one matrix of the batch (float dtypes). */
static dle_status float_matmul(mm_ctx *ctx, const cpu_mat *a, const cpu_mat *b, const cpu_mat *c) {
  int64_t m = a->rows, k = a->cols, n = b->cols;
  bool dbl = ctx->dt == DLE_F64, cplx = dle_dtype_is_complex(ctx->dt);
  bool native = ctx->dt == DLE_F32 || dbl || cplx;
  size_t es = cplx ? dle_dtype_size(ctx->dt) : dbl ? sizeof(double) : sizeof(float);
  blas_mat ba = {0}, bb = {0};
  DLE_TRY(blas_operand(&ba, a, ctx->dt, native, es, &ctx->sa));
  DLE_TRY(blas_operand(&bb, b, ctx->dt, native, es, &ctx->sb));
  int64_t ldc;
  void *cp = c->p;
  bool direct = native && row_major(c, &ldc);
  if (!direct) {
    ldc = max1(n);
    cp = scratch_get(&ctx->sc, (size_t)(m * n) * es);
    if (!cp)
      return dle_error("matmul: out of memory for a %lldx%lld result", (long long)m, (long long)n);
    /* the addend widened into the compute type: the sum is rounded once, when stored */
    if (ctx->accumulate) pack_of[ctx->dt](cp, c);
  }
  if (ctx->dt == DLE_C64)
    blas_c(&ba, &bb, cp, ldc, m, n, k, ctx->accumulate);
  else if (ctx->dt == DLE_C128)
    blas_z(&ba, &bb, cp, ldc, m, n, k, ctx->accumulate);
  else if (dbl)
    blas_d(&ba, &bb, cp, ldc, m, n, k, ctx->accumulate);
  else
    blas_s(&ba, &bb, cp, ldc, m, n, k, ctx->accumulate);
  if (!direct) unpack_of[ctx->dt](c, cp, ldc);
  return DLE_OK;
}

/* ---- integers: a plain triple loop with int64 accumulation (in uint64, so overflow wraps like
 * the int64 arithmetic elsewhere instead of being undefined) ---- */
#define INT_MATMUL(ID, T, CT)                                                         \
  static void int_matmul_##ID(const cpu_mat *a, const cpu_mat *b, const cpu_mat *c) { \
    int64_t m = a->rows, k = a->cols, n = b->cols;                                    \
    _Pragma("omp parallel for collapse(2) if (m * n * k >= CPU_PARALLEL_GRAIN)")      \
    for (int64_t i = 0; i < m; i++)                                                   \
      for (int64_t j = 0; j < n; j++) {                                               \
        const T *pa = (const T *)a->p + i * a->rs, *pb = (const T *)b->p + j * b->cs; \
        uint64_t acc = 0;                                                             \
        for (int64_t l = 0; l < k; l++)                                               \
          acc += (uint64_t)(int64_t)LD_##ID(pa[l * a->cs]) *                          \
                 (uint64_t)(int64_t)LD_##ID(pb[l * b->rs]);                           \
        ((T *)c->p)[i * c->rs + j * c->cs] = ST_##ID((int64_t)acc);                   \
      }                                                                               \
  }
CPU_INT_TYPES(INT_MATMUL)

typedef void (*int_matmul_fn)(const cpu_mat *a, const cpu_mat *b, const cpu_mat *c);
#define INT_ENTRY(ID, T, CT) [DLE_##ID] = int_matmul_##ID,
static const int_matmul_fn int_matmul_of[DLE_NUM_DTYPES] = {CPU_INT_TYPES(INT_ENTRY)};

/* Zeros in c (K = 0): the all-zero bit pattern is 0 in every dtype. */
static void zero_fill(const cpu_mat *c, size_t es) {
  for (int64_t i = 0; i < c->rows; i++) {
    char *row = c->p + i * c->rs * (int64_t)es;
    if (c->cs == 1)
      memset(row, 0, (size_t)c->cols * es);
    else
      for (int64_t j = 0; j < c->cols; j++) memset(row + j * c->cs * (int64_t)es, 0, es);
  }
}

static dle_status one_matmul(mm_ctx *ctx, const cpu_mat *a, const cpu_mat *b, const cpu_mat *c) {
  if (a->cols == 0) { /* an empty sum: 0, or the addend itself */
    if (!ctx->accumulate) zero_fill(c, dle_dtype_size(ctx->dt));
    return DLE_OK;
  }
  if (int_matmul_of[ctx->dt]) {
    int_matmul_of[ctx->dt](a, b, c);
    return DLE_OK;
  }
  return float_matmul(ctx, a, b, c);
}

/* Matrix at the last two dims of t, at batch element offset off (elements). */
static cpu_mat mat_of(const dle_tensor *t, int64_t off) {
  int nd = t->ndim;
  char *base = (char *)dle_tensor_data(t) + off * (int64_t)dle_dtype_size(t->dtype);
  return (cpu_mat){base, t->sizes[nd - 2], t->sizes[nd - 1], t->strides[nd - 2],
                   t->strides[nd - 1]};
}

/* The Linear-layer case {batch..., M, K} . {K, N}: when b does not vary over the batch and a's
 * batch dims step over its rows evenly, the whole batch is one (batch*M) x K matrix, and so is
 * the (contiguous) output: one gemm instead of a loop of small ones. */
static bool fold_batch(const dle_tensor *o, const dle_tensor *a, const dle_tensor *b, cpu_mat *fa,
                       cpu_mat *fc) {
  int nb = o->ndim - 2;
  if (nb == 0 || !dle_tensor_is_contiguous(o)) return false;
  int64_t rows = a->sizes[nb], rs = a->strides[nb];
  for (int d = nb - 1; d >= 0; d--) {
    int64_t n = a->sizes[d];
    if (n == 1) continue;
    if (b->strides[d] != 0) return false;
    if (rows == 1)
      rs = a->strides[d];
    else if (a->strides[d] != rows * rs)
      return false;
    rows *= n;
  }
  if (rows > INT_MAX) return false;
  *fa = mat_of(a, 0);
  fa->rows = rows, fa->rs = rs;
  *fc = mat_of(o, 0);
  fc->rows = rows, fc->rs = o->sizes[nb + 1];
  return true;
}

static dle_status check_blas_sizes(const dle_tensor *o, const dle_tensor *a) {
  int nd = o->ndim;
  int64_t m = o->sizes[nd - 2], n = o->sizes[nd - 1], k = a->sizes[nd - 1];
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
    return dle_error("matmul: a %lldx%lld by %lldx%lld product exceeds BLAS's 32-bit sizes",
                     (long long)m, (long long)k, (long long)k, (long long)n);
  return DLE_OK;
}

static dle_status cpu_matmul(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                             const dle_attrs *attrs) {
  (void)op, (void)nin;
  dle_tensor *o = outs[0], *a = ins[0], *b = ins[1];
  dle_dtype dt = o->dtype;
  if (a->dtype != dt || b->dtype != dt || (!int_matmul_of[dt] && !pack_of[dt]))
    return dle_error("matmul: no CPU kernel for %s x %s -> %s", dle_dtype_name(a->dtype),
                     dle_dtype_name(b->dtype), dle_dtype_name(dt));
  if (dle_tensor_numel(o) == 0) return DLE_OK;
  if (pack_of[dt]) DLE_TRY(check_blas_sizes(o, a));

  mm_ctx ctx = {.dt = dt, .accumulate = attrs && attrs->f[0] == 1};
  if (ctx.accumulate && !pack_of[dt])
    return dle_error("matmul: accumulating into %s is not supported", dle_dtype_name(dt));
  dle_status st = DLE_OK;
  cpu_mat fa, fc;
  if (fold_batch(o, a, b, &fa, &fc)) {
    cpu_mat mb = mat_of(b, 0);
    st = one_matmul(&ctx, &fa, &mb, &fc);
  } else {
    /* one matrix product per batch element, offsets advanced like an odometer */
    int nb = o->ndim - 2;
    int64_t idx[DLE_MAX_DIMS] = {0}, oa = 0, ob = 0, oo = 0;
    int64_t count = dle_shape_numel(nb, o->sizes);
    for (int64_t i = 0; i < count && st == DLE_OK; i++) {
      cpu_mat ma = mat_of(a, oa), mb = mat_of(b, ob), mo = mat_of(o, oo);
      st = one_matmul(&ctx, &ma, &mb, &mo);
      for (int d = nb - 1; d >= 0; d--) {
        oa += a->strides[d], ob += b->strides[d], oo += o->strides[d];
        if (++idx[d] < o->sizes[d]) break;
        oa -= idx[d] * a->strides[d], ob -= idx[d] * b->strides[d], oo -= idx[d] * o->strides[d];
        idx[d] = 0;
      }
    }
  }
  scratch_free(&ctx.sa);
  scratch_free(&ctx.sb);
  scratch_free(&ctx.sc);
  return st;
}

void cpu_register_matmul(dle_backend *b) { b->kernels[DLE_OP_MATMUL] = cpu_matmul; }
