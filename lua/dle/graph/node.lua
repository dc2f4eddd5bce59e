--- dle.graph.node: the nodes of a traced graph (see lua/dle/graph/init.lua).
--
-- A node is one value of the graph: an input, a constant or parameter (a tensor fn used but did
-- not compute from its inputs), the result of one engine op, the second result of a two-result
-- op ("output" nodes), a "detach", or a "fused" elementwise chain. Fields and methods:
--   node.op      the op's name in engine/ops.def ("add", "matmul", ...), or "input", "const",
--                "param", "output", "detach", "fused"
--   node.inputs  list of nodes
--   node.attrs   table: the engine's attrs as traced (ints are 0-based dims/sizes, f the
--                numbers, dtype, keepdim, index_base, generator), plus index (input position,
--                output number) and value (the number of a scalar constant)
--   node:shape(), node:dtype(), node:value() (the tensor of a const or param: parameters stay
--   the live tensor, so a graph replays with the weights they hold when it runs)
-- Flags the replay reads: node.inplace (writes into inputs[1], which the op's results then are),
-- node.fresh (the op fills a new tensor of the node's shape: random fills), node.no_grad (ran
-- without recording while the trace recorded), node.clobbered_by (an in-place node writes the
-- tensor this node's value is, later: rewrites must not move reads of it past that write).
local core = require("dle.core")

local Node = {}
Node.__index = Node

local next_id = 0

-- op name -> engine op id, and the info of each op (core.op_table)
local op_ids, op_infos = {}, {}
for i, info in ipairs(core.op_table()) do
  op_ids[info.name] = i - 1
  op_infos[info.name] = info
end
local detach_id = #core.op_table()   -- DLE_TRACE_DETACH, the pseudo-op after the table

local M = {Node = Node, op_ids = op_ids, op_infos = op_infos, detach_id = detach_id}

--- M.new(op, inputs, attrs, shape, dtype) -> a node (no graph needs to own it).
function M.new(op, inputs, attrs, shape, dtype)
  next_id = next_id + 1
  return setmetatable({id = next_id, op = op, inputs = inputs or {}, attrs = attrs or {},
                       _shape = shape, _dtype = dtype}, Node)
end

--- M.leaf(t) -> a "param" node for a tensor that requires grad, else a "const" node; the node
-- holds t itself (a 0-dim constant also has attrs.value, its number).
function M.leaf(t, force_const)
  local op = (t.requires_grad and not force_const) and "param" or "const"
  local n = M.new(op, {}, {}, t:shape(), t:dtype())
  n._value = t
  if op == "const" and t:dim() == 0 and t:device() == "cpu" then
    n.attrs.value = core._peek_scalar(t)   -- bookkeeping, not a read that makes a trace unsafe
  end
  return n
end

--- node:shape() -> a new table of the node's sizes.
function Node:shape()
  local s = {}
  for i, v in ipairs(self._shape) do s[i] = v end
  return s
end

--- node:dtype() -> the node's dtype name.
function Node:dtype() return self._dtype end

--- node:value() -> the tensor of a const or param node (nil for others).
function Node:value() return self._value end

--- node:is_leaf() -> true for input, const and param nodes.
function Node:is_leaf()
  return self.op == "input" or self.op == "const" or self.op == "param"
end

--- node:is_const() -> true for a const node: its value does not require grad.
function Node:is_const() return self.op == "const" end

--- M.same_shape(a, b) -> whether two size lists are equal.
function M.same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] then return false end
  end
  return true
end

local function shape_str(s) return "{" .. table.concat(s, ",") .. "}" end
M.shape_str = shape_str

Node.__tostring = function(n)
  return string.format("dle.graph.Node(%s %s %s)", n.op, shape_str(n._shape), n._dtype)
end

return M
