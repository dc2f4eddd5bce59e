/* common.cuh — what the CUDA kernel files share: dtype traits (storage type, compute type, load and
 * store with the CPU kernels' conversion rules, kernels/cpu/cpu_types.h), error reporting through
 * the engine's host table, device memory, and the strided N-d index of elementwise kernels.
 *
 * This library is dlopen'ed by the core module, which is itself loaded RTLD_LOCAL: no engine
 * symbol is visible here. dle.h is included for its types only; none of its functions (nor its
 * inline helpers that read engine tables, e.g. dle_dtype_size, dle_tensor_data) may be called.
 * The link uses -z defs, so a slip is a build error rather than a library that fails to load. */
#ifndef DLE_CUDA_COMMON_CUH
#define DLE_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <type_traits>

#include "../../engine/dle.h"
#include "../../engine/kernel/backend.h"
#include "../../engine/kernel/targets.h"

/* ---------------------------------------------------------------- errors (cuda_host.c) */
extern "C" {
/* Formats the message and hands it to the engine's dle_error; returns DLE_ERR. */
dle_status cu_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The op's name from the engine's op table. */
const char *cu_op_name(dle_op op);
/* The host table given at init (NULL before). */
extern const dle_backend_host *cu_host;
}

/* A failed CUDA runtime call as a dle error naming the op (or function) and the call. */
dle_status cu_fail(const char *fn, const char *what, cudaError_t e);
#define CU_TRY(fn, call)                                    \
  do {                                                      \
    cudaError_t e_ = (call);                                \
    if (e_ != cudaSuccess) return cu_fail((fn), #call, e_); \
  } while (0)
/* After a kernel launch: a bad configuration or a sticky error from an earlier kernel. */
#define CU_LAUNCHED(fn) CU_TRY(fn, cudaGetLastError())
/* A dle_status-returning call inside a function returning dle_status. */
#define CU_OK(call)                       \
  do {                                    \
    if ((call) != DLE_OK) return DLE_ERR; \
  } while (0)

/* ---------------------------------------------------------------- devices and memory (backend.cu) */
/* Makes the tensor's device current (kernels run on the legacy default stream of that device). */
dle_status cu_use_device(const char *fn, const dle_tensor *t);
/* Stream-ordered scratch memory on the current device; cu_scratch_free(NULL) is a no-op. */
dle_status cu_scratch(const char *fn, void **p, size_t nbytes);
void cu_scratch_free(void *p);
/* Copies n bytes from the device to the host and waits (small results: counts, flags). */
dle_status cu_read(const char *fn, void *host, const void *dev, size_t n);

/* ---------------------------------------------------------------- dtype traits */
/* complex64/complex128 have sizes (device copies move their bytes) but no CUDA kernels: the
 * dtype switches below reject them */
static const int cu_esizes[DLE_NUM_DTYPES] = {4, 8, 2, 2, 4, 8, 1, 1, 1, 2, 2, 4, 8, 1, 1, 8, 16};
static inline int64_t cu_esize(dle_dtype t) { return cu_esizes[t]; }
/* The float dtypes (float8 included: they compute in float), at run time and compile time. */
static inline bool cu_is_float(dle_dtype t) {
  return t <= DLE_BF16 || t == DLE_F8E4M3 || t == DLE_F8E5M2;
}
template <dle_dtype D>
constexpr bool cu_float_v = D <= DLE_BF16 || D == DLE_F8E4M3 || D == DLE_F8E5M2;
static const char *const cu_dtype_names[DLE_NUM_DTYPES] = {
    "float32", "float64",       "float16",     "bfloat16",  "int32",     "int64",
    "uint8",   "bool",          "int8",        "int16",     "uint16",    "uint32",
    "uint64",  "float8_e4m3fn", "float8_e5m2", "complex64", "complex128"};
static inline const char *cu_dtype_name(dle_dtype t) {
  return (unsigned)t < DLE_NUM_DTYPES ? cu_dtype_names[t] : "?";
}

/* Address of a tensor's first element (dle_tensor_data without the engine's size table). */
static inline char *cu_data(const dle_tensor *t) {
  return (char *)t->storage->data + t->offset * cu_esize(t->dtype);
}
static inline int64_t cu_numel(const dle_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->sizes[d];
  return n;
}
/* dle_tensor_is_contiguous's rule: size-1 dims' strides are irrelevant, an empty tensor is dense. */
static inline bool cu_contiguous(const dle_tensor *t) {
  int64_t st = 1;
  bool dense = true;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->sizes[d] == 0) return true;
    if (t->sizes[d] != 1 && t->strides[d] != st) dense = false;
    st *= t->sizes[d];
  }
  return dense;
}

