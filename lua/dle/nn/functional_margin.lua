--- dle.nn.functional.multi_margin_loss and multilabel_margin_loss (nn.MultiMarginLoss,
-- nn.MultiLabelMarginLoss), PyTorch's multi-class hinge losses, as compositions of dle ops (so
-- reverse and forward gradients come from those ops). Classes are 1-based (API.md). This file
-- returns them; dle.nn.functional gathers them.
local dle = require("dle")
local check = require("dle.check")
local shape_str = check.shape_str

local M = {}

local reduce = require("dle.nn.reduction")

-- input {N, C} (or {C}: one row), checked float; returns it 2-D and whether it was 1-D
local function rows_of(fname, x)
  check.tensor(x, fname, "input")
  if not x:is_floating_point() then check.error(fname .. ": input must be a float tensor, got " .. x:dtype()) end
  if x:dim() == 1 then return x:unsqueeze(1), true end
  if x:dim() ~= 2 then check.error(fname .. ": input must be {N, C} or {C}, got " .. shape_str(x)) end
  return x, false
end

local function int_tensor(fname, t, what)
  check.tensor(t, fname, what)
  if t:is_floating_point() or t:dtype() == "bool" then
    check.error(string.format("%s: %s must be an integer tensor, got %s", fname, what, t:dtype()))
  end
  return t:long()
end

-- bool {N, C}: column c is class y_n (y {N, 1} int64, 1-based)
local function class_mask(y, c) return dle.arange(1, c + 1, {dtype = "int64"}):eq(y) end

--- multi_margin_loss(input, target, opts): per row n with class y = target[n] (1-based),
-- sum over i ~= y of max(0, margin - x[y] + x[i])^p (times weight[y]), divided by C.
-- @param opts optional {p = 1 (1 or 2), margin = 1, weight = {C} tensor, reduction = "mean"}
-- @return loss tensor
function M.multi_margin_loss(input, target, opts)
  local fname = "multi_margin_loss"
  opts = check.options(opts, fname, {"p", "margin", "weight", "reduction"})
  local r = check.reduction(fname, opts.reduction)
  local p = opts.p or 1
  if p ~= 1 and p ~= 2 then check.error(fname .. ": p must be 1 or 2, got " .. tostring(p)) end
  local margin = opts.margin == nil and 1 or check.number(opts.margin, fname, "margin")
  local x, one = rows_of(fname, input)
  local y = int_tensor(fname, target, "target"):reshape(-1)
  local n, c = x:size(1), x:size(2)
  if y:numel() ~= n then
    check.error(string.format("%s: target has shape %s, expected {%d} (input %s)", fname, shape_str(target), n,
                              shape_str(input)))
  end
  if n > 0 and (y:min():item() < 1 or y:max():item() > c) then
    check.error(string.format("%s: target values must be classes in [1, %d], got [%d, %d]", fname, c,
                              y:min():item(), y:max():item()))
  end
  local y2 = y:unsqueeze(2)
  local m = (x - x:gather(2, y2) + margin):clamp(0, math.huge)
  if p == 2 then m = m * m end
  local loss = m:masked_fill(class_mask(y2, c), 0)
  if opts.weight ~= nil then
    local w = check.tensor(opts.weight, fname, "weight")
    if w:dim() ~= 1 or w:size(1) ~= c then
      check.error(string.format("%s: weight must have shape {%d}, got %s", fname, c, shape_str(w)))
    end
    loss = loss * w:index_select(1, y):unsqueeze(2)
  end
  loss = loss:sum(2) / c
  if one then loss = loss:squeeze(1) end
  return reduce(loss, r)
end

--- multilabel_margin_loss(input, target, opts): target {N, C} holds each row's classes (1-based),
-- ended by the first value < 1 (PyTorch ends them with -1 on 0-based classes); per row, the sum
-- over its target classes j and the other classes i of max(0, 1 - (x[j] - x[i])), divided by C.
-- @param opts optional {reduction = "mean"}
-- @return loss tensor
function M.multilabel_margin_loss(input, target, opts)
  local fname = "multilabel_margin_loss"
  opts = check.options(opts, fname, {"reduction"})
  local r = check.reduction(fname, opts.reduction)
  local x, one = rows_of(fname, input)
  local t = int_tensor(fname, target, "target")
  if one then t = t:unsqueeze(1) end
  if shape_str(t) ~= shape_str(x) then
    check.error(string.format("%s: target has shape %s, expected the input's %s", fname, shape_str(target),
                              shape_str(input)))
  end
  local c = x:size(2)
  if x:numel() > 0 and t:max():item() > c then
    check.error(string.format("%s: target values must be classes in [1, %d] (or < 1 to end a row), got %d",
                              fname, c, t:max():item()))
  end
  -- valid[n, k]: target k of row n comes before the row's end marker
  local valid = t:ge(1):long():cumprod(2):eq(1)
  local tc = t:clamp(1, c)
  -- is_target[n, i]: class i is one of row n's targets
  local hits = class_mask(tc:unsqueeze(3), c):logical_and(valid:unsqueeze(3))
  local is_target = hits:long():sum(2):gt(0)
  -- d[n, k, i] = max(0, 1 - x[n, t_k] + x[n, i]) over valid k and non-target i
  local d = (x:unsqueeze(2) - x:gather(2, tc):unsqueeze(3) + 1):clamp(0, math.huge)
  local keep = valid:unsqueeze(3):logical_and(is_target:logical_not():unsqueeze(2))
  local loss = d:masked_fill(keep:logical_not(), 0):sum({2, 3}) / c
  if one then loss = loss:squeeze(1) end
  return reduce(loss, r)
end

return M
