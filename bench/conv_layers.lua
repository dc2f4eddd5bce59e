--- bench/conv_layers.lua — the Fashion-MNIST CNN's conv layers, pools and one training step,
-- dle next to PyTorch (when /usr/bin/python3 has torch) with the same thread count.
-- Prints per-iteration wall and process CPU milliseconds (best of `reps`): on a shared machine
-- the CPU time of a 1-thread run is the figure least disturbed by other processes.
--   scripts/dle bench/conv_layers.lua [threads=1] [reps=8]
local dle = require "dle"

local threads = math.tointeger(tonumber(arg and arg[1])) or 1
local reps = math.tointeger(tonumber(arg and arg[2])) or 8
dle.set_num_threads(threads)
dle.manual_seed(0)

-- best wall and best CPU time of f over reps runs (after one warm-up), in ms
local function time(f)
  f()
  local wall, cpu = math.huge, math.huge
  for _ = 1, reps do
    local t0, c0 = dle.time(), os.clock()
    f()
    wall, cpu = math.min(wall, dle.time() - t0), math.min(cpu, os.clock() - c0)
  end
  return wall * 1000, cpu * 1000
end

local LAYERS = {{"conv1", 128, 1, 28, 32}, {"conv2", 128, 32, 14, 64}}

local function dle_side()
  local rows = {}
  for _, l in ipairs(LAYERS) do
    local name, n, c, h, o = table.unpack(l)
    local x = dle.randn({n, c, h, h}):requires_grad_(c > 1)
    local w, b = dle.randn({o, c, 3, 3}):requires_grad_(), dle.randn({o}):requires_grad_()
    local gy = dle.randn({n, o, h, h})
    local ins = c > 1 and {x, w, b} or {w, b}
    rows[#rows + 1] = {name .. " fwd", time(function() dle.no_grad(function() dle.conv2d(x, w, b, {padding = 1}) end) end)}
    rows[#rows + 1] = {name .. " fwd+bwd", time(function()
      dle.grad(dle.conv2d(x, w, b, {padding = 1}), ins, {grad_outputs = {gy}})
    end)}
    local y = dle.randn({n, o, h, h}):requires_grad_()
    rows[#rows + 1] = {name .. " maxpool fwd+bwd", time(function()
      local v = dle.nn.functional.max_pool2d(y, 2)
      dle.grad(v, {y}, {grad_outputs = {dle.ones_like(v)}})
    end)}
  end
  local nn = dle.nn
  local model = nn.Sequential(
    nn.Conv2d(1, 32, 3, {padding = 1}), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, {padding = 1}), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10))
  local opt = dle.optim.AdamW(model:parameters(), {lr = 1e-3, weight_decay = 1e-4})
  local loss_fn = nn.CrossEntropyLoss()
  local x, t = dle.randn({128, 1, 28, 28}), dle.randint(1, 11, {128})
  rows[#rows + 1] = {"CNN train step (batch 128)", time(function()
    local loss = loss_fn(model(x), t)
    opt:zero_grad()
    loss:backward()
    opt:step()
    loss:item()
  end)}
  return rows
end

local TORCH = [[
import sys, time, torch, torch.nn as nn, torch.nn.functional as F
torch.set_num_threads(%d); torch.manual_seed(0); reps = %d
def tm(f):
    f(); w = c = 1e9
    for _ in range(reps):
        t0, c0 = time.time(), time.process_time(); f()
        w, c = min(w, time.time() - t0), min(c, time.process_time() - c0)
    return w * 1000, c * 1000
for name, n, c, h, o in [("conv1", 128, 1, 28, 32), ("conv2", 128, 32, 14, 64)]:
    x = torch.randn(n, c, h, h, requires_grad=c > 1)
    w = torch.randn(o, c, 3, 3, requires_grad=True); b = torch.randn(o, requires_grad=True)
    gy = torch.randn(n, o, h, h); ins = [x, w, b] if c > 1 else [w, b]
    def fwd():
        with torch.no_grad(): F.conv2d(x, w, b, padding=1)
    print(name + " fwd", *tm(fwd))
    print(name + " fwd+bwd", *tm(lambda: torch.autograd.grad(F.conv2d(x, w, b, padding=1), ins, gy)))
    y = torch.randn(n, o, h, h, requires_grad=True)
    def pool():
        v = F.max_pool2d(y, 2); torch.autograd.grad(v, [y], torch.ones_like(v))
    print(name + " maxpool fwd+bwd", *tm(pool))
model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
x, t = torch.randn(128, 1, 28, 28), torch.randint(0, 10, (128,))
def step():
    loss = F.cross_entropy(model(x), t); opt.zero_grad(); loss.backward(); opt.step(); loss.item()
print("CNN train step (batch 128)", *tm(step))
]]

-- {name -> {wall, cpu}} from PyTorch, or nil when it is not installed
local function torch_side()
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(string.format(TORCH, threads, reps))
  f:close()
  local p = io.popen("/usr/bin/python3 " .. path .. " 2>/dev/null")
  local out = {}
  for line in p:lines() do
    local name, wall, cpu = line:match("^(.-) (%S+) (%S+)$")
    if name then out[name] = {tonumber(wall), tonumber(cpu)} end
  end
  p:close()
  os.remove(path)
  return next(out) and out or nil
end

local rows, ref = dle_side(), torch_side()
print(string.format("threads %d, best of %d; ms per iteration (wall / process CPU)%s", threads, reps,
                    ref and "" or "; PyTorch not found"))
print(string.format("%-28s %17s %17s %12s", "", "dle", "PyTorch", "ratio (cpu)"))
for _, r in ipairs(rows) do
  local name, wall, cpu = r[1], r[2], r[3]
  local t = ref and ref[name]
  print(string.format("%-28s %8.2f /%7.2f %17s %12s", name, wall, cpu,
                      t and string.format("%8.2f /%7.2f", t[1], t[2]) or "-",
                      t and string.format("%.2f", cpu / t[2]) or "-"))
end
