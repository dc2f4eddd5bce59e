--- dle.optim.Optimizer: the base class of every optimizer (Torch7/llm.c habit: the update is a
-- fused C step over explicit state; the state is plain tables of numbers and tensors, so it
-- saves and resumes exactly). A subclass is made with Optimizer.extend(name, defaults) and
-- provides three methods:
--   cls.check(group)            validates a param group's hyperparameters (errors at level 3)
--   cls:update(p, g, st, group) runs one fused step of param p with gradient g and state st
--   cls.state_tensors           names of the tensors the state may hold (besides the number
--                               step): load_state_dict and ZeRO consolidation rely on it
local dle = require "dle"

local Optimizer = {}
Optimizer.__index = Optimizer

--- A hyperparameter value copied one level deep (betas = {b1, b2} is a table).
local function copy_value(v)
  if type(v) ~= "table" then return v end
  local r = {}
  for k, x in pairs(v) do r[k] = x end
  return r
end
Optimizer.copy_value = copy_value

--- Gives an optimizer class (or any object with param_groups) its lr property: opt.lr reads the
-- first group's lr and writes every group's (a non-negative number). Sets cls.__index (other keys
-- come from cls) and cls.__newindex.
-- @param cls the class table
-- @param name class name for messages
function Optimizer.lr_property(cls, name)
  cls.__index = function(self, k)
    if k == "lr" then return rawget(self, "param_groups")[1].lr end
    return cls[k]
  end
  cls.__newindex = function(self, k, v)
    if k == "lr" then
      if type(v) ~= "number" or v < 0 or v ~= v then
        error(name .. ": lr must be a non-negative number, got " .. tostring(v), 2)
      end
      for _, group in ipairs(self.param_groups) do group.lr = v end
    else
      rawset(self, k, v)
    end
  end
end

--- Creates an optimizer class.
-- @param name class name used in error messages ("SGD")
-- @param defaults table of hyperparameters and their defaults (every accepted option)
-- @return the class: call it as cls(params, opts) or cls.new(params, opts)
function Optimizer.extend(name, defaults)
  local cls = {name = name, defaults = defaults, state_tensors = {}}
  Optimizer.lr_property(cls, name)
  cls.__name = "dle.optim." .. name
  --- Makes an optimizer over params (a list of tensors, or a list of param groups
  -- {params = {...}, lr = ...} overriding opts) with hyperparameters from opts.
  cls.new = function(params, opts)
    local self = setmetatable({}, cls)
    Optimizer._init(self, params, opts)
    return self
  end
  return setmetatable(cls, {__index = Optimizer, __call = function(_, params, opts)
    local ok, r = pcall(cls.new, params, opts)
    if not ok then error(r, 2) end
    return r
  end})
end

-- Hyperparameters: defaults, overridden by base, overridden by opts; unknown keys are errors.
local function merge(cls, base, opts, what)
  local h = {}
  for k, v in pairs(base) do h[k] = copy_value(v) end
  for k, v in pairs(opts or {}) do
    if k ~= "params" or what ~= "group" then
      if cls.defaults[k] == nil then
        error(string.format("%s: unknown option '%s'", cls.name, tostring(k)), 0)
      end
      h[k] = copy_value(v)
    end
  end
  return h
end

function Optimizer:_init(params, opts)
  local cls = getmetatable(self)
  local name = cls.name
  if opts ~= nil and type(opts) ~= "table" then
    error(name .. ": options must be a table, got " .. type(opts), 0)
  end
  if type(params) ~= "table" or #params == 0 then
    error(name .. ": params must be a non-empty list of tensors or of param groups", 0)
  end
  local base = merge(cls, cls.defaults, opts, "opts")
  local groups = dle.is_tensor(params[1]) and {{params = params}} or params
  local seen = {}
  rawset(self, "param_groups", {})
  rawset(self, "state", {})
  for gi, spec in ipairs(groups) do
    if type(spec) ~= "table" or type(spec.params) ~= "table" then
      error(string.format("%s: param group %d must be a table with a params list", name, gi), 0)
    end
    local group = merge(cls, base, spec, "group")
    group.params = {}
    for i, p in ipairs(spec.params) do
      if not dle.is_tensor(p) then
        error(string.format("%s: param %d of group %d is a %s, expected a tensor", name, i, gi,
          type(p)), 0)
      end
      if not p:is_floating_point() then
        error(string.format("%s: param %d of group %d is %s, expected a float tensor", name, i, gi,
          p:dtype()), 0)
      end
      if seen[p] then
        error(string.format("%s: param %d of group %d appears more than once", name, i, gi), 0)
      end
      seen[p] = true
      group.params[i] = p
    end
    cls.check(group)
    self.param_groups[gi] = group
  end
end

--- The dtype optimizer state has for param p: float64 for float64, float32 otherwise.
-- @param p tensor
-- @return dtype name
function Optimizer.state_dtype(p)
  return p:dtype() == "float64" and "float64" or "float32"
end

--- A zero state tensor shaped like p in its state dtype.
-- @param p tensor
-- @return tensor
function Optimizer.zeros_state(p)
  return dle.zeros_like(p, {dtype = Optimizer.state_dtype(p)})
end

