--- dle.nn.Flatten(start_dim = 2, end_dim = -1): merges dimensions start..end (keeps the batch dim 1).
local Module = require("dle.nn.module")
local check = require("dle.check")

local Flatten = Module:extend("Flatten")

--- @param start_dim default 2
-- @param end_dim default -1
function Flatten:init(start_dim, end_dim)
  self.start_dim = check.integer(start_dim or 2, "Flatten", "start_dim")
  self.end_dim = check.integer(end_dim or -1, "Flatten", "end_dim")
end

--- @param x tensor
-- @return x with dims start..end merged (a view when possible)
function Flatten:forward(x)
  check.tensor(x, "Flatten", "input")
  local nd = x:dim()
  local s = self.start_dim < 0 and nd + 1 + self.start_dim or self.start_dim
  local e = self.end_dim < 0 and nd + 1 + self.end_dim or self.end_dim
  if s < 1 or e > nd or s > e then
    if nd == 0 or s > e then return x end
    check.error("Flatten: dims " .. self.start_dim .. ".." .. self.end_dim .. " out of range for shape {"
                .. table.concat(x:shape(), ",") .. "}")
  end
  local shape, n = {}, 1
  for d = 1, s - 1 do shape[#shape + 1] = x:size(d) end
  for d = s, e do n = n * x:size(d) end
  shape[#shape + 1] = n
  for d = e + 1, nd do shape[#shape + 1] = x:size(d) end
  return x:reshape(shape)
end

function Flatten:extra_repr() return "start_dim=" .. self.start_dim .. ", end_dim=" .. self.end_dim end

return Flatten
