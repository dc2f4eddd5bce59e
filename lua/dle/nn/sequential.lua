--- dle.nn.Sequential(m1, m2, ...): applies modules in order; submodules are named "1", "2", ...
local Module = require("dle.nn.module")
local check = require("dle.check")

local Sequential = Module:extend("Sequential")

--- @param ... modules, or one plain list of modules
function Sequential:init(...)
  local mods = {...}
  if #mods == 1 and not Module.is_module(mods[1]) and type(mods[1]) == "table" then mods = mods[1] end
  self._n = 0
  for i, m in ipairs(mods) do
    if not Module.is_module(m) then
      check.error("Sequential: argument " .. i .. " is not a module (" .. type(m) .. ")")
    end
    self:add(m)
  end
end

--- Appends a module.
-- @param m module
-- @return self
function Sequential:add(m)
  if not Module.is_module(m) then check.error("Sequential:add: expected a module, got " .. type(m)) end
  local n = self._n + 1
  self._n = n
  self[n] = m
  return self
end

--- Number of modules (also #seq).
function Sequential:size() return self._n end

--- @param x input of the first module
-- @return output of the last module
function Sequential:forward(x)
  for i = 1, self._n do x = self[i](x) end
  return x
end

return Sequential
