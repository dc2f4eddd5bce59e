/* matmul.cu — the CUDA kernel of matmul, mirroring kernels/cpu/matmul.c. The front door
 * (engine/ops/matmul.c) hands over out {batch..., M, N} (contiguous), a {batch..., M, K} and
 * b {batch..., K, N} in one dtype, batch dims broadcast with stride 0; attrs.f[0] = 1 asks to
 * accumulate onto out (the addend of a b + c, already there).
 *
 * float32/float64/float16/bfloat16 go to cuBLAS (cublasGemmStridedBatchedEx): a row-major or
 * column-major (transposed) operand is passed as it is with a transpose flag, anything else is
 * first packed contiguous; float16/bfloat16 compute in float32 (CUBLAS_COMPUTE_32F, no TF32),
 * rounded once when stored, as the CPU's sgemm on float32 copies. Row-major C = A B is computed
 * as the column-major C^T = B^T A^T. Integers use a plain kernel with uint64 accumulation (wrapping
 * like int64), one thread per output element. */
#include <cublas_v2.h>
#include <limits.h>
#include <pthread.h>

#include "common.cuh"

#define CU_MAX_DEVICES 64

/* One cuBLAS handle per device, made on first use (creating one is slow and takes memory). */
static cublasHandle_t handles[CU_MAX_DEVICES];
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;

static dle_status blas_fail(const char *fn, const char *what, cublasStatus_t st) {
  return cu_error("%s: cuBLAS error in %s: %s", fn, what, cublasGetStatusString(st));
}

static dle_status get_handle(const char *fn, int dev, cublasHandle_t *h) {
  if (dev < 0 || dev >= CU_MAX_DEVICES) return cu_error("%s: CUDA device %d out of range", fn, dev);
  pthread_mutex_lock(&handles_lock);
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  if (!handles[dev]) {
    st = cublasCreate(&handles[dev]);
    if (st != CUBLAS_STATUS_SUCCESS) handles[dev] = NULL;
  }
  *h = handles[dev];
  pthread_mutex_unlock(&handles_lock);
  return st == CUBLAS_STATUS_SUCCESS ? DLE_OK : blas_fail(fn, "cublasCreate", st);
}

static int64_t max1(int64_t v) { return v > 1 ? v : 1; }

/* One operand as cuBLAS reads it: base pointer, transposed or not, leading dim, batch stride
 * (elements). */
typedef struct {
  const void *p;
  bool trans;
  int64_t ld, batch_stride;
} blas_operand;

/* The offsets of t's batch elements are bi * stride for flat batch index bi (stride 0 when
 * broadcast over the whole batch)? */
static bool linear_batch(const dle_tensor *t, int64_t *stride) {
  int nb = t->ndim - 2;
  int64_t s = 0, inner = 1;
  bool found = false;
  for (int d = nb - 1; d >= 0; d--) {
    if (t->sizes[d] == 1) continue;
    if (!found)
      s = t->strides[d], found = true;
    else if (t->strides[d] != s * inner)
      return false;
    inner *= t->sizes[d];
  }
  *stride = s;
  return true;
}

/* Layouts cuBLAS reads directly (the CPU's row_major / col_major tests). */
static bool blas_layout(const dle_tensor *t, bool *trans, int64_t *ld) {
  int64_t rows = t->sizes[t->ndim - 2], cols = t->sizes[t->ndim - 1];
  int64_t rs = t->strides[t->ndim - 2], cs = t->strides[t->ndim - 1];
  if ((cols <= 1 || cs == 1) && (rows <= 1 || rs >= max1(cols))) {
    *trans = false, *ld = rows <= 1 ? max1(cols) : rs;
  } else if ((rows <= 1 || rs == 1) && (cols <= 1 || cs >= max1(rows))) {
    *trans = true, *ld = cols <= 1 ? max1(rows) : cs;
  } else {
    return false;
  }
  return *ld <= INT_MAX;
}

