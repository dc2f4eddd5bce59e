/* cpu_conv_job.h — what the CPU conv kernels share (conv.c: im2col + gemm; cpu_conv_winograd.c:
 * Winograd F(2x2, 3x3)): the geometry of one call and the chunk loop that runs per-chunk functions
 * over the batch on OpenMP threads, each with its own scratch buffers, OpenBLAS set to one thread
 * meanwhile, and gradients that sum over the batch accumulated per span of chunks so the result
 * does not depend on which thread did which span. */
#ifndef DLE_CPU_CONV_JOB_H
#define DLE_CPU_CONV_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../engine/dle.h"
#include "../../engine/kernel/conv_geom.h" /* conv_geom, conv_make_geom */

/* What the per-chunk functions of one call share. The chunks (b samples each, the last maybe
 * fewer) are grouped into spans of consecutive chunks that one thread does in order. Scratch is
 * per thread (thread t's col and tmp start at t * ncol and t * ntmp elements of the compute
 * type), accumulators per thread or per span (nacc elements each, zeroed). */
typedef struct {
  conv_geom q;
  int64_t b, rows; /* samples per chunk, output rows per part (im2col's part_rows) */
  int64_t spans;
  const void *src;  /* the input the chunks read (x, or gy for grad_input) */
  const void *gy;   /* grad_weight's gy */
  const void *bias; /* conv2d's bias, or NULL */
  const void *w;    /* the weight in the compute type (or transformed) */
  void *dst;        /* y (conv2d) or gx (grad_input) */
  void *wbuf, *col, *tmp, *acc;
  int64_t nw, ncol, ntmp, nacc, naccs; /* naccs: how many accumulators */
  int64_t ext[4]; /* free for the kernel family (Winograd: tile counts, offsets) */
  size_t es;      /* sizeof the compute type */
  int nt;         /* threads: one per chunk at most (one chunk keeps OpenBLAS's own threads) */
} conv_job;

typedef void (*conv_chunk_fn)(const conv_job *j, int64_t b0, int64_t nb, int thread, int64_t span);

/* The threads a call may use (dle_get_num_threads, 1 without OpenMP). */
int conv_threads(void);

/* Sets up j for one call over q.n samples in chunks of b, in a compute type of es bytes: threads
 * (no more than chunks), spans and buffers (nw: elements of a weight buffer, 0 for none; ncol,
 * ntmp: per-thread scratch elements; nacc: accumulator elements, per thread, or per span when
 * per_span, see cpu_conv_job.c). On error the caller still calls conv_job_free. */
dle_status conv_job_init(conv_job *j, const char *fn, conv_geom q, size_t es, int64_t b, int64_t nw,
                         int64_t ncol, int64_t ntmp, int64_t nacc, bool per_span);
void conv_job_free(conv_job *j);

/* Runs f over all of j's chunks on j->nt threads. */
void conv_for_chunks(const conv_job *j, conv_chunk_fn f);
/* A kernel's last step: runs f over j's chunks when st (how j's setup went) is DLE_OK, then frees
 * j; returns st. */
dle_status conv_job_run(conv_job *j, dle_status st, conv_chunk_fn f);

#endif
