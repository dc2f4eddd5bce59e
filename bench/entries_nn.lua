--- bench/entries_nn.lua — layer-level figures: conv2d forward + backward (input and weight
-- gradients) at the Fashion-MNIST CNN's two layer shapes, in milliseconds vs PyTorch; and one
-- Adam step over 10M float32 parameters in GB/s of the bytes it must move (reads param, grad, m,
-- v; writes param, m, v: 7 arrays) vs the STREAM triad and torch.optim.Adam (foreach, 1.13 has
-- no fused CPU Adam).
return function(ctx)
  local dle = ctx.dle
  local F = dle.nn.functional
  local entries = {}

  -- x {n, cin, hw, hw} -> cout channels, 3x3, padding 1; the first layer's input needs no gradient
  local function conv(key, n, cin, hw, cout, input_grad)
    entries[#entries + 1] = {
      key = key,
      name = string.format("conv2d fwd+bwd {%d,%d,%d,%d} -> %d 3x3 pad 1", n, cin, hw, hw, cout),
      unit = "ms", scale = 1e3, target = {ref = "PyTorch", max = 1.0},
      dle = function()
        local x = dle.randn(n, cin, hw, hw)
        if input_grad then x:requires_grad_() end
        local w = (dle.randn(cout, cin, 3, 3) * 0.1):requires_grad_()
        local b = dle.zeros(cout):requires_grad_()
        local g = dle.randn(n, cout, hw, hw)
        return function()
          local y = F.conv2d(x, w, b, {padding = 1})
          y:backward(g)
        end
      end,
      refs = {{kind = "torch", label = "PyTorch",
               setup = string.format([[
x = torch.randn(%d, %d, %d, %d, requires_grad=%s)
w = (torch.randn(%d, %d, 3, 3) * 0.1).requires_grad_()
b = torch.zeros(%d, requires_grad=True)
g = torch.randn(%d, %d, %d, %d)]], n, cin, hw, hw, input_grad and "True" or "False", cout, cin, cout, n, cout, hw, hw),
               body = "y = torch.nn.functional.conv2d(x, w, b, padding=1)\ny.backward(g)"}},
    }
  end
  conv("conv1", 128, 1, 28, 32, false)
  conv("conv2", 128, 32, 14, 64, true)

  local P = 10 * 1000 * 1000
  entries[#entries + 1] = {
    key = "adam_10m",
    name = "Adam step, 10M float32 parameters",
    unit = "GB/s", work = 7 * 4 * P / 1e9,
    dle = function()
      local p = dle.randn(P):requires_grad_()
      p.grad = dle.randn(P)
      local opt = dle.optim.Adam({p}, {lr = 1e-3})
      return function() opt:step() end
    end,
    refs = {
      {kind = "c", label = "STREAM triad", task = ctx.stream_task("triad")},
      {kind = "torch", label = "torch.optim.Adam(foreach)", setup = string.format([[
p = torch.randn(%d, requires_grad=True)
p.grad = torch.randn(%d)
opt = torch.optim.Adam([p], lr=1e-3, foreach=True)]], P, P), body = "opt.step()"},
    },
  }
  return entries
end
