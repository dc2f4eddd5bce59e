--- dle.onnx.ops_rnn: ONNX's RNN, GRU and LSTM unrolled over time with dle's matmul and
-- activations (so they trace and differentiate like any ops). Gate orders are ONNX's (GRU: z, r, h;
-- LSTM: i, o, f, c; peepholes i, o, f); both directions, activations by name with their alpha/beta,
-- clip, GRU's linear_before_reset, LSTM's input_forget, layout 0 and 1. sequence_lens must cover
-- the whole sequence.
local dle = require("dle")
local U = require("dle.onnx.util")
local E = require("dle.onnx.ops_elementwise")

local R = {}

-- The activation functions of one direction: the ONNX names from `activations` (k per direction,
-- default `defaults`) as functions of a tensor.
local function activations(ctx, dir, defaults)
  local names, alphas, betas = ctx.a.activations, ctx.a.activation_alpha or {}, ctx.a.activation_beta or {}
  local k = #defaults
  local out = {}
  for j = 1, k do
    local i = (dir - 1) * k + j
    local name = names and names[i] or defaults[j]
    local a = {alpha = alphas[i], beta = betas[i]}
    local fn
    if name == "Affine" then
      fn = function(x) return x * (a.alpha or 1) + (a.beta or 0) end
    elseif name == "ScaledTanh" then
      fn = function(x) return (x * (a.beta or 1)):tanh() * (a.alpha or 1) end
    else
      local op = E[name]
      if not op then U.fail(ctx, "activation '" .. tostring(name) .. "' is not supported") end
      local actx = {a = a, opset = ctx.opset, node = ctx.node}
      fn = function(x) return op(actx, x) end
    end
    out[j] = fn
  end
  return out
end

-- The common inputs: X as {seq, batch, input}, the directions, W/R/B slices per direction and
-- the initial states (zeros when absent); also checks sequence_lens.
local function setup(ctx, gates, x, w, r, b, lens, h0)
  local layout = ctx.a.layout or 0
  if layout == 1 then x = x:transpose(1, 2) end
  local seq, batch = x:size(1), x:size(2)
  local hidden = ctx.a.hidden_size or r:size(3)
  if lens then
    for _, n in ipairs(U.ints(lens)) do
      if n ~= seq then U.fail(ctx, "sequence_lens shorter than the sequence are not supported") end
    end
  end
  local direction = ctx.a.direction or "forward"
  local dirs = direction == "bidirectional" and 2 or 1
  local function state(s, d)
    if s then
      if layout == 1 then s = s:transpose(1, 2) end
      return s:select(1, d)
    end
    return dle.zeros({batch, hidden}, {dtype = x:dtype()})
  end
  local per_dir = {}
  for d = 1, dirs do
    local bias
    if b then
      local bd = b:select(1, d)
      bias = bd:narrow(1, 1, gates * hidden) + bd:narrow(1, gates * hidden + 1, gates * hidden)
    end
    per_dir[d] = {w = w:select(1, d):t(), rt = r:select(1, d):t(), bias = bias, rb = b and b:select(1, d),
                  h = state(h0, d), reverse = direction == "reverse" or d == 2}
  end
  return x, seq, hidden, per_dir, layout, state
end

-- Stacks the per-step outputs into Y {seq, dirs, batch, hidden} (layout 1: {batch, seq, dirs,
-- hidden}) and the last states into {dirs, batch, hidden} (layout 1: {batch, dirs, hidden}).
local function outputs(ys, finals, layout)
  local per_dir = {}
  for d, steps in ipairs(ys) do per_dir[d] = dle.stack(steps, 1) end
  local y = dle.stack(per_dir, 2)
  local res = {}
  for i, f in ipairs(finals) do
    local s = dle.stack(f, 1)
    res[i] = layout == 1 and s:transpose(1, 2) or s
  end
  if layout == 1 then y = y:permute(3, 1, 2, 4) end
  return y, table.unpack(res)
end

-- Runs step(d, xt, state) over the sequence of each direction; returns the outputs per direction.
local function unroll(seq, per_dir, x, step)
  local ys = {}
  for d, p in ipairs(per_dir) do
    ys[d] = {}
    for t = 1, seq do
      local tt = p.reverse and seq - t + 1 or t
      ys[d][tt] = step(d, p, x:select(1, tt))
    end
  end
  return ys
