/* sort.c — CPU kernels of the sort family (engine/ops/sort.c): sort, topk, kthvalue, on inputs of
 * any strides and every dtype.
 *
 * One thread handles one line along the dim (lines run in parallel). Its elements become
 * unsigned keys whose ascending order is the wanted one (floats by their bits, NaN above +inf and
 * -0.0 as 0.0; signed integers with the sign bit flipped; all complemented for a descending sort
 * or the largest), each paired with its position. A full sort is an LSD radix sort, 8 bits a
 * pass, skipping the passes in which every key has the same digit: stable, so equal keys keep
 * their order. topk with k at most a sixteenth of the line keeps a max-heap of the k smallest
 * (key, position) pairs seen so far and looks into a block of keys only when the block's minimum
 * beats the heap's top; since later positions are larger, a key equal to the top never enters,
 * which is the stable order's choice. kthvalue, and topk of more, first find the k-th key by an
 * MSD radix selection (each pass keeps the keys of one bucket), then take the keys below it and
 * the right number of those equal to it in position order (and sort those for topk). The values
 * are copied from x at the chosen positions, so NaN payloads and -0.0 come out as they went in. */
#include "backend.h"
#include "cpu_exp.h"
#include "cpu_loop.h"

/* Lines up to this long sort by insertion. */
#define SORT_INSERTION_MAX 32
/* Keys a heap selection looks at as one block. */
#define SORT_BLOCK 64

/* ---- keys: unsigned integers in the wanted order ---- */

static inline uint32_t key_f32(float x) {
  float z = x + 0.0f; /* -0.0 + 0.0 is +0.0 */
  uint32_t u;
  memcpy(&u, &z, sizeof u);
  u = (u >> 31) ? ~u : u | 0x80000000u;
  return x != x ? UINT32_MAX : u;
}
static inline uint64_t key_f64(double x) {
  double z = x + 0.0;
  uint64_t u;
  memcpy(&u, &z, sizeof u);
  u = (u >> 63) ? ~u : u | ((uint64_t)1 << 63);
  return x != x ? UINT64_MAX : u;
}
#define KEY_F32(x)    key_f32(x)
#define KEY_F64(x)    key_f64(x)
#define KEY_F16(x)    key_f32(dle_half_to_float(x))
#define KEY_BF16(x)   key_f32(dle_bfloat_to_float(x))
#define KEY_I32(x)    ((uint32_t)(x) ^ 0x80000000u)
#define KEY_I64(x)    ((uint64_t)(x) ^ ((uint64_t)1 << 63))
#define KEY_U8(x)     ((uint32_t)(x))
#define KEY_BOOL(x)   ((uint32_t)((x) != 0))
#define KEY_I8(x)     ((uint32_t)((int32_t)(x) + 128))
#define KEY_I16(x)    ((uint32_t)((int32_t)(x) + 32768))
#define KEY_U16(x)    ((uint32_t)(x))
#define KEY_U32(x)    ((uint32_t)(x))
#define KEY_U64(x)    ((uint64_t)(x))
#define KEY_F8E4M3(x) key_f32(dle_f8e4m3_to_float(x))
#define KEY_F8E5M2(x) key_f32(dle_f8e5m2_to_float(x))

/* X(ID, T, K): each dtype with its storage type and key type. */
// clang-format off
#define SORT_TYPES(X)                                                                  \
  X(F32, float, uint32_t) X(F64, double, uint64_t) X(F16, uint16_t, uint32_t)          \
  X(BF16, uint16_t, uint32_t) X(I32, int32_t, uint32_t) X(I64, int64_t, uint64_t)      \
  X(U8, uint8_t, uint32_t) X(BOOL, uint8_t, uint32_t) X(I8, int8_t, uint32_t)            \
  X(I16, int16_t, uint32_t) X(U16, uint16_t, uint32_t) X(U32, uint32_t, uint32_t)      \
  X(U64, uint64_t, uint64_t) X(F8E4M3, uint8_t, uint32_t) X(F8E5M2, uint8_t, uint32_t)
// clang-format on

/* ---- ordering (key, position) pairs, per key width ---- */

