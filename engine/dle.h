/* dle.h — the public C interface of the dle engine (no Lua in here).
 *
 * A tensor is a view (sizes, element strides, offset, dtype) onto a refcounted storage.
 * Every operation goes through one front door, dle_op_call(), driven by the op table in
 * ops.def; the named helpers below (dle_add, dle_sum, ...) are thin wrappers over it.
 *
 *   dle_tensor *a = NULL, *b = NULL, *c = NULL;
 *   int64_t sizes[2] = {2, 3};
 *   if (dle_full(&a, 2, sizes, 1.0, DLE_F32) || dle_arange(&b, 0, 3, 1, DLE_F32) ||
 *       dle_add(&c, a, b))                        // broadcasts {2,3} + {3}
 *     fprintf(stderr, "%s\n", dle_last_error());
 *   dle_tensor_release(a); dle_tensor_release(b); dle_tensor_release(c);
 *
 * Conventions
 * - Functions return DLE_OK (0) or DLE_ERR; on error dle_last_error() holds a message that
 *   names the function, the argument and the shapes/dtypes, and nothing was leaked.
 * - Outputs come first. An output pointer that holds NULL receives a new tensor (refcount 1,
 *   owned by the caller); one that holds a tensor is written into (in-place and out= forms).
 * - Dims and indices are 0-based here; the Lua bindings convert from 1-based. Index tensors
 *   (gather, index_select, one_hot, max's indices) are int64 and are read/written relative
 *   to attrs.index_base, so the bindings pass 1-based index tensors without copying them.
 * - Threads: kernels use OpenMP for large sizes; errors are per-thread (thread-local).
 */
#ifndef DLE_H
#define DLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DLE_MAX_DIMS 8
/* Most outputs an op has (sdpa_backward: dq, dk, dv). */
#define DLE_MAX_OUTS 3
/* "every dim" for squeeze and argmax/argmin (any valid dim, -1 included, means that dim). */
#define DLE_ALL_DIMS (-1 - DLE_MAX_DIMS)
#define DLE_OK 0
#define DLE_ERR (-1)
typedef int dle_status;

/* ---------------------------------------------------------------- errors */
const char *dle_last_error(void);
/* Sets the thread's error message (printf-style) and returns DLE_ERR. */
dle_status dle_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Turns a possibly negative 0-based dim (-1 = last) into 0..ndim-1, or an error naming fn.
 * `extra` is 1 where one past the end is valid (unsqueeze). */
dle_status dle_wrap_dim(const char *fn, int dim, int ndim, int extra, int *out);
/* Writes "{2,3,4}" into buf (for messages); returns buf. */
char *dle_shape_str(char *buf, size_t n, int ndim, const int64_t *sizes);

/* ---------------------------------------------------------------- dtypes */
/* Order matters: dle_promote and the kernels' dispatch tables follow it. */
typedef enum {
  DLE_F32, DLE_F64, DLE_F16, DLE_BF16, DLE_I32, DLE_I64, DLE_U8, DLE_BOOL, DLE_NUM_DTYPES
} dle_dtype;

#define DLE_DEFAULT_FLOAT DLE_F32

const char *dle_dtype_name(dle_dtype t);
/* Accepts the API names ("float32", "int64", ...) and common aliases ("float", "double",
 * "half", "long", "int", "byte"). */
dle_status dle_dtype_parse(const char *name, dle_dtype *out);
/* Inline: every kernel call asks, several times. The tables are in dtype.c. */
extern const uint8_t dle_dtype_sizes[DLE_NUM_DTYPES];
extern const bool dle_dtype_floats[DLE_NUM_DTYPES];
static inline size_t dle_dtype_size(dle_dtype t) { return dle_dtype_sizes[t]; }
static inline bool dle_dtype_is_float(dle_dtype t) { return dle_dtype_floats[t]; }
/* The dtype two tensor operands compute in:
 *   bool < uint8 < int32 < int64 < (any float);  among floats the wider wins:
 *   float16 < float32 < float64, bfloat16 < float32, and float16 with bfloat16 gives float32. */
dle_dtype dle_promote(dle_dtype a, dle_dtype b);

