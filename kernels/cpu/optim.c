/* optim.c — the fused optimizer loops behind engine/optim.c: one pass over param, grad and
 * state per step. Each body is written once for every float dtype (cpu_types.h X-macros): the
 * parameter is read/written in its storage type, the arithmetic and the state use the compute
 * type CT (float for float32/float16/bfloat16, double for float64). Large tensors are split into
 * chunks run by OpenMP threads; inside a chunk the loop is branch-free on loop-invariant flags
 * (the compiler unswitches them), so it can vectorise. */
#include "../../engine/internal.h"
#include "backend.h"
#include "cpu_exp.h"
#include "cpu_loop.h"

/* Elements per OpenMP work item: big enough to amortise scheduling, small enough to balance. */
#define OPTIM_CHUNK 16384

#define CPU_SQRT(x) _Generic((x), float : sqrtf, default : sqrt)(x)

/* Runs the body (variadic, so its commas pass through) for i in [lo, hi) of every chunk of n
 * elements; chunks go to OpenMP threads when n >= CPU_PARALLEL_GRAIN_LIGHT (a step is a few
 * arithmetic instructions per element, bound by memory). */
#define FOR_CHUNKS(n, ...)                                                                 \
  do {                                                                                     \
    int64_t nchunks_ = ((n) + OPTIM_CHUNK - 1) / OPTIM_CHUNK;                              \
    _Pragma("omp parallel for if (cpu_parallel_light(n)) schedule(static)")                \
    for (int64_t c_ = 0; c_ < nchunks_; c_++) {                                            \
      int64_t lo = c_ * OPTIM_CHUNK, hi = lo + OPTIM_CHUNK < (n) ? lo + OPTIM_CHUNK : (n); \
      __VA_ARGS__                                                                          \
    }                                                                                      \
  } while (0)

/* ---------------------------------------------------------------- SGD */
#define SGD_LOOP(ID, T, CT)                                                             \
  static void sgd_##ID(int64_t n, T *restrict p, const T *restrict g, CT *restrict buf, \
                       const dle_sgd_opts *o) {                                         \
    const CT lr = (CT)o->lr, mom = (CT)o->momentum, damp1 = (CT)(1 - o->dampening);     \
    const CT wd = (CT)o->weight_decay;                                                  \
    const bool use_mom = o->momentum != 0, nesterov = o->nesterov, first = o->first;    \
    FOR_CHUNKS(n, {                                                                     \
      for (int64_t i = lo; i < hi; i++) {                                               \
        CT pi = LD_##ID(p[i]), gi = LD_##ID(g[i]) + wd * pi;                            \
        if (use_mom) {                                                                  \
          CT b = first ? gi : mom * buf[i] + damp1 * gi;                                \
          buf[i] = b;                                                                   \
          gi = nesterov ? gi + mom * b : b;                                             \
        }                                                                               \
        p[i] = ST_##ID(pi - lr * gi);                                                   \
      }                                                                                 \
    });                                                                                 \
  }
CPU_FLOAT_TYPES(SGD_LOOP)

/* ---------------------------------------------------------------- Adagrad */
#define ADAGRAD_LOOP(ID, T, CT)                                                             \
  static void adagrad_##ID(int64_t n, T *restrict p, const T *restrict g, CT *restrict sum, \
                           const dle_adagrad_opts *o) {                                     \
    const CT clr = (CT)(o->lr / (1 + (double)(o->step - 1) * o->lr_decay));                 \
    const CT wd = (CT)o->weight_decay, eps = (CT)o->eps;                                    \
    FOR_CHUNKS(n, {                                                                         \
      for (int64_t i = lo; i < hi; i++) {                                                   \
        CT pi = LD_##ID(p[i]), gi = LD_##ID(g[i]) + wd * pi;                                \
        CT s = sum[i] + gi * gi;                                                            \
        sum[i] = s;                                                                         \
        p[i] = ST_##ID(pi - clr * (gi / (CPU_SQRT(s) + eps)));                              \
      }                                                                                     \
    });                                                                                     \
  }
CPU_FLOAT_TYPES(ADAGRAD_LOOP)

/* ---------------------------------------------------------------- RMSprop */
#define RMSPROP_LOOP(ID, T, CT)                                                              \
  static void rmsprop_##ID(int64_t n, T *restrict p, const T *restrict g, CT *restrict sq,   \
                           CT *restrict buf, CT *restrict gavg, const dle_rmsprop_opts *o) { \
    const CT lr = (CT)o->lr, alpha = (CT)o->alpha, alpha1 = (CT)(1 - o->alpha);              \
    const CT eps = (CT)o->eps, wd = (CT)o->weight_decay, mom = (CT)o->momentum;              \
    const bool use_mom = o->momentum > 0, centered = o->centered;                            \
    FOR_CHUNKS(n, {                                                                          \
      for (int64_t i = lo; i < hi; i++) {                                                    \
        CT pi = LD_##ID(p[i]), gi = LD_##ID(g[i]) + wd * pi;                                 \
        CT s = alpha * sq[i] + alpha1 * gi * gi;                                             \
        sq[i] = s;                                                                           \
        if (centered) {                                                                      \
          CT ga = alpha * gavg[i] + alpha1 * gi;                                             \
          gavg[i] = ga;                                                                      \
          s = s - ga * ga;                                                                   \
        }                                                                                    \
        CT q = gi / (CPU_SQRT(s) + eps);                                                     \
        if (use_mom) {                                                                       \
          q = mom * buf[i] + q;                                                              \
          buf[i] = q;                                                                        \
        }                                                                                    \
        p[i] = ST_##ID(pi - lr * q);                                                         \
      }                                                                                      \
    });                                                                                      \
  }
