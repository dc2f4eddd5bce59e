--- dle.amp: loss scaling for float16 training, PyTorch's GradScaler. (dle.autocast itself is
-- native: bindings/lua_autograd.c, engine/autocast.c.)
--
-- float16 has 5 exponent bits: gradients below ~6e-8 flush to zero in a float16 backward. The
-- scaler multiplies the loss by a large factor (2^16 to start) so the backward runs on scaled
-- values, then divides the optimizer's gradients by it before the step. A step whose gradients
-- hold an inf or NaN (the scale was too large) is skipped and the scale backed off; after
-- growth_interval clean steps in a row it grows again. bfloat16 has float32's range and needs no
-- scaler.
--
--   local scaler = dle.amp.GradScaler()
--   local loss = dle.autocast("float16", function() return loss_fn(model(x), y) end)
--   opt:zero_grad()
--   scaler:scale(loss):backward()
--   scaler:step(opt)      -- unscales .grad, then opt:step() unless an inf/NaN was found
--   scaler:update()       -- backs off or grows the scale
--
-- The state is plain numbers (state_dict), storable with dle.save. A disabled scaler
-- ({enabled = false}) passes everything through, so one training loop serves both precisions.
local dle = require("dle")
local check = require("dle.check")

local amp = {}

local GradScaler = {}
GradScaler.__index = GradScaler
GradScaler.__name = "dle.amp.GradScaler"

