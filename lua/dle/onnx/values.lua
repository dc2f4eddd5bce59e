--- dle.onnx.values: ONNX's non-tensor values as the importer holds them. A sequence is a Lua list
-- of dle tensors marked by V.sequence (ops never change one in place: each returns a new list);
-- an optional holding a value is that value itself (a tensor or a sequence), an empty optional
-- is V.NONE. A model's sequence outputs are returned as such lists, an empty optional as nil.
local dle = require("dle")
local check = require("dle.check")

local V = {}

local Sequence = {__name = "dle.onnx.Sequence"}

--- The empty optional.
V.NONE = setmetatable({}, {__name = "dle.onnx.None", __tostring = function() return "none" end})

--- Marks the Lua list of tensors `list` as a sequence and returns it.
function V.sequence(list) return setmetatable(list, Sequence) end

--- True when v is a sequence.
function V.is_sequence(v) return getmetatable(v) == Sequence end

--- A short description of a value for error messages: "tensor float32 {2,3}", "sequence of 2", ...
function V.describe(v)
  if dle.is_tensor(v) then return ("tensor %s %s"):format(v:dtype(), check.shape_str(v)) end
  if V.is_sequence(v) then return ("sequence of %d"):format(#v) end
  if v == V.NONE then return "an empty optional" end
  return check.typename(v)
end

--- The value given for a graph input or output of ONNX type `ty` (kind "tensor", "sequence",
-- "optional"), as the graph holds it; nil and an error message when v cannot be one.
function V.from_user(v, ty)
  local kind = ty and ty.kind or "tensor"
  -- a list of tensors of one dtype as a sequence; nil and why not
  local function seq(t)
    if type(t) ~= "table" or dle.is_tensor(t) then return nil, V.describe(t) end
    local out = {}
    for i, x in pairs(t) do
      if math.type(i) ~= "integer" or i < 1 or i > #t or not dle.is_tensor(x) then
        return nil, ("a table with %s at [%s]"):format(V.describe(x), tostring(i))
      end
      if x:dtype() ~= t[1]:dtype() then
        return nil, ("tensors of dtypes %s and %s"):format(t[1]:dtype(), x:dtype())
      end
      out[i] = x
    end
    return V.sequence(out)
  end
  if kind == "sequence" then
    local s, got = seq(v)
    if s then return s end
    return nil, "must be a list of tensors of one dtype (an ONNX sequence), got " .. got
  elseif kind == "optional" then
    if v == nil or v == V.NONE then return V.NONE end
    if dle.is_tensor(v) then return v end
    local s, got = seq(v)
    if s then return s end
    return nil, "must be a tensor, a list of tensors of one dtype or nil (an ONNX optional), got " .. got
  end
  if dle.is_tensor(v) then return v end
  return nil, "must be a tensor, got " .. V.describe(v)
end

--- A graph output as the model returns it: an empty optional becomes nil.
function V.to_user(v)
  if v == V.NONE then return nil end
  return v
end

return V
