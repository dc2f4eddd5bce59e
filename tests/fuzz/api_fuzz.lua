--- api_fuzz.lua — the fuzz driver: random calls of dle's public Lua API (tests/fuzz/fuzzer.lua)
-- for a number of iterations or seconds, then a report of calls that misbehaved. A crash, an
-- abort or a sanitizer report ends the process: the log file's last line is the call that did it,
-- and `--only I` replays that iteration alone.
--   tests/fuzz/run [options]                       the same under the ASan build (see that script)
--   scripts/dle tests/fuzz/api_fuzz.lua [options]  against the release build
-- Options:
--   --seed S       random seed (default 1)
--   --iters N      iterations (default 1000000)    --from I   first iteration (default 1)
--   --seconds T    stop after T seconds of CPU time
--   --only I       run iteration I alone (prints its calls)
--   --targets P    only targets whose name matches the Lua pattern P (e.g. "^Tensor:", "nn%.")
--   --log FILE     write every call to FILE before making it (default /tmp/dle-fuzz-<seed>.log)
--   --list         print the target names and exit
-- Exit status: 0 when no call misbehaved (no hang, no non-string error, no unnamed error).
package.path = "tests/?.lua;" .. package.path
local fuzzer = require("fuzz.fuzzer")

local opts = {seed = 1, iters = 1000000, from = 1}
local i = 1
while i <= #arg do
  local a, v = arg[i], arg[i + 1]
  if a == "--seed" then opts.seed = math.tointeger(v); i = i + 1
  elseif a == "--iters" then opts.iters = math.tointeger(v); i = i + 1
  elseif a == "--from" then opts.from = math.tointeger(v); i = i + 1
  elseif a == "--seconds" then opts.seconds = tonumber(v); i = i + 1
  elseif a == "--only" then opts.only = math.tointeger(v); i = i + 1
  elseif a == "--targets" then opts.targets = v; i = i + 1
  elseif a == "--log" then opts.log = v; i = i + 1
  elseif a == "--list" then opts.list = true
  else io.stderr:write("api_fuzz: unknown option ", a, "\n"); os.exit(2) end
  i = i + 1
end

-- a private directory for the file scenarios
local tmpdir = os.tmpname()
os.remove(tmpdir)
assert(os.execute("mkdir -p '" .. tmpdir .. "'"))

local fz = fuzzer.new({seed = opts.seed, tmpdir = tmpdir, targets = opts.targets})
if opts.list then
  for _, t in ipairs(fz.targets) do print(t.name) end
  for _, t in ipairs(fz.typed) do print(t.name) end
  os.exit(0)
end
print(string.format("# api_fuzz: seed %d, %d targets + %d typed, tmpdir %s", opts.seed, #fz.targets, #fz.typed, tmpdir))

local first, last = opts.from, opts.from + opts.iters - 1
if opts.only then
  first, last = opts.only, opts.only
  fz.log = io.stdout
else
  local path = opts.log or string.format("/tmp/dle-fuzz-%d.log", opts.seed)
  fz.log = assert(io.open(path, "w"))
  print("# log: " .. path)
end

local t0 = os.time()
local done = fz:run(first, last, opts.seconds)
os.execute("rm -rf '" .. tmpdir .. "'")

local st = fz.stats
print(string.format("# iterations %d..%d: %d calls, %d returned, %d raised errors (%d s)",
  first, done, st.calls, st.ok, st.errors, os.time() - t0))

-- Problems, grouped by kind and target, with one example call each.
local groups, order = {}, {}
for _, p in ipairs(fz.problems) do
  local key = p.kind .. " | " .. p.target .. " | " .. tostring(p.message):gsub("%d+", "N"):sub(1, 160)
  if not groups[key] then
    groups[key] = {n = 0, p = p}
    order[#order + 1] = key
  end
  groups[key].n = groups[key].n + 1
end
table.sort(order)
for _, key in ipairs(order) do
  local g = groups[key]
  print(string.format("%s (x%d)\n    iter %d: %s\n    -> %s", key, g.n, g.p.iter, g.p.call or "?",
    tostring(g.p.message):sub(1, 300)))
end
print(string.format("# %d problems", #fz.problems))
os.exit(#fz.problems == 0 and 0 or 1)
