--- dle.graph.run: replaying a graph (g:run), with intermediates freed after their last use.
--
-- A graph is turned once into a plan: one step per node of g:nodes(), each reading the slots of
-- its inputs, and per step the slots whose last reader it is. A replay fills the slots in order
-- through the engine's front door (dle.core._graph_op: autograd records, autocast casts and the
-- profiler counts as for eager calls) and closes each intermediate after its last reader, so its
-- memory goes back to the allocator's cache at once instead of waiting for Lua's collector: a
-- replay's peak is the live set of the schedule (ggml's liveness-based reuse, with dle's size-
-- class cache doing the reuse). Never closed: inputs, constants, parameters, outputs, and tensors
-- written in place (their userdata is shared by several nodes).
local core = require("dle.core")
local Nodes = require("dle.graph.node")

local graph_op, is_tensor = core._graph_op, core.is_tensor
local set_grad_enabled = core.set_grad_enabled
local close = core.metatable.__close
local unpack = table.unpack
local shape_str = Nodes.shape_str

local M = {}

--- M.executors[op] = function(node, inputs) -> tensor(s): how graph-level ops that are not engine
-- ops run ("fused" registers itself from dle.rewrite.rules.fusion; "cond", "while_loop" and
-- "scan" from dle.graph.control, returning one tensor per result).
M.executors = {}

