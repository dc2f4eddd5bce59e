--- bench/options.lua — the command line of scripts/bench.
local M = {}

M.USAGE = [==[
usage: scripts/bench [--quick] [--json FILE] [--markdown[=FILE]] [--no-ref] [--filter K1,K2,...]
                     [--threads T1,T2,...] [--list]
  --quick        5 shorter repetitions, all cores only (about half the time)
  --json FILE    also write the results as JSON
  --markdown     also append the run (date, commit, machine, table) to bench/RESULTS.md;
                 --markdown=FILE appends to FILE instead
  --no-ref       dle only, no C or PyTorch reference
  --filter LIST  only the figures whose key contains one of the comma-separated strings
  --threads LIST thread settings (default: 1 and all cores; --quick: all cores)
  --list         print the figures' keys and names and exit]==]

local function split_list(s)
  local out = {}
  for item in s:gmatch("[^,%s]+") do out[#out + 1] = item end
  return out
end

--- Parses the argument list.
-- @param args the script's arguments (arg)
-- @param cores the number of cores ("all cores")
-- @return opts {quick, json, markdown (a path or nil), ref, filter (list or nil), threads (list), list,
--   help}, or nil and a
--   message
function M.parse(args, cores, default_markdown)
  local opts = {quick = false, json = nil, markdown = nil, ref = true, filter = nil, threads = nil, list = false,
                help = false}
  local takes_value = {["--json"] = true, ["--filter"] = true, ["--threads"] = true}
  local i = 1
  while i <= #args do
    local a, v = args[i], nil
    if takes_value[a] then
      i = i + 1
      v = args[i]
      if not v then return nil, a .. " needs a value" end
    end
    if a == "--quick" then opts.quick = true
    elseif a == "--json" then opts.json = v
    elseif a == "--markdown" then opts.markdown = default_markdown
    elseif a:match("^%-%-markdown=") then
      opts.markdown = a:match("^%-%-markdown=(.*)$")
      if opts.markdown == "" then return nil, "--markdown= needs a file name" end
    elseif a == "--no-ref" then opts.ref = false
    elseif a == "--filter" then opts.filter = split_list(v)
    elseif a == "--threads" then
      opts.threads = {}
      for _, t in ipairs(split_list(v)) do
        local n = math.tointeger(tonumber(t))
        if not n or n < 1 then return nil, "--threads needs positive integers, got " .. t end
        opts.threads[#opts.threads + 1] = n
      end
      if #opts.threads == 0 then return nil, "--threads needs a list such as 1,2" end
    elseif a == "--list" then opts.list = true
    elseif a == "-h" or a == "--help" then opts.help = true
    else return nil, "unknown option " .. a .. "\n" .. M.USAGE end
    i = i + 1
  end
  -- --quick measures at all cores only, unless --threads says otherwise
  opts.threads = opts.threads or ((cores == 1 or opts.quick) and {cores} or {1, cores})
  return opts
end

return M
