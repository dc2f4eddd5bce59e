--- bench/references.lua — runs the reference sides of scripts/bench in child processes, one per
-- thread setting: build/bin/bench_ref (cblas_sgemm, STREAM copy/triad) and bench/torch_side.py
-- (every PyTorch figure in one Python process). Each child gets OMP_NUM_THREADS and
-- OPENBLAS_NUM_THREADS set to the thread count, and the OpenMP wait policy dle's loader picks
-- (OMP_WAIT_POLICY=passive unless the environment sets one: with spinning OpenMP workers next to
-- OpenBLAS's threads, PyTorch's 2-thread MLP step measured 254 ms instead of 13 ms here); other
-- OpenBLAS variables are left as they are.
local json = require "bench.json"

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

--- PyTorch's times for entries {key, setup, body} in one Python process.
-- @return results (key -> stats of seconds per iteration), version (or nil), note (or nil)
function M.run_torch(python, script, entries, threads, target, reps)
  if #entries == 0 then return {}, nil, nil end
  local spec = {threads = threads, target = target, reps = reps, entries = entries}
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(json.encode(spec))
  f:close()
  local out = read_cmd(env_prefix(threads) .. sh_quote(python) .. " " .. sh_quote(script) .. " " .. sh_quote(path) .. " 2>&1")
  os.remove(path)
  local res, version, note, errors = {}, nil, nil, {}
  for line in out:gmatch("[^\n]+") do
    local key, med, mn, mx, it = line:match("^(%S+) (%S+) (%S+) (%S+) (%d+)$")
    if key and tonumber(med) then
      res[key] = {median = tonumber(med), min = tonumber(mn), max = tonumber(mx), iters = tonumber(it), reps = reps}
    elseif line:match("^NOTORCH") then
      note = "PyTorch not importable by " .. python .. " (" .. line:sub(9) .. "): reference skipped"
    elseif line:match("^VERSION ") then
      version = line:sub(9)
    elseif line:match("^%S+ ERROR ") then
      local k, msg = line:match("^(%S+) ERROR (.*)$")
      res[k] = {error = msg}
      errors[#errors + 1] = k
    end
  end
  if not note and not version then note = "the PyTorch reference failed: " .. out:sub(1, 300) end
  if #errors > 0 then note = (note and note .. "; " or "") .. "PyTorch errors in " .. table.concat(errors, ", ") end
  return res, version, note
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
