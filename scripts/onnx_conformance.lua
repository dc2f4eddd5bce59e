-- onnx_conformance.lua — the body of scripts/onnx-conformance (see there for the options):
-- runs the suites through dle.onnx.conformance, prints the per-op table and totals, writes the report.
local dle = require("dle")
local C = require("dle.onnx.conformance")

local here = arg[1]
local suites, filter, out = C.SUITES, nil, here .. "/docs/onnx.md"
local i = 2
while arg[i] do
  local a, v = arg[i], arg[i + 1]
  if a == "--suite" and v then suites = {v}
  elseif a == "--filter" and v then filter = v
  elseif a == "--out" and v then out = v
  else
    io.stderr:write("onnx-conformance: unknown or incomplete option '" .. a .. "'\n")
    os.exit(2)
  end
  i = i + 2
end
if filter and out == here .. "/docs/onnx.md" then out = nil end   -- partial runs leave the report alone
dle.set_num_threads(dle.get_num_threads())

local per_op, per_suite, problems = {}, {}, {}
local total = {pass = 0, fail = 0, skip = 0}
for _, suite in ipairs(suites) do
  local s = {pass = 0, fail = 0, skip = 0}
  per_suite[#per_suite + 1] = {suite, s}
  for _, name in ipairs(C.list(suite)) do
    if not filter or name:find(filter) then
      local r = C.run(C.ROOT .. "/" .. suite .. "/" .. name)
      s[r.status] = s[r.status] + 1
      total[r.status] = total[r.status] + 1
      if r.status ~= "pass" then problems[#problems + 1] = {suite, name, r.status, r.reason} end
      if suite == "node" then
        for _, op in ipairs(#r.ops > 0 and r.ops or {"(unparsed)"}) do
          local o = per_op[op] or {pass = 0, fail = 0, skip = 0}
          per_op[op] = o
          o[r.status] = o[r.status] + 1
        end
      end
    end
  end
end

local lines = {}
local function say(s) lines[#lines + 1] = s; print(s) end
local ops = {}
for op in pairs(per_op) do ops[#ops + 1] = op end
table.sort(ops)
local function n(t) return t.pass + t.fail + t.skip end
local function rate(t) return n(t) > 0 and ("%.1f%%"):format(100 * t.pass / n(t)) or "-" end
say("| op (node suite) | passed | failed | skipped |")
say("|---|---|---|---|")
for _, op in ipairs(ops) do
  local o = per_op[op]
  say(("| %s | %d | %d | %d |"):format(op, o.pass, o.fail, o.skip))
end
say("")
say("| suite | passed | failed | skipped | total | pass rate |")
say("|---|---|---|---|---|---|")
for _, e in ipairs(per_suite) do
  local s = e[2]
  say(("| %s | %d | %d | %d | %d | %s |"):format(e[1], s.pass, s.fail, s.skip, n(s), rate(s)))
end
say(("| **all** | %d | %d | %d | %d | %s |"):format(total.pass, total.fail, total.skip, n(total), rate(total)))

-- The export half of the page: dle.onnx.save, and the ops of dle's table it does not write with why.
local function export_section()
  local _, no = dle.onnx.exportable()
  local names = {}
  for name in pairs(no) do names[#names + 1] = name end
  table.sort(names)
  local rows = {}
  for _, name in ipairs(names) do rows[#rows + 1] = ("| %s | %s |\n"):format(name, no[name]) end
  return table.concat({
    "## Export (dle.onnx.save)\n\n",
    "`dle.onnx.save(path, fn_or_module, example_inputs, {opset, input_names, output_names, dynamic_axes})`\n",
    "traces with `dle.graph.trace` and writes a ModelProto through protobuf-c's generated packing code\n",
    "(`bindings/lua_onnx_save.c`; opsets 13 to 17, default 17): parameters and buffers as initializers\n",
    "named as in the module, each traced op as ONNX nodes (`lua/dle/onnx/export_ops.lua`), `dle.cond`,\n",
    "`dle.scan` and `dle.while_loop` as If, Scan and Loop with subgraphs, `dynamic_axes` (1-based dims)\n",
    "as dim_params. The file is written to a temporary name and renamed. All ops that cannot be written\n",
    "are listed in one error. `dle.onnx.exportable()` returns the ops that export and those that do not:\n\n",
    "| dle op | why it is not exported |\n|---|---|\n", table.concat(rows), "\n"})
end

if out then
  local f = assert(io.open(out, "w"))
  f:write("# ONNX import and export (dle.onnx) and its conformance\n\n",
          "`dle.onnx.load(path_or_bytes, {requires_grad})` returns an `nn.Module` running the ONNX graph with\n",
          "dle's public ops: `model(x, ...)` (graph-input order) or `model{name = x}`, `model.input_names`,\n",
          "`model.output_names`, `model.opset`; float initializers are its parameters (trainable, in\n",
          "`state_dict()` under their ONNX names). The file is decoded by protobuf-c (code generated at build\n",
          "time from libonnx-dev's `onnx.proto`) in `bindings/lua_onnx.c`; the op mapping is a table keyed by\n",
          "op_type in `lua/dle/onnx/ops_*.lua`. `dle.onnx.parse` gives the decoded tables, `dle.onnx.load_tensor`\n",
          "reads a serialized TensorProto. Unsupported ops are all listed in one error at load time.\n\n",
          "ONNX sequences are Lua lists of tensors (a sequence input is given as one, a sequence output\n",
          "comes back as one); an optional is its value, or nil when empty (`lua/dle/onnx/values.lua`).\n",
          "`dle.onnx.load_sequence` and `dle.onnx.load_optional` read a serialized SequenceProto or\n",
          "OptionalProto (`bindings/onnx_data.proto`). If and Loop run as dle.cond and dle.while_loop (one\n",
          "graph node each) unless they carry sequences or optionals or a Loop has scan outputs: those run\n",
          "as Lua control flow, reading the condition and trip count. Scan runs as dle.scan; opset 8's\n",
          "batched Scan (a batch dim and sequence_lens) as one dle.scan per batch row over its length.\n\n",
          export_section(),
          "## Ops dle cannot express yet\n\n",
          "These ONNX ops (default domain) need dle ops that do not exist (bitwise ops, FFT, region\n",
          "pooling, string ops, ...) or dtypes dle lacks; each should become a real dle\n",
          "op first: ", table.concat(dle.onnx.missing, ", "), ".\n\n",
          "## Conformance\n\n",
          "Written by `scripts/onnx-conformance`: ONNX 1.12's backend tests from Debian's `libonnx-testdata`\n",
          "(`", C.ROOT, "`), each model imported with `dle.onnx.load` and its outputs compared with\n",
          "rtol ", C.RTOL, ", atol ", C.ATOL, " (exact for integer and bool outputs). A test is *skipped* when\n",
          "it needs an op dle.onnx does not map or a data type dle does not have; it *fails* when it loads\n",
          "but errors or gives different outputs (sequences are compared element by element, an empty\n",
          "optional must come back as nil). Regenerate this file with `scripts/onnx-conformance`.\n\n",
          "## Totals\n\n")
  local start
  for k, l in ipairs(lines) do
    if l:find("^| suite") then start = k end
  end
  for k = start, #lines do f:write(lines[k], "\n") end
  -- the skip and failure reasons, grouped (the op or dtype named, else the reason itself)
  local groups, order = {}, {}
  for _, p in ipairs(problems) do
    local r = tostring(p[4])
    local key = r:match("unsupported ONNX ops at opset %d+: ([%w%.]+)") or r:match("(unsupported data type %u+%d*)")
                or r:match("^(random outputs)") or r:match("^(unsupported value type %a+)") or r
    key = (p[3] == "skip" and "" or "fail: ") .. key
    if not groups[key] then groups[key] = 0; order[#order + 1] = key end
    groups[key] = groups[key] + 1
  end
  table.sort(order, function(a, b) return groups[a] > groups[b] or groups[a] == groups[b] and a < b end)
  f:write("\n## Why tests do not pass (grouped)\n\n| reason (op, dtype, ...) | tests |\n|---|---|\n")
  for _, key in ipairs(order) do f:write(("| %s | %d |\n"):format(key:gsub("|", "\\|"), groups[key])) end
  f:write("\n## Failing and skipped tests\n\n| suite | test | status | reason |\n|---|---|---|---|\n")
  for _, p in ipairs(problems) do
    local reason = tostring(p[4]):gsub("|", "\\|"):gsub(C.ROOT .. "/", "")
    f:write(("| %s | %s | %s | %s |\n"):format(p[1], p[2], p[3], reason))
  end
  f:write("\n## Per op (node suite; a test counts under each op its graph uses)\n\n")
  for k = 1, start - 2 do f:write(lines[k], "\n") end
  f:close()
  print("wrote " .. out)
end
