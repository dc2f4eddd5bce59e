--- dle.optim.ZeroRedundancyOptimizer with {stage = 2} or {stage = 3} (stage 1 and the entry point
-- are lua/dle/optim/zero.lua). The params are sharded flat (dle.dist.zero_shards): each rank
-- steps its shard of every unit with opt_class, which must update elementwise (SGD, Adam, AdamW,
-- RMSprop, Adagrad, ...: the flat shard then steps exactly as the params would).
-- * Stage 2: the model stays whole on every rank and is NOT wrapped in DistributedDataParallel: a
--   backward hook (dle.autograd.register_backward_hook) reduce-scatters the gradients after each
--   backward (their mean over the ranks; each rank keeps its shard's, summed over backward calls
--   until zero_grad) and frees the full .grad; step() updates the shards and all-gathers them
--   into the params. The params' .grad is nil after backward: read gradients before it returns.
--     local opt = dle.optim.ZeroRedundancyOptimizer(dle.optim.AdamW, model, {stage = 2, lr = 1e-3})
--     opt:zero_grad(); local loss = F.cross_entropy(model(x_rank), y_rank); loss:backward(); opt:step()
-- * Stage 3: params must be the model itself (a dle.nn.Module), again not wrapped in DDP; each
--   rank then holds only its shards (dle.dist.zero3: gathered by each module just before its
--   forward and freed after, gathered again in the backward; gradients reduce-scattered into the
--   shards), and model:parameters() lists empty placeholders. model:state_dict() and
--   model:load_state_dict() take and give full tensors and are collectives; so are
--   opt:state_dict() and every forward and backward (each rank must run the same modules in the
--   same order). A module owning parameters must return at most 2 float tensors (dle.checkpoint's
--   limit); parameters shared by two modules are refused.
-- * Mixed precision: float16/bfloat16 params get float32 master shards, so a rank keeps per
--   parameter 2 bytes of params and 2 of gradients (stage 2: full params; stage 3: shards) and 12/world
--   of optimizer state (master, two moments). A unit that got no gradient on any rank steps with
--   zeros (it still has state); loss scaling (dle.amp.GradScaler) is not supported.
-- * Checkpoints: state_dict() is a collective returning, on every rank, the full state in
--   opt_class's own format (what consolidate_state_dict() then state_dict() gives under stage 1, or a
--   plain optimizer): any stage under any world size loads it, as load_state_dict() here loads
--   theirs. Master copies are not saved: loading takes them from the params (load the model first).
local dle = require("dle")
local check = require("dle.check")
local dist = require("dle.dist")
local Module = require("dle.nn.module")
local Optimizer = require("dle.optim.optimizer")
local Zero = require("dle.optim.zero")
local shards = require("dle.dist.zero_shards")
local Reducer = require("dle.dist.reducer")

local NAME, fail = Zero._NAME, Zero._fail
local CAP = 25 * 1024 * 1024   -- bytes per stage-2 unit

local Sharded = {__name = "dle.optim." .. NAME}
Optimizer.lr_property(Sharded, NAME)
Sharded._sync_hyperparameters = Zero._sync_hyperparameters

local hyper = Optimizer.hyperparameters

local function is_half(dt) return dt == "float16" or dt == "bfloat16" end

