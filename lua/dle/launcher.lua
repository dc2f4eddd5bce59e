--- dle.launcher: the `dle` command (API.md, "The launcher and the REPL"), one implementation for
-- the checkout's scripts/dle and the installed bin/dle:
--   dle [--threads N] [--seed N] [-i] [-e CODE] [script.lua args...]
--   dle --version | dle --help | dle --nproc N script.lua args...   (N ranks through mpirun)
--   dle                    the REPL (dle.repl)
-- The launcher's options are the arguments before the script (or after -e CODE's chunk, its
-- arguments); everything after the script name is the script's (arg[1..] and ...), as lua5.4
-- does. The options are parsed by lua-argparse (Debian lua-argparse).
local M = {}

local function fail(msg)
  io.stderr:write("dle: ", msg, "\n")
  os.exit(1)
end

-- Runs fn(...) and exits like lua5.4 does on an uncaught error: message, traceback, status 1.
local function run(fn, ...)
  local ok, err = xpcall(fn, function(e)
    if type(e) ~= "string" then
      local mt = getmetatable(e)
      e = mt and mt.__tostring and tostring(e) or ("(error object is a " .. type(e) .. " value)")
    end
    local tb = debug.traceback(e, 2)
    local cut = tb:find("\n%s*%[C%]: in function 'xpcall'") -- the launcher's own frames
    return cut and tb:sub(1, cut - 1) or tb
  end, ...)
  if not ok then fail(err) end
end

local TAKES_VALUE = {["--threads"] = true, ["--seed"] = true, ["-e"] = true, ["--nproc"] = true}

-- argv split into the launcher's options (before the script, or up to -e's chunk) and the rest.
local function split(argv)
  local own, i = {}, 1
  while i <= #argv do
    local a = argv[i]
    if a:sub(1, 1) ~= "-" or a == "-" then break end
    if a == "--" then i = i + 1; break end
    own[#own + 1] = a
    if TAKES_VALUE[a] then
      own[#own + 1] = argv[i + 1]
      i = i + 1
      if a == "-e" then i = i + 1; break end -- the chunk's own arguments follow
    end
    i = i + 1
  end
  local rest = {}
  for k = i, #argv do rest[#rest + 1] = argv[k] end
  return own, rest
end

local function parser()
  local argparse = require("argparse")
  local p = argparse("dle", "dle: a deep learning engine scripted in Lua 5.4. With no script: the REPL.")
  p:usage("usage: dle [--threads N] [--seed N] [-i] [-e CODE] [script.lua args...]")
  p:option("--threads", "number of CPU threads (dle.set_num_threads)"):convert(math.tointeger)
  p:option("--seed", "seed of the default generator (dle.manual_seed)"):convert(math.tointeger)
  p:option("-e", "run a chunk of Lua code (its ... are the following arguments)"):argname("<code>")
  p:flag("-i", "enter the REPL after the script or chunk")
  p:option("--nproc", "run the script on N ranks through mpirun (dle.dist)"):convert(math.tointeger)
  p:flag("--version", "print the version and exit")
  return p
end

--- Runs the launcher on argv (the command line after the program name; argv[0] is the program).
function M.main(argv)
  local own, rest = split(argv)
  local ok, opts = parser():pparse(own)
  if not ok then fail(opts .. " (dle --help lists the options)") end
  if opts.nproc then
    if opts.nproc < 1 then fail("--nproc must be a positive integer") end
    if not rest[1] then fail("--nproc needs a script") end
    local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
    local cmd = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-n", tostring(opts.nproc), q(argv[0] or "dle")}
    if opts.threads then cmd[#cmd + 1] = "--threads " .. opts.threads end
    if opts.seed then cmd[#cmd + 1] = "--seed " .. opts.seed end
    for _, a in ipairs(rest) do cmd[#cmd + 1] = q(a) end
    local done, _, code = os.execute(table.concat(cmd, " "))
    os.exit(done and 0 or (code or 1))
  end
  local dle = require("dle")
  if opts.version then
    io.write("dle ", dle.version, " (Lua ", _VERSION:match("%d.%d"), ")\n")
    return
  end
  if opts.threads then
    if opts.threads < 1 then fail("--threads must be a positive integer") end
    dle.set_num_threads(opts.threads)
  end
  if opts.seed then dle.manual_seed(opts.seed) end
  if opts.e then
    local chunk, err = load(opts.e, "=(command line)")
    if not chunk then fail(err) end
    run(chunk, table.unpack(rest))
  elseif rest[1] then
    local script = rest[1]
    local chunk, err = loadfile(script)
    if not chunk then fail(err) end
    local script_arg = {[0] = script, [-1] = argv[0]}
    for k = 2, #rest do script_arg[k - 1] = rest[k] end
    _G.arg = script_arg
    run(chunk, table.unpack(script_arg, 1, #script_arg))
  elseif not opts.i then
    require("dle.repl").run()
    return
  end
  if opts.i then require("dle.repl").run() end
end

return M
