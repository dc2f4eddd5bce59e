--- bench/references.lua — runs the reference sides of scripts/bench in child processes:
-- build/bin/bench_ref (cblas_sgemm, STREAM copy/triad; one short run per figure) and
-- bench/torch_side.py (one Python process per thread setting, serving every PyTorch figure). Each child gets
-- OMP_NUM_THREADS and OPENBLAS_NUM_THREADS set to the thread count, and the OpenMP wait policy dle's loader picks
-- (OMP_WAIT_POLICY=passive unless the environment sets one: with spinning OpenMP workers next to
-- OpenBLAS's threads, PyTorch's 2-thread MLP step measured 254 ms instead of 13 ms here); other
-- OpenBLAS variables are left as they are.
local json = require("bench.json")

local M = {}

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
M.shell_quote = sh_quote

local function env_prefix(threads)
  return string.format("OMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d OMP_WAIT_POLICY=%s ", threads, threads,
    sh_quote(os.getenv("OMP_WAIT_POLICY") or "passive"))
end

local function read_cmd(cmd)
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("a")
  local ok, _, code = p:close()
  return out, ok, code
end

--- bench_ref's figures for a list of tasks ("sgemm:M:N:K", "triad:N", ...).
-- @return results (task -> {median, min, max, iters, unit}, rates), note (string or nil)
function M.run_c(exe, tasks, threads, target, reps)
  if #tasks == 0 then return {}, nil end
  local f = io.open(exe, "r")
  if not f then return {}, exe .. " not found (scripts/build builds it): C reference skipped" end
  f:close()
  local args = {}
  for i, t in ipairs(tasks) do args[i] = sh_quote(t) end
  local cmd = string.format("%s%s --threads %d --target %.6g --reps %d %s 2>&1", env_prefix(threads), sh_quote(exe),
    threads, target, reps, table.concat(args, " "))
  local out = read_cmd(cmd)
  local res, errors = {}, {}
  for line in out:gmatch("[^\n]+") do
    local task, med, mn, mx, it, unit = line:match("^(%S+) (%S+) (%S+) (%S+) (%d+) (%S+)$")
    if task and tonumber(med) then
      res[task] = {median = tonumber(med), min = tonumber(mn), max = tonumber(mx), iters = tonumber(it), reps = reps,
                   unit = unit}
    elseif line:match("^%S+ error ") then
      errors[#errors + 1] = line
    end
  end
  local note
  if #errors > 0 then note = "bench_ref: " .. table.concat(errors, "; ") end
  return res, note
end

--- The references of a figure measured in several rounds (lists as bench.lua's measure_refs
-- returns, one per round) as one list: each reference's rounds combined by `combine`
-- (timing.combine), or the first round's entry when a round skipped it.
function M.combine_rounds(rounds, combine)
  local out = {}
  for i, first in ipairs(rounds[1]) do
    local seconds, rates = {}, {}   -- appended, so a round without the value leaves them short
    for _, refs in ipairs(rounds) do
      seconds[#seconds + 1], rates[#rates + 1] = refs[i].seconds, refs[i].rate
    end
    if #seconds == #rounds then out[i] = {label = first.label, seconds = combine(seconds)}
    elseif #rates == #rounds then out[i] = {label = first.label, rate = combine(rates)}
    else out[i] = first end
  end
  return out
end

--- Starts the PyTorch side (bench/torch_side.py) at `threads`: a Python process that answers one
-- request at a time, so each PyTorch figure is measured right after dle's. Requests go through a
-- FIFO that the shell keeps open (fd 3) until we close it, so writing never meets a closed pipe
-- even if Python dies; the shell then prints "EXITED status".
-- @return server {version = string, measure = fn({key, setup, body}) -> stats | {error = msg},
--   close = fn()}, or nil and a note
function M.torch_server(python, script, threads, target, reps)
  local fifo = os.tmpname()
  os.remove(fifo)
  if not os.execute("mkfifo " .. sh_quote(fifo)) then return nil, "mkfifo failed: PyTorch reference skipped" end
  local cmd = string.format('exec 3<%s; %s%s %s %d %.6g %d <&3 2>&1; echo "EXITED $?"; cat <&3 >/dev/null',
    sh_quote(fifo), env_prefix(threads), sh_quote(python), sh_quote(script), threads, target, reps)
  local out = assert(io.popen(cmd, "r"))
  local w = assert(io.open(fifo, "w"))   -- meets the shell's `exec 3<`
  os.remove(fifo)
  local alive, lines = true, {}
  -- the next line that `accept` recognises (other output, e.g. warnings, is kept for messages)
  local function next_line(accept)
    while alive do
      local line = out:read("l")
      if not line or line:match("^EXITED ") then
        alive = false
        return nil
      end
      if accept(line) then return line end
      lines[#lines + 1] = line
    end
  end
  local function output() return table.concat(lines, " | "):sub(-300) end
  local server = {}
  function server.close()
    w:close()
    out:close()
  end
  local first = next_line(function(l) return l:match("^VERSION ") or l:match("^NOTORCH") end)
  if not first or first:match("^NOTORCH") then
    server.close()
    return nil, first and ("PyTorch not importable by " .. python .. " (" .. first:sub(9) .. "): reference skipped")
      or ("the PyTorch reference failed to start: " .. output())
  end
  server.version = first:sub(9)
  function server.measure(req)
    if not alive then return {error = "the PyTorch process exited: " .. output()} end
    w:write(json.encode(req), "\n")
    w:flush()
    local prefix = req.key .. " "
    local line = next_line(function(l) return l:sub(1, #prefix) == prefix end)
    if not line then return {error = "the PyTorch process exited: " .. output()} end
    local msg = line:match("^%S+ ERROR (.*)$")
    if msg then return {error = msg} end
    local med, mn, mx, it = line:match("^%S+ (%S+) (%S+) (%S+) (%d+)$")
    if not tonumber(med) then return {error = "unreadable answer: " .. line} end
    return {median = tonumber(med), min = tonumber(mn), max = tonumber(mx), iters = tonumber(it), reps = reps}
  end
  return server
end

--- Whether `python` can import torch (asked once).
local importable = {}
function M.torch_importable(python)
  if importable[python] == nil then
    importable[python] = os.execute(sh_quote(python) .. " -c 'import torch' >/dev/null 2>&1") == true
  end
  return importable[python]
end

return M
