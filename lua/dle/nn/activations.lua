--- Activation layers: ReLU, GELU, Tanh, Sigmoid, SiLU, Softmax(d), LogSoftmax(d), Identity.
-- Small parameter-free classes share this file.
local Module = require "dle.nn.module"
local check = require "dle.check"

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
  --- Softmax(d) / LogSoftmax(d): softmax / log_softmax along dimension d (default -1).
  function cls:init(d) self.dim = check.integer(d or -1, name, "dim") end
  function cls:forward(x)
    check.tensor(x, name, "input")
    return x[method](x, self.dim)
  end
  function cls:extra_repr() return "dim=" .. self.dim end
  return cls
end

A.Softmax = along_dim("Softmax", "softmax")
A.LogSoftmax = along_dim("LogSoftmax", "log_softmax")

return A
