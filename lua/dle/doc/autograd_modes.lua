-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- Reverse-mode autodiff from C: gradients, grad mode and detaching.
-- Implemented in C (bindings/lua_autograd.c). Ops on tensors that require grad record a graph;
-- `t:backward()` and `dle.backward` accumulate into the leaves' `.grad`; `dle.grad` returns
-- gradients instead.
-- Grad mode is per thread. dle.autograd (Function, jvp, gradcheck, ...) is written in Lua.
-- @module autograd.modes

--- Returns the gradients of outputs with respect to inputs, as a list (`.grad` is left alone).
-- outputs and inputs are a tensor or a list of tensors. Options: `create_graph` (the gradients
-- are themselves differentiable, for higher-order derivatives), `retain_graph` (keep the graph
-- for another backward; default: create_graph), `grad_outputs` (a tensor or list matching
-- outputs; default ones, for one-element outputs) and `allow_unused` (an input the outputs do not
-- depend on gets nil instead of an error).
-- @function dle.grad
-- @param outputs tensor or list of tensors
-- @param inputs tensor or list of tensors
-- @param[opt] opts `{create_graph, retain_graph, grad_outputs, allow_unused}`
-- @treturn table one gradient per input
-- @usage local g = dle.grad((x * x * x):sum(), x, {create_graph = true})[1]   -- 3x^2

--- Runs fn(...) without recording the graph and returns its results.
-- The previous grad mode comes back when fn returns or raises (the error goes on).
-- @function dle.no_grad
-- @param fn function
-- @param ... its arguments
-- @return fn's results
-- @usage dle.no_grad(function() w:sub_(w.grad * lr) end)

--- Runs fn(...) with recording on (inside a no_grad region) and returns its results.
-- @function dle.enable_grad
-- @param fn function
-- @param ... its arguments
-- @return fn's results

--- Tells whether ops record the autograd graph now (false inside dle.no_grad).
-- @function dle.is_grad_enabled
-- @treturn boolean

--- Switches recording on or off for this thread and returns the previous mode.
-- Prefer `dle.no_grad(fn)`, which restores the mode even on errors.
-- @function dle.set_grad_enabled
-- @param on boolean
-- @treturn boolean the previous mode

--- Returns a tensor sharing t's storage but cut from the graph (it does not require grad).
-- Also `dle.detach(t)`.
-- @function Tensor:detach
-- @treturn dle.Tensor

--- Cuts t from the graph in place (it no longer requires grad nor has a grad_fn) and returns t.
-- @function Tensor:detach_
-- @treturn dle.Tensor t

--- Sets whether t requires grad (default true) and returns t.
-- Only float tensors can require grad; a non-leaf (computed from tensors that require grad)
-- cannot stop requiring it (use `detach`). Also the field:
-- `t.requires_grad = true`.
-- @function Tensor:requires_grad_
-- @param[opt] on boolean (default true)
-- @treturn dle.Tensor t
-- @usage local w = dle.randn(3, 3):requires_grad_()
