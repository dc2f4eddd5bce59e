--- dle.optim.LBFGS: limited-memory BFGS, PyTorch's algorithm (after minFunc): `opt:step(closure)`
-- runs up to max_iter iterations, each taking the two-loop-recursion direction from the last
-- history_size curvature pairs and a step of lr (the first one scaled by min(1, 1 / |g|_1)), or
-- a step found by the strong-Wolfe line search (cubic interpolation, PyTorch's _strong_wolfe)
-- with line_search_fn = "strong_wolfe". The closure re-evaluates the model, calls backward and
-- returns the loss; it runs with grad enabled, the updates without. One param group only.
--   local opt = dle.optim.LBFGS(model:parameters(), {line_search_fn = "strong_wolfe"})
--   opt:step(function() opt:zero_grad(); local l = loss_fn(model(x), y); l:backward(); return l end)
-- Its params are treated as one flat vector (the params' dtype; a float16 param's gradient is
-- converted); scalars (dot products, step sizes) are Lua numbers.
local dle = require("dle")
local check = require("dle.check")
local Optimizer = require("dle.optim.optimizer")

local function check_number(name, h, key, positive)
  local v = h[key]
  if type(v) ~= "number" or v ~= v or v < 0 or (positive and v == 0) then
    check.error(string.format("%s: %s must be a number %s 0, got %s", name, key, positive and ">" or ">=",
      tostring(v)))
  end
end

local algorithm = {
  defaults = {lr = 1, max_iter = 20, max_eval = false, tolerance_grad = 1e-7, tolerance_change = 1e-9,
              history_size = 100, line_search_fn = false},
  state_tensors = {},
  check = function(h, name)
    check_number(name, h, "lr")
    for _, k in ipairs {"tolerance_grad", "tolerance_change"} do check_number(name, h, k) end
    for _, k in ipairs {"max_iter", "history_size"} do check.integer_min(h[k], name, k, 1) end
    -- false (the default) stands for PyTorch's None: max_iter * 5 // 4 evaluations, no line search
    if h.max_eval ~= false then check.integer_min(h.max_eval, name, "max_eval", 1) end
    if h.line_search_fn ~= false and h.line_search_fn ~= "strong_wolfe" then
      check.error(name .. ": line_search_fn must be \"strong_wolfe\" or false, got " .. tostring(h.line_search_fn))
    end
  end,
  update = function() error("LBFGS: updates run in step(closure)") end,
}

local LBFGS = Optimizer.extend("LBFGS", algorithm)
local base_new = LBFGS.new

--- Makes an LBFGS optimizer over params (one group) with options {lr = 1, max_iter = 20,
-- max_eval = max_iter * 5 // 4, tolerance_grad = 1e-7, tolerance_change = 1e-9,
-- history_size = 100, line_search_fn = "strong_wolfe" or false}.
LBFGS.new = function(params, opts)
  local self = base_new(params, opts)
  if #self.param_groups ~= 1 then check.error("LBFGS: takes one param group, got " .. #self.param_groups) end
  return self
end
getmetatable(LBFGS).__call = function(_, params, opts) return LBFGS.new(params, opts) end

local function dot(a, b) return dle.dot(a, b):item() end
local function abs_max(a) return a:abs():max():item() end

-- The params' gradients as one flat vector (zeros for a param without one).
local function flat_grad(params)
  local parts = {}
  local dt = params[1]:dtype()
  for i, p in ipairs(params) do
    local g = p.grad
    parts[i] = (g == nil and dle.zeros_like(p) or g):reshape(-1):to(dt)
  end
  return dle.cat(parts, 1)
end

-- params += step * d (d flat).
local function add_step(params, step, d)
  local offset = 0
  for _, p in ipairs(params) do
    local n = p:numel()
    p:add_((d:narrow(1, offset + 1, n) * step):view(p:shape()):to(p:dtype()))
    offset = offset + n
  end
end

local function loss_number(loss, what)
  if dle.is_tensor(loss) then return loss:item() end
  if type(loss) == "number" then return loss end
  check.error("LBFGS:step: the closure must return the loss (a tensor or number), got " .. check.typename(loss)
    .. what)
end

-- The minimizer of the cubic interpolating (x1, f1, g1), (x2, f2, g2), within bounds.
local function cubic_interpolate(x1, f1, g1, x2, f2, g2, lo, hi)
  if lo == nil then lo, hi = math.min(x1, x2), math.max(x1, x2) end
  local d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
  local d2_square = d1 * d1 - g1 * g2
  if d2_square >= 0 then
    local d2 = math.sqrt(d2_square)
    local min_pos
    if x1 <= x2 then
      min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else
      min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    end
    return math.min(math.max(min_pos, lo), hi)
  end
  return (lo + hi) / 2
end

-- PyTorch's _strong_wolfe: a step t along d satisfying the strong Wolfe conditions, found by
-- bracketing then zooming. obj(t) evaluates loss and flat gradient at x + t d (params restored
-- afterwards). Returns f_new, g_new, t, evaluations.
local function strong_wolfe(obj, t, d, f, g, gtd, tolerance_change)
  local c1, c2, max_ls = 1e-4, 0.9, 25
  local d_norm = abs_max(d)
  local f_new, g_new = obj(t)
  local evals = 1
  local gtd_new = dot(g_new, d)
  local t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
  local done, ls_iter = false, 0
  local bracket, bf, bg, bgtd
  while ls_iter < max_ls do
    if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev) then
      bracket, bf, bg, bgtd = {t_prev, t}, {f_prev, f_new}, {g_prev, g_new}, {gtd_prev, gtd_new}
      break
    end
    if math.abs(gtd_new) <= -c2 * gtd then
      bracket, bf, bg, bgtd = {t}, {f_new}, {g_new}, {gtd_new}
      done = true
      break
    end
    if gtd_new >= 0 then
      bracket, bf, bg, bgtd = {t_prev, t}, {f_prev, f_new}, {g_prev, g_new}, {gtd_prev, gtd_new}
      break
    end
    local min_step, max_step = t + 0.01 * (t - t_prev), t * 10
    local tmp = t
    t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, min_step, max_step)
    t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new, gtd_new
    f_new, g_new = obj(t)
    evals = evals + 1
    gtd_new = dot(g_new, d)
    ls_iter = ls_iter + 1
  end
  if ls_iter == max_ls then bracket, bf, bg = {0, t}, {f, f_new}, {g, g_new} end
  -- zoom: shrink the bracket until the conditions hold (or it is too small)
  local insuf_progress = false
  local low, high = 1, 2
  if bf[1] > bf[#bf] then low, high = 2, 1 end
  while not done and ls_iter < max_ls do
    if math.abs(bracket[2] - bracket[1]) * d_norm < tolerance_change then break end
    t = cubic_interpolate(bracket[1], bf[1], bgtd[1], bracket[2], bf[2], bgtd[2])
    local bmax, bmin = math.max(bracket[1], bracket[2]), math.min(bracket[1], bracket[2])
    local eps = 0.1 * (bmax - bmin)
    if math.min(bmax - t, t - bmin) < eps then
      -- too close to a bracket end: move away from it unless the last step progressed
      if insuf_progress or t >= bmax or t <= bmin then
        if math.abs(t - bmax) < math.abs(t - bmin) then t = bmax - eps else t = bmin + eps end
        insuf_progress = false
      else
        insuf_progress = true
      end
    else
      insuf_progress = false
    end
    f_new, g_new = obj(t)
    evals = evals + 1
    gtd_new = dot(g_new, d)
    ls_iter = ls_iter + 1
    if f_new > f + c1 * t * gtd or f_new >= bf[low] then
      bracket[high], bf[high], bg[high], bgtd[high] = t, f_new, g_new, gtd_new
      if bf[1] <= bf[2] then low, high = 1, 2 else low, high = 2, 1 end
    else
      if math.abs(gtd_new) <= -c2 * gtd then
        done = true
      elseif gtd_new * (bracket[high] - bracket[low]) >= 0 then
        bracket[high], bf[high], bg[high], bgtd[high] = bracket[low], bf[low], bg[low], bgtd[low]
      end
      bracket[low], bf[low], bg[low], bgtd[low] = t, f_new, g_new, gtd_new
    end
  end
  return bf[low], bg[low], bracket[low], evals
end

--- Runs up to max_iter L-BFGS iterations (PyTorch's step): closure() is called with grad
-- enabled, once per iteration and per line-search evaluation, and must return the loss.
-- @param closure function re-evaluating the model: zero_grad, loss, backward, return the loss
-- @return the closure's first loss
function LBFGS:step(closure)
  check.callable(closure, "LBFGS:step", "closure")
  local group = self.param_groups[1]
  local params = group.params
  local lr, max_iter = group.lr, group.max_iter
  local max_eval = group.max_eval ~= false and group.max_eval or max_iter * 5 // 4
  local tol_grad, tol_change = group.tolerance_grad, group.tolerance_change
  local history_size = group.history_size
  local state = self.state[1] or {func_evals = 0, n_iter = 0}
  self.state[1] = state
  local function evaluate()
    return loss_number(dle.enable_grad(closure), "")
  end

  local orig_loss = dle.enable_grad(closure)
  local loss = loss_number(orig_loss, "")
  local current_evals = 1
  state.func_evals = state.func_evals + 1
  local g = dle.no_grad(function() return flat_grad(params) end)
  if abs_max(g) <= tol_grad then return orig_loss end

  local d, t = state.d, state.t
  local old_dirs, old_stps, ro, H_diag = state.old_dirs, state.old_stps, state.ro, state.H_diag
  local prev_g, prev_loss = state.prev_flat_grad, state.prev_loss
  dle.no_grad(function()
    local n_iter = 0
    while n_iter < max_iter do
      n_iter = n_iter + 1
      state.n_iter = state.n_iter + 1
      if state.n_iter == 1 then
        d = -g
        old_dirs, old_stps, ro, H_diag = {}, {}, {}, 1
      else
        -- the newest curvature pair (y, s), kept when y . s is positive enough
        local y, s = g - prev_g, d * t
        local ys = dot(y, s)
        if ys > 1e-10 then
          if #old_dirs == history_size then
            table.remove(old_dirs, 1); table.remove(old_stps, 1); table.remove(ro, 1)
          end
          old_dirs[#old_dirs + 1], old_stps[#old_stps + 1], ro[#ro + 1] = y, s, 1 / ys
          H_diag = ys / dot(y, y)
        end
        -- two-loop recursion: d = -H g with the inverse-Hessian approximation H
        local al = {}
        local q = -g
        for i = #old_dirs, 1, -1 do
          al[i] = dot(old_stps[i], q) * ro[i]
          q = q - old_dirs[i] * al[i]
        end
        local r = q * H_diag
        for i = 1, #old_dirs do
          local be_i = dot(old_dirs[i], r) * ro[i]
          r = r + old_stps[i] * (al[i] - be_i)
        end
        d = r
      end
      prev_g = g:clone()
      prev_loss = loss
      if state.n_iter == 1 then
        t = math.min(1, 1 / g:abs():sum():item()) * lr
      else
        t = lr
      end
      local gtd = dot(g, d)
      if gtd > -tol_change then break end

      local ls_evals = 0
      local opt_cond = false
      if group.line_search_fn == "strong_wolfe" then
        local x_init = {}
        for i, p in ipairs(params) do x_init[i] = p:clone() end
        local function obj(step)
          add_step(params, step, d)
          local f = evaluate()
          local fg = flat_grad(params)
          for i, p in ipairs(params) do p:copy_(x_init[i]) end
          return f, fg
        end
        loss, g, t, ls_evals = strong_wolfe(obj, t, d, loss, g, gtd, tol_change)
        add_step(params, t, d)
        opt_cond = abs_max(g) <= tol_grad
      else
        add_step(params, t, d)
        if n_iter ~= max_iter then
          loss = evaluate()
          g = flat_grad(params)
          opt_cond = abs_max(g) <= tol_grad
          ls_evals = 1
        end
      end
      current_evals = current_evals + ls_evals
      state.func_evals = state.func_evals + ls_evals
      if n_iter == max_iter or current_evals >= max_eval or opt_cond then break end
      if abs_max(d) * math.abs(t) <= tol_change then break end
      if math.abs(loss - prev_loss) < tol_change then break end
    end
  end)
  state.d, state.t, state.old_dirs, state.old_stps, state.ro, state.H_diag = d, t, old_dirs, old_stps, ro, H_diag
  state.prev_flat_grad, state.prev_loss = prev_g, prev_loss
  return orig_loss
end

-- A deep copy of LBFGS state: tensors cloned, lists of tensors copied element by element.
local function copy_state(v)
  if dle.is_tensor(v) then return v:clone() end
  if type(v) ~= "table" then return v end
  local r = {}
  for k, x in pairs(v) do r[k] = copy_state(x) end
  return r
end

--- The optimizer's state (its history of curvature pairs included, copied) and param group.
-- @return table {state = {[1] = ...}, param_groups = {...}}
function LBFGS:state_dict()
  return {state = copy_state(self.state), param_groups = Optimizer.indexed_groups(self.param_groups)}
end

--- Restores a state_dict() of an LBFGS optimizer over params of as many elements.
-- @param sd table from state_dict()
function LBFGS:load_state_dict(sd)
  if type(sd) ~= "table" or type(sd.state) ~= "table" or type(sd.param_groups) ~= "table"
      or type(sd.param_groups[1]) ~= "table" then
    check.error("LBFGS: load_state_dict expects a table with state and param_groups")
  end
  local st = sd.state[1]
  local n = 0
  for _, p in ipairs(self.param_groups[1].params) do n = n + p:numel() end
  if st ~= nil and st.d ~= nil and (not dle.is_tensor(st.d) or st.d:numel() ~= n) then
    check.error(string.format("LBFGS: load_state_dict: the state is for %s elements, the params have %d",
      dle.is_tensor(st.d) and tostring(st.d:numel()) or "?", n))
  end
  local group = self.param_groups[1]
  for k, v in pairs(sd.param_groups[1]) do
    if k ~= "params" then group[k] = Optimizer.copy_value(v) end
  end
  LBFGS.check(group)
  rawset(self, "state", copy_state(sd.state))
end

return LBFGS
