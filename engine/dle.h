/* dle.h — the public C interface of the dle engine (no Lua in here).
 *
 * A tensor is a view (sizes, element strides, offset, dtype) onto a refcounted storage.
 * Every operation goes through one front door, dle_op_call(), driven by the op table in
 * ops.def; the named functions below are thin wrappers over it. The ops of ops.def that take
 * only tensors (add, mul, exp, lt, ...) get theirs generated from the table: dle_<name>.
 * (tests/header_example_spec.lua compiles and runs the example below as written.)
 *
 *   dle_tensor *a = NULL, *b = NULL, *c = NULL;
 *   int64_t sizes[2] = {2, 3};
 *   if (dle_full(&a, 2, sizes, 1.0, DLE_F32) || dle_arange(&b, 0, 3, 1, DLE_F32) ||
 *       dle_add(&c, a, b))                        // broadcasts {2,3} + {3}
 *     fprintf(stderr, "%s\n", dle_last_error());
 *   else
 *     printf("c[1][2] = %g\n", dle_tensor_get(c, (int64_t[]){1, 2}));   // 1 + 2 = 3
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
#include <stdio.h> /* FILE, for the tensor file functions */

#ifdef __cplusplus
extern "C" {
#endif

#define DLE_MAX_DIMS 8
/* Most outputs an op has (sdpa_backward: dq, dk, dv). */
#define DLE_MAX_OUTS 3
/* "every dim" for squeeze and argmax/argmin (any valid dim, -1 included, means that dim). */
#define DLE_ALL_DIMS (-1 - DLE_MAX_DIMS)
#define DLE_OK       0
#define DLE_ERR      (-1)
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
  DLE_F32,
  DLE_F64,
  DLE_F16,
  DLE_BF16,
  DLE_I32,
  DLE_I64,
  DLE_U8,
  DLE_BOOL,
  DLE_I8, /* int8 .. complex128 were appended later: stored files name dtypes, not numbers */
  DLE_I16,
  DLE_U16,
  DLE_U32,
  DLE_U64,
  DLE_F8E4M3, /* float8_e4m3fn: storage only, computes in float32 (engine/kernel/fp8.h) */
  DLE_F8E5M2, /* float8_e5m2 */
  DLE_C64,    /* complex64: C99 float _Complex (re, im interleaved) */
  DLE_C128,   /* complex128: double _Complex */
  DLE_NUM_DTYPES
} dle_dtype;

#define DLE_DEFAULT_FLOAT DLE_F32

const char *dle_dtype_name(dle_dtype t);
/* Accepts the API names ("float32", "int64", ...) and common aliases ("float", "double",
 * "half", "long", "int", "short", "byte"). */
dle_status dle_dtype_parse(const char *name, dle_dtype *out);
/* Inline: every kernel call asks, several times. The tables are in dtype.c. */
extern const uint8_t dle_dtype_sizes[DLE_NUM_DTYPES];
extern const bool dle_dtype_floats[DLE_NUM_DTYPES];
static inline size_t dle_dtype_size(dle_dtype t) { return dle_dtype_sizes[t]; }
static inline bool dle_dtype_is_float(dle_dtype t) { return dle_dtype_floats[t]; }
/* Complex dtypes are not "float": kernels of real ops never see them (the front door refuses a
 * complex input to an op without a complex kernel, engine/complex.c). */
static inline bool dle_dtype_is_complex(dle_dtype t) { return t == DLE_C64 || t == DLE_C128; }
/* complex64 <-> float32, complex128 <-> float64; the complex dtype of a real one is complex64
 * but for float64 (PyTorch's rule), and a real dtype's real dtype is itself. */
dle_dtype dle_complex_of(dle_dtype t);
dle_dtype dle_real_of(dle_dtype t);
/* The dtype two tensor operands compute in (PyTorch's rule, NumPy's for the unsigned types
 * PyTorch has no arithmetic for):
 *   bool below every other dtype; an integer with a float gives the float;
 *   two signed or two unsigned integers give the wider one;
 *   signed s with unsigned u: s when it is wider than u, else the signed type twice as wide as u
 *   (uint8+int8 -> int16, uint16+int16 -> int32, uint32+int32 -> int64), and uint64 with any
 *   signed integer gives float64 (as NumPy);
 *   among floats the wider wins: float8 < float16 < float32 < float64, float8 < bfloat16 <
 *   float32; float16 with bfloat16, and float8_e4m3fn with float8_e5m2, give float32;
 *   a real with a complex gives the complex dtype of the wider precision (float64 with complex64
 *   gives complex128), as in PyTorch. */
dle_dtype dle_promote(dle_dtype a, dle_dtype b);

