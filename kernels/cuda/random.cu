/* random.cu — CUDA kernels of rand, randn and randint with dle's RNG semantics
 * (kernels/cpu/random.c): element i of the output (logical order, any strides) reads Philox
 * block offset + i / per of the generator snapshot the front door hands over, per as in
 * dle_random_blocks (rand/randn: 4 elements per block, 2 for float64; randint: 2). rand and
 * randint give the CPU's values bit for bit (integer arithmetic and exact scalings); randn's
 * Box-Muller uses the device's logf/sqrtf/cosf/sinf (log/sqrt/cos/sin for float64), which may
 * differ from the CPU's libm in the last bits. Each thread computes its element's block: simple,
 * and the same numbers whatever the launch shape. */
#include "common.cuh"
#include "philox.cuh"

/* Uniform in [0, 1) with as many random bits as the storage type holds (UNIFORM_* there). */
template <dle_dtype D>
__device__ __forceinline__ auto uniform(const uint32_t *w, int k) {
  if constexpr (D == DLE_F64)
    return (double)(cu_bits64(w, k) >> 11) * 0x1p-53;
  else if constexpr (D == DLE_F16)
    return (float)(w[k] >> 21) * 0x1p-11f;
  else if constexpr (D == DLE_BF16)
    return (float)(w[k] >> 24) * 0x1p-8f;
  else if constexpr (D == DLE_F8E4M3)
    return (float)(w[k] >> 28) * 0x1p-4f;
  else if constexpr (D == DLE_F8E5M2)
    return (float)(w[k] >> 29) * 0x1p-3f;
  else
    return (float)(w[k] >> 8) * 0x1p-24f;
}

/* Normal number k of a block by Box-Muller on pairs of uniforms; u1 in (0, 1] (normals_f/d). */
template <dle_dtype D>
__device__ __forceinline__ auto normal(const uint32_t *w, int k) {
  if constexpr (D == DLE_F64) {
    double u1 = (double)((cu_bits64(w, 0) >> 11) + 1) * 0x1p-53,
           u2 = (double)(cu_bits64(w, 1) >> 11) * 0x1p-53;
    double r = sqrt(-2.0 * log(u1)), th = 6.28318530717958647692 * u2;
    return k == 0 ? r * cos(th) : r * sin(th);
  } else {
    int j = k & ~1;
    float u1 = (float)((w[j] >> 8) + 1) * 0x1p-24f, u2 = (float)(w[j + 1] >> 8) * 0x1p-24f;
    float r = sqrtf(-2.0f * logf(u1)), th = 6.28318530717958647692f * u2;
    return k == j ? r * cosf(th) : r * sinf(th);
  }
}

template <dle_dtype D, int OP>
struct random_fn {
  uint64_t seed, offset;
  int64_t lo;     /* randint */
  uint64_t range; /* randint: hi - lo */
  __device__ void operator()(char *const *p, int64_t i) const {
    constexpr int per = OP == DLE_OP_RANDINT ? 2 : D == DLE_F64 ? 2 : 4;
    uint32_t w[4];
    cu_philox(seed, offset + (uint64_t)(i / per), w);
    int k = (int)(i % per);
    if constexpr (OP == DLE_OP_RAND) {
      *(CU_T(D) *)p[0] = cu_store<D>(uniform<D>(w, k));
    } else if constexpr (OP == DLE_OP_RANDN) {
      *(CU_T(D) *)p[0] = cu_store<D>(normal<D>(w, k));
    } else { /* Lemire's multiply-shift, no rejection (the bias is below range / 2^64) */
      int64_t v = lo + (int64_t)__umul64hi(cu_bits64(w, k), range);
      *(CU_T(D) *)p[0] = cu_store<D>((CU_CT(D))v);
    }
  }
};

/* Integers every value of which the dtype holds exactly: [min, max] (kernels/cpu/random.c). */
static void exact_int_limits(dle_dtype dt, double *min, double *max) {
  static const double lim[DLE_NUM_DTYPES][2] = {{-0x1p24, 0x1p24},
                                                {-0x1p53, 0x1p53},
                                                {-0x1p11, 0x1p11},
                                                {-0x1p8, 0x1p8},
                                                {-0x1p31, 0x1p31 - 1},
                                                {-0x1p62, 0x1p62},
                                                {0, 255},
                                                {0, 1},
                                                {-128, 127},
                                                {-32768, 32767},
                                                {0, 65535},
                                                {0, 0x1p32 - 1},
                                                {0, 0x1p62},
                                                {-16, 16},
                                                {-8, 8}};
  *min = lim[dt][0], *max = lim[dt][1];
}

static dle_status cu_random(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin,
                            const dle_attrs *a) {
  (void)ins, (void)nin;
  const char *fn = cu_op_name(op);
  dle_tensor *o = outs[0];
  if (op != DLE_OP_RANDINT && !cu_is_float(o->dtype))
    return cu_error("%s: dtype must be a float type, got %s", fn, cu_dtype_name(o->dtype));
  if (!a->generator) return cu_error("%s: no generator given", fn);
  int64_t lo = 0;
  uint64_t range = 0;
  if (op == DLE_OP_RANDINT) {
    double l = a->f[0], h = a->f[1], min, max;
    if (!(l < h) || l != floor(l) || h != floor(h))
      return cu_error("randint: bounds must be integers with low < high, got [%g, %g)", l, h);
    exact_int_limits(o->dtype, &min, &max);
    if (l < min || h - 1 > max)
      return cu_error(
          "randint: range [%.17g, %.17g) does not fit dtype %s (integers %.17g .. %.17g)", l, h,
          cu_dtype_name(o->dtype), min, max);
    lo = (int64_t)l;
    range = (uint64_t)(int64_t)h - (uint64_t)lo;
  }
  uint64_t seed = a->generator->seed, offset = a->generator->offset;
  return cu_with_dtype(o->dtype, [&](auto tag) -> dle_status {
    constexpr dle_dtype D = decltype(tag)::value;
    if (op == DLE_OP_RANDINT)
      return cu_map(fn, o, NULL, 0, random_fn<D, DLE_OP_RANDINT>{seed, offset, lo, range});
    if constexpr (cu_float_v<D>) {
      if (op == DLE_OP_RAND)
        return cu_map(fn, o, NULL, 0, random_fn<D, DLE_OP_RAND>{seed, offset, 0, 0});
      return cu_map(fn, o, NULL, 0, random_fn<D, DLE_OP_RANDN>{seed, offset, 0, 0});
    }
    return cu_error("%s: dtype must be a float type, got %s", fn, cu_dtype_name(D));
  });
}

void cu_register_random(dle_backend *b) {
  b->kernels[DLE_OP_RAND] = cu_random;
  b->kernels[DLE_OP_RANDN] = cu_random;
  b->kernels[DLE_OP_RANDINT] = cu_random;
}
