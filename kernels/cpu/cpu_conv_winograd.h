/* cpu_conv_winograd.h — 3x3 stride-1 convolution and its gradients by Winograd F(2x2, 3x3)
 * (cpu_conv_winograd.c), called by conv.c for the geometries it applies to. */
#ifndef DLE_CPU_CONV_WINOGRAD_H
#define DLE_CPU_CONV_WINOGRAD_H

#include "cpu_conv_job.h"

/* Whether q (conv2d's geometry, compute type of es bytes) goes to Winograd. */
bool cpu_conv_winograd_applies(const conv_geom *q, size_t es);

/* conv2d, conv2d_grad_input or conv2d_grad_weight of contiguous tensors of dtype dt, as the CPU
 * kernel of conv.c receives them. */
dle_status cpu_conv_winograd(dle_op op, const conv_geom *q, dle_dtype dt, dle_tensor *out,
                             dle_tensor *const *ins, int nin);

#endif
