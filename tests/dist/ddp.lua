--- MPI worker of tests/dist_spec.lua: DistributedDataParallel across the ranks of `mpirun -np 2`
-- against a single process training on the whole batch; reports lines rank=<r> <key>=<values>.
local dle = require("dle")
local common = require("dist.common")
local dist, nn = dle.dist, dle.nn

local pg <close>, rank, world, emit = common.start() -- luacheck: ignore 211 (pg: used by its <close>)

local make_model, max_diff, flat_params = common.mlp, common.max_diff, common.flat_params
-- the global batch, the same on every rank; rank r trains on rows r*B+1 .. (r+1)*B
local X, Y, xr, yr, B = common.batch(rank, world)
local loss_fn = nn.CrossEntropyLoss()

-- The single-process reference: `steps` SGD steps on the whole batch from rank 0's init.
local function reference(steps)
  local ref = make_model(0)
  local opt = dle.optim.SGD(ref:parameters(), {lr = 0.1, momentum = 0.9})
  for _ = 1, steps do
    local loss = loss_fn(ref(X), Y)
    opt:zero_grad(); loss:backward(); opt:step()
  end
  return ref
end

-- 1. each rank starts from its own init; construction broadcasts rank 0's
local model = make_model(rank)
local ddp = dist.DistributedDataParallel(model)
emit("init_diff", max_diff(model, make_model(0)))
emit("same_params", tostring(rawequal(ddp:parameters()[1], model:parameters()[1])))
emit("state_keys", (function()
  local k = {}
  for name in pairs(ddp:state_dict()) do k[#k + 1] = name end
  table.sort(k)
  return table.concat(k, " ")
end)())

-- 2. training written the PyTorch way matches the single process on the whole batch
local opt = dle.optim.SGD(ddp:parameters(), {lr = 0.1, momentum = 0.9})
for _ = 1, 5 do
  local loss = loss_fn(ddp(xr), yr)
  opt:zero_grad(); loss:backward(); opt:step()
end
emit("train_diff", max_diff(model, reference(5)))
emit("train_params", flat_params(model))

-- 3. gradient accumulation: 2 micro-batches per step, synchronised each time or with no_sync
for _, variant in ipairs({"accum", "no_sync"}) do
  local m = dist.DistributedDataParallel(make_model(rank))
  local o = dle.optim.SGD(m:parameters(), {lr = 0.1, momentum = 0.9})
  local half = B // 2
  for step = 1, 3 do
    o:zero_grad()
    for k = 0, 1 do
      local function micro()
        local loss = loss_fn(m(xr:narrow(1, k * half + 1, half)), yr:narrow(1, k * half + 1, half)) / 2
        loss:backward()
      end
      if variant == "no_sync" and k == 0 then
        m:no_sync(micro)
        -- not synchronised yet: each rank holds its own gradient
        if step == 1 then emit("local_grad", m:parameters()[1].grad) end
      else
        micro()
      end
    end
    if step == 1 then emit(variant .. "_grad", m:parameters()[1].grad) end
    o:step()
  end
  emit(variant .. "_diff", max_diff(m.module, reference(3)))
end

-- 4. unused parameters: b is used on rank 0 only, c nowhere
local Net = nn.Module:extend("Net")
function Net:init()
  self.a = nn.Linear(3, 1)
  self.b = nn.Linear(3, 1)
  self.c = nn.Linear(3, 1)
end
function Net:forward(x)
  local y = self.a(x)
  if rank == 0 then y = y + self.b(x) end
  return y
end
dle.manual_seed(5)
local net = Net()
local dnet = dist.DistributedDataParallel(net)
local xin = dle.ones(2, 3) * (rank + 1)
dnet(xin):sum():backward()
emit("unused_b_grad", net.b.weight.grad)
emit("unused_a_grad", net.a.weight.grad)
emit("unused_c_grad", tostring(net.c.weight.grad))

-- 5. buffers: rank 0's at construction and before each training forward
local Buf = nn.Module:extend("Buf")
function Buf:init()
  self.lin = nn.Linear(2, 2)
  self:register_buffer("count", dle.full({2}, rank + 1, {dtype = "int64"}))
end
function Buf:forward(x) return self.lin(x) end
local buf = Buf()
local dbuf = dist.DistributedDataParallel(buf)
emit("buffer_init", buf.count)
buf.count:fill_(rank + 7)
dbuf(dle.ones(1, 2))
emit("buffer_forward", buf.count)

-- 6. models that differ across ranks are refused on every rank
local ok, err = pcall(dist.DistributedDataParallel, nn.Linear(3, rank + 2))
emit("mismatch", ok and "accepted" or err)

-- A module of three Linear layers a (n_in -> n), b (n -> n), c (n -> n_out), b used on rank
-- b_rank only; and the largest difference between the .grad of models and the all_reduce mean of
-- each rank's own gradients (zeros for none) of a plain one.
local function three_layers(name, n_in, n, n_out, b_rank)
  local M = nn.Module:extend(name)
  function M:init() self.a = nn.Linear(n_in, n); self.b = nn.Linear(n, n); self.c = nn.Linear(n, n_out) end
  function M:forward(x)
    local h = self.a(x):tanh()
    if rank == b_rank then h = self.b(h):tanh() end
    return self.c(h)
  end
  return M
end
local function worst_vs_mean(cls, seed, x, models)
  dle.manual_seed(seed)
  local plain = cls()
  plain(x):sum():backward()
  local worst = 0
  for i, p in ipairs(plain:parameters()) do
    local g = dist.all_reduce(p.grad or dle.zeros_like(p), "mean")
    for _, m in ipairs(models) do worst = math.max(worst, (m:parameters()[i].grad - g):abs():max():item()) end
  end
  return worst
end

-- 7. buckets start during backward: one bucket per parameter (a 1-byte cap). Module b is used on
-- rank 0 only: its buckets start during backward there, after it on rank 1 (with zeros), and the
-- averages must still pair up; a's input needs no gradient, so its buckets start after backward.
local Deep = three_layers("Deep", 3, 4, 2, 0)
local xd = dle.ones(2, 3) * (rank + 1)
dle.manual_seed(6)
local deep = Deep()
local ddeep = dist.DistributedDataParallel(deep, {bucket_cap_mb = 1e-6, overlap = true})
ddeep(xd):sum():backward()
emit("overlap_early", ddeep._reducer.last_early)
-- the CPU default reduces every bucket after backward, to the same averages
dle.manual_seed(6)
local deep_late = Deep()
local dlate = dist.DistributedDataParallel(deep_late, {bucket_cap_mb = 1e-6})
dlate(xd):sum():backward()
emit("late_early", dlate._reducer.last_early)
emit("overlap_diff", worst_vs_mean(Deep, 6, xd, {deep, deep_late}))

-- 8. a parameter of 256 KB or more is reduced in place in its own .grad (the CPU default), also
-- when it has no gradient on one rank (b is used on rank 1 only)
local Big = three_layers("Big", 260, 260, 3, 1)
local xb = dle.randn(4, 260, {generator = dle.Generator(rank + 10)})
dle.manual_seed(8)
local big = Big()
local dbig = dist.DistributedDataParallel(big)
local alone = 0
for _, b in ipairs(dbig._reducer.plan) do if b.alone then alone = alone + 1 end end
emit("alone_buckets", alone)
emit("buckets", #dbig._reducer.plan)
for _ = 1, 2 do   -- twice: the second backward reuses the first one's buffers
  big:zero_grad()
  dbig(xb):sum():backward()
end
emit("alone_diff", worst_vs_mean(Big, 8, xb, {big}))

-- 9. a parameter alone in its bucket and used on no rank keeps .grad nil (its zeros are reduced,
-- then dropped), twice in a row
local Spare = nn.Module:extend("Spare")
function Spare:init() self.used = nn.Linear(3, 1); self.spare = nn.Linear(260, 260, {bias = false}) end
function Spare:forward(x) return self.used(x) end
local spare = Spare()
local dspare = dist.DistributedDataParallel(spare)
for _ = 1, 2 do
  spare:zero_grad()
  dspare(dle.ones(2, 3) * (rank + 1)):sum():backward()
end
emit("spare_grad", tostring(spare.spare.weight.grad))
emit("spare_used_grad", spare.used.weight.grad)
emit("done", 1)
