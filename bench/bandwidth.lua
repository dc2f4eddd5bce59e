--- bench/bandwidth.lua — memory bandwidth of elementwise ops, copies, reductions and softmax on
-- 16M float32 (all threads), as GB/s = bytes read + written / time. Two figures per op: from the
-- median wall time, and from the best process CPU time divided by the thread count ("cpu"), which
-- stays meaningful when other jobs share the cores. Compare with bench/stream_triad.c (~40 GB/s
-- cpu-time on the 2-core AVX2 box) run just before or after.
-- Usage: scripts/dle bench/bandwidth.lua [reps] [lua pattern selecting op names]
local dle = require "dle"
local reps = tonumber(arg and arg[1]) or 7
local pattern = arg and arg[2]
local N = 16 * 1024 * 1024
local MB = N * 4

local function measure(f)
  f()  -- warm-up (also fills the allocator cache)
  local t, cpu = {}, math.huge
  for i = 1, reps do
    collectgarbage()  -- the last result goes back to the allocator's cache: no page faults timed
    collectgarbage()
    local t0, c0 = dle.time(), os.clock()
    f()
    t[i] = dle.time() - t0
    cpu = math.min(cpu, os.clock() - c0)
  end
  table.sort(t)
  return t[(reps + 1) // 2], cpu
end

local a, b = dle.randn(N), dle.randn(N)
local pos = dle.rand(N) + 0.5
local at, bt = dle.randn(4096, 4096):t(), dle.randn(4096, 4096)  -- at: transposed view
local m = dle.randn(4096, 4096)
local s2 = dle.randn(4096, 1024)

local cases = {
  {"copy (contiguous a:clone())", 2, function() return a:clone() end},
  {"add a + b", 3, function() return a + b end},
  {"mul a * b", 3, function() return a * b end},
  {"exp", 2, function() return a:exp() end},
  {"log", 2, function() return pos:log() end},
  {"tanh", 2, function() return a:tanh() end},
  {"sigmoid", 2, function() return a:sigmoid() end},
  {"gelu", 2, function() return a:gelu() end},
  {"silu", 2, function() return a:silu() end},
  {"add transposed at + bt", 3, function() return at + bt end},
  {"mul transposed at * bt", 3, function() return at * bt end},
  {"exp transposed", 2, function() return at:exp() end},
  {"contiguous() of transposed", 2, function() return at:contiguous() end},
  {"sum over last dim 4096x4096", 1, function() return m:sum(2) end},
  {"sum over dim 1 4096x4096", 1, function() return m:sum(1) end},
  {"softmax rows 4096x1024", 2 / 4, function() return s2:softmax(2) end},
  {"log_softmax rows 4096x1024", 2 / 4, function() return s2:log_softmax(2) end},
  {"logsumexp rows 4096x1024", 1 / 4, function() return s2:logsumexp(2) end},
}

local nt = dle.get_num_threads()
print(string.format("threads %d, %d reps: GB/s from the median wall time | from the best cpu time / threads", nt, reps))
for _, c in ipairs(cases) do
  local name, narr, f = c[1], c[2], c[3]
  if not pattern or name:find(pattern) then
    local med, cpu = measure(f)
    local bytes = narr * MB
    print(string.format("%-34s %6.1f | %5.1f GB/s", name, bytes / med / 1e9, bytes / (cpu / nt) / 1e9))
  end
end