/* Scalar conversions (round to nearest even; NaN stays NaN, overflow gives inf). */
uint16_t dle_f32_to_f16(float f);
float dle_f16_to_f32(uint16_t h);
uint16_t dle_f32_to_bf16(float f);
float dle_bf16_to_f32(uint16_t b);
/* float8: decoding is exact; encoding rounds to nearest even and saturates at +-448 (e4m3fn) and
 * +-57344 (e5m2), infinities included; NaN stays NaN. */
uint8_t dle_f32_to_f8e4m3(float f);
float dle_f8e4m3_to_f32(uint8_t c);
uint8_t dle_f32_to_f8e5m2(float f);
float dle_f8e5m2_to_f32(uint8_t c);

/* ---------------------------------------------------------------- devices */
typedef enum { DLE_CPU, DLE_CUDA, DLE_NUM_DEVICE_TYPES } dle_device_type;
typedef struct {
  dle_device_type type;
  int index;
} dle_device;
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
  uint32_t version; /* bumped by every write through any view; autograd checks it */
  bool grad_views;  /* a view of it is part of an autograd graph: in-place writes are refused */
  /* Borrowed memory (mmap, foreign buffers): called instead of the allocator's free. */
  void (*release)(void *ctx, void *data, size_t nbytes);
  void *release_ctx;
} dle_storage;

struct dle_node; /* autograd record (autograd.c) */

typedef struct dle_tensor {
  dle_storage *storage;
  int64_t offset; /* in elements */
  int ndim;
  dle_dtype dtype;
  int64_t sizes[DLE_MAX_DIMS];
  int64_t strides[DLE_MAX_DIMS]; /* in elements; 0 for broadcast dims */
  int refcount;
  /* autograd slots */
  bool requires_grad;
  struct dle_tensor *grad;    /* accumulated gradient of a leaf */
  struct dle_node *grad_fn;   /* node that produced this tensor, NULL for leaves */
  int output_nr;              /* which output of grad_fn this tensor is */
  bool is_view;               /* made by a view op: shares a base tensor's storage */
  struct dle_tensor *tangent; /* forward-mode tangent (dle_jvp), NULL when none */
  void *user;                 /* free for the embedding language (e.g. a Lua ref) */
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
/* Element at a 0-based multi-index, as double (reads any dtype, a complex one's real part; CPU
 * only). */
double dle_tensor_get(const dle_tensor *t, const int64_t *index);
/* Element of any dtype as real and imaginary parts (im = 0 for a real dtype; CPU only). */
void dle_tensor_get_complex(const dle_tensor *t, const int64_t *index, double *re, double *im);
/* Writes v (converted to t's dtype; imaginary part 0) at a 0-based multi-index; bumps the version. */
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
/* A cap on the bytes live CPU storages may hold (0, the default: none). An allocation that would
 * go over it fails (after the cache is returned to the system), and the tensor that asked for it
 * reports the shape, the limit and the bytes in use. */
void dle_set_memory_limit(size_t nbytes);
size_t dle_memory_limit(void);

/* ---------------------------------------------------------------- the op table */
/* The kinds of ops (ops/families.def: DLE_KIND lines): ops of one kind share a shape rule. */
typedef enum {
#define DLE_KIND(ID, name, front) DLE_KIND_##ID,
#include "ops/families.def"
  DLE_NUM_KINDS
} dle_op_kind;
/* A kind's name ("unary", "nn", ...), NULL outside 0..DLE_NUM_KINDS-1. */
const char *dle_op_kind_name(dle_op_kind kind);

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
  double f[2];     /* fill value, exponent, clamp bounds, correction */
  dle_dtype dtype; /* result dtype for create/copy ops */
  bool has_dtype;  /* dtype above is set */
  bool keepdim;
  int64_t index_base;              /* 0 in C, 1 from Lua: see the conventions above */
  struct dle_generator *generator; /* random ops; NULL = default generator */
} dle_attrs;

