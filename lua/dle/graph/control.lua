--- dle.graph.control: dle.cond, dle.while_loop and dle.scan as graph nodes (see lua/dle/control.lua).
--
-- Recording. Called while dle.graph traces, a control-flow op stops the engine's tracer (the
-- records so far become a segment of the trace), traces each of its functions as a graph of its
-- own (a subgraph), computes its results eagerly, and adds one record {control = op, ins, outs,
-- subgraphs} before the tracer resumes; the trace's build makes it one node (results 2.. are
-- "output" nodes). Tensors a function uses but was not given (captured weights, intermediates of
-- the enclosing trace) are lifted: each becomes one more input of every subgraph and of the node,
-- so a replay passes the values the enclosing graph has then (numbers mixed with tensors stay
-- constants). Nodes: cond(pred, operands..., captures...) with subgraphs {true_fn, false_fn};
-- while_loop(init..., captures...) with {cond_fn, body_fn}, attrs.n = #init; scan(carries...,
-- xs..., captures...) with {fn}, attrs.ncarry, nxs, ny. A subgraph takes its op's inputs after
-- pred and returns the branch's results, the loop's next values (cond_fn: its pred), or the new
-- carries then the ys of one step.
--
-- Tracing on placeholders: cond's untaken branch, and while_loop's and scan's functions, are
-- traced on detached copies of their tensors (the branch taken runs on the real ones and gives the
-- results). The default generator's state is put back after such a trace (its random ops drew
-- numbers eager code would not); one that writes in place into a tensor it was not given (a
-- running statistic) makes the trace unsafe, since that write happened once more than eagerly.
--
-- Replaying. The executors run the op's flat form (dle.control) with functions that replay the
-- subgraphs, so the branch is chosen and the loop iterated at run time, autograd records what runs,
-- and under a trace (g:backward_graph) the replay records a control node again.
local core = require("dle.core")
local check = require("dle.check")
local Nodes = require("dle.graph.node")
local run = require("dle.graph.run")

local M = {}

local function ctl() return require("dle.control.flat") end
local function graph() return require("dle.graph") end

local tensor_id = core._tensor_id
local view_kind = {}
for name, info in pairs(Nodes.op_infos) do
  if info.kind == "view" then view_kind[name] = true end
end

