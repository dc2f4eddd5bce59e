--- dle.onnx.ops_resize: ONNX's Resize (opset 10+) and Upsample (opsets 7-9) as separable
-- interpolation with dle's index_select: along each resized dim, every output position is a
-- weighted sum of n input positions (n = 2 for nearest and linear, 4 for cubic). The positions and
-- weights follow ONNX's reference (onnx/backend/test/case/node/resize.py): the source coordinate of
-- each coordinate_transformation_mode, the n nearest positions of the edge-padded input, the
-- nearest/linear/cubic coefficients of the fractional part.
local dle = require("dle")
local U = require("dle.onnx.util")

local R = {}

-- The source coordinate of output position x (0-based) along a dim of input length `len`.
local function source_coordinate(mode, x, scale, len, out_len, roi_start, roi_end)
  if mode == "align_corners" then
    return out_len == 1 and 0 or x * (len - 1) / (out_len - 1)
  elseif mode == "asymmetric" then
    return x / scale
  elseif mode == "tf_half_pixel_for_nn" then
    return (x + 0.5) / scale
  elseif mode == "pytorch_half_pixel" then
    return out_len == 1 and -0.5 or (x + 0.5) / scale - 0.5
  elseif mode == "tf_crop_and_resize" then
    if out_len > 1 then
      return roi_start * (len - 1) + x * (roi_end - roi_start) * (len - 1) / (out_len - 1)
    end
    return 0.5 * (roi_start + roi_end) * (len - 1)
  end
  return (x + 0.5) / scale - 0.5   -- half_pixel
end

local function cubic_coeffs(r, a)
  local s = 1 - r
  return {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
          ((a + 2) * r - (a + 3)) * r * r + 1,
          ((a + 2) * s - (a + 3)) * s * s + 1,
          ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a}
end

local function nearest_coeffs(r, integral, mode)
  if integral then return {0, 1} end
  local up
  if mode == "round_prefer_ceil" then up = r >= 0.5
  elseif mode == "floor" then up = false
  elseif mode == "ceil" then up = true
  else up = r > 0.5 end   -- round_prefer_floor
  return up and {0, 1} or {1, 0}
end

-- x resized along dim d (1-based) to out_len positions; p holds the node's settings.
local function resize_dim(x, d, scale, out_len, p, roi_start, roi_end)
  local len = x:size(d)
  local n = p.mode == "cubic" and 4 or 2
  local idx, wts, outside = {}, {}, {}
  for k = 1, n do idx[k], wts[k] = {}, {} end
  -- the "output width" of the reference is scale * len, not the rounded length
  local out_width = scale * len
  for j = 0, out_len - 1 do
    local src = source_coordinate(p.coord, j, scale, len, out_width, roi_start, roi_end)
    outside[j + 1] = p.coord == "tf_crop_and_resize" and (src < 0 or src > len - 1)
    local base = math.floor(src)
    local integral = base == src
    local r = src - base
    if integral then base, r = base - 1, 1 end   -- the reference's taps for integral coordinates
    local coeffs
    if p.mode == "cubic" then coeffs = cubic_coeffs(r, p.cubic_a)
    elseif p.mode == "linear" then coeffs = {1 - r, r}
    else coeffs = nearest_coeffs(r, integral, p.nearest) end
    local first = base - n // 2 + 1
    local total = 0
    for k = 1, n do
      local pos = first + k - 1
      if p.exclude_outside and (pos < 0 or pos >= len) then coeffs[k] = 0 end
      total = total + coeffs[k]
      idx[k][j + 1] = math.max(0, math.min(len - 1, pos)) + 1
    end
    for k = 1, n do wts[k][j + 1] = p.exclude_outside and coeffs[k] / total or coeffs[k] end
  end
  local shape = {}
  for i = 1, x:dim() do shape[i] = 1 end
  shape[d] = out_len
  local y
  for k = 1, n do
    local part = x:index_select(d, dle.tensor(idx[k], {dtype = "int64"}):reshape(out_len))
    local w = dle.tensor(wts[k], {dtype = "float64"}):reshape(shape)
    part = part:double() * w
    y = y and y + part or part
  end
  if p.coord == "tf_crop_and_resize" then
    local mask = dle.tensor(outside, {dtype = "bool"}):reshape(shape)
    y = dle.where(mask, p.extrapolation, y)
  end
  if not x:is_floating_point() then y = y:round() end
  return y:to(x:dtype())
end

-- Resizes every dim whose size or scale changes; scales or sizes (one of them) per dim.
local function resize(ctx, x, scales, sizes, roi, p)
  local r = x:dim()
  for d = 1, r do
    local len = x:size(d)
    local scale, out_len
    if sizes then
      out_len = sizes[d]
      scale = out_len / len
    else
      scale = scales[d]
      out_len = math.floor(len * scale)
    end
    if scale <= 0 then U.fail(ctx, "scales must be positive") end
    if scale ~= 1 or out_len ~= len or p.coord == "tf_crop_and_resize" then
      x = resize_dim(x, d, scale, out_len, p, roi and roi[d] or 0, roi and roi[d + r] or 1)
    end
  end
  return x
end

