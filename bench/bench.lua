--- bench/bench.lua — dle's benchmark harness (run it with scripts/bench).
-- Each benchmark is an entry of the list ENTRIES: a name, a unit, a dle side (a function
-- returning the loop body, so setup is not timed) and optionally a reference side (PyTorch: a
-- Python setup and body string, run by /usr/bin/python3 with torch.set_num_threads(N), N as
-- --threads).
-- Both sides are timed the same way: the iteration count is calibrated so that one repetition
-- lasts about `target` seconds, one warm-up repetition is thrown away, then `reps` repetitions
-- give per-iteration times whose median, min and max are reported. ratio = dle / reference
-- (below 1: dle is faster).
-- Usage: scripts/bench [--quick] [--json FILE] [--no-ref] [--filter PATTERN] [--threads N]
local dle = require "dle"

-- Inputs of the nn-op entries: logits {4096, 1000} and 1-based targets; q, k, v and an output
-- weight {32, 4, 128, 32} (the char-GPT example's batch, heads, context and head size).
local function ce_inputs()
  local g = dle.Generator(1)
  return dle.randn(4096, 1000, {generator = g}):requires_grad_(), dle.randint(1, 1001, {4096}, {generator = g})
end
local function attention_inputs()
  local g = dle.Generator(2)
  local function r() return dle.randn(32, 4, 128, 32, {generator = g}) end
  return r():requires_grad_(), r():requires_grad_(), r():requires_grad_(), r()
end

local ENTRIES = {
  {
    key = "autograd_tiny",
    name = "autograd tiny graph: y = x*w + x; y:sum():backward()",
    unit = "us",
    dle = function()
      local x = dle.ones(1):requires_grad_()
      local w = dle.full({1}, 2):requires_grad_()
      return function()
        local y = x * w + x
        local s = y:sum()
        s:backward()
      end
    end,
    torch = {
      setup = "x = torch.ones(1, requires_grad=True)\nw = torch.full((1,), 2.0, requires_grad=True)",
      body = "y = x * w + x\ns = y.sum()\ns.backward()",
    },
  },
  {
    key = "add_1elem",
    name = "c = a + b, 1-element float32",
    unit = "us",
    dle = function()
      local a, b = dle.ones(1), dle.ones(1)
      return function() local _ = a + b end
    end,
    torch = {
      setup = "a = torch.ones(1)\nb = torch.ones(1)",
      body = "c = a + b",
    },
  },
  -- Normalization over rows of a 4096 x 1024 float32 (16 MiB per tensor). Bandwidth yardstick:
  -- a + b moves 48 MiB; layer_norm forward 32 MiB (x in, y out); forward + backward 112 MiB
  -- (forward 32; grad_input reads gy and x, writes gx: 48; grad_affine reads gy and x: 32).
  {
    key = "add_4m",
    name = "c = a + b, 4096 x 1024 float32 (48 MiB moved)",
    unit = "us",
    dle = function()
      local a, b = dle.randn(4096, 1024), dle.randn(4096, 1024)
      return function() local _ = a + b end
    end,
    torch = {setup = "a = torch.randn(4096, 1024)\nb = torch.randn(4096, 1024)", body = "c = a + b"},
  },
  {
    key = "layer_norm_fwd",
    name = "layer_norm forward, 4096 x 1024 float32 with weight and bias (32 MiB)",
    unit = "us",
    dle = function()
      local x, w, b = dle.randn(4096, 1024), dle.randn(1024), dle.randn(1024)
      return function() local _ = dle.layer_norm(x, 1024, w, b) end
    end,
    torch = {
      setup = "x = torch.randn(4096, 1024)\nw = torch.randn(1024)\nb = torch.randn(1024)",
      body = "y = torch.nn.functional.layer_norm(x, (1024,), w, b)",
    },
  },
  {
    key = "layer_norm_fwd_bwd",
    name = "layer_norm forward + backward (x, weight, bias), 4096 x 1024 float32",
    unit = "us",
    dle = function()
      local x = dle.randn(4096, 1024):requires_grad_()
      local w, b = dle.randn(1024):requires_grad_(), dle.randn(1024):requires_grad_()
      local gy = dle.randn(4096, 1024)
      return function()
        local y = dle.layer_norm(x, 1024, w, b)
        dle.grad(y, {x, w, b}, {grad_outputs = gy})
      end
    end,
    torch = {
      setup = "x = torch.randn(4096, 1024, requires_grad=True)\nw = torch.randn(1024, requires_grad=True)\n"
        .. "b = torch.randn(1024, requires_grad=True)\ngy = torch.randn(4096, 1024)",
      body = "y = torch.nn.functional.layer_norm(x, (1024,), w, b)\ntorch.autograd.grad(y, (x, w, b), gy)",
    },
  },
  -- The fused nn ops against the composites dle.nn used before them (still expressible with dle ops):
  -- softmax cross-entropy {4096, 1000} and causal attention at the char-GPT example's shapes
  -- (batch 32, 4 heads, 128 tokens, head size 32), forward + backward, float32.
  {
    key = "cross_entropy_fused",
    name = "cross_entropy fwd+bwd {4096,1000} f32, fused op",
    unit = "us",
    dle = function()
      local x, t = ce_inputs()
      return function()
        dle.nn.functional.cross_entropy(x, t):backward()
        x.grad = nil
      end
    end,
    torch = {
      setup = "x = torch.randn(4096, 1000, requires_grad=True)\nt = torch.randint(0, 1000, (4096,))",
      body = "torch.nn.functional.cross_entropy(x, t).backward()\nx.grad = None",
    },
  },
  {
    key = "cross_entropy_composite",
    name = "cross_entropy fwd+bwd {4096,1000} f32, composite (log_softmax, gather, mean)",
    unit = "us",
    dle = function()
      local x, t = ce_inputs()
      return function()
        (-x:log_softmax(2):gather(2, t:unsqueeze(2))):mean():backward()
        x.grad = nil
      end
    end,
  },
  {
    key = "sdpa_fused",
    name = "causal sdpa fwd+bwd {32,4,128,32} f32, fused op",
    unit = "us",
    dle = function()
      local q, k, v, w = attention_inputs()
      return function()
        local o = dle.nn.functional.scaled_dot_product_attention(q, k, v, {causal = true})
        local l = (o * w):sum()
        l:backward()
        q.grad, k.grad, v.grad = nil, nil, nil
      end
    end,
    torch = {
      setup = "q, k, v = (torch.randn(32, 4, 128, 32, requires_grad=True) for _ in range(3))\n"
        .. "w = torch.randn(32, 4, 128, 32)\nF = torch.nn.functional",
      body = "o = F.scaled_dot_product_attention(q, k, v, is_causal=True) if hasattr(F, 'scaled_dot_product_attention') "
        .. "else ((q @ k.transpose(-2, -1) / 32 ** 0.5).masked_fill(torch.ones(128, 128, dtype=torch.bool).triu(1), "
        .. "float('-inf')).softmax(-1) @ v)\n(o * w).sum().backward()\nq.grad = k.grad = v.grad = None",
    },
  },
  {
    key = "sdpa_composite",
    name = "causal sdpa fwd+bwd {32,4,128,32} f32, composite (matmul, masked_fill, softmax, matmul)",
    unit = "us",
    dle = function()
      local q, k, v, w = attention_inputs()
      local mask = dle.ones(128, 128, {dtype = "bool"}):triu(1)
      return function()
        local s = (q * (1 / math.sqrt(32))):matmul(k:transpose(-2, -1)):masked_fill(mask, -math.huge)
        local l = (s:softmax(-1):matmul(v) * w):sum()
        l:backward()
        q.grad, k.grad, v.grad = nil, nil, nil
      end
    end,
  },
}

-- ---------------------------------------------------------------- options

local opts = {quick = false, json = nil, ref = true, filter = nil, threads = 1}
do
  local i = 1
  while i <= #arg do
    local a = arg[i]
    if a == "--quick" then opts.quick = true
    elseif a == "--json" then i = i + 1; opts.json = arg[i] or error("--json needs a file name")
    elseif a == "--no-ref" then opts.ref = false
    elseif a == "--filter" then i = i + 1; opts.filter = arg[i] or error("--filter needs a pattern")
    elseif a == "--threads" then i = i + 1; opts.threads = math.tointeger(tonumber(arg[i])) or error("--threads needs a number")
    elseif a == "-h" or a == "--help" then
      print("usage: scripts/bench [--quick] [--json FILE] [--no-ref] [--filter PATTERN] [--threads N]")
      os.exit(0)
    else
      io.stderr:write("bench: unknown option " .. a .. "\n")
      os.exit(2)
    end
    i = i + 1
  end
end
local target = opts.quick and 0.02 or 0.1    -- seconds per repetition
local reps = opts.quick and 5 or 9

local selected = {}
for _, e in ipairs(ENTRIES) do
  if not opts.filter or e.key:find(opts.filter) or e.name:find(opts.filter, 1, true) then
    selected[#selected + 1] = e
  end
end

-- ---------------------------------------------------------------- timing

local function stats(v)
  table.sort(v)
  local n = #v
  local med = n % 2 == 1 and v[(n + 1) // 2] or (v[n // 2] + v[n // 2 + 1]) / 2
  return {median = med, min = v[1], max = v[n], reps = n}
end

local function time_dle(e)
  local body = e.dle()
  local clock = dle.time
  local function run(n)
    local t0 = clock()
    for _ = 1, n do body() end
    return clock() - t0
  end
  run(3)                  -- first calls (lazy initialisation) are not representative
  local n = 1
  while true do           -- calibrate (this also warms up)
    local t = run(n)
    if t >= target / 4 then n = math.max(1, math.ceil(n * target / t)); break end
    n = n * 4
  end
  run(n)                  -- warm-up repetition
  local per = {}
  for r = 1, reps do per[r] = run(n) / n * 1e6 end
  local s = stats(per)
  s.iters = n
  return s
end

-- A Python string literal.
local function pystr(s)
  return '"' .. s:gsub('[\\"\n]', {["\\"] = "\\\\", ['"'] = '\\"', ["\n"] = "\\n"}) .. '"'
end

-- One Python process times every reference side; it prints "key median min max iters" lines.
local function time_torch(entries)
  local py = {
    "import sys, time",
    "try:\n    import torch\nexcept Exception as ex:\n    print('NOTORCH', ex)\n    sys.exit(0)",
    string.format("torch.set_num_threads(%d)", opts.threads),
    "print('VERSION', torch.__version__)",
    string.format("TARGET, REPS = %.6g, %d", target, reps),
    [[
def bench(key, setup, body):
    env = {'torch': torch}
    exec(setup, env)
    code = compile("for _ in range(_n):\n" + "\n".join("    " + l for l in body.split("\n")), key, "exec")
    def run(n):
        env['_n'] = n
        t0 = time.perf_counter()
        exec(code, env)
        return time.perf_counter() - t0
    run(3)
    n = 1
    while True:
        t = run(n)
        if t >= TARGET / 4:
            n = max(1, int(n * TARGET / t + 0.999))
            break
        n *= 4
    run(n)
    per = sorted(run(n) / n * 1e6 for _ in range(REPS))
    m = len(per)
    med = per[m // 2] if m % 2 else (per[m // 2 - 1] + per[m // 2]) / 2
    print(key, med, per[0], per[-1], n, flush=True)
]],
  }
  for _, e in ipairs(entries) do
    if e.torch then
      py[#py + 1] = string.format("bench(%s, %s, %s)", pystr(e.key), pystr(e.torch.setup), pystr(e.torch.body))
    end
  end
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(table.concat(py, "\n"), "\n")
  f:close()
  local p = io.popen("/usr/bin/python3 " .. path .. " 2>&1")
  local out = p:read("a")
  p:close()
  os.remove(path)
  local res, note = {}, nil
  for line in out:gmatch("[^\n]+") do
    local key, med, mn, mx, it = line:match("^(%S+) (%S+) (%S+) (%S+) (%d+)$")
    if key and tonumber(med) then
      res[key] = {median = tonumber(med), min = tonumber(mn), max = tonumber(mx), reps = reps,
                  iters = tonumber(it)}
    elseif line:match("^NOTORCH") then
      note = "PyTorch not importable by /usr/bin/python3 (" .. line:sub(9) .. "): reference skipped"
    elseif line:match("^VERSION") then
      res.version = line:sub(9)
    end
  end
  if not note and not res.version then
    note = "the PyTorch reference failed: " .. out:sub(1, 300)
  end
  return res, note
end

-- ---------------------------------------------------------------- run and report

dle.core.set_num_threads(opts.threads)
local results = {}
for _, e in ipairs(selected) do
  results[#results + 1] = {entry = e, dle = time_dle(e)}
end

local ref, note = {}, nil
local have_python = io.open("/usr/bin/python3", "r")
if have_python then have_python:close() end
if not opts.ref then
  note = "reference skipped (--no-ref)"
elseif not have_python then
  note = "/usr/bin/python3 not found: reference skipped"
else
  ref, note = time_torch(selected)
end
for _, r in ipairs(results) do
  r.ref = ref[r.entry.key]
  if r.ref then r.ratio = r.dle.median / r.ref.median end
end

local function fmt(s, unit)
  if not s then return "-" end
  return string.format("%.2f %s [%.2f..%.2f]", s.median, unit, s.min, s.max)
end

local rows = {{"figure", "dle (median [min..max])", "reference (PyTorch)", "ratio dle/ref"}}
for _, r in ipairs(results) do
  rows[#rows + 1] = {r.entry.name, fmt(r.dle, r.entry.unit), fmt(r.ref, r.entry.unit),
                     r.ratio and string.format("%.2f", r.ratio) or "-"}
end
local width = {}
for _, row in ipairs(rows) do
  for c, cell in ipairs(row) do width[c] = math.max(width[c] or 0, #cell) end
end
print(string.format("# dle %s, %s mode, %d repetitions after warm-up, %d thread(s)%s", dle.version,
                    opts.quick and "quick" or "full", reps, opts.threads,
                    ref.version and (", PyTorch " .. ref.version .. " (same threads)") or ""))
for i, row in ipairs(rows) do
  local cells = {}
  for c, cell in ipairs(row) do
    cells[c] = c == 1 and cell .. string.rep(" ", width[c] - #cell) or string.rep(" ", width[c] - #cell) .. cell
  end
  print(table.concat(cells, " | "))
  if i == 1 then
    local dash = {}
    for c = 1, #row do dash[c] = string.rep("-", width[c]) end
    print(table.concat(dash, "-|-"))
  end
end
if note then print("# note: " .. note) end

-- ---------------------------------------------------------------- JSON

local function json(v)
  local t = type(v)
  if t == "table" then
    if #v > 0 or next(v) == nil then
      local parts = {}
      for i, x in ipairs(v) do parts[i] = json(x) end
      return "[" .. table.concat(parts, ",") .. "]"
    end
    local keys, parts = {}, {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do parts[#parts + 1] = string.format("%q:%s", k, json(v[k])) end
    return "{" .. table.concat(parts, ",") .. "}"
  elseif t == "string" then
    return '"' .. v:gsub('[%c"\\]', function(c)
      return string.format("\\u%04x", c:byte())
    end) .. '"'
  elseif t == "number" then
    return (v ~= v or v == math.huge or v == -math.huge) and "null" or string.format("%.6g", v)
  elseif t == "boolean" then
    return tostring(v)
  end
  return "null"
end

if opts.json then
  local out = {dle_version = dle.version, mode = opts.quick and "quick" or "full", reps = reps,
               threads = opts.threads, reference = ref.version and ("pytorch " .. ref.version) or false,
               note = note or false, results = {}}
  for _, r in ipairs(results) do
    out.results[#out.results + 1] = {key = r.entry.key, name = r.entry.name, unit = r.entry.unit,
                                     dle = r.dle, reference = r.ref or false, ratio = r.ratio or false}
  end
  local f = assert(io.open(opts.json, "w"))
  f:write(json(out), "\n")
  f:close()
  print("# wrote " .. opts.json)
end
