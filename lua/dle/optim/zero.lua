--- dle.optim.ZeroRedundancyOptimizer(opt_class, params, opts): ZeRO stage 1, PyTorch's
-- ZeroRedundancyOptimizer. The parameters are partitioned across the ranks of dle.dist; each rank
-- keeps optimizer state (Adam's moments, ...) for its own share only, steps it with
-- opt_class(own_params, opts), and broadcasts the updated values to the other ranks.
--   local opt = dle.optim.ZeroRedundancyOptimizer(dle.optim.Adam, ddp:parameters(), {lr = 1e-3})
--   loss:backward(); opt:step()
-- * Partition: greedy by element count, deterministic (the same on every rank): parameters in
--   decreasing size (ties in list order) each go to the rank with the fewest elements so far
--   (ties to the lower rank). zero:owner(i) is the 0-based rank owning param i (in list order).
-- * step(closure) runs the local step, then broadcasts each rank's parameters from it (flat
--   buckets per owner and dtype). Gradients must already be equal on every rank (DDP's job).
-- * param_groups (every parameter, with each group's hyperparameters) and opt.lr are the global
--   view, read and written by schedulers; step() hands them to the local optimizer.
-- * state_dict() is this rank's shard: {world_size, rank, owners, param_groups, state} with state
--   keyed by global param index, own params only. load_state_dict accepts the state_dict that the
--   same rank saved under the same world size and partition (save one file per rank); there is no
--   consolidation into one full state.
local dle = require "dle"
local check = require "dle.check"
local dist = require "dle.dist"
local buckets = require "dle.dist.buckets"
local Optimizer = require "dle.optim.optimizer"

local NAME = "ZeroRedundancyOptimizer"
local CAP = 25 * 1024 * 1024   -- bytes per broadcast bucket

local Zero = {__name = "dle.optim." .. NAME}

local copy_value = Optimizer.copy_value

local hyper = Optimizer.hyperparameters

Optimizer.lr_property(Zero, NAME)   -- zero.lr: the global param groups' (what schedulers write)

--- The owner (0-based rank) of each of n params of the given sizes, over world ranks.
-- @param sizes list of element counts
-- @param world number of ranks
-- @return list of ranks
function Zero.partition(sizes, world)
  local order = {}
  for i = 1, #sizes do order[i] = i end
  table.sort(order, function(a, b)
    if sizes[a] ~= sizes[b] then return sizes[a] > sizes[b] end
    return a < b
  end)
  local load, owners = {}, {}
  for r = 0, world - 1 do load[r] = 0 end
  for _, i in ipairs(order) do
    local best = 0
    for r = 1, world - 1 do
      if load[r] < load[best] then best = r end
    end
    owners[i] = best
    load[best] = load[best] + sizes[i]
  end
  return owners
end

local function new(opt_class, params, opts)
  if type(opt_class) ~= "table" or type(rawget(opt_class, "new")) ~= "function" then
    error(NAME .. ": opt_class must be an optimizer class such as dle.optim.Adam, got "
      .. check.typename(opt_class), 0)
  end
  if not dist.is_initialized() then
    error(NAME .. ": dle.dist is not initialized; call dle.dist.init() first", 0)
  end
  -- An optimizer over every param checks params and options the same way on every rank (a rank
  -- owning none must fail like the others) and gives the global param groups. It has no state.
  local ok, full = pcall(opt_class.new, params, opts)
  if not ok then error(NAME .. ": " .. tostring(full), 0) end
  local world, rank = dist.world_size(), dist.rank()
  local all, sizes = {}, {}
  for _, group in ipairs(full.param_groups) do
    for _, p in ipairs(group.params) do
      all[#all + 1] = p
      sizes[#sizes + 1] = p:numel()
    end
  end
  local owners = Zero.partition(sizes, world)
  -- the local optimizer: this rank's params of each group, with the group's hyperparameters
  local local_groups, local_of, global_of = {}, {}, {}
  local index = 0
  for gi, group in ipairs(full.param_groups) do
    local own = {}
    for _, p in ipairs(group.params) do
      index = index + 1
      if owners[index] == rank then
        own[#own + 1] = p
        global_of[#global_of + 1] = index
      end
    end
    if #own > 0 then
      local g = hyper(group)
      g.params = own
      local_groups[#local_groups + 1] = g
      local_of[gi] = #local_groups
    end
  end
  local self = setmetatable({}, Zero)
  rawset(self, "param_groups", full.param_groups)
  rawset(self, "optim", #local_groups > 0 and opt_class.new(local_groups, opts) or nil)
  rawset(self, "owners", owners)
  rawset(self, "_params", all)
  rawset(self, "_local_of", local_of)    -- global group -> local group index
  rawset(self, "_global_of", global_of)  -- local param index -> global param index
  rawset(self, "_world", world)
  rawset(self, "_rank", rank)
  return self
end

setmetatable(Zero, {__call = function(_, opt_class, params, opts)
  local ok, r = pcall(new, opt_class, params, opts)
  if not ok then error(r, 2) end
  return r
end})

--- zero:owner(i) -> the 0-based rank that owns param i (1-based, in the order given).
function Zero:owner(i)
  local r = self.owners[i]
  if r == nil then error(string.format("%s:owner: no param %s", NAME, tostring(i)), 2) end
  return r
end

-- Copies the global groups' hyperparameters (schedulers write them) into the local optimizer.
function Zero:_sync_hyperparameters()
  local opt = self.optim
  if not opt then return end
  for gi, group in ipairs(self.param_groups) do
    local li = self._local_of[gi]
    if li then
      local lg = opt.param_groups[li]
      for k, v in pairs(group) do
        if k ~= "params" then lg[k] = copy_value(v) end
      end
      opt.check(lg)
    end
  end
end

--- Runs the local optimizer's step on this rank's params, then broadcasts every param from its
-- owner. Every rank must call it.
-- @param closure optional function re-evaluating the model and returning the loss (with grad)
-- @return the closure's loss, if any
function Zero:step(closure)
  local loss
  if closure then loss = dle.enable_grad(closure) end
  self:_sync_hyperparameters()
  if self.optim then self.optim:step() end
  if self._world > 1 then
    for r = 0, self._world - 1 do
      local own = {}
      for i, p in ipairs(self._params) do
        if self.owners[i] == r then own[#own + 1] = p end
      end
      buckets.each(own, CAP, function(flat) dist.broadcast(flat, r) end)
    end
  end
  return loss
end

--- Sets every param's gradient (not only this rank's) to nil.
function Zero:zero_grad()
  for _, p in ipairs(self._params) do p.grad = nil end
end

--- This rank's shard of the state: {world_size, rank, owners, param_groups = global groups'
-- hyperparameters (params as global indices), state = {[global index] = state}} (copies).
-- @return table
function Zero:state_dict()
  local sd = {world_size = self._world, rank = self._rank, owners = copy_value(self.owners),
              param_groups = Optimizer.indexed_groups(self.param_groups), state = {}}
  if self.optim then
    for li, st in pairs(self.optim:state_dict().state) do sd.state[self._global_of[li]] = st end
  end
  return sd
end

--- Restores a state_dict() saved by this same rank with the same world size and partition.
-- @param sd table from state_dict() (possibly through dle.save/dle.load)
function Zero:load_state_dict(sd)
  local fn = NAME .. ":load_state_dict"
  if type(sd) ~= "table" or type(sd.param_groups) ~= "table" or type(sd.state) ~= "table"
      or type(sd.owners) ~= "table" then
    error(fn .. ": expected a table from ZeroRedundancyOptimizer:state_dict()", 2)
  end
  if sd.world_size ~= self._world or sd.rank ~= self._rank then
    error(string.format("%s: the state is rank %s's shard of a world of %s; this is rank %d of %d "
      .. "(state dicts are per rank: load each rank's own)", fn, tostring(sd.rank),
      tostring(sd.world_size), self._rank, self._world), 2)
  end
  if #sd.owners ~= #self.owners then
    error(string.format("%s: the state has %d params, this optimizer %d", fn, #sd.owners, #self.owners), 2)
  end
  for i, r in ipairs(self.owners) do
    if sd.owners[i] ~= r then
      error(string.format("%s: param %d belongs to rank %s in the state, to rank %d here (another "
        .. "partition)", fn, i, tostring(sd.owners[i]), r), 2)
    end
  end
  if #sd.param_groups ~= #self.param_groups then
    error(string.format("%s: the state has %d param groups, this optimizer %d", fn,
      #sd.param_groups, #self.param_groups), 2)
  end
  for i in pairs(sd.state) do
    if self.owners[i] ~= self._rank then
      error(string.format("%s: state for param %s, which rank %d does not own", fn, tostring(i),
        self._rank), 2)
    end
  end
  -- the local optimizer's own state_dict: local indices, its groups' hyperparameters
  if self.optim then
    local local_sd = {param_groups = {}, state = {}}
    for gi, li in pairs(self._local_of) do
      local g = hyper(sd.param_groups[gi])
      g.params = {}
      for i = 1, #self.optim.param_groups[li].params do g.params[i] = i end
      local_sd.param_groups[li] = g
    end
    for li, gi in ipairs(self._global_of) do local_sd.state[li] = sd.state[gi] end
    local ok, err = pcall(self.optim.load_state_dict, self.optim, local_sd)
    if not ok then error(fn .. ": " .. tostring(err), 2) end
  end
  for gi, group in ipairs(self.param_groups) do
    for k, v in pairs(sd.param_groups[gi]) do
      if k ~= "params" then group[k] = copy_value(v) end
    end
  end
end

return Zero
