/* attention.c — CPU kernels of scaled dot-product attention and of its score gradient.
 *
 * The front door (engine/ops/attention.c) hands over q {B.., L, E}, k {B.., S, E}, v {B.., S, Ev} in
 * float32 or float64 with the batch dims already broadcast, an optional mask expanded to
 * {B.., L, S} (any strides; bool or the compute type), and outputs. Every matrix operand and output
 * is read where it lies: its rows contiguous, rows ld elements apart, batch elements anywhere
 * (stride 0 where broadcast). So the head-split views of a projection, {B, T, H, E} permuted to
 * {B, H, T, E}, need no copy, and outputs laid out like them merge their heads back for free.
 *
 * sdpa             per batch element: P = q k^T (gemm straight into the probs output), each row
 *                  scaled, masked and softmaxed in place (a row with no allowed key becomes
 *                  zeros), then out = P v (gemm).
 * sdpa_score_grad  per batch element: D = gout v^T (gemm into the output), then each row
 *                  D = scale * P * (D - sum(P * D)): the softmax backward fused with the scaling.
 * sdpa_backward    per batch element: D as above in a scratch buffer, then dq = D k, dk = D^T q and
 *                  dv = P^T gout (three gemms, each into its own output).
 * Causal attention works in blocks of CAUSAL_BLOCK queries: queries [r0, r1) see only keys
 * [0, r1), so each block's products stop there (the char-GPT's 128 x 128 scores: 25% fewer
 * flops in every product) and the rest of its probability rows are zeros.
 * Batch elements are independent small problems (the char-GPT example: 128 of 128x128x32), so
 * with several threads one OpenMP loop runs over them, each calling BLAS single-threaded, rather
 * than OpenBLAS splitting every small gemm between threads (one synchronisation per gemm: with 2
 * threads that was several times slower than one thread on the shared test machine). */
#include <limits.h>
#include <stdlib.h>

#include "../../engine/internal.h"
#include "backend.h"
#include "cpu_gemm.h"
#include "cpu_loop.h"
#include "cpu_rows.h"
#include "cpu_vecmath.h"

#define ATT_TYPES(X) X(F32, float) X(F64, double)

#define CAUSAL_BLOCK 64

/* Queries [r0, r1) of one block, and the keys [0, keys) they can see. */
typedef struct {
  int64_t r0, r1, keys;
} row_block;

/* Block i (from 0) of L queries over S keys: one block of all keys unless causal. */
static int64_t num_blocks(int64_t L, bool causal) {
  return causal && L > CAUSAL_BLOCK ? (L + CAUSAL_BLOCK - 1) / CAUSAL_BLOCK : 1;
}
static row_block block_at(int64_t i, int64_t L, int64_t S, bool causal) {
  if (num_blocks(L, causal) == 1) return (row_block){0, L, causal && L < S ? L : S};
  int64_t r0 = i * CAUSAL_BLOCK, r1 = r0 + CAUSAL_BLOCK < L ? r0 + CAUSAL_BLOCK : L;
  return (row_block){r0, r1, r1 < S ? r1 : S};
}

/* Element offset of batch element b (row-major over the first nb dims) of a strided tensor. */
static int64_t batch_offset(const dle_tensor *t, int nb, int64_t b) {
  int64_t off = 0;
  for (int d = nb - 1; d >= 0; d--) {
    off += (b % t->sizes[d]) * t->strides[d];
    b /= t->sizes[d];
  }
  return off;
}

/* A batch of row-major matrices: element (b, i, j) of the last two dims at
 * base + offset(b) + i ld + j, in elements. */
typedef struct {
  char *base;
  const dle_tensor *t;
  int nb;
  size_t esize;
  int64_t ld;
} mats;

static mats mats_of(const dle_tensor *t, int nb) {
  return (mats){dle_tensor_data(t), t, nb, dle_dtype_size(t->dtype), dle_matrix_ld(t, nb)};
}

