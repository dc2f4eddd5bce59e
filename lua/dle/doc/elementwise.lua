-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- Elementwise math, arithmetic and comparisons.
-- Implemented in C (bindings/lua_elementwise.c; one entry of the op table engine/ops.def each).
-- Every function here is both `dle.NAME(t, ...)` and the method `t:NAME(...)`. Binary ones
-- broadcast their operands (sizes aligned from the last dim; a size 1 stretches) and take a
-- tensor or a Lua number on either side; the operators `a + b`, `a - b`, `a * b`, `a / b`,
-- `a % b` (remainder), `a // b` (floor_divide), `-a` and `a ^ p` call them. The result dtype is
-- the promotion of the tensor operands
-- (bool < uint8 < int32 < int64 < floats, the wider float wins; float16 with bfloat16 gives
-- float32; arithmetic on bool operands only counts in int64); a Lua number keeps the tensor's
-- dtype unless it is fractional and the tensor integer (then float32). div and the float-valued
-- math (exp, log, sqrt, rsqrt, reciprocal, sin, cos, tanh, sigmoid, gelu, silu, expm1, log1p)
-- give float32 for integer inputs. The in-place forms `t:NAME_(...)` write the result into t (in t's dtype,
-- converting, e.g. truncating a float result into an integer t) and return t; the result must
-- have t's shape, and a leaf that requires grad cannot be written in place (an error naming the
-- op). The math ops are differentiable; sign, floor, ceil and round pass no gradient, and the
-- comparisons and logical_not give bool tensors.
-- @module tensor.elementwise

