/* conv.h — public C interface of 2-D convolution and pooling over {N, C, H, W} tensors
 * (engine/ops/conv.c; the op table entries are in ops.def). Same conventions as dle.h: outputs
 * first (NULL slot: a new tensor), DLE_OK / DLE_ERR with dle_last_error().
 *
 *   dle_conv2d_params p = DLE_CONV2D_DEFAULTS;   // stride 1, padding 0, dilation 1, groups 1
 *   p.padding[0] = p.padding[1] = 1;
 *   dle_tensor *y = NULL;
 *   if (dle_conv2d(&y, x, w, bias, &p)) fprintf(stderr, "%s\n", dle_last_error());
 */
#ifndef DLE_CONV_H
#define DLE_CONV_H

#include "dle.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Geometry of a convolution: {h, w} pairs. */
typedef struct {
  int64_t stride[2], padding[2], dilation[2];
  int64_t groups;
} dle_conv2d_params;
#define DLE_CONV2D_DEFAULTS ((dle_conv2d_params){{1, 1}, {0, 0}, {1, 1}, 1})

/* Geometry of a pooling window: {h, w} pairs; padding at most half the kernel. */
typedef struct {
  int64_t kernel[2], stride[2], padding[2];
  bool count_include_pad; /* avg_pool2d: padding cells count in the divisor */
} dle_pool2d_params;

/* y {N, O, Ho, Wo} = conv(x {N, C, H, W}, w {O, C/groups, kh, kw}) + bias {O} (bias may be NULL);
 * Ho = (H + 2 pad - dil (kh - 1) - 1) / stride + 1. Integer inputs compute in float32. */
dle_status dle_conv2d(dle_tensor **out, dle_tensor *x, dle_tensor *w, dle_tensor *bias,
                      const dle_conv2d_params *p);
/* The gradient of conv2d's input: gy {N, O, Ho, Wo}, w -> {N, C, h, w_} (the input's H, W). */
dle_status dle_conv2d_grad_input(dle_tensor **out, dle_tensor *gy, dle_tensor *w,
                                 const dle_conv2d_params *p, int64_t h, int64_t w_);
/* The gradient of conv2d's weight: gy {N, O, Ho, Wo}, x {N, C, H, W} -> {O, C/groups, kh, kw}. */
dle_status dle_conv2d_grad_weight(dle_tensor **out, dle_tensor *gy, dle_tensor *x,
                                  const dle_conv2d_params *p, int64_t kh, int64_t kw);

/* Max over windows (padding counts as -inf): values {N, C, Ho, Wo} and int64 indices h*W + w of
 * the max within each {H, W} plane, relative to index_base. */
dle_status dle_max_pool2d(dle_tensor **values, dle_tensor **indices, dle_tensor *x,
                          const dle_pool2d_params *p, int64_t index_base);
dle_status dle_avg_pool2d(dle_tensor **out, dle_tensor *x, const dle_pool2d_params *p);
/* The adjoint of avg_pool2d: gy {N, C, Ho, Wo} -> {N, C, h, w}. */
dle_status dle_avg_pool2d_grad(dle_tensor **out, dle_tensor *gy, const dle_pool2d_params *p,
                               int64_t h, int64_t w);

#ifdef __cplusplus
}
#endif
#endif
