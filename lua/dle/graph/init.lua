--- dle.graph: capture a function's ops as a graph (dle.graph.trace), inspect it, replay it.
--
--   local g = dle.graph.trace(function(x) return (x * 2):relu() end, dle.randn(3))
--   for _, n in ipairs(g:nodes()) do print(n.op, table.concat(n:shape(), "x"), n:dtype()) end
--   print(g:dump()); io.open("g.dot", "w"):write(g:dot())
--   local y = g:run(dle.randn(3))                  -- new inputs of the traced shapes/dtypes
--   local bg = g:backward_graph()                  -- gradients as a graph of their own
--
-- How it works. trace runs fn once with the engine's tracer on (engine/trace.c), which records
-- every op called at the front door from outside the engine, with its inputs, outputs and attrs.
-- Ops that Lua composes (nn layers, losses, einsum) arrive as their core ops. Tensors are nodes
-- by identity: each tensor argument of fn is an input node (in order); a tensor that an op used
-- but no recorded op made is a "param" node when it requires grad, else a "const" node, and keeps
-- the tensor itself (a live reference: a compiled model sees its updated weights); a number mixed
-- with a tensor (x * 2) is a 0-dim const node whose attrs.value is the number.
--
-- Arguments and results. Every argument is passed to fn; its tensors are the graph's inputs and
-- g:run takes just them, in order; other arguments are baked in. fn may return any number of
-- results, each a tensor, a plain table of tensors (nested tables too) or another Lua value
-- (kept as traced); g:run returns the same structure with the new tensors. g.outputs lists the
-- output nodes in order (list parts first, then other keys sorted by name).
--
-- Training steps. backward() into leaves' .grad, zero_grad, clip_grad_norm_ and the step of an
-- optimizer with a fused C step are recorded as nodes (dle.graph.train), so a whole training step
-- replays; a graph holding its own backward replays with grad mode off.
--
-- Unsafe traces. A replay repeats the ops, not fn's Lua code: when fn reads a tensor's values into
-- Lua (item, totable, tostring, a tensor used as a number), steps an optimizer without a fused
-- step (or with a closure), assigns .grad, runs backward hooks or a gradient through dropout,
-- calls a custom autograd Function or dle.checkpoint, or uses forward mode, the trace is marked
-- unsafe: g.unsafe holds the first reason and g:run raises an error
-- naming it (dle.compile runs fn eagerly instead). Random ops (rand*, dropout) replay as ops and
-- draw new numbers from their generator as eager calls would; in-place writes replay as writes
-- into the same tensors (BatchNorm's running statistics, x:add_(...)).
local core = require("dle.core")
local check = require("dle.check")
local Nodes = require("dle.graph.node")
local run = require("dle.graph.run")

local new_node, leaf = Nodes.new, Nodes.leaf
local shape_str = Nodes.shape_str

local graph = {Node = Nodes.Node}

local Graph = {}
Graph.__index = Graph
graph.Graph = Graph

local function is_float(dtype) return dtype:match("^float") ~= nil or dtype == "bfloat16" end

local random_ops = {rand = true, randn = true, randint = true, dropout = true}

--- graph.new(inputs) -> an empty graph (over the given input nodes, for rules and tools), to
-- build symbolically: g:placeholder, g:constant, g:add, g:output (dle.graph.symbolic).
function graph.new(inputs)
  return setmetatable({inputs = inputs or {}, outputs = {}, effects = {}, template = {n = 0},
                       _order = {}, grad_enabled = core.is_grad_enabled(), example_inputs = {}},
                      Graph)
end

-- The results' structure, with output nodes in place of tensors.
local function template_of(v, node_of, outs, depth)
  if core.is_tensor(v) then
    local n = node_of(v)
    outs[#outs + 1] = n
    return {node = true}
  end
  if type(v) == "table" and getmetatable(v) == nil and depth < 32 then
    local keys, n = {}, #v
    for i = 1, n do keys[i] = i end
    local others = {}
    for k in pairs(v) do
      if not (math.type(k) == "integer" and k >= 1 and k <= n) then others[#others + 1] = k end
    end
    table.sort(others, function(a, b) return tostring(a) < tostring(b) end)
    for _, k in ipairs(others) do keys[#keys + 1] = k end
    local fields = {}
    for _, k in ipairs(keys) do fields[#fields + 1] = {key = k, t = template_of(v[k], node_of, outs, depth + 1)} end
    return {fields = fields}
  end
  return {value = v}
end

-- The records of a trace as nodes of g; node_of(t) finds (or makes) the node of a tensor.
-- Autograd saves aliases (new headers over the same elements) of the tensors ops used, so the
-- ops of a backward pass find their node by view key when not by identity. A trace is a list of
-- segments: the engine's records between control-flow ops, and the control-flow ops themselves
-- (dle.graph.control: one record each, {control = op, ins, outs, attrs, subgraphs, names}).
local function build(g, segments, map, by_view)
  local order, tensor_of = g._order, {}
  local view_key, tensor_id = core._tensor_view_key, core._tensor_id
  local function known(n, t)
    tensor_of[n] = t
    by_view[view_key(t)] = n
  end
  local function node_of_id(t, id)
    local n = map[id] or by_view[view_key(t)]
    if not n then
      n = leaf(t)
      order[#order + 1] = n
      known(n, t)
    end
    map[id] = n
    return n
  end
  -- results 2.. of a node: "output" nodes (a control op's results are found by identity only:
  -- a branch may return a view of an operand with the operand's own view key)
  local function more_outputs(n, outs, ids, by_id_only)
    for k = 2, #outs do
      local p = new_node("output", {n}, {index = k}, outs[k]:shape(), outs[k]:dtype())
      map[ids[k]] = p
      order[#order + 1] = p
      if by_id_only then tensor_of[p] = outs[k] else known(p, outs[k]) end
    end
  end
  -- state nodes (dle.graph.train): each takes the previous one as its last input (run in order);
  -- their values are state outside the graph (a .grad, a param), written by later state nodes
  local last_state
  local seeds = {}   -- dropout seeds and offsets seen
  local function state_node(op, ins, attrs, shape, dtype)
    if last_state then ins[#ins + 1] = last_state end
    local n = new_node(op, ins, attrs, shape, dtype)
    n.state = true
    g.effects[#g.effects + 1] = n
    last_state = n
    return n
  end
  -- every value seen so far that lives in t's storage is overwritten by n
  local function clobbers(n, t)
    for _, m in ipairs(order) do
      local v = tensor_of[m]
      if v and not m.clobbered_by and core.same_storage(v, t) then m.clobbered_by = n end
    end
  end
  -- a .grad read or accumulated: nil when the record adds no node
  local function add_grad_record(r)
    local out1, id = r.outs[1], r.out_ids[1]
    local known_before = map[id]
    if r.op == "grad_of" then
      if known_before then return true end   -- a value of the graph already
      return state_node("grad_of", {node_of_id(r.ins[1], r.in_ids[1])}, {}, out1:shape(), out1:dtype())
    end
    local ins = {node_of_id(r.ins[1], r.in_ids[1]), node_of_id(r.ins[2], r.in_ids[2])}
    -- added in place into a .grad the graph holds: after that value's last writer
    local into = known_before and id ~= r.in_ids[2]
    if into then ins[3] = known_before end
    local n = state_node("grad_acc", ins, {}, out1:shape(), out1:dtype())
    g.trains = true   -- holds its own backward pass
    if into then clobbers(n, out1) end
    return n
  end
  local function add_record(r)
    if r.op == "grad_of" or r.op == "grad_acc" then
      local n = add_grad_record(r)
      if n ~= true then
        map[r.out_ids[1]] = n
        order[#order + 1] = n
        known(n, r.outs[1])
      end
      return
    end
    local ins = {}
    for k, t in ipairs(r.ins) do ins[k] = node_of_id(t, r.in_ids[k]) end
    local out1 = r.outs[1]
    local n
    if r.op == "full" and not r.given and out1:dim() == 0 then
      n = leaf(out1, true)   -- a number made into a tensor: a constant
      n.literal = true
    else
      local inplace = r.given and not r.fresh
      if inplace then table.insert(ins, 1, node_of_id(out1, r.out_ids[1])) end
      n = new_node(r.op, ins, r.attrs, out1:shape(), out1:dtype())
      n.op_id = r.op_id
      n.fresh = r.fresh or nil
      n.no_grad = (g.grad_enabled and not r.grad) or nil
      if inplace then
        n.inplace = true
        g.effects[#g.effects + 1] = n
        clobbers(n, out1)
      elseif random_ops[r.op] then
        g.effects[#g.effects + 1] = n   -- replays draw numbers even when unused, as eager does
        if r.op == "dropout" then
          -- the gradient of a dropout is a dropout with the forward's seed and offset, which a
          -- replay would not draw again for both
          local key = table.concat(r.attrs.ints or {}, ",")
          if seeds[key] then
            g.unsafe = g.unsafe or "dropout: a gradient through dropout in a captured backward is not replayed"
          end
          seeds[key] = true
        end
      end
    end
    map[r.out_ids[1]] = n
    order[#order + 1] = n
    known(n, out1)
    more_outputs(n, r.outs, r.out_ids)
  end
  local function add_control(c)
    local ins, ids = {}, {}
    for k, t in ipairs(c.ins) do ins[k] = node_of_id(t, tensor_id(t)) end
    for k, t in ipairs(c.outs) do ids[k] = tensor_id(t) end
    local out1 = c.outs[1]
    local n = new_node(c.control, ins, c.attrs, out1:shape(), out1:dtype())
    n.subgraphs, n.subgraph_names = c.subgraphs, c.names
    n.no_grad = (g.grad_enabled and not c.grad) or nil
    -- a subgraph that writes in place makes the node an effect: it runs even when unused
    for _, sub in ipairs(c.subgraphs) do
      if #sub.effects > 0 then g.effects[#g.effects + 1] = n; break end
    end
    map[ids[1]] = n
    order[#order + 1] = n
    tensor_of[n] = out1
    more_outputs(n, c.outs, ids, true)
  end
  -- a state segment of dle.graph.train: its results are the tensors it wrote (params)
  local function add_state(c)
    local ins = {}
    for k, t in ipairs(c.ins) do ins[k] = node_of_id(t, tensor_id(t)) end
    local out1 = c.outs[1] or c.ins[1]
    local n = state_node(c.state, ins, c.attrs, out1:shape(), out1:dtype())
    order[#order + 1] = n
    local ids = {}
    for k, t in ipairs(c.outs) do
      ids[k] = tensor_id(t)
      clobbers(n, t)
    end
    if c.outs[1] then
      map[ids[1]] = n
      tensor_of[n] = out1
      more_outputs(n, c.outs, ids, true)
    end
  end
  for _, seg in ipairs(segments) do
    if seg.state then
      add_state(seg)
    elseif seg.control then
      add_control(seg)
    else
      for _, r in ipairs(seg) do add_record(r) end
    end
    g.unsafe = g.unsafe or seg.unsafe
  end
  return function(t) return node_of_id(t, tensor_id(t)) end
end

-- The Lua-level traces running on this thread, innermost last ({segments = {...}}): a control-
-- flow op suspends the engine's tracer, traces its subgraphs as traces of their own and resumes
-- (dle.graph.control).
graph._running = {}

-- Traces fn(...) and returns the graph and fn's results (packed).
function graph._trace(fname, fn, ...)
  check.callable(fn, fname, "fn")
  if core._trace_active() then
    error(fname .. ": a trace is already running on this thread (traces do not nest)", 3)
  end
  local g = graph.new()
  local args = table.pack(...)
  local map, by_view = {}, {}
  g.args = {n = args.n}
  for i = 1, args.n do
    local a = args[i]
    if core.is_tensor(a) then
      local n = new_node("input", {}, {index = #g.inputs + 1}, a:shape(), a:dtype())
      n.device = a:device()
      g.inputs[#g.inputs + 1] = n
      g.example_inputs[#g.inputs] = a
      g._order[#g._order + 1] = n
      g.args[i] = {input = #g.inputs}
      local id = core._tensor_id(a)
      map[id] = map[id] or n
      by_view[core._tensor_view_key(a)] = by_view[core._tensor_view_key(a)] or n
    else
      g.args[i] = {value = a}
    end
  end
  local running = graph._running
  local ctx = {segments = {}}
  running[#running + 1] = ctx
  core._trace_begin()
  local res = table.pack(pcall(fn, ...))
  ctx.segments[#ctx.segments + 1] = core._trace_end()
  running[#running] = nil
  if not res[1] then error(res[2], 0) end
  local node_of = build(g, ctx.segments, map, by_view)
  local outs = {}
  local fields = {}
  for i = 2, res.n do fields[i - 1] = template_of(res[i], node_of, outs, 0) end
  g.template = {n = res.n - 1, items = fields}
  g.outputs = outs
  return g, table.pack(table.unpack(res, 2, res.n))
end

require("dle.graph.symbolic")(graph, Graph)
do
  local file = require("dle.graph.file")
  graph.save, graph.load = file.save, file.load
end

--- dle.graph.trace(fn, example_inputs...) -> a graph of the ops fn runs on these inputs.
-- Runs fn once. See the header for inputs, outputs, constants and unsafe traces.
function graph.trace(fn, ...)
  return (graph._trace("trace", fn, ...))
end

--- g:nodes() -> the live nodes in a topological order (inputs first; every node after its
-- inputs; reads of a tensor before the in-place writes that follow them in the trace).
function Graph:nodes()
  local list, seen = {}, {}
  local function visit(n)
    if seen[n] then return end
    seen[n] = true
    for _, u in ipairs(n.inputs) do visit(u) end
    list[#list + 1] = n
  end
  local live = self:_live()
  for _, n in ipairs(self.inputs) do visit(n) end
  for _, n in ipairs(self._order) do
    if live[n] then visit(n) end
  end
  for _, n in ipairs(self.outputs) do visit(n) end
  for _, n in ipairs(self.effects) do visit(n) end
  return list
end

-- The set of nodes the outputs and effects need.
function Graph:_live()
  local live, stack = {}, {}
  for _, n in ipairs(self.outputs) do stack[#stack + 1] = n end
  for _, n in ipairs(self.effects) do stack[#stack + 1] = n end
  while #stack > 0 do
    local n = table.remove(stack)
    if not live[n] then
      live[n] = true
      for _, u in ipairs(n.inputs) do stack[#stack + 1] = u end
    end
  end
  return live
end

--- g:compact(): forgets dead nodes and fixes the order (after rewrites); returns g.
function Graph:compact()
  self._order = self:nodes()
  self._plan = nil
  return self
end

--- g:users() -> {node = {users...}} over the live nodes (a user appears once per use).
function Graph:users()
  local users = {}
  for _, n in ipairs(self:nodes()) do
    users[n] = users[n] or {}
    for _, u in ipairs(n.inputs) do
      users[u] = users[u] or {}
      table.insert(users[u], n)
    end
  end
  return users
end

-- attrs as text: the engine's fields, then the graph's own.
local function attrs_str(a)
  local parts = {}
  local keys = {}
  for k in pairs(a) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = a[k]
    if k == "program" or k == "generator" then
      v = k == "generator" and "Generator" or nil
    elseif type(v) == "table" and getmetatable(v) then
      v = v.name or "object"   -- an optimizer (dle.graph.train)
    elseif type(v) == "table" then
      local items = {}
      for i, x in ipairs(v) do items[i] = tostring(x) end
      v = "{" .. table.concat(items, ",") .. "}"
    end
    if v ~= nil then parts[#parts + 1] = k .. "=" .. tostring(v) end
  end
  return #parts > 0 and (" {" .. table.concat(parts, ", ") .. "}") or ""
end

--- g:dump() -> the graph as text: one line per node, `%id = op(inputs) {attrs} : shape dtype`
-- (ids are positions in g:nodes()), then `return` with the output ids.
function Graph:dump()
  local nodes = self:nodes()
  local pos = {}
  for i, n in ipairs(nodes) do pos[n] = i end
  local lines = {}
  if self.unsafe then lines[1] = "# unsafe: " .. self.unsafe end
  for i, n in ipairs(nodes) do
    local ins = {}
    for k, u in ipairs(n.inputs) do ins[k] = "%" .. pos[u] end
    local op = n.op
    if n.inplace then op = op .. "_" end
    if n.op == "fused" then op = "fused[" .. table.concat(n.attrs.ops or {}, ",") .. "]" end
    local flags = {}
    if n.op == "param" then flags[#flags + 1] = "requires_grad" end
    if n.no_grad then flags[#flags + 1] = "no_grad" end
    if n.fresh then flags[#flags + 1] = "fresh" end
    lines[#lines + 1] = string.format("%%%d = %s(%s)%s : %s %s%s", i, op, table.concat(ins, ", "),
                                      attrs_str(n.attrs), shape_str(n._shape), n._dtype,
                                      #flags > 0 and (" " .. table.concat(flags, " ")) or "")
    -- a control-flow node's subgraphs, indented under it
    for k, sub in ipairs(n.subgraphs or {}) do
      lines[#lines + 1] = "  " .. (n.subgraph_names or {})[k] .. ":"
      for l in sub:dump():gmatch("[^\n]+") do lines[#lines + 1] = "    " .. l end
    end
  end
  local outs = {}
  for k, n in ipairs(self.outputs) do outs[k] = "%" .. pos[n] end
  lines[#lines + 1] = "return " .. table.concat(outs, ", ")
  return table.concat(lines, "\n") .. "\n"
end

local function dot_escape(s) return (s:gsub('[\\"]', "\\%0")) end

-- The dot lines of g's nodes and edges, node names prefixed (subgraphs nest as clusters).
local function dot_body(g, prefix, lines, indent)
  local nodes = g:nodes()
  local pos, is_out = {}, {}
  for i, n in ipairs(nodes) do pos[n] = i end
  for _, n in ipairs(g.outputs) do is_out[n] = true end
  for i, n in ipairs(nodes) do
    local label = n.op .. (n.inplace and "_" or "")
    if n.op == "input" then label = "input " .. n.attrs.index end
    if n.op == "fused" then label = "fused: " .. table.concat(n.attrs.ops or {}, " ") end
    if n.op == "const" and n.attrs.value ~= nil then label = "const " .. tostring(n.attrs.value) end
    -- each line escaped on its own; "\\n" (dot's line break) joins them unescaped
    label = dot_escape(label) .. "\\n" .. dot_escape(shape_str(n._shape) .. " " .. n._dtype)
    local style = {}
    if n.op == "input" then style[#style + 1] = 'style=filled, fillcolor="palegreen"'
    elseif n.op == "const" or n.op == "param" then style[#style + 1] = 'style=filled, fillcolor="lightgrey"' end
    if is_out[n] then style[#style + 1] = "penwidth=2" end
    lines[#lines + 1] = string.format('%s%sn%d [label="%s"%s];', indent, prefix, i, label,
                                      #style > 0 and (", " .. table.concat(style, ", ")) or "")
    -- a control-flow node's subgraphs: one cluster each, a dashed edge from its result to the node
    for k, sub in ipairs(n.subgraphs or {}) do
      local inner = string.format("%sn%d_%d_", prefix, i, k)
      lines[#lines + 1] = string.format('%ssubgraph cluster_%s {', indent, inner)
      lines[#lines + 1] = string.format('%s  label="%s"; style=dashed;', indent,
                                        dot_escape((n.subgraph_names or {})[k] or ("subgraph " .. k)))
      local sub_pos = dot_body(sub, inner, lines, indent .. "  ")
      lines[#lines + 1] = indent .. "}"
      if sub.outputs[1] then
        lines[#lines + 1] = string.format('%s%sn%d -> %sn%d [style=dashed, ltail=cluster_%s];', indent,
                                          inner, sub_pos[sub.outputs[1]], prefix, i, inner)
      end
    end
  end
  for i, n in ipairs(nodes) do
    for k, u in ipairs(n.inputs) do
      lines[#lines + 1] = string.format('%s%sn%d -> %sn%d [label="%d"];', indent, prefix, pos[u], prefix, i, k)
    end
  end
  return pos
end

--- g:dot() -> the graph in Graphviz's dot language (`dot -Tsvg`): a box per node labelled with
-- its op, shape and dtype; inputs green, constants and parameters grey, outputs bold; the
-- subgraphs of cond, while_loop and scan nodes as dashed clusters named after their function.
function Graph:dot()
  local lines = {"digraph dle {", "  compound=true;", '  node [shape=box, fontname="monospace"];'}
  dot_body(self, "", lines, "  ")
  lines[#lines + 1] = "}"
  return table.concat(lines, "\n") .. "\n"
end

--- g:run(inputs...) -> the results fn returned, computed by replaying the graph on new input
-- tensors (the traced shapes and dtypes; other arguments are not passed). Replays through the
-- engine's front door, so autograd, autocast and dle.profile see its ops; each intermediate is
-- freed after its last use. Errors name run and the offending input.
function Graph:run(...)
  return run.run(self, ...)
end

--- g:copy() -> a graph with its own copies of g's live nodes (leaves still hold the same
-- tensors), so rewriting the copy leaves g as it was.
function Graph:copy()
  local c = setmetatable({}, Graph)
  for k, v in pairs(self) do c[k] = v end
  local map = {}
  local order = {}
  for i, n in ipairs(self:nodes()) do
    local m = setmetatable({}, getmetatable(n))
    for k, v in pairs(n) do m[k] = v end
    m.attrs = {}
    for k, v in pairs(n.attrs) do m.attrs[k] = v end
    m.inputs = {}
    for k, u in ipairs(n.inputs) do m.inputs[k] = map[u] end
    map[n] = m
    order[i] = m
  end
  for _, m in ipairs(order) do
    if m.clobbered_by then m.clobbered_by = map[m.clobbered_by] or m.clobbered_by end
  end
  local function remap(list)
    local r = {}
    for k, n in ipairs(list) do r[k] = map[n] end
    return r
  end
  c.inputs, c.outputs, c.effects = remap(self.inputs), remap(self.outputs), remap(self.effects)
  -- the results' structure keeps pointing at nodes by position in outputs only
  c._order = order
  c._plan = nil
  return c
end

--- g:backward_graph([opts]) -> a graph computing gradients, and the list of what they are of.
-- Without opts it computes the gradient of the sum of every float output's sum; with
-- opts.grad_outputs = true it takes one more input per float output (the gradient flowing into
-- it, of its shape) after g's inputs. Its outputs are one gradient per float input of g, then one
-- per param node of g (in g:nodes() order); bg.wrt lists those nodes of g in the same order.
-- Gradients of values the outputs do not depend on are zeros. Its inputs are g's inputs (then
-- the grad outputs). Raises an error for an unsafe graph, one without float outputs, or one with a
-- cond node (scan nodes unroll into the backward graph; while_loop is not differentiable).
function Graph:backward_graph(opts)
  opts = opts or {}
  if self.unsafe then error("backward_graph: the graph is unsafe to replay: " .. self.unsafe, 2) end
  if self.trains then
    error("backward_graph: the graph holds its own backward pass and updates (a training step)", 2)
  end
  for _, n in ipairs(self:nodes()) do
    if n.op == "cond" then
      -- tracing the backward pass would record the gradient of the branch taken now only
      error("backward_graph: the graph has a cond node, whose gradient depends on the branch its pred "
            .. "picks at run time; differentiate g:run's results instead", 2)
    end
  end
  local dle = require("dle")
  local wrt = {}
  for _, n in ipairs(self.inputs) do
    if is_float(n._dtype) then wrt[#wrt + 1] = n end
  end
  for _, n in ipairs(self:nodes()) do
    if n.op == "param" then wrt[#wrt + 1] = n end
  end
  local float_outs = {}
  for k, n in ipairs(self.outputs) do
    if is_float(n._dtype) then float_outs[#float_outs + 1] = k end
  end
  if #float_outs == 0 then error("backward_graph: the graph has no float output to differentiate", 2) end
  local g = self
  -- leaves that require grad stand in for the inputs, so the trace records the backward pass
  local examples = {}
  for i, x in ipairs(self.example_inputs) do
    local c = x:detach():clone()
    if is_float(self.inputs[i]._dtype) then c:requires_grad_(true) end
    examples[i] = c
  end
  if opts.grad_outputs then
    for _, k in ipairs(float_outs) do
      examples[#examples + 1] = dle.ones(self.outputs[k]:shape(), {dtype = self.outputs[k]:dtype()})
    end
  end
  local ninputs = #self.inputs
  local function backward(...)
    local args = table.pack(...)
    local outs = run.run_flat(g, table.unpack(args, 1, ninputs))
    local targets, grads = {}, {}
    for j, k in ipairs(float_outs) do
      targets[j] = outs[k]
      grads[j] = opts.grad_outputs and args[ninputs + j] or nil
    end
    local wrt_values = {}
    for j, n in ipairs(wrt) do
      wrt_values[j] = n.op == "input" and args[n.attrs.index] or n:value()
    end
    local roots, root_grads = {}, {}
    for j, t in ipairs(targets) do
      if t.requires_grad then
        roots[#roots + 1] = opts.grad_outputs and t or t:sum()
        root_grads[#roots] = grads[j]
      end
    end
    local result = {}
    local got = #roots > 0 and dle.grad(roots, wrt_values, {allow_unused = true,
      grad_outputs = opts.grad_outputs and root_grads or nil}) or {}
    for j = 1, #wrt do
      result[j] = got[j] or dle.zeros(wrt_values[j]:shape(), {dtype = wrt_values[j]:dtype()})
    end
    return table.unpack(result, 1, #wrt)
  end
  local bg = graph._trace("backward_graph", backward, table.unpack(examples))
  bg.wrt = wrt
  return bg
end

-- control-flow nodes: their recording and their executors
graph.control = require("dle.graph.control")
-- backward into .grad, zero_grad and optimizer steps as nodes
graph.train = require("dle.graph.train")

return graph