#define SORT_KEY_FUNCTIONS(KB, K)                                                                    \
  /* stable insertion sort of n pairs */                                                             \
  static void insertion_##KB(K *key, uint32_t *pos, int64_t n) {                                     \
    for (int64_t i = 1; i < n; i++) {                                                                \
      K k = key[i];                                                                                  \
      uint32_t p = pos[i];                                                                           \
      int64_t j = i;                                                                                 \
      for (; j > 0 && key[j - 1] > k; j--) key[j] = key[j - 1], pos[j] = pos[j - 1];                 \
      key[j] = k, pos[j] = p;                                                                        \
    }                                                                                                \
  }                                                                                                  \
  /* stable LSD radix sort of n pairs, with tkey/tpos as room for n more; the result is left in    \
   * key/pos */ \
  static void radix_##KB(K *key, uint32_t *pos, K *tkey, uint32_t *tpos, int64_t n) {                \
    enum { DIGITS = sizeof(K) };                                                                     \
    uint32_t count[DIGITS][256];                                                                     \
    memset(count, 0, sizeof count);                                                                  \
    for (int64_t i = 0; i < n; i++) {                                                                \
      K k = key[i];                                                                                  \
      for (int b = 0; b < DIGITS; b++) count[b][(k >> (8 * b)) & 255]++;                             \
    }                                                                                                \
    K *sk = key, *dk = tkey;                                                                         \
    uint32_t *sp = pos, *dp = tpos;                                                                  \
    for (int b = 0; b < DIGITS; b++) {                                                               \
      uint32_t *c = count[b];                                                                        \
      if (c[(key[0] >> (8 * b)) & 255] == (uint32_t)n) continue; /* one digit: order unchanged */    \
      uint32_t sum = 0;                                                                              \
      for (int v = 0; v < 256; v++) {                                                                \
        uint32_t t = c[v];                                                                           \
        c[v] = sum, sum += t;                                                                        \
      }                                                                                              \
      for (int64_t i = 0; i < n; i++) {                                                              \
        uint32_t at = c[(sk[i] >> (8 * b)) & 255]++;                                                 \
        dk[at] = sk[i], dp[at] = sp[i];                                                              \
      }                                                                                              \
      K *t = sk;                                                                                     \
      sk = dk, dk = t;                                                                               \
      uint32_t *u = sp;                                                                              \
      sp = dp, dp = u;                                                                               \
    }                                                                                                \
    if (sk != key) {                                                                                 \
      memcpy(key, sk, sizeof(K) * (size_t)n);                                                        \
      memcpy(pos, sp, sizeof(uint32_t) * (size_t)n);                                                 \
    }                                                                                                \
  }                                                                                                  \
  static void sort_pairs_##KB(K *key, uint32_t *pos, K *tkey, uint32_t *tpos, int64_t n) {           \
    if (n <= SORT_INSERTION_MAX)                                                                     \
      insertion_##KB(key, pos, n);                                                                   \
    else                                                                                             \
      radix_##KB(key, pos, tkey, tpos, n);                                                           \
  }                                                                                                  \
  /* (a, pa) after (b, pb) in the stable order */                                                    \
  static inline bool after_##KB(K a, uint32_t pa, K b, uint32_t pb) {                                \
    return a > b || (a == b && pa > pb);                                                             \
  }                                                                                                  \
  /* restores the max-heap hk/hp of n pairs below slot i */                                          \
  static void sift_##KB(K *hk, uint32_t *hp, int64_t n, int64_t i) {                                 \
    K k = hk[i];                                                                                     \
    uint32_t p = hp[i];                                                                              \
    for (;;) {                                                                                       \
      int64_t c = 2 * i + 1;                                                                         \
      if (c >= n) break;                                                                             \
      if (c + 1 < n && after_##KB(hk[c + 1], hp[c + 1], hk[c], hp[c])) c++;                          \
      if (!after_##KB(hk[c], hp[c], k, p)) break;                                                    \
      hk[i] = hk[c], hp[i] = hp[c], i = c;                                                           \
    }                                                                                                \
    hk[i] = k, hp[i] = p;                                                                            \
  }                                                                                                  \
  static CPU_CLONES K block_min_##KB(const K *key, int64_t n) {                                      \
    K m = (K)-1;                                                                                     \
    for (int64_t j = 0; j < n; j++) m = key[j] < m ? key[j] : m;                                     \
    return m;                                                                                        \
  }                                                                                                  \
  /* the k (1 <= k <= n) first pairs of the stable order of key[0..n) (positions 0..n-1), in       \
   * that order, into hk/hp */ \
  static void heap_select_##KB(const K *key, int64_t n, int64_t k, K *hk, uint32_t *hp) {            \
    for (int64_t i = 0; i < k; i++) hk[i] = key[i], hp[i] = (uint32_t)i;                             \
    for (int64_t i = k / 2; i-- > 0;) sift_##KB(hk, hp, k, i);                                       \
    for (int64_t i = k; i < n; i += SORT_BLOCK) {                                                    \
      int64_t e = i + SORT_BLOCK < n ? i + SORT_BLOCK : n;                                           \
      if (block_min_##KB(key + i, e - i) >= hk[0]) continue;                                         \
      for (int64_t j = i; j < e; j++)                                                                \
        if (key[j] < hk[0]) hk[0] = key[j], hp[0] = (uint32_t)j, sift_##KB(hk, hp, k, 0);            \
    }                                                                                                \
    for (int64_t end = k - 1; end > 0; end--) {                                                      \
      K tk = hk[0];                                                                                  \
      uint32_t tp = hp[0];                                                                           \
      hk[0] = hk[end], hp[0] = hp[end], hk[end] = tk, hp[end] = tp;                                  \
      sift_##KB(hk, hp, end, 0);                                                                     \
    }                                                                                                \
  }                                                                                                  \
  /* The key at rank r (0-based) of the stable order of key[0..n), and in *ties how many equal    \
   * keys come before it: an MSD radix selection, 8 bits a pass, keeping only the keys of the      \
   * bucket holding rank r (in cand, room for n). */  \
  static K radix_select_##KB(const K *key, int64_t n, int64_t r, K *cand, int64_t *ties) {           \
    uint32_t c[256];                                                                                 \
    const K *src = key;                                                                              \
    K kv = 0;                                                                                        \
    for (int b = (int)sizeof(K) - 1; b >= 0; b--) {                                                  \
      memset(c, 0, sizeof c);                                                                        \
      for (int64_t i = 0; i < n; i++) c[(src[i] >> (8 * b)) & 255]++;                                \
      int v = 0;                                                                                     \
      for (; r >= (int64_t)c[v]; v++) r -= c[v];                                                     \
      kv |= (K)v << (8 * b);                                                                         \
      if (c[v] == (uint32_t)n) continue; /* every key is in that bucket */                           \
      int64_t w = 0;                                                                                 \
      for (int64_t i = 0; i < n; i++)                                                                \
        if ((int)((src[i] >> (8 * b)) & 255) == v) cand[w++] = src[i];                               \
      src = cand, n = w;                                                                             \
    }                                                                                                \
    *ties = r;                                                                                       \
    return kv;                                                                                       \
  }                                                                                                  \
  /* The positions of the k (>= 1) first elements of the stable order of key[0..n), in that       \
   * order (only the k-th when kth): a pointer into pos or tpos. key, tkey, pos, tpos hold n each; \
   * key is overwritten. */  \
  static uint32_t *select_##KB(K *key, uint32_t *pos, K *tkey, uint32_t *tpos, int64_t n,            \
                               int64_t k, bool kth) {                                                \
    if ((k == n && !kth) || n <= SORT_INSERTION_MAX) {                                               \
      for (int64_t i = 0; i < n; i++) pos[i] = (uint32_t)i;                                          \
      sort_pairs_##KB(key, pos, tkey, tpos, n);                                                      \
      return kth ? pos + k - 1 : pos;                                                                \
    }                                                                                                \
    if (!kth && k <= n / 16) {                                                                       \
      heap_select_##KB(key, n, k, tkey, tpos);                                                       \
      return tpos;                                                                                   \
    }                                                                                                \
    int64_t ties = 0, seen = 0, w = 0;                                                               \
    K kv = radix_select_##KB(key, n, k - 1, tkey, &ties);                                            \
    if (kth) {                                                                                       \
      for (int64_t i = 0;; i++)                                                                      \
        if (key[i] == kv && seen++ == ties) {                                                        \
          pos[0] = (uint32_t)i;                                                                      \
          return pos;                                                                                \
        }                                                                                            \
    }                                                                                                \
    /* the keys below kv and the first ties + 1 equal to it, in position order, then sorted */       \
    for (int64_t i = 0; i < n; i++)                                                                  \
      if (key[i] < kv || (key[i] == kv && seen++ <= ties))                                           \
        tkey[w] = key[i], tpos[w++] = (uint32_t)i;                                                   \
    sort_pairs_##KB(tkey, tpos, key, pos, k);                                                        \
    return tpos;                                                                                     \
  }