-- The units over the params of groups, in order: runs of one group and dtype, and of one owning
-- module (owner_of(p), stage 3) or of at most CAP bytes (stage 2). Each keeps its params as .params.
local function make_units(groups, world, rank, owner_of)
  local runs, index = {}, 0
  for gi, group in ipairs(groups) do
    local run, bytes = nil, 0
    for _, p in ipairs(group.params) do
      index = index + 1
      local b = p:numel() * p:element_size()
      local split = run == nil or p:dtype() ~= run.params[1]:dtype()
        or (owner_of and owner_of(p) ~= owner_of(run.params[1])) or (not owner_of and bytes + b > CAP)
      if split then
        run, bytes = {params = {}, first = index, group = gi}, 0
        runs[#runs + 1] = run
      end
      run.params[#run.params + 1] = p
      bytes = bytes + b
    end
  end
  local units = {}
  for k, run in ipairs(runs) do
    units[k] = shards.unit(run.params, run.first, run.group, world, rank)
    units[k].params = run.params
  end
  return units
end

-- A stand-in of S elements (one stored) for a stage-2 float32 unit's slot in the local optimizer,
-- which steps a fresh copy of the shard there.
local function stand_in(u) return dle.zeros(1):expand(u.S) end

function Sharded.new(opt_class, params, opts, stage)
  local model
  if Module.is_module(params) then model, params = params, params:parameters() end
  if stage == 3 and not model then
    fail("%s: stage 3 gathers the parameters into the modules that use them: pass the model (a dle.nn.Module) "
      .. "as params, got %s", NAME, type(params) == "table" and "a list of tensors" or check.typename(params))
  end
  local ok, full = pcall(opt_class.new, params, opts)
  if not ok then fail("%s: %s", NAME, check.strip_where(full)) end
  local zero3 = stage == 3 and require("dle.dist.zero3")
  local slots = zero3 and zero3.slots(model, NAME)
  local units = make_units(full.param_groups, dist.world_size(), dist.rank(),
    slots and function(p) return slots[p][1] end)
  local self = setmetatable({}, Sharded)
  local local_groups, local_of, shapes = {}, {}, {}
  for _, u in ipairs(units) do
    for i, p in ipairs(u.params) do shapes[u.first + i - 1] = check.shape_str(p) end
    u.half = is_half(u.dtype)
    local shard = dle.no_grad(function() return shards.slice(u, shards.flatten(u, u.params)):clone() end)
    if stage == 3 then
      u.shard = shard:requires_grad_(true)
      u.master = u.half and dle.no_grad(function() return shard:to("float32") end) or shard
    else
      u.master = u.half and dle.no_grad(function() return shard:to("float32") end) or stand_in(u)
    end
    local li = local_of[u.group]
    if not li then
      local g = hyper(full.param_groups[u.group])
      g.params = {}
      local_groups[#local_groups + 1] = g
      li = #local_groups
      local_of[u.group] = li
    end
    u.slot = {li, #local_groups[li].params + 1}   -- where its master sits in the local optimizer
    local_groups[li].params[u.slot[2]] = u.master
  end
  local groups = {}
  for gi, group in ipairs(full.param_groups) do
    groups[gi] = hyper(group)
    groups[gi].params = stage == 2 and group.params or {}
  end
  rawset(self, "param_groups", groups)
  rawset(self, "optim", #local_groups > 0 and opt_class.new(local_groups, opts) or nil)
  rawset(self, "stage", stage)
  rawset(self, "_units", units)
  rawset(self, "_local_of", local_of)
  rawset(self, "_shapes", shapes)     -- param i's shape string
  rawset(self, "_class", opt_class)
  rawset(self, "_world", dist.world_size())
  full = nil -- luacheck: ignore 311 (under stage 3, the last reference to the full params goes)
  if stage == 3 then
    zero3.install(model, units, slots, function() self:_refresh_masters() end)
    for _, u in ipairs(units) do
      for _, ph in ipairs(u.placeholders) do table.insert(groups[u.group].params, ph) end
    end
  else
    rawset(self, "_hook", Reducer.backward_hook(self, "_reduce_gradients"))
  end
  return self
end

-- Stage 2's backward hook (it runs after every backward): each unit's gradients (zeros for params
-- without one) averaged over the ranks into its shard's (added to what earlier backward calls
-- left), the full ones freed. A backward that gave none of the params a gradient on this rank
-- (one of another model) does nothing and sends nothing: the ranks run the same program, so
-- every rank decides alike (a backward reaching the model on some ranks only would hang).
function Sharded:_reduce_gradients()
  local any = false
  for _, u in ipairs(self._units) do
    for _, p in ipairs(u.params) do any = any or p.grad ~= nil end
  end
  if not any then return end
  dle.no_grad(function()
    for _, u in ipairs(self._units) do
      local grads = {}
      for i, p in ipairs(u.params) do grads[i] = p.grad end
      local g = shards.reduce_mean(u, shards.flatten(u, grads))
      u.grad = u.grad and u.grad:add_(g) or g
      for _, p in ipairs(u.params) do p.grad = nil end
    end
  end)
end

-- The masters of float16/bfloat16 units from the current params (after a model load).
function Sharded:_refresh_masters()
  dle.no_grad(function()
    for _, u in ipairs(self._units) do
      if u.half then
        u.master:copy_(self.stage == 3 and u.shard or shards.slice(u, shards.flatten(u, u.params)))
      end
    end
  end)
end

--- Steps every unit's shard; under stage 2 the params then get the updated shards of every rank
-- (a collective: every rank must call it).
-- @param closure optional function re-evaluating the model and returning the loss (with grad)
function Sharded:step(closure)
  local loss
  if closure then loss = dle.enable_grad(closure) end
  self:_sync_hyperparameters()
  local stage, opt = self.stage, self.optim
  dle.no_grad(function()
    for _, u in ipairs(self._units) do
      local g = stage == 3 and u.shard.grad or u.grad
      local m = u.master
      if stage == 2 and not u.half then   -- a fresh shard of the params in the slot
        m = shards.slice(u, shards.flatten(u, u.params)):clone()
        opt.param_groups[u.slot[1]].params[u.slot[2]] = m
      end
      if m ~= u.shard then m.grad = g and g:to(m:dtype()) end
    end
    opt:step()
    for _, u in ipairs(self._units) do
      local m = opt.param_groups[u.slot[1]].params[u.slot[2]]
      if stage == 3 then
        if m ~= u.shard then u.shard:copy_(m); m.grad = nil end
      else
        local views = shards.views(u, shards.gather(u, m:to(u.dtype)))
        for i, p in ipairs(u.params) do p:copy_(views[i]) end
        m.grad = nil
        if not u.half then opt.param_groups[u.slot[1]].params[u.slot[2]] = stand_in(u) end
      end
    end
  end)
  return loss
end

--- Drops the gradients: the shards' and the params'.
function Sharded:zero_grad()
  for _, u in ipairs(self._units) do
    if u.shard then u.shard.grad = nil end
    u.grad = nil
    for _, p in ipairs(u.params or {}) do p.grad = nil end
  end
end

--- Accepted for code that checkpoints every stage alike: state_dict() is already the full state.
function Sharded:consolidate_state_dict(to)
  to = to == nil and 0 or check.integer(to, NAME .. ":consolidate_state_dict", "to")
  if to < 0 or to >= self._world then
    fail("%s:consolidate_state_dict: to %d is not a rank (ranks are 0..%d)", NAME, to, self._world - 1)
  end
end

-- Unit u's index among the local optimizer's params (what its state is keyed by).
function Sharded:_local_index(u)
  local k = 0
  for li = 1, u.slot[1] - 1 do k = k + #self.optim.param_groups[li].params end
  return k + u.slot[2]
end

--- The full state, {param_groups, state = {[i] = {step, <state tensors shaped like param i>}}},
-- opt_class's own format, on every rank (a collective).
function Sharded:state_dict()
  local sd = {param_groups = Optimizer.indexed_groups(self.param_groups), state = {}}
  dle.no_grad(function()
    for _, u in ipairs(self._units) do
      local st = self.optim.state[self:_local_index(u)]
      if st then
        local states = {}
        for i = 1, #u.numels do states[i] = {step = st.step} end
        for _, name in ipairs(self._class.state_tensors) do
          if st[name] then
            for i, v in ipairs(shards.views(u, shards.gather(u, st[name]))) do states[i][name] = v:clone() end
          end
        end
        for i, s in ipairs(states) do sd.state[u.first + i - 1] = s end
      end
    end
  end)
  return sd
end

-- Unit u's shard of a full state (sd.state keyed by global param index), or nil when none of its
-- params has state; step is the first one's.
local function unit_state(self, u, state)
  local st
  for i = 1, #u.numels do
    local s = state[u.first + i - 1]
    if s and not st then st = {step = s.step} end
  end
  if not st then return nil end
  local dtype = Optimizer.state_dtype(u.master)
  for _, name in ipairs(self._class.state_tensors) do
    local tensors, any = {}, false
    for i = 1, #u.numels do
      local s = state[u.first + i - 1]
      tensors[i] = s and s[name]
      any = any or tensors[i] ~= nil
    end
    if any then st[name] = shards.slice(u, shards.flatten(u, tensors, dtype)):clone() end
  end
  return st
end

local function load(self, sd)
  local fn = NAME .. ":load_state_dict"
  Zero._check_table(sd, fn, self.param_groups)
  if sd.owners ~= nil then
    fail("%s: the state is rank %s's stage-1 shard of a world of %s; load a full state (stage 1: "
      .. "consolidate_state_dict(), then state_dict() on that rank)", fn, tostring(sd.rank), tostring(sd.world_size))
  end
  Zero._check_full(sd, fn, self.param_groups)
  Zero._check_states(self._class, sd.state, fn, self._shapes)
  if self.optim then
    local local_sd = {param_groups = {}, state = {}}
    for gi, li in pairs(self._local_of) do
      local g = hyper(sd.param_groups[gi])
      g.params = {}
      local_sd.param_groups[li] = g
    end
    local k = 0
    for li, lg in ipairs(self.optim.param_groups) do
      for j = 1, #lg.params do
        k = k + 1
        local_sd.param_groups[li].params[j] = k
      end
    end
    dle.no_grad(function()
      for _, u in ipairs(self._units) do local_sd.state[self:_local_index(u)] = unit_state(self, u, sd.state) end
    end)
    local ok, err = pcall(self.optim.load_state_dict, self.optim, local_sd)
    if not ok then fail("%s: %s", fn, check.strip_where(err)) end
  end
  for gi, group in ipairs(self.param_groups) do
    for key, v in pairs(sd.param_groups[gi]) do
      if key ~= "params" then group[key] = Optimizer.copy_value(v) end
    end
  end
  self:_refresh_masters()
end

--- Restores a full state (this one's state_dict(), stage 1's consolidated one, a plain
-- opt_class's) over the same params, whatever world size saved it; each rank keeps its shards.
Sharded.load_state_dict = check.public(load)

return Sharded