/* Scalar conversions (round to nearest even; NaN stays NaN, overflow gives inf). */
uint16_t dle_f32_to_f16(float f);
float dle_f16_to_f32(uint16_t h);
uint16_t dle_f32_to_bf16(float f);
float dle_bf16_to_f32(uint16_t b);

/* ---------------------------------------------------------------- devices */
typedef enum { DLE_CPU, DLE_CUDA, DLE_NUM_DEVICE_TYPES } dle_device_type;
typedef struct { dle_device_type type; int index; } dle_device;
static const dle_device DLE_DEVICE_CPU = {DLE_CPU, 0};
/* "cpu", "cuda", "cuda:1" */
dle_status dle_device_parse(const char *name, dle_device *out);
/* Writes "cpu" / "cuda:0" into buf. */
const char *dle_device_str(char *buf, size_t n, dle_device d);

/* ---------------------------------------------------------------- storage and tensors */
typedef struct dle_storage {
  void *data;
  size_t nbytes;
  int refcount;
  dle_device device;
  uint32_t version;   /* bumped by every write through any view; autograd checks it */
  bool grad_views;    /* a view of it is part of an autograd graph: in-place writes are refused */
  /* Borrowed memory (mmap, foreign buffers): called instead of the allocator's free. */
  void (*release)(void *ctx, void *data, size_t nbytes);
  void *release_ctx;
} dle_storage;

struct dle_node; /* autograd record (autograd.c) */

typedef struct dle_tensor {
  dle_storage *storage;
  int64_t offset;                 /* in elements */
  int ndim;
  dle_dtype dtype;
  int64_t sizes[DLE_MAX_DIMS];
  int64_t strides[DLE_MAX_DIMS];  /* in elements; 0 for broadcast dims */
  int refcount;
  /* autograd slots */
  bool requires_grad;
  struct dle_tensor *grad;        /* accumulated gradient of a leaf */
  struct dle_node *grad_fn;       /* node that produced this tensor, NULL for leaves */
  int output_nr;                  /* which output of grad_fn this tensor is */
  bool is_view;                   /* made by a view op: shares a base tensor's storage */
  struct dle_tensor *tangent;     /* forward-mode tangent (dle_jvp), NULL when none */
  void *user;                     /* free for the embedding language (e.g. a Lua ref) */
} dle_tensor;

/* A new tensor with fresh (uninitialised) contiguous storage. */
dle_status dle_tensor_empty(dle_tensor **out, int ndim, const int64_t *sizes, dle_dtype dtype,
                            dle_device device);
/* A tensor over caller-owned memory; release(ctx, data, nbytes) is called when the storage dies
 * (NULL: never freed). Strides NULL means contiguous. */
dle_status dle_tensor_from_memory(dle_tensor **out, void *data, size_t nbytes, int ndim,
                                  const int64_t *sizes, const int64_t *strides, dle_dtype dtype,
                                  void (*release)(void *, void *, size_t), void *release_ctx);
/* A new view header onto src's storage with the given geometry (checked against the storage). */
dle_status dle_tensor_as_strided(dle_tensor **out, const dle_tensor *src, int ndim,
                                 const int64_t *sizes, const int64_t *strides, int64_t offset);
void dle_tensor_retain(dle_tensor *t);
void dle_tensor_release(dle_tensor *t);

int64_t dle_tensor_numel(const dle_tensor *t);
bool dle_tensor_is_contiguous(const dle_tensor *t);
static inline dle_device dle_tensor_device(const dle_tensor *t) { return t->storage->device; }
/* Address of the first element of the view. */
static inline void *dle_tensor_data(const dle_tensor *t) {
  return (char *)t->storage->data + t->offset * (int64_t)dle_dtype_size(t->dtype);
}
bool dle_same_storage(const dle_tensor *a, const dle_tensor *b);
/* Element at a 0-based multi-index, as double (reads any dtype; CPU only). */
double dle_tensor_get(const dle_tensor *t, const int64_t *index);
/* Writes v (converted to t's dtype) at a 0-based multi-index; bumps the version. */
void dle_tensor_set(dle_tensor *t, const int64_t *index, double v);
/* "{2,3}" of t into buf. */
char *dle_tensor_shape_str(char *buf, size_t n, const dle_tensor *t);
/* Marks a write to t's storage (in-place ops call it). */
static inline void dle_tensor_bump_version(dle_tensor *t) { t->storage->version++; }

