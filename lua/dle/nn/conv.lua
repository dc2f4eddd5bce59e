--- dle.nn.Conv2d, dle.nn.MaxPool2d and dle.nn.AvgPool2d over {N, C, H, W} inputs (PyTorch
-- semantics); they call dle.nn.functional.conv2d / max_pool2d / avg_pool2d (the native
-- dle.conv2d, dle.max_pool2d, dle.avg_pool2d).
-- This file returns {Conv2d = ..., MaxPool2d = ..., AvgPool2d = ...}; dle.nn registers them.
local dle = require("dle")
local check = require("dle.check")
local Module = require("dle.nn.module")
local F = require("dle.nn.functional")
local S = require("dle.nn.spatial_args")

-- A size argument as a {h, w} pair of integers >= lo; errors name the class and the argument.
local function pair(cls, what, v, lo)
  local p
  if math.type(v) == "integer" then p = {v, v}
  elseif type(v) == "table" and #v == 2 and math.type(v[1]) == "integer"
      and math.type(v[2]) == "integer" then p = {v[1], v[2]}
  else check.error(cls .. ": " .. what .. " must be an integer or a pair {h, w} of integers, got " .. tostring(v)) end
  if p[1] < lo or p[2] < lo then
    check.error(cls .. ": " .. what .. " must be >= " .. lo .. ", got {" .. p[1] .. "," .. p[2] .. "}")
  end
  return p
end

local function fmt_pair(p) return p[1] == p[2] and tostring(p[1]) or "(" .. p[1] .. ", " .. p[2] .. ")" end

local function fmt_padding(p) return type(p) == "string" and p or fmt_pair(p) end

local function shape_str(s) return "{" .. table.concat(s, ",") .. "}" end

-- Output spatial size of a window op: floor((n + 2p - d*(k-1) - 1) / s) + 1.
local function out_size(n, k, s, p, d)
  return (n + 2 * p - d * (k - 1) - 1) // s + 1
end

-- The input shape from a flops()/output_shape() argument: a shape table, a tensor, or the list
-- of call inputs that summary() passes.
local function input_shape_of(arg)
  if dle.is_tensor(arg) then return arg:shape() end
  if type(arg) == "table" and dle.is_tensor(arg[1]) then return arg[1]:shape() end
  return arg
end

