--- dle.profile and dle.flops: what running a function once costs, per op (forward, backward and
-- optimizer steps alike), like torch.profiler's key_averages() and fvcore's FLOP counter.
--
--   local prof = dle.profile(function() local loss = model(x):sum(); loss:backward() end)
--   print(prof)                  -- table: op, calls, total ms, % of time, GFLOP, GFLOP/s, MB, GB/s
--   for _, r in ipairs(prof:ops()) do print(r.op, r.calls, r.seconds, r.flops, r.bytes) end
--   local flops = dle.flops(model, x)   -- FLOPs only (and model's results after them)
--
-- The engine counts (engine/profile.c; FLOP conventions in engine/ops/flops.c, each kind's rule
-- dle_flops_<family> beside its front door in engine/ops/<family>.c): each op's self time on
-- dle.time's clock, FLOPs (2*m*n*k per product, 1 per elementwise output, 1 per reduced input,
-- documented constants per element for softmax, norms and losses, 0 for views and copies) and
-- bytes (inputs read + outputs written). Profiles nest (an inner one sees its own ops, the outer
-- one all of them); the profiler is switched off again when fn raises an error, which is then
-- re-raised. The counters are those of the calling thread.
local check = require("dle.check")

local dle = require("dle")

local M = {}
local core = dle.core

-- How many dle.profile (timed) and dle.flops (counting) calls are running, nested.
local active = {timed = 0, count = 0}

local function apply_mode()
  core._profile_mode(active.timed > 0 and "timed" or active.count > 0 and "count" or "off")
end

-- Runs fn(...) with the profiler on; returns the counters it added, its wall time and results.
local function run(fname, kind, fn, ...)
  if not check.is_callable(fn) then
    check.error(string.format("%s: expected a function to run, got %s", fname, type(fn)))
  end
  active[kind] = active[kind] + 1
  local ok, err = pcall(apply_mode)
  if not ok then
    active[kind] = active[kind] - 1
    check.error(fname .. ": " .. tostring(err))
  end
  local before = core._profile_counters()
  local t0 = core.time()
  local res = table.pack(pcall(fn, ...))
  local wall = core.time() - t0
  local after = core._profile_counters()
  active[kind] = active[kind] - 1
  apply_mode()
  if not res[1] then error(res[2], 0) end
  local added = {}
  for name, a in pairs(after) do
    local b = before[name] or {calls = 0, seconds = 0, flops = 0, bytes = 0}
    if a.calls > b.calls then
      added[#added + 1] = {op = name, calls = a.calls - b.calls, seconds = a.seconds - b.seconds,
                           flops = a.flops - b.flops, bytes = a.bytes - b.bytes}
    end
  end
  return added, wall, table.pack(table.unpack(res, 2, res.n))
end

local Profile = {}
Profile.__index = Profile

--- prof:ops() -> {{op, calls, seconds, flops, bytes}, ...}, most time first (then most FLOPs).
function Profile:ops()
  local list = {}
  for i, r in ipairs(self._ops) do
    list[i] = {op = r.op, calls = r.calls, seconds = r.seconds, flops = r.flops, bytes = r.bytes}
  end
  table.sort(list, function(a, b)
    if a.seconds ~= b.seconds then return a.seconds > b.seconds end
    if a.flops ~= b.flops then return a.flops > b.flops end
    return a.op < b.op
  end)
  return list
end

local function rate(amount, seconds)
  return seconds > 0 and string.format("%.2f", amount / seconds) or "-"
end

local function row(name, calls, seconds, share, flops, bytes)
  return string.format("%-28s %7d %10.3f %6.1f %10.4g %9s %10.4g %8s", name, calls, seconds * 1e3,
                       share, flops / 1e9, rate(flops / 1e9, seconds), bytes / 1e6,
                       rate(bytes / 1e9, seconds))
end

--- prof:table([n]) -> the n ops with the most time (all by default) as a text table, then the
-- totals and fn's wall time (which also holds the Lua work between ops).
function Profile:table(n)
  if n ~= nil and (math.type(n) ~= "integer" or n < 0) then
    check.error("profile:table: n must be a non-negative integer, got " .. tostring(n))
  end
  local ops, t = self:ops(), self.total
  local lines = {string.format("%-28s %7s %10s %6s %10s %9s %10s %8s", "op", "calls", "total ms",
                               "% time", "GFLOP", "GFLOP/s", "MB", "GB/s")}
  for i = 1, math.min(n or #ops, #ops) do
    local r = ops[i]
    lines[#lines + 1] = row(r.op, r.calls, r.seconds, t.seconds > 0 and 100 * r.seconds / t.seconds or 0,
                            r.flops, r.bytes)
  end
  if n and n < #ops then lines[#lines + 1] = string.format("... %d more ops", #ops - n) end
  lines[#lines + 1] = row("total (ops)", t.calls, t.seconds, t.seconds > 0 and 100 or 0, t.flops, t.bytes)
  lines[#lines + 1] = string.format("wall time of the function: %.3f ms (%.1f%% in ops)", t.wall * 1e3,
                                    t.wall > 0 and 100 * t.seconds / t.wall or 0)
  return table.concat(lines, "\n")
end

Profile.__tostring = function(self) return self:table() end

--- dle.profile(fn, ...) -> a profile of running fn(...) once: prof.results (fn's results,
-- packed), prof:ops(), prof.total {seconds (in ops), flops, bytes, calls, wall (fn's whole
-- time)}, prof:table(n) and tostring(prof).
function M.profile(fn, ...)
  local ops, wall, results = run("dle.profile", "timed", fn, ...)
  local total = {seconds = 0, flops = 0, bytes = 0, calls = 0, wall = wall}
  for _, r in ipairs(ops) do
    for k in pairs(total) do
      if k ~= "wall" then total[k] = total[k] + r[k] end
    end
  end
  return setmetatable({_ops = ops, total = total, results = results}, Profile)
end

--- dle.flops(fn, ...) -> the FLOPs of running fn(...) once, then fn's results. Counts only:
-- no clock is read per op.
function M.flops(fn, ...)
  local ops, _, results = run("dle.flops", "count", fn, ...)
  local flops = 0
  for _, r in ipairs(ops) do flops = flops + r.flops end
  return flops, table.unpack(results, 1, results.n)
end

return M
