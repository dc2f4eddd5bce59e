--- dle.nn.MaxPool1d, AvgPool1d, MaxPool3d, AvgPool3d, AdaptiveAvgPool1d/2d and AdaptiveMaxPool1d/2d
-- (PyTorch's constructors); they call dle.nn.functional's max_pool1d, avg_pool1d, max_pool3d,
-- avg_pool3d and adaptive_* (functional_pool.lua). Requiring this file returns the classes by name.
local check = require("dle.check")
local Module = require("dle.nn.module")
local F = require("dle.nn.functional")
local S = require("dle.nn.spatial_args")

local classes = {}

-- A pool class over ns dims: (k, stride, opts) or (k, opts), calling F[fname] with its options
-- (flag: the option of its own, if any).
local function pool_class(name, fname, ns, flag)
  local cls = Module:extend(name)
  local known = {"stride", "padding", flag}
  --- (k, stride, opts): a pool over windows of k.
  -- @param k kernel size: an integer, or (3-D) a list {kd, kh, kw}
  -- @param stride default k; an options table may stand here instead
  -- @param opts optional {padding = 0, and return_indices = false (MaxPool1d) or
  --   count_include_pad = true (AvgPool1d, AvgPool3d)}
  function cls:init(k, stride, opts)
    if type(stride) == "table" and opts == nil and stride[1] == nil then opts, stride = stride, nil end
    opts = check.options(opts, name, known)
    self.kernel_size = S.tuple(name, "kernel_size", k, ns, 1)
    self.stride = S.tuple(name, "stride", stride or opts.stride or self.kernel_size, ns, 1)
    self.padding = S.tuple(name, "padding", opts.padding or 0, ns, 0)
    if flag then self[flag] = opts[flag] end
  end
  --- @param x tensor {N, C, ...} (or {C, ...}) with ns spatial dims
  -- @return tensor {N, C, ...} (MaxPool1d with return_indices: and the indices)
  function cls:forward(x)
    local o = {stride = self.stride, padding = self.padding}
    if flag then o[flag] = self[flag] end
    return F[fname](x, ns == 1 and self.kernel_size[1] or self.kernel_size, o)
  end
  function cls:extra_repr()
    return string.format("kernel_size=%s, stride=%s, padding=%s", S.repr(self.kernel_size), S.repr(self.stride),
      S.repr(self.padding))
  end
  classes[name] = cls
end
pool_class("MaxPool1d", "max_pool1d", 1, "return_indices")
pool_class("AvgPool1d", "avg_pool1d", 1, "count_include_pad")
pool_class("MaxPool3d", "max_pool3d", 3)
pool_class("AvgPool3d", "avg_pool3d", 3, "count_include_pad")

-- An adaptive pool class over ns dims: (output_size) or, max, (output_size, opts).
local function adaptive_class(name, fname, ns, max)
  local cls = Module:extend(name)
  --- (output_size, opts): an adaptive pool to output_size (an integer, or {h, w} in 2-D).
  -- @param output_size integer or a list with one size per dim
  -- @param opts optional (the max pools) {return_indices = false}
  function cls:init(output_size, opts)
    self.output_size = output_size
    S.tuple(name, "output_size", output_size, ns, 1)
    if max then self.opts = check.options(opts, name, {"return_indices"})
    elseif opts ~= nil then check.error(name .. ": takes no options") end
  end
  --- @param x tensor {N, C, ...} (or {C, ...})
  -- @return tensor {N, C, output_size...} (with return_indices: and the indices)
  function cls:forward(x) return F[fname](x, self.output_size, self.opts) end
  function cls:extra_repr() return "output_size=" .. S.repr(self.output_size) end
  classes[name] = cls
end
adaptive_class("AdaptiveAvgPool1d", "adaptive_avg_pool1d", 1)
adaptive_class("AdaptiveAvgPool2d", "adaptive_avg_pool2d", 2)
adaptive_class("AdaptiveMaxPool1d", "adaptive_max_pool1d", 1, true)
adaptive_class("AdaptiveMaxPool2d", "adaptive_max_pool2d", 2, true)

return classes
