--- dle.help: finds the doc comment of a public function, the same text the API reference (LDoc,
-- `scripts/docs`) shows.
--
-- Where a function's doc lives:
--   - a function written in Lua: the comment block directly above its definition, whose first line
--     starts with `---`;
--   - a function written in C (dle.core), or one a Lua factory makes: an entry in lua/dle/doc/*.lua,
--     a `---` comment block holding `@function NAME`, where NAME is a public name of the function
--     (`dle.zeros`, `Tensor:view`, `dle.nn.functional.relu`). One entry documents the function
--     under all its names (`dle.exp` is also `Tensor:exp`).
-- Public names: the functions of `dle` and of its public subtables (nn, nn.functional, nn.init,
-- nn.utils, optim, optim.lr, data, amp, graph, rewrite, dist, autograd), written `dle.<path>.<name>`;
-- tensor methods `Tensor:<name>`; methods of nn.Module and of the optimizer base class
-- `Module:<name>` and `Optimizer:<name>`; a class (a table with an `init` function) by its init.
local M = {}

local here = debug.getinfo(1, "S").source:match("^@(.*)/help%.lua$") or "lua/dle"

local lines_cache = {}
local function lines_of(path)
  local lines = lines_cache[path]
  if lines == nil then
    local f = io.open(path, "r")
    lines = false
    if f then
      lines = {}
      for l in f:lines() do lines[#lines + 1] = l end
      f:close()
    end
    lines_cache[path] = lines
  end
  return lines or nil
end

--- The comment block ending on the line above `line` of the file at `path` (its lines without the
-- leading dashes and one space), when that block starts with `---`; else nil.
function M.comment_above(path, line)
  local lines = lines_of(path)
  if not lines or line < 2 then return nil end
  local first = line
  while first > 1 and lines[first - 1]:match("^%s*%-%-") do first = first - 1 end
  if first == line or not lines[first]:match("^%s*%-%-%-") then return nil end
  local out = {}
  for i = first, line - 1 do out[#out + 1] = (lines[i]:gsub("^%s*%-%-%-?%s?", "", 1)) end
  return table.concat(out, "\n")
end

-- The doc entries of lua/dle/doc/*.lua: name -> text, read once.
local entries
local function doc_entries()
  if entries then return entries end
  entries = {}
  local p = io.popen("ls '" .. here .. "/doc' 2>/dev/null")
  local files = p and p:read("a") or ""
  if p then p:close() end
  for file in files:gmatch("[^\n]+%.lua") do
    local lines = lines_of(here .. "/doc/" .. file) or {}
    local block = nil
    local function flush()
      if block and #block > 0 and block.name then entries[block.name] = table.concat(block, "\n") end
      block = nil
    end
    for _, l in ipairs(lines) do
      if l:match("^%s*%-%-%-") then
        flush()
        block = {}
      end
      if block and l:match("^%s*%-%-") then
        local text = l:gsub("^%s*%-%-%-?%s?", "", 1)
        local name = text:match("^@function%s+(%S+)")
        if name then block.name = name else block[#block + 1] = text end
      elseif not l:match("^%s*%-%-") then
        flush()
      end
    end
    flush()
  end
  return entries
end

--- The names of the public doc entries (from lua/dle/doc), as a set.
function M.entry_names()
  local set = {}
  for name in pairs(doc_entries()) do set[name] = true end
  return set
end

local PUBLIC_TABLES = {"nn", "nn.functional", "nn.init", "nn.utils", "optim", "optim.lr", "data", "amp",
                       "graph", "rewrite", "dist", "autograd", "linalg"}

local function is_class(v)
  return type(v) == "table" and type(rawget(v, "init")) == "function"
end

--- Every public function as a list of {name =, fn =}, sorted by name (loads the lazy subpackages).
-- A class counts as its `init` function, named after the class (`dle.nn.Linear`).
function M.public_functions()
  local dle = require("dle")
  for _, k in ipairs({"checkpoint", "profile", "flops", "compile", "compile_info", "io"}) do local _ = dle[k] end
  local list = {}
  local function add(name, v)
    if type(v) == "function" then list[#list + 1] = {name = name, fn = v}
    elseif is_class(v) then list[#list + 1] = {name = name, fn = rawget(v, "init")} end
  end
  for k, v in pairs(dle) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" then add("dle." .. k, v) end
  end
  for _, path in ipairs(PUBLIC_TABLES) do
    local t = dle
    for part in path:gmatch("[^.]+") do t = type(t) == "table" and t[part] or nil end
    if type(t) == "table" then
      for k, v in pairs(t) do
        if type(k) == "string" and k:sub(1, 1) ~= "_" then add("dle." .. path .. "." .. k, v) end
      end
    end
  end
  local classes = {Tensor = dle.Tensor, Module = dle.nn.Module, Optimizer = dle.optim.Optimizer}
  for cname, cls in pairs(classes) do
    if type(cls) == "table" then
      for k, v in pairs(cls) do
        if type(k) == "string" and k:sub(1, 1) ~= "_" and type(v) == "function" then
          list[#list + 1] = {name = cname .. ":" .. k, fn = v}
        end
      end
    end
  end
  table.sort(list, function(a, b) return a.name < b.name end)
  return list
end

local names_of   -- fn -> list of public names, built on first use
local function public_names(fn)
  if not names_of then
    names_of = {}
    for _, e in ipairs(M.public_functions()) do
      local l = names_of[e.fn] or {}
      l[#l + 1] = e.name
      names_of[e.fn] = l
    end
  end
  return names_of[fn] or {}
end

--- The `---` comment block that opens the file at `path` (what LDoc shows as its module's text), or nil.
function M.file_header(path)
  local lines = lines_of(path)
  if not lines or not lines[1] or not lines[1]:match("^%-%-%-") then return nil end
  local n = 1
  while lines[n + 1] and lines[n + 1]:match("^%s*%-%-") do n = n + 1 end
  return M.comment_above(path, n + 1)
end

-- The file and line where a Lua function is defined, or nil (C functions).
local function defined_at(f)
  local info = debug.getinfo(require("dle.check").original(f), "S")
  if info.what == "Lua" and info.source:sub(1, 1) == "@" then return info.source:sub(2), info.linedefined end
  return nil
end

-- A class's constructor: its own `init` (nn.Module's classes) or `new` (the optimizers'), or nil.
local function constructor(v)
  if type(v) ~= "table" then return nil end
  local f = rawget(v, "init") or rawget(v, "new")
  return type(f) == "function" and f or nil
end

-- The file a class is written in: where its constructor, forward or another own method is defined.
local function class_file(cls)
  for _, k in ipairs({"init", "new", "forward"}) do
    local f = rawget(cls, k)
    if type(f) == "function" and defined_at(f) then return defined_at(f) end
  end
  for _, f in pairs(cls) do
    if type(f) == "function" and defined_at(f) then return defined_at(f) end
  end
  return nil
end

-- The text about a module or class itself: the header of the file that returns it (dle.nn.linear
-- for dle.nn.Linear, dle/nn/init.lua for dle.nn); else for a class (named by `name` or `__name`)
-- the comment above the line making it (`A.PReLU = Module:extend("PReLU")`), else the header of
-- its file (a factory making several classes).
local function table_text(t)
  for name, m in pairs(package.loaded) do
    if m == t and type(name) == "string" then
      local path = package.searchpath(name, package.path)
      local text = path and M.file_header(path)
      if text then return text end
    end
  end
  local cname = rawget(t, "name") or rawget(t, "__name")
  if type(cname) ~= "string" then return nil end
  cname = cname:match("[%w_]+$")
  local path = class_file(t)
  if not path or not cname then return nil end
  for i, l in ipairs(lines_of(path) or {}) do
    if l:find('extend%(%s*"' .. cname .. '"') then
      local text = M.comment_above(path, i)
      if text then return text end
    end
  end
  return M.file_header(path)
end

-- The value a dotted public name ("dle.nn.Linear") reaches, or nil.
local function resolve(name)
  local path = name:match("^dle%.([%w_.]+)$")
  if not path then return nil end
  local v = require("dle")
  for part in path:gmatch("[^.]+") do
    if type(v) ~= "table" then return nil end
    v = v[part]
  end
  return v
end

--- The doc text of a function, a class or module table (its own text, then its constructor's) or
-- a public name such as "dle.zeros", "dle.nn.Linear" or "Tensor:view"; nil when there is none.
function M.doc(f)
  if type(f) == "string" then
    local e = doc_entries()[f]
    if e then return e end
    local v = resolve(f)
    if v == nil then
      for _, item in ipairs(M.public_functions()) do
        if item.name == f then v = item.fn break end
      end
    end
    if v == nil then return nil end
    f = v
  end
  if type(f) == "table" then
    local ctor = constructor(f)
    local own, of_ctor = table_text(f), ctor and M.doc(ctor)
    if own and of_ctor and own ~= of_ctor then return own .. "\n\n" .. of_ctor end
    return own or of_ctor
  end
  if type(f) ~= "function" then return nil end
  local path, line = defined_at(f)
  if path then
    local text = M.comment_above(path, line)
    if text then return text end
  end
  local e = doc_entries()
  for _, name in ipairs(public_names(f)) do
    if e[name] then return e[name] end
  end
  return nil
end

return M
