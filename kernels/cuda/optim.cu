/* optim.cu — the fused optimizer steps on the GPU (dle_backend.optim, engine/optim.h), mirroring
 * kernels/cpu/optim.c: one thread per element updates the parameter (read and written in its
 * storage type) and its state (in the compute type: float64 for float64 params, float32
 * otherwise), with the same formulas and the same loop-invariant factors, computed once in double
 * on the host and rounded to the compute type. engine/optim.c has checked every argument. */
#include "../../engine/dle.h"
#include "common.cuh"

template <dle_dtype D>
using state_t = std::conditional_t<D == DLE_F64, double, float>;

template <dle_dtype D>
__global__ void sgd_kernel(int64_t n, CU_T(D) * p, const CU_T(D) * g, state_t<D> *buf, double lr_,
                           double mom_, double damp1_, double wd_, bool use_mom, bool nesterov,
                           bool first) {
  typedef state_t<D> CT;
  const CT lr = (CT)lr_, mom = (CT)mom_, damp1 = (CT)damp1_, wd = (CT)wd_;
  CU_GRID_LOOP(i, n) {
    CT pi = (CT)cu_load<D>(p[i]), gi = (CT)cu_load<D>(g[i]) + wd * pi;
    if (use_mom) {
      CT b = first ? gi : mom * buf[i] + damp1 * gi;
      buf[i] = b;
      gi = nesterov ? gi + mom * b : b;
    }
    p[i] = cu_store<D>(pi - lr * gi);
  }
}

template <dle_dtype D>
__global__ void adagrad_kernel(int64_t n, CU_T(D) * p, const CU_T(D) * g, state_t<D> *sum,
                               double clr_, double wd_, double eps_) {
  typedef state_t<D> CT;
  const CT clr = (CT)clr_, wd = (CT)wd_, eps = (CT)eps_;
  CU_GRID_LOOP(i, n) {
    CT pi = (CT)cu_load<D>(p[i]), gi = (CT)cu_load<D>(g[i]) + wd * pi;
    CT s = sum[i] + gi * gi;
    sum[i] = s;
    p[i] = cu_store<D>(pi - clr * (gi / (cu_sqrt(s) + eps)));
  }
}

template <dle_dtype D>
__global__ void rmsprop_kernel(int64_t n, CU_T(D) * p, const CU_T(D) * g, state_t<D> *sq,
                               state_t<D> *buf, state_t<D> *gavg, dle_rmsprop_opts o) {
  typedef state_t<D> CT;
  const CT lr = (CT)o.lr, alpha = (CT)o.alpha, alpha1 = (CT)(1 - o.alpha);
  const CT eps = (CT)o.eps, wd = (CT)o.weight_decay, mom = (CT)o.momentum;
  const bool use_mom = o.momentum > 0, centered = o.centered;
  CU_GRID_LOOP(i, n) {
    CT pi = (CT)cu_load<D>(p[i]), gi = (CT)cu_load<D>(g[i]) + wd * pi;
    CT s = alpha * sq[i] + alpha1 * gi * gi;
    sq[i] = s;
    if (centered) {
      CT ga = alpha * gavg[i] + alpha1 * gi;
      gavg[i] = ga;
      s = s - ga * ga;
    }
    CT q = gi / (cu_sqrt(s) + eps);
    if (use_mom) {
      q = mom * buf[i] + q;
      buf[i] = q;
    }
    p[i] = cu_store<D>(pi - lr * q);
  }
}

/* Loop-invariant factors of one Adam step, in double (the CPU's adam_consts). */
typedef struct {
  double b1, b1c, b2, b2c, eps, step_size, bc2_sqrt, wd, decay;
  bool amsgrad;
} adam_consts;

