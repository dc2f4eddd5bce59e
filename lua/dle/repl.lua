--- dle.repl: the interactive prompt that `dle` (scripts/dle, the installed launcher) opens when
-- given no arguments: readline editing, history in ~/.dle_history and tab completion when
-- lua-readline is installed and stdin is a terminal; plain line reading otherwise (pipes).
local M = {}

local KEYWORDS = {
  "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in",
  "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
}
local MAX_TABLE_ITEMS = 40

local function is_tensor(v)
  local dle = package.loaded["dle"]
  return dle ~= nil and dle.is_tensor(v)
end

local function tensor_summary(t)
  local sizes = t:shape()
  return string.format("[dle.Tensor %s of size %s]", t:dtype(),
                       #sizes == 0 and "()" or table.concat(sizes, "x"))
end

-- One value inside a table: never recursive, so cycles and huge nests print in one line.
local function inner_text(v)
  if type(v) == "string" then return (string.format("%q", v):gsub("\\\n", "\\n")) end
  if is_tensor(v) then return tensor_summary(v) end
  return tostring(v)
end

local function key_text(k)
  if type(k) == "string" and k:match("^[%a_][%w_]*$") then return k end
  return "[" .. inner_text(k) .. "]"
end

local function sorted_keys(t, n)
  local keys = {}
  for k in pairs(t) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b)
    if type(a) ~= type(b) then return type(a) < type(b) end
    if type(a) == "number" or type(a) == "string" then return a < b end
    return tostring(a) < tostring(b)
  end)
  return keys
end

--- Formats a table one level deep: {1, 2, name = "x", w = [dle.Tensor float32 of size 2x3]}.
function M.table_text(t)
  local mt = getmetatable(t)
  if mt and mt.__tostring then return tostring(t) end
  local n, items = #t, {}
  local function add(s)
    if #items < MAX_TABLE_ITEMS then items[#items + 1] = s
    elseif #items == MAX_TABLE_ITEMS then items[#items + 1] = "..." end
  end
  for i = 1, n do add(inner_text(t[i])) end
  for _, k in ipairs(sorted_keys(t, n)) do add(key_text(k) .. " = " .. inner_text(t[k])) end
  return "{" .. table.concat(items, ", ") .. "}"
end

--- The text the REPL prints for one result: tensors in full (pretty), tables shallowly.
function M.value_text(v)
  if is_tensor(v) then return tostring(v) end
  if type(v) == "table" then return M.table_text(v) end
  return tostring(v)
end

-- ---------------------------------------------------------------- completion

