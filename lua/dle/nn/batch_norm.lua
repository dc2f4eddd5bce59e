--- dle.nn.BatchNorm1d(n) and dle.nn.BatchNorm2d(c), options {eps = 1e-5, momentum = 0.1,
-- affine = true, track_running_stats = true, dtype}: per-channel normalization (PyTorch semantics).
-- Training mode normalizes with the batch mean and biased variance and updates the buffers
-- running_mean / running_var (with the unbiased variance) and num_batches_tracked; eval mode
-- uses the running statistics. weight (ones) and bias (zeros) are the affine parameters.
-- This file returns {BatchNorm1d = ..., BatchNorm2d = ...}; dle.nn registers them.
local dle = require("dle")
local check = require("dle.check")
local Module = require("dle.nn.module")
local F = require("dle.nn.functional")
local norm_state = require("dle.nn.norm_state")

local BatchNorm = Module:extend("_BatchNorm")

--- @param c number of channels (features)
-- @param opts optional {eps = 1e-5, momentum = 0.1 (nil-able via cumulative = true),
--   affine = true, track_running_stats = true, dtype = "float32"}
function BatchNorm:init(c, opts)
  opts = check.options(opts, self.__name, {"eps", "momentum", "cumulative", "affine", "track_running_stats", "dtype"})
  if math.type(c) ~= "integer" or c < 1 then
    check.error(self.__name .. ": expected a positive integer number of features, got " .. tostring(c))
  end
  self.num_features = c
  self.eps = opts.eps or 1e-5
  self.momentum = opts.momentum or 0.1
  self.cumulative = opts.cumulative == true
  self.affine = opts.affine ~= false
  self.track_running_stats = opts.track_running_stats ~= false
  norm_state(self, c, opts.dtype or "float32")
end

--- Clears the running statistics (mean 0, variance 1, no batches seen).
function BatchNorm:reset_running_stats()
  if not self.track_running_stats then return end
  dle.no_grad(function()
    self.running_mean:zero_()
    self.running_var:fill_(1)
    self.num_batches_tracked:zero_()
  end)
end

-- Checks the input's rank (allowed: a set of dims) and channel count.
function BatchNorm:check_input(x)
  if not dle.is_tensor(x) then check.error(self.__name .. ": input must be a tensor, got " .. type(x)) end
  if not self._dims[x:dim()] then
    check.error(self.__name .. ": expected a " .. self._dims_text .. " input, got {" .. table.concat(x:shape(), ",")
                .. "}")
  end
  if x:size(2) ~= self.num_features then
    check.error(self.__name .. ": input has " .. x:size(2) .. " channels (shape {" .. table.concat(x:shape(), ",")
      .. "}), expected " .. self.num_features)
  end
end

--- @param x tensor {N, C, ...} (see the subclasses for the allowed ranks)
-- @return tensor of x's shape
function BatchNorm:forward(x)
  self:check_input(x)
  local use_batch = self.training or not self.track_running_stats
  local n_tracked
  if self.training and self.track_running_stats then
    dle.no_grad(function() self.num_batches_tracked:add_(1) end)
    -- read into Lua only when the cumulative average needs it (a read makes a graph trace unsafe)
    if self.cumulative then n_tracked = self.num_batches_tracked:item() end
  end
  -- running statistics: updated in training mode, used in eval mode (none when not tracked)
  return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_batch,
    self.momentum, self.eps, {cumulative = self.cumulative, num_batches_tracked = n_tracked})
end

function BatchNorm:extra_repr()
  return string.format("%d, eps=%g, momentum=%g, affine=%s, track_running_stats=%s", self.num_features, self.eps,
    self.momentum, tostring(self.affine), tostring(self.track_running_stats))
end

--- BatchNorm1d(n, opts): input {N, n} or {N, n, L}; statistics over N (and L).
local BatchNorm1d = BatchNorm:extend("BatchNorm1d")
BatchNorm1d._dims = {[2] = true, [3] = true}
BatchNorm1d._dims_text = "2-D {N, C} or 3-D {N, C, L}"

--- BatchNorm2d(c, opts): input {N, c, H, W}; statistics over N, H and W.
local BatchNorm2d = BatchNorm:extend("BatchNorm2d")
BatchNorm2d._dims = {[4] = true}
BatchNorm2d._dims_text = "4-D {N, C, H, W}"

return {BatchNorm1d = BatchNorm1d, BatchNorm2d = BatchNorm2d}
