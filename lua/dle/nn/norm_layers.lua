--- dle.nn.GroupNorm, InstanceNorm1d/2d/3d and LocalResponseNorm, PyTorch's constructors,
-- defaults, parameter and buffer names (state dicts load one to one):
--   GroupNorm(num_groups, num_channels, {eps = 1e-5, affine = true, dtype})
--   InstanceNorm1d/2d/3d(num_features, {eps = 1e-5, momentum = 0.1, affine = false,
--     track_running_stats = false, dtype}): input {N, C, *spatial} or unbatched {C, *spatial}
--   LocalResponseNorm(size, {alpha = 1e-4, beta = 0.75, k = 1})
-- This file returns the classes by name; dle.nn registers them.
local dle = require("dle")
local check = require("dle.check")
local Module = require("dle.nn.module")
local F = require("dle.nn.functional")
local norm_state = require("dle.nn.norm_state")

local shape_str = check.shape_str
local classes = {}

local GroupNorm = Module:extend("GroupNorm")
classes.GroupNorm = GroupNorm

--- @param num_groups groups the channels are split into (must divide num_channels)
-- @param num_channels C of the input {N, C, ...}
-- @param opts optional {eps = 1e-5, affine = true, dtype = "float32"}
function GroupNorm:init(num_groups, num_channels, opts)
  opts = check.layer_args("GroupNorm", opts, {"eps", "affine", "dtype"},
    "positive integers num_groups, num_channels", num_groups, num_channels)
  if num_channels % num_groups ~= 0 then
    check.error("GroupNorm: num_channels " .. num_channels .. " must be divisible by num_groups " .. num_groups)
  end
  self.num_groups, self.num_channels = num_groups, num_channels
  self.eps = opts.eps or 1e-5
  self.affine = opts.affine ~= false
  if self.affine then
    local o = {dtype = opts.dtype or "float32", requires_grad = true}
    self.weight = dle.ones(num_channels, o)
    self.bias = dle.zeros(num_channels, o)
  end
end

--- @param x tensor {N, C, ...}
-- @return tensor of x's shape
function GroupNorm:forward(x)
  check.tensor(x, "GroupNorm", "input")
  if x:dim() < 2 or x:size(2) ~= self.num_channels then
    check.error("GroupNorm: expected an input {N, " .. self.num_channels .. ", ...}, got " .. shape_str(x))
  end
  return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)
end

function GroupNorm:extra_repr()
  return string.format("%d, %d, eps=%g, affine=%s", self.num_groups, self.num_channels, self.eps,
    tostring(self.affine))
end

local InstanceNorm = Module:extend("_InstanceNorm")

--- @param num_features C of the input
-- @param opts optional {eps = 1e-5, momentum = 0.1, affine = false, track_running_stats = false,
--   dtype = "float32"}
function InstanceNorm:init(num_features, opts)
  opts = check.layer_args(self.__name, opts, {"eps", "momentum", "affine", "track_running_stats", "dtype"},
    "a positive integer num_features", num_features)
  self.num_features = num_features
  self.eps = opts.eps or 1e-5
  self.momentum = opts.momentum == nil and 0.1 or opts.momentum
  self.affine = opts.affine == true
  self.track_running_stats = opts.track_running_stats == true
  norm_state(self, num_features, opts.dtype or "float32")
end

--- @param x tensor {N, C, *spatial} or {C, *spatial} (the spatial dims: 1, 2 or 3 by class)
-- @return tensor of x's shape
function InstanceNorm:forward(x)
  check.tensor(x, self.__name, "input")
  local nd = self._spatial + 2
  if x:dim() ~= nd and x:dim() ~= nd - 1 then
    check.error(string.format("%s: expected a %d-D or %d-D input, got %s", self.__name, nd, nd - 1, shape_str(x)))
  end
  local unbatched = x:dim() == nd - 1
  if unbatched then x = x:unsqueeze(1) end
  if x:size(2) ~= self.num_features then
    check.error(self.__name .. ": input has " .. x:size(2) .. " channels (shape " .. shape_str(x)
      .. "), expected " .. self.num_features)
  end
  local y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
    self.training or not self.track_running_stats, self.momentum, self.eps)
  return unbatched and y:squeeze(1) or y
end

function InstanceNorm:extra_repr()
  return string.format("%d, eps=%g, momentum=%g, affine=%s, track_running_stats=%s", self.num_features,
    self.eps, self.momentum, tostring(self.affine), tostring(self.track_running_stats))
end

for d = 1, 3 do
  local cls = InstanceNorm:extend("InstanceNorm" .. d .. "d")
  cls._spatial = d
  classes["InstanceNorm" .. d .. "d"] = cls
end

local LocalResponseNorm = Module:extend("LocalResponseNorm")
classes.LocalResponseNorm = LocalResponseNorm

--- @param size channels summed over
-- @param opts optional {alpha = 1e-4, beta = 0.75, k = 1}
function LocalResponseNorm:init(size, opts)
  opts = check.layer_args("LocalResponseNorm", opts, {"alpha", "beta", "k"}, "a positive integer size", size)
  self.size = size
  self.alpha, self.beta, self.k = opts.alpha or 1e-4, opts.beta or 0.75, opts.k or 1.0
end

function LocalResponseNorm:forward(x)
  return F.local_response_norm(x, self.size, self.alpha, self.beta, self.k)
end

function LocalResponseNorm:extra_repr()
  return string.format("%d, alpha=%g, beta=%g, k=%g", self.size, self.alpha, self.beta, self.k)
end

return classes
