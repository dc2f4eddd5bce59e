--- api_walk.lua — walks dle's public API with wrong arguments and returns what it found, for
-- tests/api_errors_spec.lua (and for `scripts/dle tests/api_walk.lua`, which prints the report).
--
-- Every public callable is collected: the functions of `dle` and of its submodules, the
-- constructors of their classes (callable tables), and every tensor method. Each is called, under
-- pcall, with one wrong value in one position (positions 1-3; a method's self is position 0),
-- earlier positions holding a valid-looking float tensor. Twice: directly through pcall (no
-- caller line: the message must begin with the function's name) and from a line of this file
-- (the message must begin with this file's position, then the name).
local dle = require("dle")

local W = {}

-- Values that are the wrong type somewhere. The string is a path in no directory, so a writer
-- handed it as a path fails instead of creating a file.
local function bad_values()
  return {
    {"nil", nil}, {"number", 42}, {"string", "/nonexistent-dle-dir/x"}, {"table", {}},
    {"boolean", true}, {"bool tensor", dle.zeros(3):bool()}, {"float tensor {7}", dle.zeros(7)},
  }
end

-- Not walked, and why.
W.not_walked = {
  ["dle.dist"] = "starts MPI (dle.dist.init); its argument checks are in tests/dist_spec.lua",
  ["dle.repl"] = "reads the terminal",
}

-- Process-wide settings the walk may change: put back after every call of a setter.
local function settings()
  return {threads = dle.get_num_threads(), grad = dle.is_grad_enabled(),
          mem = dle.get_memory_limit and dle.get_memory_limit()}
end
local function restore(s)
  dle.set_num_threads(s.threads)
  dle.set_grad_enabled(s.grad)
  dle.set_cache_limit(1 << 30)
  if dle.set_memory_limit then dle.set_memory_limit(s.mem) end
end

local function callable(v)
  if type(v) == "function" then return true end
  local mt = type(v) == "table" and getmetatable(v)
  return mt and mt.__call ~= nil or false
end

--- Every public callable: {label = "dle.nn.functional.relu", fn = f, names = {"relu"}, method = bool}.
-- `names` lists what a message may start with: the key, and the other keys of the same function
-- in the same table (documented aliases such as ger/outer, clip/clamp).
function W.targets()
  local out = {}
  local function add_table(prefix, t, method)
    local keys = {}
    for k, v in pairs(t) do
      if type(k) == "string" and k:sub(1, 1) ~= "_" and callable(v) then keys[#keys + 1] = k end
    end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local names = {}
      for k2, v2 in pairs(t) do
        if rawequal(v2, t[k]) and type(k2) == "string" then
          -- the key, its qualified forms ("lr.step", "dle.load"), and for an in-place variant
          -- the op it runs in place ("add:" from add_)
          local full = prefix:gsub("^Tensor:", "") .. k2
          for i in full:gmatch("()[^.]+") do names[#names + 1] = full:sub(i) end
          if k2:sub(-1) == "_" then names[#names + 1] = k2:sub(1, -2) end
        end
      end
      out[#out + 1] = {label = prefix .. k, fn = t[k], names = names, method = method}
    end
  end
  -- lazily installed functions of dle are touched so they appear
  for _, k in ipairs{"checkpoint", "profile", "flops", "compile", "compile_info", "io"} do local _ = dle[k] end
  local plain = {}
  for k, v in pairs(dle) do if k ~= "Tensor" and k ~= "core" and k ~= "metatable" then plain[k] = v end end
  add_table("dle.", plain, false)
  add_table("Tensor:", dle.Tensor, true)
  local subs = {"nn", "nn.functional", "nn.init", "nn.utils", "optim", "optim.lr", "data", "amp", "graph",
                "rewrite", "io", "autograd"}
  for _, path in ipairs(subs) do
    local t = dle
    for part in path:gmatch("[^.]+") do t = t[part] end
    add_table("dle." .. path .. ".", t, false)
  end
  return out
end

local function starts_with_name(msg, names)
  for _, n in ipairs(names) do
    if msg:sub(1, #n + 1) == n .. ":" then return true end
  end
  return false
end

-- What a message must never contain: Lua's own phrasing, or a name Lua could not find.
local forbidden = {"bad argument", "attempt to", "'f'", "'?'", "to '?'", "(local ", "(field ", "(upvalue "}

--- The problems with one error message (nil when its form is right). `where` is the position
-- expected before the name; `or_where`, when given, another one that is accepted instead.
-- expected before the name ("" when called straight from pcall).
function W.check_message(msg, names, where, or_where)
  if type(msg) ~= "string" then return "error value is a " .. type(msg) .. ", not a string" end
  if or_where and msg:sub(1, #or_where) == or_where then where = or_where end
  if msg:sub(1, #where) ~= where then return "not reported at the caller's line (" .. where .. ")" end
  local body = msg:sub(#where + 1)
  if not starts_with_name(body, names) then
    local short = names[1]
    for _, n in ipairs(names) do if #n < #short then short = n end end
    return "does not start with '" .. short .. ":' (or another name of it)"
  end
  for _, f in ipairs(forbidden) do
    if body:find(f, 1, true) then return "contains " .. f end
  end
  return nil
end

-- This file's position prefix for a call made on the line of `from_here`.
local function call_here(f, args, n)
  local line = debug.getinfo(1, "l").currentline + 1
  local ok, msg = pcall(function() local r = f(table.unpack(args, 1, n)) return r end)
  return ok, msg, (debug.getinfo(1, "S").short_src .. ":" .. line .. ": ")
end

--- Walks `targets` (default: all). Returns a list of {label, pos, bad, how, msg, problem}.
function W.walk(targets)
  targets = targets or W.targets()
  local problems = {}
  for _, tg in ipairs(targets) do
    local first = tg.method and 0 or 1
    for pos = first, 3 do
      for _, bv in ipairs(bad_values()) do
        local args, n = {}, 0
        for _ = first, pos - 1 do n = n + 1; args[n] = dle.zeros(2, 3) end
        n = n + 1; args[n] = bv[2]
        local s = settings()
        -- straight from pcall: no position, or (check.error's choice) that of the pcall's line
        local pcall_where = debug.getinfo(1, "S").short_src .. ":" .. debug.getinfo(1, "l").currentline + 1 .. ": "
        local ok1, msg1 = pcall(tg.fn, table.unpack(args, 1, n))
        local ok2, msg2, where = call_here(tg.fn, args, n)
        if tg.label:find("set_", 1, true) then restore(s) end
        for _, r in ipairs{{ok1, msg1, "", "pcall", pcall_where}, {ok2, msg2, where, "from a line"}} do
          if not r[1] then
            local problem = W.check_message(r[2], tg.names, r[3], r[5])
            if problem then
              problems[#problems + 1] = {label = tg.label, pos = pos, bad = bv[1], how = r[4],
                                         msg = tostring(r[2]), problem = problem}
            end
          end
        end
        -- a method called on something that is not a tensor must refuse it
        if pos == 0 and ok1 and bv[1]:find("tensor", 1, true) == nil then
          problems[#problems + 1] = {label = tg.label, pos = 0, bad = bv[1], how = "pcall",
                                     msg = "(no error)", problem = "accepted a " .. bv[1] .. " as self"}
        end
      end
    end
  end
  return problems
end

function W.format(p)
  return string.format("%s, position %d = %s (%s): %s\n    %s", p.label, p.pos, p.bad, p.how, p.problem, p.msg)
end

if (...) ~= "api_walk" then
  -- run as a script: print the report
  local ps = W.walk()
  for _, p in ipairs(ps) do print(W.format(p)) end
  print(#ps .. " problems")
end

return W
