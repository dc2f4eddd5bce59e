/* backend.h — the kernel-facing half of the C interface (engine/dle.h is the public one): the table
 * a device backend fills (the kernel signature and the slots), its registration, what the engine
 * hands a backend library it dlopens, and the helpers only kernels call. The engine and the
 * kernels include it; bindings and programs using dle see dle_backend as an opaque type. */
#ifndef DLE_KERNEL_BACKEND_H
#define DLE_KERNEL_BACKEND_H

#include "../dle.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Elements per block of the fused elementwise executor (dle_fused_run). */
#define DLE_FUSED_BLOCK 1024

/* dle_philox of blocks first..first+n-1 at once. */
void dle_philox_blocks(uint64_t seed, uint64_t first, int64_t n, uint32_t (*out)[4]);

/* A device backend's fused optimizer steps (dle_backend.optim; kernels/cpu/optim.c,
 * kernels/cuda/optim.cu): arguments already checked by the entry points; contiguous data pointers on the memory of device
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

/* A backend's weight-only quantization kernels (dle_backend.quant; kernels/cpu/quant.c), arguments
 * checked by engine/quant.c: contiguous float32 x and y, w rows of cols / block blocks. */
typedef struct dle_quant_kernels {
  void (*quantize)(dle_qtype q, int64_t rows, int64_t cols, const float *x, uint8_t *w);
  void (*dequantize)(dle_qtype q, int64_t rows, int64_t cols, const uint8_t *w, float *y);
  /* y {m, n} = x {m, k} @ W^T, W {n, k} */
  void (*matmul_nt)(dle_qtype q, int64_t m, int64_t n, int64_t k, const float *x, const uint8_t *w,
                    float *y);
  /* y {m, k} = x {m, n} @ W, W {n, k} */
  void (*matmul_nn)(dle_qtype q, int64_t m, int64_t n, int64_t k, const float *x, const uint8_t *w,
                    float *y);
} dle_quant_kernels;

/* One kernel signature for every op: outputs already allocated with the right shape/dtype,
 * inputs already promoted to the dtype the op computes in. */
typedef dle_status (*dle_kernel_fn)(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins,
                                    int nin, const dle_attrs *attrs);
/* Defines a kernel: `static DLE_KERNEL(cpu_foo) { ... }` has exactly dle_kernel_fn's parameters,
 * named as above but attrs as `a`. A kernel may leave any of them unused (the build passes
 * -Wno-unused-parameter). */
#define DLE_KERNEL(name)                                                               \
  dle_status name(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins, int nin, \
                  const dle_attrs *a)

struct dle_backend {
  const char *name;
  void *(*alloc)(size_t nbytes, int device_index); /* NULL on failure */
  void (*free)(void *ptr, size_t nbytes, int device_index);
  /* Raw byte copies between this device and the host. */
  dle_status (*to_host)(void *dst, const void *src, size_t nbytes, int device_index);
  dle_status (*from_host)(void *dst, const void *src, size_t nbytes, int device_index);
  dle_kernel_fn kernels[DLE_NUM_OPS]; /* NULL: op unsupported here */
  /* Optional, the kernel of dle_op_call's small-op lane: a unary or binary op whose output and
   * inputs are all contiguous, of one float dtype and one shape. Returns false to decline (too
   * many elements to stay on one thread, no such loop): the op then goes through kernels[op]. */
  bool (*small_elementwise)(dle_op op, dle_tensor *out, dle_tensor *const *ins, int nin,
                            const dle_attrs *attrs);
  /* The fused optimizer steps on this device (optim.h); NULL: none (the optimizers' entry points
   * then say so). */
  const struct dle_optim_kernels *optim;
  /* Weight-only quantization kernels (dle_quantize, dle_qmatmul); NULL: none on this device. */
  const struct dle_quant_kernels *quant;
  /* Optional, the fused elementwise executor (dle_fused_run). The CPU one walks the output in
   * blocks of DLE_FUSED_BLOCK elements on OpenMP threads; in a block each input is read once
   * (contiguous ones in place, broadcast or strided ones gathered), the instructions run over
   * block-sized temporaries that stay in cache, and the result is written once.
   * fused_supports: whether it runs op; fused_run: the run into out (allocated, contiguous, at
   * least one element) after the engine checked the program, the dtypes and the broadcast. NULL: not supported on this device (dle_fused_supports says false). */
  bool (*fused_supports)(dle_op op);
  dle_status (*fused_run)(dle_tensor *out, dle_tensor *const *ins, int nin,
                          const dle_fused_instr *prog, int n);
  /* Optional, dle_fused_reduce: the program over the element space sizes (ndim dims), its result
   * reduced into out (allocated: 0-dim, or sizes without the last dim when last_dim). */
  dle_status (*fused_reduce)(dle_tensor *out, dle_tensor *const *ins, int nin,
                             const dle_fused_instr *prog, int n, int ndim, const int64_t *sizes,
                             dle_op reduce, bool last_dim);
  /* Optional, dle_fp8_scaled_matmul after the engine's checks: out (allocated float32 {M, N},
   * contiguous) = (a * a_scale) @ (bt^T * b_scale) with a {M, K} and bt {N, K} (b transposed)
   * contiguous float8. NULL: the engine computes it by upcasting. */
  dle_status (*fp8_scaled_matmul)(dle_tensor *out, const dle_tensor *a, const dle_tensor *bt,
                                  const dle_tensor *a_scale, const dle_tensor *b_scale);
};

/* What the engine hands a backend library it dlopens. The core module is loaded RTLD_LOCAL, so
 * such a library cannot link against the engine's symbols: the few engine functions it needs come
 * through this table. A library built against another ops.def (num_ops) or ABI refuses to load. */
#define DLE_BACKEND_ABI 5
typedef struct dle_backend_host {
  int abi;                                   /* DLE_BACKEND_ABI */
  int num_ops;                               /* DLE_NUM_OPS */
  const dle_op_info *op_table;               /* dle_op_table: op names for messages */
  dle_status (*error)(const char *fmt, ...); /* dle_error: sets the thread's message */
} dle_backend_host;
/* The CUDA library (libdle_cuda.so) exports two functions taking it:
 *   const dle_backend *dle_cuda_backend_init(const dle_backend_host *, char *why, size_t n);
 *       the backend, or NULL with the reason in why (no device, ABI mismatch);
 *   const dle_backend *dle_cuda_backend_table(const dle_backend_host *);
 *       the same kernel table built without touching a device (NULL on ABI mismatch), which tells
 *       on any machine which ops have CUDA kernels. */

/* The reduced dims of a reduction kernel's call: red[d] for each of the ndim dims of its input,
 * from attrs.ints (the reduced dims, 0-based; none means all). Returns the position in ints of a
 * dim out of range (the kernel's error), or -1. */
static inline int dle_reduced_dims(const dle_attrs *a, int ndim, bool *red) {
  for (int d = 0; d < ndim; d++) red[d] = a->nints == 0;
  for (int i = 0; i < a->nints; i++) {
    if (a->ints[i] < 0 || a->ints[i] >= ndim) return i;
    red[a->ints[i]] = true;
  }
  return -1;
}

/* Registered by backends themselves (the CPU one by the engine at start-up, via dle_cpu_backend). */
void dle_backend_register(dle_device_type type, const dle_backend *b);

#ifdef __cplusplus
}
#endif
#endif