/* Bytes currently held by live CPU storages created by dle, and the peak; the bindings use
 * the growth to pace Lua's garbage collector. */
size_t dle_memory_allocated(void);
size_t dle_memory_peak(void);
/* Starts a new peak from the bytes live now (to measure one phase's high-water mark). */
void dle_memory_reset_peak(void);
/* Freed CPU blocks are cached per size class for reuse (at most 1 GiB unless changed). */
size_t dle_memory_cached(void);
void dle_empty_cache(void);
void dle_set_cache_limit(size_t nbytes);

/* ---------------------------------------------------------------- the op table */
typedef enum {
  DLE_KIND_CREATE, DLE_KIND_VIEW, DLE_KIND_COPY, DLE_KIND_UNARY, DLE_KIND_BINARY,
  DLE_KIND_COMPARE, DLE_KIND_WHERE, DLE_KIND_REDUCE, DLE_KIND_SOFTMAX, DLE_KIND_MATMUL,
  DLE_KIND_INDEX, DLE_KIND_CONV, DLE_KIND_NORM, DLE_KIND_NN, DLE_NUM_KINDS
} dle_op_kind;

enum { DLE_DIFF = 1, DLE_FLOATOUT = 2 };

typedef enum {
#define DLE_OP(id, name, nin, nout, kind, flags) DLE_OP_##id,
#include "ops.def"
  DLE_NUM_OPS
} dle_op;

#define DLE_MAX_ATTR_INTS (DLE_MAX_DIMS + 2)

/* Everything an op needs besides its tensor inputs. Zero-initialise, then set what the op
 * reads (its line in ops.def says which). */
typedef struct dle_attrs {
  int64_t ints[DLE_MAX_ATTR_INTS]; /* dims, sizes, start/length, diagonal, class count... */
  int nints;
  double f[2];                     /* fill value, exponent, clamp bounds, correction */
  dle_dtype dtype;                 /* result dtype for create/copy ops */
  bool has_dtype;                  /* dtype above is set */
  bool keepdim;
  int64_t index_base;              /* 0 in C, 1 from Lua: see the conventions above */
  struct dle_generator *generator; /* random ops; NULL = default generator */
} dle_attrs;

typedef struct dle_op_info {
  const char *name;
  int nin, nout;       /* nin -1: variadic */
  dle_op_kind kind;
  unsigned flags;
} dle_op_info;

/* The op table, indexed by op id (ops.c); dle_op_get_info is the range-checked access. */
extern const dle_op_info dle_op_table[DLE_NUM_OPS];
static inline const dle_op_info *dle_op_get_info(dle_op op) {
  return (unsigned)op < DLE_NUM_OPS ? &dle_op_table[op] : NULL;
}
/* Looks an op up by its name in ops.def; DLE_NUM_OPS when unknown. */
dle_op dle_op_by_name(const char *name);

/* The front door: checks arity and devices, infers the output shape and dtype, allocates
 * outputs whose slot holds NULL, dispatches to the device's kernel.  outs has info->nout slots. */
dle_status dle_op_call(dle_op op, dle_tensor **outs, dle_tensor *const *ins, int nin,
                       const dle_attrs *attrs);