/* Storage type T and compute type CT of each dtype, as in cpu_types.h: float16/bfloat16/float8 are
 * kept as their bits and compute in float; the narrow integers and bool compute in int32, uint32
 * in int64, uint64 in uint64. */
template <dle_dtype D>
struct cu_type;
template <>
struct cu_type<DLE_F32> {
  typedef float T;
  typedef float CT;
};
template <>
struct cu_type<DLE_F64> {
  typedef double T;
  typedef double CT;
};
template <>
struct cu_type<DLE_F16> {
  typedef uint16_t T;
  typedef float CT;
};
template <>
struct cu_type<DLE_BF16> {
  typedef uint16_t T;
  typedef float CT;
};
template <>
struct cu_type<DLE_I32> {
  typedef int32_t T;
  typedef int32_t CT;
};
template <>
struct cu_type<DLE_I64> {
  typedef int64_t T;
  typedef int64_t CT;
};
template <>
struct cu_type<DLE_U8> {
  typedef uint8_t T;
  typedef int32_t CT;
};
template <>
struct cu_type<DLE_BOOL> {
  typedef uint8_t T;
  typedef int32_t CT;
};
#define CU_TYPE(D, T_, CT_) \
  template <>               \
  struct cu_type<D> {       \
    typedef T_ T;           \
    typedef CT_ CT;         \
  };
CU_TYPE(DLE_I8, int8_t, int32_t)
CU_TYPE(DLE_I16, int16_t, int32_t)
CU_TYPE(DLE_U16, uint16_t, int32_t)
CU_TYPE(DLE_U32, uint32_t, int64_t)
CU_TYPE(DLE_U64, uint64_t, uint64_t)
CU_TYPE(DLE_F8E4M3, uint8_t, float)
CU_TYPE(DLE_F8E5M2, uint8_t, float)
#undef CU_TYPE
#define CU_T(D)  typename cu_type<D>::T
#define CU_CT(D) typename cu_type<D>::CT

template <dle_dtype D>
__device__ __forceinline__ CU_CT(D) cu_load(CU_T(D) x) {
  if constexpr (D == DLE_F16)
    return __half2float(__ushort_as_half(x));
  else if constexpr (D == DLE_BF16)
    return __bfloat162float(__ushort_as_bfloat16(x));
  else if constexpr (D == DLE_BOOL)
    return x != 0;
  else if constexpr (D == DLE_F8E4M3)
    return __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)x, __NV_E4M3)));
  else if constexpr (D == DLE_F8E5M2)
    return __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)x, __NV_E5M2)));
  else
    return (CU_CT(D))x;
}

/* A floating value into an integer range: NaN -> 0, saturating at lo and hi (cpu_f_to_i64). */
__host__ __device__ __forceinline__ int64_t cu_f_to_i64(double v, int64_t lo, int64_t hi) {
  if (v != v) return 0;
  if (v <= (double)lo) return lo;
  if (v >= (double)hi) return hi;
  return (int64_t)v;
}

/* A value of any arithmetic type V into dtype D's storage (ST_<ID> of cpu_types.h): floating
 * values saturate into integers, integer values wrap like C casts; float16/bfloat16 round the float
 * value to nearest even (a double is rounded to float first, as the CPU does). */
template <dle_dtype D, class V>
__device__ __forceinline__ CU_T(D) cu_store(V v) {
  constexpr bool fv = std::is_floating_point<V>::value;
  if constexpr (D == DLE_F32)
    return (float)v;
  else if constexpr (D == DLE_F64)
    return (double)v;
  else if constexpr (D == DLE_F16)
    return __half_as_ushort(__float2half_rn((float)v));
  else if constexpr (D == DLE_BF16)
    return __bfloat16_as_ushort(__float2bfloat16_rn((float)v));
  else if constexpr (D == DLE_BOOL)
    return (uint8_t)(v != 0);
  else if constexpr (D == DLE_I32)
    return fv ? (int32_t)cu_f_to_i64((double)v, INT32_MIN, INT32_MAX) : (int32_t)v;
  else if constexpr (D == DLE_I64)
    return fv ? cu_f_to_i64((double)v, INT64_MIN, INT64_MAX) : (int64_t)v;
  else if constexpr (D == DLE_F8E4M3) /* saturating, round to nearest even (fp8.h) */
    return (uint8_t)__nv_cvt_float_to_fp8((float)v, __NV_SATFINITE, __NV_E4M3);
  else if constexpr (D == DLE_F8E5M2)
    return (uint8_t)__nv_cvt_float_to_fp8((float)v, __NV_SATFINITE, __NV_E5M2);
  else if constexpr (D == DLE_U64)
    return fv ? (!((double)v > 0)                      ? 0ull
                 : (double)v >= 18446744073709551616.0 ? ~0ull
                                                       : (uint64_t)(double)v)
              : (uint64_t)v;
  else if constexpr (D == DLE_U32)
    return fv ? (uint32_t)cu_f_to_i64((double)v, 0, UINT32_MAX) : (uint32_t)v;
  else if constexpr (D == DLE_U16)
    return fv ? (uint16_t)cu_f_to_i64((double)v, 0, UINT16_MAX) : (uint16_t)v;
  else if constexpr (D == DLE_I16)
    return fv ? (int16_t)cu_f_to_i64((double)v, INT16_MIN, INT16_MAX) : (int16_t)v;
  else if constexpr (D == DLE_I8)
    return fv ? (int8_t)cu_f_to_i64((double)v, INT8_MIN, INT8_MAX) : (int8_t)v;
  else
    return fv ? (uint8_t)cu_f_to_i64((double)v, 0, 255) : (uint8_t)v; /* U8 */
}

