--- dle.check: argument checks for the Lua parts of dle. A wrong argument to a public function
-- raises an error naming the function, the argument and what was given ("relu: input must be a
-- tensor, got number"), reported at the caller's line, instead of a Lua runtime error from inside
-- dle ("attempt to index a number value (local 'x')").
-- Each check returns its value, so `x = check.tensor(x, "relu", "input")` reads naturally.
local core = require "dle.core"

local check = {}

--- "{2,3}" for a tensor of shape {2, 3}, as messages show shapes.
function check.shape_str(t) return "{" .. table.concat(t:shape(), ",") .. "}" end

--- The type of v as messages show it: "dle.Tensor" for tensors, else Lua's type name.
function check.typename(v)
  if core.is_tensor(v) then return "dle.Tensor" end
  return type(v)
end

local function fail(fn, what, expected, v)
  -- level 4: fail <- check.<kind> <- the public function <- its caller
  error(string.format("%s: %s must be %s, got %s", fn, what, expected,
    type(v) == "number" and "number " .. tostring(v) or check.typename(v)), 4)
end

--- v must be a tensor.
function check.tensor(v, fn, what)
  if not core.is_tensor(v) then fail(fn, what, "a tensor", v) end
  return v
end

--- v must be a tensor or nil.
function check.opt_tensor(v, fn, what)
  if v ~= nil and not core.is_tensor(v) then fail(fn, what, "a tensor or nil", v) end
  return v
end

--- v must be an integer (a float with an integer value is accepted and converted).
function check.integer(v, fn, what)
  local i = math.tointeger(v)
  if not i then fail(fn, what, "an integer", v) end
  return i
end

--- v must be an integer >= min.
function check.integer_min(v, fn, what, min)
  local i = math.tointeger(v)
  if not i or i < min then fail(fn, what, "an integer >= " .. min, v) end
  return i
end

--- v must be a number (not NaN).
function check.number(v, fn, what)
  if type(v) ~= "number" or v ~= v then fail(fn, what, "a number", v) end
  return v
end

--- v must be a number (not NaN) for which ok(v) holds; expected says which, as messages show it
-- ("a finite number > 0").
function check.number_that(v, fn, what, expected, ok)
  if type(v) ~= "number" or v ~= v or not ok(v) then fail(fn, what, expected, v) end
  return v
end

--- v must be a boolean.
function check.boolean(v, fn, what)
  if type(v) ~= "boolean" then fail(fn, what, "a boolean", v) end
  return v
end

--- v must be a string.
function check.string(v, fn, what)
  if type(v) ~= "string" then fail(fn, what, "a string", v) end
  return v
end

--- v must be a function (or a callable table).
function check.callable(v, fn, what)
  if not check.is_callable(v) then fail(fn, what, "a function", v) end
  return v
end

--- Whether v is a function or a table whose metatable has __call (an nn.Module).
function check.is_callable(v)
  local mt = type(v) == "table" and getmetatable(v)
  return type(v) == "function" or (mt and mt.__call ~= nil) or false
end

--- v must be a table (not a tensor), or nil when optional is true.
function check.table(v, fn, what, optional)
  if optional and v == nil then return v end
  if type(v) ~= "table" then fail(fn, what, optional and "a table or nil" or "a table", v) end
  return v
end

return check
