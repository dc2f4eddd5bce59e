--- dle.nn.functional (1-D, 3-D and adaptive pooling part): max_pool1d, avg_pool1d, max_pool3d,
-- avg_pool3d, adaptive_avg_pool1d/2d and adaptive_max_pool1d/2d with PyTorch's arguments and output
-- sizes, as compositions of dle ops: the 1-D pools are the native 2-D ones over {N, C, 1, L}, the
-- 3-D ones those of each depth plane then a reduction over the depth windows; an adaptive pool gathers
-- (index_select) the windows of each length PyTorch's formula gives (output i of m over n inputs
-- reads [floor(i n / m), ceil((i + 1) n / m)): at most a few lengths) and reduces them (mean, or
-- max with its position), one dim after the other (a mean or a max over a rectangle is one over
-- its rows of one over its columns).
-- This file returns them; dle.nn.functional gathers them.
local dle = require("dle")
local check = require("dle.check")
local F = require("dle.nn.functional")
local S = require("dle.nn.spatial_args")

local M = {}

local shape_str = check.shape_str

-- A 1-D pool: F[name2d] over x {N, C, 1, L} (or {C, 1, L}); its values (and indices).
local function pool1d(fn, name2d, x, k, opts, known, flag)
  opts = check.options(opts, fn, known)
  S.batched(fn, x, 1)
  local kk = S.tuple(fn, "kernel_size", k, 1, 1)[1]
  local s = S.tuple(fn, "stride", opts.stride or kk, 1, 1)[1]
  local p = S.tuple(fn, "padding", opts.padding or 0, 1, 0)[1]
  if 2 * p > kk then
    check.error(string.format("%s: padding %d must be at most half the kernel size %d", fn, p, kk))
  end
  if x:size(-1) + 2 * p < kk then
    check.error(string.format("%s: input %s padded by %d is smaller than the kernel size %d", fn, shape_str(x), p, kk))
  end
  local v, i = F[name2d](x:unsqueeze(-2), {1, kk}, {stride = {1, s}, padding = {0, p}, [flag] = opts[flag]})
  return v:squeeze(-2), i and i:squeeze(-2)
end

--- max_pool1d(x, k, opts): maximum over windows of k of x {N, C, L} (or {C, L}).
-- L_out = (L + 2 padding - k) // stride + 1.
-- @param k kernel size (an integer)
-- @param opts optional {stride = k, padding = 0 (at most k / 2), return_indices = false}
-- @return values {N, C, L_out}; with return_indices also the int64 1-based positions along L
function M.max_pool1d(x, k, opts)
  return pool1d("max_pool1d", "max_pool2d", x, k, opts, {"stride", "padding", "return_indices"}, "return_indices")
end

--- avg_pool1d(x, k, opts): mean over windows of k of x {N, C, L} (or {C, L}); padded zeros count
-- unless count_include_pad is false.
-- @param k kernel size (an integer)
-- @param opts optional {stride = k, padding = 0 (at most k / 2), count_include_pad = true}
-- @return tensor {N, C, L_out}
function M.avg_pool1d(x, k, opts)
  return (pool1d("avg_pool1d", "avg_pool2d", x, k, opts, {"stride", "padding", "count_include_pad"},
    "count_include_pad"))
end