/* A double attribute (clamp bound, exponent) in compute type CT, saturating for integers
 * (CPU_PARAM). */
template <class CT>
__host__ __device__ __forceinline__ CT cu_param(double v) {
  if constexpr (std::is_floating_point<CT>::value)
    return (CT)v;
  else if constexpr (sizeof(CT) == 4)
    return (CT)cu_f_to_i64(v, INT32_MIN, INT32_MAX);
  else
    return (CT)cu_f_to_i64(v, INT64_MIN, INT64_MAX);
}

/* <tgmath.h>'s choice: the float function for float, else the double one (integers too, so an
 * integer pow gives a double that the store saturates, as on the CPU). */
#define CU_MATH(name)                              \
  template <class X>                               \
  __device__ __forceinline__ auto cu_##name(X x) { \
    if constexpr (std::is_same<X, float>::value)   \
      return name##f(x);                           \
    else                                           \
      return name((double)x);                      \
  }
CU_MATH(exp)
CU_MATH(log)
CU_MATH(expm1)
CU_MATH(log1p)
CU_MATH(sqrt)
CU_MATH(sin)
CU_MATH(cos)
CU_MATH(tanh)
CU_MATH(erfc)
CU_MATH(floor)
CU_MATH(ceil)
CU_MATH(rint) /* nearbyint: round half to even in the default rounding mode */
CU_MATH(fabs)
template <class X>
__device__ __forceinline__ auto cu_pow(X a, X b) {
  if constexpr (std::is_same<X, float>::value)
    return powf(a, b);
  else
    return pow((double)a, (double)b);
}

/* Integer + - * and negation wrap around (computed unsigned: signed overflow is undefined). */
template <class CT>
__device__ __forceinline__ CT cu_wrap_add(CT a, CT b) {
  if constexpr (std::is_integral<CT>::value)
    return (CT)((std::make_unsigned_t<CT>)a + (std::make_unsigned_t<CT>)b);
  else
    return a + b;
}
template <class CT>
__device__ __forceinline__ CT cu_wrap_sub(CT a, CT b) {
  if constexpr (std::is_integral<CT>::value)
    return (CT)((std::make_unsigned_t<CT>)a - (std::make_unsigned_t<CT>)b);
  else
    return a - b;
}
template <class CT>
__device__ __forceinline__ CT cu_wrap_mul(CT a, CT b) {
  if constexpr (std::is_integral<CT>::value)
    return (CT)((std::make_unsigned_t<CT>)a * (std::make_unsigned_t<CT>)b);
  else
    return a * b;
}
template <class CT>
__device__ __forceinline__ CT cu_neg(CT x) {
  if constexpr (std::is_integral<CT>::value)
    return (CT)(0u - (std::make_unsigned_t<CT>)x);
  else
    return -x;
}

/* fp8_matmul.cu: sets the backend's fp8_scaled_matmul hook. */
void cu_register_fp8(dle_backend *b);

/* Calls fn(tag) with tag's ::value the dtype dt as a compile-time constant. */
template <dle_dtype D>
struct cu_tag {
  static constexpr dle_dtype value = D;
};
/* X(D) for each float dtype, and for each other one: the cases of the dispatches below. */
#define CU_FLOAT_DTYPES(X) X(DLE_F32) X(DLE_F64) X(DLE_F16) X(DLE_BF16) X(DLE_F8E4M3) X(DLE_F8E5M2)
#define CU_NONFLOAT_DTYPES(X) \
  X(DLE_I32) X(DLE_I64) X(DLE_U8) X(DLE_BOOL) X(DLE_I8) X(DLE_I16) X(DLE_U16) X(DLE_U32) X(DLE_U64)
