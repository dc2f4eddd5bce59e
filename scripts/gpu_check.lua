--- scripts/gpu_check.lua — the logic of scripts/gpu-check (which builds first, then runs this with
-- scripts/dle): validates dle's CUDA backend on this machine's GPU against the CPU.
--   1. every op of the op table on random inputs, on the GPU and on the CPU, in every dtype the CPU
--      takes: the normalized error max |gpu - cpu| / (max |cpu| + eps) per op, flagged beyond the
--      dtype's tolerance (scripts/gpu_check/ops.lua, compare.lua)
--   2. one training step of each example's model on the GPU against the CPU (examples.lua)
--   3. dle.dist's collectives on GPU tensors in a world of one process (NCCL)
--   4. float32 matmul GFLOP/s and MFU, device-to-device copy GB/s (bench.lua)
-- Without a GPU it says so and exits 0. Exit status 1 when anything is flagged or fails.
--   scripts/dle scripts/gpu_check.lua [--device cuda:0] [--reference cpu] [--only PATTERN]
--       [--skip-ops] [--skip-examples] [--skip-bench] [--bench-n 4096] [--copy-mb 256]
-- --device cpu runs every check CPU against CPU (how tests/gpu_check_spec.lua exercises it).
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local dle = require("dle")
local compare = require("gpu_check.compare")

local cli = require("argparse")("gpu-check", "Validates dle's CUDA backend against the CPU.")
cli:option("--device", "the device to check", "cuda")
cli:option("--reference", "the device it is compared with", "cpu")
cli:option("--only", "only ops whose name matches this Lua pattern")
cli:flag("--skip-ops", "skip the op comparison")
cli:flag("--skip-examples", "skip the examples' training steps")
cli:flag("--skip-bench", "skip the benchmark")
cli:option("--bench-n", "matmul size of the benchmark", 4096, math.tointeger)
cli:option("--copy-mb", "megabytes copied by the benchmark", 256, math.tointeger)
local args = cli:parse(arg)

local t_start = dle.time()
local device = args.device
local on_cuda = device:match("^cuda") ~= nil
print(string.format("gpu-check: dle %s, checking %s against %s", dle.version, device,
                    args.reference))
if on_cuda then
  local ok, why = dle.cuda_available()
  if not ok then
    print("gpu-check: no GPU: " .. tostring(why))
    print("gpu-check: nothing to validate on this machine (no CUDA code ran); run scripts/gpu-check on a machine "
          .. "with an NVIDIA GPU and its driver")
    os.exit(0)
  end
end

-- device properties and a synchronize, where the CUDA runtime module was built
local info = on_cuda and select(2, pcall(require, "dle.cuda_info")) or nil
if type(info) ~= "table" then info = nil end
local index = math.tointeger(tonumber(device:match(":(%d+)$") or "0"))
local props = info and info.properties(index)
if props then
  print(string.format("gpu-check: %s (compute capability %d.%d, %d SMs, %.2f GB)", props.name, props.major,
                      props.minor, props.sm_count, props.total_memory / 2 ^ 30))
end

local bad = 0
local function section(title) print("\n== " .. title) end

if not args.skip_ops then
  section("ops of the op table: normalized error max |device - reference| / (max |reference| + eps)")
  local kernels
  if on_cuda then
    kernels = {}
    for _, name in ipairs(assert(dle.core._kernel_ops("cuda"))) do kernels[name] = true end
  end
  bad = bad + compare.report(compare.run_ops({device = device, reference = args.reference, only = args.only,
                                              kernels = kernels}))
end

if not args.skip_examples then
  section("one training step of each example's model (loss, gradients, parameters after the step)")
  local examples = require("gpu_check.examples")
  bad = bad + examples.report(examples.run({device = device, reference = args.reference}))
end

section("dle.dist collectives on " .. device .. " tensors (a world of one process" .. (on_cuda and ", NCCL)" or ")"))
do
  local available, why = dle.dist.is_available()
  if not available then
    print("skipped: " .. why)
  else
    local ok, err = pcall(function()
      dle.dist.init()
      local t = dle.arange(1, 7, 1, {device = device}):view(2, 3):t()   -- non-contiguous: the staging copy
      dle.dist.all_reduce(t, "sum")
      dle.dist.broadcast(t, 0)
      local out = {dle.zeros({3, 2}, {device = device})}
      dle.dist.all_gather(out, t)
      local r = dle.zeros({3, 2}, {device = device})
      dle.dist.reduce_scatter(r, {t}, "max")
      local want = dle.arange(1, 7):view(2, 3):t()
      for _, got in ipairs({t, out[1], r}) do
        if compare.normalized_error(got:cpu(), want) ~= 0 then
          error("a collective changed the values: " .. tostring(got:cpu()))
        end
      end
    end)
    if ok then
      print("ok: all_reduce, broadcast, all_gather, reduce_scatter")
    else
      bad = bad + 1
      print("FAILED: " .. tostring(err))
    end
  end
end

if not args.skip_bench then
  section("benchmark on " .. device)
  local bench = require("gpu_check.bench")
  local sync = info and function() info.synchronize(index) end or nil
  local r = bench.run({device = device, n = args.bench_n, copy_mb = args.copy_mb, props = props, sync = sync})
  for _, line in ipairs(r.lines) do print(line) end
end

print(string.format("\ngpu-check: %s in %.1f s", bad == 0 and "everything agrees" or (bad .. " flagged or failed"),
                    dle.time() - t_start))
os.exit(bad == 0 and 0 or 1)
