--- dle.checkpoint(fn, ...): activation checkpointing. fn(...) runs without recording, so none of
-- its intermediate tensors is kept for the backward; the graph gets one node instead, whose rule
-- runs fn again on the same arguments, with recording on and the default generator back in the
-- state fn first saw (dropout draws the same mask), and backpropagates through that. Memory for
-- fn's activations is traded for a second forward (PyTorch's reentrant torch.utils.checkpoint).
--
-- Gradients reach fn's tensor arguments and every tensor fn uses that requires grad (a module's
-- parameters included), as t:backward() and dle.backward() accumulate them into .grad. Two things
-- are refused with an error, as PyTorch refuses them: dle.grad through a checkpoint (the
-- parameters' gradients cannot be handed back, only accumulated) and create_graph (the recomputed
-- graph is differentiated once). Random numbers fn draws from its own dle.Generator objects are
-- not replayed; only the default generator's are. fn returns at most 2 float tensors that need
-- gradients (the limit of dle.autograd.Function), and any other values. The recomputation runs
-- under the autocast mode fn first ran in (as PyTorch's checkpoint), so it gives the same dtypes
-- although backward itself runs with autocast off.
local check = require("dle.check")

local dle = require("dle")

local M = {}
local core = dle.core

-- A one-element tensor that requires grad, passed as an extra argument so that the node is
-- recorded even when no argument requires grad (fn may still use parameters that do).
local anchor

local Checkpoint = dle.autograd.Function{
  name = "checkpoint",
  forward = function(ctx, fn, rng, _, ...)
    ctx.fn, ctx.rng, ctx.args = fn, rng, table.pack(...)
    ctx.autocast, ctx.autocast_dtype = dle.is_autocast_enabled(), dle.get_autocast_dtype()
    ctx:save_for_backward(...)   -- arguments modified in place before backward: an error
    ctx:set_materialize_grads(false)
    return fn(...)
  end,
  backward = function(ctx, ...)
    if core._backward_captures() then
      error("a checkpointed function's gradients can only be accumulated into .grad "
        .. "(t:backward() or dle.backward()), not returned by dle.grad", 0)
    end
    if dle.is_grad_enabled() then
      error("create_graph through a checkpointed function is not supported", 0)
    end
    local grads, args = table.pack(...), {}
    for i = 1, ctx.args.n do
      local a = ctx.args[i]
      if core.is_tensor(a) then
        args[i] = a:detach()
        if a.requires_grad and a:is_floating_point() then args[i]:requires_grad_(true) end
      else
        args[i] = a
      end
    end
    -- the forward again, recorded, drawing the random numbers it drew the first time
    local now = dle.get_rng_state()
    dle.set_rng_state(ctx.rng)
    local was_on, was_dtype = core._autocast_set(ctx.autocast, ctx.autocast_dtype)
    local ok, results = pcall(function()
      -- through a closure: enable_grad takes functions only, and fn may be a module
      return table.pack(dle.enable_grad(function() return ctx.fn(table.unpack(args, 1, ctx.args.n)) end))
    end)
    core._autocast_set(was_on, was_dtype)
    dle.set_rng_state(now)
    if not ok then error(results, 0) end
    -- backpropagate the incoming gradients from the matching recomputed results
    local outs, gouts = {}, {}
    for k = 1, results.n do
      local r, g = results[k], grads[k]
      if core.is_tensor(r) and r.requires_grad and g ~= nil then
        outs[#outs + 1], gouts[#gouts + 1] = r, g
      end
    end
    if #outs > 0 then dle.backward(outs, gouts) end
    local gin = {}   -- one per argument of forward; fn, rng and the anchor get none
    for i = 1, ctx.args.n do
      local a = args[i]
      if core.is_tensor(a) then gin[3 + i] = a.grad end
    end
    return table.unpack(gin, 1, 3 + ctx.args.n)
  end,
}

--- dle.checkpoint(fn, ...) -> fn(...)'s results, recomputed in the backward (see above).
-- @param fn a function or a callable (an nn.Module)
function M.checkpoint(fn, ...)
  check.callable(fn, "checkpoint", "fn")
  if not dle.is_grad_enabled() then return fn(...) end
  anchor = anchor or dle.zeros(1):requires_grad_(true)
  return Checkpoint(fn, dle.get_rng_state(), anchor, ...)
end

return M