typedef struct dle_op_info {
  const char *name;
  int nin, nout; /* nin -1: variadic */
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
/* The fused elementwise executor (engine/fused.c; docs/c_api.md): registers 0..nin-1 hold the
 * inputs, instruction k writes register nin + k from registers a (and b), the last register is the
 * result. Not an op: nothing records it for autograd. float32 and float64, every input of the
 * result's dtype, on a device whose backend has fused_run (the CPU). */
#define DLE_FUSED_MAX_REGS 64

typedef struct {
  int op;        /* DLE_OP_* */
  int a, b;      /* source registers (b unused by unary ops) */
  double f0, f1; /* pow_scalar's exponent, clamp's bounds (NAN: unbounded) */
} dle_fused_instr;

/* Whether the executor runs op. */
bool dle_fused_supports(dle_op op);
/* *out (NULL on entry) receives a new contiguous tensor of the given shape and dtype. */
dle_status dle_fused_run(dle_tensor **out, dle_tensor *const *ins, int nin,
                         const dle_fused_instr *prog, int n, int ndim, const int64_t *sizes,
                         dle_dtype dt);
/* The same program with its result reduced by `reduce` (DLE_OP_SUM, MEAN, AMAX or AMIN; NaN
 * propagates through amax/amin) over every element (*out 0-dim) or over the last dim (*out has the
 * other dims); sums accumulate in double. The program's result must not be empty. */
dle_status dle_fused_reduce(dle_tensor **out, dle_tensor *const *ins, int nin,
                            const dle_fused_instr *prog, int n, int ndim, const int64_t *sizes,
                            dle_dtype dt, dle_op reduce, bool last_dim);

/* ---------------------------------------------------------------- backends */
/* A device type's kernel table. What a backend fills in, its registration and the kernels' own
 * helpers are for backends only: engine/kernel/backend.h. */
typedef struct dle_backend dle_backend;
/* The backend of a device type: NULL when absent. The CPU one is always there; "cuda" is
 * loaded on first use from a separate shared library when it was built. */
const dle_backend *dle_backend_get(dle_device_type type);
/* Why the last dle_backend_get(DLE_CUDA) returned NULL (no library / no device). */
const char *dle_backend_unavailable_reason(dle_device_type type);
/* The kernel table of a device type's backend library, built without a device (for CUDA: which
 * ops the library implements, on any machine). NULL, with the reason in *why, when the library
 * cannot be loaded. */
const dle_backend *dle_backend_library_table(dle_device_type type, const char **why);
/* Whether b has a kernel for op. */
bool dle_backend_has_kernel(const dle_backend *b, dle_op op);

/* ---------------------------------------------------------------- autodiff */
struct dle_node;
bool dle_grad_enabled(void);
bool dle_set_grad_enabled(bool on); /* per thread; returns the previous mode */
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
/* Whether op has a reverse (vjp) and a forward (jvp) gradient rule. */
void dle_op_grad_rules(dle_op op, bool *has_vjp, bool *has_jvp);
/* Forward mode: attach (retained) or clear (NULL) the tangent carried by t. */
dle_status dle_set_tangent(dle_tensor *t, dle_tensor *tangent);
/* t.grad = g (retained; NULL clears it), g of t's shape. A g that holds t through its history
 * (p.grad = p.grad + wd * p with p requiring grad) is stored detached: the values alone. */
dle_status dle_set_grad(dle_tensor *t, dle_tensor *g);

/* ---------------------------------------------------------------- threads and time */
#define DLE_MAX_THREADS 1024
/* Kernels and BLAS; n < 1 means all cores; at most DLE_MAX_THREADS. */
void dle_set_num_threads(int n);
int dle_get_num_threads(void);
double dle_time(void); /* monotonic seconds */
/* Thresholds where a kernel switches algorithm, for tests that must reach both sides on small
 * inputs (results agree either way). Setting returns the old value; value < 0 restores the default.
 * DLE_TUNE_SPIN_POOL_POLL_US: how long the quantized products' workers poll for the next product
 * before sleeping (kernels/cpu/cpu_spin_pool.h); 0 runs those products on OpenMP instead.
 * DLE_TUNE_CONV1D_DIRECT: 0 sends float32 conv1d to the gemm path instead of the direct AVX-512
 * kernel (kernels/cpu/cpu_conv1d_direct.c), so tests can compare the two. */
typedef enum {
  DLE_TUNE_WINOGRAD_MIN_TILES,
  DLE_TUNE_SPIN_POOL_POLL_US,
  DLE_TUNE_CONV1D_DIRECT,
  DLE_NUM_TUNINGS
} dle_tuning;
int64_t dle_tuning_get(dle_tuning knob);
int64_t dle_tuning_set(dle_tuning knob, int64_t value);

/* ---------------------------------------------------------------- random numbers */
/* Philox4x32-10 counter-based generator: (seed, offset) is the whole state, so streams are
 * identical for any thread count and trivially saved. */
typedef struct dle_generator {
  uint64_t seed;
  uint64_t offset; /* number of 128-bit blocks consumed */
} dle_generator;
#define DLE_DEFAULT_SEED UINT64_C(67280421310721) /* unseeded runs are reproducible */
dle_generator *dle_default_generator(void);
void dle_generator_seed(dle_generator *g, uint64_t seed);
/* Four 32-bit random words for counter (g->seed, block). */
void dle_philox(uint64_t seed, uint64_t block, uint32_t out[4]);
/* Philox with the full 128-bit counter (lo, hi); dle_philox is hi = 0. */
void dle_philox_counter(uint64_t seed, uint64_t lo, uint64_t hi, uint32_t out[4]);
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
dle_status dle_rand(dle_tensor **out, int ndim, const int64_t *sizes, dle_dtype dt,
                    dle_generator *g);
dle_status dle_randn(dle_tensor **out, int ndim, const int64_t *sizes, dle_dtype dt,
                     dle_generator *g);
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
/* The elements t[..., i, i + offset] of dims dim1, dim2 (0-based) as a new last dim (a view). */
dle_status dle_diagonal(dle_tensor **out, dle_tensor *t, int64_t offset, int dim1, int dim2);
dle_status dle_squeeze(dle_tensor **out, dle_tensor *t, int dim); /* DLE_ALL_DIMS: all size-1 */
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
/* The named entry points of ops.def's DLE_OP_PLAIN ops (engine/ops/entry.c): dle_<name>(&out, x)
 * for a unary op, dle_<name>(&out, a, b) for a binary or comparison op (dle_add, dle_exp, dle_lt,
 * ...); each is dle_op_call of its op with no attrs. */
#define DLE_OP(id, name, nin, nout, kind, flags)
#define DLE_OP_PLAIN(id, name, nin, nout, kind, flags) DLE_ENTRY_DECL_##nin(name)
#define DLE_ENTRY_DECL_1(name)                         dle_status dle_##name(dle_tensor **out, dle_tensor *x);
#define DLE_ENTRY_DECL_2(name) \
  dle_status dle_##name(dle_tensor **out, dle_tensor *a, dle_tensor *b);
#include "ops.def"
#undef DLE_ENTRY_DECL_1
#undef DLE_ENTRY_DECL_2
/* Binary op with a scalar on one side (scalar_first: s op t). The scalar becomes a 0-dim tensor
 * of t's dtype (or the default float when t is integer and s is not whole). */
dle_status dle_binary_scalar(dle_op op, dle_tensor **out, dle_tensor *t, double s,
                             bool scalar_first);
dle_status dle_pow_scalar(dle_tensor **out, dle_tensor *x, double p);
/* NAN for lo or hi means unbounded on that side. */
dle_status dle_clamp(dle_tensor **out, dle_tensor *x, double lo, double hi);
/* nan, posinf and neginf replace NaN, +inf and -inf; NAN for posinf (neginf) means the largest
 * (lowest) finite value of x's dtype, as in PyTorch. Integer tensors are returned unchanged. */
dle_status dle_nan_to_num(dle_tensor **out, dle_tensor *x, double nan, double posinf,
                          double neginf);
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
dle_status dle_max_dim(dle_op op, dle_tensor **values, dle_tensor **indices, dle_tensor *x, int dim,
                       bool keepdim, int64_t index_base);
/* argmax/argmin along one dim (DLE_ALL_DIMS: over the flattened tensor, 0-dim result). */
dle_status dle_arg_reduce(dle_op op, dle_tensor **out, dle_tensor *x, int dim, bool keepdim,
                          int64_t index_base);
dle_status dle_softmax(dle_op op, dle_tensor **out, dle_tensor *x, int dim);
/* A scan op along dim (engine/ops/scan.c), from the end of the dim when reverse; cummax and
 * cummin also give int64 indices (+ index_base), the others take indices NULL. */
dle_status dle_scan(dle_op op, dle_tensor **out, dle_tensor **indices, dle_tensor *x, int dim,
                    bool reverse, int64_t index_base);

/* ---------------------------------------------------------------- rearranging copies (flip, roll, pad) */
/* engine/ops/arrange.c: each is one copy of any dtype into a new contiguous tensor. dims 0-based
 * (negative wraps). */
typedef enum {
  DLE_PAD_CONSTANT,
  DLE_PAD_REFLECT,
  DLE_PAD_REPLICATE,
  DLE_PAD_CIRCULAR
} dle_pad_mode;
/* x with the order of its elements reversed along each of the ndims dims */
dle_status dle_flip(dle_tensor **out, dle_tensor *x, int ndims, const int *dims);
/* x shifted by shifts[k] places along dims[k] (the end wrapping round to the start) */
dle_status dle_roll(dle_tensor **out, dle_tensor *x, int ndims, const int *dims,
                    const int64_t *shifts);
/* x padded on its last npads / 2 dims (at most 4), pads in PyTorch's order: the last dim's left
 * and right first; mode constant fills with value (negative pads crop), the others take x's
 * elements (reflect: pads below the dim's size; replicate, circular: a non-empty dim). */
dle_status dle_pad(dle_tensor **out, dle_tensor *x, int npads, const int64_t *pads,
                   dle_pad_mode mode, double value);
/* A tensor of one dim more than g, zero but for g's last dim on the diagonal at offset of dims
 * d1, d2 (0-based in the result, negative wrapping) of sizes n1, n2 (torch.diag_embed when both
 * are len + |offset|; diagonal's gradient). A composition of ops, differentiable. */
dle_status dle_diag_embed(dle_tensor **out, dle_tensor *g, int64_t offset, int d1, int d2,
                          int64_t n1, int64_t n2);
/* ---------------------------------------------------------------- linear algebra */
/* PyTorch matmul semantics: 1-D, 2-D, and batched with broadcast batch dims. */
dle_status dle_matmul(dle_tensor **out, dle_tensor *a, dle_tensor *b);
dle_status dle_mm(dle_tensor **out, dle_tensor *a, dle_tensor *b);  /* both 2-D */
dle_status dle_bmm(dle_tensor **out, dle_tensor *a, dle_tensor *b); /* both 3-D, same batch */

/* ---------------------------------------------------------------- joining and indexing */
dle_status dle_cat(dle_tensor **out, dle_tensor *const *ts, int n, int dim);
dle_status dle_stack(dle_tensor **out, dle_tensor *const *ts, int n, int dim);
dle_status dle_gather(dle_tensor **out, dle_tensor *src, int dim, dle_tensor *index, int64_t base);
dle_status dle_scatter_add(dle_tensor **out, dle_tensor *self, int dim, dle_tensor *index,
                           dle_tensor *src, int64_t base);
dle_status dle_index_select(dle_tensor **out, dle_tensor *src, int dim, dle_tensor *index,
                            int64_t base);
dle_status dle_index_add(dle_tensor **out, dle_tensor *self, int dim, dle_tensor *index,
                         dle_tensor *src, int64_t base);
dle_status dle_masked_fill(dle_tensor **out, dle_tensor *src, dle_tensor *mask, double value);
dle_status dle_tril(dle_tensor **out, dle_tensor *t, int64_t k);
dle_status dle_triu(dle_tensor **out, dle_tensor *t, int64_t k);
/* n < 0: the number of classes is the largest class + 1 (relative to base). */
dle_status dle_one_hot(dle_tensor **out, dle_tensor *classes, int64_t n, int64_t base);
/* scatter(self, dim, index, src): src (index's shape) written into a copy of self (or *out, which
 * may be self) at index along dim; scatter_reduce combines instead (PyTorch's reduce modes; without
 * include_self the scattered positions start from the first element scattered there). */
typedef enum {
  DLE_SCATTER_SUM = 1,
  DLE_SCATTER_PROD,
  DLE_SCATTER_MEAN,
  DLE_SCATTER_AMAX,
  DLE_SCATTER_AMIN
} dle_scatter_reduction;
dle_status dle_scatter(dle_tensor **out, dle_tensor *self, int dim, dle_tensor *index,
                       dle_tensor *src, int64_t base);
dle_status dle_scatter_reduce(dle_tensor **out, dle_tensor *self, int dim, dle_tensor *index,
                              dle_tensor *src, dle_scatter_reduction r, bool include_self,
                              int64_t base);

/* ---------------------------------------------------------------- selection (engine/ops/select.c) */
/* Results sized by the data: positions of the nonzero elements ({count, ndim}, + base), the
 * elements of x where mask is true (broadcast together; 1-D), self with its masked elements taken
 * in order from source. */
dle_status dle_nonzero(dle_tensor **out, dle_tensor *x, int64_t base);
dle_status dle_masked_select(dle_tensor **out, dle_tensor *x, dle_tensor *mask);
dle_status dle_masked_scatter(dle_tensor **out, dle_tensor *self, dle_tensor *mask,
                              dle_tensor *source);
/* The distinct values of x (sorted; consecutive: of each run, in order), the index of each
 * element's value (x's shape, + base) and each value's count; inverse and counts may be NULL. */
dle_status dle_unique(dle_tensor **values, dle_tensor **inverse, dle_tensor **counts, dle_tensor *x,
                      bool consecutive, int64_t base);
/* How often each value 0..n-1 occurs in the 1-D integer x (summing weights when given), n the
 * larger of max(x) + 1 and minlength. */
dle_status dle_bincount(dle_tensor **out, dle_tensor *x, dle_tensor *weights, int64_t minlength);
/* Where values would go in the last dim of sorted (1-D, or the same leading dims as values):
 * before equal elements, or after them when right; + base. */
dle_status dle_searchsorted(dle_tensor **out, dle_tensor *sorted, dle_tensor *values, bool right,
                            int64_t base);
/* The most frequent value of each line along dim (the smallest among ties) and its last position
 * (+ base). */
dle_status dle_mode(dle_tensor **values, dle_tensor **indices, dle_tensor *x, int dim, bool keepdim,
                    int64_t base);

/* ---------------------------------------------------------------- optimizer steps */
/* Fused optimizer steps: each updates a parameter and its state in place in one pass, with no
 * autograd recording. Contract shared by every step:
 * - param is float32, float64, float16 or bfloat16 and contiguous; grad has param's shape and
 *   dtype and is contiguous; state tensors have param's shape, are contiguous and hold the
 *   compute type: float64 for float64 params, float32 otherwise (low-precision params keep
 *   float32 state, so the moments do not lose their small updates).
 * - Every tensor is on one device (the CPU, or one whose backend has fused steps: CUDA), distinct
 *   storages (no aliasing), and neither grad nor any state tensor requires grad. Violations give
 *   an error naming the function and the shapes/dtypes; nothing was written then.
 * - On success the storage versions of param and of every written state tensor are bumped.
 * - `step` counts the updates including this one (1 on the first call). */
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
                         dle_tensor *exp_avg_sq, dle_tensor *max_exp_avg_sq,
                         const dle_adam_opts *o);