end

local function clipped(ctx, v)
  local c = ctx.a.clip
  if not c then return v end
  return v:clamp(-c, c)
end

R.RNN = function(ctx, x, w, r, b, lens, h0)
  local xs, seq, _, per_dir, layout = setup(ctx, 1, x, w, r, b, lens, h0)
  local finals = {}
  local acts = {}
  for d = 1, #per_dir do acts[d] = activations(ctx, d, {"Tanh"}) end
  local ys = unroll(seq, per_dir, xs, function(d, p, xt)
    local pre = xt:matmul(p.w) + p.h:matmul(p.rt)
    if p.bias then pre = pre + p.bias end
    p.h = acts[d][1](clipped(ctx, pre))
    finals[d] = p.h
    return p.h
  end)
  return outputs(ys, {finals}, layout)
end

R.GRU = function(ctx, x, w, r, b, lens, h0)
  local xs, seq, hidden, per_dir, layout = setup(ctx, 3, x, w, r, b, lens, h0)
  local lbr = (ctx.a.linear_before_reset or 0) == 1
  local finals, acts = {}, {}
  for d = 1, #per_dir do acts[d] = activations(ctx, d, {"Sigmoid", "Tanh"}) end
  local function gate(t, k) return t:narrow(-1, (k - 1) * hidden + 1, hidden) end
  local ys = unroll(seq, per_dir, xs, function(d, p, xt)
    local f, g = acts[d][1], acts[d][2]
    local xw, hw = xt:matmul(p.w), p.h:matmul(p.rt)
    if p.rb then
      xw = xw + p.rb:narrow(1, 1, 3 * hidden)
      hw = hw + p.rb:narrow(1, 3 * hidden + 1, 3 * hidden)
    end
    local z = f(clipped(ctx, gate(xw, 1) + gate(hw, 1)))
    local rt = f(clipped(ctx, gate(xw, 2) + gate(hw, 2)))
    local hh
    if lbr then
      hh = g(clipped(ctx, gate(xw, 3) + rt * gate(hw, 3)))
    else
      local hr = (rt * p.h):matmul(gate(p.rt, 3))
      if p.rb then hr = hr + gate(p.rb, 6) end
      hh = g(clipped(ctx, gate(xw, 3) + hr))
    end
    p.h = (1 - z) * hh + z * p.h
    finals[d] = p.h
    return p.h
  end)
  return outputs(ys, {finals}, layout)
end

R.LSTM = function(ctx, x, w, r, b, lens, h0, c0, peep)
  local xs, seq, hidden, per_dir, layout, state = setup(ctx, 4, x, w, r, b, lens, h0)
  local input_forget = (ctx.a.input_forget or 0) == 1
  local fh, fc, acts = {}, {}, {}
  for d, p in ipairs(per_dir) do
    acts[d] = activations(ctx, d, {"Sigmoid", "Tanh", "Tanh"})
    p.c = state(c0, d)
    p.p = peep and peep:select(1, d)
  end
  local function gate(t, k) return t:narrow(-1, (k - 1) * hidden + 1, hidden) end
  local ys = unroll(seq, per_dir, xs, function(d, p, xt)
    local f, g, h = acts[d][1], acts[d][2], acts[d][3]
    local pre = xt:matmul(p.w) + p.h:matmul(p.rt)
    if p.bias then pre = pre + p.bias end
    local pi, pf = gate(pre, 1), gate(pre, 3)
    if p.p then pi, pf = pi + gate(p.p, 1) * p.c, pf + gate(p.p, 3) * p.c end
    local it = f(clipped(ctx, pi))
    local ft = input_forget and 1 - it or f(clipped(ctx, pf))
    local ct = g(clipped(ctx, gate(pre, 4)))
    p.c = ft * p.c + it * ct
    local po = gate(pre, 2)
    if p.p then po = po + gate(p.p, 2) * p.c end
    local ot = f(clipped(ctx, po))
    p.h = ot * h(p.c)
    fh[d], fc[d] = p.h, p.c
    return p.h
  end)
  return outputs(ys, {fh, fc}, layout)
end

return R
