--- dle.nn.functional (resampling and rearranging part): interpolate (the native dle.upsample,
-- C kernels and gradients), pixel_shuffle, pixel_unshuffle, channel_shuffle (views and a permute)
-- and bilinear (one matmul). PyTorch's signatures, with options tables for keyword arguments.
-- This file returns them; dle.nn.functional gathers them.
local dle = require("dle")
local check = require("dle.check")
local shape_str = check.shape_str

local M = {}

local INTERPOLATE_OPTS = {"size", "scale_factor", "mode", "align_corners", "recompute_scale_factor", "antialias"}
-- mode -> {native mode, input dims allowed (nil: 3 to 5)}
local MODES = {
  nearest = {"nearest"}, ["nearest-exact"] = {"nearest-exact"},
  linear = {"linear", 3}, bilinear = {"linear", 4}, bicubic = {"cubic", 4}, trilinear = {"linear", 5},
}

-- v as a list of d values (a number repeats), checked by ok; what names it in errors.
local function per_dim(v, d, what, ok, expected)
  local list = type(v) == "table" and v or {v}
  if type(v) ~= "table" then for i = 2, d do list[i] = v end end
  if #list ~= d then
    check.error(string.format("interpolate: %s has %d values, expected %d (one per spatial dim of the input)",
      what, #list, d))
  end
  for i = 1, d do
    if not ok(list[i]) then
      check.error("interpolate: " .. what .. " must hold " .. expected .. ", got " .. tostring(list[i]))
    end
  end
  return list
end

--- interpolate(x, opts): resamples the 1 to 3 spatial dims of x {N, C, ...} as PyTorch's
-- F.interpolate. opts: exactly one of size (a number or one per spatial dim) or scale_factor (the
-- output size is floor(in * scale_factor)); mode "nearest" (default), "nearest-exact", "linear"
-- (3-D input), "bilinear" or "bicubic" (4-D), "trilinear" (5-D); align_corners (interpolating
-- modes only, default false); recompute_scale_factor (with scale_factor: index from in / out
-- rather than from the factor); antialias must be false.
-- @return tensor {N, C, output sizes}
function M.interpolate(x, opts)
  check.tensor(x, "interpolate", "input")
  opts = check.options(opts, "interpolate", INTERPOLATE_OPTS)
  local name = opts.mode or "nearest"
  local mode = MODES[name]
  if not mode then
    check.error("interpolate: mode '" .. tostring(name) .. "' is not supported (nearest, nearest-exact, linear, "
      .. "bilinear, bicubic, trilinear; 'area' is an adaptive average pool)")
  end
  if x:dim() < 3 or x:dim() > 5 or (mode[2] and x:dim() ~= mode[2]) then
    check.error(string.format("interpolate: mode %s expects a %s input, got %s", name,
      mode[2] and mode[2] .. "-D" or "3-D to 5-D", shape_str(x)))
  end
  if opts.align_corners ~= nil and mode[1]:match("^nearest") then
    check.error("interpolate: align_corners can only be set with the interpolating modes (linear, bilinear, "
      .. "bicubic, trilinear), got mode " .. name)
  end
  if opts.antialias then check.error("interpolate: antialias = true is not supported") end
  if (opts.size == nil) == (opts.scale_factor == nil) then
    check.error("interpolate: exactly one of size or scale_factor must be given")
  end
  if opts.size ~= nil and opts.recompute_scale_factor then
    check.error("interpolate: recompute_scale_factor is not meaningful with an explicit size")
  end
  local d, sizes, scales = x:dim() - 2, {}, nil
  if opts.size ~= nil then
    sizes = per_dim(opts.size, d, "size", function(v) return math.type(v) == "integer" and v > 0 end,
      "positive integers")
  else
    local sf = per_dim(opts.scale_factor, d, "scale_factor",
      function(v) return type(v) == "number" and v > 0 and v < math.huge end, "positive numbers")
    for i = 1, d do
      sizes[i] = math.floor(x:size(i + 2) * sf[i])
      if sizes[i] < 1 then
        check.error(string.format("interpolate: scale_factor %g gives an empty output for size %d of input %s",
          sf[i], x:size(i + 2), shape_str(x)))
      end
    end
    if not opts.recompute_scale_factor then scales = sf end
  end
  return dle.upsample(x, sizes, {mode = mode[1], align_corners = opts.align_corners == true, scales = scales})
end

-- x {*, C, H, W} as {B, C, H, W} with B the product of the leading dims (for a 5-D reshape).
local function lead_of(fn, x)
  check.tensor(x, fn, "input")
  if x:dim() < 3 then
    check.error(fn .. ": expected an input of at least 3 dimensions {*, C, H, W}, got " .. shape_str(x))
  end
  local lead = {}
  for i = 1, x:dim() - 3 do lead[i] = x:size(i) end
  return lead, x:size(-3), x:size(-2), x:size(-1)
end

local function with_lead(lead, ...)
  local s = {table.unpack(lead)}
  for _, v in ipairs({...}) do s[#s + 1] = v end
  return s
end

--- pixel_shuffle(x, r): {*, C r^2, H, W} -> {*, C, H r, W r}, PyTorch's element order.
function M.pixel_shuffle(x, r)
  local lead, C, H, W = lead_of("pixel_shuffle", x)
  r = check.integer_min(r, "pixel_shuffle", "upscale_factor", 1)
  if C % (r * r) ~= 0 then
    check.error(string.format("pixel_shuffle: %d channels of input %s are not divisible by upscale_factor^2 = %d",
      C, shape_str(x), r * r))
  end
  local c, n = C // (r * r), #lead
  local perm = {}
  for i = 1, n do perm[i] = i end
  for _, k in ipairs({1, 4, 2, 5, 3}) do perm[#perm + 1] = n + k end -- C, H, r, W, r
  return x:reshape(with_lead(lead, c, r, r, H, W)):permute(perm):reshape(with_lead(lead, c, H * r, W * r))
end

--- pixel_unshuffle(x, r): {*, C, H r, W r} -> {*, C r^2, H, W}, the inverse of pixel_shuffle.
function M.pixel_unshuffle(x, r)
  local lead, C, H, W = lead_of("pixel_unshuffle", x)
  r = check.integer_min(r, "pixel_unshuffle", "downscale_factor", 1)
  if H % r ~= 0 or W % r ~= 0 then
    check.error(string.format("pixel_unshuffle: spatial sizes of input %s are not divisible by downscale_factor %d",
      shape_str(x), r))
  end
  local n, perm = #lead, {}
  for i = 1, n do perm[i] = i end
  for _, k in ipairs({1, 3, 5, 2, 4}) do perm[#perm + 1] = n + k end -- C, r, r, H, W
  return x:reshape(with_lead(lead, C, H // r, r, W // r, r)):permute(perm)
    :reshape(with_lead(lead, C * r * r, H // r, W // r))
end

--- channel_shuffle(x, groups): x {N, C, ...} with its channels seen as {groups, C / groups}
-- transposed to {C / groups, groups} (ShuffleNet).
function M.channel_shuffle(x, groups)
  check.tensor(x, "channel_shuffle", "input")
  groups = check.integer_min(groups, "channel_shuffle", "groups", 1)
  if x:dim() < 3 or x:size(2) % groups ~= 0 then
    check.error(string.format("channel_shuffle: expected an input {N, C, ...} of at least 3 dims with C divisible "
      .. "by groups %d, got %s", groups, shape_str(x)))
  end
  local s = x:shape()
  local split = {s[1], groups, s[2] // groups}
  for i = 3, #s do split[#split + 1] = s[i] end
  return x:reshape(split):transpose(2, 3):reshape(s)
end

--- bilinear(x1, x2, weight, bias): y[..., o] = sum_ij x1[..., i] weight[o, i, j] x2[..., j] + bias[o];
-- x1 {..., in1}, x2 {..., in2} with the same leading dims, weight {out, in1, in2}, bias {out} or nil.
-- @return tensor {..., out}
function M.bilinear(x1, x2, weight, bias)
  check.tensor(x1, "bilinear", "input1")
  check.tensor(x2, "bilinear", "input2")
  check.tensor(weight, "bilinear", "weight")
  check.opt_tensor(bias, "bilinear", "bias")
  local bad = weight:dim() ~= 3 or x1:dim() < 1 or x2:dim() ~= x1:dim()
  if not bad then
    bad = x1:size(-1) ~= weight:size(2) or x2:size(-1) ~= weight:size(3)
    for i = 1, x1:dim() - 1 do bad = bad or x1:size(i) ~= x2:size(i) end
  end
  if bad or (bias and (bias:dim() ~= 1 or bias:size(1) ~= weight:size(1))) then
    check.error(string.format("bilinear: shapes input1 %s, input2 %s, weight %s%s do not fit ({..., in1}, "
      .. "{..., in2}, {out, in1, in2}, bias {out})", shape_str(x1), shape_str(x2), shape_str(weight),
      bias and ", bias " .. shape_str(bias) or ""))
  end
  local out, in1, in2 = weight:size(1), weight:size(2), weight:size(3)
  local lead = x1:shape()
  lead[#lead] = out
  -- x1 W as one product {rows, in1} @ {in1, out * in2}, then the dot with x2 along in2
  local t = x1:reshape(-1, in1):matmul(weight:permute({2, 1, 3}):reshape(in1, out * in2))
  local y = (t:reshape(-1, out, in2) * x2:reshape(-1, 1, in2)):sum(3)
  if bias then y = y + bias end
  return y:reshape(lead)
end

return M