/* ---------------------------------------------------------------- weight-only quantization */
/* GGUF's block formats (ggml's block_q8_0, block_q4_0, block_q4_K, byte for byte). A quantized
 * matrix {rows, cols} is a contiguous uint8 tensor {rows, cols / block * block_bytes}: each row is
 * its blocks in order along cols. Only the CPU computes with them (engine/quant.c). */
typedef enum { DLE_Q8_0, DLE_Q4_0, DLE_Q4_K, DLE_NUM_QTYPES } dle_qtype;
/* "q8_0", "q4_0", "q4_k"; and back (false for an unknown name). */
const char *dle_qtype_name(dle_qtype q);
bool dle_qtype_parse(const char *name, dle_qtype *q);
/* Values per block (32, 32, 256) and bytes per block (34, 18, 144). */
int64_t dle_qtype_block(dle_qtype q);
int64_t dle_qtype_block_bytes(dle_qtype q);
/* Quantizes the rows of x {rows, cols} (float32/float64/float16/bfloat16, any strides; cols a
 * multiple of the block) with ggml's reference quantizer: out is uint8 {rows, row bytes}. */
dle_status dle_quantize(dle_tensor **out, dle_tensor *x, dle_qtype q);
/* The float32 {rows, cols} a quantized matrix w (uint8 {rows, row bytes}) stands for. */
dle_status dle_dequantize(dle_tensor **out, dle_tensor *w, dle_qtype q, int64_t cols);
/* Products with the quantized matrix W {N, K} (w as above, cols = K), x float32 {M, *}:
 * transposed: out {M, N} = x {M, K} @ W^T (a linear layer); else out {M, K} = x {M, N} @ W (the
 * gradient of the former with respect to x). Blocks are expanded inside the dot products; no
 * autograd recording (dle.quant's Lua layer adds the gradient with respect to x). */
