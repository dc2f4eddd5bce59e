--- Argument checks shared by dle.nn's functional files and layers: an error names the function
-- and the offending argument or shape, at the caller's level.
local dle = require "dle"

local M = {}

--- "{2,3}" for a tensor of shape {2, 3}.
function M.shape_str(t) return "{" .. table.concat(t:shape(), ",") .. "}" end

--- Raises "<fname>: <argname> must be a tensor, got <type>" at the level of fname's caller when t
-- is not a tensor (for a check made directly inside fname).
function M.check_tensor(fname, argname, t)
  if not dle.is_tensor(t) then
    error(fname .. ": " .. argname .. " must be a tensor, got " .. type(t), 3)
  end
end

return M
