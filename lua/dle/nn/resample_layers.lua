--- dle.nn.Upsample, UpsamplingNearest2d, UpsamplingBilinear2d, PixelShuffle, PixelUnshuffle,
-- ChannelShuffle, Bilinear and Unflatten, PyTorch's constructors, defaults and parameter names:
--   Upsample({size | scale_factor, mode = "nearest", align_corners, recompute_scale_factor})
--   UpsamplingNearest2d({size | scale_factor}), UpsamplingBilinear2d({size | scale_factor})
--     (bilinear with align_corners = true, as PyTorch)
--   PixelShuffle(upscale_factor), PixelUnshuffle(downscale_factor), ChannelShuffle(groups)
--   Bilinear(in1_features, in2_features, out_features, {bias = true, dtype, generator}):
--     weight {out, in1, in2}, bias {out}, both ~ U(-1/sqrt(in1), 1/sqrt(in1))
--   Unflatten(dim, unflattened_size): dim (1-based) split into the sizes given
-- This file returns the classes by name; dle.nn registers them.
local dle = require("dle")
local check = require("dle.check")
local Module = require("dle.nn.module")
local F = require("dle.nn.functional")

local classes = {}
local function class(name)
  local cls = Module:extend(name)
  classes[name] = cls
  return cls
end

local Upsample = class("Upsample")
local UPSAMPLE_OPTS = {"size", "scale_factor", "mode", "align_corners", "recompute_scale_factor"}

--- @param opts {size | scale_factor, mode = "nearest", align_corners, recompute_scale_factor}
function Upsample:init(opts)
  opts = check.options(opts, self.__name, self._fixed and {"size", "scale_factor"} or UPSAMPLE_OPTS)
  if (opts.size == nil) == (opts.scale_factor == nil) then
    check.error(self.__name .. ": exactly one of size or scale_factor must be given")
  end
  self.size, self.scale_factor = opts.size, opts.scale_factor
  local fixed = self._fixed or {}
  self.mode = fixed.mode or opts.mode or "nearest"
  self.align_corners = fixed.align_corners
  if self.align_corners == nil then self.align_corners = opts.align_corners end
  self.recompute_scale_factor = opts.recompute_scale_factor
end

function Upsample:forward(x)
  return F.interpolate(x, {size = self.size, scale_factor = self.scale_factor, mode = self.mode,
    align_corners = self.align_corners, recompute_scale_factor = self.recompute_scale_factor})
end

local function list_text(v) return type(v) == "table" and "{" .. table.concat(v, ", ") .. "}" or tostring(v) end

function Upsample:extra_repr()
  local what = self.size ~= nil and "size=" .. list_text(self.size) or "scale_factor=" .. list_text(self.scale_factor)
  return what .. ", mode=" .. self.mode
end

local UpsamplingNearest2d = Upsample:extend("UpsamplingNearest2d")
UpsamplingNearest2d._fixed = {mode = "nearest"}
classes.UpsamplingNearest2d = UpsamplingNearest2d
local UpsamplingBilinear2d = Upsample:extend("UpsamplingBilinear2d")
UpsamplingBilinear2d._fixed = {mode = "bilinear", align_corners = true}
classes.UpsamplingBilinear2d = UpsamplingBilinear2d

-- The forward and repr of a module holding one positive integer factor `field`, calling F[fname].
local function factor_layer(cls, field, fname)
  cls.forward = function(self, x) return F[fname](x, self[field]) end
  cls.extra_repr = function(self) return field .. "=" .. self[field] end
end

local PixelShuffle = class("PixelShuffle")
factor_layer(PixelShuffle, "upscale_factor", "pixel_shuffle")
--- @param r upscale_factor: {*, C r^2, H, W} -> {*, C, H r, W r}
function PixelShuffle:init(r) self.upscale_factor = check.integer_min(r, "PixelShuffle", "upscale_factor", 1) end

local PixelUnshuffle = class("PixelUnshuffle")
factor_layer(PixelUnshuffle, "downscale_factor", "pixel_unshuffle")
--- @param r downscale_factor: {*, C, H r, W r} -> {*, C r^2, H, W}
function PixelUnshuffle:init(r)
  self.downscale_factor = check.integer_min(r, "PixelUnshuffle", "downscale_factor", 1)
end

local ChannelShuffle = class("ChannelShuffle")
factor_layer(ChannelShuffle, "groups", "channel_shuffle")
--- @param groups the channels {groups, C / groups} are transposed to {C / groups, groups}
function ChannelShuffle:init(groups) self.groups = check.integer_min(groups, "ChannelShuffle", "groups", 1) end

local Bilinear = class("Bilinear")

--- @param opts optional {bias = true, dtype = "float32", generator = g}
function Bilinear:init(in1, in2, out, opts)
  opts = check.layer_args("Bilinear", opts, {"bias", "dtype", "generator"},
    "positive integer sizes (in1, in2, out)", in1, in2, out)
  self.in1_features, self.in2_features, self.out_features = in1, in2, out
  local bound = 1 / math.sqrt(in1)
  local o = {dtype = opts.dtype or "float32"}
  local g = opts.generator and {generator = opts.generator} or nil
  self.weight = dle.empty(out, in1, in2, o):uniform_(-bound, bound, g):requires_grad_(true)
  if opts.bias ~= false then self.bias = dle.empty(out, o):uniform_(-bound, bound, g):requires_grad_(true) end
end

function Bilinear:forward(x1, x2) return F.bilinear(x1, x2, self.weight, self.bias) end

function Bilinear:extra_repr()
  return string.format("in1_features=%d, in2_features=%d, out_features=%d, bias=%s", self.in1_features,
    self.in2_features, self.out_features, tostring(self.bias ~= nil))
end

local Unflatten = class("Unflatten")

--- @param dim the dim to split (1-based; negative counts from the end)
-- @param sizes table of sizes whose product is that dim's size (one may be -1)
function Unflatten:init(dim, sizes)
  self.dim = check.integer(dim, "Unflatten", "dim")
  check.table(sizes, "Unflatten", "unflattened_size")
  self.unflattened_size = {}
  for i, s in ipairs(sizes) do
    self.unflattened_size[i] = check.integer(s, "Unflatten", "unflattened_size[" .. i .. "]")
  end
end

function Unflatten:forward(x)
  check.tensor(x, "Unflatten", "input")
  local nd = x:dim()
  local d = self.dim < 0 and nd + 1 + self.dim or self.dim
  if d < 1 or d > nd then
    check.error("Unflatten: dim " .. self.dim .. " out of range for input " .. check.shape_str(x))
  end
  local shape = {}
  for i = 1, d - 1 do shape[#shape + 1] = x:size(i) end
  for _, s in ipairs(self.unflattened_size) do shape[#shape + 1] = s end
  for i = d + 1, nd do shape[#shape + 1] = x:size(i) end
  local ok, y = pcall(x.reshape, x, shape)
  if not ok then
    check.error("Unflatten: cannot split dim " .. d .. " of input " .. check.shape_str(x) .. " into "
      .. list_text(self.unflattened_size))
  end
  return y
end

function Unflatten:extra_repr()
  return "dim=" .. self.dim .. ", unflattened_size=" .. list_text(self.unflattened_size)
end

return classes
