--- Activation layers: ReLU, GELU, Tanh, Sigmoid, SiLU, Softmax(d), LogSoftmax(d), Softmin(d),
-- Identity; LeakyReLU, ELU, SELU, CELU, Softplus, Softsign, Mish, Hardswish, Hardsigmoid,
-- Hardtanh, ReLU6, GLU, LogSigmoid, Tanhshrink, Softshrink, Hardshrink (calling the
-- dle.nn.functional function of the same name with the constructor's arguments); PReLU (learnable
-- slopes). Small classes share this file.
local dle = require("dle")
local Module = require("dle.nn.module")
local F = require("dle.nn.functional")
local check = require("dle.check")

local A = {}

local function simple(name, method)
  local cls = Module:extend(name)
  --- applies the activation elementwise
  cls.forward = function(_, x)
    check.tensor(x, name, "input")
    return x[method](x)
  end
  return cls
end

for name, method in pairs({ReLU = "relu", GELU = "gelu", Tanh = "tanh", Sigmoid = "sigmoid", SiLU = "silu"}) do
  A[name] = simple(name, method)
end

--- Identity(): returns its input.
A.Identity = Module:extend("Identity")
function A.Identity:forward(x) return x end

-- A layer applying a tensor method along one dimension.
local function along_dim(name, method)
  local cls = Module:extend(name)
  --- Softmax(d) / LogSoftmax(d) / Softmin(d): softmax / log_softmax / softmin along dimension d
  -- (default -1).
  function cls:init(d) self.dim = check.integer(d or -1, name, "dim") end
  function cls:forward(x)
    check.tensor(x, name, "input")
    if type(method) == "function" then return method(x, self.dim) end
    return x[method](x, self.dim)
  end
  function cls:extra_repr() return "dim=" .. self.dim end
  return cls
end

A.Softmax = along_dim("Softmax", "softmax")
A.LogSoftmax = along_dim("LogSoftmax", "log_softmax")
A.Softmin = along_dim("Softmin", F.softmin)

-- A layer calling dle.nn.functional's fname with x and the constructor's arguments, named in
-- `args` (each a number, an integer for "dim"; nil keeps the function's default). Arguments are
-- checked when the layer is made, by calling the function once on a 2-element float64 tensor.
local function with_args(name, fname, args)
  local cls = Module:extend(name)
  --- makes the layer; its arguments are those of the functional form after the input
  function cls:init(...)
    local vals = table.pack(...)
    for i, a in ipairs(args) do
      if vals[i] ~= nil then
        if a == "dim" then check.integer(vals[i], name, a) else check.number(vals[i], name, a) end
      end
    end
    self._args = vals
    check.call(name, F[fname], dle.zeros(2, 2, {dtype = "float64"}), table.unpack(vals, 1, #args))
  end
  --- applies the activation
  function cls:forward(x) return F[fname](x, table.unpack(self._args, 1, #args)) end
  function cls:extra_repr()
    local parts = {}
    for i, a in ipairs(args) do
      if self._args[i] ~= nil then parts[#parts + 1] = a .. "=" .. tostring(self._args[i]) end
    end
    return table.concat(parts, ", ")
  end
  return cls
end

for name, spec in pairs({
  LeakyReLU = {"leaky_relu", "negative_slope"}, ELU = {"elu", "alpha"}, SELU = {"selu"}, CELU = {"celu", "alpha"},
  Softplus = {"softplus", "beta", "threshold"}, Softsign = {"softsign"}, Mish = {"mish"},
  Hardswish = {"hardswish"}, Hardsigmoid = {"hardsigmoid"}, Hardtanh = {"hardtanh", "min_val", "max_val"},
  ReLU6 = {"relu6"}, GLU = {"glu", "dim"}, LogSigmoid = {"logsigmoid"}, Tanhshrink = {"tanhshrink"},
  Softshrink = {"softshrink", "lambd"}, Hardshrink = {"hardshrink", "lambd"},
}) do
  A[name] = with_args(name, spec[1], {table.unpack(spec, 2)})
end

--- PReLU(num_parameters = 1, init = 0.25, opts): leaky ReLU with learnable slopes: one shared
-- slope, or one per channel (dimension 2 of the input) when num_parameters = C; parameter
-- `weight` {num_parameters} filled with init.
-- @param opts optional {dtype = "float32"}
A.PReLU = Module:extend("PReLU")
--- PReLU(num_parameters = 1, init = 0.25, opts): makes the slopes (see above).
function A.PReLU:init(num_parameters, init, opts)
  opts = check.layer_args("PReLU", opts, {"dtype"}, "num_parameters >= 1", num_parameters or 1)
  init = init == nil and 0.25 or check.number(init, "PReLU", "init")
  self.num_parameters = num_parameters or 1
  self.weight = dle.full({self.num_parameters}, init, {dtype = opts.dtype or "float32"}):requires_grad_()
end
--- x where x > 0, else weight * x (F.prelu)
function A.PReLU:forward(x) return F.prelu(x, self.weight) end
function A.PReLU:extra_repr() return "num_parameters=" .. self.num_parameters end

return A
