--- scripts/gpu-check's comparison of a device against a reference device (the GPU against the CPU;
-- the tests run it CPU against CPU): the normalized error of two results, the tolerance of each
-- dtype, running every op case of the op table on both devices, and the per-op report.
local dle = require("dle")
local inputs = require("gpu_check.inputs")

local M = {}

--- Flagged beyond: a few roundings of the dtype (reductions sum in another order on the GPU);
-- integer and bool results must be equal.
M.TOL = {float32 = 1e-4, float64 = 1e-10, float16 = 1e-2, bfloat16 = 5e-2, int32 = 0, int64 = 0, uint8 = 0,
         bool = 0}
M.EPS = 1e-12

--- M.normalized_error(got, want) -> max |got - want| / (max |want| + EPS) over the elements, in
-- float64 on the CPU (NaN where the other has NaN, and equal infinities, count as equal; a NaN
-- against a number is an infinite error); math.huge and the reason when dtypes or shapes differ.
function M.normalized_error(got, want)
  if got:dtype() ~= want:dtype() then return math.huge, "dtype " .. got:dtype() .. ", want " .. want:dtype() end
  local gs, ws = table.concat(got:shape(), ","), table.concat(want:shape(), ",")
  if gs ~= ws then return math.huge, "shape {" .. gs .. "}, want {" .. ws .. "}" end
  if want:numel() == 0 then return 0 end
  local a, b = got:cpu():double(), want:cpu():double()
  local same = a:eq(b):logical_or(a:isnan():logical_and(b:isnan()))
  local diff = dle.where(same, dle.zeros_like(a), (a - b):abs())
  diff = dle.where(diff:isnan(), dle.full_like(diff, math.huge), diff)
  local scale = dle.where(b:isfinite(), b:abs(), dle.zeros_like(b)):max():item()
  return diff:max():item() / (scale + M.EPS)
end

--- M.outputs(r) -> the list of tensors in a case's result (a tensor or a list of them).
function M.outputs(r)
  if type(r) ~= "table" then return {r} end
  return r
end

--- M.compare(got, want) -> the largest normalized error over the outputs and whether it is beyond
-- the tolerance of its output's dtype, with a message for the worst one.
function M.compare(got, want)
  got, want = M.outputs(got), M.outputs(want)
  if #got ~= #want then return math.huge, true, #got .. " outputs, want " .. #want end
  local worst, flagged, msg = 0, false, nil
  for i, w in ipairs(want) do
    local e, why = M.normalized_error(got[i], w)
    local over = e > (M.TOL[w:dtype()] or 0)
    if e > worst or not msg or (over and not flagged) then
      worst, msg = math.max(worst, e), why or ("output " .. i .. " (" .. w:dtype() .. ")")
    end
    flagged = flagged or over
  end
  return worst, flagged, msg
end

-- Runs a case on device in dtype, recording the ops it ran when profiled; ok, result (or error).
local function run_case(case, device, dtype, seed, ran)
  local I = inputs.new(device, dtype, seed)
  if not ran then return pcall(case.run, I) end
  local ok, prof = pcall(dle.profile, case.run, I)
  if not ok then return false, prof end
  for _, r in ipairs(prof:ops()) do ran[r.op] = true end
  return true, prof.results[1]
end

--- M.run_ops(opts) -> a list of per-op results, in the op table's order:
--   {op, kind, status = "ok" | "FLAGGED" | "FAILED" | "cpu only" | "no case", error (the largest
--    normalized error), dtype (where it was), dtypes (those run), message, ran (the set of ops the
--    cases ran on the device, from dle.profile)}
-- opts: device (checked), reference (default "cpu"), cases (default scripts/gpu_check/ops.lua's),
-- ops (default dle.core.op_table()), only (a Lua pattern of op names), seed, kernels (the set of op
-- names with a kernel on the device; nil: all), alter (function(op, dtype, outputs) -> outputs, applied
-- to the device's results: the tests' deliberate perturbation).
function M.run_ops(opts)
  local cases_mod = require("gpu_check.ops")
  local cases = opts.cases or cases_mod.cases
  local reference = opts.reference or "cpu"
  local results = {}
  for _, op in ipairs(opts.ops or dle.core.op_table()) do
    if not opts.only or op.name:match(opts.only) then
      local res = {op = op.name, kind = op.kind, error = 0, dtypes = {}, ran = {}, status = "ok"}
      local case = cases[op.name]
      if not case then
        res.status, res.message = "no case", "scripts/gpu_check/ops.lua has no case for this op"
      else
        for _, dt in ipairs(case.dtypes or cases_mod.default_dtypes(op.kind)) do
          local seed = (opts.seed or 1) + #results
          local okr, want = run_case(case, reference, dt, seed)
          if okr then   -- a dtype the reference rejects is not the op's
            res.dtypes[#res.dtypes + 1] = dt
            local okd, got = run_case(case, opts.device, dt, seed, res.ran)
            if not okd then
              local has_kernel = not opts.kernels or opts.kernels[op.name]
              if res.status ~= "FAILED" then
                res.status = has_kernel and "FAILED" or "cpu only"
                res.message = dt .. ": " .. tostring(got):gsub("\n.*", "")
              end
            else
              if opts.alter then got = opts.alter(op.name, dt, M.outputs(got)) end
              local e, flagged, msg = M.compare(got, want)
              if e >= res.error then res.error, res.dtype = e, dt end
              if flagged and res.status == "ok" then res.status, res.message = "FLAGGED", dt .. ": " .. msg end
            end
          end
        end
        if #res.dtypes == 0 then res.status, res.message = "FAILED", "the reference device rejected every dtype" end
        if res.status == "ok" and not res.ran[op.name] and opts.profile_check ~= false then
          res.status, res.message = "FAILED", "the case did not run the op (dle.profile)"
        end
      end
      results[#results + 1] = res
    end
  end
  return results
end

--- M.report(results, write) -> the number of ops flagged or failed; writes one line per op
-- (status, largest normalized error and its dtype, the dtypes run, a message) and a summary.
function M.report(results, write)
  write = write or io.write
  write(string.format("%-42s %-8s %11s  %-9s %s\n", "op", "status", "norm. error", "at", "dtypes / message"))
  local bad, counts = 0, {}
  for _, r in ipairs(results) do
    counts[r.status] = (counts[r.status] or 0) + 1
    if r.status == "FLAGGED" or r.status == "FAILED" or r.status == "no case" then bad = bad + 1 end
    local detail = r.message or (#r.dtypes .. " dtypes")
    write(string.format("%-42s %-8s %11.3e  %-9s %s\n", r.op, r.status, r.error, r.dtype or "-", detail))
  end
  local parts = {}
  for _, s in ipairs({"ok", "cpu only", "FLAGGED", "FAILED", "no case"}) do
    if counts[s] then parts[#parts + 1] = counts[s] .. " " .. s end
  end
  write(string.format("ops: %d checked: %s (tolerances: float32 %g, float64 %g, float16 %g, bfloat16 %g, "
                      .. "integers and bool exact)\n", #results, table.concat(parts, ", "), M.TOL.float32,
                      M.TOL.float64, M.TOL.float16, M.TOL.bfloat16))
  return bad
end

return M
