--- dle.control.flat: the flat forms of dle.cond, dle.while_loop and dle.scan (lists of tensors in,
-- lists out), which the public functions (dle.control) wrap and dle.graph.control's replays call:
-- each records a graph node when a Lua-level trace runs, else runs eagerly.
local core = require("dle.core")
local check = require("dle.check")

local impl = {}

local function gctl() return require("dle.graph.control") end

-- The Lua-level trace recording now, or nil. An engine trace without one (not dle.graph's)
-- records the ops run below flat: it is told its replay would bake the branch in.
local function tracing(fname)
  if not core._trace_active() then return nil end
  local ctx = gctl().running()
  if not ctx then core._trace_note(fname .. ": control flow outside dle.graph.trace is not part of the graph") end
  return ctx
end

local function sig(t) return check.shape_str(t) .. " " .. t:dtype() end
impl.sig = sig

--- impl.truth(p, fname, what) -> the boolean a pred stands for (a boolean, or a 0-d tensor:
-- true when nonzero).
function impl.truth(p, fname, what)
  if type(p) == "boolean" then return p end
  if not core.is_tensor(p) then
    check.error(string.format("%s: %s must be a boolean or a 0-d tensor, got %s", fname, what, check.typename(p)))
  end
  if p:dim() ~= 0 then
    check.error(string.format("%s: %s must be a boolean or a 0-d tensor, got a tensor of shape %s",
                              fname, what, check.shape_str(p)))
  end
  local v = p:item()
  return v == true or (type(v) == "number" and v ~= 0)
end

--- impl.tensors(res, fname, who) -> res (packed results of who) as a list, after checking that
-- each is a tensor and that there is at least one.
function impl.tensors(res, fname, who)
  if res.n == 0 then check.error(string.format("%s: %s must return at least one tensor, got nothing", fname, who)) end
  local list = {}
  for k = 1, res.n do
    if not core.is_tensor(res[k]) then
      check.error(string.format("%s: %s must return tensors, got a %s as result %d", fname, who,
                                check.typename(res[k]), k))
    end
    list[k] = res[k]
  end
  return list
end

--- impl.same_as(list, want, fname, who, what) -> list, after checking that it holds #want tensors
-- with want's shapes and dtypes (what names want: "init", "the carry").
function impl.same_as(list, want, fname, who, what)
  if #list ~= #want then
    check.error(string.format("%s: %s returns %d tensors, %s has %d", fname, who, #list, what, #want))
  end
  for k, t in ipairs(list) do
    if not core.is_tensor(t) then
      check.error(string.format("%s: %s must return tensors, got a %s as result %d", fname, who, check.typename(t), k))
    end
    local s, w = t:shape(), want[k]:shape()
    local same = #s == #w and t:dtype() == want[k]:dtype()
    for d = 1, #w do same = same and s[d] == w[d] end
    if not same then
      check.error(string.format("%s: %s returns %s as result %d, %s[%d] is %s (it must keep its shape and dtype)",
                                fname, who, sig(t), k, what, k, sig(want[k])))
    end
  end
  return list
end

-- ---------------------------------------------------------------- flat forms

--- impl.cond(pred, true_fn, false_fn, args) -> the list of tensors the branch taken returns.
function impl.cond(pred, tf, ff, args)
  local ctx = core.is_tensor(pred) and tracing("cond")
  if ctx then return gctl().cond(ctx, pred, tf, ff, args) end
  local take = impl.truth(pred, "cond", "pred")
  return impl.tensors(table.pack((take and tf or ff)(table.unpack(args, 1, args.n))), "cond",
                      take and "true_fn" or "false_fn")
end

-- The backward rule of a while_loop's results: an error naming it.
local function not_differentiable()
  error("while_loop: is not differentiable (forward only): a gradient reached one of its results; "
        .. "use dle.scan for a loop with a fixed number of steps", 0)
end

-- impl[name](...): under a trace the graph side records the loop (gctl()[name]), else
-- impl[eager](...) runs it.
local function traced_or_eager(name, eager)
  return function(...)
    local ctx = tracing(name)
    if ctx then return gctl()[name](ctx, ...) end
    return impl[eager](...)
  end
end

--- impl.while_loop(cond_fn, body_fn, init) -> the list of the loop's final tensors.
impl.while_loop = traced_or_eager("while_loop", "while_eager")

--- impl.while_eager(cond_fn, body_fn, init): the loop itself (also a trace's eager run).
function impl.while_eager(cf, bf, init)
  local vals = table.move(init, 1, #init, 1, {})
  while impl.truth(cf(table.unpack(vals, 1, #init)), "while_loop", "cond_fn's result") do
    vals = impl.same_as(table.pack(bf(table.unpack(vals, 1, #init))), init, "while_loop", "body_fn", "init")
  end
  -- results that require grad become detached copies whose backward raises the error
  for k, o in ipairs(vals) do
    if o.requires_grad then
      local d = o:detach()
      core._record_custom("while_loop", {d}, {o}, not_differentiable)
      vals[k] = d
    end
  end
  return vals
end

--- impl.scan(step, carries, xs) -> the final carries then the stacked ys, one list; step takes
-- the carries then one slice of each xs and returns the carries then the ys.
impl.scan = traced_or_eager("scan", "scan_eager")

--- impl.scan_eager(step, carries, xs): the loop itself (also a trace's eager run).
function impl.scan_eager(step, carries, xs)
  local dle = require("dle")
  local nc, nx = #carries, #xs
  local cur = table.move(carries, 1, nc, 1, {})
  local ys, ny = {}, nil
  for i = 1, xs[1]:size(1) do
    local a = table.move(cur, 1, nc, 1, {})
    for j = 1, nx do a[nc + j] = xs[j]:select(1, i) end
    local r = table.pack(step(table.unpack(a, 1, nc + nx)))
    if r.n < nc then check.error(string.format("scan: fn returns %d carry tensors, init has %d", r.n, nc)) end
    impl.same_as(table.move(r, 1, nc, 1, {}), carries, "scan", "fn's carry", "init")
    cur = table.move(r, 1, nc, 1, {})
    ny = ny or r.n - nc
    for k = 1, ny do
      local y = r[nc + k]
      if not core.is_tensor(y) then
        check.error(string.format("scan: fn's y must be tensors, got a %s as y %d at step %d", check.typename(y), k, i))
      end
      ys[k] = ys[k] or {}
      ys[k][i] = y
    end
  end
  local out = cur
  for k = 1, ny or 0 do out[nc + k] = check.call("scan", dle.stack, ys[k], 1) end
  return out
end

return impl