static void *mat_at(const mats *m, int64_t b) {
  return m->base + (size_t)batch_offset(m->t, m->nb, b) * m->esize;
}

/* Threads for a loop over B batch elements of L x S scores with E + Ev values per row pair (one
 * below a size where starting threads costs more than it saves: a decoded token's attention);
 * with more than one, OpenBLAS is set to one thread until batch_end(). */
static int batch_begin(int64_t b, int64_t L, int64_t S, int64_t E, int64_t Ev) {
  int n = dle_get_num_threads();
  if (b < 2 || n < 2 || b * L * S * (E + Ev) < (1 << 16)) return 1;
  openblas_set_num_threads(1);
  return n;
}
static void batch_end(int n) {
  if (n > 1) openblas_set_num_threads(n);
}

/* batch_end, then an out-of-memory error naming fn and the rows x cols buffer (what) a thread
 * could not get, or DLE_OK. */
static dle_status batch_done(int n, bool oom, const char *fn, const char *what, int64_t rows,
                             int64_t cols) {
  batch_end(n);
  if (oom)
    return dle_error("%s: out of memory for a %lldx%lld %s buffer", fn, (long long)rows,
                     (long long)cols, what);
  return DLE_OK;
}

static dle_status check_blas(const char *fn, int64_t a, int64_t b, int64_t c) {
  if (a > INT_MAX || b > INT_MAX || c > INT_MAX)
    return dle_error("%s: sizes exceed BLAS's 32-bit limits (%lld, %lld, %lld)", fn, (long long)a,
                     (long long)b, (long long)c);
  return DLE_OK;
}

/* C = op(A) op(B) + beta C (beta 0 or 1), row-major, for the per-head products. In float32 on an
 * AVX2 CPU, q k^T, p v, g v^T and ds k go through cpu_vec->sgemm_nn, which reads its operands in
 * place and keeps blocks of C in registers: at these sizes (a block of up to 64 queries, up to S
 * keys, E = 32 columns in the char-GPT) OpenBLAS spends about as long zeroing C for beta = 0 and
 * packing both operands as in its kernel. B^T (k^T, v^T: S x E) is first copied transposed into
 * tmp (k x n floats). The products with A transposed (dk = ds^T q, dv = p^T g) stay with BLAS:
 * copying ds or p transposed (64 x S) cost more than it saved. Measured on the char-GPT's
 * attention (B 32, 4 heads, T 128, E 32, causal, one thread, alternating builds), forward +
 * backward: this split beat both BLAS for all products and this kernel for A transposed too. */