SORT_KEY_FUNCTIONS(32, uint32_t)
SORT_KEY_FUNCTIONS(64, uint64_t)
#define KEY_BITS_uint32_t 32
#define KEY_BITS_uint64_t 64
#define SELECT(K)         SELECT_(KEY_BITS_##K)
#define SELECT_(KB)       SELECT__(KB)
#define SELECT__(KB)      select_##KB

/* ---- lines ---- */

/* Where the lines are: x's line l starts at x_off(l) and steps sd elements; the outputs are
 * contiguous as x's shape with the dim sized m, so line l = (o, i) (o over the dims before the
 * dim, i over those after, inner of them) starts at o m inner + i and steps inner. */
typedef struct {
  int ndim, d;
  const int64_t *sizes, *strides;
  int64_t n, m, inner, lines, sd;
} sort_geom;

static int64_t x_off(const sort_geom *g, int64_t l) {
  int64_t off = 0;
  for (int j = g->ndim - 1; j >= 0; j--) {
    if (j == g->d) continue;
    off += (l % g->sizes[j]) * g->strides[j];
    l /= g->sizes[j];
  }
  return off;
}

/* Whether the keys are complemented: a descending sort, the largest of topk. */
static bool reversed(dle_op op, const dle_attrs *a) {
  return (op == DLE_OP_SORT && a->nints > 1 && a->ints[1]) ||
         (op == DLE_OP_TOPK && (a->nints <= 2 || a->ints[2]));
}

