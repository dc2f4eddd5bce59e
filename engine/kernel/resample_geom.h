/* resample_geom.h — the attrs of the resample ops (kind RESAMPLE, engine/ops/resample.c) and
 * PyTorch's source-index rules of its modes, shared by the shape rules, the gradient rules and the
 * kernels (header-only: it calls no engine function).
 *
 * attrs.ints: [0] mode (dle_resample_mode), [1] align_corners, [2 .. 2 + d) the spatial sizes of
 * the other side (upsample: the output's; upsample_backward: the input's), [5 .. 5 + d) each
 * dim's scale as the bits of a double (0: none given; then the scale is in / out), for the d = 1..3
 * spatial dims after {N, C}.
 *
 * Output index o of a dim of input size `in` and output size `out` reads taps (source index,
 * weight), as PyTorch's CPU kernels (ATen/native/UpSample.h):
 *   nearest        floor(o * s) in float, s = 1 / scale or in / out (o itself when out == in,
 *                  o / 2 when out == 2 in), clamped to in - 1
 *   nearest-exact  floor((o + 0.5) * s) in float, clamped to in - 1
 *   linear         src = align_corners ? o (in - 1) / (out - 1) : max(0, (o + 0.5) s - 0.5);
 *                  taps floor(src) and the next (clamped), weights 1 - l, l (o itself when
 *                  out == in)
 *   cubic          src as linear without the max(0, .); taps floor(src) - 1 .. + 2 (clamped),
 *                  Keys' cubic convolution weights with A = -0.75
 * computed in the compute type (float, or double for float64), except nearest (always float). */
#ifndef DLE_RESAMPLE_GEOM_H
#define DLE_RESAMPLE_GEOM_H

#include <math.h>
#include <string.h>

#include "../dle.h"

/* the modes: dle_resample_mode (dle.h) */
#define DLE_RESAMPLE_SIZES  2
#define DLE_RESAMPLE_SCALES 5

/* Taps per output index of a dim. */
static inline int dle_resample_taps(int64_t mode) {
  return mode == DLE_RESAMPLE_LINEAR ? 2 : mode == DLE_RESAMPLE_CUBIC ? 4 : 1;
}

static inline double dle_resample_scale(const dle_attrs *a, int i) {
  double s;
  memcpy(&s, &a->ints[DLE_RESAMPLE_SCALES + i], sizeof s);
  return s;
}

static inline void dle_resample_set_scale(dle_attrs *a, int i, double s) {
  memcpy(&a->ints[DLE_RESAMPLE_SCALES + i], &s, sizeof s);
}

/* The taps (idx[0..k), w[0..k)) of output index o, in compute type CT (float or double):
 * DLE_RESAMPLE_TAPS(CT, NAME) defines NAME(mode, align, in, out, scale, o, idx, w). */
#define DLE_RESAMPLE_TAPS(CT, NAME)                                                        \
  static inline void NAME(int64_t mode, bool align, int64_t in, int64_t out, double scale, \
                          int64_t o, int64_t *idx, CT *w) {                                \
    if (mode == DLE_RESAMPLE_NEAREST || mode == DLE_RESAMPLE_NEAREST_EXACT) {              \
      float s = scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;                 \
      int64_t i;                                                                           \
      if (mode == DLE_RESAMPLE_NEAREST && out == in)                                       \
        i = o;                                                                             \
      else if (mode == DLE_RESAMPLE_NEAREST && out == 2 * in)                              \
        i = o >> 1;                                                                        \
      else if (mode == DLE_RESAMPLE_NEAREST)                                               \
        i = (int64_t)floorf((float)o * s);                                                 \
      else                                                                                 \
        i = (int64_t)floorf((float)((double)o + 0.5) * s);                                 \
      idx[0] = i < in - 1 ? i : in - 1, w[0] = 1;                                          \
      return;                                                                              \
    }                                                                                      \
    bool cubic = mode == DLE_RESAMPLE_CUBIC;                                               \
    if (!cubic && out == in) {                                                             \
      idx[0] = idx[1] = o, w[0] = 1, w[1] = 0;                                             \
      return;                                                                              \
    }                                                                                      \
    CT s = align ? (out > 1 ? (CT)(in - 1) / (CT)(out - 1) : (CT)0)                        \
                 : (scale > 0 ? (CT)(1.0 / scale) : (CT)in / (CT)out);                     \
    CT src = align ? s * (CT)o : s * ((CT)o + (CT)0.5) - (CT)0.5;                          \
    if (!align && !cubic && src < 0) src = 0;                                              \
    int64_t i0 = (int64_t)floor(src);                                                      \
    if (i0 > in - 1) i0 = in - 1;                                                          \
    CT l = src - (CT)i0;                                                                   \
    l = l < 0 ? 0 : l > 1 ? 1 : l;                                                         \
    if (!cubic) {                                                                          \
      idx[0] = i0, idx[1] = i0 + (i0 < in - 1), w[0] = 1 - l, w[1] = l;                    \
      return;                                                                              \
    }                                                                                      \
    const CT A = (CT)-0.75;                                                                \
    CT x1 = l + 1, x2 = 1 - l, x3 = 2 - l;                                                 \
    w[0] = ((A * x1 - 5 * A) * x1 + 8 * A) * x1 - 4 * A;                                   \
    w[1] = ((A + 2) * l - (A + 3)) * l * l + 1;                                            \
    w[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;                                         \
    w[3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;                                   \
    for (int t = 0; t < 4; t++) {                                                          \
      int64_t j = i0 - 1 + t;                                                              \
      idx[t] = j < 0 ? 0 : j > in - 1 ? in - 1 : j;                                        \
    }                                                                                      \
  }

#endif
