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
-- Checkpoints, two ways:
-- * One file (PyTorch's way): consolidate_state_dict(to), a collective, gathers every rank's state
--   to rank `to`; state_dict() on `to` is then the full state in opt_class's own format, which a
--   plain opt_class over the same params, or a ZeroRedundancyOptimizer under any world size, loads.
--   The consolidation holds until the next step() or load_state_dict(), which drop it (state_dict()
--   is the shard again): a full state older than the parameters would resume silently wrong.
-- * One file per rank: state_dict() is otherwise this rank's shard, {world_size, rank, owners,
--   param_groups, state} with state keyed by global param index, own params only; it loads only on
--   the same rank under the same world size and partition.
-- load_state_dict(sd) takes either; each rank keeps the state of the params it owns now.
local dle = require("dle")
local check = require("dle.check")
local dist = require("dle.dist")
local buckets = require("dle.dist.buckets")
local Optimizer = require("dle.optim.optimizer")

local NAME = "ZeroRedundancyOptimizer"
local CAP = 25 * 1024 * 1024   -- bytes per broadcast bucket

local Zero = {__name = "dle.optim." .. NAME}

local copy_value = Optimizer.copy_value

local hyper = Optimizer.hyperparameters

local function fail(fmt, ...) error(string.format(fmt, ...), 0) end
Zero._NAME, Zero._fail = NAME, fail   -- for stages 2 and 3 (dle.optim.zero_sharded)

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

--- The stage of a constructor's opts (1 by default) and the opts without it (for opt_class).
function Zero._stage_of(opts)
  if type(opts) ~= "table" or opts.stage == nil then return 1, opts end
  local stage = opts.stage
  if math.type(stage) ~= "integer" or stage < 1 or stage > 3 then
    fail("%s: stage must be 1, 2 or 3, got %s", NAME, tostring(stage))
  end
  local rest = {}
  for k, v in pairs(opts) do if k ~= "stage" then rest[k] = v end end
  return stage, rest
end

