/* optim.h — fused optimizer steps: each updates a parameter and its optimizer state in place
 * in one pass over memory (llm.c style), with no autograd recording.
 *
 *   dle_adam_opts o = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .step = 1};
 *   if (dle_adam_step(param, grad, exp_avg, exp_avg_sq, NULL, &o)) puts(dle_last_error());
 *
 * Contract shared by every step:
 * - param is float32, float64, float16 or bfloat16 and contiguous; grad has param's shape and
 *   dtype and is contiguous; state tensors have param's shape, are contiguous and hold the
 *   compute type: float64 for float64 params, float32 otherwise (low-precision params keep
 *   float32 state, so the moments do not lose their small updates).
 * - Every tensor is on one device (the CPU, or one whose backend has fused steps: CUDA), distinct
 *   storages (no aliasing), and neither grad nor any state tensor requires grad. Violations give an error naming the function and the shapes/dtypes;
 *   nothing was written then.
 * - On success the storage versions of param and of every written state tensor are bumped.
 * - `step` counts the updates including this one (1 on the first call). */
#ifndef DLE_OPTIM_H
#define DLE_OPTIM_H

#include "dle.h"

#ifdef __cplusplus
extern "C" {
#endif

/* SGD with momentum (PyTorch semantics):
 *   g += weight_decay * p;  buf = first ? g : momentum * buf + (1 - dampening) * g;
 *   g = nesterov ? g + momentum * buf : buf;  p -= lr * g.
 * momentum_buf may be NULL only when momentum == 0. `first` initialises buf from g. */
typedef struct {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, first;
} dle_sgd_opts;
dle_status dle_sgd_step(dle_tensor *param, dle_tensor *grad, dle_tensor *momentum_buf,
                        const dle_sgd_opts *o);

/* Adagrad: g += wd * p;  sum += g * g;  p -= lr / (1 + (step - 1) * lr_decay) * g / (sqrt(sum) + eps). */
typedef struct {
  double lr, lr_decay, weight_decay, eps;
  int64_t step;
} dle_adagrad_opts;
dle_status dle_adagrad_step(dle_tensor *param, dle_tensor *grad, dle_tensor *sum,
                            const dle_adagrad_opts *o);

/* RMSprop: g += wd * p;  sq = alpha * sq + (1 - alpha) * g * g;
 *   centered: gavg = alpha * gavg + (1 - alpha) * g, avg = sqrt(sq - gavg^2) + eps; else sqrt(sq) + eps;
 *   momentum > 0: buf = momentum * buf + g / avg, p -= lr * buf;  else p -= lr * g / avg.
 * momentum_buf is needed when momentum > 0, grad_avg when centered (otherwise NULL). */
typedef struct {
  double lr, alpha, eps, weight_decay, momentum;
  bool centered;
} dle_rmsprop_opts;
dle_status dle_rmsprop_step(dle_tensor *param, dle_tensor *grad, dle_tensor *square_avg,
                            dle_tensor *momentum_buf, dle_tensor *grad_avg,
                            const dle_rmsprop_opts *o);

/* Adam / AdamW: decoupled: p *= 1 - lr * wd; else g += wd * p;
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  amsgrad: vmax = max(vmax, v), v := vmax;
 *   p -= lr / (1 - b1^step) * m / (sqrt(v) / sqrt(1 - b2^step) + eps).
 * max_exp_avg_sq is needed when amsgrad (otherwise NULL). */
typedef struct {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;
  bool decoupled, amsgrad;
} dle_adam_opts;
dle_status dle_adam_step(dle_tensor *param, dle_tensor *grad, dle_tensor *exp_avg,
                         dle_tensor *exp_avg_sq, dle_tensor *max_exp_avg_sq, const dle_adam_opts *o);

/* ---- a device backend's kernels (dle_backend.optim; kernels/cpu/cpu_optim.c, kernels/cuda/optim.cu):
 * arguments already checked by the entry points; contiguous data pointers on the memory of device
 * `device`, n elements, param dtype dt, state in its compute type. */
typedef struct dle_optim_kernels {
  dle_status (*sgd)(int device, dle_dtype dt, int64_t n, void *p, const void *g, void *buf,
                    const dle_sgd_opts *o);
  dle_status (*adagrad)(int device, dle_dtype dt, int64_t n, void *p, const void *g, void *sum,
                        const dle_adagrad_opts *o);
  dle_status (*rmsprop)(int device, dle_dtype dt, int64_t n, void *p, const void *g, void *sq,
                        void *buf, void *gavg, const dle_rmsprop_opts *o);
  dle_status (*adam)(int device, dle_dtype dt, int64_t n, void *p, const void *g, void *m, void *v,
                     void *vmax, const dle_adam_opts *o);
} dle_optim_kernels;

#ifdef __cplusplus
}
#endif
#endif