R.Resize = function(ctx, x, roi, scales, sizes)
  local a = ctx.a
  local p = {mode = a.mode or "nearest", coord = a.coordinate_transformation_mode or "half_pixel",
             nearest = a.nearest_mode or "round_prefer_floor", cubic_a = a.cubic_coeff_a or -0.75,
             exclude_outside = (a.exclude_outside or 0) == 1, extrapolation = a.extrapolation_value or 0}
  if ctx.opset < 11 then
    -- opset 10: (X, scales), Upsample's asymmetric coordinates
    scales = roi
    p.coord, p.nearest = "asymmetric", "floor"
    return resize(ctx, x, U.values(scales), nil, nil, p)
  end
  local sz = sizes and sizes:numel() > 0 and U.ints(sizes) or nil
  local sc = not sz and scales and U.values(scales) or nil
  if not sz and not sc then U.fail(ctx, "neither scales nor sizes given") end
  local rv = roi and roi:numel() > 0 and U.values(roi) or nil
  return resize(ctx, x, sc, sz, rv, p)
end

R.Upsample = function(ctx, x, scales)
  local p = {mode = ctx.a.mode or "nearest", coord = "asymmetric", nearest = "floor"}
  if p.mode == "bilinear" then p.mode = "linear" end
  return resize(ctx, x, scales and U.values(scales) or ctx.a.scales, nil, nil, p)
end

-- ---------------------------------------------------------------- GridSample (opset 16)
-- PyTorch's grid_sample, whose outputs ONNX's tests hold: grid {N, Ho, Wo, 2} of normalized (x, y)
-- in [-1, 1]; samples gathered from x {N, C, H*W} at clamped flat positions, zero where outside.

-- PyTorch's reflect_coordinates: v reflected into [low2 / 2, high2 / 2].
local function reflect(v, low2, high2)
  if low2 == high2 then return v * 0 end
  local lo, span = low2 / 2, (high2 - low2) / 2
  local a = (v - lo):abs()
  local extra = a - (a / span):floor() * span
  local flips = (a / span):floor()
  local even = (flips - (flips / 2):floor() * 2):eq(0)
  return dle.where(even, extra + lo, (extra * -1) + span + lo)
end

local function padded_coordinate(v, size, padding, align)
  if padding == "border" then return v:clamp(0, size - 1) end
  if padding == "reflection" then
    v = align and reflect(v, 0, 2 * (size - 1)) or reflect(v, -1, 2 * size - 1)
    return v:clamp(0, size - 1)
  end
  return v
end

-- The values of x {N, C, H, W} at integer positions (ix, iy) {N, 1, P}; 0 outside.
local function fetch(x, ix, iy)
  local n, c, h, w = table.unpack(x:shape())
  local inside = ix:ge(0):logical_and(ix:le(w - 1)):logical_and(iy:ge(0)):logical_and(iy:le(h - 1))
  local flat = (iy:clamp(0, h - 1) * w + ix:clamp(0, w - 1)):long()   -- 0-based
  local v = x:reshape(n, c, h * w):gather(3, flat:expand(n, c, flat:size(3)):contiguous() + 1)
  return dle.where(inside, v, 0)
end

R.GridSample = function(ctx, x, grid)
  if x:dim() ~= 4 then U.fail(ctx, "only 4-D inputs are supported") end
  local mode, padding = ctx.a.mode or "bilinear", ctx.a.padding_mode or "zeros"
  local align = (ctx.a.align_corners or 0) == 1
  local n, c, h, w = table.unpack(x:shape())
  local ho, wo = grid:size(2), grid:size(3)
  local g = grid:double()
  local function unnormalize(v, size)
    if align then return (v + 1) / 2 * (size - 1) end
    return ((v + 1) * size - 1) / 2
  end
  local gx = unnormalize(g:select(4, 1):reshape(n, 1, ho * wo), w)
  local gy = unnormalize(g:select(4, 2):reshape(n, 1, ho * wo), h)
  local xd = x:double()
  local y
  if mode == "bicubic" then
    -- 4 x 4 neighbours of the unpadded coordinate, each index padded on its own (PyTorch's rule)
    local fx, fy = gx:floor(), gy:floor()
    local tx, ty = gx - fx, gy - fy
    local function coeffs(t)
      local a = -0.75
      local function near(s) return ((a + 2) * s - (a + 3)) * s * s + 1 end
      local function far(s) return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a end
      return {far(t + 1), near(t), near(1 - t), far(2 - t)}
    end
    local cx, cy = coeffs(tx), coeffs(ty)
    for j = 1, 4 do
      local row
      local iy = padded_coordinate(fy + (j - 2), h, padding, align)
      for i = 1, 4 do
        local ix = padded_coordinate(fx + (i - 2), w, padding, align)
        local v = fetch(xd, ix, iy) * cx[i]
        row = row and row + v or v
      end
      y = y and y + row * cy[j] or row * cy[j]
    end
  else
    gx, gy = padded_coordinate(gx, w, padding, align), padded_coordinate(gy, h, padding, align)
    if mode == "nearest" then
      y = fetch(xd, gx:round(), gy:round())
    else
      local x0, y0 = gx:floor(), gy:floor()
      local wx, wy = gx - x0, gy - y0
      y = fetch(xd, x0, y0) * (1 - wx) * (1 - wy) + fetch(xd, x0 + 1, y0) * wx * (1 - wy)
          + fetch(xd, x0, y0 + 1) * (1 - wx) * wy + fetch(xd, x0 + 1, y0 + 1) * wx * wy
    end
  end
  return y:reshape(n, c, ho, wo):to(x:dtype())
end

return R