static void att_gemm_float(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                           int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                           int64_t ldc, float *tmp) {
  if (!cpu_vec || ta) {
    gemm_float(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (tb) { /* b holds {n, k} */
    cpu_vec->transpose32(tmp, n, b, ldb, k, n);
    b = tmp, ldb = n;
  }
  cpu_vec->sgemm_nn(m, n, k, a, lda, b, ldb, c, ldc, beta != 0);
}
static void att_gemm_double(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a,
                            int64_t lda, const double *b, int64_t ldb, double beta, double *c,
                            int64_t ldc, double *tmp) {
  (void)tmp;
  gemm_double(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}
#define ATT_GEMM(CT) _Generic((CT)0, float : att_gemm_float, double : att_gemm_double)

/* Zeros rows x cols elements of size es at p, rows ld apart. */
static void zero_rows(void *p, int64_t rows, int64_t cols, int64_t ld, size_t es) {
  for (int64_t i = 0; i < rows; i++)
    memset((char *)p + (size_t)(i * ld) * es, 0, (size_t)cols * es);
}

/* Where a row's mask lives: a bool or compute-type row with element stride js (NULL: none). */
typedef struct {
  const void *row;
  int64_t js;
  bool is_bool;
} mask_row;

#define ATTENTION_KERNELS(ID, CT)                                                                  \
  /* scale, mask and softmax one score row of S keys in place (query i) */                         \
  static CPU_CLONES void softmax_row_##ID(CT *r, int64_t s, int64_t i, bool causal,                \
                                          const mask_row *m, CT scale) {                           \
    for (int64_t j = 0; j < s; j++) r[j] *= scale;                                                 \
    if (m->row && m->is_bool) {                                                                    \
      const uint8_t *mb = m->row;                                                                  \
      for (int64_t j = 0; j < s; j++)                                                              \
        if (!mb[j * m->js]) r[j] = -INFINITY;                                                      \
    } else if (m->row) {                                                                           \
      const CT *mf = m->row;                                                                       \
      for (int64_t j = 0; j < s; j++) r[j] += mf[j * m->js];                                       \
    }                                                                                              \
    int64_t n = s; /* causal: keys past i get weight 0 and are left out of the softmax */          \
    if (causal && i + 1 < s) {                                                                     \
      n = i + 1;                                                                                   \
      for (int64_t j = n; j < s; j++) r[j] = 0;                                                    \
    }                                                                                              \
    CT mx = row_max_##ID(r, n);                                                                    \
    if (mx == -INFINITY) { /* no key allowed: zero weights (and a zero output) */                  \
      for (int64_t j = 0; j < n; j++) r[j] = 0;                                                    \
      return;                                                                                      \
    }                                                                                              \
    CT inv = 1 / row_exp_inplace_##ID(r, n, mx);                                                   \
    for (int64_t j = 0; j < n; j++) r[j] *= inv;                                                   \
  }                                                                                                \
  /* r = scale * p * (r - p . r): the softmax backward of one row */                               \
  static CPU_CLONES void score_grad_row_##ID(CT *r, const CT *p, int64_t s, CT scale) {            \
    CT dot = row_dot_##ID(p, r, s);                                                                \
    for (int64_t j = 0; j < s; j++) r[j] = scale * p[j] * (r[j] - dot);                            \
  }                                                                                                \
  static dle_status sdpa_fwd_##ID(dle_tensor *out, dle_tensor *probs, dle_tensor *const *ins,      \
                                  int nin, const dle_attrs *a) {                                   \
    const dle_tensor *qt = ins[0], *mask = nin > 3 ? ins[3] : NULL;                                \
    int nb = qt->ndim - 2;                                                                         \
    int64_t L = qt->sizes[nb], E = qt->sizes[nb + 1], S = ins[1]->sizes[nb];                       \
    int64_t Ev = ins[2]->sizes[nb + 1], B = 1;                                                     \
    for (int d = 0; d < nb; d++) B *= qt->sizes[d];                                                \
    DLE_TRY(check_blas("sdpa", L, S, E > Ev ? E : Ev));                                            \
    mats q = mats_of(qt, nb), k = mats_of(ins[1], nb), v = mats_of(ins[2], nb);                    \
    mats o = mats_of(out, nb), p = mats_of(probs, nb);                                             \
    const char *mbase = mask ? dle_tensor_data(mask) : NULL;                                       \
    size_t mes = mask ? dle_dtype_size(mask->dtype) : 0;                                           \
    CT scale = (CT)a->f[0];                                                                        \
    bool causal = a->ints[0] != 0;                                                                 \
    int nt = batch_begin(B, L, S, E, Ev);                                                          \
    bool oom = false;                                                                              \
    _Pragma("omp parallel for schedule(static) num_threads(nt) if (nt > 1)")                       \
    for (int64_t b = 0; b < B; b++) {                                                              \
      CT *pb = mat_at(&p, b), *ob = mat_at(&o, b);                                                 \
      if (L * S == 0) {                                                                            \
        zero_rows(ob, L, Ev, o.ld, sizeof(CT));                                                    \
        continue;                                                                                  \
      }                                                                                            \
      CT *tmp = malloc(sizeof(CT) * (size_t)(S * (E > 0 ? E : 1))); /* k^T */                      \
      if (!tmp) {                                                                                  \
        _Pragma("omp atomic write")                                                                \
        oom = true;                                                                                \
        continue;                                                                                  \
      }                                                                                            \
      const CT *qb = mat_at(&q, b), *kb = mat_at(&k, b), *vb = mat_at(&v, b);                      \
      int64_t moff = mask ? batch_offset(mask, nb, b) : 0, nblk = num_blocks(L, causal);           \
      for (int64_t bi = 0; bi < nblk; bi++) {                                                      \
        row_block rb = block_at(bi, L, S, causal);                                                 \
        int64_t rows = rb.r1 - rb.r0, keys = rb.keys;                                              \
        CT *pr = pb + rb.r0 * p.ld;                                                                \
        if (E > 0 && keys > 0) ATT_GEMM(CT)                                                        \
        (false, true, rows, keys, E, qb + rb.r0 * q.ld, q.ld, kb, k.ld, 0, pr, p.ld, tmp);         \
        else zero_rows(pr, rows, keys, p.ld, sizeof(CT));                                          \
        for (int64_t i = rb.r0; i < rb.r1; i++) {                                                  \
          mask_row m = {NULL, 0, false};                                                           \
          if (mask)                                                                                \
            m = (mask_row){mbase + (size_t)(moff + i * mask->strides[nb]) * mes,                   \
                           mask->strides[nb + 1], mask->dtype == DLE_BOOL};                        \
          softmax_row_##ID(pb + i * p.ld, keys, i, causal, &m, scale);                             \
          if (keys < S) memset(pb + i * p.ld + keys, 0, sizeof(CT) * (size_t)(S - keys));          \
        }                                                                                          \
        if (Ev > 0 && keys > 0) ATT_GEMM(CT)                                                       \
        (false, false, rows, Ev, keys, pr, p.ld, vb, v.ld, 0, ob + rb.r0 * o.ld, o.ld, tmp);       \
        else zero_rows(ob + rb.r0 * o.ld, rows, Ev, o.ld, sizeof(CT));                             \
      }                                                                                            \
      free(tmp);                                                                                   \
    }                                                                                              \
    return batch_done(nt, oom, "sdpa", "scratch", S, E);                                           \
  }                                                                                                \
  static dle_status score_grad_##ID(dle_tensor *out, dle_tensor *const *ins, const dle_attrs *a) { \
    const dle_tensor *gt = ins[0];                                                                 \
    int nb = gt->ndim - 2;                                                                         \
    int64_t L = gt->sizes[nb], Ev = gt->sizes[nb + 1], S = ins[1]->sizes[nb], B = 1;               \
    for (int d = 0; d < nb; d++) B *= gt->sizes[d];                                                \
    DLE_TRY(check_blas("sdpa_score_grad", L, S, Ev));                                              \
    mats g = mats_of(gt, nb), v = mats_of(ins[1], nb), p = mats_of(ins[2], nb);                    \
    mats d = mats_of(out, nb);                                                                     \
    CT scale = (CT)a->f[0];                                                                        \
    int nt = batch_begin(B, L, S, 0, Ev);                                                          \
    _Pragma("omp parallel for schedule(static) num_threads(nt) if (nt > 1)")                       \
    for (int64_t b = 0; b < B; b++) {                                                              \
      CT *db = mat_at(&d, b);                                                                      \
      const CT *pb = mat_at(&p, b);                                                                \
      if (L * S == 0) continue;                                                                    \
      if (Ev > 0)                                                                                  \
        GEMM(CT)(false, true, L, S, Ev, mat_at(&g, b), g.ld, mat_at(&v, b), v.ld, 0, db, d.ld);    \
      else                                                                                         \
        zero_rows(db, L, S, d.ld, sizeof(CT));                                                     \
      for (int64_t i = 0; i < L; i++) score_grad_row_##ID(db + i * d.ld, pb + i * p.ld, S, scale); \
    }                                                                                              \
    batch_end(nt);                                                                                 \
    return DLE_OK;                                                                                 \
  }                                                                                                \
  static dle_status sdpa_bwd_##ID(dle_tensor *const *outs, dle_tensor *const *ins,                 \
                                  const dle_attrs *a) {                                            \
    const dle_tensor *qt = ins[1];                                                                 \
    int nb = qt->ndim - 2;                                                                         \
    int64_t L = qt->sizes[nb], E = qt->sizes[nb + 1], S = ins[2]->sizes[nb];                       \
    int64_t Ev = ins[3]->sizes[nb + 1], B = 1;                                                     \
    for (int d = 0; d < nb; d++) B *= qt->sizes[d];                                                \
    DLE_TRY(check_blas("sdpa_backward", L, S, E > Ev ? E : Ev));                                   \
    mats g = mats_of(ins[0], nb), q = mats_of(qt, nb), k = mats_of(ins[2], nb);                    \
    mats v = mats_of(ins[3], nb), p = mats_of(ins[4], nb);                                         \
    mats dq = mats_of(outs[0], nb), dk = mats_of(outs[1], nb), dv = mats_of(outs[2], nb);          \
    CT scale = (CT)a->f[0];                                                                        \
    bool causal = a->ints[0] != 0;                                                                 \
    if (L == 0 || S == 0) { /* a sum over nothing: zeros */                                        \
      for (int64_t b = 0; b < B; b++) {                                                            \
        zero_rows(mat_at(&dq, b), L, E, dq.ld, sizeof(CT));                                        \
        zero_rows(mat_at(&dk, b), S, E, dk.ld, sizeof(CT));                                        \
        zero_rows(mat_at(&dv, b), S, Ev, dv.ld, sizeof(CT));                                       \
      }                                                                                            \
      return DLE_OK;                                                                               \
    }                                                                                              \
    int nt = batch_begin(B, L, S, E, Ev);                                                          \
    bool oom = false;                                                                              \
    _Pragma("omp parallel for schedule(static) num_threads(nt) if (nt > 1)")                       \
    for (int64_t b = 0; b < B; b++) {                                                              \
      /* ds: a block's score gradients; tmp: v^T */                                                \
      CT *ds = malloc(sizeof(CT) * (size_t)(L * S)),                                               \
         *tmp = malloc(sizeof(CT) * (size_t)(S * (Ev > 0 ? Ev : 1)));                              \
      if (!ds || !tmp) {                                                                           \
        free(ds);                                                                                  \
        free(tmp);                                                                                 \
        _Pragma("omp atomic write")                                                                \
        oom = true;                                                                                \
        continue;                                                                                  \
      }                                                                                            \
      const CT *gb = mat_at(&g, b), *pb = mat_at(&p, b), *qb = mat_at(&q, b);                      \
      const CT *kb = mat_at(&k, b), *vb = mat_at(&v, b);                                           \
      CT *dqb = mat_at(&dq, b), *dkb = mat_at(&dk, b), *dvb = mat_at(&dv, b);                      \
      /* blocks last to first: the last sees every key any block sees, so it sets dk and dv \
       * (beta 0) and the earlier ones add to a prefix of their rows */      \
      int64_t nblk = num_blocks(L, causal);                                                        \
      row_block last = block_at(nblk - 1, L, S, causal);                                           \
      if (last.keys < S) {                                                                         \
        zero_rows(dkb + last.keys * dk.ld, S - last.keys, E, dk.ld, sizeof(CT));                   \
        zero_rows(dvb + last.keys * dv.ld, S - last.keys, Ev, dv.ld, sizeof(CT));                  \
      }                                                                                            \
      for (int64_t bi = nblk - 1; bi >= 0; bi--) {                                                 \
        row_block rb = block_at(bi, L, S, causal);                                                 \
        int64_t rows = rb.r1 - rb.r0, keys = rb.keys;                                              \
        CT beta = bi == nblk - 1 ? 0 : 1;                                                          \
        const CT *gr = gb + rb.r0 * g.ld, *pr = pb + rb.r0 * p.ld, *qr = qb + rb.r0 * q.ld;        \
        if (keys == 0) {                                                                           \
          zero_rows(dqb + rb.r0 * dq.ld, rows, E, dq.ld, sizeof(CT));                              \
          continue;                                                                                \
        }                                                                                          \
        if (Ev > 0)                                                                                \
          ATT_GEMM(CT)(false, true, rows, keys, Ev, gr, g.ld, vb, v.ld, 0, ds, keys, tmp);         \
        else                                                                                       \
          memset(ds, 0, sizeof(CT) * (size_t)(rows * keys));                                       \
        for (int64_t i = 0; i < rows; i++)                                                         \
          score_grad_row_##ID(ds + i * keys, pr + i * p.ld, keys, scale);                          \
        if (E > 0) {                                                                               \
          ATT_GEMM(CT)                                                                             \
          (false, false, rows, E, keys, ds, keys, kb, k.ld, 0, dqb + rb.r0 * dq.ld, dq.ld, tmp);   \
          ATT_GEMM(CT)(true, false, keys, E, rows, ds, keys, qr, q.ld, beta, dkb, dk.ld, tmp);     \
        }                                                                                          \
        if (Ev > 0)                                                                                \
          ATT_GEMM(CT)(true, false, keys, Ev, rows, pr, p.ld, gr, g.ld, beta, dvb, dv.ld, tmp);    \
      }                                                                                            \
      free(ds);                                                                                    \
      free(tmp);                                                                                   \
    }                                                                                              \
    return batch_done(nt, oom, "sdpa_backward", "score", L, S);                                    \
  }