--- Mixed precision: the tensor the optimizer steps for param p. A float16 or bfloat16 p gets a
-- float32 master copy (its updates accumulate at full precision; p takes its rounded value after
-- each step), recorded as {p, master} in masters; other params step themselves.
function Zero._master_of(p, masters)
  if p:dtype() ~= "float16" and p:dtype() ~= "bfloat16" then return p end
  local m = dle.no_grad(function() return p:detach():to("float32"):clone() end)
  masters[#masters + 1] = {p, m}
  return m
end

local function new(opt_class, params, opts)
  if type(opt_class) ~= "table" or type(rawget(opt_class, "new")) ~= "function" then
    error(NAME .. ": opt_class must be an optimizer class such as dle.optim.Adam, got "
      .. check.typename(opt_class), 0)
  end
  if not dist.is_initialized() then
    error(NAME .. ": dle.dist is not initialized; call dle.dist.init() first", 0)
  end
  local stage
  stage, opts = Zero._stage_of(opts)
  if stage > 1 then return require("dle.optim.zero_sharded").new(opt_class, params, opts, stage) end
  if require("dle.nn.module").is_module(params) then params = params:parameters() end
  -- An optimizer over every param checks params and options the same way on every rank (a rank
  -- owning none must fail like the others) and gives the global param groups. It has no state.
  local ok, full = pcall(opt_class.new, params, opts)
  if not ok then error(NAME .. ": " .. check.strip_where(full), 0) end
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
  local local_groups, local_of, global_of, masters = {}, {}, {}, {}
  local index = 0
  for gi, group in ipairs(full.param_groups) do
    local own = {}
    for _, p in ipairs(group.params) do
      index = index + 1
      if owners[index] == rank then
        own[#own + 1] = Zero._master_of(p, masters)
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
  rawset(self, "_class", opt_class)
  rawset(self, "_masters", masters)      -- {param, master} of own float16/bfloat16 params
  -- self._consolidated, set by consolidate_state_dict on rank `to`: the full state, until a step
  return self
end

setmetatable(Zero, {__call = check.public(function(_, opt_class, params, opts) return new(opt_class, params,
                                                                                          opts) end)})

--- zero:owner(i) -> the 0-based rank that owns param i (1-based, in the order given).
function Zero:owner(i)
  local r = self.owners[i]
  if r == nil then check.error(string.format("%s:owner: no param %s", NAME, tostring(i))) end
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
  rawset(self, "_consolidated", nil)   -- about to be out of date
  self:_sync_hyperparameters()
  if self.optim then
    dle.no_grad(function()
      for _, pm in ipairs(self._masters) do pm[2].grad = pm[1].grad and pm[1].grad:to("float32") end
      self.optim:step()
      for _, pm in ipairs(self._masters) do pm[1]:copy_(pm[2]); pm[2].grad = nil end
    end)
  end
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


-- f as a public method: its errors (messages that name the method) point at the caller's line.
local function reported_at_caller(f) return check.public(f) end


-- ---------------------------------------------------------------- what a param's state holds

local function is_state_tensor(cls, name)
  for _, n in ipairs(cls.state_tensors) do
    if n == name then return true end
  end
  return false
end

-- Why st, the state of param p, is not what an optimizer of class cls keeps, or nil when it is:
-- a number `step` and tensors shaped like p, each named in cls.state_tensors. Consolidation sends
-- exactly these, so load_state_dict checks the same. (Tensors in list order: the same message on
-- every rank.)
local function state_problem(cls, shape, st)
  if type(st) ~= "table" then return "is a " .. check.typename(st) .. ", not a table" end
  if type(st.step) ~= "number" then return "has step " .. check.typename(st.step) .. ", not a number" end
  for k in pairs(st) do
    if k ~= "step" and not is_state_tensor(cls, k) then
      return string.format("holds '%s', which %s does not keep", tostring(k), cls.name)
    end
  end
  for _, name in ipairs(cls.state_tensors) do
    local v = st[name]
    if v ~= nil and not dle.is_tensor(v) then
      return string.format("has %s a %s, not a tensor", name, check.typename(v))
    elseif v ~= nil and check.shape_str(v) ~= shape then
      return string.format("has %s of shape %s, the param %s", name, check.shape_str(v), shape)
    end
  end
end

-- The live state tables of this rank's params, keyed by global param index.
function Zero:_own_states()
  local own = {}
  if self.optim then
    for li, i in ipairs(self._global_of) do own[i] = self.optim.state[li] end
  end
  return own
end

-- ---------------------------------------------------------------- consolidation

-- Every param's state header, the same on every rank: row i is {status, step, has tensor 1,
-- has tensor 2, ...} over opt_class.state_tensors, status 1 for a state, 0 for none (a param not
-- stepped yet), -1 for a state that cannot be sent (problems[i] says why, on its owner only). The
-- owner writes the row, the others zeros, and an all_reduce sums them; float64 holds any step
-- count exactly.
function Zero:_state_headers(own)
  local cls = self._class
  local rows, problems = {}, {}
  for i, p in ipairs(self._params) do
    local row = {0, 0}
    for k in ipairs(cls.state_tensors) do row[2 + k] = 0 end
    local st = own[i]
    if st ~= nil then
      problems[i] = state_problem(cls, check.shape_str(p), st)
      row[1] = problems[i] and -1 or 1
      if not problems[i] then
        row[2] = st.step
        for k, name in ipairs(cls.state_tensors) do row[2 + k] = st[name] and 1 or 0 end
      end
    end
    rows[i] = row
  end
  return dist.all_reduce(dle.tensor(rows, {dtype = "float64"})):totable(), problems
end

-- Broadcasts the states of rank r's params, as the headers describe them, from r to every rank
-- (flat buckets); returns them, {[i] = state}, as copies on every rank (r clones its own).
function Zero:_broadcast_states(r, rows, own)
  local states, tensors = {}, {}
  for i, p in ipairs(self._params) do
    local row = rows[i]
    if self.owners[i] == r and row[1] == 1 then
      local st = {step = math.tointeger(row[2]) or row[2]}
      for k, name in ipairs(self._class.state_tensors) do
        if row[2 + k] == 1 then
          st[name] = own[i] and own[i][name]:clone() or Optimizer.zeros_state(p)
          tensors[#tensors + 1] = st[name]
        end
      end
      states[i] = st
    end
  end
  buckets.each(tensors, CAP, function(flat) dist.broadcast(flat, r) end)
  return states
end

local function consolidate(self, to)
  local fn = NAME .. ":consolidate_state_dict"
  to = to == nil and 0 or check.integer(to, fn, "to")
  if to < 0 or to >= self._world then
    fail("%s: to %d is not a rank (ranks are 0..%d)", fn, to, self._world - 1)
  end
  rawset(self, "_consolidated", nil)
  local own = self:_own_states()
  local rows, problems = self:_state_headers(own)
  for i, row in ipairs(rows) do
    if row[1] < 0 then   -- every rank stops here, none is left waiting in a broadcast
      fail("%s: the state of param %d (on rank %d) %s", fn, i, self.owners[i],
        problems[i] or "is not what " .. self._class.name .. " keeps (see that rank's error)")
    end
  end
  local full = {}
  for r = 0, self._world - 1 do
    local states = self:_broadcast_states(r, rows, own)
    if self._rank == to then
      for i, st in pairs(states) do full[i] = st end
    end
  end
  if self._rank == to then rawset(self, "_consolidated", full) end
end

--- zero:consolidate_state_dict(to): gathers the optimizer state of every param to rank `to`
-- (0-based, default 0), as PyTorch's. A collective: every rank must call it, with the same `to`.
-- Afterwards, until the next step() or load_state_dict(), state_dict() on rank `to` is the full
-- state in opt_class's own format; the other ranks keep only their shard. The owners broadcast
-- their params' state in turn, so every rank briefly holds a copy of one rank's share.
-- @param to rank that keeps the full state (default 0)
Zero.consolidate_state_dict = reported_at_caller(consolidate)

-- ---------------------------------------------------------------- state_dict

--- The state as plain tables, numbers and tensors (dle.save writes it):
-- * on the rank of the last consolidate_state_dict(), unless step() or load_state_dict() came
--   since: the full state, {param_groups, state = {[i] = state}} over every param, exactly
--   opt_class's own state_dict format (the tensors are the consolidated copies, not the live state);
-- * otherwise this rank's shard: {world_size, rank, owners, param_groups = the global groups'
--   hyperparameters (params as global indices), state = {[global index] = state}} (copies).
-- @return table
function Zero:state_dict()
  local groups = Optimizer.indexed_groups(self.param_groups)
  if self._consolidated then
    local state = {}
    for i, st in pairs(self._consolidated) do state[i] = copy_value(st) end
    return {param_groups = groups, state = state}
  end
  local sd = {world_size = self._world, rank = self._rank, owners = copy_value(self.owners),
              param_groups = groups, state = {}}
  if self.optim then
    for li, st in pairs(self.optim:state_dict().state) do sd.state[self._global_of[li]] = st end
  end
  return sd
end

-- ---------------------------------------------------------------- load_state_dict

-- A shard loads only where it was saved: the same rank, world size and partition.
local function check_shard(self, sd, fn)
  if sd.world_size ~= self._world or sd.rank ~= self._rank then
    fail("%s: the state is rank %s's shard of a world of %s; this is rank %d of %d (a shard loads "
      .. "only on its own rank; consolidate_state_dict() makes a state any rank loads)", fn,
      tostring(sd.rank), tostring(sd.world_size), self._rank, self._world)
  end
  if type(sd.owners) ~= "table" then fail("%s: the shard's owners is not a table", fn) end
  if #sd.owners ~= #self.owners then
    fail("%s: the state has %d params, this optimizer %d", fn, #sd.owners, #self.owners)
  end
  for i, r in ipairs(self.owners) do
    if sd.owners[i] ~= r then
      fail("%s: param %d belongs to rank %s in the state, to rank %d here (another partition)", fn,
        i, tostring(sd.owners[i]), r)
    end
  end
  for i in pairs(sd.state) do
    if self.owners[i] ~= self._rank then
      fail("%s: state for param %s, which rank %d does not own", fn, tostring(i), self._rank)
    end
  end
end

-- A full state (consolidated, or a plain optimizer's) must number the params as this optimizer
-- does: as many in all, and in each group (groups: the param groups, or their param counts).
function Zero._check_full(sd, fn, groups)
  local total, counts, here = 0, {}, 0
  for gi, sg in ipairs(sd.param_groups) do
    counts[gi] = type(sg) == "table" and type(sg.params) == "table" and #sg.params or 0
    total = total + counts[gi]
  end
  for _, group in ipairs(groups) do here = here + #group.params end
  if total ~= here then
    fail("%s: the state has %d params, this optimizer %d", fn, total, here)
  end
  for gi, group in ipairs(groups) do
    if counts[gi] ~= #group.params then
      fail("%s: param group %d has %d params in the state, %d here", fn, gi, counts[gi],
        #group.params)
    end
  end
end

-- Each param state of sd belongs to an existing param (shapes[i]: param i's shape string) and is
-- what optimizer class cls keeps, shaped like it.
function Zero._check_states(cls, state, fn, shapes)
  for i, st in pairs(state) do
    local shape = shapes[math.tointeger(i) or 0]
    if shape == nil then
      fail("%s: state for param %s, which does not exist (%d params)", fn, tostring(i), #shapes)
    end
    local problem = state_problem(cls, shape, st)
    if problem then fail("%s: the state of param %d %s", fn, i, problem) end
  end
end

-- The opening checks of every stage's load_state_dict: sd is a table of param_groups and state,
-- with as many groups as groups.
function Zero._check_table(sd, fn, groups)
  if type(sd) ~= "table" or type(sd.param_groups) ~= "table" or type(sd.state) ~= "table" then
    fail("%s: expected a table from state_dict(): a rank's shard, or a full state (consolidated, "
      .. "or a plain optimizer's)", fn)
  end
  if #sd.param_groups ~= #groups then
    fail("%s: the state has %d param groups, this optimizer %d", fn, #sd.param_groups, #groups)
  end
end

-- Loads the state of this rank's params (sd.state keyed by global index) into the local optimizer,
-- in its own state_dict format, and sd's hyperparameters into the global param groups.
function Zero:_load_own(sd, fn)
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
    if not ok then fail("%s: %s", fn, tostring(err)) end
    dle.no_grad(function()   -- the params loaded before this state are the masters' values
      for _, pm in ipairs(self._masters) do pm[2]:copy_(pm[1]) end
    end)
  end
  for gi, group in ipairs(self.param_groups) do
    for k, v in pairs(sd.param_groups[gi]) do
      if k ~= "params" then group[k] = copy_value(v) end
    end
  end
end

local function load(self, sd)
  local fn = NAME .. ":load_state_dict"
  Zero._check_table(sd, fn, self.param_groups)
  if sd.owners ~= nil then check_shard(self, sd, fn) else Zero._check_full(sd, fn, self.param_groups) end
  local shapes = {}
  for i, p in ipairs(self._params) do shapes[i] = check.shape_str(p) end
  Zero._check_states(self._class, sd.state, fn, shapes)
  rawset(self, "_consolidated", nil)
  self:_load_own(sd, fn)
end

--- Restores a state_dict(): either a shard, on the rank that saved it under the same world size
-- and partition, or a full state over the same params, from consolidate_state_dict() (any world
-- size) or from a plain optimizer of the same class. Each rank keeps the state of its own params.
-- Not a collective. Drops a consolidation this rank held.
-- @param sd table from state_dict() (possibly through dle.save/dle.load)
Zero.load_state_dict = reported_at_caller(load)

return Zero
