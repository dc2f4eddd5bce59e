--- dle.rewrite.build: new graph nodes for rules' replacements.
--
--   local B = dle.rewrite.build
--   B.add(a, b)                            -- a node of op add over nodes a and b
--   B.permute(x, {ints = {1, 0}})          -- attrs as the engine reads them (0-based dims)
--   B.const(dle.tensor(2.0))               -- a constant node holding a tensor
--
-- A node's shape and dtype are the engine's: build runs the op once (without recording) on
-- stand-in tensors of its inputs' shapes and dtypes (the values of constants and parameters,
-- elsewhere one broadcast element: zeros, or index_base for integer inputs), so every shape rule
-- and error of the front door applies. A bad call is an error naming build.<op> and the shapes.
local core = require("dle.core")
local check = require("dle.check")
local Nodes = require("dle.graph.node")

local Node, op_ids = Nodes.Node, Nodes.op_ids

local B = {}

-- A tensor standing in for node n when inferring shapes: its value when it has one, else one
-- element broadcast to its shape (no memory of its size).
local function stand_in(n, attrs)
  local v = n:value()
  if v then return v end
  local dt = n._dtype
  local fill = 0
  if dt == "int64" or dt == "int32" then fill = attrs.index_base or 0 end
  local one = core.full({}, fill, {dtype = dt})
  if #n._shape == 0 then return one end
  return one:expand(n._shape)
end

-- The attrs the engine reads (core._graph_attrs); any other key would be dropped without a word,
-- so build.clamp(x, {min = 0}) would silently clamp to [0, 0].
local ATTR_KEYS = {ints = true, f = true, dtype = true, keepdim = true, index_base = true, generator = true}

local function check_attrs(fname, attrs)
  for k in pairs(attrs) do
    if not ATTR_KEYS[k] then
      check.error(string.format("%s: unknown attr '%s' (attrs are ints, f, dtype, keepdim, index_base, "
        .. "generator, as node.attrs shows them)", fname, tostring(k)))
    end
  end
end

--- B.make(op, inputs, attrs) -> a new node of op over inputs (a list of nodes), attrs a table.
function B.make(op, inputs, attrs)
  local fname = "build." .. tostring(op)
  local id = op_ids[op]
  if not id then check.error(fname .. ": no op named '" .. tostring(op) .. "' in the op table") end
  attrs = attrs or {}
  check_attrs(fname, attrs)
  local ins = {}
  for i, n in ipairs(inputs) do
    if getmetatable(n) ~= Node then
      check.error(string.format("%s: input %d must be a graph node, got %s", fname, i, type(n)))
    end
    ins[i] = stand_in(n, attrs)
  end
  local ok, r = pcall(core._graph_op, id, next(attrs) and core._graph_attrs(attrs) or nil, nil, true,
                      table.unpack(ins))
  if not ok then
    local shapes = {}
    for i, n in ipairs(inputs) do shapes[i] = Nodes.shape_str(n._shape) .. " " .. n._dtype end
    check.error(string.format("%s: inputs %s: %s", fname, table.concat(shapes, ", "), tostring(r)))
  end
  local n = Nodes.new(op, {table.unpack(inputs)}, attrs, r:shape(), r:dtype())
  n.op_id = id
  return n
end

--- B.const(t) -> a constant node holding tensor t (a number becomes a 0-dim float32 tensor...
-- pass a tensor to choose the dtype).
function B.const(t)
  if type(t) == "number" then t = core.tensor(t) end
  if not core.is_tensor(t) then check.error("build.const: expected a tensor, got " .. type(t)) end
  return Nodes.leaf(t, true)
end

-- B.<op>(inputs..., attrs): the nodes first, an optional attrs table last.
setmetatable(B, {__index = function(_, op)
  if type(op) ~= "string" then return nil end
  return function(...)
    local args = {...}
    local attrs
    local last = args[#args]
    if #args > 0 and type(last) == "table" and getmetatable(last) ~= Node then attrs = table.remove(args) end
    return B.make(op, args, attrs)
  end
end})

return B