/* ---------------------------------------------------------------- fused elementwise */
/* The fused elementwise executor of dle.rewrite.rules.fusion (engine/fused.c; the CPU backend's
 * fused_run slot, kernels/cpu/cpu_fused.c).
 *
 * A chain of elementwise ops over tensors that broadcast to one shape runs as a small program:
 * registers 0..nin-1 hold the inputs, instruction k writes register nin + k from registers a (and
 * b for binary ops), and the last register is the result. The executor walks the output in
 * blocks of DLE_FUSED_BLOCK (1024) elements on OpenMP threads; in a block, each input is read once
 * (contiguous ones in place, broadcast or strided ones gathered), the instructions run over
 * block-sized temporaries that stay in cache, and the result is written once. So a chain reads
 * its inputs and writes its output once instead of once per op.
 *
 *   dle_fused_instr prog[2] = {{DLE_OP_MUL, 0, 1}, {DLE_OP_RELU, 2, 0}};   // relu(x * y)
 *   dle_fused_run(&out, ins, 2, prog, 2, x->ndim, x->sizes, DLE_F32);
 *
 * Not an op of ops.def: nothing records it for autograd (the graph runs the unfused ops instead
 * when a gradient is needed, see lua/dle/rewrite/rules/fusion.lua). The profiler counts each run
 * as one call of its "fused_elementwise" entry: one FLOP per instruction and element, the bytes of
 * the inputs and the output once.
 * float32 and float64, every input of the result's dtype, on a device whose backend has fused_run (the CPU). Ops: neg abs relu exp log expm1
 * log1p sqrt rsqrt reciprocal sin cos tanh sigmoid gelu silu pow_scalar clamp (f0, f1 as the
 * op's attrs.f), add sub mul div maximum minimum pow. Expressions as cpu_elementwise.c's. */
#define DLE_FUSED_BLOCK 1024
#define DLE_FUSED_MAX_REGS 64

typedef struct {
  int op;        /* DLE_OP_* */
  int a, b;      /* source registers (b unused by unary ops) */
  double f0, f1; /* pow_scalar's exponent, clamp's bounds (NAN: unbounded) */
} dle_fused_instr;

/* Whether the executor runs op. */
bool dle_fused_supports(dle_op op);
/* *out (NULL on entry) receives a new contiguous tensor of the given shape and dtype. */
dle_status dle_fused_run(dle_tensor **out, dle_tensor *const *ins, int nin, const dle_fused_instr *prog,
                         int n, int ndim, const int64_t *sizes, dle_dtype dt);

/* ---------------------------------------------------------------- backends */
/* One kernel signature for every op: outputs already allocated with the right shape/dtype,
 * inputs already promoted to the dtype the op computes in. */
typedef dle_status (*dle_kernel_fn)(dle_op op, dle_tensor *const *outs, dle_tensor *const *ins,
                                    int nin, const dle_attrs *attrs);

typedef struct dle_backend {
  const char *name;
  void *(*alloc)(size_t nbytes, int device_index);  /* NULL on failure */
  void (*free)(void *ptr, size_t nbytes, int device_index);
  /* Raw byte copies between this device and the host. */
  dle_status (*to_host)(void *dst, const void *src, size_t nbytes, int device_index);
  dle_status (*from_host)(void *dst, const void *src, size_t nbytes, int device_index);
  dle_kernel_fn kernels[DLE_NUM_OPS];                 /* NULL: op unsupported here */
  /* Optional, the kernel of dle_op_call's small-op lane: a unary or binary op whose output and
   * inputs are all contiguous, of one float dtype and one shape. Returns false to decline (too
   * many elements to stay on one thread, no such loop): the op then goes through kernels[op]. */
  bool (*small_elementwise)(dle_op op, dle_tensor *out, dle_tensor *const *ins, int nin,
                            const dle_attrs *attrs);
  /* The fused optimizer steps on this device (optim.h); NULL: none (the optimizers' entry points
   * then say so). */
  const struct dle_optim_kernels *optim;
  /* Optional, the fused elementwise executor (dle_fused_run): whether it runs op, and the run into
   * out (allocated, contiguous, at least one element) after the engine checked the program, the
   * dtypes and the broadcast. NULL: not supported on this device (dle_fused_supports says false). */
  bool (*fused_supports)(dle_op op);
  dle_status (*fused_run)(dle_tensor *out, dle_tensor *const *ins, int nin, const dle_fused_instr *prog,
                          int n);
} dle_backend;

/* What the engine hands a backend library it dlopens. The core module is loaded RTLD_LOCAL, so
 * such a library cannot link against the engine's symbols: the few engine functions it needs come
 * through this table. A library built against another ops.def (num_ops) or ABI refuses to load. */
#define DLE_BACKEND_ABI 3
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