#define SORT_KERNEL(ID, T, K)                                                           \
  static dle_status sort_##ID(dle_op op, const sort_geom *g, const dle_attrs *a, T *vo, \
                              int64_t *io, const T *x) {                                \
    int64_t k = op == DLE_OP_SORT ? g->n : a->ints[1];                                  \
    K flip = reversed(op, a) ? (K)-1 : 0;                                               \
    int64_t n = g->n, base = a->index_base;                                             \
    bool failed = false;                                                                \
    _Pragma("omp parallel if (g->lines > 1 && cpu_parallel(g->lines * n))")             \
    {                                                                                   \
      size_t bytes = (sizeof(K) + sizeof(uint32_t)) * 2 * (size_t)n;                    \
      char *buf = dle_cpu_alloc(bytes ? bytes : 1);                                     \
      if (!buf) {                                                                       \
        _Pragma("omp atomic write")                                                     \
        failed = true;                                                                  \
      } else {                                                                          \
        K *key = (K *)buf, *tkey = key + n;                                             \
        uint32_t *pos = (uint32_t *)(tkey + n), *tpos = pos + n;                        \
        _Pragma("omp for schedule(dynamic, 1)")                                         \
        for (int64_t l = 0; l < g->lines; l++) {                                        \
          const T *xl = x + x_off(g, l);                                                \
          int64_t sd = g->sd, at = (l / g->inner) * g->m * g->inner + l % g->inner;     \
          for (int64_t j = 0; j < n; j++) key[j] = KEY_##ID(xl[j * sd]) ^ flip;         \
          uint32_t *p = SELECT(K)(key, pos, tkey, tpos, n, k, op == DLE_OP_KTHVALUE);   \
          for (int64_t j = 0; j < g->m; j++, at += g->inner) {                          \
            vo[at] = xl[(int64_t)p[j] * sd];                                            \
            io[at] = (int64_t)p[j] + base;                                              \
          }                                                                             \
        }                                                                               \
        dle_cpu_free(buf, bytes ? bytes : 1);                                           \
      }                                                                                 \
    }                                                                                   \
    return failed ? dle_error("%s: out of memory for lines of %lld elements",           \
                              dle_op_get_info(op)->name, (long long)n)                  \
                  : DLE_OK;                                                             \
  }
SORT_TYPES(SORT_KERNEL)

static DLE_KERNEL(cpu_sort) {
  const dle_tensor *x = ins[0];
  int d = (int)a->ints[0];
  int64_t n = x->sizes[d];
  sort_geom g = {.ndim = x->ndim,
                 .d = d,
                 .sizes = x->sizes,
                 .strides = x->strides,
                 .n = n,
                 .m = op == DLE_OP_SORT   ? n
                      : op == DLE_OP_TOPK ? a->ints[1]
                                          : 1,
                 .inner = 1,
                 .sd = x->strides[d]};
  for (int j = d + 1; j < x->ndim; j++) g.inner *= x->sizes[j];
  g.lines = g.n ? dle_tensor_numel(x) / g.n : 0; /* empty lines: nothing to write */
  if (g.lines == 0 || g.m == 0) return DLE_OK;
  int64_t *io = dle_tensor_data(outs[1]);
#define CASE(ID, T, K) \
  case DLE_##ID: return sort_##ID(op, &g, a, dle_tensor_data(outs[0]), io, dle_tensor_data(x));
  switch (x->dtype) {
    SORT_TYPES(CASE)
    default: break;
  }
#undef CASE
  return dle_error("%s: no CPU kernel for %s", dle_op_get_info(op)->name, dle_dtype_name(x->dtype));
}

void cpu_register_sort(dle_backend *b) {
  b->kernels[DLE_OP_SORT] = cpu_sort;
  b->kernels[DLE_OP_TOPK] = cpu_sort;
  b->kernels[DLE_OP_KTHVALUE] = cpu_sort;
}
