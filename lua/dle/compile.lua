--- dle.compile: trace a function once per kind of call, rewrite its graph, replay it.
--
--   local step = dle.compile(function(x, y) return loss_fn(model(x), y) end)
--   local loss = step(x, y)              -- first call: traced (runs eagerly), rewritten, cached
--   loss = step(x2, y2)                  -- same shapes/dtypes: the optimized graph replays
--   loss:backward()                      -- gradients flow through the replayed ops
--   print(dle.compile_info(step))        -- {traces =, replays =, eager =, guards =}
--
--   local train = dle.compile(function(x, y)   -- a whole training step as one graph
--     opt:zero_grad(); local l = loss_fn(model(x), y); l:backward(); opt:step(); return l
--   end)                                 -- (dle.graph.train: lr and step counts read at replay)
--
-- Guards: a replay happens only when it computes what fn would. A call's guard has two parts.
-- Its arguments' kinds: for each tensor its shape, dtype, device and requires_grad; numbers,
-- strings, booleans and nil by value (they are baked into the trace); plus grad mode and autocast
-- (on, dtype). And the Lua state the trace read besides its arguments (dle.graph.guard): the
-- upvalues of fn and of the closures it reaches, the globals it read, the fields of the tables
-- it reaches (Modules with their train/eval flags, p, eps, ...; option tables), compared by value
-- for numbers, strings, booleans and nil and by identity otherwise. Tensors fn reaches that way
-- are graph leaves holding the tensor itself: a replay uses their current values, and an upvalue
-- re-assigned to another tensor fails the guard. The first call whose guard matches no cached
-- trace traces fn (returning the results of that eager run), rewrites the graph with opts.rules
-- and caches it; a later call that matches it replays it. The cache keeps opts.cache_size (8)
-- traces, dropping the least recently used.
--
-- Falling back to eager. A call with an argument of another kind (a table, a function) runs fn
-- eagerly. So does a kind of call whose trace was unsafe (fn read a tensor's value into Lua,
-- stepped an optimizer without a fused step, ...; see dle.graph), or cannot be guarded
-- (fn assigned a global or changed state it reads on two traces in a row, e.g. a counter upvalue,
-- which a replay would not do -- a change on the first trace only, such as a cache filled on the
-- first call, just traces again; called math.random or another impure function; reaches too
-- much state; see dle.graph.guard): it runs eagerly from then on, with one message on stderr when opts.debug or
-- DLE_DEBUG is set. Calls made while another trace runs (a compiled function inside
-- dle.graph.trace or another compiled function's first call) run fn's ops directly, so the outer
-- trace records them.
--
-- opts.rules: a rule, list of rules or of rule sets, applied together; default: algebra, then
-- fusion (dle.rewrite.rules), each to its fixed point; {} for none. opts.debug: print each new
-- graph before and after rewriting, the rewrite counts and why a call retraced on stderr.
local core = require("dle.core")
local check = require("dle.check")
local guard = require("dle.graph.guard")

local dle = require("dle")

local M = {}
local info_of = setmetatable({}, {__mode = "k"})
local fn_of = setmetatable({}, {__mode = "k"})   -- compiled function -> fn (guards walk into it)

local function tensor_key(t)
  return "T" .. table.concat(t:shape(), ",") .. ":" .. t:dtype() .. ":" .. t:device() ..
         (t.requires_grad and ":g" or "")
end

-- The arguments' part of a call's guard, or nil and the reason when an argument is of an
-- unsupported kind.
local function guard_of(args)
  local parts = {core.is_grad_enabled() and "grad" or "nograd",
                 core.is_autocast_enabled() and ("autocast:" .. core.get_autocast_dtype()) or "fp"}
  for i = 1, args.n do
    local a = args[i]
    local ty = type(a)
    if core.is_tensor(a) then parts[#parts + 1] = tensor_key(a)
    elseif ty == "number" then parts[#parts + 1] = (math.type(a) == "integer" and "I" or "F")
        .. string.format("%.17g", a)
    elseif ty == "string" then parts[#parts + 1] = "S" .. #a .. ":" .. a
    elseif ty == "boolean" or ty == "nil" then parts[#parts + 1] = tostring(a)
    else return nil, string.format("argument %d is a %s", i, ty) end
  end
  return table.concat(parts, "|")
end

--- dle.compile(fn, {rules = ..., debug = bool, cache_size = 8}) -> a function with fn's
-- results, computed by replaying fn's optimized graph (see the header).
function M.compile(fn, opts)
  check.callable(fn, "compile", "fn")
  if opts ~= nil and type(opts) ~= "table" then
    error("compile: options must be a table, got " .. type(opts), 2)
  end
  opts = opts or {}
  local rewrite = dle.rewrite
  -- the default runs algebra to its fixed point first, then fusion over what is left
  local stages = opts.rules == nil and {rewrite.rules.algebra, rewrite.rules.fusion}
                 or {rewrite.flatten(opts.rules)}
  local cache_size = opts.cache_size or 8
  if math.type(cache_size) ~= "integer" or cache_size < 1 then
    error("compile: cache_size must be a positive integer, got " .. tostring(cache_size), 2)
  end
  local debug = opts.debug or (tonumber(os.getenv("DLE_DEBUG") or "") or 0) >= 1
  local graph, run = dle.graph, require("dle.graph.run")
  local info = {traces = 0, replays = 0, eager = 0, guards = 0}
  -- arguments' key -> list of entries {key, guard = state guard or nil, graph or eager};
  -- every entry is also in `recent`, most recent last
  local cache = {}
  local recent = {}
  local changed_once = {}   -- keys whose trace changed the state it read, once

  local function log(s) io.stderr:write(s, "\n") end

  local function touch(e)
    for i, x in ipairs(recent) do
      if x == e then table.remove(recent, i); break end
    end
    recent[#recent + 1] = e
  end

  local function add(key, e)
    e.key = key
    local list = cache[key] or {}
    cache[key] = list
    list[#list + 1] = e
    recent[#recent + 1] = e
    if #recent > cache_size then
      local old = table.remove(recent, 1)
      local l = cache[old.key]
      for i, x in ipairs(l) do
        if x == old then table.remove(l, i); break end
      end
      if #l == 0 then cache[old.key] = nil end
    end
    info.guards = #recent
  end

  -- The cached entry whose state guard holds now, or nil and what changed since the last trace.
  local function lookup(key)
    local list = cache[key]
    if not list then return nil end
    local changed
    for i = #list, 1, -1 do
      local e = list[i]
      if not e.guard then return e end
      local c = e.guard:check()
      if not c then return e end
      changed = changed or c
    end
    return nil, changed
  end

  local function replay(e, args)
    local g = e.graph
    local tensors, k = {}, 0
    for i = 1, args.n do
      if core.is_tensor(args[i]) then k = k + 1; tensors[k] = args[i] end
    end
    info.replays = info.replays + 1
    return run.results(g, run.run_flat(g, table.unpack(tensors, 1, k)))
  end

  local function eager_from_now(key, why)
    add(key, {eager = true})
    if debug then log("[dle] compile: running eagerly for this guard: " .. why) end
  end

  -- Traces fn with its Lua state recorded; caches the rewritten graph or an eager entry.
  local function trace(key, ...)
    local rec = guard.recorder(fn, {compiled = fn_of})
    rec:install()
    local ok, g, res = pcall(graph._trace, "compile", fn, ...)
    rec:uninstall()
    if not ok then error(g, 0) end
    info.traces = info.traces + 1
    local sg, why = rec:finish()
    local changed = sg and sg:check()
    if changed and not g.unsafe and not changed_once[key] then
      -- state fn filled on its first call (a cache of positions): the next call traces again
      changed_once[key] = true
      if debug then log("[dle] compile: fn changed " .. changed .. " while traced; tracing again next call") end
      return res
    end
    if g.unsafe or not sg or changed then
      eager_from_now(key, g.unsafe or why or ("fn changes " .. changed ..
        " while it runs (a replay would not)"))
      return res
    end
    rec:unfreeze(g)
    local g2, counts = g, {}
    for _, stage in ipairs(stages) do
      local c
      g2, c = rewrite.apply(g2, stage)
      for name, k in pairs(c) do counts[name] = (counts[name] or 0) + k end
    end
    add(key, {graph = g2, guard = sg})
    if debug then
      local lines = {}
      for name, c in pairs(counts) do lines[#lines + 1] = string.format("  %s: %d", name, c) end
      table.sort(lines)
      log("[dle] compile: traced graph\n" .. g:dump() .. "[dle] compile: rewritten graph\n" ..
          g2:dump() .. "[dle] compile: rewrites\n" .. table.concat(lines, "\n"))
    end
    return res
  end

  local compiled = function(...)
    if core._trace_active() then return fn(...) end
    local args = table.pack(...)
    local key = guard_of(args)
    if not key then
      info.eager = info.eager + 1
      return fn(...)
    end
    local e, changed = lookup(key)
    if e then
      touch(e)
      if e.eager then
        info.eager = info.eager + 1
        return fn(...)
      end
      return replay(e, args)
    end
    if changed and debug then log("[dle] compile: retracing: " .. changed .. " changed") end
    local res = trace(key, ...)
    return table.unpack(res, 1, res.n)
  end
  info_of[compiled] = info
  fn_of[compiled] = fn
  return compiled
end

--- dle.compile_info(compiled) -> {traces, replays, eager, guards}: how often a function made
-- by dle.compile traced, replayed and ran eagerly, and how many guards it caches now.
function M.compile_info(compiled)
  local info = info_of[compiled]
  if not info then error("compile_info: expected a function made by dle.compile", 2) end
  local copy = {}
  for k, v in pairs(info) do copy[k] = v end
  return copy
end

return M
