--- bench/entries_autograd.lua — what reverse mode costs on a large graph: forward + backward of a
-- 4-layer MLP (1024 wide, batch 512, no bias, ReLU between) against the same forward alone. The
-- forward is 2*N*P FLOPs and the backward 4*N*P (a gradient for the input and one for the weight
-- of every matmul), so forward + backward should take about 3x the forward; more means the
-- backward does work or copies beyond its gemms.
return function(ctx)
  local dle = ctx.dle
  local N, D, LAYERS = 512, 1024, 4

  local function mlp()
    local x = dle.randn(N, D):requires_grad_()   -- so every layer has both gradients
    local ws = {}
    for i = 1, LAYERS do ws[i] = (dle.randn(D, D) * (1 / math.sqrt(D))):requires_grad_() end
    local function forward()
      local h = x
      for i = 1, LAYERS do
        h = h:matmul(ws[i])
        if i < LAYERS then h = h:relu() end
      end
      return h:sum()
    end
    return forward, ws
  end

  return {{
    key = "backward_cost",
    name = string.format("forward+backward vs forward, MLP %dx%d x%d, batch %d (FLOPs 3x)", D, D, LAYERS, N),
    unit = "ms", scale = 1e3, target = {ref = "forward alone", max = 3.3},
    dle = function()
      local forward, ws = mlp()
      return function()
        forward():backward()
        for _, w in ipairs(ws) do w.grad = nil end
      end
    end,
    refs = {{kind = "lua", label = "forward alone", fn = function()
      local forward = mlp()
      return function() return forward() end
    end}},
  }}
end
