--- dle.nn.Conv1d, Conv3d, ConvTranspose1d/2d/3d, Unfold and Fold (PyTorch's constructors, weight
-- shapes, parameter names and initialization, so a PyTorch state dict loads one to one); they call
-- dle.nn.functional's conv1d, conv3d, conv_transpose*, unfold and fold (functional_convnd.lua).
-- Requiring this file returns the classes by name.
local dle = require("dle")
local check = require("dle.check")
local Module = require("dle.nn.module")
local F = require("dle.nn.functional")
local S = require("dle.nn.spatial_args")

local CONV_KNOWN = {"stride", "padding", "dilation", "groups", "bias", "padding_mode", "dtype", "generator"}
local TRANSPOSE_KNOWN = {"stride", "padding", "output_padding", "groups", "bias", "dilation", "padding_mode", "dtype",
                         "generator"}

local function fmt(t) return "(" .. table.concat(t, ", ") .. ")" end

-- The output_padding with which a transposed conv module gives spatial sizes output_size (its last
-- ns entries: a full shape may be given) for input x, as PyTorch's forward(x, output_size).
local function output_padding_for(self, name, ns, x, output_size)
  check.tensor(x, name, "input")
  if type(output_size) ~= "table" or #output_size < ns then
    check.error(name .. ": output_size must be a list of " .. ns .. " sizes, got " .. S.repr(output_size))
  end
  local op, least, sp = {}, {}, S.spatial(x, ns)
  for i = 1, ns do
    least[i] = (sp[i] - 1) * self.stride[i] - 2 * self.padding[i] + self.dilation[i] * (self.kernel_size[i] - 1) + 1
    op[i] = output_size[#output_size - ns + i] - least[i]
  end
  for i = 1, ns do
    if math.type(op[i]) ~= "integer" or op[i] < 0 or op[i] >= math.max(self.stride[i], self.dilation[i]) then
      check.error(string.format("%s: output_size %s cannot be reached from input %s: each size must be from %s "
        .. "to less than max(stride, dilation) more", name, S.repr(output_size), check.shape_str(x), S.repr(least)))
    end
  end
  return op
end

-- A convolution class over ns dims calling F[fname]; transposed: weight {cin, cout/groups, k...}.
local function conv_class(name, ns, fname, transposed)
  local cls = Module:extend(name)

  --- (cin, cout, k, opts): weight {cout, cin/groups, k...} ({cin, cout/groups, k...} when
  -- transposed) and bias {cout}, initialized as PyTorch does: U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
  -- fan_in = the weight's second size times the kernel's elements.
  -- @param cin input channels
  -- @param cout output channels
  -- @param k kernel size: integer or a list with one size per dim
  -- @param opts optional {stride = 1, padding = 0 (convolutions: also "same" or "valid"),
  --   output_padding = 0 (transposed), dilation = 1, groups = 1, bias = true, padding_mode = "zeros"
  --   (convolutions: also "reflect", "replicate", "circular"), dtype = "float32", generator = g}
  function cls:init(cin, cout, k, opts)
    opts = check.layer_args(name, opts, transposed and TRANSPOSE_KNOWN or CONV_KNOWN,
      "positive integer channel counts (cin, cout)", cin, cout)
    local groups = opts.groups or 1
    if math.type(groups) ~= "integer" or groups < 1 then
      check.error(name .. ": groups must be a positive integer, got " .. tostring(groups))
    end
    if cin % groups ~= 0 or cout % groups ~= 0 then
      check.error(string.format("%s: in_channels %d and out_channels %d must be divisible by groups %d", name, cin,
        cout, groups))
    end
    self.in_channels, self.out_channels, self.groups = cin, cout, groups
    self.kernel_size = S.tuple(name, "kernel_size", k, ns, 1)
    self.stride = S.tuple(name, "stride", opts.stride or 1, ns, 1)
    self.dilation = S.tuple(name, "dilation", opts.dilation or 1, ns, 1)
    self.padding_mode = S.padding_mode(name, opts.padding_mode, transposed)
    if transposed then
      self.padding = S.tuple(name, "padding", opts.padding or 0, ns, 0)
      self.output_padding = S.tuple(name, "output_padding", opts.output_padding or 0, ns, 0)
    else
      local p = opts.padding or 0
      S.conv_padding(name, p, ns, self.kernel_size, self.stride, self.dilation)   -- checks it
      self.padding = type(p) == "string" and p or S.tuple(name, "padding", p, ns, 0)
    end
    local shape = transposed and {cin, cout // groups} or {cout, cin // groups}
    local fan_in = shape[2]
    for i = 1, ns do shape[i + 2] = self.kernel_size[i]; fan_in = fan_in * self.kernel_size[i] end
    local bound = 1 / math.sqrt(fan_in)
    local o = {dtype = opts.dtype or "float32"}
    local g = opts.generator and {generator = opts.generator} or nil
    self.weight = dle.empty(shape, o):uniform_(-bound, bound, g):requires_grad_(true)
    if opts.bias ~= false then self.bias = dle.empty(cout, o):uniform_(-bound, bound, g):requires_grad_(true) end
  end

  --- @param x tensor {N, cin, ...} (or {cin, ...}) with one size per spatial dim
  -- @param output_size optional (transposed) the output's spatial sizes (a list, or x's full output
  --   shape), which pick the output_padding, as PyTorch's
  -- @return tensor {N, cout, ...}
  function cls:forward(x, output_size)
    if transposed then
      local op = output_size and output_padding_for(self, name, ns, x, output_size) or self.output_padding
      return F[fname](x, self.weight, self.bias, {stride = self.stride, padding = self.padding,
        output_padding = op, groups = self.groups, dilation = self.dilation})
    end
    if output_size ~= nil then check.error(name .. ": forward takes no output_size") end
    local padding = self.padding
    if self.padding_mode ~= "zeros" then   -- x padded in that mode first, as PyTorch does
      local lo, hi = S.conv_padding(name, padding, ns, self.kernel_size, self.stride, self.dilation)
      x, padding = F.pad(x, S.pad_list(lo, hi), {mode = self.padding_mode}), 0
    end
    return F[fname](x, self.weight, self.bias,
      {stride = self.stride, padding = padding, dilation = self.dilation, groups = self.groups})
  end

  function cls:extra_repr()
    local s = string.format("%d, %d, kernel_size=%s, stride=%s", self.in_channels, self.out_channels,
      fmt(self.kernel_size), fmt(self.stride))
    local p = self.padding
    if type(p) == "string" then s = s .. ", padding=" .. p
    elseif p[1] ~= 0 or p[ns] ~= 0 then s = s .. ", padding=" .. fmt(p) end
    if transposed and (self.output_padding[1] ~= 0 or self.output_padding[ns] ~= 0) then
      s = s .. ", output_padding=" .. fmt(self.output_padding)
    end
    if self.dilation[1] ~= 1 or self.dilation[ns] ~= 1 then s = s .. ", dilation=" .. fmt(self.dilation) end
    if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
    if self.bias == nil then s = s .. ", bias=false" end
    if self.padding_mode ~= "zeros" then s = s .. ", padding_mode=" .. self.padding_mode end
    return s
  end
  return cls
end

local classes = {
  Conv1d = conv_class("Conv1d", 1, "conv1d"),
  Conv3d = conv_class("Conv3d", 3, "conv3d"),
  ConvTranspose1d = conv_class("ConvTranspose1d", 1, "conv_transpose1d", true),
  ConvTranspose2d = conv_class("ConvTranspose2d", 2, "conv_transpose2d", true),
  ConvTranspose3d = conv_class("ConvTranspose3d", 3, "conv_transpose3d", true),
}

local FOLD_KNOWN = {"dilation", "padding", "stride"}

local Unfold = Module:extend("Unfold")
--- Unfold(kernel_size, opts): the sliding blocks of {N, C, H, W} as columns {N, C*kh*kw, L} (F.unfold).
-- @param kernel_size integer or {kh, kw}
-- @param opts optional {dilation = 1, padding = 0, stride = 1}
function Unfold:init(kernel_size, opts)
  self.kernel_size, self.opts = kernel_size, check.options(opts, "Unfold", FOLD_KNOWN)
  S.tuple("Unfold", "kernel_size", kernel_size, 2, 1)
end
--- @param x tensor {N, C, H, W} (or {C, H, W})
-- @return tensor {N, C*kh*kw, L}
function Unfold:forward(x) return F.unfold(x, self.kernel_size, self.opts) end

local Fold = Module:extend("Fold")
--- Fold(output_size, kernel_size, opts): columns {N, C*kh*kw, L} summed back into {N, C, H, W} (F.fold).
-- @param output_size integer or {H, W}
-- @param kernel_size integer or {kh, kw}
-- @param opts optional {dilation = 1, padding = 0, stride = 1}
function Fold:init(output_size, kernel_size, opts)
  self.output_size, self.kernel_size = output_size, kernel_size
  self.opts = check.options(opts, "Fold", FOLD_KNOWN)
  S.tuple("Fold", "output_size", output_size, 2, 1)
  S.tuple("Fold", "kernel_size", kernel_size, 2, 1)
end
--- @param x tensor {N, C*kh*kw, L} (or {C*kh*kw, L})
-- @return tensor {N, C, H, W}
function Fold:forward(x) return F.fold(x, self.output_size, self.kernel_size, self.opts) end

classes.Unfold, classes.Fold = Unfold, Fold
return classes
