--- dle.graph.guard: the Lua state a traced function depends on, recorded during its trace and
-- checked before each replay (dle.compile's state guards).
--
--   local rec = guard.recorder(fn, {compiled = map})   -- walks fn's reachable state
--   rec:install()  ... trace fn ...  rec:uninstall()   -- around the trace (uninstall always)
--   local g, why = rec:finish()         -- nil, why: this trace cannot be guarded (run eagerly)
--   local changed = g:check()           -- nil when the state is as traced, else what changed
--
-- What is recorded. A replay repeats the ops; every Lua value the trace read is baked in. So,
-- starting from fn (a function: its upvalues; a table, e.g. a Module: its fields), the recorder
-- walks what fn can reach and snapshots it:
--   * each upvalue of each Lua closure reached (recursively through the closures in upvalues and
--     fields: a local helper fn calls), shared upvalues once (debug.upvalueid);
--   * each table reached (upvalues, fields, metatables; Modules and their submodules, option
--     tables, user classes): all its fields and its metatable;
--   * globals: the _ENV upvalue of each closure reached is swapped, during the trace only, for a
--     proxy that records each global read (name and value; the value is then walked too) and
--     notes writes. Functions found later (a global helper from another chunk) are walked when
--     read, so their globals are recorded too.
-- Values are compared as the trace saw them: numbers (integer vs float too), strings, booleans and
-- nil by value; tables, functions, tensors and other userdata by identity. A tensor reached this
-- way is a leaf of the graph holding that very tensor, so a replay uses its current values, and
-- an upvalue or field re-assigned to another tensor fails the guard (retrace). Checking costs one
-- comparison per value recorded plus a count of each table's fields (new keys), as generated
-- straight-line code (dle.graph.guard_code).
--
-- Not walked (read at replay by the graph's own nodes, dle.graph.train): the tables and fields
-- registered with M.runtime (an optimizer's state, its param groups' lr).
-- Not walked (treated as fixed): dle's own tables and the upvalues of dle's own functions (the
-- modules under dle, whose state enters compile's guard through grad mode and autocast), except
-- user functions such a closure holds (a wrapper around a callback: those are walked); the
-- standard library tables; C functions; _G reached other than as _ENV; a dle.nn.Module's
-- bookkeeping tables (_params, _order, _seen, _buffers: they change only with the module's own
-- fields, which are compared). Impure standard functions (math.random, os.time, os.clock,
-- os.date, io.read) are swapped, during the trace, for wrappers that note the call: their
-- results would be baked in, so such a trace runs eagerly.
--
-- Why snapshots of whole tables rather than read-tracking proxies on them: a proxy changes a
-- table's identity (module == other, weak keys, self inside methods) or, if the table is emptied
-- into a shadow to keep its identity, hides its fields from raw access (rawget, next, and C code
-- reading option tables). A snapshot changes nothing during the trace; the cost is that a change
-- to a field fn never reads retraces too (a wasted trace, never a wrong replay). Globals are the
-- exception because _ENV is only ever indexed, so its proxy is invisible.
--
-- Limits: a value fn writes before reading it is not seen as a write; bytecode stripped of debug
-- names has no _ENV upvalue by name, so its globals are not recorded.
--
-- Traces that cannot be guarded: finish() returns nil and the reason when fn assigned a global,
-- called an impure function, or reaches more than MAX_VALUES values (a guard that would not be
-- cheap). dle.compile also runs a trace eagerly when its own guard fails right after it (fn
-- changed state it reads, e.g. a counter upvalue: a replay would skip the change).
local core = require("dle.core")
local guard_code = require("dle.graph.guard_code")

local M = {}

M.MAX_VALUES = 20000

local getupvalue, upvalueid, getmetatable_raw = debug.getupvalue, debug.upvalueid, debug.getmetatable
local mtype, rawequal, next, type = math.type, rawequal, next, type

-- Values compared by identity with rawequal: == could call an __eq (a tensor's is elementwise).
-- The others compare with == (raw for them) and, for numbers, math.type.
local by_ref = {table = true, userdata = true, thread = true}

-- dle's own Lua files: "@<dir>/" of this file's parent directory
local lib_prefix = debug.getinfo(1, "S").source:match("^(@.*[/\\])graph[/\\]guard%.lua$")

local function is_library_fn(f)
  local info = debug.getinfo(f, "S")
  if info.what == "C" then return true end
  return lib_prefix ~= nil and info.source:sub(1, #lib_prefix) == lib_prefix
end

local std_libs = {"_G", "package", "string", "table", "math", "io", "os", "coroutine", "utf8", "debug"}

-- The tables of dle's modules (all tables reachable through their fields and metatables) and the
-- standard library tables; recomputed when a module is loaded.
local library, library_count
local function library_tables()
  local count = 0
  for _ in pairs(package.loaded) do count = count + 1 end
  if library and count == library_count then return library end
  local set, stack = {}, {}
  for _, name in ipairs(std_libs) do
    local t = package.loaded[name]
    if type(t) == "table" then set[t] = true end   -- marked, not walked (package.loaded holds all)
  end
  for name, t in pairs(package.loaded) do
    if type(t) == "table" and (name == "dle" or name:sub(1, 4) == "dle.") then stack[#stack + 1] = t end
  end
  while #stack > 0 do
    local t = table.remove(stack)
    if not set[t] then
      set[t] = true
      for _, v in next, t do
        if type(v) == "table" and not set[v] then stack[#stack + 1] = v end
      end
      local mt = getmetatable_raw(t)
      if mt and not set[mt] then stack[#stack + 1] = mt end
    end
  end
  library, library_count = set, count
  return set
end

-- Impure standard functions: name by function.
local impure = {}
for _, name in ipairs{"math.random", "os.time", "os.clock", "os.date", "io.read"} do
  local lib, field = name:match("^(%a+)%.(%a+)$")
  local f = _G[lib] and _G[lib][field]
  if f then impure[f] = {name = name, lib = _G[lib], field = field} end
end

local function fn_name(f)
  local info = debug.getinfo(f, "S")
  return string.format("function at %s:%d", info.short_src, info.linedefined)
end

-- ---------------------------------------------------------------- recording

-- How a value is compared: true (identity, rawequal), "integer"/"float" (== and math.type), or
-- false (==).
local function kind_of(v)
  return by_ref[type(v)] or mtype(v) or false
end

-- A dle.nn.Module's bookkeeping tables: module.lua changes them only together with a field of
-- the module itself (registering a parameter, buffer or submodule), which the guard compares.
local module_books = {_seen = true, _order = true, _params = true, _buffers = true}

-- Tables (or some of their fields) read at replay by the graph's own nodes rather than baked into
-- it: an optimizer's state and its param groups' lr (dle.graph.train's optim_step). Not recorded.
local runtime = setmetatable({}, {__mode = "k"})

--- M.runtime(t, keys) -> t: the fields keys (a set; nil: every field) of t are read at replay by
-- the graph's nodes, so a guard neither compares nor walks them.
function M.runtime(t, keys)
  runtime[t] = keys or true
  return t
end

local function is_module(mt)
  return mt ~= nil and rawget(mt, "__dle_module") == true
end

local Recorder = {}
Recorder.__index = Recorder

--- M.recorder(root, {compiled = weak map from functions made by dle.compile to their fn})
function M.recorder(root, opts)
  local r = setmetatable({
    library = library_tables(), compiled = opts and opts.compiled or {},
    seen = {}, seen_up = {}, seen_global = {}, count = 0,
    -- upvalue slots: function, index, value, kind (see kind_of), name
    uf = {}, ui = {}, uv = {}, ut = {}, un = {},
    -- tables: table, fields, field kinds, count, metatable, name
    tt = {}, tf = {}, tty = {}, tn = {}, tm = {}, tname = {},
    -- globals: env, name, value, kind
    ge = {}, gk = {}, gv = {}, gt = {},
    swaps = {}, installed = false, tensors = {},   -- tensor ids
  }, Recorder)
  r:walk(root, "fn")
  return r
end

function Recorder:over(n)
  self.count = self.count + n
  if self.count > M.MAX_VALUES and not self.too_big then
    self.too_big = string.format("fn reaches more than %d Lua values to guard", M.MAX_VALUES)
  end
  return self.too_big ~= nil
end

-- A wrapper of an impure function that notes the call.
function Recorder:impure_wrapper(f)
  self.wrappers = self.wrappers or {}
  local w = self.wrappers[f]
  if not w then
    local name = impure[f].name
    w = function(...)
      self.impure = self.impure or name
      return f(...)
    end
    self.wrappers[f] = w
  end
  return w
end

function Recorder:walk(v, name)
  local ty = type(v)
  if ty == "function" then self:walk_fn(v)
  elseif ty == "table" then self:walk_table(v, name)
  elseif ty == "userdata" and core.is_tensor(v) then self.tensors[core._tensor_id(v)] = true end
end

--- rec:unfreeze(g): forgets the traced value (attrs.value) of each 0-dim constant of g that holds
-- a tensor fn reached in Lua state: it may be written between replays, so rules such as
-- x * 1 -> x must not match the value it had when traced. (Numbers fn mixed with tensors keep
-- theirs: they are guarded by value.)
function Recorder:unfreeze(g)
  for _, n in ipairs(g:nodes()) do
    if n.op == "const" and n.attrs.value ~= nil and self.tensors[core._tensor_id(n._value)] then
      n.attrs.value = nil
    end
  end
end

function Recorder:walk_fn(f)
  if self.seen[f] or self.too_big then return end
  self.seen[f] = true
  local inner = self.compiled[f]
  if inner then return self:walk(inner, "fn") end
  -- dle's own closures: only the user functions they hold (a wrapper around a callback)
  local library_fn = is_library_fn(f)
  local i = 1
  while true do
    local name, v = getupvalue(f, i)
    if name == nil then break end
    local id = upvalueid(f, i)
    -- in dle's own closures, only user functions count: dle's state is fixed (see the header)
    local fixed = library_fn and not (type(v) == "function" and not is_library_fn(v))
    if not fixed and not self.seen_up[id] then
      self.seen_up[id] = true
      if self:over(1) then return end
      local k = #self.uf + 1
      self.uf[k], self.ui[k], self.uv[k], self.ut[k] = f, i, v, kind_of(v)
      self.un[k] = string.format("upvalue '%s' of %s", name, fn_name(f))
      if name == "_ENV" and type(v) == "table" then
        self:swap(f, i, v, self:env_proxy(v))
      elseif impure[v] then
        self:swap(f, i, v, self:impure_wrapper(v))
      else
        self:walk(v, "upvalue '" .. name .. "'")
      end
    end
    i = i + 1
  end
end

function Recorder:walk_table(t, name)
  local skip = runtime[t]
  if self.seen[t] or self.library[t] or self.too_big or skip == true then return end
  self.seen[t] = true
  local fields, types, n = {}, {}, 0
  for k, v in next, t do
    n = n + 1
    if not (skip and skip[k]) then fields[k], types[k] = v, kind_of(v) end
  end
  if self:over(n + 1) then return end
  local j = #self.tt + 1
  local mt = getmetatable_raw(t)
  self.tt[j], self.tf[j], self.tty[j], self.tn[j], self.tm[j], self.tname[j] = t, fields, types, n, mt, name
  local module = is_module(mt)
  for k, v in next, fields do
    if not (module and module_books[k]) then
      self:walk(v, type(k) == "string" and ("field '" .. k .. "'") or "a table's field")
    end
  end
  if mt then self:walk_table(mt, "a metatable") end
end

-- A stand-in for an _ENV table that records global reads and notes writes.
function Recorder:env_proxy(env)
  return setmetatable({}, {
    __index = function(_, k)
      local v = env[k]
      local seen = self.seen_global[env]
      if not seen then seen = {}; self.seen_global[env] = seen end
      if not seen[k] then
        seen[k] = true
        if not self:over(1) then
          local j = #self.ge + 1
          self.ge[j], self.gk[j], self.gv[j], self.gt[j] = env, k, v, kind_of(v)
          self:walk(v, "global '" .. tostring(k) .. "'")
        end
      end
      if impure[v] then return self:impure_wrapper(v) end
      return v
    end,
    __newindex = function(_, k, v)
      self.wrote = self.wrote or ("fn assigns the global '" .. tostring(k) .. "'")
      env[k] = v
    end,
    __pairs = function() return next, env, nil end,
    __len = function() return #env end,
  })
end

-- Swaps upvalue i of f for v during the trace (installed by install, undone by uninstall).
function Recorder:swap(f, i, old, new)
  self.swaps[#self.swaps + 1] = {f, i, old, new}
  if self.installed then debug.setupvalue(f, i, new) end
end

--- rec:install(): the global proxies and impure wrappers, for the trace.
function Recorder:install()
  self.installed = true
  for _, s in ipairs(self.swaps) do debug.setupvalue(s[1], s[2], s[4]) end
  self.patched = {}
  for f, info in pairs(impure) do
    if rawequal(rawget(info.lib, info.field), f) then
      rawset(info.lib, info.field, self:impure_wrapper(f))
      self.patched[#self.patched + 1] = {info.lib, info.field, f}
    end
  end
end

--- rec:uninstall(): puts every swapped value back.
function Recorder:uninstall()
  self.installed = false
  for k = #self.swaps, 1, -1 do
    local s = self.swaps[k]
    debug.setupvalue(s[1], s[2], s[3])
  end
  for _, p in ipairs(self.patched or {}) do rawset(p[1], p[2], p[3]) end
  self.patched = nil
end

-- ---------------------------------------------------------------- checking

local Guard = {}
Guard.__index = Guard

--- rec:finish() -> the guard of the state recorded, or nil and why the trace cannot be guarded.
function Recorder:finish()
  local why = self.wrote or (self.impure and ("fn calls " .. self.impure ..
              " (its result would be baked into the graph)")) or self.too_big
  if why then return nil, why end
  return setmetatable({count = self.count, check = guard_code.compile(self)}, Guard)
end

--- g:check() -> nil when every recorded value is as traced, else a description of the first
-- that changed: identity for tables/userdata, value (and integer/float) for the rest.
-- (A field of g: the generated function of dle.graph.guard_code.)

--- g:size() -> how many values the guard compares (upvalues, table fields, globals).
function Guard:size()
  return self.count
end

return M
