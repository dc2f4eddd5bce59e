--- dle.check: argument checks for the Lua parts of dle. A wrong argument to a public function
-- raises an error naming the function, the argument and what was given ("relu: input must be a
-- tensor, got number"), reported at the caller's line, instead of a Lua runtime error from inside
-- dle ("attempt to index a number value (local 'x')").
-- Each check returns its value, so `x = check.tensor(x, "relu", "input")` reads naturally.
local core = require("dle.core")

local check = {}

--- "{2,3}" for a tensor of shape {2, 3}, as messages show shapes.
function check.shape_str(t) return "{" .. table.concat(t:shape(), ",") .. "}" end

--- The type of v as messages show it: "dle.Tensor" for tensors, else Lua's type name.
function check.typename(v)
  if core.is_tensor(v) then return "dle.Tensor" end
  return type(v)
end

-- ---------------------------------------------------------------- errors at the user's line
-- A user's mistake is reported at the user's line, never at a line inside dle: the position an
-- error names is the first frame on the stack outside dle's own Lua files (and outside C).
-- check.error raises at that frame; check.public wraps an entry point so that errors raised
-- further down (by dle.core's C functions, or Lua runtime errors in dle's files) are moved there.

-- The source prefix of dle's Lua files, as debug.getinfo shows it ("@lua/dle/").
local DLE_SOURCE = debug.getinfo(1, "S").source:match("^(@.*dle[/\\])check%.lua$") or "@dle/"
local DLE_PATH = DLE_SOURCE:sub(2) -- the same path as an error message names it

local function internal(info)
  return info.what == "C" or info.source:sub(1, #DLE_SOURCE) == DLE_SOURCE
end

-- The first frame at or above `level` that is neither dle's nor C, as a level counted from this
-- function's caller (error()'s and debug.getinfo's numbering there); nil when there is none.
local function user_level(level)
  for n = level, math.huge do
    local info = debug.getinfo(n + 1, "S")
    if not info then return nil end
    if not internal(info) then return n end
  end
end

--- Raises msg at the user's line: the first caller frame outside dle.
function check.error(msg)
  error(msg, user_level(2) or 1)
end

-- "file:line:" of the first Lua frame at or above `level` outside dle, or nil.
local function user_where(level)
  for l = level + 1, math.huge do
    local info = debug.getinfo(l, "Sl")
    if not info then return nil end
    if not internal(info) and info.currentline > 0 then
      return info.short_src .. ":" .. info.currentline .. ":"
    end
  end
end

-- Whether msg begins with a position "file:line:".
local function has_where(msg) return msg:find("^[^:\n]+:%d+:") ~= nil end

--- msg without its leading "file:line: ", for a message quoted inside another.
function check.strip_where(msg)
  return (tostring(msg):gsub("^[^:\n]+:%d+: ", "", 1))
end

-- xpcall's message handler: an error message whose "file:line:" is one of dle's own lines gets
-- the user's line instead (the text is kept). The frame the message names is found on the stack;
-- a message re-raised after its frame is gone (a pcall inside dle) is recognized by its path. A
-- message without a position raised by dle's own code gets the user's line too.
local function blame_user(msg)
  if type(msg) ~= "string" then return msg end
  if not has_where(msg) then
    for l = 2, math.huge do
      local info = debug.getinfo(l, "S")
      if not info then return msg end
      if info.what ~= "C" then
        local where = internal(info) and user_where(l)
        return where and where .. " " .. msg or msg
      end
    end
  end
  for l = 2, math.huge do
    local info = debug.getinfo(l, "Sl")
    if not info then break end
    if info.currentline > 0 then
      local prefix = info.short_src .. ":" .. info.currentline .. ":"
      if msg:sub(1, #prefix) == prefix then
        if not internal(info) then return msg end
        local where = user_where(l)
        return where and where .. msg:sub(#prefix + 1) or msg
      end
    end
  end
  local file, rest = msg:match("^([^:\n]+):%d+:(.*)$")
  if file and file:sub(1, #DLE_PATH) == DLE_PATH then
    local where = user_where(2)
    if where then return where .. rest end
  end
  return msg
end

local function rethrow(ok, ...)
  if ok then return ... end
  error((...), 0)
end

--- f, wrapped as a public entry point: any error it raises that names a line inside dle is
-- re-raised naming the user's line (see blame_user). Errors raised in the user's own code
-- (a Module's forward, an autograd.Function, a callback) keep their positions.
local original_of = setmetatable({}, {__mode = "k"})   -- wrapper -> the function it wraps

function check.public(f)
  local w = function(...) return rethrow(xpcall(f, blame_user, ...)) end
  original_of[w] = f
  return w
end

--- check.named(fn, f) -> a function calling f through check.call(fn, f, ...) (errors of the ops
-- inside name fn), known to check.original as f (so its doc comment is f's).
function check.named(fn, f)
  local w = function(...) return check.call(fn, f, ...) end
  original_of[w] = f
  return w
end

--- The function a check.public wrapper wraps (f itself when it is no wrapper): where its source,
-- and so its doc comment, is.
function check.original(f)
  while original_of[f] do f = original_of[f] end -- a public wrapper of a named one, too
  return f
end

--- Calls f(...) and returns its results; an error from an op f uses (a shape mismatch found by
-- `minimum` inside logical_and) is raised again named after fn ("logical_and: minimum: shapes
-- ..."), at the user's line. For public functions composed of other ops.
function check.call(fn, f, ...)
  local res = table.pack(pcall(f, ...))
  if res[1] then return table.unpack(res, 2, res.n) end
  local msg = res[2]
  if type(msg) ~= "string" then error(msg, 0) end
  local body = check.strip_where(msg)
  if body:sub(1, #fn + 1) ~= fn .. ":" then body = fn .. ": " .. body end
  check.error(body)
end

local wrapped = setmetatable({}, {__mode = "k"})

--- Wraps every Lua function field of tbl (in place) with check.public, once; returns tbl. C
-- functions are left alone: their errors already name the line calling them.
-- @param skip optional set of field names to leave alone
function check.export(tbl, skip)
  for k, v in pairs(tbl) do
    if type(v) == "function" and not wrapped[v] and not (skip and skip[k])
        and debug.getinfo(v, "S").what ~= "C" then
      local w = check.public(v)
      wrapped[w] = true
      tbl[k] = w
    end
  end
  return tbl
end

-- v as messages show what was given: "number 5", "string", "dle.Tensor".
local function given(v)
  return type(v) == "number" and "number " .. tostring(v) or check.typename(v)
end

-- ---------------------------------------------------------------- options tables

local known_sets = setmetatable({}, {__mode = "k"})
local NONE = setmetatable({}, {__newindex = function() error("check.options: the empty options are read-only", 2) end})

--- The options table of a public function: nil (no options: an empty read-only table) or a
-- table whose every key is in known (a list of names). Anything else is an error at the user's
-- line: "cross_entropy: unknown option 'wieght' (known: ignore_index, reduction, weight)".
-- @return opts, or the empty table
function check.options(opts, fn, known)
  if opts == nil then return NONE end
  if type(opts) ~= "table" or core.is_tensor(opts) then
    check.error(string.format("%s: options must be a table, got %s", fn, given(opts)))
  end
  local set = known_sets[known]
  if not set then
    set = {}
    for _, k in ipairs(known) do set[k] = true end
    known_sets[known] = set
  end
  for k in pairs(opts) do
    if not set[k] then
      local names = {}
      for i, n in ipairs(known) do names[i] = n end
      table.sort(names)
      check.error(string.format("%s: unknown option '%s' (known: %s)", fn, tostring(k),
        #names > 0 and table.concat(names, ", ") or "none"))
    end
  end
  return opts
end

-- ---------------------------------------------------------------- argument checks

local function fail(fn, what, expected, v)
  check.error(string.format("%s: %s must be %s, got %s", fn, what, expected, given(v)))
end

--- v must be a tensor.
function check.tensor(v, fn, what)
  if not core.is_tensor(v) then fail(fn, what, "a tensor", v) end
  return v
end

--- v must be a tensor or nil.
function check.opt_tensor(v, fn, what)
  if v ~= nil and not core.is_tensor(v) then fail(fn, what, "a tensor or nil", v) end
  return v
end

-- v as an integer: an integer, or a float with an integer value; nil otherwise (strings too,
-- which math.tointeger would convert)
local function to_integer(v) return type(v) == "number" and math.tointeger(v) or nil end

--- v must be an integer (a float with an integer value is accepted and converted).
function check.integer(v, fn, what)
  local i = to_integer(v)
  if not i then fail(fn, what, "an integer", v) end
  return i
end

--- v must be an integer >= min.
function check.integer_min(v, fn, what, min)
  local i = to_integer(v)
  if not i or i < min then fail(fn, what, "an integer >= " .. min, v) end
  return i
end

--- A layer's sizes must all be positive integers, else "fn: expected <expected>, got a, b".
function check.positive_integers(fn, expected, ...)
  local n, got = select("#", ...), {}
  for i = 1, n do
    local v = select(i, ...)
    if math.type(v) ~= "integer" or v < 1 then
      for k = 1, n do got[k] = tostring((select(k, ...))) end
      check.error(fn .. ": expected " .. expected .. ", got " .. table.concat(got, ", "))
    end
  end
end

--- A layer constructor's arguments: its options (check.options against known) and its sizes
-- (check.positive_integers, `expected` naming them). Returns the options.
function check.layer_args(fn, opts, known, expected, ...)
  opts = check.options(opts, fn, known)
  check.positive_integers(fn, expected, ...)
  return opts
end

--- v must be a number (not NaN).
function check.number(v, fn, what)
  if type(v) ~= "number" or v ~= v then fail(fn, what, "a number", v) end
  return v
end

--- v must be a number (not NaN) for which ok(v) holds; expected says which, as messages show it
-- ("a finite number > 0").
function check.number_that(v, fn, what, expected, ok)
  if type(v) ~= "number" or v ~= v or not ok(v) then fail(fn, what, expected, v) end
  return v
end

--- v must be a boolean.
function check.boolean(v, fn, what)
  if type(v) ~= "boolean" then fail(fn, what, "a boolean", v) end
  return v
end

--- v must be a string.
function check.string(v, fn, what)
  if type(v) ~= "string" then fail(fn, what, "a string", v) end
  return v
end

--- v must be a function (or a callable table).
function check.callable(v, fn, what)
  if not check.is_callable(v) then fail(fn, what, "a function", v) end
  return v
end

--- Whether v is a function or a table whose metatable has __call (an nn.Module).
function check.is_callable(v)
  local mt = type(v) == "table" and getmetatable(v)
  return type(v) == "function" or (mt and mt.__call ~= nil) or false
end

local REDUCTIONS = {mean = true, sum = true, none = true}

--- A loss's reduction option: nil (the default "mean"), "mean", "sum" or "none" (or one of the
-- extra names a loss also knows, e.g. {batchmean = true}); anything else is an error naming fn.
-- @return the reduction name
function check.reduction(fn, r, extra)
  if r ~= nil and not REDUCTIONS[r] and not (extra and extra[r]) then
    local names = "'mean', 'sum' or 'none'"
    if extra then
      local e = {}
      for k in pairs(extra) do e[#e + 1] = "'" .. k .. "'" end
      table.sort(e)
      names = "'mean', 'sum', 'none' or " .. table.concat(e, ", ")
    end
    check.error(fn .. ": reduction must be " .. names .. ", got '" .. tostring(r) .. "'")
  end
  return r or "mean"
end

--- v must be a table (not a tensor), or nil when optional is true.
function check.table(v, fn, what, optional)
  if optional and v == nil then return v end
  if type(v) ~= "table" then fail(fn, what, optional and "a table or nil" or "a table", v) end
  return v
end

--- The keys of t, which must all be strings, sorted (a stable order to walk a record in).
function check.string_keys(t, fn)
  local keys = {}
  for k in pairs(t) do
    if type(k) ~= "string" then check.error(fn .. ": keys must be strings, got " .. check.typename(k)) end
    keys[#keys + 1] = k
  end
  table.sort(keys)
  return keys
end

return check
