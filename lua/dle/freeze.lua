--- dle.freeze: an inference graph of a module (torch.jit.freeze's job). The module runs once in
-- eval mode under no_grad on the example inputs while dle.graph.trace records it; its parameters
-- become constants holding copies of their values at freeze time (the module itself is left as it
-- was: same train/eval flags, parameters still requiring grad, later training does not reach the
-- graph); then the rewrite rules fold what inference allows: batch normalisation into the
-- preceding conv2d or linear (PyTorch's fuse_conv_bn_eval / fuse_linear_bn_eval formulas),
-- constant subexpressions into constants, and elementwise chains into fused nodes. Dropout in
-- eval mode records nothing, so it is gone. The graph runs with g:run(inputs...).
--   local g = dle.freeze(model, dle.randn(1, 3, 224, 224))
--   local y = g:run(x)
local dle = require("dle")
local check = require("dle.check")
local rewrite = require("dle.rewrite")

-- The module's and its submodules' training flags, to restore.
local function training_flags(m)
  local out = {}
  for _, sub in ipairs(m:modules()) do out[#out + 1] = {sub, sub.training} end
  return out
end

--- dle.freeze(module, example_inputs...) -> a graph computing module(inputs...) for inference.
-- @param module an nn.Module (or any callable; then only no_grad and the rules apply)
-- @param ... example input tensors (their shapes and dtypes are the graph's)
-- @param opts optional last argument {rules = list of rule sets (default inference, algebra, fusion)}
local function freeze(module, ...)
  check.callable(module, "freeze", "module")
  local args = table.pack(...)
  local opts = {}
  if args.n > 0 and type(args[args.n]) == "table" and not dle.is_tensor(args[args.n]) then
    opts = check.options(args[args.n], "freeze", {"rules"})
    args.n = args.n - 1
  end
  local is_module = dle.nn.Module.is_module(module)
  local flags = is_module and training_flags(module) or {}
  if is_module then module:eval() end
  local ok, g = pcall(dle.no_grad, function()
    return dle.graph.trace(function(...) return module(...) end, table.unpack(args, 1, args.n))
  end)
  for _, f in ipairs(flags) do rawset(f[1], "training", f[2]) end
  if not ok then error(g, 0) end
  if g.unsafe then check.error("freeze: the module cannot be captured: " .. g.unsafe) end
  -- parameters become constants holding their values now
  for _, n in ipairs(g:nodes()) do
    if n.op == "param" then
      n.op = "const"
      n._value = n._value:detach():clone()
    end
  end
  local R = rewrite.rules
  for _, set in ipairs(opts.rules or {R.inference, R.algebra, R.fusion}) do g = rewrite.apply(g, set) end
  return g:compact()
end

return {freeze = freeze}