--- M.running() -> the innermost Lua-level trace of this thread (dle.graph._trace's context).
function M.running()
  local r = graph()._running
  return r[#r]
end

-- Suspends ctx's engine trace, runs work() -> record, adds the record and resumes; returns its outs.
local function record(ctx, work)
  ctx.segments[#ctx.segments + 1] = core._trace_end()
  local ok, rec = pcall(work)
  if ok then ctx.segments[#ctx.segments + 1] = rec end
  core._trace_begin()
  if not ok then error(rec, 0) end
  return rec.outs
end

local function copies(list)
  local c = {n = #list}
  for k, t in ipairs(list) do c[k] = t:detach():clone() end
  return c
end

local function is_capture(n) return (n.op == "const" or n.op == "param") and not n.literal end

-- Whether g writes in place into a tensor it was not given (through views of it).
local function writes_outside(g)
  for _, n in ipairs(g.effects) do
    if n.inplace then
      local t = n.inputs[1]
      while view_kind[t.op] and not t.inplace do t = t.inputs[1] end
      if is_capture(t) then return true end
    end
  end
  return false
end

-- Traces fn(args...) as a subgraph; returns it and fn's results (packed). on_placeholders: keeps
-- the default generator's state and notes writes outside.
local function trace_sub(fname, who, fn, args, on_placeholders)
  local dle = require("dle")
  local state = on_placeholders and dle.get_rng_state()
  local g, res = graph()._trace(fname, fn, table.unpack(args, 1, args.n or #args))
  if state then dle.set_rng_state(state) end
  if g.unsafe then
    g.why_unsafe = string.format("%s: %s: %s", fname, who, g.unsafe)
  elseif on_placeholders and writes_outside(g) then
    g.why_unsafe = string.format("%s: %s writes in place into a tensor it was not given, and tracing "
                                 .. "runs it once more than eager code would", fname, who)
  end
  g.unsafe = nil   -- the enclosing trace carries the reason; the subgraph itself replays
  return g, res
end

local function unsafe_of(subs)
  for _, g in ipairs(subs) do
    if g.why_unsafe then return g.why_unsafe end
  end
end

-- Lifts the tensors the subgraphs captured into inputs (after their own); returns those tensors.
local function lift(subs)
  local caps, index = {}, {}
  for _, g in ipairs(subs) do
    for _, n in ipairs(g:nodes()) do
      if is_capture(n) then
        local id = tensor_id(n._value)
        if not index[id] then caps[#caps + 1] = n._value; index[id] = #caps end
      end
    end
  end
  for _, g in ipairs(subs) do
    local base, slot = #g.inputs, {}
    for k, t in ipairs(caps) do
      local n = Nodes.new("input", {}, {index = base + k}, t:shape(), t:dtype())
      n.device = t:device()
      g.inputs[base + k], g.example_inputs[base + k] = n, t
      slot[k] = n
    end
    local function swap(n) return is_capture(n) and slot[index[tensor_id(n._value)]] or n end
    for _, n in ipairs(g:nodes()) do
      for i, u in ipairs(n.inputs) do n.inputs[i] = swap(u) end
      if n.clobbered_by then n.clobbered_by = swap(n.clobbered_by) end
    end
    for k, n in ipairs(g.outputs) do g.outputs[k] = swap(n) end
    g:compact()
  end
  return caps
end

-- list with each tensor that is one of inputs (or an earlier result) replaced by a new view of
-- it: a node's results are its own tensors (the replay frees intermediates by identity, and the
-- trace finds nodes by it).
local function fresh(list, inputs, n)
  local seen = {}
  for k = 1, n or #inputs do seen[tensor_id(inputs[k])] = true end
  for k, t in ipairs(list) do
    if seen[tensor_id(t)] then list[k] = t:view(t:shape()) end
    seen[tensor_id(list[k])] = true
  end
  return list
end

local function concat(...)
  local out = {}
  for _, l in ipairs({...}) do
    for k = 1, (l.n or #l) do out[#out + 1] = l[k] end
  end
  return out
end

--- M.runner(g, caps) -> a function replaying subgraph g on its arguments followed by caps.
function M.runner(g, caps)
  return function(...)
    local a = table.pack(...)
    for k, t in ipairs(caps) do a[a.n + k] = t end
    local n = a.n + #caps
    local outs = run.run_flat(g, table.unpack(a, 1, n))
    return table.unpack(fresh(outs, a, n), 1, #outs)
  end
end

local function results_match(fname, an, ra, bn, rb)
  if ra.n ~= rb.n then
    check.error(string.format("%s: %s returns %d tensors, %s returns %d", fname, an, ra.n, bn, rb.n))
  end
  local sig = ctl().sig
  for k = 1, ra.n do
    local a, b = ra[k], rb[k]
    if core.is_tensor(a) and core.is_tensor(b) and (sig(a) ~= sig(b)) then
      check.error(string.format("%s: result %d is %s in %s but %s in %s (the branches must return the "
                                .. "same shapes and dtypes)", fname, k, sig(a), an, sig(b), bn))
    end
  end
end

--- M.cond(ctx, pred, true_fn, false_fn, args) -> the branch taken's results, recorded in ctx as
-- a cond node.
function M.cond(ctx, pred, tf, ff, args)
  return record(ctx, function()
    local take = ctl().truth(pred, "cond", "pred")
    local ph = copies(args)
    local gt, rt = trace_sub("cond", "true_fn", tf, take and args or ph, not take)
    local gf, rf = trace_sub("cond", "false_fn", ff, take and ph or args, take)
    local outs = ctl().tensors(take and rt or rf, "cond", take and "true_fn" or "false_fn")
    ctl().tensors(take and rf or rt, "cond", take and "false_fn" or "true_fn")
    results_match("cond", "true_fn", rt, "false_fn", rf)
    local caps = lift({gt, gf})
    local operands = concat(args, caps)
    return {control = "cond", ins = concat({pred}, operands), outs = fresh(outs, operands),
            attrs = {noperands = args.n}, subgraphs = {gt, gf}, names = {"true_fn", "false_fn"},
            grad = core.is_grad_enabled(), unsafe = unsafe_of({gt, gf})}
  end)
end

--- M.while_loop(ctx, cond_fn, body_fn, init) -> the loop's results, recorded as a while_loop node.
function M.while_loop(ctx, cf, bf, init)
  return record(ctx, function()
    local gc, rc = trace_sub("while_loop", "cond_fn", cf, copies(init), true)
    local p = rc[1]
    if core.is_tensor(p) then
      ctl().truth(p, "while_loop", "cond_fn's result")
    elseif rc.n >= 1 and type(p) == "boolean" then
      gc.why_unsafe = gc.why_unsafe or "while_loop: cond_fn returned a Lua boolean (a replay cannot recompute it; "
                                       .. "return a 0-d tensor)"
    else
      check.error("while_loop: cond_fn must return a boolean or a 0-d tensor, got " .. check.typename(p))
    end
    local gb, rb = trace_sub("while_loop", "body_fn", bf, copies(init), true)
    ctl().same_as(table.move(rb, 1, rb.n, 1, {}), init, "while_loop", "body_fn", "init")
    local caps = lift({gc, gb})
    local unsafe = unsafe_of({gc, gb})
    local outs
    if unsafe then
      outs = ctl().while_eager(cf, bf, init)
    else
      outs = ctl().while_eager(M.runner(gc, caps), M.runner(gb, caps), init)
    end
    local ins = concat(init, caps)
    return {control = "while_loop", ins = ins, outs = fresh(outs, ins), attrs = {n = #init},
            subgraphs = {gc, gb}, names = {"cond_fn", "body_fn"}, grad = core.is_grad_enabled(),
            unsafe = unsafe}
  end)
end

--- M.scan(ctx, step, carries, xs) -> the final carries then the ys, recorded as a scan node.
function M.scan(ctx, step, carries, xs)
  return record(ctx, function()
    local ph = copies(carries)
    for j, x in ipairs(xs) do ph[#carries + j] = x:select(1, 1):detach():clone() end
    ph.n = #carries + #xs
    local gs, rs = trace_sub("scan", "fn", step, ph, true)
    local unsafe = unsafe_of({gs})
    local caps = lift({gs})
    local sfn = unsafe and step or M.runner(gs, caps)
    local outs = ctl().scan_eager(sfn, carries, xs)
    local ins = concat(carries, xs, caps)
    return {control = "scan", ins = ins, outs = fresh(outs, ins),
            attrs = {ncarry = #carries, nxs = #xs, ny = rs.n - #carries}, subgraphs = {gs}, names = {"fn"},
            grad = core.is_grad_enabled(), unsafe = unsafe}
  end)
end

-- ---------------------------------------------------------------- replay

-- Runs f(...) without recording when the node was traced so.
local function as_traced(node, f, ...)
  if node.no_grad then return require("dle").no_grad(f, ...) end
  return f(...)
end

local function slice(list, i, j) return table.move(list, i, j, 1, {}) end

run.executors.cond = function(node, ins)
  local sub = node.subgraphs
  local args = table.pack(table.unpack(ins, 2, #ins))
  local r = as_traced(node, ctl().cond, ins[1], M.runner(sub[1], {}), M.runner(sub[2], {}), args)
  return table.unpack(fresh(r, ins), 1, #r)
end

run.executors.while_loop = function(node, ins)
  local n, sub = node.attrs.n, node.subgraphs
  local caps = slice(ins, n + 1, #ins)
  local r = as_traced(node, ctl().while_loop, M.runner(sub[1], caps), M.runner(sub[2], caps), slice(ins, 1, n))
  return table.unpack(fresh(r, ins), 1, #r)   -- no iteration: the results are the inputs
end

run.executors.scan = function(node, ins)
  local a = node.attrs
  local nc, nx = a.ncarry, a.nxs
  local caps = slice(ins, nc + nx + 1, #ins)
  local r = as_traced(node, ctl().scan, M.runner(node.subgraphs[1], caps), slice(ins, 1, nc),
                      slice(ins, nc + 1, nc + nx))
  return table.unpack(fresh(r, ins), 1, #r)
end

return M
