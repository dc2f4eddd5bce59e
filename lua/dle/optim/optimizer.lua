--- dle.optim.Optimizer: the base class of every optimizer. The update itself is an algorithm of
-- dle.optim.functional (Torch7/llm.c habit: a fused C step over explicit state; the state is plain
-- tables of numbers and tensors, so it saves and resumes exactly). A class adds what PyTorch's
-- optimizers have around it: param groups with their own hyperparameters, `.grad` as the gradient,
-- state_dict / load_state_dict and the lr property. A subclass is made with
-- Optimizer.extend(name, algorithm), from which it gets
--   cls.defaults, cls.state_tensors   the algorithm's hyperparameters and state tensor names
--                                     (load_state_dict and ZeRO consolidation rely on the latter)
--   cls.check(group)                  validates a param group's hyperparameters
--   cls:update(p, g, st, group)       one fused step of param p with gradient g and state st
local dle = require("dle")
local check = require("dle.check")
local functional = require("dle.optim.functional")
local core = require("dle.core")
local train = require("dle.graph.train")
local guard = require("dle.graph.guard")

local Optimizer = {}
Optimizer.__index = Optimizer

local copy_value = functional.copy_value
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
        check.error(name .. ": lr must be a non-negative number, got " .. tostring(v))
      end
      for _, group in ipairs(self.param_groups) do group.lr = v end
    else
      rawset(self, k, v)
    end
  end
end

--- Creates an optimizer class from an algorithm of dle.optim.functional.
-- @param name class name used in error messages ("SGD")
-- @param alg the algorithm (dle.optim.functional.algorithms.<name>)
-- @return the class: call it as cls(params, opts) or cls.new(params, opts)
function Optimizer.extend(name, alg)
  local cls = {name = name, defaults = alg.defaults, state_tensors = alg.state_tensors, algorithm = alg}
  cls.check = function(group) alg.check(group, name) end
  cls.update = function(_, p, g, st, group) alg.update(p, g, st, group) end
  Optimizer.lr_property(cls, name)
  cls.__name = "dle.optim." .. name
  --- Makes an optimizer over params (a list of tensors, or a list of param groups
  -- {params = {...}, lr = ...} overriding opts) with hyperparameters from opts.
  cls.new = function(params, opts)
    local self = setmetatable({}, cls)
    Optimizer._init(self, params, opts)
    return self
  end
  return setmetatable(cls, {__index = Optimizer, __call = function(_, params, opts) return cls.new(params, opts) end})
end

