/* rng.c — the Philox4x32-10 counter-based generator (Salmon et al., SC'11, "Parallel random
 * numbers: as easy as 1, 2, 3"), generators as (seed, offset), how many blocks each random op
 * consumes, and randperm (Fisher-Yates), the one random op that is inherently sequential. */
#include "internal.h"

static dle_generator default_gen = {DLE_DEFAULT_SEED, 0};

dle_generator *dle_default_generator(void) { return &default_gen; }

void dle_generator_seed(dle_generator *g, uint64_t seed) {
  g->seed = seed;
  g->offset = 0;
}

/* The round and key-schedule constants of Philox4x32 (Random123's PHILOX_M4x32_* and
 * PHILOX_W32_*): multipliers chosen for avalanche, Weyl increments from the golden ratio and
 * sqrt(3). */
#define PHILOX_M0 UINT32_C(0xD2511F53)
#define PHILOX_M1 UINT32_C(0xCD9E8D57)
#define PHILOX_W0 UINT32_C(0x9E3779B9)
#define PHILOX_W1 UINT32_C(0xBB67AE85)

/* Ten rounds on counter (c0..c3) with key (k0, k1); inline so that the loop over blocks below
 * can overlap the independent multiply chains of successive blocks. */
static inline void philox_rounds(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint64_t seed,
                                 uint32_t out[4]) {
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c0 = n0, c1 = (uint32_t)p1, c2 = n2, c3 = (uint32_t)p0;
    k0 += PHILOX_W0, k1 += PHILOX_W1;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* The full 128-bit-counter form: counter words (lo, hi) little-endian, key = seed (low word first).
 * dle_philox is the hi = 0 case; the known-answer tests need the whole counter. */
void dle_philox_counter(uint64_t seed, uint64_t lo, uint64_t hi, uint32_t out[4]) {
  philox_rounds((uint32_t)lo, (uint32_t)(lo >> 32), (uint32_t)hi, (uint32_t)(hi >> 32), seed, out);
}

void dle_philox(uint64_t seed, uint64_t block, uint32_t out[4]) {
  philox_rounds((uint32_t)block, (uint32_t)(block >> 32), 0, 0, seed, out);
}

/* Blocks first .. first+n-1 at once: the kernels' form (faster per block than calls to
 * dle_philox, which serialise on one block's dependency chain). */
void dle_philox_blocks(uint64_t seed, uint64_t first, int64_t n, uint32_t (*out)[4]) {
  for (int64_t i = 0; i < n; i++) {
    uint64_t b = first + (uint64_t)i;
    philox_rounds((uint32_t)b, (uint32_t)(b >> 32), 0, 0, seed, out[i]);
  }
}

/* Elements per 128-bit block: rand/randn use one 32-bit word per element (two for float64),
 * randint 64 bits per element whatever the dtype. kernels/cpu/random.c maps element i to block
 * i / per_block with the same numbers. */
int64_t dle_random_blocks(dle_op op, dle_dtype dt, int64_t n) {
  int64_t per_block;
  switch (op) {
    case DLE_OP_RAND:
    case DLE_OP_RANDN: per_block = dt == DLE_F64 ? 2 : 4; break;
    case DLE_OP_RANDINT: per_block = 2; break;
    default: return 0;
  }
  return (n + per_block - 1) / per_block;
}

/* An unbiased-enough integer in [0, range) from 64 random bits (Lemire's multiply-shift without
 * the rejection step: the bias is below range / 2^64). */
static inline uint64_t bounded(uint64_t x, uint64_t range) {
  return (uint64_t)(((unsigned __int128)x * range) >> 64);
}

/* A random permutation of base .. base+n-1 (int64; the Lua binding passes base 1 so the result
 * can index Lua-side tensors directly). Fisher-Yates: draw k (for position n-1-k) takes 64 bits,
 * two draws per block, and the generator moves past the blocks used, like the other random ops. */
dle_status dle_randperm(dle_tensor **out, int64_t n, int64_t base, dle_generator *g) {
  if (n < 0) return dle_error("randperm: n must be >= 0, got %lld", (long long)n);
  if (!g) g = dle_default_generator();
  *out = NULL;
  DLE_TRY(dle_tensor_empty(out, 1, &n, DLE_I64, DLE_DEVICE_CPU));
  int64_t *p = dle_tensor_data(*out);
  for (int64_t i = 0; i < n; i++) p[i] = base + i;
  uint64_t offset = g->offset;
  g->offset += (uint64_t)(n > 1 ? n / 2 : 0); /* ceil((n - 1) / 2) blocks */
  uint32_t w[4];
  for (int64_t k = 0; k + 1 < n; k++) {
    if (k % 2 == 0) dle_philox(g->seed, offset + (uint64_t)(k / 2), w);
    uint64_t x = (uint64_t)w[2 * (k % 2)] << 32 | w[2 * (k % 2) + 1];
    int64_t i = n - 1 - k;
    int64_t j = (int64_t)bounded(x, (uint64_t)i + 1);
    int64_t t = p[i];
    p[i] = p[j], p[j] = t;
  }
  return DLE_OK;
}
