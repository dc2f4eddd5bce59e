--- dle.rewrite.rules.fusion: chains of elementwise ops become one "fused" node, run by the fused
-- kernel (engine/fused.c, kernels/cpu/fused.c) that reads the chain's inputs once and writes
-- its result once.
--
-- A region grows from its root (an elementwise node that is not itself absorbed by a consumer)
-- back through producers that are fusable elementwise ops of the root's shape and dtype (float32
-- or float64, no promotion inside), used only by the region, not graph outputs, not in place and
-- in the same grad mode; everything else feeding it (any shape that broadcasts, any layout,
-- scalar constants) is an input of the fused node. Regions of one op are left alone.
--
-- A reduction at the end of a chain (sum, mean, amax, amin over every element or over the last
-- dim, no dtype option) joins it: the fused node then runs dle_fused_reduce, which reduces each
-- block of the chain's result while it is in cache instead of writing the result out first.
--
-- Gradients: the fused kernel is not an engine op, so autograd cannot record it. A fused node
-- therefore runs its original ops through the front door (recorded as usual) whenever a gradient
-- may be needed: grad mode on (and the node not traced under no_grad) with an input requiring
-- grad. So do replays while a trace runs (the outer trace must see the ops) and inputs off the
-- CPU. Everything else (inference, no_grad, backward graphs) takes the fused kernel.
local core = require("dle.core")
local P = require("dle.rewrite.pattern")
local Nodes = require("dle.graph.node")
local run = require("dle.graph.run")

local rule = require("dle.rewrite").rule
local op_ids = Nodes.op_ids

local unary = {"neg", "abs", "relu", "exp", "log", "expm1", "log1p", "sqrt", "rsqrt", "reciprocal",
               "sin", "cos", "tanh", "sigmoid", "gelu", "silu", "pow_scalar", "clamp"}
local binary = {"add", "sub", "mul", "div", "maximum", "minimum", "pow"}
local fusable = {}
for _, op in ipairs(unary) do fusable[op] = 1 end
for _, op in ipairs(binary) do fusable[op] = 2 end

local MAX_REGS = 64

local same_shape = Nodes.same_shape

-- Whether node n can be an op of a region rooted at a node of shape/dtype/grad mode like root.
local function fits(n, root)
  if not fusable[n.op] or n.inplace or #n.inputs ~= fusable[n.op] then return false end
  if n._dtype ~= "float32" and n._dtype ~= "float64" then return false end
  if n._dtype ~= root._dtype or (n.no_grad or false) ~= (root.no_grad or false) then return false end
  if not same_shape(n._shape, root._shape) then return false end
  for _, u in ipairs(n.inputs) do
    if u._dtype ~= n._dtype then return false end
  end
  return true
end

-- Whether producer p joins the region of consumer root: fusable like it, used once, not an output.
local function absorbable(p, root, m)
  if not fits(p, root) or p.clobbered_by or m.is_output(p) then return false end
  return #m.users(p) == 1
end