-- A 3-D pool of x {N, C, D, H, W} (or {C, D, H, W}): the native 2-D pool of every depth plane (the
-- depth folded into the channels), then the depth windows of the padded planes gathered
-- (index_select) and reduced: the max, or the mean (a window's mean is the mean of its planes'
-- means, which all count the same positions; count_include_pad false divides by the planes inside
-- the input only, so the count is the product of the two).
local function pool3d(fn, kind, x, k, opts, known)
  opts = check.options(opts, fn, known)
  local xb, added = S.batched(fn, x, 3)
  local kk = S.tuple(fn, "kernel_size", k, 3, 1)
  local s = S.tuple(fn, "stride", opts.stride or kk, 3, 1)
  local p = S.tuple(fn, "padding", opts.padding or 0, 3, 0)
  local sp = S.spatial(xb, 3)
  for i = 1, 3 do
    if 2 * p[i] > kk[i] then
      check.error(string.format("%s: padding %s must be at most half the kernel size %s", fn, S.repr(p), S.repr(kk)))
    end
    if sp[i] + 2 * p[i] < kk[i] then
      check.error(string.format("%s: input %s padded by %s is smaller than the kernel %s", fn, shape_str(x),
        S.repr(p), S.repr(kk)))
    end
  end
  local n, c, d = xb:size(1), xb:size(2), sp[1]
  local o2 = {stride = {s[2], s[3]}, padding = {p[2], p[3]}}
  if kind == "avg" then o2.count_include_pad = opts.count_include_pad end
  local y = F[kind .. "_pool2d"](xb:reshape(n, c * d, sp[2], sp[3]), {kk[2], kk[3]}, o2)
  local ho, wo = y:size(3), y:size(4)
  y = y:reshape(n, c, d, ho, wo)
  if p[1] > 0 then y = F.pad(y, {0, 0, 0, 0, p[1], p[1]}, {value = kind == "max" and -math.huge or 0}) end
  local dout = (d + 2 * p[1] - kk[1]) // s[1] + 1
  local g = y:index_select(3, S.tap_index(kk[1], 1, dout, s[1], y:device())):reshape(n, c, kk[1], dout, ho, wo)
  if kind == "max" then
    y = g:max(3)
  elseif opts.count_include_pad == false and p[1] > 0 then
    local count = {}   -- the depth taps of each output inside the input
    for o = 0, dout - 1 do
      local lo, hi = o * s[1] - p[1], o * s[1] - p[1] + kk[1]
      count[o + 1] = math.min(hi, d) - math.max(lo, 0)
    end
    y = g:sum(3) / dle.tensor(count, {dtype = g:dtype(), device = g:device()}):reshape(1, 1, dout, 1, 1)
  else
    y = g:sum(3) / kk[1]
  end
  if added then y = y:squeeze(1) end
  return y
end

--- max_pool3d(x, k, opts): maximum over kd x kh x kw windows of x {N, C, D, H, W} (or {C, D, H, W}).
-- @param k kernel size: integer or {kd, kh, kw}
-- @param opts optional {stride = k, padding = 0 (at most half the kernel)}, integers or {d, h, w}
-- @return tensor {N, C, Dout, Hout, Wout}
function M.max_pool3d(x, k, opts) return pool3d("max_pool3d", "max", x, k, opts, {"stride", "padding"}) end

--- avg_pool3d(x, k, opts): mean over kd x kh x kw windows of x {N, C, D, H, W} (or {C, D, H, W});
-- padded zeros count unless count_include_pad is false.
-- @param k kernel size: integer or {kd, kh, kw}
-- @param opts optional {stride = k, padding = 0 (at most half the kernel), count_include_pad = true}
-- @return tensor {N, C, Dout, Hout, Wout}
function M.avg_pool3d(x, k, opts)
  return pool3d("avg_pool3d", "avg", x, k, opts, {"stride", "padding", "count_include_pad"})
end

