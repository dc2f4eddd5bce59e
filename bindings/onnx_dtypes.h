/* onnx_dtypes.h — the ONNX tensor data types that have a dle dtype, and back: one table for
 * reading (lua_onnx.c) and writing (lua_onnx_save.c). Include after onnx.pb-c.h. */
#ifndef DLE_ONNX_DTYPES_H
#define DLE_ONNX_DTYPES_H

#include <stddef.h>

#include "../engine/dle.h"

static const struct {
  int32_t onnx;
  dle_dtype dtype;
} onnx_dtype_table[] = {
    {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, DLE_F32},
    {ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, DLE_F64},
    {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, DLE_F16},
    {ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16, DLE_BF16},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT32, DLE_I32},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT64, DLE_I64},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, DLE_U8},
    {ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, DLE_BOOL},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT8, DLE_I8},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT16, DLE_I16},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT16, DLE_U16},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT32, DLE_U32},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT64, DLE_U64},
};
#define ONNX_DTYPE_COUNT (sizeof onnx_dtype_table / sizeof onnx_dtype_table[0])

/* dle's dtype for an ONNX data type; false when dle has none. */
static inline bool onnx_dtype(int32_t t, dle_dtype *out) {
  for (size_t i = 0; i < ONNX_DTYPE_COUNT; i++)
    if (onnx_dtype_table[i].onnx == t) {
      *out = onnx_dtype_table[i].dtype;
      return true;
    }
  return false;
}

/* ONNX's data type for a dle dtype; -1 when ONNX has none. */
static inline int onnx_elem_type(dle_dtype dt) {
  for (size_t i = 0; i < ONNX_DTYPE_COUNT; i++)
    if (onnx_dtype_table[i].dtype == dt) return onnx_dtype_table[i].onnx;
  return -1;
}

#endif
