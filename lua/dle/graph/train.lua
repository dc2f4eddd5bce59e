--- dle.graph.train: the nodes that make a whole training step one graph (see dle.graph).
--
-- Traced, loss:backward() records its gradient ops as ordinary nodes and one "grad_acc" node per
-- leaf it reaches (engine/autograd/backward.c: the leaf's .grad set, or added to, by the rule of
-- the .grad a replay finds then, as eager backward does); a read of t.grad under the trace is a
-- "grad_of" node unless that tensor is already a value of the graph (the .grad a replay finds);
-- opt:zero_grad() / module:zero_grad() is a "zero_grad" node, and the step of an optimizer with a
-- fused C step (SGD, Adam, AdamW, Adagrad, RMSprop) an "optim_step" node that runs that step at
-- replay with the hyperparameters and step counts the optimizer holds then (a scheduler's new lr is
-- used, never a value baked into the graph). These "state" nodes write state outside the graph's
-- values: they are effects (they run even when unused), their values are never freed by the replay,
-- and each takes the previous one as one more input, so they run in the order traced.
-- An optimizer step with a closure, or of an optimizer without a fused step (LBFGS, Adamax, NAdam,
-- RAdam), and backward hooks keep the trace unsafe (dle.compile runs such a function eagerly).
local core = require("dle.core")
local run = require("dle.graph.run")
local shape_str = require("dle.graph.node").shape_str

local M = {}

--- M.state_ops[op] = true for the ops of the nodes above.
M.state_ops = {grad_acc = true, grad_of = true, zero_grad = true, optim_step = true}

-- ------------------------------------------------------------------ recording

-- The innermost Lua-level trace of this thread, or nil.
local function running()
  local r = require("dle.graph")._running
  return r[#r]
end

--- M.tracing() -> whether ops run now are recorded by a graph trace.
function M.tracing() return core._trace_active() and running() ~= nil end

--- M.record(op, work) -> work's results: suspends the engine's tracer (the records so far become a
-- segment of the trace), runs work() -> ins, outs, attrs, ... (the effect done eagerly, its tensor
-- inputs and the tensors it wrote), adds the segment {state = op, ins, outs, attrs} and resumes.
function M.record(op, work)
  local ctx = running()
  ctx.segments[#ctx.segments + 1] = core._trace_end()
  local res = table.pack(pcall(work))
  core._trace_begin()
  if not res[1] then error(res[2], 0) end
  ctx.segments[#ctx.segments + 1] = {state = op, ins = res[2], outs = res[3], attrs = res[4] or {}}
  return table.unpack(res, 5, res.n)
end

-- Sets each param's .grad to nil (to_none) or fills the existing ones with zeros.
local function clear(params, n, to_none)
  require("dle").no_grad(function()
    for k = 1, n do
      local p = params[k]
      if to_none then p.grad = nil
      elseif p.grad ~= nil then p.grad:zero_() end
    end
  end)
end

--- M.zero_grad(params, to_none): clears the params' gradients (opt:zero_grad, module:zero_grad);
-- under a trace, as one "zero_grad" node.
function M.zero_grad(params, to_none)
  if not M.tracing() then return clear(params, #params, to_none) end
  M.record("zero_grad", function()
    clear(params, #params, to_none)
    return params, {}, {count = #params, set_to_none = to_none}
  end)
end

-- ------------------------------------------------------------------ replaying

local executors = run.executors

-- inputs: leaf, g (then the previous state node's value)
executors.grad_acc = function(_, ins) return core._grad_accumulate(ins[1], ins[2]) end

executors.grad_of = function(node, ins)
  local g = ins[1].grad
  if g == nil then
    error(string.format("the .grad of a %s tensor was read when traced but is nil now",
      shape_str(node._shape)), 0)
  end
  return g
end

-- inputs: the params (then the previous state node's value); attrs.count params
executors.zero_grad = function(node, ins)
  clear(ins, node.attrs.count, node.attrs.set_to_none)
  return ins[1]
end

-- attrs.optimizer: the optimizer; its params (in its groups' order) are the node's results
executors.optim_step = function(node)
  local opt = node.attrs.optimizer
  opt:_step_all()
  local params = {}
  for _, group in ipairs(opt.param_groups) do
    for _, p in ipairs(group.params) do params[#params + 1] = p end
  end
  return table.unpack(params)
end

return M
