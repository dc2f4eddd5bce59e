--- MPI worker of tests/dist_spec.lua: ZeroRedundancyOptimizer(Adam) with DistributedDataParallel
-- across the ranks of `mpirun -np 2` against plain Adam in one process on the whole batch;
-- reports lines rank=<r> <key>=<values>.
local dle = require "dle"
local common = require "dist.common"
local dist, nn = dle.dist, dle.nn

local pg <close> = dist.init()
dle.set_num_threads(1)
local rank, world = dist.rank(), dist.world_size()
local function emit(k, v) common.emit(rank, k, v) end

local function make_model()
  dle.manual_seed(0)
  return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))
end
dle.manual_seed(100)
local X, Y = dle.randn(8, 5), dle.randint(1, 4, {8})
local B = 8 // world
local xr, yr = X:narrow(1, rank * B + 1, B), Y:narrow(1, rank * B + 1, B)
local loss_fn = nn.CrossEntropyLoss()
local opts = {lr = 0.05, betas = {0.8, 0.99}, weight_decay = 0.01}

-- plain Adam on the whole batch; the learning rate halves after step 3
local ref = make_model()
local ref_opt = dle.optim.Adam(ref:parameters(), opts)
local model = make_model()
local ddp = dist.DistributedDataParallel(model)
local zero = dle.optim.ZeroRedundancyOptimizer(dle.optim.Adam, ddp:parameters(), opts)
for step = 1, 6 do
  if step == 4 then ref_opt.lr = 0.025; zero.lr = 0.025 end
  local loss = loss_fn(ref(X), Y)
  ref_opt:zero_grad(); loss:backward(); ref_opt:step()
  loss = loss_fn(ddp(xr), yr)
  zero:zero_grad(); loss:backward(); zero:step()
end
local diff = 0
for i, p in ipairs(model:parameters()) do
  diff = math.max(diff, (p - ref:parameters()[i]):abs():max():item())
end
emit("zero_diff", diff)
local flat = {}
for _, p in ipairs(model:parameters()) do
  for _, v in ipairs(p:detach():contiguous():view(-1):totable()) do flat[#flat + 1] = v end
end
emit("zero_params", flat)
emit("owners", zero.owners)
emit("lr", zero.lr)

-- the state is this rank's shard: its own params' moments only, keyed by global index
local sd = zero:state_dict()
local keys = {}
for i in pairs(sd.state) do keys[#keys + 1] = i end
table.sort(keys)
emit("state_keys", keys)
emit("state_steps", sd.state[keys[1]].step)
-- a round trip restores it; another rank's shard is refused
zero:load_state_dict(sd)
local other = {world_size = sd.world_size, rank = 1 - rank, owners = sd.owners,
               param_groups = sd.param_groups, state = {}}
emit("wrong_rank", select(2, pcall(zero.load_state_dict, zero, other)))
emit("done", 1)
