--- dle.fp8: matrix products in the float8 dtypes with per-tensor scales, as in mixed-precision
-- training's fp8 recipe (and PyTorch's torch._scaled_mm):
--   local a8, sa = dle.fp8.quantize(a, "float8_e4m3fn")   -- a ~= a8 * sa
--   local b8, sb = dle.fp8.quantize(b, "float8_e4m3fn")
--   local y = dle.fp8.scaled_matmul(a8, b8, sa, sb)        -- ~= a @ b, float32
-- The CPU upcasts to float32 and multiplies with sgemm; CUDA tensors go through cuBLASLt's fp8
-- path (engine/fp8.c, kernels/cuda/fp8_matmul.cu). Neither function has a gradient.
local dle = require("dle")
local core = require("dle.core")
local check = require("dle.check")

local M = {}

-- Largest finite value of each format (engine/kernel/fp8.h).
M.max = {float8_e4m3fn = 448.0, float8_e5m2 = 57344.0}

local MATMUL_OPTS = {"out_dtype"}

--- dle.fp8.scaled_matmul(a, b, a_scale, b_scale, {out_dtype}) -> (a * a_scale) @ (b * b_scale).
-- a {M, K} and b {K, N} are float8_e4m3fn or float8_e5m2 tensors (any strides), a_scale and
-- b_scale 0-d float32 tensors on the same device; the result {M, N} has dtype out_dtype (default
-- "float32"; float64, float16 and bfloat16 too), as torch._scaled_mm. No gradient: an input that
-- requires grad is an error. On CUDA, cuBLASLt needs a GPU of compute capability 8.9 or newer,
-- dims that are multiples of 16, and not both operands float8_e5m2.
-- @param a tensor {M, K}, float8
-- @param b tensor {K, N}, float8
-- @param a_scale 0-d float32 tensor
-- @param b_scale 0-d float32 tensor
-- @param opts optional table: out_dtype (string)
-- @return tensor {M, N}
function M.scaled_matmul(a, b, a_scale, b_scale, opts)
  local fn = "dle.fp8.scaled_matmul"
  opts = check.options(opts, fn, MATMUL_OPTS)
  check.tensor(a, fn, "a")
  check.tensor(b, fn, "b")
  check.tensor(a_scale, fn, "a_scale")
  check.tensor(b_scale, fn, "b_scale")
  local out_dtype = opts.out_dtype or "float32"
  if type(out_dtype) ~= "string" then
    check.error(string.format("%s: out_dtype must be a dtype name, got %s", fn, check.typename(out_dtype)))
  end
  return core._fp8_scaled_matmul(a, b, a_scale, b_scale, out_dtype)
end

--- dle.fp8.quantize(x, dtype) -> x_fp8, scale: per-tensor scaling into a float8 format.
-- scale = amax(|x|) / the format's largest finite value (448 for float8_e4m3fn, 57344 for
-- float8_e5m2), a 0-d float32 tensor on x's device (1 when x is all zeros or empty); x_fp8 =
-- (x / scale) converted to dtype (round to nearest even, saturating), so x ~= x_fp8 * scale and
-- the largest magnitude lands on the format's largest value. x: any float tensor without
-- infinities or NaNs (an error names them); no gradient flows (x is read detached).
-- @param x float tensor
-- @param dtype "float8_e4m3fn" (default) or "float8_e5m2"
-- @return tensor (dtype), tensor (0-d float32)
function M.quantize(x, dtype)
  local fn = "dle.fp8.quantize"
  check.tensor(x, fn, "x")
  dtype = dtype or "float8_e4m3fn"
  local fmax = M.max[dtype]
  if not fmax then
    check.error(string.format("%s: dtype must be \"float8_e4m3fn\" or \"float8_e5m2\", got %s", fn,
      type(dtype) == "string" and string.format("%q", dtype) or check.typename(dtype)))
  end
  if not x:is_floating_point() then
    check.error(string.format("%s: x must be a float tensor, got %s %s", fn, x:dtype(), check.shape_str(x)))
  end
  local xf = x:detach():float()
  if xf:numel() > 0 and not xf:isfinite():all():item() then
    check.error(string.format("%s: x %s has infinite or NaN values, which no scale maps into %s", fn,
      check.shape_str(x), dtype))
  end
  local amax = xf:numel() > 0 and xf:abs():max() or nil
  local scale = (amax and amax:item() > 0) and amax / fmax or dle.tensor(1.0, {device = x:device()})
  return (xf / scale):to(dtype), scale
end

return check.export(M)