--- Returns -t elementwise (also the operator `-t`).
-- Also `dle.neg(t)`; in place: `t:neg_()`.
-- @function dle.neg
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place neg: writes neg(t) into t (in t's dtype) and returns t.
-- @function Tensor:neg_
-- @treturn dle.Tensor t

--- Returns the absolute value of t elementwise.
-- Also `dle.abs(t)`; in place: `t:abs_()`.
-- @function dle.abs
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place abs: writes abs(t) into t (in t's dtype) and returns t.
-- @function Tensor:abs_
-- @treturn dle.Tensor t

--- Returns the sign of t elementwise: -1, 0 or 1 in t's dtype.
-- No gradient flows through it.
-- Also `dle.sign(t)`; in place: `t:sign_()`.
-- @function dle.sign
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place sign: writes sign(t) into t (in t's dtype) and returns t.
-- @function Tensor:sign_
-- @treturn dle.Tensor t

--- Returns e to the power of t elementwise.
-- Integer inputs give float32.
-- Also `dle.exp(t)`; in place: `t:exp_()`.
-- @function dle.exp
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place exp: writes exp(t) into t (in t's dtype) and returns t.
-- @function Tensor:exp_
-- @treturn dle.Tensor t

--- Returns the natural logarithm of t elementwise (-inf at 0, NaN below).
-- Integer inputs give float32.
-- Also `dle.log(t)` (dle.log is a callable table: `dle.log.open(path)` is the metrics log,
-- lua/dle/runlog.lua); in place: `t:log_()`.
-- @function Tensor:log
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place log: writes log(t) into t (in t's dtype) and returns t.
-- @function Tensor:log_
-- @treturn dle.Tensor t

--- Returns exp(t) - 1 elementwise, accurate for t near 0.
-- Integer inputs give float32.
-- Also `dle.expm1(t)`; in place: `t:expm1_()`.
-- @function dle.expm1
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place expm1: writes expm1(t) into t (in t's dtype) and returns t.
-- @function Tensor:expm1_
-- @treturn dle.Tensor t

--- Returns log(1 + t) elementwise, accurate for t near 0.
-- Integer inputs give float32.
-- Also `dle.log1p(t)`; in place: `t:log1p_()`.
-- @function dle.log1p
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place log1p: writes log1p(t) into t (in t's dtype) and returns t.
-- @function Tensor:log1p_
-- @treturn dle.Tensor t

--- Returns the square root of t elementwise (NaN for negative values).
-- Integer inputs give float32.
-- Also `dle.sqrt(t)`; in place: `t:sqrt_()`.
-- @function dle.sqrt
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place sqrt: writes sqrt(t) into t (in t's dtype) and returns t.
-- @function Tensor:sqrt_
-- @treturn dle.Tensor t

--- Returns 1 / sqrt(t) elementwise.
-- Integer inputs give float32.
-- Also `dle.rsqrt(t)`; in place: `t:rsqrt_()`.
-- @function dle.rsqrt
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place rsqrt: writes rsqrt(t) into t (in t's dtype) and returns t.
-- @function Tensor:rsqrt_
-- @treturn dle.Tensor t

--- Returns 1 / t elementwise.
-- Integer inputs give float32.
-- Also `dle.reciprocal(t)`; in place: `t:reciprocal_()`.
-- @function dle.reciprocal
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place reciprocal: writes reciprocal(t) into t (in t's dtype) and returns t.
-- @function Tensor:reciprocal_
-- @treturn dle.Tensor t

--- Returns the sine of t (radians) elementwise.
-- Integer inputs give float32.
-- Also `dle.sin(t)`; in place: `t:sin_()`.
-- @function dle.sin
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place sin: writes sin(t) into t (in t's dtype) and returns t.
-- @function Tensor:sin_
-- @treturn dle.Tensor t

--- Returns the cosine of t (radians) elementwise.
-- Integer inputs give float32.
-- Also `dle.cos(t)`; in place: `t:cos_()`.
-- @function dle.cos
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place cos: writes cos(t) into t (in t's dtype) and returns t.
-- @function Tensor:cos_
-- @treturn dle.Tensor t

--- Returns the hyperbolic tangent of t elementwise.
-- Integer inputs give float32. `dle.nn.functional.tanh` and `dle.nn.Tanh` call it.
-- Also `dle.tanh(t)`; in place: `t:tanh_()`.
-- @function dle.tanh
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place tanh: writes tanh(t) into t (in t's dtype) and returns t.
-- @function Tensor:tanh_
-- @treturn dle.Tensor t

--- Returns the logistic sigmoid 1 / (1 + exp(-t)) elementwise.
-- Integer inputs give float32. `dle.nn.functional.sigmoid` and `dle.nn.Sigmoid` call it.
-- Also `dle.sigmoid(t)`; in place: `t:sigmoid_()`.
-- @function dle.sigmoid
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place sigmoid: writes sigmoid(t) into t (in t's dtype) and returns t.
-- @function Tensor:sigmoid_
-- @treturn dle.Tensor t

--- Returns max(t, 0) elementwise (ReLU), in t's dtype.
-- `dle.nn.functional.relu` and `dle.nn.ReLU` call it.
-- Also `dle.relu(t)`; in place: `t:relu_()`.
-- @function dle.relu
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place relu: writes relu(t) into t (in t's dtype) and returns t.
-- @function Tensor:relu_
-- @treturn dle.Tensor t

--- Returns the GELU activation x * Phi(x) elementwise (exact erf form, not the tanh one).
-- Integer inputs give float32. Its backward is one fused op, `dle.gelu_backward`.
-- `dle.nn.functional.gelu` and `dle.nn.GELU` call it.
-- Also `dle.gelu(t)`; in place: `t:gelu_()`.
-- @function dle.gelu
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place gelu: writes gelu(t) into t (in t's dtype) and returns t.
-- @function Tensor:gelu_
-- @treturn dle.Tensor t

--- Returns the SiLU (swish) activation x * sigmoid(x) elementwise.
-- Integer inputs give float32. `dle.nn.functional.silu` and `dle.nn.SiLU` call it.
-- Also `dle.silu(t)`; in place: `t:silu_()`.
-- @function dle.silu
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place silu: writes silu(t) into t (in t's dtype) and returns t.
-- @function Tensor:silu_
-- @treturn dle.Tensor t

--- Rounds t down to integral values elementwise (same dtype).
-- Not differentiable (no gradient flows through it).
-- Also `dle.floor(t)`; in place: `t:floor_()`.
-- @function dle.floor
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place floor: writes floor(t) into t (in t's dtype) and returns t.
-- @function Tensor:floor_
-- @treturn dle.Tensor t

--- Rounds t up to integral values elementwise (same dtype).
-- Not differentiable (no gradient flows through it).
-- Also `dle.ceil(t)`; in place: `t:ceil_()`.
-- @function dle.ceil
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place ceil: writes ceil(t) into t (in t's dtype) and returns t.
-- @function Tensor:ceil_
-- @treturn dle.Tensor t

--- Rounds t to the nearest integral value elementwise, halves to even (0.5 gives 0, 1.5 gives 2).
-- Not differentiable (no gradient flows through it).
-- Also `dle.round(t)`; in place: `t:round_()`.
-- @function dle.round
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place round: writes round(t) into t (in t's dtype) and returns t.
-- @function Tensor:round_
-- @treturn dle.Tensor t

--- Returns the logical negation of t elementwise as a bool tensor (true where t is 0).
-- Also `t:logical_not()`. Not differentiable; there is no in-place form.
-- @function dle.logical_not
-- @tparam dle.Tensor t
-- @treturn dle.Tensor bool

--- Returns a + b elementwise, broadcasting (also the operator `a + b`).
-- A trailing options table `{alpha = s}` adds s * b instead (as PyTorch's add).
-- a or b may be a Lua number (at least one must be a tensor). Also `a:add(b)`; in place:
-- `a:add_(b)`.
-- @function dle.add
-- @param a tensor or number
-- @param b tensor or number
-- @param[opt] opts `{alpha = number}`
-- @treturn dle.Tensor
-- @usage local r = a:add(b, {alpha = 2})

--- In-place add: writes add(a, b) into a (in a's dtype) and returns a.
-- b must broadcast to a's shape.
-- @function Tensor:add_
-- @param b tensor or number
-- @param[opt] opts `{alpha = number}`
-- @treturn dle.Tensor a

--- Returns a - b elementwise, broadcasting (also the operator `a - b`).
-- A trailing options table `{alpha = s}` subtracts s * b instead.
-- a or b may be a Lua number (at least one must be a tensor). Also `a:sub(b)`; in place:
-- `a:sub_(b)`.
-- @function dle.sub
-- @param a tensor or number
-- @param b tensor or number
-- @param[opt] opts `{alpha = number}`
-- @treturn dle.Tensor
-- @usage local r = a:sub(1)

--- In-place sub: writes sub(a, b) into a (in a's dtype) and returns a.
-- b must broadcast to a's shape.
-- @function Tensor:sub_
-- @param b tensor or number
-- @param[opt] opts `{alpha = number}`
-- @treturn dle.Tensor a

--- Returns a * b elementwise, broadcasting (also the operator `a * b`).
-- For the matrix product see `dle.matmul`.
-- a or b may be a Lua number (at least one must be a tensor). Also `a:mul(b)`; in place:
-- `a:mul_(b)`.
-- @function dle.mul
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor
-- @usage local r = a:mul(0.5)

--- In-place mul: writes mul(a, b) into a (in a's dtype) and returns a.
-- b must broadcast to a's shape.
-- @function Tensor:mul_
-- @param b tensor or number
-- @treturn dle.Tensor a

--- Returns a / b elementwise, broadcasting: true division (also the operator `a / b`).
-- Integer operands give float32 (`int64 / 2` is not floor division).
-- a or b may be a Lua number (at least one must be a tensor). Also `a:div(b)`; in place:
-- `a:div_(b)`.
-- @function dle.div
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor
-- @usage local r = a:div(4)

--- In-place div: writes div(a, b) into a (in a's dtype) and returns a.
-- b must broadcast to a's shape.
-- @function Tensor:div_
-- @param b tensor or number
-- @treturn dle.Tensor a

--- Returns the larger of a and b elementwise, broadcasting; NaN wins.
-- `t:max(other)` with a tensor, or a fractional number, calls it too. The gradient goes to the
-- larger operand (half to each on a tie).
-- a or b may be a Lua number (at least one must be a tensor). Also `a:maximum(b)`; in place:
-- `a:maximum_(b)`.
-- @function dle.maximum
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor
-- @usage local r = x:maximum(0)

--- In-place maximum: writes maximum(a, b) into a (in a's dtype) and returns a.
-- b must broadcast to a's shape.
-- @function Tensor:maximum_
-- @param b tensor or number
-- @treturn dle.Tensor a

--- Returns the smaller of a and b elementwise, broadcasting; NaN wins.
-- `t:min(other)` with a tensor, or a fractional number, calls it too.
-- a or b may be a Lua number (at least one must be a tensor). Also `a:minimum(b)`; in place:
-- `a:minimum_(b)`.
-- @function dle.minimum
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor
-- @usage local r = x:minimum(1)

--- In-place minimum: writes minimum(a, b) into a (in a's dtype) and returns a.
-- b must broadcast to a's shape.
-- @function Tensor:minimum_
-- @param b tensor or number
-- @treturn dle.Tensor a

--- Returns t raised to the power p elementwise (also the operator `t ^ p`).
-- p is a number or a tensor (broadcast); `dle.pow(2, t)` puts the number in the base. A number
-- exponent runs a cheaper op with its own gradient rule; a fractional one lifts an integer t to
-- float32. Also `t:pow(p)`; in place: `t:pow_(p)`.
-- @function dle.pow
-- @param t tensor (or a number base when p is a tensor)
-- @param p number or tensor
-- @treturn dle.Tensor
-- @usage local sq = x:pow(2)

--- In-place pow: writes t ^ p into t (in t's dtype) and returns t.
-- @function Tensor:pow_
-- @param p number or tensor
-- @treturn dle.Tensor t

--- Clamps t into [lo, hi] elementwise; either bound may be nil (no bound on that side).
-- Also `t:clamp(lo, hi)` and `t:clip(lo, hi)`; in place: `t:clamp_(lo, hi)`. The gradient is 1
-- inside the bounds, 0 where clamped.
-- @function dle.clamp
-- @tparam dle.Tensor t
-- @param[opt] lo lower bound (number or nil)
-- @param[opt] hi upper bound (number or nil)
-- @treturn dle.Tensor
-- @usage local y = x:clamp(0, 6)   -- relu6

--- In-place clamp: clamps t into [lo, hi] (either may be nil) and returns t.
-- @function Tensor:clamp_
-- @param[opt] lo number
-- @param[opt] hi number
-- @treturn dle.Tensor t

--- Returns the bool tensor of a == b elementwise, broadcasting.
-- a or b may be a Lua number. Also `a:eq(b)`. Not differentiable. (Lua's `==` on tensors tests
-- identity, not values: use this.)
-- @function dle.eq
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor bool

--- Returns the bool tensor of a ~= b elementwise, broadcasting.
-- a or b may be a Lua number. Also `a:ne(b)`. Not differentiable. (Lua's `==` on tensors tests
-- identity, not values: use this.)
-- @function dle.ne
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor bool

--- Returns the bool tensor of a < b elementwise, broadcasting.
-- a or b may be a Lua number. Also `a:lt(b)`. Not differentiable. (Lua's `==` on tensors tests
-- identity, not values: use this.)
-- @function dle.lt
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor bool

--- Returns the bool tensor of a <= b elementwise, broadcasting.
-- a or b may be a Lua number. Also `a:le(b)`. Not differentiable. (Lua's `==` on tensors tests
-- identity, not values: use this.)
-- @function dle.le
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor bool

--- Returns the bool tensor of a > b elementwise, broadcasting.
-- a or b may be a Lua number. Also `a:gt(b)`. Not differentiable. (Lua's `==` on tensors tests
-- identity, not values: use this.)
-- @function dle.gt
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor bool

--- Returns the bool tensor of a >= b elementwise, broadcasting.
-- a or b may be a Lua number. Also `a:ge(b)`. Not differentiable. (Lua's `==` on tensors tests
-- identity, not values: use this.)
-- @function dle.ge
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor bool

--- Picks elementwise from a where cond is true, else from b, broadcasting all three.
-- cond must be a bool tensor (an error names `where` otherwise); a or b may be a Lua number, which
-- takes the other side's dtype (a fractional number with an integer tensor gives float32).
-- Differentiable in a and b. The method form is PyTorch's: `x:where(cond, y)` (see Tensor:where).
-- @function dle.where
-- @tparam dle.Tensor cond bool
-- @param a tensor or number (where cond is true)
-- @param b tensor or number (where cond is false)
-- @treturn dle.Tensor
-- @usage local y = dle.where(x:gt(0), x, 0)   -- relu

--- x:where(cond, y): x where cond is true, else y (PyTorch's method form of where(cond, x, y)).
-- cond is a bool tensor; y a tensor or a number; all three broadcast.
-- @function Tensor:where
-- @tparam dle.Tensor cond bool
-- @param y tensor or number (where cond is false)
-- @treturn dle.Tensor
-- @usage local y = x:where(x:gt(0), 0)   -- relu

--- Rounds t toward zero elementwise (same dtype; integers unchanged). No gradient flows through it.
-- Also `t:trunc()`; in place: `t:trunc_()`.
-- @function dle.trunc
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place trunc: writes trunc(t) into t (in t's dtype) and returns t.
-- @function Tensor:trunc_
-- @treturn dle.Tensor t

--- Returns the fractional part t - trunc(t) elementwise, with t's sign (floats only: an integer tensor is an error).
-- Also `t:frac()`; in place: `t:frac_()`.
-- @function dle.frac
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place frac: writes frac(t) into t (in t's dtype) and returns t.
-- @function Tensor:frac_
-- @treturn dle.Tensor t

--- Returns the tangent of t (radians) elementwise.
-- Integer inputs give float32.
-- Also `t:tan()`; in place: `t:tan_()`.
-- @function dle.tan
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place tan: writes tan(t) into t (in t's dtype) and returns t.
-- @function Tensor:tan_
-- @treturn dle.Tensor t

--- Returns the arcsine of t elementwise, in [-pi/2, pi/2] (NaN outside [-1, 1]).
-- Integer inputs give float32.
-- Also `t:asin()`; in place: `t:asin_()`.
-- @function dle.asin
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place asin: writes asin(t) into t (in t's dtype) and returns t.
-- @function Tensor:asin_
-- @treturn dle.Tensor t

--- Returns the arccosine of t elementwise, in [0, pi] (NaN outside [-1, 1]).
-- Integer inputs give float32.
-- Also `t:acos()`; in place: `t:acos_()`.
-- @function dle.acos
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place acos: writes acos(t) into t (in t's dtype) and returns t.
-- @function Tensor:acos_
-- @treturn dle.Tensor t

--- Returns the arctangent of t elementwise, in (-pi/2, pi/2).
-- Integer inputs give float32.
-- Also `t:atan()`; in place: `t:atan_()`.
-- @function dle.atan
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place atan: writes atan(t) into t (in t's dtype) and returns t.
-- @function Tensor:atan_
-- @treturn dle.Tensor t

--- Returns the hyperbolic sine of t elementwise.
-- Integer inputs give float32.
-- Also `t:sinh()`; in place: `t:sinh_()`.
-- @function dle.sinh
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place sinh: writes sinh(t) into t (in t's dtype) and returns t.
-- @function Tensor:sinh_
-- @treturn dle.Tensor t

--- Returns the hyperbolic cosine of t elementwise.
-- Integer inputs give float32.
-- Also `t:cosh()`; in place: `t:cosh_()`.
-- @function dle.cosh
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place cosh: writes cosh(t) into t (in t's dtype) and returns t.
-- @function Tensor:cosh_
-- @treturn dle.Tensor t

--- Returns the inverse hyperbolic sine of t elementwise.
-- Integer inputs give float32.
-- Also `t:asinh()`; in place: `t:asinh_()`.
-- @function dle.asinh
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place asinh: writes asinh(t) into t (in t's dtype) and returns t.
-- @function Tensor:asinh_
-- @treturn dle.Tensor t

--- Returns the inverse hyperbolic cosine of t elementwise (NaN below 1).
-- Integer inputs give float32.
-- Also `t:acosh()`; in place: `t:acosh_()`.
-- @function dle.acosh
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place acosh: writes acosh(t) into t (in t's dtype) and returns t.
-- @function Tensor:acosh_
-- @treturn dle.Tensor t

--- Returns the inverse hyperbolic tangent of t elementwise (+-inf at +-1, NaN beyond).
-- Integer inputs give float32.
-- Also `t:atanh()`; in place: `t:atanh_()`.
-- @function dle.atanh
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place atanh: writes atanh(t) into t (in t's dtype) and returns t.
-- @function Tensor:atanh_
-- @treturn dle.Tensor t

--- Returns the error function of t elementwise (float32 uses an AVX2 kernel where the CPU has one).
-- Integer inputs give float32.
-- Also `t:erf()`; in place: `t:erf_()`.
-- @function dle.erf
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place erf: writes erf(t) into t (in t's dtype) and returns t.
-- @function Tensor:erf_
-- @treturn dle.Tensor t

--- Returns the complementary error function 1 - erf(t) elementwise, accurate where erf(t) is near 1.
-- Integer inputs give float32.
-- Also `t:erfc()`; in place: `t:erfc_()`.
-- @function dle.erfc
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place erfc: writes erfc(t) into t (in t's dtype) and returns t.
-- @function Tensor:erfc_
-- @treturn dle.Tensor t

--- Returns the inverse error function of t elementwise: +-inf at +-1, NaN outside [-1, 1].
-- Integer inputs give float32.
-- Also `t:erfinv()`; in place: `t:erfinv_()`.
-- @function dle.erfinv
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place erfinv: writes erfinv(t) into t (in t's dtype) and returns t.
-- @function Tensor:erfinv_
-- @treturn dle.Tensor t

--- Returns the base-2 logarithm of t elementwise (-inf at 0, NaN below).
-- Integer inputs give float32.
-- Also `t:log2()`; in place: `t:log2_()`.
-- @function dle.log2
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place log2: writes log2(t) into t (in t's dtype) and returns t.
-- @function Tensor:log2_
-- @treturn dle.Tensor t

--- Returns the base-10 logarithm of t elementwise (-inf at 0, NaN below).
-- Integer inputs give float32.
-- Also `t:log10()`; in place: `t:log10_()`.
-- @function dle.log10
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place log10: writes log10(t) into t (in t's dtype) and returns t.
-- @function Tensor:log10_
-- @treturn dle.Tensor t

--- Returns 2 to the power of t elementwise.
-- Integer inputs give float32.
-- Also `t:exp2()`; in place: `t:exp2_()`.
-- @function dle.exp2
-- @tparam dle.Tensor t
-- @treturn dle.Tensor

--- In-place exp2: writes exp2(t) into t (in t's dtype) and returns t.
-- @function Tensor:exp2_
-- @treturn dle.Tensor t

--- Returns a bool tensor, true where t is NaN (integer tensors are never NaN nor infinite).
-- Also `t:isnan()`. Not differentiable; there is no in-place form.
-- @function dle.isnan
-- @tparam dle.Tensor t
-- @treturn dle.Tensor bool

--- Returns a bool tensor, true where t is +inf or -inf (integer tensors are never NaN nor infinite).
-- Also `t:isinf()`. Not differentiable; there is no in-place form.
-- @function dle.isinf
-- @tparam dle.Tensor t
-- @treturn dle.Tensor bool

--- Returns a bool tensor, true where t is neither NaN nor infinite (integer tensors are never NaN nor infinite).
-- Also `t:isfinite()`. Not differentiable; there is no in-place form.
-- @function dle.isfinite
-- @tparam dle.Tensor t
-- @treturn dle.Tensor bool

--- Replaces NaN, +inf and -inf in t (PyTorch's nan_to_num): NaN by nan (default 0), +inf by
-- posinf and -inf by neginf (defaults: the largest and lowest finite value of t's dtype). The values
-- are given in order or by name; integer tensors come back unchanged. The gradient passes where t
-- is finite and is 0 elsewhere. Also `t:nan_to_num(...)`; in place: `t:nan_to_num_(...)`.
-- @function dle.nan_to_num
-- @tparam dle.Tensor t
-- @param[opt] nan number, or an options table `{nan =, posinf =, neginf =}`
-- @tparam[opt] number posinf
-- @tparam[opt] number neginf
-- @treturn dle.Tensor
-- @usage local y = x:nan_to_num({nan = 0, posinf = 1e4})

--- In-place nan_to_num: writes nan_to_num(t, ...) into t and returns t.
-- @function Tensor:nan_to_num_
-- @param[opt] nan number or options table
-- @tparam[opt] number posinf
-- @tparam[opt] number neginf
-- @treturn dle.Tensor t

--- Returns the angle atan(a / b) in the quadrant of the point (b, a) elementwise, broadcasting, in
-- [-pi, pi]. Integer inputs give float32.
-- a or b may be a Lua number (at least one must be a tensor). Also `a:atan2(b)`; in place:
-- `a:atan2_(b)`.
-- @function dle.atan2
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor
-- @usage local r = x:atan2(b)

--- In-place atan2: writes atan2(a, b) into a (in a's dtype) and returns a.
-- b must broadcast to a's shape.
-- @function Tensor:atan2_
-- @param b tensor or number
-- @treturn dle.Tensor a

--- Returns the remainder of a / b with the sign of a (C's fmod, rounding the quotient toward zero),
-- broadcasting. Integer tensors stay integer; an integer remainder by 0 is 0 (defined, not an
-- error).
-- a or b may be a Lua number (at least one must be a tensor). Also `a:fmod(b)`; in place:
-- `a:fmod_(b)`.
-- @function dle.fmod
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor
-- @usage local r = x:fmod(3)

--- In-place fmod: writes fmod(a, b) into a (in a's dtype) and returns a.
-- b must broadcast to a's shape.
-- @function Tensor:fmod_
-- @param b tensor or number
-- @treturn dle.Tensor a

--- Returns the remainder of a / b with the sign of b (Python's %, PyTorch's remainder),
-- broadcasting; also the operator `a % b`. Integer tensors stay integer; an integer remainder by 0
-- is 0 (defined, as NumPy; PyTorch raises).
-- a or b may be a Lua number (at least one must be a tensor). Also `a:remainder(b)`; in place:
-- `a:remainder_(b)`.
-- @function dle.remainder
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor
-- @usage local r = x:remainder(3)

--- In-place remainder: writes remainder(a, b) into a (in a's dtype) and returns a.
-- b must broadcast to a's shape.
-- @function Tensor:remainder_
-- @param b tensor or number
-- @treturn dle.Tensor a

--- Returns floor(a / b) elementwise (PyTorch's floor rounding), broadcasting; also the operator `a
-- // b`. Integer tensors stay integer: integer division by 0 gives 0 (defined, as NumPy) and the
-- lowest int64 divided by -1 wraps to itself. Not differentiable.
-- a or b may be a Lua number (at least one must be a tensor). Also `a:floor_divide(b)`; in place:
-- `a:floor_divide_(b)`.
-- @function dle.floor_divide
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor
-- @usage local r = x:floor_divide(2)

--- In-place floor_divide: writes floor_divide(a, b) into a (in a's dtype) and returns a.
-- b must broadcast to a's shape.
-- @function Tensor:floor_divide_
-- @param b tensor or number
-- @treturn dle.Tensor a

--- Returns the larger of a and b elementwise, broadcasting; a NaN loses to a number (NaN only where
-- both are NaN). Ties and a NaN b give the gradient to a (as PyTorch).
-- a or b may be a Lua number (at least one must be a tensor). Also `a:fmax(b)`; in place:
-- `a:fmax_(b)`.
-- @function dle.fmax
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor
-- @usage local r = x:fmax(0)

--- In-place fmax: writes fmax(a, b) into a (in a's dtype) and returns a.
-- b must broadcast to a's shape.
-- @function Tensor:fmax_
-- @param b tensor or number
-- @treturn dle.Tensor a

--- Returns the smaller of a and b elementwise, broadcasting; a NaN loses to a number (NaN only
-- where both are NaN). Ties and a NaN b give the gradient to a (as PyTorch).
-- a or b may be a Lua number (at least one must be a tensor). Also `a:fmin(b)`; in place:
-- `a:fmin_(b)`.
-- @function dle.fmin
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor
-- @usage local r = x:fmin(0)

--- In-place fmin: writes fmin(a, b) into a (in a's dtype) and returns a.
-- b must broadcast to a's shape.
-- @function Tensor:fmin_
-- @param b tensor or number
-- @treturn dle.Tensor a

--- Returns sqrt(a^2 + b^2) elementwise without overflow, broadcasting. Integer inputs give float32.
-- a or b may be a Lua number (at least one must be a tensor). Also `a:hypot(b)`; in place:
-- `a:hypot_(b)`.
-- @function dle.hypot
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor
-- @usage local r = x:hypot(b)

--- In-place hypot: writes hypot(a, b) into a (in a's dtype) and returns a.
-- b must broadcast to a's shape.
-- @function Tensor:hypot_
-- @param b tensor or number
-- @treturn dle.Tensor a

--- Returns log(exp(a) + exp(b)) elementwise without overflow, broadcasting. Integer inputs give
-- float32.
-- a or b may be a Lua number (at least one must be a tensor). Also `a:logaddexp(b)`; in place:
-- `a:logaddexp_(b)`.
-- @function dle.logaddexp
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor
-- @usage local r = x:logaddexp(b)

--- In-place logaddexp: writes logaddexp(a, b) into a (in a's dtype) and returns a.
-- b must broadcast to a's shape.
-- @function Tensor:logaddexp_
-- @param b tensor or number
-- @treturn dle.Tensor a

--- Returns |a| with the sign of b elementwise (the sign bit: -0 counts as negative), broadcasting.
-- Integer inputs give float32; no gradient flows to b.
-- a or b may be a Lua number (at least one must be a tensor). Also `a:copysign(b)`; in place:
-- `a:copysign_(b)`.
-- @function dle.copysign
-- @param a tensor or number
-- @param b tensor or number
-- @treturn dle.Tensor
-- @usage local r = x:copysign(-1)

--- In-place copysign: writes copysign(a, b) into a (in a's dtype) and returns a.
-- b must broadcast to a's shape.
-- @function Tensor:copysign_
-- @param b tensor or number
-- @treturn dle.Tensor a
