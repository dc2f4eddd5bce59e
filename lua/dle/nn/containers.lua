--- Containers: dle.nn.ModuleList (an indexable list of submodules) and dle.nn.ModuleDict (submodules
-- by string key), as PyTorch's. Entries are registered submodules, so their parameters show in
-- parameters() and state_dict() under the container's field name and the entry's key. Lists are
-- 1-based as everywhere in dle: `self.layers = nn.ModuleList{a, b}` names a's weight
-- "layers.1.weight" (PyTorch's "layers.0.weight"), as Sequential and plain lists of modules do.
local Module = require("dle.nn.module")
local check = require("dle.check")

local C = {}

local function module_arg(m, fname, what)
  if not Module.is_module(m) then
    check.error(string.format("%s: %s is not a module (%s)", fname, what, check.typename(m)))
  end
  return m
end

-- ---------------------------------------------------------------- ModuleList

C.ModuleList = Module:extend("ModuleList")
local ModuleList = C.ModuleList

--- ModuleList(modules): holds the modules of the list (nil: empty) as submodules "1", "2", ...
-- Index it (`ml[i]`), iterate it with ipairs, take its length with `#ml`. It has no forward.
function ModuleList:init(modules)
  check.table(modules, "ModuleList", "modules", true)
  for i, m in ipairs(modules or {}) do self:append(module_arg(m, "ModuleList", "element " .. i)) end
end

--- Appends module m; returns the list.
function ModuleList:append(m)
  module_arg(m, "ModuleList:append", "argument")
  self[#self + 1] = m
  return self
end

--- Appends every module of the list ms; returns the list.
function ModuleList:extend(ms)
  check.table(ms, "ModuleList:extend", "modules")
  for i, m in ipairs(ms) do module_arg(m, "ModuleList:extend", "element " .. i) end
  for _, m in ipairs(ms) do self:append(m) end
  return self
end

--- Inserts module m at position i (1 .. #list + 1), moving the later ones up; returns the list.
function ModuleList:insert(i, m)
  local n = #self
  i = check.integer(i, "ModuleList:insert", "index")
  if i < 1 or i > n + 1 then check.error(string.format("ModuleList:insert: index %d out of range 1..%d", i, n + 1)) end
  module_arg(m, "ModuleList:insert", "module")
  self:append(m)   -- registers key n + 1
  for k = n + 1, i + 1, -1 do rawset(self, k, rawget(self, k - 1)) end
  rawset(self, i, m)
  return self
end

--- Number of modules (also #list).
function ModuleList:size() return #self end

function ModuleList:extra_repr() return "" end

-- ---------------------------------------------------------------- ModuleDict

C.ModuleDict = Module:extend("ModuleDict")
local ModuleDict = C.ModuleDict

-- A key must be a string that names no method or field of the dict itself.
local function check_key(self, key, fname)
  if type(key) ~= "string" then check.error(fname .. ": keys must be strings, got " .. check.typename(key)) end
  if key:sub(1, 1) == "_" or key == "training" or (ModuleDict[key] ~= nil and rawget(self, key) == nil) then
    check.error(string.format("%s: key '%s' is reserved (a method or field of ModuleDict)", fname, key))
  end
  return key
end

--- ModuleDict(modules): submodules by string key, from a table key -> module (registered in
-- sorted key order) or a list of {key, module} pairs (registered in list order). Read with
-- `md[key]` or `md.key`, set with `md:set(key, m)`. It has no forward.
function ModuleDict:init(modules)
  check.table(modules, "ModuleDict", "modules", true)
  self:update(modules or {})
end

--- Adds (or replaces) the module under key; returns the dict.
function ModuleDict:set(key, m)
  check_key(self, key, "ModuleDict:set")
  module_arg(m, "ModuleDict:set", "'" .. key .. "'")
  self[key] = m
  return self
end

--- Adds the modules of a table key -> module (sorted by key) or a list of {key, module} pairs;
-- returns the dict.
function ModuleDict:update(modules)
  check.table(modules, "ModuleDict:update", "modules")
  if #modules > 0 then
    for i, kv in ipairs(modules) do
      if type(kv) ~= "table" or Module.is_module(kv) then
        check.error("ModuleDict: element " .. i .. " of a list must be a {key, module} pair")
      end
      self:set(kv[1], kv[2])
    end
    return self
  end
  for _, k in ipairs(check.string_keys(modules, "ModuleDict")) do self:set(k, modules[k]) end
  return self
end

--- The keys in registration order.
function ModuleDict:keys()
  local out = {}
  for _, k in ipairs(rawget(self, "_order")) do
    if Module.is_module(rawget(self, k)) then out[#out + 1] = k end
  end
  return out
end

--- The modules in registration order.
function ModuleDict:values()
  local out = {}
  for i, k in ipairs(self:keys()) do out[i] = self[k] end
  return out
end

--- {key, module} pairs in registration order.
function ModuleDict:items()
  local out = {}
  for i, k in ipairs(self:keys()) do out[i] = {k, self[k]} end
  return out
end

--- Whether a module is held under key.
function ModuleDict:contains(key) return type(key) == "string" and Module.is_module(rawget(self, key)) end

--- Number of modules.
function ModuleDict:size() return #self:keys() end

--- Removes the module under key and returns it (an error when there is none).
function ModuleDict:pop(key)
  if not self:contains(key) then check.error("ModuleDict:pop: no module under key '" .. tostring(key) .. "'") end
  local m = rawget(self, key)
  rawset(self, key, nil)
  local order = rawget(self, "_order")
  for i, k in ipairs(order) do
    if k == key then table.remove(order, i); break end
  end
  rawget(self, "_seen")[key] = nil
  return m
end

return C
