--- The core of dle.nn.RNN, LSTM and GRU: one direction of one layer over a time-major sequence.
-- The input projections of all timesteps are one GEMM ({L, N, In} @ W_ih^T); each step is one
-- h @ W_hh^T GEMM and one fused op (dle.lstm_cell_fused, dle.gru_cell_fused; tanh or relu for RNN).
-- When a gradient is wanted the direction runs as one custom autograd Function whose backward is
-- the reverse loop over the fused backward ops, with the weight gradients as one GEMM over all
-- timesteps. With create_graph (double backward) and in forward mode (dle.jvp) it differentiates
-- the same loop written in differentiable dle ops instead.
-- Parameters p: {w_ih, w_hh, b_ih, b_hh, w_hr} (PyTorch's layouts; biases and w_hr may be nil).
local dle = require("dle")
local F = require("dle.nn.functional")

local R = {}

--- Gate blocks of H per mode (PyTorch's orders: LSTM i, f, g, o; GRU r, z, n).
R.GATES = {LSTM = 4, GRU = 3, RNN_TANH = 1, RNN_RELU = 1}

-- The projections of all steps {L, N, G H}: LSTM and RNN fold both biases in, GRU only b_ih
-- (b_hh's n block must stay inside r (...), so GRU adds b_hh to h W_hh^T).
local function project(mode, x, p)
  local b = p.b_ih
  if mode ~= "GRU" and p.b_hh then b = b and b + p.b_hh or p.b_hh end
  return F.linear(x, p.w_ih, b)
end

-- One step from the projection xg of its input: h', c' (LSTM), act (the fused op's saved gates)
-- and, with a projection (LSTM proj_size), h' before it.
local function step(mode, xg, h, c, p)
  if mode == "LSTM" then
    local hr, c2, act = dle.lstm_cell_fused(xg, h:matmul(p.w_hh:t()), c)
    return p.w_hr and hr:matmul(p.w_hr:t()) or hr, c2, act, hr
  elseif mode == "GRU" then
    local hg = p.b_hh and dle.addmm(p.b_hh, h, p.w_hh:t()) or h:matmul(p.w_hh:t())
    local h2, act = dle.gru_cell_fused(xg, hg, h)
    return h2, nil, act
  end
  local pre = dle.addmm(xg, h, p.w_hh:t())
  return mode == "RNN_TANH" and pre:tanh() or pre:relu()
end

-- The loop: x {L, N, In}, h0 {N, Hout}, c0 {N, H} (LSTM). Returns the outputs {L, N, Hout} in
-- time order, c_n, and the per-step values backward reads (saved[t] = {h, c, act, hr, h_prev, c_prev}).
local function run(mode, reverse, x, h0, c0, p)
  local L = x:size(1)
  local xg = project(mode, x, p)
  local hs, saved, h, c = {}, {}, h0, c0
  for k = 1, L do
    local t = reverse and L - k + 1 or k
    local h2, c2, act, hr = step(mode, xg:select(1, t), h, c, p)
    hs[t], saved[t] = h2, {h = h2, c = c2, act = act, hr = hr, h_prev = h, c_prev = c}
    h, c = h2, c2
  end
  return dle.stack(hs, 1), c, saved
end

--- R.sequence(mode, reverse, x, h0, c0, p) -> out {L, N, Hout}, c_n: the loop in differentiable dle
-- ops (the reference the custom Function's backward must match, and its double backward).
function R.sequence(mode, reverse, x, h0, c0, p)
  local out, c = run(mode, reverse, x, h0, c0, p)
  return out, c
end

local PARAMS = {"w_ih", "w_hh", "b_ih", "b_hh", "w_hr"}

-- args of the Function after mode and reverse: x, h0, c0, then the parameters in PARAMS order
local function unpack_args(x, h0, c0, ...)
  local p, v = {}, {...}
  for i, name in ipairs(PARAMS) do p[name] = v[i] end
  return x, h0, c0, p
end

-- block k (0-based) of H columns of t {N, k H}
local function blk(t, k, h) return t:narrow(2, k * h + 1, h) end

-- The fused backward ops' formulas in differentiable dle ops (engine/ops/rnn_grad.c has them in C):
-- the reverse loop under create_graph, where the step's saved values carry their history.
local composite = {}
function composite.LSTM(gh, gc, act, c_prev, c)
  local h = c:size(2)
  local i, f, g, o = blk(act, 0, h), blk(act, 1, h), blk(act, 2, h), blk(act, 3, h)
  local tc = c:tanh()
  local dct = gc + gh * o * (1 - tc * tc)
  return dle.cat({dct * g * i * (1 - i), dct * c_prev * f * (1 - f), dct * i * (1 - g * g),
                  gh * tc * o * (1 - o)}, 2), dct * f
end
function composite.GRU(gh, act, h_prev)
  local h = h_prev:size(2)
  local r, z, n, hn = blk(act, 0, h), blk(act, 1, h), blk(act, 2, h), blk(act, 3, h)
  local dn = gh * (1 - z) * (1 - n * n)
  local dr = dn * hn * r * (1 - r)
  local dz = gh * (h_prev - n) * z * (1 - z)
  return dle.cat({dr, dz, dn}, 2), dle.cat({dr, dz, dn * r}, 2), gh * z
end

-- The step's gradient through its cell: gh (w.r.t. h') and gc (w.r.t. c', LSTM) -> the gradients
-- of the input projection xg, of the hidden projection hg (GRU: they differ), of h_prev through
-- the cell itself (GRU's z h term) and of c_prev. diff: in differentiable ops.
local function step_backward(mode, s, gh, gc, p, diff)
  if mode == "LSTM" then
    local ghr = p.w_hr and gh:matmul(p.w_hr) or gh
    local dg, dc = (diff and composite.LSTM or dle.lstm_cell_fused_backward)(ghr, gc, s.act, s.c_prev, s.c)
    return dg, dg, nil, dc
  elseif mode == "GRU" then
    local dx, dhg, dh = (diff and composite.GRU or dle.gru_cell_fused_backward)(gh, s.act, s.h_prev)
    return dx, dhg, dh
  end
  local d = mode == "RNN_TANH" and gh * (1 - s.h * s.h) or gh:masked_fill(s.h:le(0), 0)
  return d, d
end

-- {L, N, K} list of per-step {N, K} tensors as {L N, K}
local function rows(list) return dle.stack(list, 1):flatten(1, 2) end

-- The reverse loop with the fused backward ops; weight gradients as one GEMM over all steps.
-- diff (create_graph): the forward is run again with its history and the loop is written in
-- differentiable ops, so the gradients can be differentiated again.
local function backward_loop(mode, reverse, ctx, g_out, g_c, diff)
  local x, h0, c0, p = unpack_args(table.unpack(ctx.saved_tensors, 1, 8))
  local saved, L = ctx.steps, x:size(1)
  if diff then saved = select(3, run(mode, reverse, x, h0, c0, p)) end
  local dh, dc = dle.zeros_like(h0), c0 and (g_c or dle.zeros_like(c0))
  local dgx, dgh, dproj = {}, {}, {}
  for k = 1, L do
    local t = reverse and k or L - k + 1
    local gt = g_out:select(1, t) + dh
    local gx, gh, ghd, gcp = step_backward(mode, saved[t], gt, dc, p, diff)
    dgx[t], dgh[t], dproj[t], dc = gx, gh, gt, gcp
    dh = ghd and dle.addmm(ghd, gh, p.w_hh) or gh:matmul(p.w_hh)
  end
  local hprev, hraw = {}, {}
  for t = 1, L do hprev[t], hraw[t] = saved[t].h_prev, saved[t].hr end
  local DX, DH = rows(dgx), mode == "GRU" and rows(dgh) or nil
  DH = DH or DX
  local g = {}
  g.x = DX:matmul(p.w_ih):view(x:shape())
  g.w_ih = DX:t():matmul(x:reshape(-1, x:size(3)))
  g.w_hh = DH:t():matmul(rows(hprev))
  if p.b_ih then g.b_ih = DX:sum(1) end
  if p.b_hh then g.b_hh = DH:sum(1) end
  if p.w_hr then g.w_hr = rows(dproj):t():matmul(rows(hraw)) end
  return g.x, dh, dc, g.w_ih, g.w_hh, g.b_ih, g.b_hh, g.w_hr
end

-- The tensors among the Function's arguments (after mode and reverse), with their positions.
local function tensor_args(ctx)
  local list, pos = {}, {}
  for i = 1, 8 do
    local t = ctx.saved_tensors[i]
    if t ~= nil then list[#list + 1], pos[#pos + 1] = t, i end
  end
  return list, pos
end

-- The differentiable loop as a function of the Function's tensor arguments (for dle.grad / dle.jvp).
local function as_function(mode, reverse, ctx)
  local _, pos = tensor_args(ctx)
  return function(...)
    local a, v = {}, {...}
    for j, i in ipairs(pos) do a[i] = v[j] end
    local x, h0, c0, p = unpack_args(table.unpack(a, 1, 8))
    local out, c = R.sequence(mode, reverse, x, h0, c0, p)
    if mode == "LSTM" then return out, c end
    return out
  end
end

local Direction = dle.autograd.Function {
  name = "rnn_direction",
  forward = function(ctx, mode, reverse, ...)
    ctx:save_for_backward(...)
    ctx.mode, ctx.reverse = mode, reverse
    local x, h0, c0, p = unpack_args(...)
    local out, c, saved = run(mode, reverse, x, h0, c0, p)
    ctx.steps = saved
    -- c_n is also held in the saved steps: hand out another header (no reference cycle)
    if mode == "LSTM" then return out, c:detach() end
    return out
  end,
  backward = function(ctx, g_out, g_c)
    return nil, nil, backward_loop(ctx.mode, ctx.reverse, ctx, g_out, g_c, dle.is_grad_enabled())
  end,
  jvp = function(ctx, ...)
    local ins = tensor_args(ctx)
    local tans = {...}
    for j = 1, #ins do tans[j] = tans[j] or dle.zeros_like(ins[j]) end
    local _, touts = dle.jvp(as_function(ctx.mode, ctx.reverse, ctx), ins, tans)
    if ctx.mode == "LSTM" then return touts[1], touts[2] end
    return touts -- one result: dle.jvp returns its tangent itself
  end,
}

--- R.direction(mode, reverse, x, h0, c0, p) -> out {L, N, Hout}, h_n {N, Hout}, c_n (LSTM): one
-- direction of one layer (x time-major {L, N, In}; reverse runs from the last step).
function R.direction(mode, reverse, x, h0, c0, p)
  local out, c
  if dle.is_grad_enabled() then
    out, c = Direction(mode, reverse, x, h0, c0, p.w_ih, p.w_hh, p.b_ih, p.b_hh, p.w_hr)
  else
    out, c = R.sequence(mode, reverse, x, h0, c0, p)
  end
  return out, out:select(1, reverse and 1 or x:size(1)), c
end

return R
