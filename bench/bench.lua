--- bench/bench.lua — dle's benchmark harness (run it with scripts/bench; see its --help).
-- The figures are the entries of bench/entries_*.lua: each has a dle side (a function returning
-- the loop body, so setup is not timed) and references: the C program build/bin/bench_ref
-- (cblas_sgemm, STREAM triad), PyTorch (bench/torch_side.py, one Python process per thread
-- setting) or a Lua-timed command. Every side is timed as bench/timing.lua describes, at 1 thread
-- and at all cores, each figure's references right after dle's side (on a shared machine the load
-- then changes less in between); bench/report.lua prints the table and writes the JSON.
local dle = require("dle")

local root = (arg[0]:match("^(.*)/bench/[^/]*$") or ".")
package.path = root .. "/?.lua;" .. package.path
local timing = require("bench.timing")
local references = require("bench.references")
local report = require("bench.report")

-- The entry files run in this order, then any other bench/entries_*.lua (a new op family's) by name.
local FIRST = {"matmul", "memory", "nn", "autograd", "overhead", "train"}
local function families()
  local list, seen = {}, {}
  for _, f in ipairs(FIRST) do
    list[#list + 1], seen[f] = f, true
  end
  local more = {}
  local p = io.popen("ls '" .. root .. "/bench'")
  for name in (p and p:lines() or function() end) do
    local f = name:match("^entries_(.+)%.lua$")
    if f and not seen[f] then more[#more + 1] = f end
  end
  if p then p:close() end
  table.sort(more)
  for _, f in ipairs(more) do list[#list + 1] = f end
  return list
end

local function die(msg)
  io.stderr:write("bench: ", msg, "\n")
  os.exit(2)
end

-- all cores: the processors available (nproc without the OpenMP variables it would honour)
local function count_cores()
  local p = io.popen("env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null")
  local n = p and tonumber(p:read("l") or "")
  if p then p:close() end
  return math.tointeger(n) or dle.get_num_threads()
end
local cores = count_cores()
local options = require("bench.options")
local opts, err = options.parse(arg, cores, root .. "/bench/RESULTS.md")
if not opts then die(err) end
if opts.help then print(options.USAGE); os.exit(0) end
local target = opts.quick and 0.02 or 0.1     -- seconds per repetition
local reps = opts.quick and 5 or 7
local python = os.getenv("DLE_BENCH_PYTHON") or "/usr/bin/python3"   -- the PyTorch side's interpreter
local build = os.getenv("DLE_BUILD") or "build"
if build:sub(1, 1) ~= "/" then build = root .. "/" .. build end

-- ---------------------------------------------------------------- entries

local STREAM_N = 32 * 1024 * 1024          -- floats per STREAM array: 128 MB, 4x the L3 cache

-- Bytes beyond its result that fn() allocates: current allocation is first raised to the peak with
-- a filler, so the peak counter then grows by exactly what fn allocates and keeps.
local function extra_bytes(fn)
  collectgarbage()
  collectgarbage()
  local filler = dle.empty(math.max(1, (dle.core.memory_peak() - dle.core.memory_allocated()) // 4 + 1))
  local base = dle.core.memory_peak()
  local out = fn()
  assert(filler:numel() > 0)   -- the filler stays alive until the peak is read
  return dle.core.memory_peak() - base - out:numel() * 4
end

local ctx = {
  dle = dle, root = root, cores = cores, python = python, quick = opts.quick,
  shell_quote = references.shell_quote,
  stream_task = function(kind) return kind .. ":" .. STREAM_N end,
  torch_importable = function() return references.torch_importable(python) end,
  extra_bytes = extra_bytes,
}

local entries = {}
for _, fam in ipairs(families()) do
  for _, e in ipairs(require("bench.entries_" .. fam)(ctx)) do
    local keep = not opts.filter
    for _, f in ipairs(opts.filter or {}) do
      if e.key:find(f, 1, true) then keep = true end
    end
    if keep then entries[#entries + 1] = e end
  end
end
if opts.list then
  for _, e in ipairs(entries) do print(string.format("%-14s %s", e.key, e.name)) end
  os.exit(0)
end
if #entries == 0 then die("no figure matches --filter " .. table.concat(opts.filter, ",")) end

-- ---------------------------------------------------------------- measuring

local function loadavg()
  local f = io.open("/proc/loadavg")
  local s = f and f:read("l") or "?"
  if f then f:close() end
  return s:match("^(%S+ %S+ %S+)") or s
end

local clock0 = dle.time()
local function progress(fmt, ...)
  io.stderr:write(string.format("bench: [%5.1f s] ", dle.time() - clock0), string.format(fmt, ...), "\n")
end

-- In a function of its own, so that the body (and what it holds) is garbage once it returns.
local function measure_body(e)
  local body = e.dle()
  timing.settle(body, dle.core.memory_allocated, dle.time)
  return timing.measure(body, dle.time, target, reps)
end

local function measure_dle(e)
  local s = measure_body(e)
  collectgarbage()
  collectgarbage()
  return s
end

local notes, torch_version, measurements, stream = {}, nil, {}, {}
local function note(s)
  for _, n in ipairs(notes) do if n == s then return end end
  notes[#notes + 1] = s
end
local load_start = loadavg()
local date = os.date("!%Y-%m-%d %H:%M UTC")   -- when the run started
local t_start = dle.time()

-- The references of one figure, measured right after dle's side (so both see the same load).
local function measure_refs(e, n, torch)
  local refs = {}
  for i, r in ipairs(e.refs or {}) do
    local ref = {label = r.label}
    refs[i] = ref
    if not opts.ref then ref.skipped = "--no-ref"
    elseif r.skipped then ref.skipped = r.skipped
    elseif r.kind == "lua" then ref.seconds = timing.measure(r.fn(), dle.time, target, reps)
    elseif r.kind == "c" then
      local res, c_note = references.run_c(build .. "/bin/bench_ref", {r.task}, n, target, reps)
      if c_note then note(c_note) end
      ref.rate = res[r.task]
      if not ref.rate then ref.skipped = "no bench_ref result" end
    elseif r.kind == "torch" then
      local t = torch and torch.measure({key = e.key, setup = r.setup, body = r.body})
      if t and not t.error then ref.seconds = t
      else ref.skipped = t and ("error: " .. t.error) or "PyTorch not available" end
      if t and t.error then note("PyTorch error in " .. e.key .. ": " .. t.error) end
    end
  end
  return refs
end

local function uses(list, kind)
  for _, e in ipairs(list) do
    for _, r in ipairs(e.refs or {}) do if r.kind == kind and not r.skipped then return true end end
  end
  return false
end

-- Waits `seconds` (nil: not at all) before a figure that needs the other core quiet: after a
-- product, OpenBLAS's worker threads (dle's and PyTorch's) spin for about 0.6 s on this VM, and
-- meanwhile a one-thread loop of `c = a + b` ran 0.31 us instead of 0.19.
local function idle(seconds)
  if seconds and not opts.quick then os.execute(string.format("sleep %.2f", seconds)) end
end

-- Measures `list` at `threads` (a number, or "process" for whole-process figures): for each
-- figure dle's side, then its references.
local function run_setting(list, threads)
  if #list == 0 then return end
  local n = threads == "process" and cores or threads
  dle.set_num_threads(n)
  if opts.ref and uses(list, "c") then   -- the STREAM figures of the header
    local copy, triad = ctx.stream_task("copy"), ctx.stream_task("triad")
    progress("%s thread(s): STREAM", tostring(threads))
    local res, c_note = references.run_c(build .. "/bin/bench_ref", {copy, triad}, n, target, reps)
    if c_note then note(c_note) end
    if res[copy] and res[triad] then stream[tostring(threads)] = {copy = res[copy], triad = res[triad]} end
  end
  local torch
  if opts.ref and uses(list, "torch") then
    if references.torch_importable(python) then
      local t_note
      torch, t_note = references.torch_server(python, root .. "/bench/torch_side.py", n, target, reps)
      if torch then torch_version = torch_version or torch.version end
      if t_note then note(t_note) end
    else
      note("PyTorch is not importable by " .. python .. ": its references are skipped")
    end
  end
  for _, e in ipairs(list) do
    progress("%s thread(s): %s", tostring(threads), e.key)
    -- figures whose ratio sits near its bound (e.rounds) alternate dle and references over rounds
    local rounds = opts.quick and 1 or (e.rounds or 1)
    local dle_rounds, ref_rounds = {}, {}
    for r = 1, rounds do
      idle(e.idle_before)
      dle_rounds[r] = measure_dle(e)
      idle(e.idle_before)
      ref_rounds[r] = measure_refs(e, n, torch)
    end
    local m = {entry = e, threads = threads, dle = timing.combine(dle_rounds),
               refs = references.combine_rounds(ref_rounds, timing.combine)}
    if e.check and (threads == opts.threads[1] or threads == "process") then m.check = e.check() end
    measurements[#measurements + 1] = m
  end
  if torch then torch.close() end
end

local per_process, per_thread = {}, {}
for _, e in ipairs(entries) do
  if e.threads == "process" then per_process[#per_process + 1] = e else per_thread[#per_thread + 1] = e end
end
for _, t in ipairs(opts.threads) do run_setting(per_thread, t) end
run_setting(per_process, "process")
dle.set_num_threads(cores)

-- ---------------------------------------------------------------- report

local function first_line(cmd)
  local p = io.popen(cmd)
  local s = p and p:read("l") or nil
  if p then p:close() end
  return s
end
local cpu = first_line("lscpu 2>/dev/null | sed -n 's/^Model name: *//p'") or "?"
local rows = report.rows(measurements)
local load_end = loadavg()

-- The run's description: printed as "# " comment lines and written to the markdown log.
local head = {
  string.format("dle %s benchmarks, %s, %s mode: median [min..max] of %d repetitions (~%g s each) after warm-up",
    dle.version, date, opts.quick and "quick" or "full", reps, target),
  string.format("machine: %s, %d cores; load average %s at start, %s at end; %.0f s",
    cpu, cores, load_start, load_end, dle.time() - t_start),
  "references: C = build/bin/bench_ref (OpenBLAS cblas_sgemm, STREAM triad over " .. STREAM_N .. " floats), "
    .. (torch_version and ("PyTorch " .. torch_version) or "PyTorch (not run)")
    .. " at the same thread count (OMP/OpenBLAS threads = the count, OMP_WAIT_POLICY passive as in dle)",
  "dle/ref: for rates (GFLOP/s, GB/s) above 1 = dle faster; for times (us, ms, s) below 1 = dle faster",
}
for _, t in ipairs(opts.threads) do
  local s = stream[tostring(t)]
  if s and s.copy and s.triad then
    head[#head + 1] = string.format("STREAM at %d thread(s): copy %.1f GB/s, triad %.1f GB/s", t, s.copy.median,
                                    s.triad.median)
  end
end
for _, line in ipairs(head) do print("# " .. line) end
report.print_table(rows)
for _, n in ipairs(notes) do print("# note: " .. n) end

if opts.markdown then
  local commit = first_line("git -C " .. references.shell_quote(root) .. " describe --always --dirty 2>/dev/null")
      or "unknown"
  local command = "scripts/bench" .. (#arg > 0 and (" " .. table.concat(arg, " ")) or "")
  report.append_markdown(opts.markdown, {title = date .. " on " .. commit, command = command, head = head,
                                         rows = rows, notes = notes})
  print("# appended to " .. opts.markdown)
end

if opts.json then
  report.write_json(opts.json, {
    dle_version = dle.version, date = date, mode = opts.quick and "quick" or "full", reps = reps,
    seconds_per_repetition = target, threads = opts.threads,
    machine = {cpu = cpu, cores = cores, load_start = load_start, load_end = load_end},
    pytorch = torch_version or false, stream = stream, notes = notes, rows = rows,
    ratio = "dle/ref in the figure's unit: rates above 1 or times below 1 mean dle is faster",
  })
  print("# wrote " .. opts.json)
end
