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

A.ReLU = simple("ReLU", "relu")
A.GELU = simple("GELU", "gelu")
A.Tanh = simple("Tanh", "tanh")
A.Sigmoid = simple("Sigmoid", "sigmoid")
A.SiLU = simple("SiLU", "silu")

--- Identity(): returns its input.
A.Identity = Module:extend("Identity")
function A.Identity:forward(x) return x end

A.Softmax = Module:extend("Softmax")
--- Softmax(d): softmax along dimension d (default -1).
function A.Softmax:init(d) self.dim = check.integer(d or -1, "Softmax", "dim") end
function A.Softmax:forward(x)
  check.tensor(x, "Softmax", "input")
  return x:softmax(self.dim)
end
function A.Softmax:extra_repr() return "dim=" .. self.dim end

A.LogSoftmax = Module:extend("LogSoftmax")
--- LogSoftmax(d): log_softmax along dimension d (default -1).
function A.LogSoftmax:init(d) self.dim = check.integer(d or -1, "LogSoftmax", "dim") end
function A.LogSoftmax:forward(x)
  check.tensor(x, "LogSoftmax", "input")
  return x:log_softmax(self.dim)
end
function A.LogSoftmax:extra_repr() return "dim=" .. self.dim end

return A
