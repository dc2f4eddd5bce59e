--- dle.dist.buckets: many tensors through few collectives. Tensors are grouped by dtype (in order
-- of first appearance, then in list order: the same plan on every rank given the same list) into
-- flat buckets of at most cap bytes (one tensor larger than cap gets a bucket of its own); each
-- bucket is one contiguous buffer, the collective runs on it, and the results are copied back.
-- Internal to dle.dist.DistributedDataParallel and dle.optim.ZeroRedundancyOptimizer.
local dle = require("dle")

local buckets = {}

--- The buckets of tensors: a list of lists of tensors, each list of one dtype (empty tensors
-- are left out).
-- @param tensors list of tensors
-- @param cap bytes per bucket
function buckets.plan(tensors, cap)
  local by_dtype, order = {}, {}
  for _, t in ipairs(tensors) do
    if t:numel() > 0 then   -- nothing to send
      local dt = t:dtype()
      if not by_dtype[dt] then by_dtype[dt] = {}; order[#order + 1] = dt end
      local list = by_dtype[dt]
      list[#list + 1] = t
    end
  end
  local plan = {}
  for _, dt in ipairs(order) do
    local cur, bytes = nil, 0
    for _, t in ipairs(by_dtype[dt]) do
      local b = t:numel() * t:element_size()
      if not cur or (bytes + b > cap and #cur > 0) then
        cur, bytes = {}, 0
        plan[#plan + 1] = cur
      end
      cur[#cur + 1] = t
      bytes = bytes + b
    end
  end
  return plan
end

--- Runs fn(flat) on each bucket of tensors (fn changes flat in place), then copies each bucket's
-- values back into its tensors. A bucket of one contiguous tensor is that tensor itself, no copy.
-- Runs without recording for autograd.
-- @param tensors list of tensors
-- @param cap bytes per bucket
-- @param fn function(flat)
function buckets.each(tensors, cap, fn)
  dle.no_grad(function()
    for _, bucket in ipairs(buckets.plan(tensors, cap)) do
      if #bucket == 1 and bucket[1]:is_contiguous() then
        fn(bucket[1])
      else
        local flat = {}
        for i, t in ipairs(bucket) do flat[i] = t:reshape(-1) end
        flat = dle.cat(flat, 1)
        fn(flat)
        local offset = 0
        for _, t in ipairs(bucket) do
          local n = t:numel()
          t:copy_(flat:narrow(1, offset + 1, n):reshape(t:shape()))
          offset = offset + n
        end
      end
    end
  end)
end

return buckets
