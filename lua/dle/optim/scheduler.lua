--- dle.optim.scheduler: what the lr schedulers of dle.optim.lr share. A Scheduler holds the
-- optimizer, the base lr of each param group and a step count; lr_at(base, t, i) gives group i's
-- lr at step t (closed forms, so get_lr(t) and load_state_dict need no replay). The base lrs are
-- the optimizer's lrs when its first scheduler was made (PyTorch's initial_lr), so schedulers
-- made one after another on one optimizer (lr.sequential) all start from the same lrs.
local check = require("dle.check")

local S = {}

local Scheduler = {}
Scheduler.__index = Scheduler
S.Scheduler = Scheduler

-- optimizer -> its param groups' lrs when its first scheduler was made
local initial_lrs = setmetatable({}, {__mode = "k"})

--- A scheduler over opt named `name` (for messages), with lr_at(base, t, i) and, optionally,
-- on_apply(group, t, i) run after each group's lr is set (one_cycle's momentum). Sets the lrs of
-- step 0.
-- @return scheduler
function S.new(opt, name, lr_at, on_apply)
  S.check_optimizer(opt, name)
  local bases = initial_lrs[opt]
  if bases == nil then
    bases = {}
    for i, group in ipairs(opt.param_groups) do bases[i] = group.lr end
    initial_lrs[opt] = bases
  end
  local self = setmetatable({optimizer = opt, name = name, last_step = 0, base_lrs = {}, lr_at = lr_at,
    on_apply = on_apply}, Scheduler)
  for i, group in ipairs(opt.param_groups) do self.base_lrs[i] = bases[i] or group.lr end
  self:_apply()
  return self
end

--- opt must be an optimizer (a table with param_groups).
function S.check_optimizer(opt, name)
  if type(opt) ~= "table" or type(opt.param_groups) ~= "table" then
    check.error("lr." .. name .. ": expected an optimizer as first argument")
  end
end

function Scheduler:_apply()
  for i, group in ipairs(self.optimizer.param_groups) do
    group.lr = self.lr_at(self.base_lrs[i], self.last_step, i)
    if self.on_apply then self.on_apply(group, self.last_step, i) end
  end
end

--- Advances one step and sets the optimizers' lr.
-- @return the new lr (of the first param group)
function Scheduler:step()
  self.last_step = self.last_step + 1
  self:_apply()
  return self:get_lr()
end

--- The lr (of the first param group) at step t (default: the current step).
-- @param t optional step number (0 = before any :step())
-- @return number
function Scheduler:get_lr(t)
  return self.lr_at(self.base_lrs[1], t or self.last_step, 1)
end

--- The scheduler's position as a plain table {last_step, base_lrs}.
function Scheduler:state_dict()
  local b = {}
  for i, v in ipairs(self.base_lrs) do b[i] = v end
  return {last_step = self.last_step, base_lrs = b}
end

--- Restores a state_dict() and sets the optimizer's lr accordingly.
-- @param sd table from state_dict()
function Scheduler:load_state_dict(sd)
  if type(sd) ~= "table" or math.type(sd.last_step) ~= "integer" or type(sd.base_lrs) ~= "table" then
    check.error("lr." .. self.name .. ": load_state_dict expects {last_step = int, base_lrs = {...}}")
  end
  self.last_step = sd.last_step
  for i, v in ipairs(sd.base_lrs) do self.base_lrs[i] = v end
  self:_apply()
end

--- opts[key] as an integer >= min (required, or default when absent); errors name lr.<name>.
function S.check_int(name, opts, key, min, required, default)
  local v = opts[key]
  if v == nil and not required then return default end
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) then
    check.error(string.format("lr.%s: %s must be an integer, got %s", name, key, tostring(v)))
  end
  if v < min then check.error(string.format("lr.%s: %s must be >= %d, got %d", name, key, min, v)) end
  return math.tointeger(v)
end

--- opts[key] as a number (default when absent) for which ok holds (expected says which).
function S.check_num(name, opts, key, default, ok, expected)
  local v = opts[key]
  if v == nil then return default end
  if type(v) ~= "number" or v ~= v or not ok(v) then
    check.error(string.format("lr.%s: %s must be %s, got %s", name, key, expected, tostring(v)))
  end
  return v
end

--- A per-group value: v itself (a number or function) or v[i] of a list with one per group.
function S.per_group(name, key, v, opt, want)
  local n = #opt.param_groups
  local list = {}
  if type(v) == "table" and not check.is_callable(v) then
    if #v ~= n then
      check.error(string.format("lr.%s: %s has %d entries but the optimizer has %d param groups", name, key, #v, n))
    end
    for i = 1, n do list[i] = v[i] end
  else
    for i = 1, n do list[i] = v end
  end
  for i = 1, n do
    local ok = want == "function" and check.is_callable(list[i]) or want == "number" and type(list[i]) == "number"
    if not ok then
      check.error(string.format("lr.%s: %s must be a %s (or a list of one per param group), got %s", name, key, want,
        check.typename(list[i])))
    end
  end
  return list
end

return S
