--- dle.nn.MaxPool1d, AvgPool1d, AdaptiveAvgPool1d/2d and AdaptiveMaxPool1d/2d (PyTorch's
-- constructors); they call dle.nn.functional's max_pool1d, avg_pool1d and adaptive_*
-- (functional_pool.lua). Requiring this file returns the classes by name.
local check = require "dle.check"
local Module = require "dle.nn.module"
local F = require "dle.nn.functional"
local S = require "dle.nn.spatial_args"
require "dle.nn.functional_pool"

local classes = {}

-- A 1-D pool class: (k, stride, opts) or (k, opts), calling F[fname] with its options.
local function pool1d_class(name, fname, flag)
  local cls = Module:extend(name)
  --- (k, stride, opts): a 1-D pool over windows of k.
  -- @param k kernel size (an integer)
  -- @param stride default k; an options table may stand here instead
  -- @param opts optional {padding = 0, and return_indices = false (MaxPool1d) or count_include_pad = true (AvgPool1d)}
  function cls:init(k, stride, opts)
    if type(stride) == "table" and opts == nil then opts, stride = stride, nil end
    opts = check.options(opts, name, {"stride", "padding", flag})
    self.kernel_size = S.tuple(name, "kernel_size", k, 1, 1)[1]
    self.stride = S.tuple(name, "stride", stride or opts.stride or self.kernel_size, 1, 1)[1]
    self.padding = S.tuple(name, "padding", opts.padding or 0, 1, 0)[1]
    self[flag] = opts[flag]
  end
  --- @param x tensor {N, C, L} (or {C, L})
  -- @return tensor {N, C, L_out} (MaxPool1d with return_indices: and the indices)
  function cls:forward(x)
    return F[fname](x, self.kernel_size, {stride = self.stride, padding = self.padding, [flag] = self[flag]})
  end
  function cls:extra_repr()
    return string.format("kernel_size=%d, stride=%d, padding=%d", self.kernel_size, self.stride, self.padding)
  end
  classes[name] = cls
end
pool1d_class("MaxPool1d", "max_pool1d", "return_indices")
pool1d_class("AvgPool1d", "avg_pool1d", "count_include_pad")

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
