--- dle.cond, dle.while_loop, dle.scan: control flow that dle.graph.trace and dle.compile record as
-- one graph node each, with the functions as subgraphs (no graph break; dle.graph.control).
--
--   local y = dle.cond(x:sum():gt(0), function(a) return a * 2 end, function(a) return -a end, x)
--   local n, s = table.unpack(dle.while_loop(function(i, s) return i:lt(10) end,
--                                            function(i, s) return i + 1, s * 2 end, {i0, s0}))
--   local h, ys = dle.scan(function(h, x) h = (h + x):tanh(); return h, h * 2 end, h0, xs)
--
-- Eagerly they are Lua control flow: cond runs one branch (pred: a boolean or a 0-d tensor, read
-- as true when nonzero), while_loop calls body_fn while cond_fn is true, scan calls fn once per
-- slice along dim 1 of xs and stacks the ys along a new dim 1. Gradients: cond and scan record the
-- ops they run, so reverse and forward mode flow through the branch taken and through every step;
-- while_loop is forward only (API.md makes it no promise): a backward pass that reaches its
-- results raises an error naming it. Shape rules: both branches of a traced cond return as many
-- tensors, of the same shapes and dtypes (eagerly only the branch run is seen); body_fn returns
-- the loop's tensors with their shapes and dtypes; scan's carry keeps its shape and dtype.
local core = require("dle.core")
local check = require("dle.check")
local impl = require("dle.control.flat")

local M = {}

-- ---------------------------------------------------------------- public functions

local function tensor_list(v, fname, what, allow_single)
  if allow_single and core.is_tensor(v) then return {v}, true end
  if type(v) ~= "table" or getmetatable(v) ~= nil then
    check.error(string.format("%s: %s must be a %slist of tensors, got %s", fname, what,
                              allow_single and "tensor or a " or "", check.typename(v)))
  end
  if #v == 0 then check.error(string.format("%s: %s must hold at least one tensor, got an empty list", fname, what)) end
  for i = 1, #v do
    if not core.is_tensor(v[i]) then
      check.error(string.format("%s: %s[%d] must be a tensor, got %s", fname, what, i, check.typename(v[i])))
    end
  end
  return table.move(v, 1, #v, 1, {}), false
end

--- dle.cond(pred, true_fn, false_fn, ...) -> what the branch taken returns (one or more tensors).
-- pred: a boolean or a 0-d tensor (true when nonzero); the operands `...` (tensors) are passed to
-- the branch. Under dle.graph.trace / dle.compile a tensor pred records one `cond` node holding
-- both branches as subgraphs (each traced on tensors of the operands' shapes and dtypes; both
-- must return as many tensors, of the same shapes and dtypes), and a replay runs the branch the
-- pred's value at that time picks. Differentiable through the branch taken.
function M.cond(pred, true_fn, false_fn, ...)
  check.callable(true_fn, "cond", "true_fn")
  check.callable(false_fn, "cond", "false_fn")
  if type(pred) ~= "boolean" and not core.is_tensor(pred) then
    check.error("cond: pred must be a boolean or a 0-d tensor, got " .. check.typename(pred))
  end
  local args = table.pack(...)
  for i = 1, args.n do
    if not core.is_tensor(args[i]) then
      check.error(string.format("cond: operand %d must be a tensor, got %s", i, check.typename(args[i])))
    end
  end
  local r = impl.cond(pred, true_fn, false_fn, args)
  return table.unpack(r, 1, #r)
end

--- dle.while_loop(cond_fn, body_fn, init) -> the list of the loop's final tensors.
-- init: a list of tensors, passed unpacked to both functions: while cond_fn(a, b) (a boolean or a
-- 0-d tensor) is true, a, b = body_fn(a, b), which must keep their shapes and dtypes. Traced as one
-- `while_loop` node (its functions traced once each on tensors of init's shapes and dtypes; the
-- replay iterates at run time). Forward only: a backward pass reaching its results is an error.
function M.while_loop(cond_fn, body_fn, init)
  check.callable(cond_fn, "while_loop", "cond_fn")
  check.callable(body_fn, "while_loop", "body_fn")
  return impl.while_loop(cond_fn, body_fn, (tensor_list(init, "while_loop", "init")))
end

-- a tensor, a list of tensors or nil as {list, form}: "single", "list" or "none"
local function form_of(v, fname, what, want_n)
  if v == nil then return {}, "none" end
  if core.is_tensor(v) then return {v}, "single" end
  if type(v) == "table" and getmetatable(v) == nil then
    for i = 1, #v do
      if not core.is_tensor(v[i]) then
        check.error(string.format("%s: %s[%d] must be a tensor, got %s", fname, what, i, check.typename(v[i])))
      end
    end
    if want_n and #v ~= want_n then
      check.error(string.format("%s: %s holds %d tensors, init has %d", fname, what, #v, want_n))
    end
    return table.move(v, 1, #v, 1, {}), "list"
  end
  check.error(string.format("%s: %s must be a tensor or a list of tensors, got %s", fname, what, check.typename(v)))
end

--- dle.scan(fn, init, xs) -> carry, ys: for each slice x of xs along dim 1, carry, y = fn(carry, x);
-- ys stacks the ys along a new dim 1. init and xs: a tensor or a list of tensors (then fn gets and
-- returns lists; every xs has the same size along dim 1, at least 1); y: a tensor, a list of
-- tensors or nil. The carry keeps init's shapes and dtypes. Traced as one `scan` node (fn traced
-- once on tensors of the carry's and a slice's shapes); differentiable in reverse and forward mode
-- through every step.
function M.scan(fn, init, xs)
  check.callable(fn, "scan", "fn")
  local carries, single_c = tensor_list(init, "scan", "init", true)
  local xl, single_x = tensor_list(xs, "scan", "xs", true)
  for j, x in ipairs(xl) do
    local what = single_x and "xs" or string.format("xs[%d]", j)
    if x:dim() == 0 or x:size(1) == 0 then
      check.error(string.format("scan: %s must have at least one slice along dim 1, got shape %s", what,
                                check.shape_str(x)))
    end
    if x:size(1) ~= xl[1]:size(1) then
      check.error(string.format("scan: xs[%d] has %d slices along dim 1, xs[1] has %d (shapes %s and %s)", j,
                                x:size(1), xl[1]:size(1), check.shape_str(x), check.shape_str(xl[1])))
    end
  end
  local nc, nx, yform = #carries, #xl, nil
  local function step(...)
    local a = table.pack(...)
    local carry = single_c and a[1] or table.move(a, 1, nc, 1, {})
    local x = single_x and a[nc + 1] or table.move(a, nc + 1, nc + nx, 1, {})
    local c, y = fn(carry, x)
    local cl = single_c and {c} or form_of(c, "scan", "fn's carry", nc)
    if single_c and not core.is_tensor(c) then
      check.error("scan: fn must return the carry as a tensor (init is one), got " .. check.typename(c))
    end
    local yl, form = form_of(y, "scan", "fn's y")
    if yform and form ~= yform then
      check.error(string.format("scan: fn returned its y as %s at one step and %s at another", yform, form))
    end
    yform = form
    for k, t in ipairs(yl) do cl[nc + k] = t end
    return table.unpack(cl, 1, nc + #yl)
  end
  local r = impl.scan(step, carries, xl)
  local cs, ys = table.move(r, 1, nc, 1, {}), table.move(r, nc + 1, #r, 1, {})
  local carry = single_c and cs[1] or cs
  if yform == "single" then return carry, ys[1] end
  if yform == "list" then return carry, ys end
  return carry, nil
end

return M
