--- dle: a deep learning engine in C, scripted in Lua 5.4.
-- `local dle = require "dle"` gives the whole public API (see API.md): tensors and their
-- operations (from the native module dle.core), plus the Lua-level helpers loaded below.
local core = require "dle.core"

local dle = {}
for name, value in pairs(core) do dle[name] = value end
dle.core = core
dle.version = "0.1.0"

-- Lua-level parts; each adds its functions to `dle` and its methods to dle.Tensor.
require("dle.tensor")(dle)
require("dle.einsum")(dle)
require("dle.autograd")(dle)

return dle