-- The windows of an adaptive pool of n inputs to m outputs, grouped by length in increasing order:
-- a list of {len, outs = 0-based outputs, starts = 0-based first inputs} (int64 tensors on io's
-- device). Computed with tensor ops, so that a huge m fails at once (it cannot be allocated)
-- rather than after a long loop; fn names the caller in that error.
local function windows(fn, n, m, io)
  if m > math.maxinteger // (n + 1) then   -- (i + 1) n + m - 1 below must not overflow
    check.error(string.format("%s: output size %d over an input of %d is too large", fn, m, n))
  end
  local ok, i = pcall(dle.arange, 0, m, 1, io)
  if not ok then check.error(string.format("%s: output size %d: %s", fn, m, check.strip_where(i))) end
  local starts = (i * n) // m
  local lens = ((i + 1) * n + (m - 1)) // m - starts   -- ends: ceil((i + 1) n / m)
  local list = {}
  for _, len in ipairs(lens:unique():totable()) do   -- (unique sorts: increasing lengths)
    local mask = lens:eq(len)
    list[#list + 1] = {len = len, outs = i:masked_select(mask), starts = starts:masked_select(mask)}
  end
  return list
end

-- x reduced along dim over its adaptive windows to m outputs: the means (kind "avg"), or the
-- maxima and their 0-based positions along dim (int64).
local function adaptive_dim(fn, x, dim, m, kind)
  local io = {dtype = "int64", device = x:device()}
  local vals, poss, order = {}, {}, {}
  local groups = windows(fn, x:size(dim), m, io)
  for gi, w in ipairs(groups) do
    local starts = w.starts
    local k = starts:numel()
    local shape = x:shape()
    shape[dim] = k
    table.insert(shape, dim + 1, w.len)   -- dim split into {k windows, len}
    local g = x:index_select(dim, (starts:reshape(k, 1) + dle.arange(1, w.len + 1, 1, io)):reshape(-1)):reshape(shape)
    if kind == "avg" then
      vals[gi] = g:mean(dim + 1)
    else
      local v, a = g:max(dim + 1)
      local at = {}
      for d = 1, x:dim() do at[d] = d == dim and k or 1 end
      vals[gi], poss[gi] = v, a - 1 + starts:reshape(at)
    end
    order[gi] = w.outs
  end
  if #groups == 1 then return vals[1], poss[1] end
  -- the outputs come grouped by length: the (1-based) positions that put them back in order
  local back = dle.cat(order):argsort()
  return dle.cat(vals, dim):index_select(dim, back), kind == "max" and dle.cat(poss, dim):index_select(dim, back) or nil
end

-- An adaptive pool over the last ns dims of x to output_size: values (and, for max, int64 1-based
-- positions in each plane, h*W + w + 1 as max_pool2d's).
local function adaptive(fn, ns, kind, x, output_size)
  S.batched(fn, x, ns)
  local m = S.tuple(fn, "output_size", output_size, ns, 1)
  local sp, d0 = S.spatial(x, ns), x:dim() - ns
  for i = 1, ns do
    if sp[i] < 1 then check.error(string.format("%s: input %s has an empty spatial dim", fn, shape_str(x))) end
  end
  if kind == "avg" then
    local y = x
    for i = ns, 1, -1 do y = adaptive_dim(fn, y, d0 + i, m[i], "avg") end
    return y
  end
  if ns == 1 then
    local v, p = adaptive_dim(fn, x, d0 + 1, m[1], "max")
    return v, p + 1
  end
  -- the maxima of the rows' windows, then of those over the columns' windows, where the row of a
  -- maximum picks its column (the first maximum in row-major order wins ties, as PyTorch's)
  local v1, c1 = adaptive_dim(fn, x, d0 + 2, m[2], "max")
  local v, r = adaptive_dim(fn, v1, d0 + 1, m[1], "max")
  return v, r * sp[2] + c1:gather(d0 + 1, r + 1) + 1
end

--- adaptive_avg_pool1d(x, output_size): the mean of x {N, C, L} (or {C, L}) over output_size
-- windows covering L (window i: [floor(i L / out), ceil((i + 1) L / out)), PyTorch's).
-- @param output_size integer
-- @return tensor {N, C, output_size}
function M.adaptive_avg_pool1d(x, output_size) return adaptive("adaptive_avg_pool1d", 1, "avg", x, output_size) end

--- adaptive_avg_pool2d(x, output_size): the mean of x {N, C, H, W} (or {C, H, W}) over an
-- output_size grid of windows (per dim as adaptive_avg_pool1d's).
-- @param output_size integer or {h, w}
-- @return tensor {N, C, h, w}
function M.adaptive_avg_pool2d(x, output_size) return adaptive("adaptive_avg_pool2d", 2, "avg", x, output_size) end

-- An adaptive max pool: its values, and with opts.return_indices its indices.
local function adaptive_max(fn, ns, x, output_size, opts)
  opts = check.options(opts, fn, {"return_indices"})
  local v, i = adaptive(fn, ns, "max", x, output_size)
  if opts.return_indices then return v, i end
  return v
end

--- adaptive_max_pool1d(x, output_size, opts): the maximum of x {N, C, L} (or {C, L}) over
-- output_size windows covering L (as adaptive_avg_pool1d's).
-- @param output_size integer
-- @param opts optional {return_indices = false}
-- @return values {N, C, output_size}; with return_indices also the int64 1-based positions along L
function M.adaptive_max_pool1d(x, output_size, opts)
  return adaptive_max("adaptive_max_pool1d", 1, x, output_size, opts)
end

--- adaptive_max_pool2d(x, output_size, opts): the maximum of x {N, C, H, W} (or {C, H, W}) over an
-- output_size grid of windows (as adaptive_avg_pool2d's).
-- @param output_size integer or {h, w}
-- @param opts optional {return_indices = false}
-- @return values {N, C, h, w}; with return_indices also the int64 1-based positions h*W + w + 1 in
--   each plane (as max_pool2d's)
function M.adaptive_max_pool2d(x, output_size, opts)
  return adaptive_max("adaptive_max_pool2d", 2, x, output_size, opts)
end

return M
