/* random.c — CPU kernels of rand, randn and randint. Element i of the output reads only
 * Philox block (offset + i / per_block), per_block as in dle_random_blocks, so threads split the
 * blocks and the tensor is the same for any thread count. */
#include "backend.h"
#include "cpu_loop.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Blocks generated per call: enough to overlap their computation, small enough for the stack. */
#define BLOCK_CHUNK 64

typedef struct {
  uint64_t seed, offset; /* the generator snapshot the front door handed us */
  int64_t lo;            /* randint: lowest value */
  uint64_t range;        /* randint: hi - lo */
} rand_ctx;

/* Fills the elements of blocks [b0, b1) of a contiguous output of n elements. */
typedef void (*block_fn)(void *out, int64_t n, int64_t b0, int64_t b1, const rand_ctx *c);

static inline uint64_t bits64(const uint32_t *w, int k) {
  return (uint64_t)w[2 * k] << 32 | w[2 * k + 1];
}

/* ---- rand: uniforms in [0, 1) with exactly as many random bits as the storage type holds
 * (24 for float32, 11 for float16, 8 for bfloat16, 53 for float64, 4 and 3 for the float8
 * formats), so the store never rounds
 * up to 1. */
#define RAND_PER(ID)         (DLE_##ID == DLE_F64 ? 2 : 4)
#define RAND_VT(CT)          CT
#define UNIFORM_F32(w, k)    ((float)((w)[k] >> 8) * 0x1p-24f)
#define UNIFORM_F16(w, k)    ((float)((w)[k] >> 21) * 0x1p-11f)
#define UNIFORM_BF16(w, k)   ((float)((w)[k] >> 24) * 0x1p-8f)
#define UNIFORM_F64(w, k)    ((double)(bits64(w, k) >> 11) * 0x1p-53)
#define UNIFORM_F8E4M3(w, k) ((float)((w)[k] >> 28) * 0x1p-4f)
#define UNIFORM_F8E5M2(w, k) ((float)((w)[k] >> 29) * 0x1p-3f)
#define RAND_VALUES(ID, w, v, c) \
  for (int k = 0; k < RAND_PER(ID); k++) v[k] = UNIFORM_##ID(w, k);

/* ---- randn: Box-Muller, one pair of normals per pair of uniforms; u1 is in (0, 1] so the log
 * never sees 0 (the largest |z| is 5.8 in float, 8.6 in double). Reduced-precision types use
 * float normals. */
#define RANDN_PER(ID) RAND_PER(ID)
#define RANDN_VT(CT)  CT
static inline void normals_f(const uint32_t w[4], float z[4]) {
  for (int k = 0; k < 4; k += 2) {
    float u1 = (float)((w[k] >> 8) + 1) * 0x1p-24f, u2 = (float)(w[k + 1] >> 8) * 0x1p-24f;
    float r = sqrtf(-2.0f * logf(u1)), th = 6.28318530717958647692f * u2;
    z[k] = r * cosf(th), z[k + 1] = r * sinf(th);
  }
}
static inline void normals_d(const uint32_t w[4], double z[2]) {
  double u1 = (double)((bits64(w, 0) >> 11) + 1) * 0x1p-53,
         u2 = (double)(bits64(w, 1) >> 11) * 0x1p-53;
  double r = sqrt(-2.0 * log(u1)), th = 6.28318530717958647692 * u2;
  z[0] = r * cos(th), z[1] = r * sin(th);
}
#define NORMALS_F32               normals_f
#define NORMALS_F16               normals_f
#define NORMALS_BF16              normals_f
#define NORMALS_F64               normals_d
#define NORMALS_F8E4M3            normals_f
#define NORMALS_F8E5M2            normals_f
#define RANDN_VALUES(ID, w, v, c) NORMALS_##ID(w, v);

/* ---- randint: 64 bits per element, scaled to [0, range) by Lemire's multiply-shift (no
 * rejection, so every element keeps a fixed place in the stream; the bias is below range/2^64). */
#define RANDINT_PER(ID) 2
#define RANDINT_VT(CT)  int64_t
#define RANDINT_VALUES(ID, w, v, c) \
  for (int k = 0; k < 2; k++)       \
    v[k] = c->lo + (int64_t)(uint64_t)(((unsigned __int128)bits64(w, k) * c->range) >> 64);

