-- doc_commands.lua — the shell commands README.md and docs/*.md show, for the specs that run them
-- (readme_commands_spec, rockspec_spec). A command is a line of a ```sh / ```bash / ```shell
-- block, a `$ ` line of a ```console block or of an unmarked block opening with `$ ` (a
-- transcript), or an inline `code span` running an example (`scripts/dle ....lua`,
-- `mpirun ... .lua`); `a && b` is two commands. A transcript of the REPL (`$ scripts/dle` alone,
-- then `dle>`/`>>` lines and their output) is a transcript, not a command.
local H = require("helpers")
local M = {}

local q = H.shell_quote

local function read(path)
  local f = assert(io.open(path))
  local s = f:read("a")
  f:close()
  return s
end

--- README.md and docs/*.md, relative to root.
function M.files(root)
  local files = {"README.md"}
  local p = assert(io.popen("cd " .. q(root) .. " && ls docs/*.md"))
  for name in p:read("a"):gmatch("[^\n]+") do files[#files + 1] = name end
  p:close()
  return files
end

local SHELL_INFO = {sh = true, bash = true, shell = true}

local function add_commands(out, line, where)
  for cmd in (line .. " && "):gmatch("(.-)%s+&&%s+") do
    cmd = cmd:match("^%s*(.-)%s*$")
    if cmd ~= "" then out[#out + 1] = {cmd = cmd, file = where.file, section = where.section} end
  end
end

-- A fenced block's commands and REPL transcripts.
local function block_commands(info, block, where, commands, transcripts)
  if SHELL_INFO[info] then
    for _, l in ipairs(block) do
      if l:match("%S") and not l:match("^%s*#") then add_commands(commands, l, where) end
    end
  elseif info == "console" or (info == "" and block[1] and block[1]:match("^%$ ")) then
    local current
    for _, l in ipairs(block) do
      local cmd = l:match("^%$ (.*)$")
      if cmd == "scripts/dle" or cmd == "dle" then
        current = {cmd = cmd, input = {}, output = {}, file = where.file, section = where.section}
        transcripts[#transcripts + 1] = current
      elseif cmd then
        add_commands(commands, cmd, where)
        current = nil
      elseif current then
        local input = l:match("^dle> (.*)$") or l:match("^>> (.*)$")
        if input then
          current.input[#current.input + 1] = input
        elseif not l:match("^dle %S+ on Lua") then   -- the banner shows on a terminal only
          current.output[#current.output + 1] = l
        end
      end
    end
  end
end

--- The commands ({cmd, file, section}: section is the heading above) and REPL transcripts
-- ({cmd, input = lines, output = lines, file, section}) of one markdown text.
function M.extract(text, file, commands, transcripts)
  local lines = {}
  for l in (text .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = l end
  local where = {file = file, section = ""}
  local i = 1
  while i <= #lines do
    local info = lines[i]:match("^%s*```%s*(%S*)")
    if info then
      local block = {}
      i = i + 1
      while i <= #lines and not lines[i]:match("^%s*```") do
        block[#block + 1] = lines[i]
        i = i + 1
      end
      block_commands(info, block, where, commands, transcripts)
    else
      where.section = lines[i]:match("^#+%s+(.-)%s*$") or where.section
      for span in lines[i]:gmatch("`([^`]+)`") do
        if (span:match("^scripts/dle ") or span:match("^mpirun ")) and span:match("%.lua$") then
          add_commands(commands, span, where)
        end
      end
    end
    i = i + 1
  end
end

--- The commands of README.md and docs/*.md, each once (its first place), and their transcripts.
function M.extract_all(root)
  local all, transcripts = {}, {}
  for _, file in ipairs(M.files(root)) do M.extract(read(root .. "/" .. file), file, all, transcripts) end
  local commands, seen = {}, {}
  for _, c in ipairs(all) do
    if not seen[c.cmd] then
      seen[c.cmd] = true
      commands[#commands + 1] = c
    end
  end
  return commands, transcripts
end

return M
