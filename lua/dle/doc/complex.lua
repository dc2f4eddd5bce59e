-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- The complex views (implemented in C, bindings/lua_complex.c on engine/complex.c). The rest of
-- the complex API (dle.complex, real, imag, conj, angle, is_complex) is lua/dle/complex.lua; the
-- dtypes, what supports them and their gradients: docs/complex_fft.md.
-- @module tensor.complex

--- Returns z's elements as pairs (re, im) along a new last dim of size 2: a float32 (complex64)
-- or float64 (complex128) view sharing z's storage, strides doubled (torch.view_as_real).
-- Writing into it writes into z. Differentiable (the op view with a dtype): the gradient of z is
-- the gradient of the view read as complex numbers.
-- @function dle.view_as_real
-- @tparam dle.Tensor z complex64 or complex128, any shape
-- @treturn dle.Tensor z's shape followed by 2, float32 or float64
-- @usage local parts = dle.view_as_real(z)   -- parts[..., 1] is z:real()

--- Returns x's trailing pairs as complex numbers: a complex64 (float32) or complex128 (float64)
-- view sharing x's storage (torch.view_as_complex). x's last dim must have size 2 and stride 1,
-- its other strides and its storage offset must be even. Differentiable, as view_as_real.
-- @function dle.view_as_complex
-- @tparam dle.Tensor x float32 or float64 of shape {..., 2}
-- @treturn dle.Tensor x's shape without the last dim, complex
-- @usage local z = dle.view_as_complex(dle.stack({re, im}, -1))
