/* cpu_stream.h — streaming (non-temporal) stores for outputs much larger than the caches.
 *
 * A normal store first reads the destination's cache line (read-for-ownership), so writing an
 * output that will not be read again soon moves its bytes twice. Streaming stores write whole
 * lines straight to memory through write-combining buffers: a memory-bound kernel that reads one
 * array and writes another then moves 2 bytes per output byte instead of 3. Below the threshold
 * the output may still be read from the cache by the next op, so kernels keep normal stores.
 *
 * Streaming stores are weakly ordered: a thread that used them calls cpu_stream_fence() before
 * its results may be read by another thread (the end of its share of a parallel loop). */
#ifndef DLE_CPU_STREAM_H
#define DLE_CPU_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* Outputs of at least this many bytes are streamed: a quarter of the 32 MiB last-level cache of
 * the machines measured. The environment variable DLE_STREAM_BYTES overrides it when the module
 * loads (0: stream every output; a huge value: never), for tests and measurements. */
#define CPU_STREAM_BYTES_DEFAULT ((int64_t)8 << 20)
extern int64_t cpu_stream_min_bytes;

/* Should an output of this many bytes be written with streaming stores? */
static inline bool cpu_stream_output(int64_t bytes) { return bytes >= cpu_stream_min_bytes; }

/* Orders this thread's streaming stores before whatever it does next. */
static inline void cpu_stream_fence(void) {
#ifdef __SSE2__
  _mm_sfence();
#endif
}

/* dst[0, bytes) = src[0, bytes): the 16-byte-aligned middle of dst with streaming stores, the ends
 * with memcpy. No fence. */
void cpu_stream_copy(void *dst, const void *src, size_t bytes);

#endif