CPU_FLOAT_TYPES(RMSPROP_LOOP)

/* ---------------------------------------------------------------- Adam / AdamW */
/* Loop-invariant factors of one Adam step, in double (each body converts to its CT). */
typedef struct {
  double b1, b1c, b2, b2c, eps, step_size, bc2_sqrt, wd, decay;
  bool amsgrad;
} adam_consts;

/* The per-chunk body is a CPU_CLONES function: its square root and two divisions per element
 * dominate, and the x86-64-v3 clone does them 8 floats at a time instead of 4 (more than twice
 * as fast on the MLP example's first-layer weight, one core). */
#define ADAM_LOOP(ID, T, CT)                                                                  \
  static CPU_CLONES void adam_range_##ID(int64_t lo, int64_t hi, T *restrict p,               \
                                         const T *restrict g, CT *restrict m, CT *restrict v, \
                                         CT *restrict vmax, const adam_consts *k) {           \
    const CT b1 = (CT)k->b1, b1c = (CT)k->b1c, b2 = (CT)k->b2, b2c = (CT)k->b2c;              \
    const CT eps = (CT)k->eps, step_size = (CT)k->step_size, bc2_sqrt = (CT)k->bc2_sqrt;      \
    const CT wd = (CT)k->wd, decay = (CT)k->decay;                                            \
    const bool amsgrad = k->amsgrad;                                                          \
    for (int64_t i = lo; i < hi; i++) {                                                       \
      CT pi = LD_##ID(p[i]) * decay, gi = LD_##ID(g[i]) + wd * LD_##ID(p[i]);                 \
      CT mi = b1 * m[i] + b1c * gi, vi = b2 * v[i] + b2c * gi * gi;                           \
      m[i] = mi;                                                                              \
      v[i] = vi;                                                                              \
      if (amsgrad) {                                                                          \
        vi = vmax[i] > vi ? vmax[i] : vi;                                                     \
        vmax[i] = vi;                                                                         \
      }                                                                                       \
      p[i] = ST_##ID(pi - step_size * (mi / (CPU_SQRT(vi) / bc2_sqrt + eps)));                \
    }                                                                                         \
  }                                                                                           \
  static void adam_##ID(int64_t n, T *restrict p, const T *restrict g, CT *restrict m,        \
                        CT *restrict v, CT *restrict vmax, const dle_adam_opts *o) {          \
    const adam_consts k = {.b1 = o->beta1,                                                    \
                           .b1c = 1 - o->beta1,                                               \
                           .b2 = o->beta2,                                                    \
                           .b2c = 1 - o->beta2,                                               \
                           .eps = o->eps,                                                     \
                           .step_size = o->lr / (1 - pow(o->beta1, (double)o->step)),         \
                           .bc2_sqrt = sqrt(1 - pow(o->beta2, (double)o->step)),              \
                           .wd = o->decoupled ? 0 : o->weight_decay,                          \
                           .decay = o->decoupled ? 1 - o->lr * o->weight_decay : 1,           \
                           .amsgrad = o->amsgrad};                                            \
    FOR_CHUNKS(n, adam_range_##ID(lo, hi, p, g, m, v, vmax, &k););                            \
  }
CPU_FLOAT_TYPES(ADAM_LOOP)

/* ---------------------------------------------------------------- dispatch by param dtype */
/* cpu_<name>_step(params): <name>_<dtype>(args) for the param dtype dt. */
#define STEP_CASE(name, args, ID, T, CT) \
  case DLE_##ID:                         \
    name##_##ID args;                    \
    break;
#define STEP_ENTRY(name, params, args)            \
  static dle_status cpu_##name##_step params {    \
    switch (dt) {                                 \
      CPU_FLOAT_TYPES_WITH(STEP_CASE, name, args) \
      default: break;                             \
    }                                             \
    return DLE_OK;                                \
  }
// clang-format off
STEP_ENTRY(sgd, (int device, dle_dtype dt, int64_t n, void *p, const void *g, void *buf,
                 const dle_sgd_opts *o), (n, p, g, buf, o))
STEP_ENTRY(adagrad, (int device, dle_dtype dt, int64_t n, void *p, const void *g, void *sum,
                     const dle_adagrad_opts *o), (n, p, g, sum, o))
STEP_ENTRY(rmsprop, (int device, dle_dtype dt, int64_t n, void *p, const void *g, void *sq, void *buf,
                     void *gavg, const dle_rmsprop_opts *o), (n, p, g, sq, buf, gavg, o))
STEP_ENTRY(adam, (int device, dle_dtype dt, int64_t n, void *p, const void *g, void *m, void *v,
                  void *vmax, const dle_adam_opts *o), (n, p, g, m, v, vmax, o))
// clang-format on

static const dle_optim_kernels cpu_optim = {cpu_sgd_step, cpu_adagrad_step, cpu_rmsprop_step,
                                            cpu_adam_step};

void cpu_register_optim(dle_backend *b) { b->optim = &cpu_optim; }
