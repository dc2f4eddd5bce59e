--- dle.onnx.ops_training: the optimizer ops of ONNX's ai.onnx.preview.training domain (Adagrad,
-- Momentum, Adam) as dle arithmetic, following their definitions in ONNX's operator docs. Inputs
-- are R (learning rate), T (update count), then n tensors X, n gradients G and the n-tensor
-- state groups; the outputs are the new X and the new states, group by group.
local U = require("dle.onnx.util")

local T = {}

-- The n-tensor groups of an optimizer node's inputs after R and T.
local function groups(ctx, count, ...)
  local args = {...}
  local n = #args // count
  if n * count ~= #args or n == 0 then
    U.fail(ctx, ("expected R, T and %d groups of equally many tensors, got %d tensors"):format(count, #args))
  end
  local out = {}
  for g = 1, count do
    out[g] = {}
    for i = 1, n do out[g][i] = args[(g - 1) * n + i] end
  end
  return n, out
end

local function unpack_groups(list)
  local flat = {}
  for _, g in ipairs(list) do
    for _, t in ipairs(g) do flat[#flat + 1] = t end
  end
  return table.unpack(flat)
end

T.Adagrad = function(ctx, r, t, ...)
  local decay, eps, norm = ctx.a.decay_factor or 0, ctx.a.epsilon or 1e-6, ctx.a.norm_coefficient or 0
  local n, g = groups(ctx, 3, ...)
  local lr = U.scalar(r) / (1 + U.scalar(t) * decay)
  local xs, hs = {}, {}
  for i = 1, n do
    local x, grad, h = g[1][i], g[2][i], g[3][i]
    local gr = x * norm + grad
    hs[i] = h + gr * gr
    xs[i] = x - gr / (hs[i]:sqrt() + eps) * lr
  end
  return unpack_groups({xs, hs})
end

T.Momentum = function(ctx, r, t, ...)
  local alpha, beta, norm = ctx.a.alpha, ctx.a.beta, ctx.a.norm_coefficient or 0
  local nesterov = ctx.a.mode == "nesterov"
  local n, g = groups(ctx, 3, ...)
  local lr = U.scalar(r)
  local beta_t = U.scalar(t) > 0 and beta or 1
  local xs, vs = {}, {}
  for i = 1, n do
    local x, grad, v = g[1][i], g[2][i], g[3][i]
    local gr = x * norm + grad
    vs[i] = v * alpha + gr * beta_t
    xs[i] = nesterov and x - (gr + vs[i] * alpha) * lr or x - vs[i] * lr
  end
  return unpack_groups({xs, vs})
end

T.Adam = function(ctx, r, t, ...)
  local alpha, beta = ctx.a.alpha or 0.9, ctx.a.beta or 0.999
  local eps, norm, post = ctx.a.epsilon or 1e-6, ctx.a.norm_coefficient or 0, ctx.a.norm_coefficient_post or 0
  local n, g = groups(ctx, 4, ...)
  local lr, step = U.scalar(r), U.scalar(t)
  if step > 0 then lr = lr * math.sqrt(1 - beta ^ step) / (1 - alpha ^ step) end
  local xs, vs, hs = {}, {}, {}
  for i = 1, n do
    local x, grad, v, h = g[1][i], g[2][i], g[3][i], g[4][i]
    local gr = x * norm + grad
    vs[i] = v * alpha + gr * (1 - alpha)
    hs[i] = h * beta + gr * gr * (1 - beta)
    xs[i] = (x - vs[i] / (hs[i]:sqrt() + eps) * lr) * (1 - post)
  end
  return unpack_groups({xs, vs, hs})
end

return T
