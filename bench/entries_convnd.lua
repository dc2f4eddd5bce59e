--- bench/entries_convnd.lua — conv1d {32,64,1024} -> 64, k=3, padding 1 (conv2d over a unit dim)
-- and conv_transpose2d {16,64,32,32} -> 32, k=4, stride 2, padding 1 (conv2d's input gradient), both
-- with a bias, forward alone and forward + backward (input, weight and bias gradients), in
-- milliseconds vs PyTorch (issue 17's target: at most 1.2x its time).
return function(ctx)
  local dle = ctx.dle
  local F = dle.nn.functional
  local vs_torch = require("bench.vs_torch")
  local entries = {}

  local function list(s) return table.concat(s, ", ") end

  -- x = randn(xs), w = randn(ws) * 0.1, b = zeros(cout); fname(x, w, b, opts) vs PyTorch's call
  local function entry(key, name, xs, ws, cout, fname, opts, torch_args, backward)
    local grad = backward and "True" or "False"
    local call = string.format("torch.nn.functional.%s(x, w, b, %s)", fname, torch_args)
    entries[#entries + 1] = vs_torch(key, name .. (backward and " fwd+bwd" or " fwd"), 1.2, nil, function()
      local x, w = dle.randn(table.unpack(xs)), dle.randn(table.unpack(ws)) * 0.1
      local b = dle.zeros(cout)
      if not backward then return function() return F[fname](x, w, b, opts) end end
      x:requires_grad_(); w:requires_grad_(); b:requires_grad_()
      local g = F[fname](x, w, b, opts):detach():normal_()
      return function() F[fname](x, w, b, opts):backward(g) end
    end, string.format([[
x = torch.randn(%s, requires_grad=%s)
w = (torch.randn(%s) * 0.1).requires_grad_(%s)
b = torch.zeros(%d, requires_grad=%s)
g = %s.detach().normal_()]], list(xs), grad, list(ws), grad, cout, grad, call),
      backward and call .. ".backward(g)" or "with torch.no_grad(): " .. call)
  end
  for _, backward in ipairs({false, true}) do
    local suffix = backward and "_bwd" or ""
    entry("conv1d" .. suffix, "conv1d {32,64,1024} -> 64 k=3 pad 1", {32, 64, 1024}, {64, 64, 3}, 64, "conv1d",
      {padding = 1}, "padding=1", backward)
    entry("conv_transpose2d" .. suffix, "conv_transpose2d {16,64,32,32} -> 32 k=4 s=2 pad 1", {16, 64, 32, 32},
      {64, 32, 4, 4}, 32, "conv_transpose2d", {stride = 2, padding = 1}, "stride=2, padding=1", backward)
  end
  return entries
end
