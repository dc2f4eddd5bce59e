/* device_inline.h — DLE_HD marks the inline helpers of the engine's kernel-facing headers
 * (ops/targets.h, ops/conv_geom.h) that CUDA device code calls too; empty for C. */
#ifndef DLE_DEVICE_INLINE_H
#define DLE_DEVICE_INLINE_H

#ifdef __CUDACC__
#define DLE_HD __host__ __device__
#else
#define DLE_HD
#endif

#endif