ATT_TYPES(ATTENTION_KERNELS)

static DLE_KERNEL(cpu_attention) {
  dle_tensor *o = outs[0];
  const char *fn = dle_op_get_info(op)->name;
  int nmat = op == DLE_OP_SDPA ? 3 : nin; /* the mask (4th input) has any strides */
  int nb = ins[0]->ndim - 2;
  for (int i = 0; i < nmat; i++)
    if (ins[i]->dtype != o->dtype || ins[i]->ndim != nb + 2 || !dle_matrices_in_place(ins[i], nb))
      return dle_error("%s: the CPU kernel expects %s inputs with contiguous rows", fn,
                       dle_dtype_name(o->dtype));
  for (int k = 0; k < dle_op_get_info(op)->nout; k++)
    if (outs[k]->ndim != nb + 2 || !dle_matrices_in_place(outs[k], nb))
      return dle_error("%s: the CPU kernel expects outputs with contiguous rows", fn);
  if (nin > nmat && ins[3]->dtype != DLE_BOOL && ins[3]->dtype != o->dtype)
    return dle_error("%s: the CPU kernel expects a bool or %s mask", fn, dle_dtype_name(o->dtype));
#define CASE(ID, CT)                                                    \
  case DLE_##ID:                                                        \
    if (op == DLE_OP_SDPA_BACKWARD) return sdpa_bwd_##ID(outs, ins, a); \
    return op == DLE_OP_SDPA ? sdpa_fwd_##ID(o, outs[1], ins, nin, a) : score_grad_##ID(o, ins, a);
  CPU_DTYPE_SWITCH(fn, o->dtype, ATT_TYPES, CASE);
#undef CASE
}

void cpu_register_attention(dle_backend *b) {
  CPU_REGISTER(b, cpu_attention, DLE_OP_SDPA, DLE_OP_SDPA_SCORE_GRAD, DLE_OP_SDPA_BACKWARD);
}
