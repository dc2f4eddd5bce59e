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

--- One figure's side measured in several rounds (alternating with the other side, so drift of
-- the machine's speed falls on both): the median of the rounds' medians, the extreme min and max,
-- all repetitions counted.
-- @param list of stats (as from M.measure), at least one
function M.combine(list)
  if #list == 1 then return list[1] end
  local medians, out = {}, {min = math.huge, max = -math.huge, reps = 0, iters = list[1].iters, unit = list[1].unit}
  for i, s in ipairs(list) do
    medians[i] = s.median
    out.min, out.max, out.reps = math.min(out.min, s.min), math.max(out.max, s.max), out.reps + s.reps
  end
  out.median = M.stats(medians).median
  out.rounds = #list
  return out
end

--- Calls body until the memory it keeps in use is in its steady state, as bench_ref's and
-- PyTorch's already are (they reuse one output): before that dle's loop maps fresh memory, whose
-- first-touch page faults (hundreds of ms for 64 MB under virtualisation) would land in the timed
-- repetitions. Results pile up as garbage until a full collection (bindings/lua_core.c: once
-- native memory has grown by a quarter of the live memory, at least 64 MB; 250 calls for a 256 KB
-- result), after which the allocator reuses the freed blocks. So: stop once memory has grown by less than
-- 64 KiB a call for 3 calls (nothing, or next to nothing, piles up) or after 2 collections (the
-- first one's interval may be left over from the previous figure), within 4096 calls and 3 s.
-- The former rule (until the all-time peak stops growing, at most 16 calls) stopped early when
-- an earlier figure had set a higher peak, or before the first collection: matmul 128x784 @
-- 784x512 then page-faulted 65 pages per call, 1024x1024 a fresh 4 MB output per repetition.
-- @param memory function returning the bytes in use (dle.core.memory_allocated)
-- @return the number of calls made
function M.settle(body, memory, clock)
  local t0, prev, flat, collections = clock(), memory(), 0, 0
  for calls = 1, 4096 do
    body()
    local now = memory()
    if now < prev then collections = collections + 1 end
    flat = now - prev >= 64 * 1024 and 0 or flat + 1
    prev = now
    if flat >= 3 or collections >= 2 or clock() - t0 > 3 then return calls end
  end
  return 4096
end

return M