dle_status dle_qmatmul(dle_tensor **out, dle_tensor *x, dle_tensor *w, dle_qtype q, int64_t cols,
                       bool transposed);

/* ---------------------------------------------------------------- float8 matmul (engine/fp8.c) */
/* out {M, N} = (a * a_scale) @ (b * b_scale) in dtype out_dt (torch._scaled_mm): a {M, K} and
 * b {K, N} float8_e4m3fn/float8_e5m2 (any strides), a_scale and b_scale 0-d float32 tensors, all on
 * one device; out_dt a float dtype other than float8. The CPU upcasts to float32 and multiplies
 * with sgemm; CUDA goes through cuBLASLt's fp8 path. No gradient: an input that requires grad is
 * an error, as is anything else off this contract (naming dle.fp8.scaled_matmul and the shapes and
 * dtypes). */
dle_status dle_fp8_scaled_matmul(dle_tensor **out, dle_tensor *a, dle_tensor *b,
                                 dle_tensor *a_scale, dle_tensor *b_scale, dle_dtype out_dt);

/* the neural-network ops: convolution, pooling, normalization, resampling, cross-entropy,
 * embedding, dropout, attention, the fused losses, recurrent cells and CTC */
#include "dle_nn.h"

/* ---------------------------------------------------------------- mixed precision (autocast) */
/* A per-thread autocast dtype and the policy the front door applies while it is on to calls from
 * outside the engine, as PyTorch's autocast (engine/autocast.c; the policy: docs/c_api.md,
 * docs/mixed_precision.md). The casts are recorded copy ops; ops given an output are left alone. */