local function sorted_unique(list)
  table.sort(list)
  local out = {}
  for i, s in ipairs(list) do
    if s ~= list[i - 1] then out[#out + 1] = s end
  end
  return out
end

-- Field names of a value a user can write after `.` (methods = true: after `:`), following the
-- metatables: a table __index is a class and, up its own metatable, its base classes; beside a
-- function __index (a property such as an optimizer's lr, dle's lazy loader) the class is the
-- metatable itself, and __lazy_names lists what the loader gives without loading it.
local function fields_of(v, methods)
  local names, seen = {}, {}
  local function add(k, x)
    if type(k) == "string" and k:match("^[%a_][%w_]*$") and (not methods or type(x) == "function") then
      names[#names + 1] = k
    end
  end
  local add_table
  local function add_chain(mt, depth)
    if type(mt) ~= "table" then return end
    local index = rawget(mt, "__index")
    if type(index) == "table" then
      add_table(index, depth + 1)
    elseif type(index) == "function" then
      add_table(mt, depth + 1)
      local lazy = rawget(mt, "__lazy_names")
      if not methods and type(lazy) == "table" then
        for _, k in ipairs(lazy) do add(k) end
      end
    end
  end
  function add_table(t, depth)
    if type(t) ~= "table" or seen[t] or depth > 8 then return end
    seen[t] = true
    for k, x in pairs(t) do add(k, x) end
    add_chain(getmetatable(t), depth)
  end
  if is_tensor(v) then
    add_table(package.loaded["dle"].Tensor, 0)
    if not methods then
      for _, k in ipairs({"grad", "is_leaf", "requires_grad"}) do names[#names + 1] = k end
    end
  elseif type(v) == "string" then
    add_table(string, 0)
  elseif type(v) == "table" then
    add_table(v, 0)
  else
    local ok, mt = pcall(getmetatable, v)
    if ok then add_chain(mt, 0) end
  end
  return names
end

-- Follows a dotted path of plain names from env without running any code but __index.
local function lookup(env, path)
  local v = env
  for name in path:gmatch("[^.]+") do
    if type(v) ~= "table" and not is_tensor(v) then
      local ok, mt = pcall(getmetatable, v)
      if not (ok and type(mt) == "table" and mt.__index) then return nil end
    end
    local ok, x = pcall(function() return v[name] end)
    if not ok or x == nil then return nil end
    v = x
  end
  return v
end

--- Completions of the word at the end of the input: globals and keywords for `na`, fields for
-- `obj.na` (dle's lazily loaded modules without loading them; `dle.amp.` loads dle.amp) and
-- methods for `obj:na` (tensor methods from dle.Tensor, a module's from its class and base
-- classes). Returns full words.
function M.complete(word, env)
  env = env or _G
  -- readline's words end only at spaces and brackets: `#m:par` or `-x.n` keep an operator in
  -- front, which the completions keep too
  local head, rest = word:match("^(.-)([%a_][%w_%.:]*)$")
  if not head then
    if word ~= "" and not word:match("[^%w_%.:]$") then return {} end
    head, rest = word, ""
  end
  if head:match("[%.:]$") then return {} end   -- a field of an expression (`f().x`)
  if head ~= "" then
    local out = M.complete(rest, env)
    for i, w in ipairs(out) do out[i] = head .. w end
    return out
  end
  local base, sep, prefix = word:match("^([%a_][%w_%.]*)([%.:])([%a_]?[%w_]*)$")
  local candidates
  if base then
    local obj = lookup(env, base)
    if obj == nil then return {} end
    candidates = fields_of(obj, sep == ":")
  else
    prefix = word:match("^[%a_]?[%w_]*$")
    if not prefix then return {} end
    candidates = fields_of(env, false)
    for _, k in ipairs(KEYWORDS) do candidates[#candidates + 1] = k end
  end
  -- names starting with `_` are internal (a module's _params, a class's __index): listed only
  -- once the prefix asks for them
  local private = prefix:sub(1, 1) == "_"
  local out = {}
  for _, name in ipairs(candidates) do
    if name:sub(1, #prefix) == prefix and (private or name:sub(1, 1) ~= "_") then
      out[#out + 1] = base and (base .. sep .. name) or name
    end
  end
  return sorted_unique(out)
end

-- ---------------------------------------------------------------- evaluation

-- A line's own spelling turned into plain Lua: `=expr` (Lua 5.1's REPL) is `return expr`, and a
-- leading `local` declaration becomes an assignment into the REPL's environment, so the name
-- persists to later lines (a chunk's locals would end with it): `local y = 5` then `y` prints 5.
local function rewrite(buffer)
  local expr = buffer:match("^%s*=(.*)$")
  if expr then return "return " .. expr end
  local fname = buffer:match("^%s*local%s+function%s+([%a_][%w_]*)")
  if fname then return (buffer:gsub("^%s*local%s+function%s+", "function ", 1)) end
  local names, rest = buffer:match("^%s*local%s+([%a_][%w_%s,<>]*)(.*)$")
  if names and (rest == "" or rest:match("^=")) then
    names = names:gsub("<%s*%a+%s*>", "") -- <const>, <close>: attributes of locals only
    if rest == "" then return names .. " = nil" end
    return names .. " " .. rest
  end
  return buffer
end

--- Compiles an input buffer: `return <buffer>` first so expressions print their values.
-- Returns the function, or nil and "incomplete" when more lines are needed, or nil and the
-- syntax error.
function M.compile(buffer, env)
  buffer = rewrite(buffer)
  local fn = load("return " .. buffer, "=stdin", "t", env)
  if fn then return fn end
  local err
  fn, err = load(buffer, "=stdin", "t", env)
  if fn then return fn end
  if err:sub(-5) == "<eof>" then return nil, "incomplete" end
  return nil, err
end

local function error_text(e)
  if type(e) == "string" then return e end
  local mt = getmetatable(e)
  if mt and mt.__tostring then return tostring(e) end
  return "(error object is a " .. type(e) .. " value)"
end

-- The traceback without the REPL's own frames below the user's chunk.
local function traceback(e)
  local tb = debug.traceback(error_text(e), 2)
  local cut = tb:find("\n%s*%[C%]: in function 'xpcall'")
  return cut and tb:sub(1, cut - 1) or tb
end

-- Runs a compiled chunk; returns true and a packed table of results, or false and a traceback.
local function execute(fn)
  local results = table.pack(xpcall(fn, traceback))
  if not results[1] then return false, results[2] end
  return true, table.pack(table.unpack(results, 2, results.n))
end

local function show(out, results)
  if results.n == 0 then return end
  local texts, multiline = {}, false
  for i = 1, results.n do
    texts[i] = M.value_text(results[i])
    if texts[i]:find("\n") then multiline = true end
  end
  out:write(table.concat(texts, multiline and "\n" or "\t"), "\n")
end

-- ---------------------------------------------------------------- input

local function stdin_is_terminal()
  return os.execute("test -t 0") == true
end

-- A reader function(prompt) -> line or nil at EOF, a function to call on exit, and whether
-- readline (editing, history, completion) is in use.
local function make_reader(interactive, use_readline)
  if interactive and use_readline then
    local ok, rl = pcall(require, "readline")
    if ok then
      rl.set_options({histfile = "~/.dle_history", completion = true})
      rl.set_readline_name("dle")
      rl.set_complete_function(function(text, from, to)
        -- readline resets this to a space before every completion; "x.ones(" reads better
        rl.set_completion_append_character("")
        local ok2, list = pcall(M.complete, text:sub(from, to))
        return ok2 and list or {}
      end)
      return function(prompt) return rl.readline(prompt) end, rl.save_history, true
    end
  end
  return function(prompt)
    if interactive then
      io.stdout:write(prompt)
      io.stdout:flush()
    end
    return io.read("l")
  end, function() end, false
end

--- Runs the read-eval-print loop until end of input (or os.exit()).
-- opts (all optional): readline = false disables lua-readline; interactive = true/false
-- overrides the terminal test (prompts and banner appear only when interactive).
function M.run(opts)
  opts = require("dle.check").options(opts, "repl.run", {"interactive", "readline"})
  local interactive = opts.interactive
  if interactive == nil then interactive = stdin_is_terminal() end
  local dle = require("dle")
  _G.dle = dle
  --- help(f): prints the doc comment of a function, class, method or module (or of a public
  -- name, "dle.zeros"): the text the API reference shows.
  _G.help = _G.help or function(...)
    if select("#", ...) == 0 then
      io.stdout:write("help(f) prints the doc of a function, class, method or module: help(dle.zeros),\n",
                      "help(dle.nn.Linear), help(m.forward), help(\"Tensor:view\"). Tab completes names.\n")
      return
    end
    local f = ...
    local text = require("dle.help").doc(f)
    io.stdout:write(text or ("no documentation found for " .. tostring(f)), "\n")
  end
  local out = io.stdout
  out:setvbuf("line")   -- keeps results and (unbuffered) error output in order in a pipe
  local read, save, editing = make_reader(interactive, opts.readline ~= false)

  local real_exit = os.exit
  -- an exit from the prompt still saves the history
  os.exit = function(...) -- luacheck: ignore 122
    pcall(save)
    return real_exit(...)
  end
  if interactive then
    out:write(string.format("dle %s on %s. `dle` is loaded;%s Ctrl-D exits.\n",
                            dle.version, _VERSION, editing and " Tab completes;" or ""))
  end

  local buffer
  while true do
    -- lua5.4 turns a Ctrl-C into an "interrupted!" error at the next Lua instruction, which
    -- after a Ctrl-C at the prompt is in here: drop the pending input instead of dying.
    local ok, line = pcall(read, buffer and ">> " or "dle> ")
    if not ok then
      io.stderr:write(error_text(line), " (input discarded)\n")
      buffer, line = nil, ""
    end
    if line == nil then break end
    buffer = buffer and (buffer .. "\n" .. line) or line
    local fn, err = M.compile(buffer, _G)
    if fn then
      buffer = nil
      local ran, results = execute(fn)
      -- the chunk's own output without a newline (io.write) shows before the next prompt, which
      -- readline writes past stdout's buffer
      out:flush()
      if ran then show(out, results)
      else
        io.stderr:write(results, "\n")
      end
    elseif err ~= "incomplete" then
      buffer = nil
      out:flush()
      io.stderr:write(err, "\n")
    end
  end
  if buffer then io.stderr:write("stdin: incomplete input at end of file\n") end
  if interactive then out:write("\n") end
  pcall(save)
  os.exit = real_exit -- luacheck: ignore 122
end

return M
