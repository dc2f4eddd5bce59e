/* cpu_stream.c — the threshold and the copy of cpu_stream.h. */
#include "cpu_stream.h"

#include <stdlib.h>
#include <string.h>

int64_t cpu_stream_min_bytes = CPU_STREAM_BYTES_DEFAULT;
static bool has_avx;

__attribute__((constructor)) static void cpu_stream_init(void) {
#ifdef __SSE2__
  __builtin_cpu_init();
  has_avx = __builtin_cpu_supports("avx");
#endif
  const char *env = getenv("DLE_STREAM_BYTES");
  char *end;
  if (!env || !*env) return;
  long long v = strtoll(env, &end, 10);
  if (*end == '\0' && v >= 0) cpu_stream_min_bytes = v;
}

/* Copies the bytes before dst's next `align`-byte boundary (all of them if fewer) with memcpy and
 * moves the pointers past them. */
static inline void copy_head(char **d, const char **s, size_t *bytes, size_t align) {
  size_t head = (size_t)(-(uintptr_t)*d & (align - 1));
  if (head > *bytes) head = *bytes;
  memcpy(*d, *s, head);
  *d += head, *s += head, *bytes -= head;
}

/* The copy in 32-byte AVX registers where the CPU has AVX (half the instructions of SSE2). */
#ifdef __SSE2__
#include <immintrin.h>
__attribute__((target("avx"))) static void stream_copy_avx(char *d, const char *s, size_t bytes) {
  copy_head(&d, &s, &bytes, 32);
  for (; bytes >= 64; d += 64, s += 64, bytes -= 64) { /* one cache line per step */
    __m256 a = _mm256_loadu_ps((const float *)s), b = _mm256_loadu_ps((const float *)(s + 32));
    _mm256_stream_ps((float *)d, a);
    _mm256_stream_ps((float *)(d + 32), b);
  }
  memcpy(d, s, bytes);
}
#endif

void cpu_stream_copy(void *dst, const void *src, size_t bytes) {
  char *d = dst;
  const char *s = src;
#ifdef __SSE2__
  if (has_avx) {
    stream_copy_avx(d, s, bytes);
    return;
  }
  copy_head(&d, &s, &bytes, 16);
  for (; bytes >= 64; d += 64, s += 64, bytes -= 64) { /* one cache line per step */
    __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + 32)),
            e = _mm_loadu_si128((const __m128i *)(s + 48));
    _mm_stream_si128((__m128i *)d, a);
    _mm_stream_si128((__m128i *)(d + 16), b);
    _mm_stream_si128((__m128i *)(d + 32), c);
    _mm_stream_si128((__m128i *)(d + 48), e);
  }
  for (; bytes >= 16; d += 16, s += 16, bytes -= 16)
    _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
#endif
  memcpy(d, s, bytes);
}