/* Turns this thread's autocast on in dtype dt (DLE_F16 or DLE_BF16), or off (on false: dt is
 * still checked and kept as the dtype a later dle_autocast_set_enabled(true) uses). Any other
 * dtype is an error naming autocast and the dtype; the state is then unchanged. */
dle_status dle_autocast_set(bool on, dle_dtype dt);
bool dle_autocast_enabled(void);
/* The autocast dtype (bfloat16 until set, as PyTorch's CPU autocast), also while off. */
dle_dtype dle_autocast_dtype(void);
/* Switches autocast off or back on without changing its dtype; returns the previous state. For
 * passes that must run in the dtypes forward recorded (dle_backward). */
bool dle_autocast_set_enabled(bool on);

/* The mode a region changes, for dle_autocast_exit to put back. */
typedef struct {
  bool on;
  dle_dtype dtype;
  bool cache;
} dle_autocast_mode;

/* Enters a region: autocast on in dt (checked as dle_autocast_set; on an error nothing changes),
 * its float32 parameters' casts cached when cache is true. *prev gets the mode to restore. */
dle_status dle_autocast_enter(dle_dtype dt, bool cache, dle_autocast_mode *prev);
/* Leaves the region entered with prev: its mode comes back; leaving the outermost region empties
 * the cache. Called however the region ends (an error included). */