-- Hyperparameters: defaults, overridden by base, overridden by opts; unknown keys are errors.
-- (The options a class knows are its defaults' keys; a param group may also hold its params.)
local function merge(cls, base, opts, what)
  local known = {}
  for k in pairs(cls.defaults) do known[#known + 1] = k end
  if what == "group" then known[#known + 1] = "params" end
  local h = {}
  for k, v in pairs(base) do h[k] = copy_value(v) end
  for k, v in pairs(check.options(opts, cls.name, known)) do
    if k ~= "params" then h[k] = copy_value(v) end
  end
  return h
end

function Optimizer:_init(params, opts)
  local cls = getmetatable(self)
  local name = cls.name
  if opts ~= nil and type(opts) ~= "table" then
    check.error(name .. ": options must be a table, got " .. type(opts))
  end
  if type(params) ~= "table" or #params == 0 then
    check.error(name .. ": params must be a non-empty list of tensors or of param groups")
  end
  local base = merge(cls, cls.defaults, opts, "opts")
  local groups = dle.is_tensor(params[1]) and {{params = params}} or params
  local seen = {}
  rawset(self, "param_groups", {})
  rawset(self, "state", guard.runtime({}))
  for gi, spec in ipairs(groups) do
    if type(spec) ~= "table" or type(spec.params) ~= "table" then
      check.error(string.format("%s: param group %d must be a table with a params list", name, gi))
    end
    local group = merge(cls, base, spec, "group")
    group.params = {}
    for i, p in ipairs(spec.params) do
      if not dle.is_tensor(p) then
        check.error(string.format("%s: param %d of group %d is a %s, expected a tensor", name, i, gi,
          type(p)))
      end
      if not p:is_floating_point() then
        check.error(string.format("%s: param %d of group %d is %s, expected a float tensor", name, i, gi,
          p:dtype()))
      end
      if seen[p] then
        check.error(string.format("%s: param %d of group %d appears more than once", name, i, gi))
      end
      seen[p] = true
      group.params[i] = p
    end
    cls.check(group)
    self.param_groups[gi] = guard.runtime(group, {lr = true})
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
  if closure == nil and train.tracing() then return self:_record_step() end
  local loss
  if closure then loss = dle.enable_grad(closure) end
  self:_step_all()
  return loss
end

--- Under a graph trace (dle.compile): the step as one "optim_step" node (dle.graph.train), which
-- reruns _step_all at replay with the hyperparameters and state the optimizer holds then; an
-- optimizer without a fused step makes the trace unsafe.
function Optimizer:_record_step()
  if not getmetatable(self).algorithm.fused then
    core._trace_note(self.name .. ": step: an optimizer without a fused step is not part of the graph")
    self:_step_all()
    return nil
  end
  train.record("optim_step", function()
    local ins, params = {}, {}
    for _, group in ipairs(self.param_groups) do
      for _, p in ipairs(group.params) do
        params[#params + 1] = p
        ins[#ins + 1] = p
        local g = p.grad
        if g ~= nil then ins[#ins + 1] = g end
      end
    end
    self:_step_all()
    return ins, params, {optimizer = self}
  end)
end

--- One update of every param that has a gradient, without recording for autograd.
function Optimizer:_step_all()
  local name = self.name
  dle.no_grad(function()
    local index = 0
    for _, group in ipairs(self.param_groups) do
      for _, p in ipairs(group.params) do
        index = index + 1
        local g = p.grad
        if g ~= nil then
          g = functional.step_gradient(p, g, index, name)
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
end

--- Sets every param's gradient to nil.
function Optimizer:zero_grad()
  local params = {}
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do params[#params + 1] = p end
  end
  train.zero_grad(params, true)
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
    check.error(name .. ": load_state_dict expects a table with state and param_groups")
  end
  if sd.owners ~= nil then   -- it would load, silently without the other ranks' state
    check.error(string.format("%s: load_state_dict: the state is rank %s's shard of a "
      .. "ZeroRedundancyOptimizer in a world of %s; load a full state (zero:consolidate_state_dict(), "
      .. "then state_dict() on that rank)", name, tostring(sd.rank), tostring(sd.world_size)))
  end
  if #sd.param_groups ~= #self.param_groups then
    check.error(string.format("%s: load_state_dict: state has %d param groups, optimizer has %d", name,
      #sd.param_groups, #self.param_groups))
  end
  local params = {}
  for gi, group in ipairs(self.param_groups) do
    local sg = sd.param_groups[gi]
    if type(sg) ~= "table" then
      check.error(string.format("%s: load_state_dict: param group %d is a %s, not a table", name, gi, type(sg)))
    end
    if type(sg.params) ~= "table" or #sg.params ~= #group.params then
      check.error(string.format("%s: load_state_dict: group %d has %d params in the state, %d here", name,
        gi, type(sg.params) == "table" and #sg.params or 0, #group.params))
    end
    for _, p in ipairs(group.params) do params[#params + 1] = p end
  end
  local state = {}
  for i, s in pairs(sd.state) do
    local p = params[math.tointeger(i) or 0]
    if p == nil then
      check.error(string.format("%s: load_state_dict: state for param %s, which does not exist", name,
        tostring(i)))
    end
    local st = {}
    for k, v in pairs(s) do
      if dle.is_tensor(v) then
        if table.concat(v:shape(), ",") ~= table.concat(p:shape(), ",") then
          check.error(string.format("%s: load_state_dict: %s of param %d has shape {%s}, param has {%s}",
            name, k, i, table.concat(v:shape(), ","), table.concat(p:shape(), ",")))
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
  rawset(self, "state", guard.runtime(state))
end

return Optimizer
