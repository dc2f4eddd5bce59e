--- bench/layer_norm_bandwidth.lua — layer_norm over the rows of a 4096 x 1024 float32 as memory
-- bandwidth: the fused op (forward; forward + backward of x, weight, bias), the composite of dle
-- ops it replaced, and c = a + b as the yardstick, in one process with interleaved repetitions
-- (best of `reps`, so a busy machine hurts less); then PyTorch at 1 and 2 threads when
-- /usr/bin/python3 has it. Bytes counted: a + b 48 MiB; forward 32 MiB (x in, y out); forward +
-- backward 112 MiB (forward 32; grad_input reads gy, x and writes gx: 48; grad_affine reads gy, x: 32).
--   scripts/dle bench/layer_norm_bandwidth.lua [threads=2] [reps=7]
local dle = require "dle"

local threads = math.tointeger(tonumber(arg and arg[1])) or 2
local reps = math.tointeger(tonumber(arg and arg[2])) or 7
local R, D = 4096, 1024
dle.set_num_threads(threads)

local x, w, b, a2, gy = dle.randn(R, D), dle.randn(D), dle.randn(D), dle.randn(R, D), dle.randn(R, D)
local xg, wg, bg = x:clone():requires_grad_(), w:clone():requires_grad_(), b:clone():requires_grad_()

-- the layer_norm of dle.nn.functional before the fused op
local function composite(x_, w_, b_)
  local mean = x_:mean(-1, true)
  local xc = x_ - mean
  local var = (xc * xc):mean(-1, true)
  return xc * (var + 1e-5):rsqrt() * w_ + b_
end

local cases = {
  {"c = a + b", 48, function() local _ = x + a2 end},
  {"fused forward", 32, function() local _ = dle.layer_norm(x, D, w, b) end},
  {"fused forward+backward", 112,
   function() dle.grad((dle.layer_norm(xg, D, wg, bg)), {xg, wg, bg}, {grad_outputs = gy}) end},
  {"composite forward", 32, function() local _ = composite(x, w, b) end},
  {"composite forward+backward", 112,
   function() dle.grad(composite(xg, wg, bg), {xg, wg, bg}, {grad_outputs = gy}) end},
}

local function report(name, mib, seconds, yardstick)
  local gbs = mib * 1048576 / seconds / 1e9
  print(string.format("  %-28s %8.2f ms  %6.1f GB/s  %5.2f x a+b", name, seconds * 1e3, gbs, gbs / yardstick))
  return gbs
end

local best = {}
for rep = 0, reps do            -- repetition 0 warms up
  for i, c in ipairs(cases) do
    local n, t0 = 5, dle.time()
    for _ = 1, n do c[3]() end
    local t = (dle.time() - t0) / n
    if rep > 0 then best[i] = math.min(best[i] or math.huge, t) end
  end
end
print(string.format("dle, %d thread(s), best of %d:", threads, reps))
local yard = cases[1][2] * 1048576 / best[1] / 1e9
for i, c in ipairs(cases) do report(c[1], c[2], best[i], yard) end

local py = io.open("/usr/bin/python3") and io.popen([[/usr/bin/python3 - <<'EOF' 2>&1
import time
try:
    import torch
except Exception as e:
    print("SKIP", e); raise SystemExit
R, D = 4096, 1024
x, w, b, a2, gy = torch.randn(R, D), torch.randn(D), torch.randn(D), torch.randn(R, D), torch.randn(R, D)
xg, wg, bg = x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()
F = torch.nn.functional
cases = [("c = a + b", lambda: x + a2),
         ("forward", lambda: F.layer_norm(x, (D,), w, b)),
         ("forward+backward", lambda: torch.autograd.grad(F.layer_norm(xg, (D,), wg, bg), (xg, wg, bg), gy))]
for th in (1, 2):
    torch.set_num_threads(th)
    best = [1e9] * len(cases)
    for rep in range(]] .. reps + 1 .. [[):
        for i, (_, f) in enumerate(cases):
            t0 = time.perf_counter()
            for _ in range(5): f()
            t = (time.perf_counter() - t0) / 5
            if rep: best[i] = min(best[i], t)
    for (name, _), t in zip(cases, best): print(th, name, t)
EOF]])
if not py then print("PyTorch: /usr/bin/python3 not found") return end
local out = py:read("a")
py:close()
if out:match("^SKIP") then print("PyTorch: not importable (" .. out:sub(6, -2) .. ")") return end
local mib = {["c = a + b"] = 48, forward = 32, ["forward+backward"] = 112}
local yards = {}
for th, name, t in out:gmatch("(%d) ([^\n]-) ([%d.e+-]+)\n") do
  if name == "c = a + b" then
    yards[th] = 48 * 1048576 / tonumber(t) / 1e9
    print(string.format("PyTorch, %d thread(s):", tonumber(th)))
  end
  report(name, mib[name], tonumber(t), yards[th])
end