-- The region rooted at root: its nodes in dependency order and its inputs.
local function region_of(root, m)
  local nodes, inputs, in_region, input_index = {}, {}, {}, {}
  local function visit(n)
    if in_region[n] then return end
    in_region[n] = true
    for _, u in ipairs(n.inputs) do
      if not in_region[u] and not input_index[u] and absorbable(u, root, m) then
        visit(u)
      elseif not in_region[u] and not input_index[u] then
        inputs[#inputs + 1] = u
        input_index[u] = #inputs
      end
    end
    nodes[#nodes + 1] = n
  end
  visit(root)
  return nodes, inputs, input_index
end

-- The instructions of a region ({op_id, a, b, f0, f1} with 1-based registers) and its op names.
local function program_of(nodes, input_index, nin)
  local reg, prog, names = {}, {}, {}
  for u, i in pairs(input_index) do reg[u] = i end
  for k, n in ipairs(nodes) do
    local f = n.attrs.f or {0, 0}
    prog[k] = {op_ids[n.op], reg[n.inputs[1]], n.inputs[2] and reg[n.inputs[2]] or 0, f[1] or 0, f[2] or 0}
    names[k] = n.op
    reg[n] = nin + k
  end
  return prog, names
end

local function fuse(m)
  local root = m.root
  if not fits(root, root) then return nil end
  -- a node its one consumer will absorb is not a root
  local users = m.users(root)
  if #users == 1 and not m.is_output(root) and fits(users[1], users[1]) and absorbable(root, users[1], m) then
    return nil
  end
  local nodes, inputs, input_index = region_of(root, m)
  if #nodes < 2 or #inputs + #nodes > MAX_REGS then return nil end
  for _, u in ipairs(inputs) do
    if u.clobbered_by then return nil end
  end
  local prog, names = program_of(nodes, input_index, #inputs)
  local n = Nodes.new("fused", {table.unpack(inputs)}, {ops = names}, root:shape(), root._dtype)
  n.no_grad = root.no_grad
  n.program = prog
  -- the ops themselves, for the unfused path: {op_id, attrs, argument registers}
  local steps = {}
  for k, x in ipairs(nodes) do
    steps[k] = {op_ids[x.op], next(x.attrs) and x.attrs or nil, prog[k][2], fusable[x.op] == 2 and prog[k][3] or nil}
  end
  n.steps = steps
  return n
end

local reducible = {sum = true, mean = true, amax = true, amin = true}

-- A reduction node whose input chain can run fused: the chain's region (an existing fused node
-- taken over, or grown here from one elementwise op up) becomes a fused node reducing its result.
local function fuse_reduction(m)
  local root = m.root
  local u = root.inputs[1]
  if not reducible[root.op] or #root.inputs ~= 1 or root.inplace then return nil end
  for k in pairs(root.attrs) do
    if k ~= "ints" and k ~= "keepdim" and k ~= "f" then return nil end -- e.g. a dtype option
  end
  if root._dtype ~= u._dtype or (root.no_grad or false) ~= (u.no_grad or false) then return nil end
  local shape = u:shape()
  local dims = root.attrs.ints or {}
  local all = #dims == 0 or #dims == #shape -- every dim listed (distinct: the op checked) is all
  local last_dim = not all
  if last_dim and (#dims > 1 or dims[1] ~= #shape - 1) then return nil end
  if #m.users(u) ~= 1 or m.is_output(u) or u.clobbered_by then return nil end
  local inputs, prog, names, steps
  if u.op == "fused" and not u.reduce then
    inputs, prog, steps = u.inputs, u.program, u.steps
    names = {table.unpack(u.attrs.ops)}
  elseif fits(u, u) then
    local nodes, input_index
    nodes, inputs, input_index = region_of(u, m)
    if #inputs + #nodes > MAX_REGS then return nil end
    prog, names = program_of(nodes, input_index, #inputs)
    steps = {}
    for k, x in ipairs(nodes) do
      steps[k] = {op_ids[x.op], next(x.attrs) and x.attrs or nil, prog[k][2], fusable[x.op] == 2 and prog[k][3] or nil}
    end
  else
    return nil
  end
  for _, x in ipairs(inputs) do
    if x.clobbered_by then return nil end
  end
  names[#names + 1] = root.op
  local n = Nodes.new("fused", {table.unpack(inputs)}, {ops = names}, root:shape(), root._dtype)
  n.no_grad = root.no_grad
  n.program, n.steps = prog, steps
  n.reduce = {name = root.op, last_dim = last_dim, shape = shape, op = op_ids[root.op], attrs = root.attrs}
  return n
end

-- Runs a fused node: the kernel, or its ops one by one through the front door.
local graph_op, graph_attrs = core._graph_op, core._graph_attrs
run.executors.fused = function(node, ins)
  local unfused = core._trace_active()
  if not unfused and core.is_grad_enabled() and not node.no_grad then
    for _, x in ipairs(ins) do
      if x.requires_grad then unfused = true; break end
    end
  end
  if not unfused then
    for _, x in ipairs(ins) do
      if x:device() ~= "cpu" then unfused = true; break end
    end
  end
  local red = node.reduce
  if not unfused and red then
    local numel = 1
    for _, s in ipairs(red.shape) do numel = numel * s end
    unfused = numel == 0 -- an empty sum, mean or extreme: the ops' own rules
  end
  if not unfused then
    node._cprogram = node._cprogram or core._fused_program(node.program, #ins)
    if not red then return core._fused_run(node._cprogram, node._shape, node._dtype, table.unpack(ins)) end
    local out = core._fused_reduce(node._cprogram, red.shape, node._dtype, red.name, red.last_dim, table.unpack(ins))
    return red.attrs.keepdim and out:view(node._shape) or out
  end
  local regs = {table.unpack(ins)}
  local nin = #ins
  node._cattrs = node._cattrs or {}
  local last
  for k, st in ipairs(node.steps) do
    if st[2] and not node._cattrs[k] then node._cattrs[k] = graph_attrs(st[2]) end
    local a = regs[st[3]]
    if st[4] then last = graph_op(st[1], node._cattrs[k], nil, node.no_grad or false, a, regs[st[4]])
    else last = graph_op(st[1], node._cattrs[k], nil, node.no_grad or false, a) end
    regs[nin + k] = last
  end
  if red then
    node._cred = node._cred or graph_attrs(red.attrs)
    last = graph_op(red.op, node._cred, nil, node.no_grad or false, last)
  end
  return last
end

-- verify's example for the rule rooted at op: a chain over positive values (log, sqrt, pow) with
-- a broadcast operand, ending in op.
local function example_for(op)
  return function()
    local dle = require("dle")
    local opts = {dtype = "float64"}
    local b = dle.rand(5, opts) + 0.5
    return function(x)
      local chain = (x * 2 + b):abs() + 0.25
      if fusable[op] == 2 then return dle[op](chain, b) end
      if op == "pow_scalar" then return chain ^ 1.5 end
      if op == "clamp" then return chain:clamp(0.5, 1.5) end
      return chain[op](chain)
    end, {dle.randn(3, 5, opts)}
  end
end

local rules = {}
for op in pairs(fusable) do
  rules[#rules + 1] = rule{name = "fusion.elementwise", pattern = P.op(op), replace = fuse,
                           example = example_for(op)}
end
for op in pairs(reducible) do
  rules[#rules + 1] = rule{name = "fusion.reduction", pattern = P.op(op), replace = fuse_reduction,
                           example = function()
                             local dle = require("dle")
                             local b = dle.rand(5, {dtype = "float64"}) + 0.5
                             return function(x) return dle[op]((x * 2 + b):abs(), 2) end,
                               {dle.randn(3, 5, {dtype = "float64"})}
                           end}
end
table.sort(rules, function(a, b) return a.root < b.root end)

return rules
