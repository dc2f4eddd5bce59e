/* deliver.h — the last step of a front door that computed an op's one result r (matmul.c, fft.c):
 * handing r to the caller's output slot. */
#ifndef DLE_OPS_DELIVER_H
#define DLE_OPS_DELIVER_H

#include "../internal.h"

/* With an output given (*out not NULL), r is stored into it (cast on store; nothing to store when
 * r is that output) and released; otherwise r becomes *out. On an error, st or the store's, r is
 * released and *out left as it was. */
static inline dle_status dle_deliver_result(dle_tensor **out, dle_tensor *r, dle_status st) {
  dle_tensor *given = *out;
  if (st == DLE_OK && given && r != given) st = dle_copy_(given, r);
  if (st != DLE_OK || given) {
    dle_tensor_release(r);
    return st;
  }
  *out = r;
  return DLE_OK;
}

#endif
