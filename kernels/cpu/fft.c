/* fft.c — the CPU kernel of the FFT family (engine/ops/fft.c): FFTW's guru64 interface, which
 * takes the input's own strides, so a strided batch needs no copy. complex64/float32 run in
 * fftw3f, complex128/float64 in fftw3. The output is fresh and contiguous; a c2r input is a
 * private copy (FFTW overwrites it). Plans are made per call with FFTW_ESTIMATE (no trial runs,
 * the arrays are not touched), under a mutex: FFTW's planner is not thread-safe, only
 * fftw_execute is. The norm's scale is applied to the output afterwards. */
#include <complex.h>
#include <fftw3.h>
#include <math.h>
#include <pthread.h>

#include "backend.h"

static pthread_mutex_t planner = PTHREAD_MUTEX_INITIALIZER;

/* The transform dims (mask bits, ascending) and the batch dims of the op, in FFTW's terms:
 * n, the input's and output's strides (elements of each one's own type). */
typedef struct {
  int rank, howmany;
  fftw_iodim64 dims[DLE_MAX_DIMS], batch[DLE_MAX_DIMS];
  double scale;
} fft_geom;

static void geometry(fft_geom *g, const dle_tensor *in, const dle_tensor *out, const dle_attrs *a) {
  dle_fft_kind kind = (dle_fft_kind)a->ints[0];
  int64_t mask = a->ints[1];
  g->rank = g->howmany = 0;
  double n = 1;
  for (int d = 0; d < in->ndim; d++) {
    /* the logical size: the real side's for r2c / c2r */
    int64_t len = kind == DLE_FFT_C2R ? out->sizes[d] : in->sizes[d];
    fftw_iodim64 io = {len, in->strides[d], out->strides[d]};
    if (mask >> d & 1) {
      g->dims[g->rank++] = io;
      n *= (double)len;
    } else {
      g->batch[g->howmany++] = io;
    }
  }
  bool inverse = kind == DLE_FFT_C2C_INVERSE || kind == DLE_FFT_C2R;
  switch ((dle_fft_norm)a->ints[3]) {
    case DLE_FFT_NORM_ORTHO: g->scale = 1 / sqrt(n); break;
    case DLE_FFT_NORM_FORWARD: g->scale = inverse ? 1 : 1 / n; break;
    default: g->scale = inverse ? 1 / n : 1; break;
  }
}

/* One precision: P is the FFTW prefix (fftw_ / fftwf_), R the real type. */
#define FFT_PRECISION(P, R)                                                                      \
  static dle_status run_##P(const fft_geom *g, dle_fft_kind kind, void *in, void *out,           \
                            int64_t out_numel, bool complex_out) {                               \
    P##plan plan;                                                                                \
    pthread_mutex_lock(&planner);                                                                \
    if (kind == DLE_FFT_R2C)                                                                     \
      plan = P##plan_guru64_dft_r2c(g->rank, (const P##iodim64 *)g->dims, g->howmany,            \
                                    (const P##iodim64 *)g->batch, (R *)in, (P##complex *)out,    \
                                    FFTW_ESTIMATE);                                              \
    else if (kind == DLE_FFT_C2R)                                                                \
      plan = P##plan_guru64_dft_c2r(g->rank, (const P##iodim64 *)g->dims, g->howmany,            \
                                    (const P##iodim64 *)g->batch, (P##complex *)in, (R *)out,    \
                                    FFTW_ESTIMATE | FFTW_DESTROY_INPUT);                         \
    else                                                                                         \
      plan =                                                                                     \
          P##plan_guru64_dft(g->rank, (const P##iodim64 *)g->dims, g->howmany,                   \
                             (const P##iodim64 *)g->batch, (P##complex *)in, (P##complex *)out,  \
                             kind == DLE_FFT_C2C ? FFTW_FORWARD : FFTW_BACKWARD, FFTW_ESTIMATE); \
    pthread_mutex_unlock(&planner);                                                              \
    if (!plan) return dle_error("fft: FFTW could not plan this transform");                      \
    P##execute(plan);                                                                            \
    pthread_mutex_lock(&planner);                                                                \
    P##destroy_plan(plan);                                                                       \
    pthread_mutex_unlock(&planner);                                                              \
    if (g->scale != 1) {                                                                         \
      R *o = out, s = (R)g->scale;                                                               \
      int64_t m = out_numel * (complex_out ? 2 : 1);                                             \
      for (int64_t i = 0; i < m; i++) o[i] *= s;                                                 \
    }                                                                                            \
    return DLE_OK;                                                                               \
  }
FFT_PRECISION(fftw_, double)
FFT_PRECISION(fftwf_, float)

static DLE_KERNEL(cpu_fft) {
  dle_tensor *x = ins[0], *y = outs[0];
  if (dle_tensor_numel(x) == 0 || dle_tensor_numel(y) == 0) return DLE_OK;
  fft_geom g;
  geometry(&g, x, y, a);
  dle_fft_kind kind = (dle_fft_kind)a->ints[0];
  bool wide = dle_real_of(y->dtype) == DLE_F64;
  bool complex_out = dle_dtype_is_complex(y->dtype);
  int64_t n = dle_tensor_numel(y);
  if (wide) return run_fftw_(&g, kind, dle_tensor_data(x), dle_tensor_data(y), n, complex_out);
  return run_fftwf_(&g, kind, dle_tensor_data(x), dle_tensor_data(y), n, complex_out);
}

void cpu_register_fft(dle_backend *b) { CPU_REGISTER(b, cpu_fft, DLE_OP_FFT); }
