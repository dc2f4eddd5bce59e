--- bench/timing.lua — how every figure is timed (the Python and C references mirror it):
-- the iteration count n is calibrated so that one repetition lasts about `target` seconds (the
-- calibration calls, the first included, are the warm-up, plus one extra repetition of n when
-- calibration ended on another count), then `reps` repetitions of n iterations give seconds per iteration.
local M = {}

--- Median, min and max of a list of numbers (sorts it).
function M.stats(v)
  table.sort(v)
  local n = #v
  local med = n % 2 == 1 and v[(n + 1) // 2] or (v[n // 2] + v[n // 2 + 1]) / 2
  return {median = med, min = v[1], max = v[n], reps = n}
end

--- Times body() (no arguments) with clock (seconds).
-- @return stats of seconds per iteration, with .iters = n
function M.measure(body, clock, target, reps)
  local function run(n)
    local t0 = clock()
    for _ = 1, n do body() end
    return clock() - t0
  end
  local n, t = 1, run(1)      -- first call: lazy initialisation, page faults
  while t < target / 4 do
    n = n * 4
    t = run(n)
  end
  local last = n
  if t < target then n = math.ceil(n * target / t) end
  if n ~= last then run(n) end   -- warm-up repetition at the final count
  local per = {}
  for r = 1, reps do per[r] = run(n) / n end
  local s = M.stats(per)
  s.iters = n
  return s
end

return M
