--- dle.dist.zero_shards: the flat layout ZeRO stages 2 and 3 shard by (internal to
-- dle.optim.ZeroRedundancyOptimizer). A unit is a run of params of one param group and dtype (under
-- stage 3, of one module), laid end to end in one flat buffer of n elements, padded with zeros to
-- world * S elements (S = ceil(n / world), at least 1): rank r holds elements r*S+1 .. (r+1)*S, its
-- shard. The padding stays zero under an elementwise optimizer (zero gradient, zero value).
local dle = require("dle")
local dist = require("dle.dist")

local M = {}

--- A unit over params (a list of tensors of one dtype), numbered index, index + 1, ... among every
-- param of the optimizer. It keeps their shapes and offsets, not the tensors.
-- @return {shapes, numels, offsets, first, n, S, world, rank, dtype, group}
function M.unit(params, first, group, world, rank)
  local u = {shapes = {}, numels = {}, offsets = {}, first = first, n = 0, world = world, rank = rank,
             dtype = params[1]:dtype(), group = group}
  for i, p in ipairs(params) do
    u.shapes[i], u.numels[i], u.offsets[i] = p:shape(), p:numel(), u.n
    u.n = u.n + p:numel()
  end
  u.S = math.max(1, -(-u.n // world))
  return u
end

--- One flat buffer of world * S elements (dtype: the unit's unless given) holding tensors[i] (shaped
-- like param i; nil: zeros) at param i's place, zeros elsewhere.
function M.flatten(u, tensors, dtype)
  return dle.no_grad(function()
    local flat = dle.zeros(u.world * u.S, {dtype = dtype or u.dtype})
    for i = 1, #u.numels do
      local t = tensors[i]
      if t ~= nil then flat:narrow(1, u.offsets[i] + 1, u.numels[i]):copy_(t:reshape(-1)) end
    end
    return flat
  end)
end

--- This rank's shard of a flat buffer (a view).
function M.slice(u, flat) return flat:narrow(1, u.rank * u.S + 1, u.S) end

--- The views of a flat buffer shaped like each param.
function M.views(u, flat)
  local out = {}
  for i, shape in ipairs(u.shapes) do out[i] = flat:narrow(1, u.offsets[i] + 1, u.numels[i]):view(shape) end
  return out
end

--- Every rank's shard (S elements) gathered into a new flat buffer of world * S.
function M.gather(u, shard)
  local full = dle.empty({u.world, u.S}, {dtype = shard:dtype()})
  local slots = {}
  for r = 1, u.world do slots[r] = full[r] end
  dist.all_gather(slots, shard:detach())
  return full:view(-1)
end

--- The mean over the ranks of their flat buffers (world * S elements each, not changed), this
-- rank's shard of it: a new tensor of S elements. Each rank's buffer is divided by the world size
-- before the sum, as DistributedDataParallel does (float16 sums stay in range).
function M.reduce_mean(u, flat)
  return dle.no_grad(function()
    local scaled = flat:div(u.world):view(u.world, u.S)
    local rows = {}
    for r = 1, u.world do rows[r] = scaled[r] end
    return dist.reduce_scatter(dle.empty(u.S, {dtype = flat:dtype()}), rows, "sum")
  end)
end

return M