-- Output shape {N, C, Hout, Wout} of a window op given an input shape {N, Cin, H, W}.
local function window_out_shape(cls, shape, cout, k, s, p, d)
  if type(shape) ~= "table" or (#shape ~= 4 and #shape ~= 3) then
    check.error(cls .. ": expected an input shape {N, C, H, W}, got "
                .. tostring(type(shape) == "table" and shape_str(shape) or shape))
  end
  local off = #shape - 4
  local n = off == 0 and shape[1] or 1
  local h, w = shape[3 + off], shape[4 + off]
  return {n, cout or shape[2 + off], out_size(h, k[1], s[1], p[1], d[1]), out_size(w, k[2], s[2], p[2], d[2])}
end

-- Checks a {N, C, H, W} (or {C, H, W}) input with `c` channels (nil: any).
local function check_input(cls, x, c)
  if not dle.is_tensor(x) then check.error(cls .. ": input must be a tensor, got " .. type(x)) end
  if x:dim() ~= 4 and x:dim() ~= 3 then
    check.error(cls .. ": expected a 4-D input {N, C, H, W} (or 3-D {C, H, W}), got " .. shape_str(x:shape()))
  end
  local cin = x:size(x:dim() - 2)
  if c and cin ~= c then
    check.error(cls .. ": input has " .. cin .. " channels (shape " .. shape_str(x:shape()) .. "), expected " .. c)
  end
end

---------------------------------------------------------------------------------------------
local Conv2d = Module:extend("Conv2d")

--- Conv2d(cin, cout, k, opts): weight {cout, cin/groups, kh, kw}, bias {cout}, both initialized
-- as PyTorch does (kaiming_uniform with a = sqrt(5): U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
-- fan_in = cin/groups * kh * kw).
-- @param cin input channels
-- @param cout output channels
-- @param k kernel size: integer or {kh, kw}
-- @param opts optional {stride = 1, padding = 0, dilation = 1 (integers or {h, w}), groups = 1,
--   bias = true, dtype = "float32", generator = g, padding_mode = "zeros"}; padding may also be
--   "valid" or "same" (stride 1), padding_mode "reflect", "replicate" or "circular" (x is padded
--   in that mode first, as PyTorch does)
function Conv2d:init(cin, cout, k, opts)
  opts = check.layer_args("Conv2d", opts, {"stride", "padding", "dilation", "groups", "bias", "dtype", "generator",
                                          "padding_mode"},
                          "positive integer channel counts (cin, cout)", cin, cout)
  local groups = opts.groups or 1
  if math.type(groups) ~= "integer" or groups < 1 then
    check.error("Conv2d: groups must be a positive integer, got " .. tostring(groups))
  end
  if cin % groups ~= 0 or cout % groups ~= 0 then
    check.error("Conv2d: in_channels " .. cin .. " and out_channels " .. cout .. " must be divisible by groups "
                .. groups)
  end
  self.in_channels, self.out_channels, self.groups = cin, cout, groups
  self.kernel_size = pair("Conv2d", "kernel size", k, 1)
  self.stride = pair("Conv2d", "stride", opts.stride or 1, 1)
  self.dilation = pair("Conv2d", "dilation", opts.dilation or 1, 1)
  local p = opts.padding or 0
  if type(p) == "string" then S.conv_padding("Conv2d", p, 2, self.kernel_size, self.stride, self.dilation) end
  self.padding = type(p) == "string" and p or pair("Conv2d", "padding", p, 0)
  self.padding_mode = S.padding_mode("Conv2d", opts.padding_mode)
  local fan_in = (cin // groups) * self.kernel_size[1] * self.kernel_size[2]
  local bound = 1 / math.sqrt(fan_in)
  local o = {dtype = opts.dtype or "float32"}
  local g = opts.generator and {generator = opts.generator} or nil
  self.weight = dle.empty(cout, cin // groups, self.kernel_size[1], self.kernel_size[2], o)
    :uniform_(-bound, bound, g):requires_grad_(true)
  if opts.bias ~= false then
    self.bias = dle.empty(cout, o):uniform_(-bound, bound, g):requires_grad_(true)
  end
end

--- @param x tensor {N, cin, H, W} (or {cin, H, W})
-- @return tensor {N, cout, Hout, Wout}
function Conv2d:forward(x)
  check_input("Conv2d", x, self.in_channels)
  local h, w = x:size(-2), x:size(-1)
  local kh = self.dilation[1] * (self.kernel_size[1] - 1) + 1
  local kw = self.dilation[2] * (self.kernel_size[2] - 1) + 1
  local lo, hi = S.conv_padding("Conv2d", self.padding, 2, self.kernel_size, self.stride, self.dilation)
  if h + lo[1] + hi[1] < kh or w + lo[2] + hi[2] < kw then
    check.error("Conv2d: input " .. shape_str(x:shape()) .. " is smaller than the (dilated) kernel " .. kh .. "x" .. kw
      .. " after padding " .. fmt_padding(self.padding))
  end
  local padding = self.padding
  if self.padding_mode ~= "zeros" then
    x, padding = F.pad(x, S.pad_list(lo, hi), {mode = self.padding_mode}), 0
  end
  return F.conv2d(x, self.weight, self.bias,
    {stride = self.stride, padding = padding, dilation = self.dilation, groups = self.groups})
end

--- Output shape for an input shape {N, cin, H, W}.
-- @param input_shape table
-- @return table {N, cout, Hout, Wout}
function Conv2d:output_shape(input_shape)
  local p = self.padding == "valid" and {0, 0} or self.padding == "same" and {0, 0} or self.padding
  local shape = input_shape_of(input_shape)
  local o = window_out_shape("Conv2d", shape, self.out_channels, self.kernel_size, self.stride, p, self.dilation)
  if self.padding == "same" then o[3], o[4] = shape[#shape - 1], shape[#shape] end
  return o
end

--- Forward FLOPs: 2 * N * Hout * Wout * cout * (cin/groups) * kh * kw (multiply-adds; bias not counted).
-- @param input_shape {N, cin, H, W}, an input tensor, or the list of call inputs (as summary() passes)
-- @return number
function Conv2d:flops(input_shape)
  local o = self:output_shape(input_shape)
  return 2 * o[1] * o[3] * o[4] * self.out_channels * (self.in_channels // self.groups)
    * self.kernel_size[1] * self.kernel_size[2]
end

function Conv2d:extra_repr()
  local s = string.format("%d, %d, kernel_size=%s, stride=%s", self.in_channels, self.out_channels,
    fmt_pair(self.kernel_size), fmt_pair(self.stride))
  if type(self.padding) == "string" or self.padding[1] ~= 0 or self.padding[2] ~= 0 then
    s = s .. ", padding=" .. fmt_padding(self.padding)
  end
  if self.dilation[1] ~= 1 or self.dilation[2] ~= 1 then s = s .. ", dilation=" .. fmt_pair(self.dilation) end
  if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
  if self.bias == nil then s = s .. ", bias=false" end
  if self.padding_mode ~= "zeros" then s = s .. ", padding_mode=" .. self.padding_mode end
  return s
end

---------------------------------------------------------------------------------------------
-- Shared constructor of the pools: Pool(k, stride) or Pool(k, stride, {padding}) or
-- Pool(k, {stride, padding}).
local function pool_init(self, k, stride, opts, known)
  if type(stride) == "table" and opts == nil and stride[1] == nil then opts, stride = stride, stride.stride end
  opts = check.options(opts, self.__name, known)
  self.kernel_size = pair(self.__name, "kernel size", k, 1)
  self.stride = pair(self.__name, "stride", stride or opts.stride or k, 1)
  self.padding = pair(self.__name, "padding", opts.padding or 0, 0)
  if self.padding[1] * 2 > self.kernel_size[1] or self.padding[2] * 2 > self.kernel_size[2] then
    check.error(self.__name .. ": padding " .. fmt_pair(self.padding) .. " must be at most half the kernel size "
      .. fmt_pair(self.kernel_size))
  end
end

local function pool_check(self, x)
  check_input(self.__name, x, nil)
  local h, w = x:size(-2), x:size(-1)
  if h + 2 * self.padding[1] < self.kernel_size[1] or w + 2 * self.padding[2] < self.kernel_size[2] then
    check.error(self.__name .. ": input " .. shape_str(x:shape()) .. " is smaller than the kernel "
      .. self.kernel_size[1] .. "x" .. self.kernel_size[2])
  end
end

-- A pooling layer class: F[fname] over its window, passing its own option flag along; the layers
-- differ in that flag (and in their init, below).
local function pool_class(name, fname, flag)
  local cls = Module:extend(name)

  --- @param x tensor {N, C, H, W} (or {C, H, W})
  -- @return tensor {N, C, Hout, Wout} (MaxPool2d with return_indices: and the indices)
  function cls:forward(x)
    pool_check(self, x)
    return F[fname](x, self.kernel_size, {stride = self.stride, padding = self.padding, [flag] = self[flag]})
  end

  --- Output shape for an input shape {N, C, H, W}.
  -- @return table {N, C, Hout, Wout}
  function cls:output_shape(input_shape)
    return window_out_shape(self.__name, input_shape_of(input_shape), nil, self.kernel_size, self.stride,
      self.padding, {1, 1})
  end

  function cls:extra_repr()
    local s = "kernel_size=" .. fmt_pair(self.kernel_size) .. ", stride=" .. fmt_pair(self.stride)
    if self.padding[1] ~= 0 or self.padding[2] ~= 0 then s = s .. ", padding=" .. fmt_pair(self.padding) end
    return s
  end
  return cls
end

---------------------------------------------------------------------------------------------
local MaxPool2d = pool_class("MaxPool2d", "max_pool2d", "return_indices")

--- MaxPool2d(k, stride, opts): maximum over k x k windows.
-- @param k kernel size: integer or {kh, kw}
-- @param stride default k (integer or {h, w}); an options table may stand here instead
-- @param opts optional {padding = 0, return_indices = false}
function MaxPool2d:init(k, stride, opts)
  pool_init(self, k, stride, opts, {"stride", "padding", "return_indices"})
  self.return_indices = (opts or (type(stride) == "table" and stride) or {}).return_indices == true
end

---------------------------------------------------------------------------------------------
local AvgPool2d = pool_class("AvgPool2d", "avg_pool2d", "count_include_pad")

--- AvgPool2d(k, stride, opts): mean over k x k windows (padded zeros count unless
-- count_include_pad is false).
-- @param k kernel size: integer or {kh, kw}
-- @param stride default k (integer or {h, w}); an options table may stand here instead
-- @param opts optional {padding = 0, count_include_pad = true}
function AvgPool2d:init(k, stride, opts)
  pool_init(self, k, stride, opts, {"stride", "padding", "count_include_pad"})
  self.count_include_pad = (opts or (type(stride) == "table" and stride) or {}).count_include_pad ~= false
end

return {Conv2d = Conv2d, MaxPool2d = MaxPool2d, AvgPool2d = AvgPool2d}