/* One block loop per op and dtype: Philox blocks -> values -> stores of the elements in range. */
#define BLOCK_KERNEL(OP, ID, T, CT)                                                               \
  static void kernel_##OP##_##ID(void *out, int64_t n, int64_t b0, int64_t b1,                    \
                                 const rand_ctx *c) {                                             \
    T *o = (T *)out;                                                                              \
    enum { per = OP##_PER(ID) };                                                                  \
    uint32_t words[BLOCK_CHUNK][4];                                                               \
    for (int64_t first = b0; first < b1; first += BLOCK_CHUNK) {                                  \
      int64_t nb = b1 - first < BLOCK_CHUNK ? b1 - first : BLOCK_CHUNK;                           \
      dle_philox_blocks(c->seed, c->offset + (uint64_t)first, nb, words);                         \
      for (int64_t j = 0; j < nb; j++) {                                                          \
        const uint32_t *w = words[j];                                                             \
        OP##_VT(CT) v[4];                                                                         \
        OP##_VALUES(ID, w, v, c) int64_t i0 = (first + j) * per, m = n - i0 < per ? n - i0 : per; \
        for (int64_t k = 0; k < m; k++) o[i0 + k] = ST_##ID((CT)v[k]);                            \
      }                                                                                           \
    }                                                                                             \
  }
CPU_FLOAT_TYPES_WITH(BLOCK_KERNEL, RAND)
CPU_FLOAT_TYPES_WITH(BLOCK_KERNEL, RANDN)
CPU_ALL_TYPES_WITH(BLOCK_KERNEL, RANDINT)

#define BLOCK_ENTRY(OP, ID, T, CT) [DLE_##ID] = kernel_##OP##_##ID,
static const block_fn rand_fns[DLE_NUM_DTYPES] = {CPU_FLOAT_TYPES_WITH(BLOCK_ENTRY, RAND)};
static const block_fn randn_fns[DLE_NUM_DTYPES] = {CPU_FLOAT_TYPES_WITH(BLOCK_ENTRY, RANDN)};
static const block_fn randint_fns[DLE_NUM_DTYPES] = {CPU_ALL_TYPES_WITH(BLOCK_ENTRY, RANDINT)};

/* Splits the blocks evenly over the threads (large outputs only). */
static void run_blocks(block_fn fn, void *out, int64_t n, int64_t nblocks, const rand_ctx *c) {
#ifdef _OPENMP
  if (cpu_parallel(n) && omp_get_max_threads() > 1) {
#pragma omp parallel
    {
      int nt = omp_get_num_threads(), t = omp_get_thread_num();
      int64_t chunk = (nblocks + nt - 1) / nt, b = t * chunk;
      int64_t e = b + chunk < nblocks ? b + chunk : nblocks;
      if (b < e) fn(out, n, b, e, c);
    }
    return;
  }
#endif
  fn(out, n, 0, nblocks, c);
}

/* Integers every value of which the dtype holds exactly: [min, max]. */
static void exact_int_limits(dle_dtype dt, double *min, double *max) {
  static const double lim[DLE_NUM_DTYPES][2] = {[DLE_F32] = {-0x1p24, 0x1p24},
                                                [DLE_F64] = {-0x1p53, 0x1p53},
                                                [DLE_F16] = {-0x1p11, 0x1p11},
                                                [DLE_BF16] = {-0x1p8, 0x1p8},
                                                [DLE_I32] = {-0x1p31, 0x1p31 - 1},
                                                [DLE_I64] = {-0x1p62, 0x1p62},
                                                [DLE_U8] = {0, 255},
                                                [DLE_BOOL] = {0, 1},
                                                [DLE_I8] = {-128, 127},
                                                [DLE_I16] = {-32768, 32767},
                                                [DLE_U16] = {0, 65535},
                                                [DLE_U32] = {0, 0x1p32 - 1},
                                                [DLE_U64] = {0, 0x1p62},
                                                [DLE_F8E4M3] = {-16, 16},
                                                [DLE_F8E5M2] = {-8, 8}};
  *min = lim[dt][0], *max = lim[dt][1];
}

static dle_status randint_bounds(const dle_tensor *o, const dle_attrs *a, rand_ctx *c) {
  double lo = a->f[0], hi = a->f[1], min, max;
  if (!(lo < hi) || lo != floor(lo) || hi != floor(hi))
    return dle_error("randint: bounds must be integers with low < high, got [%g, %g) for shape %s",
                     lo, hi, SHAPE(o));
  exact_int_limits(o->dtype, &min, &max);
  if (lo < min || hi - 1 > max)
    return dle_error(
        "randint: range [%.17g, %.17g) does not fit dtype %s (integers %.17g .. %.17g)", lo, hi,
        dle_dtype_name(o->dtype), min, max);
  c->lo = (int64_t)lo;
  c->range = (uint64_t)(int64_t)hi - (uint64_t)c->lo;
  return DLE_OK;
}

/* Fills a contiguous output; other layouts get a contiguous temporary copied in, so element i
 * of the logical order is the same whatever the strides. */
static DLE_KERNEL(cpu_random) {
  const char *fn = dle_op_get_info(op)->name;
  dle_tensor *o = outs[0];
  const block_fn *table = op == DLE_OP_RAND    ? rand_fns
                          : op == DLE_OP_RANDN ? randn_fns
                                               : randint_fns;
  if (!table[o->dtype])
    return dle_error("%s: dtype must be a float type, got %s for shape %s", fn,
                     dle_dtype_name(o->dtype), SHAPE(o));
  const dle_generator *g = a->generator ? a->generator : dle_default_generator();
  rand_ctx c = {.seed = g->seed, .offset = g->offset};
  if (op == DLE_OP_RANDINT) DLE_TRY(randint_bounds(o, a, &c));
  int64_t n = dle_tensor_numel(o);
  if (n == 0) return DLE_OK;
  if (dle_tensor_is_contiguous(o)) {
    run_blocks(table[o->dtype], dle_tensor_data(o), n, dle_random_blocks(op, o->dtype, n), &c);
    return DLE_OK;
  }
  dle_tensor *tmp = NULL;
  DLE_TRY(dle_tensor_empty(&tmp, o->ndim, o->sizes, o->dtype, DLE_DEVICE_CPU));
  run_blocks(table[o->dtype], dle_tensor_data(tmp), n, dle_random_blocks(op, o->dtype, n), &c);
  dle_status st = dle_copy_(o, tmp);
  dle_tensor_release(tmp);
  return st;
}

void cpu_register_random(dle_backend *b) {
  CPU_REGISTER(b, cpu_random, DLE_OP_RAND, DLE_OP_RANDN, DLE_OP_RANDINT);
}
