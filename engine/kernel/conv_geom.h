/* conv_geom.h — how the conv and pooling kernels see their tensors (kinds CONV and POOL, ops.def): the
 * geometry of one call read from attrs and the shapes, and a pooling window clipped to the input.
 * Shared by the CPU kernels (cpu_conv*.c, kernels/cpu/pool.c) and the CUDA ones (kernels/cuda/conv.cu,
 * pool.cu):
 * header-only, it calls no engine function; DLE_HD marks what device code may call too. */
#ifndef DLE_CONV_GEOM_H
#define DLE_CONV_GEOM_H

#include "../dle.h"

#include "device_inline.h"

/* Geometry of one conv call. xs, ws, ys: the shapes of the input {N, C, H, W}, the weight
 * {O, C/G, kh, kw} and the output {N, O, Ho, Wo}, whichever tensor of the call has them. */
typedef struct {
  int64_t n, c, h, w; /* input */
  int64_t o, kh, kw;  /* weight {O, C/G, kh, kw} */
  int64_t ho, wo;     /* output */
  int64_t sh, sw, ph, pw, dh, dw, g;
  int64_t cg, og, k, l; /* C/G, O/G, K = C/G*kh*kw, L = Ho*Wo */
} conv_geom;

static inline conv_geom conv_make_geom(const int64_t *xs, const int64_t *ws, const int64_t *ys,
                                       const dle_attrs *a) {
  conv_geom q;
  q.n = xs[0], q.c = xs[1], q.h = xs[2], q.w = xs[3];
  q.o = ws[0], q.kh = ws[2], q.kw = ws[3];
  q.ho = ys[2], q.wo = ys[3];
  q.sh = a->ints[0], q.sw = a->ints[1], q.ph = a->ints[2], q.pw = a->ints[3];
  q.dh = a->ints[4], q.dw = a->ints[5], q.g = a->ints[6];
  q.cg = q.g > 0 ? q.c / q.g : 0, q.og = q.g > 0 ? q.o / q.g : 0;
  q.k = q.cg * q.kh * q.kw, q.l = q.ho * q.wo;
  return q;
}

/* The geometry of a call of a conv op: output o and inputs ins as the op has them (conv2d: x, w
 * -> y; conv2d_grad_input: gy, w -> gx; conv2d_grad_weight: gy, x -> gw). Host code only. */
static inline conv_geom conv_geom_of_call(dle_op op, const dle_tensor *o, dle_tensor *const *ins,
                                          const dle_attrs *a) {
  const int64_t *xs = op == DLE_OP_CONV2D_GRAD_INPUT ? o->sizes
                      : op == DLE_OP_CONV2D          ? ins[0]->sizes
                                                     : ins[1]->sizes;
  const int64_t *ws = op == DLE_OP_CONV2D_GRAD_WEIGHT ? o->sizes : ins[1]->sizes;
  const int64_t *ys = op == DLE_OP_CONV2D ? o->sizes : ins[0]->sizes;
  return conv_make_geom(xs, ws, ys, a);
}

/* Pooling over the N*C planes: ints kernel h, w, stride h, w, padding h, w (avg: ints[6]
 * count_include_pad); xs the input's shape, ys the output's. */
typedef struct {
  int64_t planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw;
  bool include_pad;
} pool_geom;

static inline pool_geom pool_make_geom(const int64_t *xs, const int64_t *ys, const dle_attrs *a) {
  pool_geom p = {xs[0] * xs[1], xs[2],      xs[3],      ys[2],      ys[3],      a->ints[0],
                 a->ints[1],    a->ints[2], a->ints[3], a->ints[4], a->ints[5], a->ints[6] != 0};
  return p;
}

/* The window of output (oh, ow) clipped to the input: [h0, h1) x [w0, w1), and the divisor of the
 * average (PyTorch's: the window clipped to the padded input, or only the valid cells). */
static inline DLE_HD int64_t pool_window(const pool_geom *p, int64_t oh, int64_t ow, int64_t *h0,
                                         int64_t *h1, int64_t *w0, int64_t *w1) {
  int64_t hs = oh * p->sh - p->ph, ws = ow * p->sw - p->pw;
  int64_t he = hs + p->kh < p->h + p->ph ? hs + p->kh : p->h + p->ph;
  int64_t we = ws + p->kw < p->w + p->pw ? ws + p->kw : p->w + p->pw;
  int64_t padded = (he - hs) * (we - ws);
  *h0 = hs > 0 ? hs : 0, *w0 = ws > 0 ? ws : 0;
  *h1 = he < p->h ? he : p->h, *w1 = we < p->w ? we : p->w;
  return p->include_pad ? padded : (*h1 - *h0) * (*w1 - *w0);
}

#endif