/* t as cuBLAS takes it, packed into *scratch (freed by the caller) when its layout or batch
 * strides do not allow it as it is. */
static dle_status operand(const char *fn, dle_tensor *t, blas_operand *o, void **scratch) {
  int64_t bs = 0, ld = 0;
  bool trans = false;
  if (linear_batch(t, &bs) && blas_layout(t, &trans, &ld)) {
    *o = blas_operand{cu_data(t), trans, ld, bs};
    return DLE_OK;
  }
  int64_t n = cu_numel(t), rows = t->sizes[t->ndim - 2], cols = t->sizes[t->ndim - 1];
  size_t nbytes = (size_t)n * (size_t)cu_esize(t->dtype);
  CU_OK(cu_scratch(fn, scratch, nbytes));
  dle_storage s;
  dle_tensor packed;
  cu_wrap_scratch(&packed, &s, *scratch, nbytes, t->dtype, t->ndim, t->sizes, t->storage->device);
  CU_OK(cu_copy_same(fn, &packed, t));
  *o = blas_operand{*scratch, false, max1(cols), rows * cols};
  return DLE_OK;
}

static dle_status float_matmul(const char *fn, dle_tensor *o, dle_tensor *a, dle_tensor *b,
                               bool accumulate) {
  int nd = o->ndim;
  int64_t m = o->sizes[nd - 2], n = o->sizes[nd - 1], k = a->sizes[nd - 1], nb = 1;
  for (int d = 0; d < nd - 2; d++) nb *= o->sizes[d];
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX || nb > INT_MAX)
    return cu_error(
        "%s: a %lldx%lld by %lldx%lld product (batch %lld) exceeds cuBLAS's 32-bit sizes", fn,
        (long long)m, (long long)k, (long long)k, (long long)n, (long long)nb);
  cublasHandle_t h;
  CU_OK(get_handle(fn, o->storage->device.index, &h));
  cudaDataType_t type;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  switch (o->dtype) {
    case DLE_F32: type = CUDA_R_32F; break;
    case DLE_F64: type = CUDA_R_64F, compute = CUBLAS_COMPUTE_64F; break;
    case DLE_F16: type = CUDA_R_16F; break;
    default: type = CUDA_R_16BF; break;
  }
  float alpha_f = 1, beta_f = accumulate ? 1.0f : 0.0f;
  double alpha_d = 1, beta_d = accumulate ? 1.0 : 0.0;
  const void *alpha =
      compute == CUBLAS_COMPUTE_64F ? (const void *)&alpha_d : (const void *)&alpha_f;
  const void *beta = compute == CUBLAS_COMPUTE_64F ? (const void *)&beta_d : (const void *)&beta_f;
  void *sa = NULL, *sb = NULL;
  blas_operand A, B;
  dle_status st = operand(fn, a, &A, &sa);
  if (st == DLE_OK) st = operand(fn, b, &B, &sb);
  if (st == DLE_OK) {
    /* column-major: C^T {N, M} = op(B^T) {N, K} . op(A^T) {K, M} */
    cublasStatus_t bs = cublasGemmStridedBatchedEx(
        h, B.trans ? CUBLAS_OP_T : CUBLAS_OP_N, A.trans ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m,
        (int)k, alpha, B.p, type, (int)B.ld, B.batch_stride, A.p, type, (int)A.ld, A.batch_stride,
        beta, cu_data(o), type, (int)max1(n), m * n, (int)nb, compute, CUBLAS_GEMM_DEFAULT);
    if (bs != CUBLAS_STATUS_SUCCESS) st = blas_fail(fn, "cublasGemmStridedBatchedEx", bs);
  }
  cu_scratch_free(sa);
  cu_scratch_free(sb);
  return st;
}

/* ---- integers ---- */

/* Batch dims of the output and element strides of a and b over them. */
typedef struct {
  int nb;
  int64_t sizes[DLE_MAX_DIMS], sa[DLE_MAX_DIMS], sb[DLE_MAX_DIMS];
  int64_t m, n, k, ars, acs, brs, bcs;
} int_geom;

