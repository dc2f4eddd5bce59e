/* fp8_matmul.cu — dle_fp8_scaled_matmul on CUDA through cuBLASLt's fp8 path (the backend's
 * fp8_scaled_matmul hook). The engine hands over a {M, K} and bt = b^T {N, K}, both contiguous,
 * and a float32 out {M, N}: in cuBLASLt's column-major terms out^T {N, M} = op(bt) @ a with bt read
 * transposed and a not (the "TN" layout fp8 requires), and the per-tensor scales passed as device
 * pointers (CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER), so out = (a * a_scale) @ (b * b_scale).
 * cuBLASLt itself refuses e5m2 x e5m2 and dims that are not multiples of 16 (its error is
 * reported). Compiled everywhere nvcc is; run only where a GPU is. */
#include <cublasLt.h>
#include <pthread.h>

#include "common.cuh"

#define FP8_FN          "dle.fp8.scaled_matmul"
#define FP8_MAX_DEVICES 64
#define FP8_WORKSPACE   ((size_t)32 << 20)

static cublasLtHandle_t lt_handles[FP8_MAX_DEVICES];
static pthread_mutex_t lt_lock = PTHREAD_MUTEX_INITIALIZER;

static dle_status lt_fail(const char *what, cublasStatus_t st) {
  return cu_error(FP8_FN ": cuBLASLt error in %s: %s", what, cublasGetStatusString(st));
}
#define LT_TRY(what, call)                                   \
  do {                                                       \
    cublasStatus_t s_ = (call);                              \
    if (s_ != CUBLAS_STATUS_SUCCESS) st = lt_fail(what, s_); \
  } while (0)

static dle_status lt_handle(cublasLtHandle_t *h) {
  int dev = 0;
  CU_TRY(FP8_FN, cudaGetDevice(&dev));
  if (dev < 0 || dev >= FP8_MAX_DEVICES)
    return cu_error(FP8_FN ": CUDA device %d out of range", dev);
  pthread_mutex_lock(&lt_lock);
  cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
  if (!lt_handles[dev]) s = cublasLtCreate(&lt_handles[dev]);
  *h = lt_handles[dev];
  pthread_mutex_unlock(&lt_lock);
  return s == CUBLAS_STATUS_SUCCESS ? DLE_OK : lt_fail("cublasLtCreate", s);
}

static cudaDataType_t fp8_type(dle_dtype t) {
  return t == DLE_F8E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
}

static dle_status cu_fp8_scaled_matmul(dle_tensor *out, const dle_tensor *a, const dle_tensor *bt,
                                       const dle_tensor *a_scale, const dle_tensor *b_scale) {
  CU_OK(cu_use_device(FP8_FN, out));
  if (out->dtype != DLE_F32) return cu_error(FP8_FN ": the CUDA result must be float32");
  cublasLtHandle_t h;
  CU_OK(lt_handle(&h));
  uint64_t M = (uint64_t)a->sizes[0], K = (uint64_t)a->sizes[1], N = (uint64_t)bt->sizes[0];
  dle_status st = DLE_OK;
  cublasLtMatmulDesc_t op = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  void *ws = NULL;
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  /* cuBLASLt's A is bt (scaled by b_scale), its B is a (scaled by a_scale) */
  const void *sa_ptr = cu_data(b_scale), *sb_ptr = cu_data(a_scale);
  size_t wsize = FP8_WORKSPACE;
  LT_TRY("cublasLtMatmulDescCreate", cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  if (st == DLE_OK)
    LT_TRY("TRANSA",
           cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  if (st == DLE_OK)
    LT_TRY("TRANSB",
           cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (st == DLE_OK)
    LT_TRY("A_SCALE_POINTER",
           cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa_ptr,
                                          sizeof sa_ptr));
  if (st == DLE_OK)
    LT_TRY("B_SCALE_POINTER",
           cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb_ptr,
                                          sizeof sb_ptr));
  if (st == DLE_OK)
    LT_TRY("layout of b", cublasLtMatrixLayoutCreate(&la, fp8_type(bt->dtype), K, N, (int64_t)K));
  if (st == DLE_OK)
    LT_TRY("layout of a", cublasLtMatrixLayoutCreate(&lb, fp8_type(a->dtype), K, M, (int64_t)K));
  if (st == DLE_OK)
    LT_TRY("layout of out", cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, N, M, (int64_t)N));
  if (st == DLE_OK) st = cu_scratch(FP8_FN, &ws, wsize);
  if (st == DLE_OK) LT_TRY("preference", cublasLtMatmulPreferenceCreate(&pref));
  if (st == DLE_OK)
    LT_TRY("workspace size",
           cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &wsize, sizeof wsize));
  cublasLtMatmulHeuristicResult_t heur = {};
  int found = 0;
  if (st == DLE_OK)
    LT_TRY("cublasLtMatmulAlgoGetHeuristic",
           cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &heur, &found));
  if (st == DLE_OK && found == 0)
    st = cu_error(FP8_FN
                  ": cuBLASLt has no fp8 algorithm for a {%llu,%llu} (%s) @ b {%llu,%llu} (%s) "
                  "on this GPU (fp8 needs compute capability 8.9 or newer and dims multiple of 16)",
                  (unsigned long long)M, (unsigned long long)K, cu_dtype_name(a->dtype),
                  (unsigned long long)K, (unsigned long long)N, cu_dtype_name(bt->dtype));
  float alpha = 1.0f, beta = 0.0f;
  if (st == DLE_OK)
    LT_TRY("cublasLtMatmul",
           cublasLtMatmul(h, op, &alpha, cu_data(bt), la, cu_data(a), lb, &beta, cu_data(out), ld,
                          cu_data(out), ld, &heur.algo, ws, wsize, 0));
  cu_scratch_free(ws);
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (ld) cublasLtMatrixLayoutDestroy(ld);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (op) cublasLtMatmulDescDestroy(op);
  return st;
}

void cu_register_fp8(dle_backend *b) { b->fp8_scaled_matmul = cu_fp8_scaled_matmul; }