#define CU_TAG_CASE(D) \
  case D: return fn(cu_tag<D>{});
template <class Fn>
dle_status cu_with_dtype(dle_dtype dt, Fn &&fn) {
  switch (dt) {
    CU_FLOAT_DTYPES(CU_TAG_CASE)
    CU_NONFLOAT_DTYPES(CU_TAG_CASE)
    default: return cu_error("invalid dtype %d", (int)dt);
  }
}
/* The same over the float dtypes only (the CPU kernels of these ops have no others). */
template <class Fn>
dle_status cu_with_float_dtype(const char *fn_name, dle_dtype dt, Fn &&fn) {
  switch (dt) {
    CU_FLOAT_DTYPES(CU_TAG_CASE)
    default: return cu_error("%s: no CUDA kernel for dtype %s", fn_name, cu_dtype_name(dt));
  }
}

/* ---------------------------------------------------------------- launches */
#define CU_THREADS 256
/* Blocks of a grid-stride loop over n items (each kernel loops, so a cap is only a choice). */
static inline unsigned cu_blocks(int64_t n) {
  int64_t b = (n + CU_THREADS - 1) / CU_THREADS;
  return (unsigned)(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}
#define CU_GRID_LOOP(i, n)                                                  \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += (int64_t)gridDim.x * blockDim.x)

/* ---------------------------------------------------------------- the elementwise index */
/* The output's shape and every operand's byte strides over it (inputs right-aligned, stride 0
 * where broadcast), dims merged where every operand steps over them evenly and size-1 dims
 * dropped; most calls end up 1-D. */
#define CU_MAX_OPS 4
struct cu_index {
  int ndim, nops;
  int64_t n;
  int64_t sizes[DLE_MAX_DIMS];
  int64_t strides[CU_MAX_OPS][DLE_MAX_DIMS];
  char *base[CU_MAX_OPS];
};

/* ops[0] is the output (its shape is the iteration shape); ops[1..] broadcast to it. */
void cu_index_make(cu_index *ix, int nops, dle_tensor *const *ops);

/* Byte offsets of element i (logical row-major order of the output) for every operand. */
__device__ __forceinline__ void cu_offsets(const cu_index &ix, int64_t i, int64_t *off) {
  for (int k = 0; k < CU_MAX_OPS; k++) off[k] = 0;
  if (ix.ndim == 1) {
    for (int k = 0; k < ix.nops; k++) off[k] = i * ix.strides[k][0];
    return;
  }
  for (int d = ix.ndim - 1; d >= 0; d--) {
    int64_t c = i % ix.sizes[d];
    i /= ix.sizes[d];
    for (int k = 0; k < ix.nops; k++) off[k] += c * ix.strides[k][d];
  }
}

/* f(p, i) for every element i, p[k] pointing at operand k's element. */
template <class F>
__global__ void cu_map_kernel(cu_index ix, F f) {
  CU_GRID_LOOP(i, ix.n) {
    int64_t off[CU_MAX_OPS];
    cu_offsets(ix, i, off);
    char *p[CU_MAX_OPS];
    for (int k = 0; k < CU_MAX_OPS; k++) p[k] = ix.base[k] ? ix.base[k] + off[k] : nullptr;
    f(p, i);
  }
}

/* Launches f over the output and inputs of an elementwise kernel (nothing to do when empty). */
template <class F>
dle_status cu_map(const char *fn, dle_tensor *out, dle_tensor *const *ins, int nin, F f) {
  dle_tensor *ops[CU_MAX_OPS] = {out};
  for (int i = 0; i < nin; i++) ops[i + 1] = ins[i];
  cu_index ix;
  cu_index_make(&ix, nin + 1, ops);
  if (ix.n == 0) return DLE_OK;
  CU_OK(cu_use_device(fn, out));
  cu_map_kernel<<<cu_blocks(ix.n), CU_THREADS>>>(ix, f);
  CU_LAUNCHED(fn);
  return DLE_OK;
}

/* ---------------------------------------------------------------- reductions' geometry */
/* x's dims split into kept dims (one output each) and reduced dims, both in logical order with
 * size-1 dims dropped; byte strides of x and (softmax) of the output y. */
struct cu_red_geom {
  int nk, nr;
  int64_t nout, nred;
  int64_t ks[DLE_MAX_DIMS], kx[DLE_MAX_DIMS], ky[DLE_MAX_DIMS];
  int64_t rs[DLE_MAX_DIMS], rx[DLE_MAX_DIMS], ry[DLE_MAX_DIMS];
};
/* red[d]: dim d of x is reduced. y (may be NULL) has x's shape. */
void cu_red_geom_make(cu_red_geom *g, const dle_tensor *x, const bool *red, const dle_tensor *y);

/* Byte offset of flat index i over a group of n dims (row-major). */
__device__ __forceinline__ int64_t cu_group_offset(int n, const int64_t *sizes,
                                                   const int64_t *strides, int64_t i) {
  int64_t off = 0;
  for (int d = n - 1; d >= 0; d--) {
    off += (i % sizes[d]) * strides[d];
    i /= sizes[d];
  }
  return off;
}

/* Max and min that let NaN through (STEP_MAX / STEP_MIN of the CPU's reductions). */
struct cu_max_nan {
  template <class A>
  __device__ A operator()(A a, A x) const {
    return ((x > a) | (x != x)) ? x : a;
  }
};
struct cu_min_nan {
  template <class A>
  __device__ A operator()(A a, A x) const {
    return ((x < a) | (x != x)) ? x : a;
  }
};

/* A contiguous tensor header over device memory p (scratch), for handing scratch to cu_map. */
static inline void cu_wrap_scratch(dle_tensor *t, dle_storage *s, void *p, size_t nbytes,
                                   dle_dtype dt, int ndim, const int64_t *sizes, dle_device dev) {
  *s = dle_storage{};
  s->data = p, s->nbytes = nbytes, s->refcount = 1, s->device = dev;
  *t = dle_tensor{};
  t->storage = s, t->ndim = ndim, t->dtype = dt, t->refcount = 1;
  int64_t st = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    t->sizes[d] = sizes[d], t->strides[d] = st;
    st *= sizes[d] > 0 ? sizes[d] : 1;
  }
}
/* dst = src (same dtype and shape, any strides): copy.cu. */
dle_status cu_copy_same(const char *fn, dle_tensor *dst, dle_tensor *src);