/* The backend of a device type: NULL when absent. The CPU one is always there; "cuda" is
 * loaded on first use from a separate shared library when it was built. */
const dle_backend *dle_backend_get(dle_device_type type);
/* Why the last dle_backend_get(DLE_CUDA) returned NULL (no library / no device). */
const char *dle_backend_unavailable_reason(dle_device_type type);
/* The kernel table of a device type's backend library, built without a device (see above): which
 * ops it implements. NULL, with the reason in *why, when the library cannot be loaded. */
const dle_backend *dle_backend_library_table(dle_device_type type, const char **why);
/* Registered by backends themselves. */
void dle_backend_register(dle_device_type type, const dle_backend *b);
const dle_backend *dle_cpu_backend(void);

/* ---------------------------------------------------------------- autodiff */
/* Reverse mode records a node per op when grad mode is on and some float input requires grad;
 * forward mode propagates tangents when some input carries one (dle_set_tangent). Both use the
 * per-op rules registered next to each op (engine/autograd.h). */
struct dle_node;
bool dle_grad_enabled(void);
bool dle_set_grad_enabled(bool on);              /* per thread; returns the previous mode */
void dle_node_retain(struct dle_node *n);
void dle_node_release(struct dle_node *n);
const char *dle_node_name(const struct dle_node *n); /* the op's name, or a custom op's name */
/* Marks a leaf as requiring grad (float dtypes only; a non-leaf cannot be switched off). */
dle_status dle_set_requires_grad(dle_tensor *t, bool on);
/* A view sharing t's storage, cut from the graph. */
dle_status dle_detach(dle_tensor **out, dle_tensor *t);
/* Backpropagates from roots (root_grads[i] NULL: ones, allowed for one-element roots). With
 * ninputs == 0 gradients accumulate into the .grad of the leaves; otherwise input_grads[j]
 * receives the gradient of inputs[j] (NULL when it does not depend on the roots) and no .grad
 * changes. The graph is freed unless retain_graph; create_graph records the backward pass
 * itself so the gradients can be differentiated again. */
dle_status dle_backward(int nroots, dle_tensor *const *roots, dle_tensor *const *root_grads,
                        int ninputs, dle_tensor *const *inputs, dle_tensor **input_grads,
                        bool retain_graph, bool create_graph);
/* Custom differentiable ops (e.g. written in Lua): records a node whose reverse rule is vjp.
 * vjp(ctx, gout, gin): gout has nout entries (NULL: zero), gin receives nin (NULL: zero). */
typedef dle_status (*dle_custom_vjp)(void *ctx, dle_tensor *const *gout, int nout, dle_tensor **gin,
                                     int nin);
dle_status dle_autograd_record_custom(const char *name, dle_tensor **outs, int nout,
                                      dle_tensor *const *ins, int nin, dle_custom_vjp vjp,
                                      void *ctx, void (*free_ctx)(void *ctx));
/* Forward mode: attach (retained) or clear (NULL) the tangent carried by t. */
dle_status dle_set_tangent(dle_tensor *t, dle_tensor *tangent);
/* t.grad = g (retained; NULL clears it), g of t's shape. A g that holds t through its history
 * (p.grad = p.grad + wd * p with p requiring grad) is stored detached: the values alone. */
dle_status dle_set_grad(dle_tensor *t, dle_tensor *g);

/* ---------------------------------------------------------------- threads and time */
#define DLE_MAX_THREADS 1024
void dle_set_num_threads(int n);   /* kernels and BLAS; n < 1 means all cores; at most DLE_MAX_THREADS */
int dle_get_num_threads(void);
double dle_time(void);             /* monotonic seconds */

/* ---------------------------------------------------------------- random numbers */
/* Philox4x32-10 counter-based generator: (seed, offset) is the whole state, so streams are
 * identical for any thread count and trivially saved. */
