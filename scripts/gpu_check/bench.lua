--- scripts/gpu-check's benchmark: float32 matmul throughput (GFLOP/s) against the device's peak
-- (MFU), and device-to-device copy bandwidth (GB/s) against its peak, the peaks computed from the
-- device's properties (dle.cuda_info) where the compute capability is known.
local dle = require("dle")

local M = {}

-- float32 lanes per SM by compute capability (CUDA C Programming Guide, arithmetic instructions)
local FP32_PER_SM = {["7.0"] = 64, ["7.2"] = 64, ["7.5"] = 64, ["8.0"] = 64, ["8.6"] = 128, ["8.7"] = 128,
                     ["8.9"] = 128, ["9.0"] = 128, ["10.0"] = 128, ["10.3"] = 128, ["12.0"] = 128, ["12.1"] = 128}

--- M.peaks(props) -> peak float32 FLOP/s (2 per fused multiply-add per lane per clock) and peak
-- memory bytes/s (double data rate over the bus), each nil when the properties do not give it.
function M.peaks(props)
  local lanes = FP32_PER_SM[props.major .. "." .. props.minor]
  local flops = lanes and props.sm_count > 0 and props.clock_khz > 0
    and 2 * props.sm_count * lanes * props.clock_khz * 1e3 or nil
  local bytes = props.memory_clock_khz > 0 and props.bus_width_bits > 0
    and 2 * props.memory_clock_khz * 1e3 * props.bus_width_bits / 8 or nil
  return flops, bytes
end

-- Seconds per call of f, the mean over enough calls to fill min_seconds (at least 3), after one
-- untimed call; sync() waits for the device.
local function time_per_call(f, sync, min_seconds)
  f()
  sync()
  local n, t0 = 0, dle.time()
  repeat
    f()
    n = n + 1
    if n >= 3 then sync() end
  until n >= 3 and dle.time() - t0 >= min_seconds
  return (dle.time() - t0) / n
end

--- M.run(opts) -> {gflops, copy_gbs, peak_gflops, peak_gbs, mfu, bw_fraction, lines}: opts.device,
-- opts.n (matmul size, default 4096), opts.copy_mb (default 256), opts.sync (waits for the device;
-- default: reading one element back), opts.props (device properties, for the peaks), opts.seconds
-- (time per measurement, default 0.5).
function M.run(opts)
  local n, mb, device = opts.n or 4096, opts.copy_mb or 256, opts.device
  local sync = opts.sync or function() end
  local a = dle.randn({n, n}, {device = device})
  local b = dle.randn({n, n}, {device = device})
  local t = time_per_call(function() return a:matmul(b) end, sync, opts.seconds or 0.5)
  local r = {gflops = 2 * n ^ 3 / t / 1e9}
  local elems = mb * 1024 * 1024 // 4
  local src = dle.empty({elems}, {device = device}):fill_(1)
  local dst = dle.empty({elems}, {device = device})
  t = time_per_call(function() dst:copy_(src) end, sync, opts.seconds or 0.5)
  r.copy_gbs = 2 * elems * 4 / t / 1e9   -- read and written
  local peak_flops, peak_bytes
  if opts.props then peak_flops, peak_bytes = M.peaks(opts.props) end
  r.lines = {string.format("sgemm %dx%d float32: %.1f GFLOP/s", n, n, r.gflops)}
  if peak_flops then
    r.peak_gflops, r.mfu = peak_flops / 1e9, r.gflops * 1e9 / peak_flops
    r.lines[1] = r.lines[1] .. string.format(" of a %.1f GFLOP/s float32 peak: MFU %.1f%%", r.peak_gflops, 100 * r.mfu)
  else
    r.lines[1] = r.lines[1] .. " (peak not computable from the device properties)"
  end
  r.lines[2] = string.format("device-to-device copy of %d MB: %.1f GB/s (bytes read + written)", mb, r.copy_gbs)
  if peak_bytes then
    r.peak_gbs, r.bw_fraction = peak_bytes / 1e9, r.copy_gbs * 1e9 / peak_bytes
    r.lines[2] = r.lines[2] .. string.format(" of a %.1f GB/s memory peak (%.1f%%)", r.peak_gbs, 100 * r.bw_fraction)
  end
  return r
end

return M
