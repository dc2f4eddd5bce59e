--- lerp, addcmul and addcdiv: PyTorch's ternary pointwise ops, as compositions of elementwise
-- ops (so autograd, broadcasting and dtype promotion come from those ops).

local check = require("dle.check")

local M = {}

function M.install(dle)
  local Tensor = dle.Tensor

  -- v when it is a tensor (or a number, when numbers are allowed); else an error naming fn and what.
  local function arg(v, fn, what, numbers)
    if dle.is_tensor(v) or (numbers and type(v) == "number") then return v end
    check.error(string.format("%s: %s must be a tensor%s, got %s", fn, what, numbers and " or a number" or "",
                              check.typename(v)))
  end

  -- input + d (or input:add_(d) in place), d = delta(fn, ...) the amount added.
  local function apply(fn, inplace, delta, input, ...)
    arg(input, fn, "input")
    local d = delta(fn, input, ...)
    return check.call(fn, function() if inplace then return input:add_(d) end return input + d end)
  end

  local function lerp_delta(fn, input, stop, weight)
    arg(stop, fn, "end")
    arg(weight, fn, "weight", true)
    return check.call(fn, function() return (stop - input) * weight end)
  end

  -- value * (t1 op t2), value from the options {value = number} (default 1)
  local function scaled(op)
    return function(fn, _, t1, t2, opts)
      arg(t1, fn, "tensor1")
      arg(t2, fn, "tensor2")
      opts = check.options(opts, fn, {"value"})
      local value = opts.value == nil and 1 or check.number(opts.value, fn, "value")
      return check.call(fn, function()
        local p = op(t1, t2)
        return value == 1 and p or p * value
      end)
    end
  end
  local addcmul_delta = scaled(function(a, b) return a * b end)
  local addcdiv_delta = scaled(function(a, b) return a / b end)

  --- t:lerp(end, weight) / dle.lerp(input, end, weight): input + weight * (end - input)
  -- elementwise (linear interpolation), broadcasting; weight is a number or a tensor.
  -- Differentiable in every tensor argument.
  function Tensor.lerp(input, stop, weight) return apply("lerp", false, lerp_delta, input, stop, weight) end
  --- t:lerp_(end, weight): lerp written into t; returns t.
  function Tensor.lerp_(input, stop, weight) return apply("lerp_", true, lerp_delta, input, stop, weight) end

  --- t:addcmul(t1, t2, {value = v}) / dle.addcmul(input, t1, t2, opts): input + v * t1 * t2
  -- elementwise, broadcasting (v defaults to 1).
  function Tensor.addcmul(input, t1, t2, opts) return apply("addcmul", false, addcmul_delta, input, t1, t2, opts) end
  --- t:addcmul_(t1, t2, {value = v}): addcmul written into t; returns t.
  function Tensor.addcmul_(input, t1, t2, opts) return apply("addcmul_", true, addcmul_delta, input, t1, t2, opts) end

  --- t:addcdiv(t1, t2, {value = v}) / dle.addcdiv(input, t1, t2, opts): input + v * t1 / t2
  -- elementwise (true division), broadcasting (v defaults to 1).
  function Tensor.addcdiv(input, t1, t2, opts) return apply("addcdiv", false, addcdiv_delta, input, t1, t2, opts) end
  --- t:addcdiv_(t1, t2, {value = v}): addcdiv written into t; returns t.
  function Tensor.addcdiv_(input, t1, t2, opts) return apply("addcdiv_", true, addcdiv_delta, input, t1, t2, opts) end

  dle.lerp, dle.addcmul, dle.addcdiv = Tensor.lerp, Tensor.addcmul, Tensor.addcdiv
end

return M