template <dle_dtype D>
__global__ void int_matmul_kernel(int_geom g, int64_t total, const char *ap, const char *bp,
                                  char *op) {
  typedef CU_T(D) T;
  CU_GRID_LOOP(e, total) {
    int64_t j = e % g.n, i = (e / g.n) % g.m, bi = e / (g.n * g.m), oa = 0, ob = 0;
    for (int d = g.nb - 1; d >= 0; d--) {
      int64_t c = bi % g.sizes[d];
      bi /= g.sizes[d];
      oa += c * g.sa[d], ob += c * g.sb[d];
    }
    const T *pa = (const T *)ap + oa + i * g.ars, *pb = (const T *)bp + ob + j * g.bcs;
    uint64_t acc = 0;
    for (int64_t l = 0; l < g.k; l++)
      acc += (uint64_t)(int64_t)cu_load<D>(pa[l * g.acs]) *
             (uint64_t)(int64_t)cu_load<D>(pb[l * g.brs]);
    ((T *)op)[e] = cu_store<D>((int64_t)acc);
  }
}

static dle_status int_matmul(const char *fn, dle_tensor *o, dle_tensor *a, dle_tensor *b) {
  int nd = o->ndim;
  int_geom g = {};
  g.nb = nd - 2;
  for (int d = 0; d < g.nb; d++)
    g.sizes[d] = o->sizes[d], g.sa[d] = a->strides[d], g.sb[d] = b->strides[d];
  g.m = o->sizes[nd - 2], g.n = o->sizes[nd - 1], g.k = a->sizes[nd - 1];
  g.ars = a->strides[nd - 2], g.acs = a->strides[nd - 1], g.brs = b->strides[nd - 2],
  g.bcs = b->strides[nd - 1];
  int64_t total = cu_numel(o);
  return cu_with_dtype(o->dtype, [&](auto tag) -> dle_status {
    constexpr dle_dtype D = decltype(tag)::value;
    if constexpr (!cu_float_v<D> && D != DLE_BOOL) {
      int_matmul_kernel<D>
          <<<cu_blocks(total), CU_THREADS>>>(g, total, cu_data(a), cu_data(b), cu_data(o));
      CU_LAUNCHED(fn);
      return DLE_OK;
    }
    return cu_error("%s: no CUDA kernel for %s", fn, cu_dtype_name(D));
  });
}

static dle_status cu_matmul(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                            const dle_attrs *attrs) {
  (void)nin;
  const char *fn = cu_op_name(op);
  dle_tensor *o = outs[0], *a = ins[0], *b = ins[1];
  dle_dtype dt = o->dtype;
  if (a->dtype != dt || b->dtype != dt || o->ndim < 2 || a->ndim != o->ndim || b->ndim != o->ndim)
    return cu_error("%s: no CUDA kernel for %s x %s -> %s", fn, cu_dtype_name(a->dtype),
                    cu_dtype_name(b->dtype), cu_dtype_name(dt));
  if (!cu_contiguous(o)) return cu_error("%s: the CUDA kernel expects a contiguous output", fn);
  bool accumulate = attrs && attrs->f[0] == 1;
  if (accumulate && !cu_is_float(dt))
    return cu_error("%s: accumulating into %s is not supported", fn, cu_dtype_name(dt));
  if (cu_numel(o) == 0) return DLE_OK;
  CU_OK(cu_use_device(fn, o));
  if (a->sizes[a->ndim - 1] == 0) { /* an empty sum: 0, or the addend itself */
    if (!accumulate)
      CU_TRY(fn, cudaMemsetAsync(cu_data(o), 0, (size_t)(cu_numel(o) * cu_esize(dt)), 0));
    return DLE_OK;
  }
  return cu_is_float(dt) ? float_matmul(fn, o, a, b, accumulate) : int_matmul(fn, o, a, b);
}

void cu_register_matmul(dle_backend *b) { b->kernels[DLE_OP_MATMUL] = cu_matmul; }