/* ---------------------------------------------------------------- block reductions */
/* combine(v) over the block's threads by a tree in shared memory sh[blockDim.x] (blockDim.x a
 * power of two); every thread gets the result. The order of combination is fixed, so results do
 * not vary from run to run. */
template <class A, class C>
__device__ A cu_block_reduce(A v, A *sh, C combine) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) sh[threadIdx.x] = combine(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  A r = sh[0];
  __syncthreads();
  return r;
}
struct cu_add {
  template <class A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};
struct cu_mul {
  template <class A>
  __device__ A operator()(A a, A b) const {
    return a * b;
  }
};

/* Threads per block for rows of n elements: a power of two from 32 to CU_THREADS. */
static inline unsigned cu_row_threads(int64_t n) {
  unsigned t = 32;
  while (t < CU_THREADS && (int64_t)t < n) t *= 2;
  return t;
}

/* ------------------------------------------- row losses (defined in nn.cu, used by losses.cu too) */
/* The layout the front door promises these kernels: inputs contiguous in the output's dtype (or
 * int64 targets), float32 or float64, the output contiguous; then makes the device current. */
dle_status cu_float_rows_ready(const char *fn, const dle_tensor *o, dle_tensor *const *ins,
                               int nin);
/* The kernel entry of these ops (nn.cu, losses.cu): the checks above, then run(fn, T{}) with T
 * the output's element type, double or float. */
template <class F>
dle_status cu_float_rows_run(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                             F run) {
  const char *fn = cu_op_name(op);
  CU_OK(cu_float_rows_ready(fn, outs[0], ins, nin));
  return outs[0]->dtype == DLE_F64 ? run(fn, double{}) : run(fn, float{});
}
/* Checks every target not ignored (a class base..base+c-1) on the device, with the CPU's message
 * for the first bad one; *count gets how many rows are not ignored. */
dle_status cu_check_targets(const char *fn, const ce_args &c, const int64_t *t, int64_t *count);
/* loss[0] = (sum of rows[0..n), in double, in a fixed order) / div, stored as float or double. */
dle_status cu_store_total(const char *fn, const double *rows, int64_t n, double div, bool dbl,
                          void *loss);

/* ---------------------------------------------------------------- registration */
/* cu_register_<family> (kernels/cuda/<family>.cu) for each family with CUDA kernels in
 * engine/ops/families.def; backend.cu calls them in that order. */
#define DLE_FAMILY(name, grad, cpu, cuda, lua) cuda(void cu_register_##name(dle_backend *b);)
#include "../../engine/ops/families.def"

#endif
