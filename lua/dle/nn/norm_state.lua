--- The state BatchNorm and InstanceNorm share, made on self for c channels of dtype: weight
-- (ones) and bias (zeros) when self.affine; the buffers running_mean (zeros), running_var (ones)
-- and num_batches_tracked when self.track_running_stats.
local dle = require("dle")

return function(self, c, dtype)
  if self.affine then
    self.weight = dle.ones(c, {dtype = dtype, requires_grad = true})
    self.bias = dle.zeros(c, {dtype = dtype, requires_grad = true})
  end
  if self.track_running_stats then
    self:register_buffer("running_mean", dle.zeros(c, {dtype = dtype}))
    self:register_buffer("running_var", dle.ones(c, {dtype = dtype}))
    self:register_buffer("num_batches_tracked", dle.zeros({}, {dtype = "int64"}))
  end
end
