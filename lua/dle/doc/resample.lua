-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- Resampling of the 1 to 3 spatial dims of {N, C, ...} tensors (implemented in C,
-- bindings/lua_resample.c). `dle.nn.functional.interpolate` and `nn.Upsample` are the
-- PyTorch-shaped entries (size or scale_factor, mode names per input rank); these are the op.
-- Source indices follow PyTorch's CPU kernels: half-pixel centres (or align_corners), the scale
-- factor when given, Keys' cubic with A = -0.75, clamped at the borders.
-- @module nn.resample

--- Resamples x {N, C, d1[, d2[, d3]]} to the given spatial sizes. mode: "nearest" (default, any
-- dtype), "nearest-exact", "linear" (linear, bilinear or trilinear by the number of spatial dims)
-- or "cubic" (float dtypes); align_corners (linear and cubic); scales: one scale factor per spatial
-- dim used for the source indices instead of in / out (PyTorch's scale_factor). Differentiable
-- (its gradient is `upsample_backward`). Also `x:upsample(sizes, opts)`.
-- @function dle.upsample
-- @tparam dle.Tensor x 3-D to 5-D
-- @param sizes table of the output's spatial sizes (a number for one spatial dim)
-- @param[opt] opts `{mode = "nearest", align_corners = false, scales = nil}`
-- @treturn dle.Tensor {N, C, sizes...}, x's dtype
-- @usage local y = dle.upsample(x, {64, 64}, {mode = "linear"})

--- The adjoint of upsample: spreads gy {N, C, out sizes} back onto the input sizes with the same
-- taps (upsample's gradient). Differentiable (its gradient is upsample). Also
-- `gy:upsample_backward(input_sizes, opts)`.
-- @function dle.upsample_backward
-- @tparam dle.Tensor gy float, 3-D to 5-D
-- @param input_sizes table of upsample's input spatial sizes
-- @param[opt] opts `{mode, align_corners, scales}` as given to upsample
-- @treturn dle.Tensor {N, C, input_sizes...}