typedef struct dle_generator {
  uint64_t seed;
  uint64_t offset;  /* number of 128-bit blocks consumed */
} dle_generator;
#define DLE_DEFAULT_SEED UINT64_C(67280421310721) /* unseeded runs are reproducible */
dle_generator *dle_default_generator(void);
void dle_generator_seed(dle_generator *g, uint64_t seed);
/* Four 32-bit random words for counter (g->seed, block). */
void dle_philox(uint64_t seed, uint64_t block, uint32_t out[4]);
/* Philox with the full 128-bit counter (lo, hi); dle_philox is hi = 0. */
void dle_philox_counter(uint64_t seed, uint64_t lo, uint64_t hi, uint32_t out[4]);
/* Blocks first..first+n-1 at once (what the kernels use). */
void dle_philox_blocks(uint64_t seed, uint64_t first, int64_t n, uint32_t (*out)[4]);
/* Random permutation of base..base+n-1 (int64), Fisher-Yates; advances g (NULL = default). */
dle_status dle_randperm(dle_tensor **out, int64_t n, int64_t base, dle_generator *g);

/* ---------------------------------------------------------------- creation */
dle_status dle_full(dle_tensor **out, int ndim, const int64_t *sizes, double value, dle_dtype dt);
/* dle_full on device dev, filled there (no copy from the host): gradient rules make their ones and
 * zeros with it on the device of the tensor they stand for. */
dle_status dle_full_on(dle_tensor **out, int ndim, const int64_t *sizes, double value, dle_dtype dt,
                       dle_device dev);
dle_status dle_zeros(dle_tensor **out, int ndim, const int64_t *sizes, dle_dtype dt);
dle_status dle_arange(dle_tensor **out, double start, double stop, double step, dle_dtype dt);
dle_status dle_linspace(dle_tensor **out, double a, double b, int64_t n, dle_dtype dt);
dle_status dle_eye(dle_tensor **out, int64_t n, int64_t m, dle_dtype dt);
/* Uniform [0,1), standard normal, integers in [lo, hi). g NULL = default generator. */
dle_status dle_rand(dle_tensor **out, int ndim, const int64_t *sizes, dle_dtype dt, dle_generator *g);
dle_status dle_randn(dle_tensor **out, int ndim, const int64_t *sizes, dle_dtype dt, dle_generator *g);
dle_status dle_randint(dle_tensor **out, int64_t lo, int64_t hi, int ndim, const int64_t *sizes,
                       dle_dtype dt, dle_generator *g);

/* ---------------------------------------------------------------- views (metadata only) */
/* sizes may hold one -1 (inferred). Errors if the strides cannot express it: use reshape. */
dle_status dle_view(dle_tensor **out, dle_tensor *t, int ndim, const int64_t *sizes);
/* A view when possible, otherwise a contiguous copy. */
dle_status dle_reshape(dle_tensor **out, dle_tensor *t, int ndim, const int64_t *sizes);
dle_status dle_permute(dle_tensor **out, dle_tensor *t, const int *dims);
dle_status dle_transpose(dle_tensor **out, dle_tensor *t, int d1, int d2);
dle_status dle_narrow(dle_tensor **out, dle_tensor *t, int dim, int64_t start, int64_t length);
dle_status dle_select(dle_tensor **out, dle_tensor *t, int dim, int64_t index);
/* sizes may hold -1 (keep); new leading dims allowed. */
dle_status dle_expand(dle_tensor **out, dle_tensor *t, int ndim, const int64_t *sizes);
dle_status dle_squeeze(dle_tensor **out, dle_tensor *t, int dim); /* DLE_ALL_DIMS: every size-1 dim */
dle_status dle_unsqueeze(dle_tensor **out, dle_tensor *t, int dim);
dle_status dle_flatten(dle_tensor **out, dle_tensor *t, int d1, int d2);
/* t itself (retained) when contiguous, else a contiguous copy. */
dle_status dle_contiguous(dle_tensor **out, dle_tensor *t);

/* ---------------------------------------------------------------- copies */
dle_status dle_clone(dle_tensor **out, dle_tensor *t);
/* Writes src (broadcast to dst's shape, converted to dst's dtype) into dst. */
dle_status dle_copy_(dle_tensor *dst, dle_tensor *src);
dle_status dle_fill_(dle_tensor *t, double value);
dle_status dle_to_dtype(dle_tensor **out, dle_tensor *t, dle_dtype dt); /* t retained if same */
dle_status dle_to_device(dle_tensor **out, dle_tensor *t, dle_device d);