-- Where an optimizer is in the current step (PyTorch's OptState); absent = ready.
local UNSCALED, STEPPED = 1, 2

local function finite(v) return v == v and v ~= math.huge and v ~= -math.huge end
-- The largest float32: the loss is multiplied by the scale in float32 (as PyTorch keeps it).
local FLOAT32_MAX = 0x1.fffffep127
local function positive(v) return v > 0 and finite(v) end
local function above_one(v) return v > 1 and finite(v) end
local function below_one(v) return v > 0 and v < 1 end

local OPTIONS = {"init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"}

-- self must be a GradScaler: scaler.step(opt) (a dot for the colon) is named, not a nil index.
local function check_self(self, method)
  if getmetatable(self) ~= GradScaler then
    check.error(string.format("GradScaler:%s: call it as a method (scaler:%s(...)), got %s as self",
      method, method, check.typename(self)))
  end
end

-- opt must look like a dle.optim optimizer: param_groups, and a step method where needed.
local function check_optimizer(opt, method, needs_step)
  local ok = type(opt) == "table" and type(opt.param_groups) == "table"
  if ok and needs_step then ok = check.is_callable(opt.step) end
  if not ok then
    check.error(string.format("GradScaler:%s: optimizer must be a dle.optim optimizer (with param_groups%s), "
      .. "got %s", method, needs_step and " and step" or "", check.typename(opt)))
  end
end

--- dle.amp.GradScaler{init_scale = 2^16, growth_factor = 2, backoff_factor = 0.5,
-- growth_interval = 2000, enabled = true}: a loss scaler (see the top of this file).
-- @param opts optional options table; every key is optional
-- @return the scaler
setmetatable(GradScaler, {__call = function(_, opts)
  opts = check.options(opts, "GradScaler", OPTIONS)
  local self = setmetatable({}, GradScaler)
  self._scale = check.number_that(opts.init_scale or 2.0 ^ 16, "GradScaler", "init_scale",
    "a finite number > 0", positive)
  self._growth_factor = check.number_that(opts.growth_factor or 2.0, "GradScaler", "growth_factor",
    "a finite number > 1", above_one)
  self._backoff_factor = check.number_that(opts.backoff_factor or 0.5, "GradScaler", "backoff_factor",
    "a number in (0, 1)", below_one)
  self._growth_interval = check.integer_min(opts.growth_interval or 2000, "GradScaler",
    "growth_interval", 1)
  if opts.enabled == nil then self._enabled = true
  else self._enabled = check.boolean(opts.enabled, "GradScaler", "enabled") end
  self._growth_tracker = 0      -- clean steps in a row since the last growth or backoff
  -- per optimizer since the last update: its stage and whether its gradients held an inf/NaN
  -- (weak keys: a scaler does not keep optimizers alive)
  self._stage = setmetatable({}, {__mode = "k"})
  self._found_inf = setmetatable({}, {__mode = "k"})
  return self
end})
amp.GradScaler = GradScaler

-- The first value in v (a tensor or a nested table of them) that is not a tensor or a table, and
-- its path ("outputs[2]"); nil when there is none.
local function non_tensor(v, path)
  if dle.is_tensor(v) then return nil end
  if type(v) ~= "table" then return path, v end
  for k, x in pairs(v) do
    local bad, value = non_tensor(x, path .. "[" .. tostring(k) .. "]")
    if bad then return bad, value end
  end
  return nil
end

-- v with every tensor multiplied by s, in the same structure.
local function scaled(v, s)
  if dle.is_tensor(v) then return v * s end
  local r = {}
  for k, x in pairs(v) do r[k] = scaled(x, s) end
  return r
end

--- scaler:scale(outputs) -> outputs times the scale (backward on it gives scaled gradients).
-- @param outputs a tensor (the loss) or a table (nested or not) of tensors, scaled alike
-- @return the same structure, scaled; outputs themselves when the scaler is disabled
function GradScaler:scale(outputs)
  check_self(self, "scale")
  local bad, value = non_tensor(outputs, "outputs")
  if bad then
    check.error(string.format("GradScaler:scale: %s must be a tensor or a table of tensors, got %s", bad,
      check.typename(value)))
  end
  if not self._enabled then return outputs end
  return scaled(outputs, self._scale)
end

-- Divides the gradients of opt's params by the scale in place (no recording); returns whether
-- any holds an inf or NaN (nil when no param has a gradient), or nil and an error message.
local function unscale_grads(opt, inv)
  local found, msg
  dle.no_grad(function()
    local index = 0
    for _, group in ipairs(opt.param_groups) do
      for _, p in ipairs(group.params or {}) do
        index = index + 1
        local g = dle.is_tensor(p) and p.grad or nil
        if g ~= nil then
          -- as PyTorch: float16 gradients would lose what the scale protected when divided
          if g:dtype() == "float16" then
            msg = string.format("the gradient of param %d is float16; unscaling float16 gradients "
              .. "is not supported (keep the parameters in float32 under dle.autocast)", index)
            return
          end
          if g:is_contiguous() then g:mul_(inv) else g = g * inv; p.grad = g end
          -- checked after the division: an inv > 1 (a scale backed off below 1) can overflow too
          local m = g:numel() > 0 and g:abs():amax():item() or 0
          found = found or (m ~= m or m == math.huge)
        end
      end
    end
  end)
  return found, msg
end

--- scaler:unscale_(optimizer): divides the gradients of optimizer's params by the scale, in
-- place, and records whether any holds an inf or NaN (step then skips). At most once per
-- optimizer between two update() calls, and before step() (as PyTorch); call it to clip or
-- inspect true gradients before scaler:step(optimizer).
-- @param optimizer a dle.optim optimizer
function GradScaler:unscale_(optimizer)
  check_self(self, "unscale_")
  check_optimizer(optimizer, "unscale_", false)
  if not self._enabled then return end
  local stage = self._stage[optimizer]
  if stage == UNSCALED then
    check.error("GradScaler:unscale_: unscale_() has already been called on this optimizer since the "
      .. "last update()")
  elseif stage == STEPPED then
    check.error("GradScaler:unscale_: unscale_() is being called after step()")
  end
  local found, msg = unscale_grads(optimizer, 1 / self._scale)
  if msg then check.error("GradScaler:unscale_: " .. msg) end
  self._found_inf[optimizer] = found
  self._stage[optimizer] = UNSCALED
end

--- scaler:step(optimizer, ...) -> what optimizer:step(...) returned, or nil when skipped.
-- Unscales the gradients first unless unscale_ did; skips the step when they hold an inf or NaN.
-- A closure is refused while enabled (as PyTorch: it would run backward on an unscaled loss).
-- @param optimizer a dle.optim optimizer
function GradScaler:step(optimizer, ...)
  check_self(self, "step")
  check_optimizer(optimizer, "step", true)
  if not self._enabled then return optimizer:step(...) end
  if select("#", ...) > 0 and type((...)) == "function" then
    check.error("GradScaler:step: a closure is not supported while the scaler is enabled")
  end
  if self._stage[optimizer] == STEPPED then
    check.error("GradScaler:step: step() has already been called since the last update()")
  end
  if self._stage[optimizer] ~= UNSCALED then
    local found, msg = unscale_grads(optimizer, 1 / self._scale)
    if msg then check.error("GradScaler:step: " .. msg) end
    self._found_inf[optimizer] = found
  end
  local found = self._found_inf[optimizer]
  if found == nil then
    check.error("GradScaler:step: no inf checks were recorded for this optimizer: none of its params "
      .. "has a gradient (call backward on the scaled loss first)")
  end
  self._stage[optimizer] = STEPPED
  if found then return nil end
  return optimizer:step(...)
end

--- scaler:update([new_scale]): ends the step. Without new_scale: the scale is multiplied by
-- backoff_factor if any optimizer's gradients held an inf or NaN this step, else by
-- growth_factor after growth_interval clean steps in a row (unless that overflows float32). new_scale
-- (a finite number > 0 or a one-element tensor) sets it instead.
function GradScaler:update(new_scale)
  check_self(self, "update")
  if not self._enabled then return end
  if new_scale ~= nil then
    if dle.is_tensor(new_scale) then
      if new_scale:numel() ~= 1 then
        check.error("GradScaler:update: new_scale must hold one element, got shape "
          .. check.shape_str(new_scale))
      end
      new_scale = new_scale:item()
    end
    self._scale = check.number_that(new_scale, "GradScaler:update", "new_scale",
      "a finite number > 0 or a one-element tensor", positive)
  else
    local any, found = false, false
    for _, f in pairs(self._found_inf) do
      any = true
      found = found or f
    end
    if not any then
      check.error("GradScaler:update: no inf checks were recorded prior to update (call step or unscale_ "
        .. "after backward on the scaled loss)")
    end
    if found then
      self._scale = self._scale * self._backoff_factor
      self._growth_tracker = 0
    else
      self._growth_tracker = self._growth_tracker + 1
      if self._growth_tracker == self._growth_interval then
        local grown = self._scale * self._growth_factor
        if grown <= FLOAT32_MAX then self._scale = grown end
        self._growth_tracker = 0
      end
    end
  end
  self._stage = setmetatable({}, {__mode = "k"})
  self._found_inf = setmetatable({}, {__mode = "k"})
end

--- scaler:get_scale() -> the current scale (1.0 when disabled).
function GradScaler:get_scale()
  check_self(self, "get_scale")
  return self._enabled and self._scale or 1.0
end

--- scaler:is_enabled() -> boolean
function GradScaler:is_enabled()
  check_self(self, "is_enabled")
  return self._enabled
end

function GradScaler:get_growth_factor() check_self(self, "get_growth_factor"); return self._growth_factor end
function GradScaler:get_backoff_factor() check_self(self, "get_backoff_factor"); return self._backoff_factor end
function GradScaler:get_growth_interval() check_self(self, "get_growth_interval"); return self._growth_interval end

--- scaler:set_growth_factor(v): v a finite number > 1.
function GradScaler:set_growth_factor(v)
  check_self(self, "set_growth_factor")
  self._growth_factor = check.number_that(v, "GradScaler:set_growth_factor", "growth_factor",
    "a finite number > 1", above_one)
end

--- scaler:set_backoff_factor(v): v in (0, 1).
function GradScaler:set_backoff_factor(v)
  check_self(self, "set_backoff_factor")
  self._backoff_factor = check.number_that(v, "GradScaler:set_backoff_factor", "backoff_factor",
    "a number in (0, 1)", below_one)
end

--- scaler:set_growth_interval(n): n an integer >= 1.
function GradScaler:set_growth_interval(n)
  check_self(self, "set_growth_interval")
  self._growth_interval = check.integer_min(n, "GradScaler:set_growth_interval", "growth_interval", 1)
end

--- scaler:state_dict() -> {scale, growth_factor, backoff_factor, growth_interval,
-- _growth_tracker} (PyTorch's keys; plain numbers, storable with dle.save); {} when disabled.
function GradScaler:state_dict()
  check_self(self, "state_dict")
  if not self._enabled then return {} end
  return {scale = self._scale, growth_factor = self._growth_factor,
          backoff_factor = self._backoff_factor, growth_interval = self._growth_interval,
          _growth_tracker = self._growth_tracker}
end

--- scaler:load_state_dict(sd) restores a state_dict() (nothing happens when disabled). The
-- values are checked as the constructor checks them; the current step's records are kept.
function GradScaler:load_state_dict(sd)
  check_self(self, "load_state_dict")
  check.table(sd, "GradScaler:load_state_dict", "state_dict")
  if not self._enabled then return end
  if next(sd) == nil then
    check.error("GradScaler:load_state_dict: the state dict is empty, possibly because it was saved from "
      .. "a disabled GradScaler")
  end
  local fn = "GradScaler:load_state_dict"
  local scale = check.number_that(sd.scale, fn, "scale", "a finite number > 0", positive)
  local growth = check.number_that(sd.growth_factor, fn, "growth_factor", "a finite number > 1", above_one)
  local backoff = check.number_that(sd.backoff_factor, fn, "backoff_factor", "a number in (0, 1)", below_one)
  local interval = check.integer_min(sd.growth_interval, fn, "growth_interval", 1)
  local tracker = check.integer_min(sd._growth_tracker, fn, "_growth_tracker", 0)
  self._scale, self._growth_factor, self._backoff_factor = scale, growth, backoff
  self._growth_interval, self._growth_tracker = interval, tracker
end

function GradScaler:__tostring()
  if not self._enabled then return "dle.amp.GradScaler(enabled=false)" end
  return string.format("dle.amp.GradScaler(scale=%g, growth_factor=%g, backoff_factor=%g, "
    .. "growth_interval=%d)", self._scale, self._growth_factor, self._backoff_factor,
    self._growth_interval)
end

check.export(GradScaler)
check.export(amp)
return amp
