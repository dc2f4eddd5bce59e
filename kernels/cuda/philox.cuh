/* philox.cuh — Philox4x32-10 on the device, the same function as engine/rng.c's (same constants,
 * rounds, key schedule and counter layout), so random kernels produce the CPU's bits. */
#ifndef DLE_CUDA_PHILOX_CUH
#define DLE_CUDA_PHILOX_CUH

#include <stdint.h>

/* Four 32-bit words of block `block` (counter words lo, hi of the block number, then 0, 0) under
 * key = seed (low word first). */
__device__ __forceinline__ void cu_philox(uint64_t seed, uint64_t block, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c0 = n0, c1 = (uint32_t)p1, c2 = n2, c3 = (uint32_t)p0;
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* Words 2k and 2k+1 as one 64-bit number, high word first (kernels/cpu/random.c's bits64). */
__device__ __forceinline__ uint64_t cu_bits64(const uint32_t *w, int k) {
  return (uint64_t)w[2 * k] << 32 | w[2 * k + 1];
}

#endif
