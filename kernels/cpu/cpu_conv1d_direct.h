/* cpu_conv1d_direct.h — conv2d's forward over one-row float32 inputs at stride 1 (conv1d's
 * lowering, {N, C, 1, W} with a {1, kw} kernel) computed directly with AVX-512
 * (cpu_conv1d_direct.c); conv.c calls it for the geometries it applies to. */
#ifndef DLE_CPU_CONV1D_DIRECT_H
#define DLE_CPU_CONV1D_DIRECT_H

#include <stdbool.h>

#include "cpu_conv_job.h"

/* Whether conv2d of geometry q in dtype dt goes here: float32, one input and output row, a
 * {1, kw} kernel at stride 1 along the row (any padding, dilation, groups), a CPU with AVX-512F,
 * SIMD not turned off (DLE_SIMD=0) and the "conv1d_direct" tuning not 0. */
bool cpu_conv1d_direct_applies(const conv_geom *q, dle_dtype dt);

/* y {N, O, 1, Wo} = conv2d(x {N, C, 1, W}, w {O, C/G, 1, kw}) + bias (NULL: none), contiguous. */
dle_status cpu_conv1d_direct(const conv_geom *q, const float *x, const float *w, const float *bias,
                             float *y);

#endif