--- Runs one update of every param that has a gradient (params whose .grad is nil are skipped),
-- without recording for autograd.
-- @param closure optional function re-evaluating the model and returning the loss (run with grad)
-- @return the closure's loss, if any
function Optimizer:step(closure)
  local loss
  if closure then loss = dle.enable_grad(closure) end
  local name = self.name
  dle.no_grad(function()
    local index = 0
    for _, group in ipairs(self.param_groups) do
      for _, p in ipairs(group.params) do
        index = index + 1
        local g = p.grad
        if g ~= nil then
          if g.requires_grad then
            error(string.format("%s: the gradient of param %d requires grad; detach it", name,
              index), 0)
          end
          if not g:is_contiguous() then g = g:contiguous() end
          if g:dtype() ~= p:dtype() then g = g:to(p:dtype()) end
          local st = self.state[index]
          if st == nil then
            st = {step = 0}
            self.state[index] = st
          end
          self:update(p, g, st, group)
        end
      end
    end
  end)
  return loss
end

--- Sets every param's gradient to nil.
function Optimizer:zero_grad()
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do p.grad = nil end
  end
end

--- A param group's hyperparameters (every key but params), copied.
-- @param group param group table
-- @return table
function Optimizer.hyperparameters(group)
  local h = {}
  for k, v in pairs(group) do
    if k ~= "params" then h[k] = copy_value(v) end
  end
  return h
end

--- Param groups as a state_dict holds them: each group's hyperparameters (copies) and its params
-- as numbers 1..N across the groups in order.
-- @param groups list of param groups
-- @return list of tables
function Optimizer.indexed_groups(groups)
  local out, index = {}, 0
  for gi, group in ipairs(groups) do
    local g = Optimizer.hyperparameters(group)
    g.params = {}
    for i = 1, #group.params do
      index = index + 1
      g.params[i] = index
    end
    out[gi] = g
  end
  return out
end

--- The optimizer's state as plain tables, numbers and tensors (copies):
-- {state = {[i] = {step = n, <buffers>}}, param_groups = {{lr = ..., params = {i, ...}}, ...}},
-- params being numbered 1..N across the groups in order.
-- @return table
function Optimizer:state_dict()
  local sd = {state = {}, param_groups = Optimizer.indexed_groups(self.param_groups)}
  for i, st in pairs(self.state) do
    local s = {}
    for k, v in pairs(st) do s[k] = dle.is_tensor(v) and v:clone() or copy_value(v) end
    sd.state[i] = s
  end
  return sd
end

--- Restores a state_dict() of an optimizer of the same class over params of the same shapes (or
-- a ZeroRedundancyOptimizer's consolidated one), so that training continues exactly as without
-- the round trip.
-- @param sd table from state_dict() (possibly through dle.save/dle.load)
function Optimizer:load_state_dict(sd)
  local name = self.name
  if type(sd) ~= "table" or type(sd.param_groups) ~= "table" or type(sd.state) ~= "table" then
    error(name .. ": load_state_dict expects a table with state and param_groups", 2)
  end
  if sd.owners ~= nil then   -- it would load, silently without the other ranks' state
    error(string.format("%s: load_state_dict: the state is rank %s's shard of a "
      .. "ZeroRedundancyOptimizer in a world of %s; load a full state (zero:consolidate_state_dict(), "
      .. "then state_dict() on that rank)", name, tostring(sd.rank), tostring(sd.world_size)), 2)
  end
  if #sd.param_groups ~= #self.param_groups then
    error(string.format("%s: load_state_dict: state has %d param groups, optimizer has %d", name,
      #sd.param_groups, #self.param_groups), 2)
  end
  local params = {}
  for gi, group in ipairs(self.param_groups) do
    local sg = sd.param_groups[gi]
    if type(sg) ~= "table" then
      error(string.format("%s: load_state_dict: param group %d is a %s, not a table", name, gi, type(sg)), 2)
    end
    if type(sg.params) ~= "table" or #sg.params ~= #group.params then
      error(string.format("%s: load_state_dict: group %d has %d params in the state, %d here", name,
        gi, type(sg.params) == "table" and #sg.params or 0, #group.params), 2)
    end
    for _, p in ipairs(group.params) do params[#params + 1] = p end
  end
  local state = {}
  for i, s in pairs(sd.state) do
    local p = params[math.tointeger(i) or 0]
    if p == nil then
      error(string.format("%s: load_state_dict: state for param %s, which does not exist", name,
        tostring(i)), 2)
    end
    local st = {}
    for k, v in pairs(s) do
      if dle.is_tensor(v) then
        if table.concat(v:shape(), ",") ~= table.concat(p:shape(), ",") then
          error(string.format("%s: load_state_dict: %s of param %d has shape {%s}, param has {%s}",
            name, k, i, table.concat(v:shape(), ","), table.concat(p:shape(), ",")), 2)
        end
        st[k] = v:to(Optimizer.state_dtype(p)):contiguous():clone()
      else
        st[k] = copy_value(v)
      end
    end
    state[math.tointeger(i)] = st
  end
  for gi, group in ipairs(self.param_groups) do
    for k, v in pairs(sd.param_groups[gi]) do
      if k ~= "params" then group[k] = copy_value(v) end
    end
    getmetatable(self).check(group)
  end
  rawset(self, "state", state)
end

--- Validates a param group's hyperparameters: the hook each subclass overrides (SGD.check, ...);
-- the base class accepts any group. Called by the constructor and load_state_dict.
function Optimizer.check() end

--- A hyperparameter check shared by the subclasses: a finite number >= 0 (or in [lo, hi)).
function Optimizer.check_number(cls_name, group, key, hi)
  local v = group[key]
  if type(v) ~= "number" or v ~= v or v < 0 or v == math.huge or (hi and v >= hi) then
    error(string.format("%s: invalid %s %s (expected a number >= 0%s)", cls_name, key, tostring(v),
      hi and (" and < " .. hi) or ""), 0)
  end
end

return Optimizer
