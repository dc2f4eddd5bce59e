-- gpu_check_spec.lua — scripts/gpu-check (scripts/gpu_check.lua and scripts/gpu_check/*.lua). Here,
-- without a GPU: the command says so and exits 0; its comparison and reporting run CPU against CPU
-- (the --device argument), where every op of the op table must be visited and agree exactly, and a
-- result perturbed on purpose must be flagged.
local dle = require("dle")
local H = require("helpers")

local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$") or "."
if root:sub(1, 1) ~= "/" then root = os.getenv("PWD") .. "/" .. root end
package.path = root .. "/scripts/?.lua;" .. package.path
local compare = require("gpu_check.compare")
local examples = require("gpu_check.examples")
local bench = require("gpu_check.bench")

-- Output (stdout and stderr) and success of a shell command run at the root of the checkout.
local function sh(cmd)
  local p = assert(io.popen("cd '" .. root .. "' && (" .. cmd .. ") 2>&1"))
  local out = p:read("a")
  return out, p:close() == true
end

local function by_op(results) return H.index_by(results, "op") end

describe("scripts/gpu-check", function()
  it("without a GPU, says so clearly and exits 0", function()
    if dle.cuda_available() then return pending("a GPU is present") end
    local out, ok = sh("scripts/gpu-check")
    assert.is_true(ok, out)
    assert.truthy(out:find("gpu-check: no GPU: CUDA backend not available", 1, true), out)
    assert.truthy(out:find("nothing to validate on this machine (no CUDA code ran)", 1, true), out)
    assert.is_nil(out:find("== ops", 1, true), out)
  end)

  it("with --device cpu, runs every check CPU against CPU and reports each op, agreeing everywhere", function()
    local out, ok = sh("scripts/dle scripts/gpu_check.lua --device cpu --bench-n 128 --copy-mb 4")
    assert.is_true(ok, out)
    local n = #dle.core.op_table()
    assert.truthy(out:find("ops: " .. n .. " checked: " .. n .. " ok", 1, true), out)
    assert.truthy(out:match("\nmatmul +ok +0%.000e%+00"), out)
    assert.truthy(out:match("training steps: %d+ examples, 0 flagged or failed"), out)
    assert.truthy(out:find("ok: all_reduce, broadcast, all_gather, reduce_scatter", 1, true)
                  or out:find("skipped: ", 1, true), out)
    assert.truthy(out:match("sgemm 128x128 float32: [%d.]+ GFLOP/s"), out)
    assert.truthy(out:match("device%-to%-device copy of 4 MB: [%d.]+ GB/s"), out)
    assert.truthy(out:find("gpu-check: everything agrees", 1, true), out)
  end)
end)

describe("gpu-check's op comparison, CPU against CPU", function()
  local ops = dle.core.op_table()
  local results = compare.run_ops({device = "cpu", reference = "cpu"})

  it("visits every op of the op table: each op's case runs that op (dle.profile)", function()
    assert.are.equal(#ops, #results)
    local got = by_op(results)
    local not_run = {}
    for _, op in ipairs(ops) do
      local r = got[op.name]
      assert.is_table(r, op.name)
      if not r.ran[op.name] then not_run[#not_run + 1] = op.name end
    end
    assert.are.same({}, not_run)
  end)

  it("every op agrees exactly with itself, in at least one dtype", function()
    for _, r in ipairs(results) do
      assert.are.equal("ok", r.status, r.op .. ": " .. tostring(r.message))
      assert.are.equal(0, r.error, r.op)
      assert.is_true(#r.dtypes >= 1, r.op)
    end
    -- elementwise ops run in every dtype the CPU takes
    local add = by_op(results).add
    assert.are.same({"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool", "int8",
                      "int16"}, add.dtypes)
  end)

  it("flags a deliberately perturbed result beyond its dtype's tolerance, and only that op", function()
    local only = "^[ae][dx][dp]$"   -- add, exp
    local perturbed = compare.run_ops({device = "cpu", only = only, alter = function(op, dtype, outs)
      if op == "exp" and dtype == "float32" then outs[1] = outs[1] * (1 + 1e-3) end
      if op == "add" and dtype == "int64" then outs[1] = outs[1] + 1 end
      return outs
    end})
    local got = by_op(perturbed)
    assert.are.equal("FLAGGED", got.exp.status)
    assert.are.equal("float32", got.exp.dtype)
    assert.is_true(got.exp.error > compare.TOL.float32 and got.exp.error < 2e-3, tostring(got.exp.error))
    assert.are.equal("FLAGGED", got.add.status)
    assert.truthy(got.add.message:find("int64", 1, true), got.add.message)
    local lines = {}
    local bad = compare.report(perturbed, function(s) lines[#lines + 1] = s end)
    assert.are.equal(2, bad)
    local text = table.concat(lines)
    assert.truthy(text:match("\nexp +FLAGGED +1%.%d+e%-03 +float32"), text)
    assert.truthy(text:find("ops: 2 checked: 2 FLAGGED", 1, true), text)
  end)

  it("lets a perturbation within the tolerance pass", function()
    local r = compare.run_ops({device = "cpu", only = "^exp$", alter = function(_, dtype, outs)
      if dtype == "float32" then outs[1] = outs[1] * (1 + 1e-6) end
      return outs
    end})[1]
    assert.are.equal("ok", r.status)
    assert.is_true(r.error > 0 and r.error < compare.TOL.float32, tostring(r.error))
  end)

  it("an op failing on the device is FAILED when it has a kernel there, 'cpu only' when it has none", function()
    local calls = 0
    local cases = {exp = {dtypes = {"float32"}, run = function(I)
      calls = calls + 1
      if calls % 2 == 0 then error("exp: not supported on device cuda:0") end   -- the device's run
      return dle.exp(I.x({3}))
    end}}
    local op = {{name = "exp", kind = "unary"}}
    local failed = compare.run_ops({device = "cpu", ops = op, cases = cases, kernels = {exp = true}})[1]
    assert.are.equal("FAILED", failed.status)
    assert.truthy(failed.message:find("float32: .*not supported on device cuda:0"), failed.message)
    local cpu_only = compare.run_ops({device = "cpu", ops = op, cases = cases, kernels = {}})[1]
    assert.are.equal("cpu only", cpu_only.status)
    local none = compare.run_ops({device = "cpu", ops = {{name = "nothing", kind = "unary"}}, cases = cases})[1]
    assert.are.equal("no case", none.status)
  end)
end)

describe("gpu-check's normalized error", function()
  local function t(v, dtype) return dle.tensor(v, {dtype = dtype or "float64"}) end

  it("is max |got - want| / (max |want| + eps)", function()
    assert.are.equal(0, compare.normalized_error(t({1, 2}), t({1, 2})))
    assert.is_true(math.abs(compare.normalized_error(t({1, 2.5}), t({1, -2})) - 4.5 / 2) < 1e-9)
    assert.are.equal(0, compare.normalized_error(t({}), t({})))
  end)

  it("counts NaN against NaN and equal infinities as equal, NaN against a number as infinite", function()
    local inf = math.huge
    assert.are.equal(0, compare.normalized_error(t({0 / 0, inf, -inf, 1}), t({0 / 0, inf, -inf, 1})))
    assert.are.equal(math.huge, compare.normalized_error(t({0 / 0, 1}), t({2, 1})))
    assert.are.equal(math.huge, compare.normalized_error(t({inf, 1}), t({-inf, 1})))
  end)

  it("is infinite, with the reason, when dtypes or shapes differ", function()
    local e, why = compare.normalized_error(t({1, 2}, "float32"), t({1, 2}))
    assert.are.equal(math.huge, e)
    assert.are.equal("dtype float32, want float64", why)
    e, why = compare.normalized_error(t({{1, 2}}), t({1, 2}))
    assert.are.equal(math.huge, e)
    assert.are.equal("shape {1,2}, want {2}", why)
  end)

  it("compares integers and bools exactly", function()
    assert.is_true(compare.normalized_error(t({5, 7}, "int64"), t({5, 8}, "int64")) > compare.TOL.int64)
    local e, flagged = compare.compare({t({true, false}, "bool")}, {t({true, true}, "bool")})
    assert.is_true(math.abs(e - 1) < 1e-9, tostring(e))   -- one element off by 1, the largest being 1
    assert.is_true(flagged)
  end)
end)

describe("gpu-check's training steps, CPU against CPU", function()
  it("runs a step of every example's model and flags a perturbed loss", function()
    local results = examples.run({device = "cpu"})
    local names = {}
    for _, r in ipairs(results) do
      names[#names + 1] = r.name
      assert.truthy(r.status == "ok" or r.status == "skipped", r.name .. ": " .. tostring(r.message))
      assert.are.equal(0, r.error, r.name)
    end
    local all = table.concat(names, "\n")
    for _, ex in ipairs({"fashion_mnist/mlp.lua", "fashion_mnist/cnn.lua", "char_gpt/train.lua", "llm (gpt2",
                         "llm (llama", "fashion_mnist/ddp.lua"}) do
      assert.truthy(all:find(ex, 1, true), ex .. " missing from:\n" .. all)
    end
    local perturbed = examples.run({device = "cpu", alter = function(name, outs)
      if name == "char_gpt/train.lua" then outs[1] = outs[1] * 1.01 end
      return outs
    end})
    local lines = {}
    assert.are.equal(1, examples.report(perturbed, function(s) lines[#lines + 1] = s end))
    assert.truthy(table.concat(lines):match("char_gpt/train.lua +FLAGGED"), table.concat(lines))
  end)
end)

describe("gpu-check's benchmark", function()
  it("computes peaks from device properties (an A100: 19.5 TFLOP/s float32, 1555 GB/s)", function()
    local flops, bytes = bench.peaks({major = 8, minor = 0, sm_count = 108, clock_khz = 1410000,
                                      memory_clock_khz = 1215000, bus_width_bits = 5120})
    assert.is_true(math.abs(flops / 1e12 - 19.49) < 0.01, tostring(flops))
    assert.is_true(math.abs(bytes / 1e9 - 1555.2) < 0.1, tostring(bytes))
    assert.is_nil((bench.peaks({major = 1, minor = 0, sm_count = 1, clock_khz = 1, memory_clock_khz = 0,
                                bus_width_bits = 0})))
  end)

  it("measures matmul GFLOP/s and copy GB/s on a device, with MFU when the peak is known", function()
    local r = bench.run({device = "cpu", n = 64, copy_mb = 1, seconds = 0.01,
                         props = {major = 8, minor = 0, sm_count = 1, clock_khz = 1000, memory_clock_khz = 1000,
                                  bus_width_bits = 64}})
    assert.is_true(r.gflops > 0 and r.copy_gbs > 0)
    assert.is_true(math.abs(r.mfu - r.gflops / r.peak_gflops) < 1e-9)
    assert.truthy(r.lines[1]:match("^sgemm 64x64 float32: [%d.]+ GFLOP/s of a 0%.1 GFLOP/s float32 peak: MFU"),
                  r.lines[1])
  end)
end)

describe("dle.cuda_info", function()
  it("is built where nvcc is, and without a device reports 0 devices with the reason", function()
    local build = os.getenv("DLE_BUILD") or "build"
    if not H.exists(build .. "/lib/dle/libdle_cuda.so") then return pending("the CUDA library was not built") end
    assert.is_true(H.exists(build .. "/lib/dle/cuda_info.so"))
    if dle.cuda_available() then return pending("a GPU is present") end
    local info = require("dle.cuda_info")
    local n, why = info.count()
    assert.are.equal(0, n)
    assert.truthy(why:find("cudaGetDeviceCount", 1, true), why)
    H.assert_error(function() info.properties(0) end, "properties: ")
    H.assert_error(function() info.synchronize(0) end, "synchronize: ")
  end)
end)
