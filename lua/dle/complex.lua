--- Complex tensors (complex64, complex128; aliases "cfloat", "cdouble"): torch.complex, real, imag,
-- conj, angle, is_complex, as compositions of the complex views dle.view_as_real /
-- dle.view_as_complex (bindings/lua_complex.c) and ops with complex kernels (add, sub, mul, div,
-- neg, exp, log, abs, eq, ne, where, sum, mean, matmul). Other ops refuse complex inputs with an
-- error naming the op. In Lua an element of a complex tensor is the pair {re, im}: t:item(),
-- t:totable() and t[i] give such tables. Autograd follows all of these with PyTorch's convention
-- (a complex .grad is dL/d(re) + i dL/d(im) of a real loss; docs/complex_fft.md).
-- @module complex

local check = require("dle.check")

local M = {}

function M.install(dle)
  local Tensor = dle.Tensor
  local COMPLEX = {complex64 = true, complex128 = true}
  local function is_complex(t) return COMPLEX[t:dtype()] == true end

  --- t:is_complex() / dle.is_complex(t): true for complex64 and complex128 tensors.
  function Tensor.is_complex(t)
    check.tensor(t, "is_complex", "input")
    return is_complex(t)
  end

  --- dle.complex(real, imag): the complex tensor real + i imag (torch.complex); real and imag are
  -- float32 (complex64) or float64 (complex128) tensors of one dtype, broadcast together.
  function dle.complex(re, im)
    check.tensor(re, "complex", "real")
    check.tensor(im, "complex", "imag")
    local dt = re:dtype()
    if (dt ~= "float32" and dt ~= "float64") or im:dtype() ~= dt then
      check.error(string.format("complex: real and imag must both be float32 or both float64, got %s and %s",
        dt, im:dtype()))
    end
    local ok, a, b = pcall(dle.broadcast_tensors, re, im)
    if not ok then
      check.error(string.format("complex: real of shape %s and imag of shape %s do not broadcast",
        check.shape_str(re), check.shape_str(im)))
    end
    re, im = a, b
    return dle.view_as_complex(dle.stack({re, im}, -1))
  end

  -- The real or imaginary part of z as a view of its storage (part 1 or 2 of view_as_real).
  local function part(z, k) return dle.view_as_real(z):select(-1, k) end

  --- t:real() / dle.real(t): the real part, a view sharing t's storage (PyTorch's t.real); a real
  -- tensor itself.
  function Tensor.real(t)
    check.tensor(t, "real", "input")
    if not is_complex(t) then return t end
    return part(t, 1)
  end

  --- t:imag() / dle.imag(t): the imaginary part, a view sharing t's storage (PyTorch's t.imag);
  -- an error for a real tensor, as in PyTorch.
  function Tensor.imag(t)
    check.tensor(t, "imag", "input")
    if not is_complex(t) then
      check.error(string.format("imag: expected a complex tensor, got %s of shape %s", t:dtype(),
        check.shape_str(t)))
    end
    return part(t, 2)
  end

  --- t:conj() / dle.conj(t): the complex conjugate (a new tensor); a real tensor itself.
  function Tensor.conj(t)
    check.tensor(t, "conj", "input")
    return dle.core._conj(t)
  end

  --- t:angle() / dle.angle(t): the argument atan2(imag, real) of each element, real; for a real
  -- tensor pi where it is negative, 0 elsewhere and nan for nan (PyTorch's angle). Its gradient
  -- at 0 is 0, as PyTorch's (atan2's would be nan there).
  function Tensor.angle(t)
    check.tensor(t, "angle", "input")
    if is_complex(t) then
      local re, im = part(t, 1), part(t, 2)
      local at0 = t:eq(0)
      -- the value atan2 gives at 0 (signed zeros: 0 or +-pi), with no gradient; elsewhere atan2
      -- of parts moved off 0 where it is 0, so no nan reaches the gradient through where
      local v0 = dle.atan2(im:detach(), re:detach())
      local safe = dle.atan2(dle.where(at0, 0, im), dle.where(at0, 1, re))
      return dle.where(at0, v0, safe)
    end
    if not t:is_floating_point() then t = t:to("float32") end
    local pi = dle.full_like(t, math.pi)
    return dle.where(dle.isnan(t), t, dle.where(t:lt(0), pi, dle.zeros_like(t)))
  end

  for _, name in ipairs({"is_complex", "real", "imag", "conj", "angle"}) do dle[name] = Tensor[name] end
end

return M