void dle_autocast_exit(const dle_autocast_mode *prev);

/* What the policy does to op's inputs. */
typedef enum { DLE_AUTOCAST_KEEP, DLE_AUTOCAST_LOWER, DLE_AUTOCAST_FLOAT32 } dle_autocast_rule;
dle_autocast_rule dle_autocast_rule_of(dle_op op);
/* *out = t as rule r wants it under this thread's autocast dtype (t itself, retained, when left
 * alone), through the cache when t qualifies. For ops that apply the policy themselves (einsum). */
dle_status dle_autocast_cast(dle_tensor **out, dle_tensor *t, dle_autocast_rule r);

/* ---------------------------------------------------------------- profiler and FLOP counts */
/* The per-thread op-level profiler behind dle.profile and dle.flops (engine/profile.c; what is
 * counted and how: docs/c_api.md). Every dle_op_call (forward and backward), fused optimizer step
 * and fused elementwise program adds a call, its FLOPs, bytes moved and (timed) its self time to
 * its entry: the ops of ops.def (index = op id), then the entries below. */
typedef enum { DLE_PROF_OFF, DLE_PROF_COUNT, DLE_PROF_TIMED } dle_profile_mode;

/* Entries after the ops: the fused optimizer steps (optim.h) and the fused elementwise programs of
 * dle.compile (fused.h), which are not ops. */
enum {
  DLE_PROF_SGD_STEP = DLE_NUM_OPS,
  DLE_PROF_ADAGRAD_STEP,
  DLE_PROF_RMSPROP_STEP,
  DLE_PROF_ADAM_STEP,
  DLE_PROF_ADAMW_STEP,
  DLE_PROF_FUSED_ELEMENTWISE,
  DLE_PROF_NUM_ENTRIES
};

typedef struct {
  int64_t calls, flops, bytes;
  double seconds;
} dle_profile_entry;

/* Switches the calling thread's profiler: COUNT counts calls, FLOPs and bytes; TIMED also reads
 * the clock around each call. Turning it on from OFF zeroes the counters; changing between COUNT
 * and TIMED keeps them. Errors only when out of memory. */
dle_status dle_profile_set_mode(dle_profile_mode mode);
dle_profile_mode dle_profile_get_mode(void);
/* The counters, DLE_PROF_NUM_ENTRIES of them (all zero when the profiler never ran). */
const dle_profile_entry *dle_profile_counters(void);
/* "add", "adam_step"...; NULL outside 0..DLE_PROF_NUM_ENTRIES-1. */
const char *dle_profile_entry_name(int entry);

/* FLOPs of one call of op that produced outs from ins (engine/ops/flops.c). */
int64_t dle_op_flops(dle_op op, dle_tensor *const *outs, int nout, dle_tensor *const *ins, int nin,
                     const dle_attrs *attrs);
/* The name of op's FLOP rule, e.g. "per output element" (*per FLOPs each; per may be NULL),
 * "2*m*n*k per batch (+ m*n added)"; "none" when the op counts 0 FLOPs (creation, views, copies,
 * pure data movement). NULL for an invalid op. */
const char *dle_op_flops_rule(dle_op op, int *per);

/* ---------------------------------------------------------------- tracing (dle.compile) */
/* The per-thread graph tracer behind dle.graph.trace and dle.compile (engine/trace.c; more in
 * docs/c_api.md): while on, every op called from outside the engine (dle_op_call at depth 0) is
 * recorded with its inputs and outputs (retained), attrs and grad mode; what a replay could not
 * repeat marks the trace unsafe with a reason (the first is kept); detach is DLE_TRACE_DETACH. */
