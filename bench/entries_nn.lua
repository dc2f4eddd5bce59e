--- bench/entries_nn.lua — layer-level figures: conv2d forward + backward (input and weight
-- gradients) at the Fashion-MNIST CNN's two layer shapes, and the fused layer_norm,
-- cross-entropy (class and probability targets), bce-with-logits and causal attention forward +
-- backward, in milliseconds vs PyTorch; and one Adam step over 10M float32 parameters in GB/s of
-- the bytes it must move (reads param, grad, m, v; writes param, m, v: 7 arrays) vs the STREAM
-- triad and torch.optim.Adam (foreach, 1.13 has no fused CPU Adam).
return function(ctx)
  local dle = ctx.dle
  local F = dle.nn.functional
  local vs_torch = require("bench.vs_torch")
  local entries = {}

  -- x {n, cin, hw, hw} -> cout channels, 3x3, padding 1; the first layer's input needs no gradient
  local function conv(key, n, cin, hw, cout, input_grad)
    local name = string.format("conv2d fwd+bwd {%d,%d,%d,%d} -> %d 3x3 pad 1", n, cin, hw, hw, cout)
    entries[#entries + 1] = vs_torch(key, name, 1.0, nil, function()
      local x = dle.randn(n, cin, hw, hw)
      if input_grad then x:requires_grad_() end
      local w = (dle.randn(cout, cin, 3, 3) * 0.1):requires_grad_()
      local b = dle.zeros(cout):requires_grad_()
      local g = dle.randn(n, cout, hw, hw)
      return function()
        local y = F.conv2d(x, w, b, {padding = 1})
        y:backward(g)
      end
    end, string.format([[
x = torch.randn(%d, %d, %d, %d, requires_grad=%s)
w = (torch.randn(%d, %d, 3, 3) * 0.1).requires_grad_()
b = torch.zeros(%d, requires_grad=True)
g = torch.randn(%d, %d, %d, %d)]], n, cin, hw, hw, input_grad and "True" or "False", cout, cin, cout, n, cout, hw, hw),
      "y = torch.nn.functional.conv2d(x, w, b, padding=1)\ny.backward(g)")
  end
  conv("conv1", 128, 1, 28, 32, false)
  conv("conv2", 128, 32, 14, 64, true)

  -- forward + backward of a fused op against PyTorch's (1.13 has no fused attention: its
  -- reference is the matmul, masked_fill, softmax, matmul composite)
  local function fwd_bwd(key, name, setup_dle, torch_setup, torch_body)
    entries[#entries + 1] = vs_torch(key, name, nil, nil, setup_dle, torch_setup, torch_body)
  end
  fwd_bwd("layer_norm_fwd_bwd", "layer_norm fwd+bwd (x, weight, bias), 4096x1024 float32",
    function()
      local x = dle.randn(4096, 1024):requires_grad_()
      local w, b = dle.randn(1024):requires_grad_(), dle.randn(1024):requires_grad_()
      local gy = dle.randn(4096, 1024)
      return function() dle.grad(F.layer_norm(x, w, b), {x, w, b}, {grad_outputs = gy}) end
    end,
    "x = torch.randn(4096, 1024, requires_grad=True)\nw = torch.randn(1024, requires_grad=True)\n"
      .. "b = torch.randn(1024, requires_grad=True)\ngy = torch.randn(4096, 1024)",
    "y = torch.nn.functional.layer_norm(x, (1024,), w, b)\ntorch.autograd.grad(y, (x, w, b), gy)")
  fwd_bwd("cross_entropy_fwd_bwd", "cross_entropy fwd+bwd, logits {4096,1000} float32",
    function()
      local x, t = dle.randn(4096, 1000):requires_grad_(), dle.randint(1, 1001, {4096})
      return function() dle.grad(F.cross_entropy(x, t), {x}) end
    end,
    "x = torch.randn(4096, 1000, requires_grad=True)\nt = torch.randint(0, 1000, (4096,))",
    "torch.autograd.grad(torch.nn.functional.cross_entropy(x, t), (x,))")
  fwd_bwd("soft_cross_entropy_fwd_bwd", "cross_entropy fwd+bwd, probability targets {4096,1000} float32",
    function()
      local x, p = dle.randn(4096, 1000):requires_grad_(), dle.rand(4096, 1000):softmax(2)
      return function() dle.grad(F.cross_entropy(x, p), {x}) end
    end,
    "x = torch.randn(4096, 1000, requires_grad=True)\np = torch.rand(4096, 1000).softmax(1)",
    "torch.autograd.grad(torch.nn.functional.cross_entropy(x, p), (x,))")
  fwd_bwd("bce_with_logits_fwd_bwd", "bce_with_logits fwd+bwd, pos_weight per class, {4096,1000} float32",
    function()
      local x, y = dle.randn(4096, 1000):requires_grad_(), dle.rand(4096, 1000)
      local w = dle.rand(1000) + 0.5
      return function() dle.grad(F.binary_cross_entropy_with_logits(x, y, {pos_weight = w}), {x}) end
    end,
    "x = torch.randn(4096, 1000, requires_grad=True)\ny = torch.rand(4096, 1000)\nw = torch.rand(1000) + 0.5",
    "torch.autograd.grad(torch.nn.functional.binary_cross_entropy_with_logits(x, y, pos_weight=w), (x,))")
  fwd_bwd("sdpa_fwd_bwd", "causal attention fwd+bwd {32,4,128,32} float32 (char-GPT shapes)",
    function()
      local function r() return dle.randn(32, 4, 128, 32) end
      local q, k, v, w = r():requires_grad_(), r():requires_grad_(), r():requires_grad_(), r()
      return function()
        local o = F.scaled_dot_product_attention(q, k, v, {causal = true})
        dle.grad((o * w):sum(), {q, k, v})
      end
    end,
    "q, k, v = (torch.randn(32, 4, 128, 32, requires_grad=True) for _ in range(3))\n"
      .. "w = torch.randn(32, 4, 128, 32)\nF = torch.nn.functional\n"
      .. "mask = torch.ones(128, 128, dtype=torch.bool).triu(1)",
    "o = ((q @ k.transpose(-2, -1) / 32 ** 0.5).masked_fill(mask, float('-inf')).softmax(-1) @ v)\n"
      .. "torch.autograd.grad((o * w).sum(), (q, k, v))")

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