local function plan_of(g)
  if g._plan then return g._plan end
  local nodes = g:nodes()
  local slot, keep, last = {}, {}, {}
  for i, n in ipairs(nodes) do slot[n] = i end
  for _, n in ipairs(g.outputs) do keep[slot[n]] = true end
  local steps = {}
  for i, n in ipairs(nodes) do
    local st = {node = n}
    if n.op == "input" then
      st.kind, st.index = "input", n.attrs.index
      keep[i] = true
    elseif n.op == "const" or n.op == "param" then
      st.kind = "leaf"
      keep[i] = true
    elseif n.op == "output" then
      st.kind = "none"   -- its owner's step fills it
      if n.inputs[1].state then keep[i] = true end
      local owner = steps[slot[n.inputs[1]]]
      owner.proj = owner.proj or {}
      owner.proj[#owner.proj + 1] = {n.attrs.index, i}
    else
      st.ins = {}
      for k, u in ipairs(n.inputs) do st.ins[k] = slot[u] end
      if M.executors[n.op] then
        st.kind, st.exec = "exec", M.executors[n.op]
        if n.state then keep[i] = true end   -- a .grad or a param: state outside the graph
      else
        st.kind = "op"
        st.id = n.op == "detach" and Nodes.detach_id or n.op_id or Nodes.op_ids[n.op]
        if not st.id then error("run: node " .. i .. " has the unknown op '" .. tostring(n.op) .. "'", 0) end
        if next(n.attrs) ~= nil then st.attrs = core._graph_attrs(n.attrs) end
        st.no_grad = n.no_grad or false
        if n.inplace then
          st.target = table.remove(st.ins, 1)
          keep[i], keep[st.target] = true, true
        elseif n.fresh then
          st.fresh = {n._shape, {dtype = n._dtype}}
        end
      end
    end
    steps[i] = st
  end
  -- the last reader of each slot (a node's own step when nothing reads it)
  for i, n in ipairs(nodes) do
    last[i] = last[i] or i
    for _, u in ipairs(n.inputs) do last[slot[u]] = i end
  end
  for i = 1, #nodes do
    local s = steps[i]
    if s.kind == "input" or s.kind == "leaf" then keep[i] = true end
  end
  for s, at in pairs(last) do
    if not keep[s] then
      local st = steps[at]
      st.free = st.free or {}
      st.free[#st.free + 1] = s
    end
  end
  local out_slots = {}
  for k, n in ipairs(g.outputs) do out_slots[k] = slot[n] end
  g._plan = {steps = steps, n = #nodes, out_slots = out_slots}
  return g._plan
end

--- M.check_inputs(g, fname, args) -> raises an error naming fname when args do not fit g.
function M.check_inputs(g, fname, args)
  if g.unsafe then error(fname .. ": the graph is unsafe to replay: " .. g.unsafe, 3) end
  if args.n ~= #g.inputs then
    error(string.format("%s: expected %d input tensors, got %d", fname, #g.inputs, args.n), 3)
  end
  for i, n in ipairs(g.inputs) do
    local x = args[i]
    if not is_tensor(x) then
      error(string.format("%s: input %d must be a tensor, got %s", fname, i, type(x)), 3)
    end
    local s, want = x:shape(), n._shape
    local same = #s == #want and x:dtype() == n._dtype
    for d = 1, #want do same = same and s[d] == want[d] end
    if not same then
      error(string.format("%s: input %d has shape %s and dtype %s, the graph was traced with %s %s",
                          fname, i, shape_str(s), x:dtype(), shape_str(want), n._dtype), 3)
    end
  end
end

-- Runs the plan on args; returns the slots' values table (outputs filled).
local function replay(g, args)
  local p = plan_of(g)
  local steps, values = p.steps, {}
  local at = 0
  -- a graph holding its own backward (dle.graph.train) records nothing for autograd
  local grad_was = g.trains and set_grad_enabled(false)
  local ok, err = pcall(function()
    for i = 1, p.n do
      at = i
      local st = steps[i]
      local kind = st.kind
      if kind == "op" then
        local ins, nin = st.ins, #st.ins
        local target = st.target and values[st.target] or nil
        if st.fresh then target = core.empty(st.fresh[1], st.fresh[2]) end
        local r1, r2, r3
        if nin == 1 then
          r1, r2, r3 = graph_op(st.id, st.attrs, target, st.no_grad, values[ins[1]])
        elseif nin == 2 then
          r1, r2, r3 = graph_op(st.id, st.attrs, target, st.no_grad, values[ins[1]], values[ins[2]])
        else
          local a = {}
          for k = 1, nin do a[k] = values[ins[k]] end
          r1, r2, r3 = graph_op(st.id, st.attrs, target, st.no_grad, unpack(a, 1, nin))
        end
        values[i] = r1
        local proj = st.proj
        if proj then
          local rs = {r1, r2, r3}
          for _, pr in ipairs(proj) do values[pr[2]] = rs[pr[1]] end
        end
      elseif kind == "input" then
        values[i] = args[st.index]
      elseif kind == "leaf" then
        values[i] = st.node._value
      elseif kind == "exec" then
        local a = {}
        for k, s in ipairs(st.ins) do a[k] = values[s] end
        local proj = st.proj
        if proj then   -- several results (control-flow nodes)
          local rs = table.pack(st.exec(st.node, a))
          values[i] = rs[1]
          for _, pr in ipairs(proj) do values[pr[2]] = rs[pr[1]] end
        else
          values[i] = st.exec(st.node, a)
        end
      end
      local free = st.free
      if free then
        for k = 1, #free do
          local s = free[k]
          local v = values[s]
          if v ~= nil then
            close(v)
            values[s] = nil
          end
        end
      end
    end
  end)
  if g.trains then set_grad_enabled(grad_was) end
  if not ok then
    local n = steps[at] and steps[at].node
    error(string.format("run: node %d (%s): %s", at, n and n.op or "?", tostring(err)), 0)
  end
  return values, p
end

--- M.run_flat(g, inputs...) -> the list of output tensors, in g.outputs order.
function M.run_flat(g, ...)
  local args = table.pack(...)
  M.check_inputs(g, "run", args)
  local values, p = replay(g, args)
  local outs = {}
  for k, s in ipairs(p.out_slots) do outs[k] = values[s] end
  return outs
end

-- The results' structure filled from the flat outputs.
local function fill(t, outs, pos)
  if t.node then
    pos[1] = pos[1] + 1
    return outs[pos[1]]
  end
  if t.fields then
    local r = {}
    for _, f in ipairs(t.fields) do r[f.key] = fill(f.t, outs, pos) end
    return r
  end
  return t.value
end

--- M.results(g, outs) -> fn's results (unpacked) rebuilt from g's flat output list.
function M.results(g, outs)
  local tpl, pos, res = g.template, {0}, {}
  for i = 1, tpl.n do res[i] = fill(tpl.items[i], outs, pos) end
  return unpack(res, 1, tpl.n)
end

--- M.run(g, inputs...) -> fn's results computed by the graph (see Graph:run).
function M.run(g, ...)
  return M.results(g, M.run_flat(g, ...))
end

return M