/* ---------------------------------------------------------------- elementwise */
dle_status dle_unary(dle_op op, dle_tensor **out, dle_tensor *x);
dle_status dle_binary(dle_op op, dle_tensor **out, dle_tensor *a, dle_tensor *b);
/* Binary op with a scalar on one side (scalar_first: s op t). The scalar becomes a 0-dim tensor
 * of t's dtype (or the default float when t is integer and s is not whole). */
dle_status dle_binary_scalar(dle_op op, dle_tensor **out, dle_tensor *t, double s, bool scalar_first);
dle_status dle_pow_scalar(dle_tensor **out, dle_tensor *x, double p);
/* NAN for lo or hi means unbounded on that side. */
dle_status dle_clamp(dle_tensor **out, dle_tensor *x, double lo, double hi);
dle_status dle_where(dle_tensor **out, dle_tensor *cond, dle_tensor *a, dle_tensor *b);
/* A 0-dim tensor holding v. */
dle_status dle_scalar_tensor(dle_tensor **out, double v, dle_dtype dt);

/* Broadcast two shapes (NumPy rules); error names `fn` and both shapes. */
dle_status dle_broadcast_shapes(const char *fn, int na, const int64_t *a, int nb, const int64_t *b,
                                int *nout, int64_t *out);

/* ---------------------------------------------------------------- reductions */
/* dims: ndims 0-based dims (ndims 0: all).  var/std use `correction` (1 = unbiased). */
dle_status dle_reduce(dle_op op, dle_tensor **out, dle_tensor *x, int ndims, const int *dims,
                      bool keepdim, double correction);
/* max/min along one dim: values and int64 indices (relative to index_base). */
dle_status dle_max_dim(dle_op op, dle_tensor **values, dle_tensor **indices, dle_tensor *x,
                       int dim, bool keepdim, int64_t index_base);
/* argmax/argmin along one dim (DLE_ALL_DIMS: over the flattened tensor, 0-dim result). */
dle_status dle_arg_reduce(dle_op op, dle_tensor **out, dle_tensor *x, int dim, bool keepdim,
                          int64_t index_base);
dle_status dle_softmax(dle_op op, dle_tensor **out, dle_tensor *x, int dim);

/* ---------------------------------------------------------------- linear algebra */
/* PyTorch matmul semantics: 1-D, 2-D, and batched with broadcast batch dims. */
dle_status dle_matmul(dle_tensor **out, dle_tensor *a, dle_tensor *b);
dle_status dle_mm(dle_tensor **out, dle_tensor *a, dle_tensor *b);   /* both 2-D */
dle_status dle_bmm(dle_tensor **out, dle_tensor *a, dle_tensor *b);  /* both 3-D, same batch */

/* ---------------------------------------------------------------- joining and indexing */
dle_status dle_cat(dle_tensor **out, dle_tensor *const *ts, int n, int dim);
dle_status dle_stack(dle_tensor **out, dle_tensor *const *ts, int n, int dim);
dle_status dle_gather(dle_tensor **out, dle_tensor *src, int dim, dle_tensor *index, int64_t base);
dle_status dle_scatter_add(dle_tensor **out, dle_tensor *self, int dim, dle_tensor *index,
                           dle_tensor *src, int64_t base);
dle_status dle_index_select(dle_tensor **out, dle_tensor *src, int dim, dle_tensor *index, int64_t base);
dle_status dle_index_add(dle_tensor **out, dle_tensor *self, int dim, dle_tensor *index,
                         dle_tensor *src, int64_t base);
dle_status dle_masked_fill(dle_tensor **out, dle_tensor *src, dle_tensor *mask, double value);
dle_status dle_tril(dle_tensor **out, dle_tensor *t, int64_t k);
dle_status dle_triu(dle_tensor **out, dle_tensor *t, int64_t k);
/* n < 0: the number of classes is the largest class + 1 (relative to base). */
dle_status dle_one_hot(dle_tensor **out, dle_tensor *classes, int64_t n, int64_t base);

#ifdef __cplusplus
}
#endif
#endif
