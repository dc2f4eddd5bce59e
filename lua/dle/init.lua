--- dle: a deep learning engine in C, scripted in Lua 5.4.
-- `local dle = require "dle"` gives the whole public API (see API.md): tensors and their
-- operations (from the native module dle.core), plus the Lua-level helpers loaded below.
local core = require "dle.core"

-- dle.core's helpers for the Lua packages stay in dle.core; everything else is public.
local internal = {read_idx = true, memmap = true, record_custom = true,
                  set_tangent = true, tangent = true, sgd_step = true, adagrad_step = true,
                  rmsprop_step = true, adam_step = true, adamw_step = true}
local dle = {}
for name, value in pairs(core) do
  if not internal[name] and name:sub(1, 1) ~= "_" then dle[name] = value end
end
dle.core = core
dle.version = "0.1.0"
-- Registered before the subpackages load, so they can `require "dle"` themselves.
package.loaded["dle"] = dle

-- Lua-level parts; each adds its functions to `dle` and its methods to dle.Tensor.
require("dle.tensor")(dle)
require("dle.einsum")(dle)
require("dle.autograd")(dle)

-- Subpackages: dle.nn, dle.optim, dle.data, and the file formats (dle.save/load, npy,
-- safetensors) in dle.io; each is also requireable on its own.
dle.nn = require("dle.nn")
dle.optim = require("dle.optim")
dle.data = require("dle.data")
require("dle.io")(dle)

return dle