template <dle_dtype D>
__global__ void adam_kernel(int64_t n, CU_T(D) * p, const CU_T(D) * g, state_t<D> *m, state_t<D> *v,
                            state_t<D> *vmax, adam_consts k) {
  typedef state_t<D> CT;
  const CT b1 = (CT)k.b1, b1c = (CT)k.b1c, b2 = (CT)k.b2, b2c = (CT)k.b2c;
  const CT eps = (CT)k.eps, step_size = (CT)k.step_size, bc2_sqrt = (CT)k.bc2_sqrt;
  const CT wd = (CT)k.wd, decay = (CT)k.decay;
  CU_GRID_LOOP(i, n) {
    CT pi = (CT)cu_load<D>(p[i]) * decay, gi = (CT)cu_load<D>(g[i]) + wd * (CT)cu_load<D>(p[i]);
    CT mi = b1 * m[i] + b1c * gi, vi = b2 * v[i] + b2c * gi * gi;
    m[i] = mi;
    v[i] = vi;
    if (k.amsgrad) {
      vi = vmax[i] > vi ? vmax[i] : vi;
      vmax[i] = vi;
    }
    p[i] = cu_store<D>(pi - step_size * (mi / (cu_sqrt(vi) / bc2_sqrt + eps)));
  }
}

/* Runs launch(tag) for the param's float dtype on device `device`. */
template <class F>
static dle_status run(const char *fn, int device, dle_dtype dt, int64_t n, F launch) {
  if (n == 0) return DLE_OK;
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) return cu_fail(fn, "cudaSetDevice", e);
  CU_OK(cu_with_float_dtype(fn, dt, launch));
  CU_LAUNCHED(fn);
  return DLE_OK;
}

#define STATE(D, x) ((state_t<D> *)(x))

static dle_status sgd(int device, dle_dtype dt, int64_t n, void *p, const void *g, void *buf,
                      const dle_sgd_opts *o) {
  return run("sgd_step", device, dt, n, [&](auto tag) -> dle_status {
    constexpr dle_dtype D = decltype(tag)::value;
    sgd_kernel<D><<<cu_blocks(n), CU_THREADS>>>(
        n, (CU_T(D) *)p, (const CU_T(D) *)g, STATE(D, buf), o->lr, o->momentum, 1 - o->dampening,
        o->weight_decay, o->momentum != 0, o->nesterov, o->first);
    return DLE_OK;
  });
}

static dle_status adagrad(int device, dle_dtype dt, int64_t n, void *p, const void *g, void *sum,
                          const dle_adagrad_opts *o) {
  double clr = o->lr / (1 + (double)(o->step - 1) * o->lr_decay);
  return run("adagrad_step", device, dt, n, [&](auto tag) -> dle_status {
    constexpr dle_dtype D = decltype(tag)::value;
    adagrad_kernel<D><<<cu_blocks(n), CU_THREADS>>>(n, (CU_T(D) *)p, (const CU_T(D) *)g,
                                                    STATE(D, sum), clr, o->weight_decay, o->eps);
    return DLE_OK;
  });
}

static dle_status rmsprop(int device, dle_dtype dt, int64_t n, void *p, const void *g, void *sq,
                          void *buf, void *gavg, const dle_rmsprop_opts *o) {
  return run("rmsprop_step", device, dt, n, [&](auto tag) -> dle_status {
    constexpr dle_dtype D = decltype(tag)::value;
    rmsprop_kernel<D><<<cu_blocks(n), CU_THREADS>>>(
        n, (CU_T(D) *)p, (const CU_T(D) *)g, STATE(D, sq), STATE(D, buf), STATE(D, gavg), *o);
    return DLE_OK;
  });
}

static dle_status adam(int device, dle_dtype dt, int64_t n, void *p, const void *g, void *m,
                       void *v, void *vmax, const dle_adam_opts *o) {
  const adam_consts k = {o->beta1,
                         1 - o->beta1,
                         o->beta2,
                         1 - o->beta2,
                         o->eps,
                         o->lr / (1 - pow(o->beta1, (double)o->step)),
                         sqrt(1 - pow(o->beta2, (double)o->step)),
                         o->decoupled ? 0 : o->weight_decay,
                         o->decoupled ? 1 - o->lr * o->weight_decay : 1,
                         o->amsgrad};
  return run(o->decoupled ? "adamw_step" : "adam_step", device, dt, n, [&](auto tag) -> dle_status {
    constexpr dle_dtype D = decltype(tag)::value;
    adam_kernel<D><<<cu_blocks(n), CU_THREADS>>>(n, (CU_T(D) *)p, (const CU_T(D) *)g, STATE(D, m),
                                                 STATE(D, v), STATE(D, vmax), k);
    return DLE_OK;
  });
}

static const dle_optim_kernels kernels = {sgd, adagrad, rmsprop, adam};

void cu_register_optim(dle_backend *b) { b->optim = &kernels; }