/* Pseudo-ops after the op table's ids. GRAD_ACC: backward() delivered ins[1] into the .grad of
 * the leaf ins[0], which is outs[0] after it (dle_grad_accumulate's rule); GRAD_READ: a binding
 * handed out outs[0], the .grad of ins[0], to code running under the trace; SDPA_QKV_GRAD: the
 * gradient of a packed sdpa's qkv in one buffer (dle_sdpa_backward_packed, ins gout, qkv, probs,
 * the forward's attrs). */
enum {
  DLE_TRACE_DETACH = DLE_NUM_OPS,
  DLE_TRACE_GRAD_ACC,
  DLE_TRACE_GRAD_READ,
  DLE_TRACE_SDPA_QKV_GRAD
};

typedef struct {
  int op; /* an op id, or one of the pseudo-ops above */
  dle_attrs attrs;
  int nin, nout;
  dle_tensor **ins;               /* nin, retained */
  dle_tensor *outs[DLE_MAX_OUTS]; /* nout, retained */
  bool given;                     /* outs[0] was the caller's (in place, out=, a random fill) */
  bool fresh;                     /* ...and a never written buffer (version 0): a new tensor */
  bool grad_enabled;              /* grad mode the op ran in */
} dle_trace_record;

typedef struct dle_trace {
  dle_trace_record *rec;
  int n, cap;
  char unsafe[256]; /* why a replay would differ; empty when safe */
} dle_trace;

/* Starts tracing on this thread; an error when a trace is already running here. */
dle_status dle_trace_begin(void);
/* Stops and hands the records over (NULL when no trace was running). */
dle_trace *dle_trace_end(void);
void dle_trace_free(dle_trace *t);
bool dle_trace_active(void);
/* Marks the running trace unsafe (printf-style reason); nothing when no trace runs. */
void dle_trace_note_unsafe(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Records one of the pseudo-ops above (ins, attrs or NULL, one result); nothing when no trace runs. */
void dle_trace_note_record(int op, const dle_attrs *attrs, dle_tensor *const *ins, int nin,
                           dle_tensor *out);
/* Accumulates g into leaf's .grad as backward() does: sets it (a dense copy when g is broadcast or
 * holds the leaf) when there is none, else .grad + g (in place when nothing else sees .grad).
 * g is not consumed. What a traced backward's GRAD_ACC replays. */
dle_status dle_grad_accumulate(dle_tensor *leaf, dle_tensor *g);
/* The gradient of a packed sdpa's qkv input (attrs a: the forward's, ints[1] = 1) as one buffer
 * laid out like qkv, the fused backward kernel writing dq, dk, dv into its three views. */
dle_status dle_sdpa_backward_packed(dle_tensor **out, dle_tensor *gout, dle_tensor *qkv,
                                    dle_tensor *probs, const dle_attrs *a);

#include "dle_files.h"

/* ---------------------------------------------------------------- complex (engine/complex.c) */
/* z complex {..} -> a float view {.., 2} (re, im) of the same storage, as torch.view_as_real. */
dle_status dle_view_as_real(dle_tensor **out, dle_tensor *z);
/* x float32/float64 {.., 2} with last stride 1, even strides and offset -> a complex view {..}. */
dle_status dle_view_as_complex(dle_tensor **out, dle_tensor *x);
/* The complex conjugate, a new tensor (differentiable); a real tensor itself (retained). */
dle_status dle_conj(dle_tensor **out, dle_tensor *z);

/* ---------------------------------------------------------------- fft (engine/ops/fft.c) */
typedef enum { DLE_FFT_C2C, DLE_FFT_C2C_INVERSE, DLE_FFT_R2C, DLE_FFT_C2R } dle_fft_kind;
/* backward: the inverse scales by 1/N; ortho: both by 1/sqrt(N); forward: the forward by 1/N */
typedef enum { DLE_FFT_NORM_BACKWARD, DLE_FFT_NORM_ORTHO, DLE_FFT_NORM_FORWARD } dle_fft_norm;
/* The transform `kind` of x over the ndims distinct 0-based dims (any order; r2c halves and c2r
 * restores the last of them as given). n[i] is the signal length along dims[i] (-1: the input's
 * size, for c2r 2 * (size - 1)): the input is cropped or zero-padded to it (c2r: to n/2+1). A
 * complex input to r2c is an error; a real input to c2c or c2r is made complex first. c2r over
 * several dims is c2c inverse over all but the last, then c2r over it (as PyTorch), so
 * non-Hermitian inputs give PyTorch's values. fn names the caller in errors. */
dle_status dle_fft(dle_tensor **out, dle_tensor *x, dle_fft_kind kind, int ndims, const int *dims,
                   const int64_t *n, dle_fft_norm norm, const char *fn);

#ifdef __cplusplus
}
#endif
#endif
